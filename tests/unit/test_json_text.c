/* SPDX-License-Identifier: MIT */
/* Unit tests for JSON as text: finding an object's members without parsing it into
 * objects, and building text that json-c would render the same. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

#include "unit.h"

static int scan(const char *text, int depth)
{
	return json_scan_object(text, strlen(text), depth, NULL, NULL, 0);
}

static void test_scan_accepts_json_objects_and_nothing_else(void)
{
	static const char *const good[] = {
		"{}",
		" { } ",
		"{\"a\":1}",
		"{\"a\":-0.5e+10,\"b\":[1,2,{\"c\":null}],\"d\":true,\"e\":false}",
		"{\"s\":\"tab\\t quote\\\" slash\\/ u\\u00e9 \\ud83d\\ude00\"}",
		"{\"a\" : [ ] , \"b\" : { } }\n",
		"{\"\":0}",
		"{\"n\":0,\"m\":-0,\"k\":12.25E-3}",
	};
	static const char *const bad[] = {
		"",
		"[]",
		"1",
		"\"s\"",
		"{",
		"{\"a\"}",
		"{\"a\":}",
		"{\"a\":1,}",
		"{\"a\":1}}",
		"{\"a\":1} x",
		"{'a':1}",
		"{a:1}",
		"{\"a\":01}",
		"{\"a\":1.}",
		"{\"a\":.5}",
		"{\"a\":1e}",
		"{\"a\":+1}",
		"{\"a\":tru}",
		"{\"a\":nul}",
		"{\"a\":[1,]}",
		"{\"a\":[1 2]}",
		"{\"a\":\"\\x\"}",
		"{\"a\":\"\\u12\"}",
		"{\"a\":\"\\u12g4\"}",
		"{\"a\":\"raw\ttab\"}",
		"{\"a\":\"unterminated}",
		"{\"a\":1 \"b\":2}",
	};

	for (size_t i = 0; i < ARRAY_SIZE(good); i++) {
		CHECK_EQ_INT(scan(good[i], 32), 0);
		if (scan(good[i], 32) != 0)
			fprintf(stderr, "  refused: %s\n", good[i]);
	}
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		CHECK_EQ_INT(scan(bad[i], 32), -EINVAL);
		if (scan(bad[i], 32) != -EINVAL)
			fprintf(stderr, "  accepted: %s\n", bad[i]);
	}
	/* A NUL inside is not the end of the text. */
	CHECK_EQ_INT(json_scan_object("{\"a\":1}\0", 8, 32, NULL, NULL, 0), -EINVAL);
	CHECK_EQ_INT(json_scan_object("{\"a\":\"\0\"}", 8, 32, NULL, NULL, 0), -EINVAL);
}

static void test_scan_stops_at_its_depth(void)
{
	CHECK_EQ_INT(scan("{\"a\":{\"b\":[1]}}", 3), 0);
	CHECK_EQ_INT(scan("{\"a\":{\"b\":[1]}}", 2), -EINVAL);
	CHECK_EQ_INT(scan("{\"a\":[],\"b\":{},\"c\":[{}]}", 3), 0);
	CHECK_EQ_INT(scan("{}", 1), 0);
	CHECK_EQ_INT(scan("{}", 0), -EINVAL);
	{
		/* Deep nesting fails rather than recursing without end. */
		size_t n = 100000;
		char *deep = malloc(2 * n + 16);

		if (deep) {
			strcpy(deep, "{\"a\":");
			memset(deep + 5, '[', n);
			memset(deep + 5 + n, ']', n);
			strcpy(deep + 5 + 2 * n, "}");
			CHECK_EQ_INT(scan(deep, 64), -EINVAL);
			free(deep);
		}
	}
}

static bool span_is_text(const JsonSpan *sp, const char *want)
{
	return sp->text && sp->len == strlen(want) && memcmp(sp->text, want, sp->len) == 0;
}

