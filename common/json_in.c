/* SPDX-License-Identifier: MIT */
/* Request JSON parsing with json-c: the one place its tokener errors become ours. */
#include "json.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "utf8.h"

/* Decoded strings can still be invalid: "\ud800" escapes a lone surrogate. */
static bool strings_valid(json_object *o)
{
	switch (json_object_get_type(o)) {
	case json_type_string:
		return utf8_valid(json_object_get_string(o), (size_t)json_object_get_string_len(o));
	case json_type_array:
		for (size_t i = 0; i < json_object_array_length(o); i++)
			if (!strings_valid(json_object_array_get_idx(o, i)))
				return false;
		return true;
	case json_type_object: {
		json_object_object_foreach(o, key, val) {
			if (!utf8_valid(key, strlen(key)) || !strings_valid(val))
				return false;
		}
		return true;
	}
	default: return true;
	}
}

static bool only_space(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n')
			return false;
	return true;
}

/*
 * What json-c lets through even in strict mode: single-quoted strings, and
 * NUL bytes (which end its input early). Neither is JSON. Returns the offending
 * offset, or -1.
 */
static long lexically_odd(const char *s, size_t len)
{
	bool in_string = false;

	for (size_t i = 0; i < len; i++) {
		if (s[i] == '\0')
			return (long)i;
		if (in_string) {
			if (s[i] == '\\')
				i++;
			else if (s[i] == '"')
				in_string = false;
		} else if (s[i] == '"') {
			in_string = true;
		} else if (s[i] == '\'') {
			return (long)i;
		}
	}
	return -1;
}

/*
 * json-c keeps object keys as C strings: a key holding an escaped NUL ("a\u0000b") is cut
 * there, and may then stand for another key (the last of two equal keys wins), so that one
 * reader of the body sees one field and paddock another. Returns the offset of the first
 * such key, or -1.
 */
static long nul_in_key(const char *s, size_t len)
{
	bool in_string = false, has_nul = false;
	size_t start = 0;

	for (size_t i = 0; i < len; i++) {
		if (!in_string) {
			if (s[i] == '"') {
				in_string = true;
				has_nul = false;
				start = i;
			}
			continue;
		}
		if (s[i] == '\\') {
			if (len - i > 5 && memcmp(s + i + 1, "u0000", 5) == 0)
				has_nul = true;
			i++;
		} else if (s[i] == '"') {
			size_t j = i + 1;

			in_string = false;
			while (j < len &&
			       (s[j] == ' ' || s[j] == '\t' || s[j] == '\r' || s[j] == '\n'))
				j++;
			if (has_nul && j < len && s[j] == ':')
				return (long)start;
		}
	}
	return -1;
}

/* Each thread's tokeners, one per depth asked for (a program asks for two or three). */
#define TOKENERS_KEPT 4

typedef struct Tokeners {
	int depth[TOKENERS_KEPT];
	struct json_tokener *tok[TOKENERS_KEPT];
} Tokeners;

static pthread_key_t tokeners_key;
static pthread_once_t tokeners_once = PTHREAD_ONCE_INIT;

static void tokeners_free(void *p)
{
	Tokeners *t = p;

	for (size_t i = 0; i < TOKENERS_KEPT; i++)
		if (t->tok[i])
			json_tokener_free(t->tok[i]);
	free(t);
}

static void tokeners_key_make(void)
{
	(void)pthread_key_create(&tokeners_key, tokeners_free);
}

static Tokeners *thread_tokeners(void)
{
	Tokeners *t;

	if (pthread_once(&tokeners_once, tokeners_key_make) != 0)
		return NULL;
	t = pthread_getspecific(tokeners_key);
	if (!t) {
		t = calloc(1, sizeof(*t));
		if (t && pthread_setspecific(tokeners_key, t) != 0) {
			free(t);
			t = NULL;
		}
	}
	return t;
}

struct json_tokener *json_in_tokener(int max_depth)
{
	Tokeners *t = thread_tokeners();
	size_t i;

	if (!t)
		return NULL;
	for (i = 0; i < TOKENERS_KEPT && t->tok[i]; i++) {
		if (t->depth[i] == max_depth) {
			json_tokener_reset(t->tok[i]);
			json_tokener_set_flags(t->tok[i], 0);
			return t->tok[i];
		}
	}
	if (i == TOKENERS_KEPT) {
		i = TOKENERS_KEPT - 1; /* more depths than kept: the last slot takes turns */
		json_tokener_free(t->tok[i]);
	}
	t->tok[i] = json_tokener_new_ex(max_depth);
	t->depth[i] = max_depth;
	return t->tok[i];
}

static json_object *parse_whole(const char *buf, size_t len, int max_depth, int flags)
{
	struct json_tokener *tok = json_in_tokener(max_depth);
	json_object *o;

	if (!tok || len > INT32_MAX)
		return NULL;
	json_tokener_set_flags(tok, flags);
	o = json_tokener_parse_ex(tok, buf, (int)len);
	if (json_tokener_get_error(tok) != json_tokener_success) {
		json_object_put(o);
		return NULL;
	}
	return o;
}

json_object *json_in_parse_quick(const char *buf, size_t len, int max_depth)
{
	return parse_whole(buf, len, max_depth, 0);
}

json_object *json_in_parse_sandboxed(const char *buf, size_t len, int max_depth)
{
	return parse_whole(buf, len, max_depth, JSON_TOKENER_VALIDATE_UTF8);
}

