/* SPDX-License-Identifier: MIT */
/*
 * JSON handled as text: the members of an object found in its text without building it,
 * and text built by appending. A reply whose values go out as they came is relayed this
 * way rather than parsed into objects and rendered again, which is most of what a call
 * costs a program in between.
 */
#include "json.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Where a scan is in the text, and how deep it may still go. */
typedef struct Scan {
	const char *p, *end;
	int depth_left;
} Scan;

static void skip_space(Scan *s)
{
	while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
		s->p++;
}

static bool at(const Scan *s, char c)
{
	return s->p < s->end && *s->p == c;
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool is_hex(char c)
{
	return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* A string, from its opening quote to past its closing one. */
static int scan_string(Scan *s)
{
	s->p++;
	while (s->p < s->end) {
		unsigned char c = (unsigned char)*s->p++;

		if (c == '"')
			return 0;
		if (c < 0x20)
			return -EINVAL;
		if (c != '\\')
			continue;
		if (s->p >= s->end)
			return -EINVAL;
		c = (unsigned char)*s->p++;
		if (c == 'u') {
			for (int i = 0; i < 4; i++, s->p++)
				if (s->p >= s->end || !is_hex(*s->p))
					return -EINVAL;
		} else if (!c || !strchr("\"\\/bfnrt", c)) {
			return -EINVAL;
		}
	}
	return -EINVAL;
}

static int scan_digits(Scan *s)
{
	const char *from = s->p;

	while (s->p < s->end && is_digit(*s->p))
		s->p++;
	return s->p > from ? 0 : -EINVAL;
}

/* -? (0 | [1-9][0-9]*) (.[0-9]+)? ([eE][+-]?[0-9]+)? */
static int scan_number(Scan *s)
{
	if (at(s, '-'))
		s->p++;
	if (at(s, '0'))
		s->p++;
	else if (scan_digits(s) < 0)
		return -EINVAL;
	if (at(s, '.')) {
		s->p++;
		if (scan_digits(s) < 0)
			return -EINVAL;
	}
	if (at(s, 'e') || at(s, 'E')) {
		s->p++;
		if (at(s, '+') || at(s, '-'))
			s->p++;
		if (scan_digits(s) < 0)
			return -EINVAL;
	}
	return 0;
}

static int scan_word(Scan *s, const char *word)
{
	size_t n = strlen(word);

	if ((size_t)(s->end - s->p) < n || memcmp(s->p, word, n) != 0)
		return -EINVAL;
	s->p += n;
	return 0;
}

static int scan_value(Scan *s);

/* Past the opening bracket of an object or array, one level deeper: 1 when close follows
 * at once (the level is over), 0 when an element follows, -EINVAL too deep. */
static int scan_open(Scan *s, char close)
{
	if (s->depth_left-- <= 0)
		return -EINVAL;
	s->p++;
	skip_space(s);
	if (!at(s, close))
		return 0;
	s->p++;
	s->depth_left++;
	return 1;
}

/* After an element: 1 past the closing bracket (the level is over), 0 past a comma with
 * another element to come, -EINVAL for anything else. */
static int scan_next(Scan *s, char close)
{
	skip_space(s);
	if (at(s, close)) {
		s->p++;
		s->depth_left++;
		return 1;
	}
	if (!at(s, ','))
		return -EINVAL;
	s->p++;
	skip_space(s);
	return 0;
}

/* One member of an object: its key, and its value, which goes to spans when keys name it. */
static int scan_member(Scan *s, const char *const *keys, JsonSpan *spans, size_t n)
{
	const char *key, *v;
	size_t key_len;

	if (!at(s, '"'))
		return -EINVAL;
	key = s->p + 1;
	if (scan_string(s) < 0)
		return -EINVAL;
	key_len = (size_t)(s->p - 1 - key);
	skip_space(s);
	if (!at(s, ':'))
		return -EINVAL;
	s->p++;
	skip_space(s);
	v = s->p;
	if (scan_value(s) < 0)
		return -EINVAL;
	/* A repeated key: the last one counts, as it does for json-c. */
	for (size_t i = 0; i < n; i++)
		if (strlen(keys[i]) == key_len && memcmp(keys[i], key, key_len) == 0)
			spans[i] = (JsonSpan){ v, (size_t)(s->p - v) };
	return 0;
}

/* The members of the object at s->p; the values of those named in keys go to spans. */
static int scan_object(Scan *s, const char *const *keys, JsonSpan *spans, size_t n)
{
	int r = scan_open(s, '}');

	while (r == 0) {
		if (scan_member(s, keys, spans, n) < 0)
			return -EINVAL;
		r = scan_next(s, '}');
	}
	return r < 0 ? r : 0;
}

static int scan_array(Scan *s)
{
	int r = scan_open(s, ']');

	while (r == 0) {
		if (scan_value(s) < 0)
			return -EINVAL;
		r = scan_next(s, ']');
	}
	return r < 0 ? r : 0;
}

static int scan_value(Scan *s)
{
	if (s->p >= s->end)
		return -EINVAL;
	switch (*s->p) {
	case '{': return scan_object(s, NULL, NULL, 0);
	case '[': return scan_array(s);
	case '"': return scan_string(s);
	case 't': return scan_word(s, "true");
	case 'f': return scan_word(s, "false");
	case 'n': return scan_word(s, "null");
	default: return scan_number(s);
	}
}

int json_scan_object(const char *text, size_t len, int max_depth, const char *const *keys,
		     JsonSpan *spans, size_t n)
{
	Scan s = { .p = text, .end = text + len, .depth_left = max_depth };

	for (size_t i = 0; i < n; i++)
		spans[i] = (JsonSpan){ NULL, 0 };
	skip_space(&s);
	if (!at(&s, '{') || scan_object(&s, keys, spans, n) < 0)
		return -EINVAL;
	skip_space(&s);
	return s.p == s.end ? 0 : -EINVAL;
}

bool json_span_is(const JsonSpan *sp, char first)
{
	return sp->text && sp->len > 0 && sp->text[0] == first;
}

int json_span_int(const JsonSpan *sp, int64_t *ret)
{
	const char *p = sp->text, *end = sp->text + sp->len;
	bool neg = false;
	uint64_t v = 0;

	if (!p || p == end)
		return 0;
	if (*p == '-') {
		neg = true;
		p++;
	}
	if (p == end)
		return 0;
	for (; p < end; p++) {
		if (!is_digit(*p))
			return 0; /* a fraction or an exponent: not an integer as written */
		if (v > (UINT64_MAX - 9) / 10)
			return -ERANGE;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	if (v > (uint64_t)INT64_MAX + neg)
		return -ERANGE;
	*ret = neg ? (int64_t)(0 - v) : (int64_t)v;
	return 1;
}

/* ---- building text ---- */

static void text_reserve(JsonText *t, size_t more)
{
	size_t cap;
	char *grown;

	if (t->failed || t->cap - t->len > more)
		return;
	cap = t->cap ? t->cap : 256;
	while (cap - t->len <= more) {
		if (cap > SIZE_MAX / 2) {
			t->failed = true;
			return;
		}
		cap *= 2;
	}
	grown = realloc(t->buf, cap);
	if (!grown) {
		t->failed = true;
		return;
	}
	t->buf = grown;
	t->cap = cap;
}

void json_text_add(JsonText *t, const char *s, size_t len)
{
	text_reserve(t, len);
	if (t->failed)
		return;
	memcpy(t->buf + t->len, s, len);
	t->len += len;
	t->buf[t->len] = '\0';
}

void json_text_add_str(JsonText *t, const char *s)
{
	json_text_add(t, s, strlen(s));
}

void json_text_add_span(JsonText *t, const JsonSpan *sp)
{
	json_text_add(t, sp->text, sp->len);
}

/* The digits of u, after a minus sign when negative. */
static void add_digits(JsonText *t, uint64_t u, bool negative)
{
	char d[24], *p = d + sizeof(d);

	do
		*--p = (char)('0' + u % 10);
	while ((u /= 10) != 0);
	if (negative)
		*--p = '-';
	json_text_add(t, p, (size_t)(d + sizeof(d) - p));
}

void json_text_add_int(JsonText *t, int64_t v)
{
	add_digits(t, v < 0 ? 0 - (uint64_t)v : (uint64_t)v, v < 0);
}

void json_text_add_bool(JsonText *t, bool v)
{
	if (v)
		json_text_add(t, "true", 4);
	else
		json_text_add(t, "false", 5);
}

void json_text_add_key(JsonText *t, const char *key)
{
	json_text_add(t, ",\"", 2);
	json_text_add_str(t, key);
	json_text_add(t, "\":", 2);
}

/* As json-c renders a string (without escaping '/'): quotes, backslashes and control
 * characters escaped, everything else as it is. */
void json_text_add_quoted(JsonText *t, const char *s)
{
	json_text_add_quoted_len(t, s, strlen(s));
}

void json_text_add_quoted_len(JsonText *t, const char *s, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	const char *run = s, *end = s + len;

	json_text_add(t, "\"", 1);
	for (; s < end; s++) {
		unsigned char c = (unsigned char)*s;
		char esc[6];
		size_t n = 2;

		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		json_text_add(t, run, (size_t)(s - run));
		run = s + 1;
		esc[0] = '\\';
		switch (c) {
		case '"': esc[1] = '"'; break;
		case '\\': esc[1] = '\\'; break;
		case '\n': esc[1] = 'n'; break;
		case '\r': esc[1] = 'r'; break;
		case '\t': esc[1] = 't'; break;
		case '\b': esc[1] = 'b'; break;
		case '\f': esc[1] = 'f'; break;
		default:
			memcpy(esc + 1, "u00", 3);
			esc[4] = hex[c >> 4];
			esc[5] = hex[c & 15];
			n = 6;
		}
		json_text_add(t, esc, n);
	}
	json_text_add(t, run, (size_t)(s - run));
	json_text_add(t, "\"", 1);
}

/* json-c keeps integers above INT64_MAX unsigned, and its int64 getter clamps them there. */
static void add_int_value(JsonText *t, json_object *v)
{
	int64_t i = json_object_get_int64(v);

	if (i == INT64_MAX)
		add_digits(t, json_object_get_uint64(v), false);
	else
		json_text_add_int(t, i);
}

static void add_object(JsonText *t, json_object *o)
{
	const char *sep = "{";

	json_object_object_foreach(o, key, val) {
		json_text_add_str(t, sep);
		json_text_add_quoted(t, key);
		json_text_add(t, ":", 1);
		json_text_add_value(t, val);
		sep = ",";
	}
	json_text_add_str(t, *sep == '{' ? "{}" : "}");
}

static void add_array(JsonText *t, json_object *a)
{
	size_t n = json_object_array_length(a);

	json_text_add(t, "[", 1);
	for (size_t i = 0; i < n; i++) {
		if (i)
			json_text_add(t, ",", 1);
		json_text_add_value(t, json_object_array_get_idx(a, i));
	}
	json_text_add(t, "]", 1);
}

/* What json-c alone knows how to write: doubles, as it formats them. */
static void add_rendered(JsonText *t, json_object *v)
{
	size_t len;
	const char *s = json_render(v, &len);

	if (s)
		json_text_add(t, s, len);
	else
		t->failed = true;
}

void json_text_add_value(JsonText *t, json_object *v)
{
	switch (json_object_get_type(v)) {
	case json_type_null: json_text_add(t, "null", 4); break;
	case json_type_boolean: json_text_add_bool(t, json_object_get_boolean(v)); break;
	case json_type_int: add_int_value(t, v); break;
	case json_type_string:
		json_text_add_quoted_len(t, json_object_get_string(v),
					 (size_t)json_object_get_string_len(v));
		break;
	case json_type_object: add_object(t, v); break;
	case json_type_array: add_array(t, v); break;
	case json_type_double:
		if (!isfinite(json_object_get_double(v))) {
			json_text_add(t, "null", 4);
			break;
		}
		add_rendered(t, v);
		break;
	default: add_rendered(t, v);
	}
}

void json_text_clear(JsonText *t)
{
	free(t->buf);
	*t = (JsonText){ .buf = NULL };
}
