/* SPDX-License-Identifier: MIT */
/* JSON in and out, for every program: values parsed under size and depth limits with UTF-8
 * checks and typed field getters; objects built with checked, ownership-taking setters. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "utf8.h"

#include "cleanup.h"

/* Drop a reference and clear the pointer, so a cleanup that runs later does nothing. */
static inline void json_putp(json_object **o)
{
	if (*o) {
		json_object_put(*o);
		*o = NULL;
	}
}
#define _cleanup_json_ _cleanup_(json_putp)

/* ---- in (json_in.c) ---- */

/*
 * Parse one JSON value from buf. Strict syntax; nothing but whitespace after it;
 * the raw bytes and every decoded string must be valid UTF-8; nesting of arrays
 * and objects at most max_depth levels. Returns 0 and *ret (owned), or -EINVAL
 * with a sentence in err (json-c's reason, or ours), -ENOMEM.
 */
int json_in_parse(const char *buf, size_t len, int max_depth, json_object **ret, char *err,
		  size_t errlen);
/*
 * A tokener for at most max_depth levels, reset and in default mode, which the calling
 * thread keeps for its next parse: a new tokener's stack is an allocation large enough
 * that malloc consolidates its free lists for it, on every request. Valid until the same
 * thread asks again for this depth; never freed by the caller. NULL when out of memory.
 */
struct json_tokener *json_in_tokener(int max_depth);
/* Parse a whole buffer with json_in_tokener(max_depth): the value, or NULL when it is not
 * one complete JSON text (any error; trailing bytes are not looked at). */
json_object *json_in_parse_quick(const char *buf, size_t len, int max_depth);
/*
 * json_in_parse_quick() for what sandboxed code may have written (a harness's reply, its
 * events): bytes that are not UTF-8 are refused too, so none reach a client. json-c
 * already decodes an escaped lone surrogate as U+FFFD.
 */
json_object *json_in_parse_sandboxed(const char *buf, size_t len, int max_depth);

/*
 * Typed getters on an object's field. Each returns 1 when the field holds a value
 * of the type, 0 when it is absent or null, -EINVAL when it holds another type.
 * Values are borrowed from obj. A string read without its length (len NULL) is a C
 * string: one holding a NUL character is -EINVAL.
 */
int json_in_string(json_object *obj, const char *key, const char **ret, size_t *len);
/* Integers, and numbers with no fractional part; -ERANGE outside int64. */
int json_in_int(json_object *obj, const char *key, int64_t *ret);
int json_in_bool(json_object *obj, const char *key, bool *ret);
/* Any number, integer or not. */
int json_in_number(json_object *obj, const char *key, double *ret);
int json_in_object(json_object *obj, const char *key, json_object **ret);

/* ---- out (json_out.c) ---- */

/*
 * Checked sets: json_set() puts val at obj[key], json_append() at the end of the array
 * arr, taking val (also on failure). When one fails (val or obj NULL: out of memory),
 * -ENOMEM, and obj is marked incomplete, as is every object it is set in afterwards: a
 * caller that does not check each set checks the whole once (json_incomplete).
 */
int json_set(json_object *obj, const char *key, json_object *val);
int json_append(json_object *arr, json_object *val);
/* obj[key] = null: json-c's null is a NULL value, which json_set() takes for a failure. */
int json_set_null(json_object *obj, const char *key);
/* obj[key] = s as a string, or null when s is NULL. */
int json_set_string_or_null(json_object *obj, const char *key, const char *s);
/* Whether a set on o (or on what it holds) failed, or o is NULL. */
bool json_incomplete(json_object *o);

/* Copy obj[key] from src into dst when present (a new reference); 0 when absent. */
int json_copy_field(json_object *dst, json_object *src, const char *key);

/* Render compactly; the string belongs to obj. NULL on allocation failure. */
const char *json_render(json_object *obj, size_t *len);

/* ---- as text (json_text.c) ---- */

/* Where a value lies in a JSON text: len bytes from text; text is NULL for no value. */
typedef struct JsonSpan {
	const char *text;
	size_t len;
} JsonSpan;

/*
 * Check that text[0..len) is one JSON object in strict syntax, nested at most max_depth
 * levels, and find the values of its members named keys[0..n): spans[i] for keys[i] (the
 * last one when a key repeats; no value when absent). Keys are matched as written, so an
 * escaped key matches nothing. Strings are not checked for UTF-8. 0, or -EINVAL.
 */
int json_scan_object(const char *text, size_t len, int max_depth, const char *const *keys,
		     JsonSpan *spans, size_t n);
/* Whether the span holds a value whose text begins with first ('"', '{', '[', ...). */
bool json_span_is(const JsonSpan *sp, char first);
/* An integer written without fraction or exponent: 1 and *ret; 0 when the span holds
 * anything else; -ERANGE outside int64. */
int json_span_int(const JsonSpan *sp, int64_t *ret);

/* Text built by appending; failed once an allocation failed (then buf is not whole). */
typedef struct JsonText {
	char *buf; /* NUL-terminated once anything was added */
	size_t len, cap;
	bool failed;
} JsonText;

void json_text_add(JsonText *t, const char *s, size_t len);
void json_text_add_str(JsonText *t, const char *s);
void json_text_add_span(JsonText *t, const JsonSpan *sp);
void json_text_add_int(JsonText *t, int64_t v);
void json_text_add_bool(JsonText *t, bool v);
/* ,"key": -- a member after the first, its value to follow. */
void json_text_add_key(JsonText *t, const char *key);
/* s as a JSON string, escaped as json_render() escapes it. */
void json_text_add_quoted(JsonText *t, const char *s);
/* The same for len bytes, NULs included (as \u0000). */
void json_text_add_quoted_len(JsonText *t, const char *s, size_t len);
/*
 * A json-c value (NULL: null), the same bytes as json_render() makes of it, without its
 * printbuf and formatted numbers: json-c's own rendering remains for doubles only. But a
 * NaN or an infinity, which json-c writes as NaN or Infinity and JSON cannot hold, is
 * written as null (a harness's json.dumps writes them, and json-c reads them back).
 */
void json_text_add_value(JsonText *t, json_object *v);
void json_text_clear(JsonText *t);
