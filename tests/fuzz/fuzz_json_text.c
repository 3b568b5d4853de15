/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: the scanner the worker relays sessiond's replies with (json_scan_object),
 * against json-c. What the scanner accepts json-c parses to an object, and every span it
 * finds is the text of that object's member. Any object json-c accepts, once json-c has
 * rendered it as sessiond renders its replies, the scanner accepts, with the same members.
 * (json-c alone also takes leading zeros and raw control characters in strings, which
 * JSON and the scanner refuse.)
 */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "json.h"

#define DEPTH 32

/* Keys the worker looks up, and a few that fuzzed objects are likely to hold. */
static const char *const keys[] = {
	"ok", "stdout", "stderr", "return_code", "execution_time_ms", "usage", "files", "a", "", "k"
};
#define N_KEYS (sizeof(keys) / sizeof(keys[0]))

/* The member values of obj under keys, as json-c holds them (the last of a repeated key). */
static void check_spans(json_object *obj, const JsonSpan *spans)
{
	for (size_t i = 0; i < N_KEYS; i++) {
		json_object *member = NULL, *again;
		char *wrapped;
		bool has = json_object_object_get_ex(obj, keys[i], &member);

		if (!spans[i].text) {
			FUZZ_ASSERT(!has);
			continue;
		}
		FUZZ_ASSERT(has);
		/* The span is one JSON value, equal to the member (read inside an array, as a
		 * bare number would wait for a delimiter). */
		wrapped = malloc(spans[i].len + 2);
		FUZZ_ASSERT(wrapped && spans[i].len < INT32_MAX);
		wrapped[0] = '[';
		memcpy(wrapped + 1, spans[i].text, spans[i].len);
		wrapped[spans[i].len + 1] = ']';
		again = json_tokener_parse_ex(json_in_tokener(DEPTH + 2), wrapped,
					      (int)spans[i].len + 2);
		free(wrapped);
		FUZZ_ASSERT(json_object_is_type(again, json_type_array));
		FUZZ_ASSERT(json_object_array_length(again) == 1);
		FUZZ_ASSERT(json_object_equal(json_object_array_get_idx(again, 0), member));
		json_object_put(again);
	}
}

/* Whether o holds a number with a fraction or exponent: json-c renders those as they were
 * written, which need not be JSON ("1."); sessiond's replies to a call hold none. */
static bool has_double(json_object *o)
{
	switch (json_object_get_type(o)) {
	case json_type_double: return true;
	case json_type_array:
		for (size_t i = 0; i < json_object_array_length(o); i++)
			if (has_double(json_object_array_get_idx(o, i)))
				return true;
		return false;
	case json_type_object: {
		json_object_object_foreach(o, key, val) {
			(void)key;
			if (has_double(val))
				return true;
		}
		return false;
	}
	default: return false;
	}
}

/* What json-c renders, as sessiond renders its replies, the scanner accepts, and finds the
 * members json-c holds. */
static void check_rendering(json_object *obj)
{
	JsonSpan spans[N_KEYS];
	size_t len;
	const char *text = json_object_to_json_string_length(
		obj, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &len);

	FUZZ_ASSERT(text);
	FUZZ_ASSERT(json_scan_object(text, len, DEPTH + 1, keys, spans, N_KEYS) == 0);
	/* json-c renders keys as they are: one that needed \u escapes is left out. */
	if (!memmem(text, len, "\\u", 2))
		check_spans(obj, spans);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	_cleanup_json_ json_object *strict = NULL, *loose = NULL;
	JsonSpan spans[N_KEYS];
	const char *text = (const char *)data;
	char err[256];
	int r;

	r = json_scan_object(text, size, DEPTH, keys, spans, N_KEYS);
	FUZZ_ASSERT(r == 0 || r == -EINVAL);
	for (size_t i = 0; r == 0 && i < N_KEYS; i++)
		FUZZ_ASSERT(!spans[i].text || (spans[i].text >= text && spans[i].len > 0 &&
					       spans[i].text + spans[i].len <= text + size));

	if (json_in_parse(text, size, DEPTH, &strict, err, sizeof(err)) == 0 &&
	    json_object_is_type(strict, json_type_object) && !has_double(strict))
		check_rendering(strict);
	if (r != 0)
		return 0;

	/* Accepted: json-c reads the same text as an object with the same members. A NUL
	 * inside a string ends json-c's key comparison, so such texts are left out. */
	if (memchr(text, '\0', size) || size > INT32_MAX)
		return 0;
	loose = json_tokener_parse_ex(json_in_tokener(DEPTH + 1), text, (int)size);
	FUZZ_ASSERT(json_object_is_type(loose, json_type_object));
	/* A key written with \u escapes is one the scanner does not match, by design. */
	if (!memmem(text, size, "\\u", 2))
		check_spans(loose, spans);
	return 0;
}