int json_in_parse(const char *buf, size_t len, int max_depth, json_object **ret, char *err,
		  size_t errlen)
{
	_cleanup_json_ json_object *o = NULL;
	struct json_tokener *tok;
	enum json_tokener_error jerr;
	size_t used;
	long odd;

	*ret = NULL;
	if (len > INT32_MAX) {
		snprintf(err, errlen, "the body is too large");
		return -EINVAL;
	}
	if (!utf8_valid(buf, len)) {
		snprintf(err, errlen, "the body is not valid UTF-8");
		return -EINVAL;
	}
	odd = lexically_odd(buf, len);
	if (odd >= 0) {
		snprintf(err, errlen,
			 "the body is not valid JSON: unexpected character at byte %ld", odd);
		return -EINVAL;
	}
	odd = nul_in_key(buf, len);
	if (odd >= 0) {
		snprintf(err, errlen, "an object key at byte %ld holds a NUL character", odd);
		return -EINVAL;
	}
	/* json-c's depth is the number of nested arrays and objects it accepts. */
	tok = json_in_tokener(max_depth);
	if (!tok)
		return -ENOMEM;
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
	o = json_tokener_parse_ex(tok, buf, (int)len);
	jerr = json_tokener_get_error(tok);
	used = tok->char_offset > 0 ? (size_t)tok->char_offset : 0;
	if (jerr == json_tokener_continue && len > 0) {
		/* A bare number at the end of input waits for a delimiter: give it one. */
		o = json_tokener_parse_ex(tok, " ", 1);
		jerr = json_tokener_get_error(tok);
		used = len;
	}
	if (jerr == json_tokener_continue) {
		snprintf(err, errlen, "the JSON body ends too early");
		return -EINVAL;
	}
	if (jerr == json_tokener_error_depth) {
		snprintf(err, errlen, "the JSON body is nested deeper than %d levels", max_depth);
		return -EINVAL;
	}
	if (jerr != json_tokener_success) {
		snprintf(err, errlen, "the body is not valid JSON: %s at byte %zu",
			 json_tokener_error_desc(jerr), used);
		return -EINVAL;
	}
	if (used < len && !only_space(buf + used, len - used)) {
		snprintf(err, errlen, "the body is not valid JSON: unexpected data at byte %zu",
			 used);
		return -EINVAL;
	}
	if (!strings_valid(o)) {
		snprintf(err, errlen, "a string in the body is not valid UTF-8");
		return -EINVAL;
	}
	*ret = TAKE_PTR(o);
	return 0;
}

static int field(json_object *obj, const char *key, json_object **v)
{
	if (!obj || !json_object_is_type(obj, json_type_object))
		return 0;
	if (!json_object_object_get_ex(obj, key, v) || !*v)
		return 0; /* absent, or null */
	return 1;
}

int json_in_string(json_object *obj, const char *key, const char **ret, size_t *len)
{
	json_object *v;

	if (!field(obj, key, &v))
		return 0;
	if (!json_object_is_type(v, json_type_string))
		return -EINVAL;
	*ret = json_object_get_string(v);
	if (len)
		*len = (size_t)json_object_get_string_len(v);
	/* Read as a C string, one with a NUL inside would say less than it holds: it is not
	 * the string the caller expects. */
	else if (strlen(*ret) != (size_t)json_object_get_string_len(v))
		return -EINVAL;
	return 1;
}

int json_in_int(json_object *obj, const char *key, int64_t *ret)
{
	json_object *v;
	double d;

	if (!field(obj, key, &v))
		return 0;
	if (json_object_is_type(v, json_type_int)) {
		/* json-c saturates out-of-range literals and says so in errno. */
		errno = 0;
		*ret = json_object_get_int64(v);
		if ((*ret == INT64_MAX || *ret == INT64_MIN) && errno == ERANGE)
			return -ERANGE;
		if (json_object_get_int64(v) == INT64_MAX && json_object_get_uint64(v) > INT64_MAX)
			return -ERANGE;
		return 1;
	}
	if (!json_object_is_type(v, json_type_double))
		return -EINVAL;
	d = json_object_get_double(v);
	/* Written this way round so NaN and infinities fail too. */
	if (!(d >= -9.2e18 && d <= 9.2e18))
		return -ERANGE;
	if ((double)(int64_t)d != d)
		return -EINVAL;
	*ret = (int64_t)d;
	return 1;
}

int json_in_bool(json_object *obj, const char *key, bool *ret)
{
	json_object *v;

	if (!field(obj, key, &v))
		return 0;
	if (!json_object_is_type(v, json_type_boolean))
		return -EINVAL;
	*ret = json_object_get_boolean(v);
	return 1;
}

int json_in_number(json_object *obj, const char *key, double *ret)
{
	json_object *v;

	if (!field(obj, key, &v))
		return 0;
	if (!json_object_is_type(v, json_type_double) && !json_object_is_type(v, json_type_int))
		return -EINVAL;
	*ret = json_object_get_double(v);
	return 1;
}

int json_in_object(json_object *obj, const char *key, json_object **ret)
{
	json_object *v;

	if (!field(obj, key, &v))
		return 0;
	if (!json_object_is_type(v, json_type_object))
		return -EINVAL;
	*ret = v;
	return 1;
}
