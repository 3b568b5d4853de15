/* SPDX-License-Identifier: MIT */
/* Fuzz target: the worker's request JSON decoder (json_in_parse) and its typed getters. */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "json.h"
#include "utf8.h"

#define DEPTH 32 /* json_max_depth's default */

/* Field names the handlers look up, so the getters meet every type under them. */
static const char *const keys[] = { "tool",
				    "input",
				    "code",
				    "command",
				    "path",
				    "timeout_seconds",
				    "tool_use_id",
				    "idle_timeout_seconds",
				    "max_lifetime_seconds",
				    "file_text",
				    "view_range",
				    "" };

static void getters(json_object *obj, int level)
{
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		const char *s = NULL;
		size_t len = 0;
		int64_t v;
		json_object *o = NULL;
		int r;

		r = json_in_string(obj, keys[i], &s, &len);
		FUZZ_ASSERT(r == 0 || r == 1 || r == -EINVAL);
		if (r == 1) {
			FUZZ_ASSERT(s && s[len] == '\0');
			/* json_in_parse promised valid UTF-8 in every decoded string. */
			FUZZ_ASSERT(utf8_valid(s, len));
		}
		r = json_in_int(obj, keys[i], &v);
		FUZZ_ASSERT(r == 0 || r == 1 || r == -EINVAL || r == -ERANGE);
		r = json_in_object(obj, keys[i], &o);
		FUZZ_ASSERT(r == 0 || r == 1 || r == -EINVAL);
		if (r == 1) {
			FUZZ_ASSERT(json_object_is_type(o, json_type_object));
			if (level < 3)
				getters(o, level + 1);
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	_cleanup_json_ json_object *o = NULL, *again = NULL;
	const char *text;
	size_t tlen;
	char err[256];
	int r;

	err[0] = '\0';
	r = json_in_parse((const char *)data, size, DEPTH, &o, err, sizeof(err));
	FUZZ_ASSERT(r == 0 || r == -EINVAL || r == -ENOMEM);
	if (r < 0) {
		FUZZ_ASSERT(!o);
		FUZZ_ASSERT(r == -ENOMEM || (err[0] && strlen(err) < sizeof(err)));
		/* Error sentences go into JSON answers: they must be UTF-8 themselves. */
		FUZZ_ASSERT(utf8_valid(err, strlen(err)));
		return 0;
	}
	/* Accepted: the bytes were UTF-8 without NUL (json-c would stop at one). */
	FUZZ_ASSERT(utf8_valid((const char *)data, size));
	FUZZ_ASSERT(!memchr(data, '\0', size));
	getters(o, 0);

	/* What json-c writes back out is accepted again, under the same depth. */
	text = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN, &tlen);
	FUZZ_ASSERT(text);
	r = json_in_parse(text, tlen, DEPTH, &again, err, sizeof(err));
	if (r != 0)
		fprintf(stderr, "re-parse failed: %s\n", err);
	FUZZ_ASSERT(r == 0);
	FUZZ_ASSERT(json_object_get_type(again) == json_object_get_type(o));
	return 0;
}