static void test_scan_finds_top_level_members_as_written(void)
{
	static const char *const keys[] = { "stdout", "usage", "rc", "missing", "files" };
	const char *text =
		"{\"ok\":true,\"stdout\":\"a\\nb\\\"\",\"nested\":{\"rc\":9,\"stdout\":1},"
		"\"usage\":{\"cpu_ms\":3, \"x\":[1,2]},\"rc\":-12,\"files\":[],"
		"\"rc\":7}";
	JsonSpan v[ARRAY_SIZE(keys)];

	CHECK_EQ_INT(json_scan_object(text, strlen(text), 32, keys, v, ARRAY_SIZE(keys)), 0);
	CHECK(span_is_text(&v[0], "\"a\\nb\\\"\""));
	CHECK(span_is_text(&v[1], "{\"cpu_ms\":3, \"x\":[1,2]}"));
	CHECK(span_is_text(&v[2], "7")); /* the last of a repeated key, never a nested one */
	CHECK(v[3].text == NULL);
	CHECK(span_is_text(&v[4], "[]"));
	CHECK(json_span_is(&v[0], '"'));
	CHECK(json_span_is(&v[1], '{'));
	CHECK(!json_span_is(&v[3], '"'));

	/* An escaped key is matched as written, so it names no key given in plain text. */
	text = "{\"std\\u006fut\":\"x\"}";
	CHECK_EQ_INT(json_scan_object(text, strlen(text), 32, keys, v, 1), 0);
	CHECK(v[0].text == NULL);
}

static int span_int(const char *s, int64_t *v)
{
	JsonSpan sp = { s, strlen(s) };

	return json_span_int(&sp, v);
}

static void test_span_int_takes_integers_only(void)
{
	int64_t v = 0;

	CHECK_EQ_INT(span_int("0", &v), 1);
	CHECK_EQ_INT(v, 0);
	CHECK_EQ_INT(span_int("-42", &v), 1);
	CHECK_EQ_INT(v, -42);
	CHECK_EQ_INT(span_int("9223372036854775807", &v), 1);
	CHECK(v == INT64_MAX);
	CHECK_EQ_INT(span_int("-9223372036854775808", &v), 1);
	CHECK(v == INT64_MIN);
	CHECK_EQ_INT(span_int("9223372036854775808", &v), -ERANGE);
	CHECK_EQ_INT(span_int("99999999999999999999999", &v), -ERANGE);
	CHECK_EQ_INT(span_int("1.5", &v), 0);
	CHECK_EQ_INT(span_int("1e3", &v), 0);
	CHECK_EQ_INT(span_int("\"1\"", &v), 0);
	CHECK_EQ_INT(span_int("null", &v), 0);
	CHECK_EQ_INT(span_int("-", &v), 0);
	CHECK_EQ_INT(span_int("", &v), 0);
	{
		JsonSpan none = { NULL, 0 };

		CHECK_EQ_INT(json_span_int(&none, &v), 0);
	}
}

/* Every byte value once, and some UTF-8: quoted as json_render() quotes it. */
static void test_quoted_strings_match_json_c(void)
{
	char s[300];
	size_t n = 0;
	const char *more[] = { "", "plain", "a/b", "\"\\", "é ü 😀", "\x7f", "tool_use_id" };

	for (int c = 1; c < 256; c++)
		s[n++] = (char)c;
	s[n] = '\0';
	for (size_t i = 0; i <= ARRAY_SIZE(more); i++) {
		const char *in = i < ARRAY_SIZE(more) ? more[i] : s;
		_cleanup_json_ json_object *o = json_object_new_string(in);
		JsonText t = { .buf = NULL };
		size_t len;
		const char *want = json_render(o, &len);

		json_text_add_quoted(&t, in);
		CHECK(!t.failed);
		CHECK(t.buf && t.len == len && memcmp(t.buf, want, len) == 0);
		json_text_clear(&t);
	}
}

/* With a length: NULs inside are characters, as json-c renders a string made with one. */
static void test_quoted_with_length_keeps_nuls(void)
{
	static const char in[] = "a\0b\n\0\0\"c\x01";
	size_t n = sizeof(in) - 1;
	_cleanup_json_ json_object *o = json_object_new_string_len(in, (int)n);
	JsonText t = { .buf = NULL };
	size_t len;
	const char *want = json_render(o, &len);

	json_text_add_quoted_len(&t, in, n);
	CHECK(!t.failed);
	CHECK(t.buf && t.len == len && memcmp(t.buf, want, len) == 0);
	CHECK_EQ_STR(t.buf, "\"a\\u0000b\\n\\u0000\\u0000\\\"c\\u0001\"");
	t.len = 0;
	json_text_add_quoted_len(&t, in, 1); /* a prefix only */
	CHECK_EQ_STR(t.buf, "\"a\"");
	t.len = 0;
	json_text_add_quoted_len(&t, in, 0);
	CHECK_EQ_STR(t.buf, "\"\"");
	json_text_clear(&t);
}

/* What json_text_add_value() writes of v is what json_render() renders, byte for byte. */
static void check_value_as_rendered(json_object *v)
{
	JsonText t = { .buf = NULL };
	size_t len;
	const char *want = json_render(v, &len);

	json_text_add_value(&t, v);
	CHECK(!t.failed);
	CHECK(want && t.buf && t.len == len && memcmp(t.buf, want, len) == 0);
	if (!(t.buf && want && t.len == len && memcmp(t.buf, want, len) == 0))
		fprintf(stderr, "  wrote %s\n  json-c %s\n", t.buf ? t.buf : "(nothing)",
			want ? want : "(nothing)");
	json_text_clear(&t);
}

static void test_values_are_written_as_json_c_renders_them(void)
{
	static const char *const texts[] = {
		"{}",
		"[]",
		"null",
		"true",
		"0",
		"-9223372036854775808",
		"9223372036854775807",
		"18446744073709551615",
		"1.5",
		"-0.000123",
		"1e300",
		"\"a/b \\u0000 \\u001f \\\" \\\\ \\u00e9 \\ud83d\\ude00\"",
		"{\"ok\":true,\"stdout\":\"1\\n\",\"usage\":{},\"files\":[],\"n\":null}",
		"{\"a\":{\"b\":[1,[2,[3,{}]],{\"c\":[]}]},\"k/\\\"\\n\":false,\"d\":2.25}",
		"[{\"file_id\":\"f_1\",\"filename\":\"x.png\"},{\"file_id\":\"f_2\"}]",
	};

	for (size_t i = 0; i < ARRAY_SIZE(texts); i++) {
		json_object *v = json_tokener_parse(texts[i]);

		CHECK(v != NULL || strcmp(texts[i], "null") == 0);
		check_value_as_rendered(v);
		json_object_put(v);
	}
	{
		json_object *o = json_object_new_object();

		json_object_object_add(o, "u64", json_object_new_uint64(UINT64_MAX));
		json_object_object_add(o, "i64", json_object_new_int64(INT64_MIN));
		json_object_object_add(o, "int", json_object_new_int(-7));
		json_object_object_add(o, "nul", json_object_new_string_len("a\0b", 3));
		json_object_object_add(o, "none", NULL);
		json_object_object_add(o, "dbl", json_object_new_double(0.1));
		check_value_as_rendered(o);
		json_object_put(o);
	}
}

/* json-c writes NaN and Infinity, which are not JSON; the writer makes them null. */
static void test_non_finite_numbers_are_null(void)
{
	json_object *v = json_tokener_parse("[NaN,-Infinity,Infinity,1.5,{\"m\":NaN}]");
	JsonText t = { .buf = NULL };

	CHECK(v != NULL);
	json_text_add_value(&t, v);
	CHECK(!t.failed);
	CHECK_EQ_STR(t.buf, "[null,null,null,1.5,{\"m\":null}]");
	json_text_clear(&t);
	json_object_put(v);
}

static void test_booleans(void)
{
	JsonText t = { .buf = NULL };

	json_text_add_bool(&t, true);
	json_text_add_str(&t, ",");
	json_text_add_bool(&t, false);
	CHECK_EQ_STR(t.buf, "true,false");
	t.len = 0;
	json_text_add_str(&t, "{\"a\":1");
	json_text_add_key(&t, "b");
	json_text_add_bool(&t, true);
	json_text_add_str(&t, "}");
	CHECK_EQ_STR(t.buf, "{\"a\":1,\"b\":true}");
	json_text_clear(&t);
}

static void test_text_grows_and_renders_integers(void)
{
	JsonText t = { .buf = NULL };
	int64_t vals[] = { 0, 7, -7, 1234567890123, INT64_MAX, INT64_MIN };
	char want[64];

	for (size_t i = 0; i < ARRAY_SIZE(vals); i++) {
		t.len = 0;
		json_text_add_int(&t, vals[i]);
		snprintf(want, sizeof(want), "%lld", (long long)vals[i]);
		CHECK_EQ_STR(t.buf, want);
	}
	t.len = 0;
	for (int i = 0; i < 10000; i++)
		json_text_add_str(&t, "0123456789");
	CHECK(!t.failed);
	CHECK_EQ_INT(t.len, 100000);
	CHECK_EQ_INT(strlen(t.buf), 100000);
	json_text_clear(&t);
	CHECK(t.buf == NULL && t.len == 0);
}

int main(void)
{
	test_scan_accepts_json_objects_and_nothing_else();
	test_scan_stops_at_its_depth();
	test_scan_finds_top_level_members_as_written();
	test_span_int_takes_integers_only();
	test_quoted_strings_match_json_c();
	test_quoted_with_length_keeps_nuls();
	test_booleans();
	test_non_finite_numbers_are_null();
	test_values_are_written_as_json_c_renders_them();
	test_text_grows_and_renders_integers();
	return unit_summary();
}
