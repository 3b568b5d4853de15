/* SPDX-License-Identifier: MIT */
/* Unit tests for request JSON parsing: limits, UTF-8, strictness and typed getters. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

#include "unit.h"

static int parse(const char *s, size_t len, int depth, char *err)
{
	json_object *o = NULL;
	int r = json_in_parse(s, len, depth, &o, err, 256);

	if (r == 0 && !o)
		return -999;
	if (r < 0 && o)
		return -998;
	json_object_put(o);
	return r;
}

#define P(s, depth) parse(s, sizeof(s) - 1, depth, err)

static void nest(char *buf, int levels)
{
	int n = 0;

	for (int i = 0; i < levels; i++)
		buf[n++] = i % 2 ? '[' : '{', n += i % 2 ? 0 : sprintf(buf + n, "\"k\":");
	for (int i = levels - 1; i >= 0; i--)
		buf[n++] = i % 2 ? ']' : '}';
	buf[n] = '\0';
}

static void test_parse_takes_strict_json_within_its_depth(void)
{
	char err[256], buf[4096];

	CHECK_EQ_INT(P("{}", 32), 0);
	CHECK_EQ_INT(P(" {\"a\": [1, 2.5, \"x\", null, true]} \r\n", 32), 0);
	CHECK_EQ_INT(P("[]", 32), 0);
	CHECK_EQ_INT(P("\"\\u00e9\\ud83d\\ude00\"", 32), 0);

	CHECK_EQ_INT(P("", 32), -EINVAL);
	CHECK_CONTAINS(err, "ends too early");
	CHECK_EQ_INT(P("{\"a\": 1", 32), -EINVAL);
	CHECK_EQ_INT(P("{\"a\": 1}}", 32), -EINVAL);
	CHECK_CONTAINS(err, "byte 8");
	CHECK_EQ_INT(P("{\"a\": 1} x", 32), -EINVAL);
	CHECK_EQ_INT(P("{'a': 1}", 32), -EINVAL);
	CHECK_CONTAINS(err, "not valid JSON");
	CHECK_EQ_INT(P("{\"a\": 1,}", 32), -EINVAL);
	CHECK_EQ_INT(P("[1,]", 32), -EINVAL);
	CHECK_EQ_INT(P("[\"it's\", \"\\\"'\"]", 32), 0);
	CHECK_EQ_INT(P("5", 32), 0);
	CHECK_EQ_INT(P(" 12 ", 32), 0);
	CHECK_EQ_INT(P("12x", 32), -EINVAL);
	CHECK_EQ_INT(P("{\"a\": nan}", 32), -EINVAL);
	CHECK_EQ_INT(P("{\"a\" 1}", 32), -EINVAL);

	/* Invalid UTF-8 raw and escaped; overlong; surrogate encoded raw. */
	CHECK_EQ_INT(P("{\"a\": \"\xff\"}", 32), -EINVAL);
	CHECK_CONTAINS(err, "UTF-8");
	CHECK_EQ_INT(P("{\"a\": \"\xc0\xaf\"}", 32), -EINVAL);
	CHECK_EQ_INT(P("{\"a\": \"\xed\xa0\x80\"}", 32), -EINVAL);
	CHECK_EQ_INT(P("{\"\xe2\x82\": 1}", 32), -EINVAL);
	/* json-c turns a lone surrogate escape into U+FFFD: valid UTF-8 from then on. */
	CHECK_EQ_INT(P("{\"a\": \"\\ud800\"}", 32), 0);
	CHECK_EQ_INT(P("{\"\\udc00\": 1}", 32), 0);
	CHECK_EQ_INT(P("{\"a\": \"\xf4\x90\x80\x80\"}", 32), -EINVAL);
	CHECK_EQ_INT(P("{\"a\": \"\xf0\x9f\x98\x80\"}", 32), 0);

	/* Depth: exactly the limit passes, one more fails. */
	nest(buf, 4);
	CHECK_EQ_INT(parse(buf, strlen(buf), 4, err), 0);
	CHECK_EQ_INT(parse(buf, strlen(buf), 3, err), -EINVAL);
	CHECK_CONTAINS(err, "deeper than 3");
	nest(buf, 32);
	CHECK_EQ_INT(parse(buf, strlen(buf), 32, err), 0);
	nest(buf, 33);
	CHECK_EQ_INT(parse(buf, strlen(buf), 32, err), -EINVAL);
	nest(buf, 400);
	CHECK_EQ_INT(parse(buf, strlen(buf), 32, err), -EINVAL);
	CHECK_EQ_INT(P("[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[", 32), -EINVAL);

	/* An embedded NUL in the raw body is not JSON. */
	CHECK_EQ_INT(parse("{}\0", 3, 32, err), -EINVAL);
}

static void test_getters_tell_a_value_from_absent_and_wrong_type(void)
{
	const char *doc = "{\"s\": \"abc\", \"n\": null, \"i\": 42, \"d\": 7.0, \"f\": 1.5, "
			  "\"b\": true, \"o\": {\"x\": 1}, \"big\": 99999999999999999999, "
			  "\"neg\": -3, \"e\": 1e3, \"huge\": 1e300, \"z\": \"a\\u0000b\"}";
	json_object *o = NULL, *sub = NULL;
	const char *s;
	size_t len;
	int64_t v;
	char err[256];

	CHECK_EQ_INT(json_in_parse(doc, strlen(doc), 32, &o, err, sizeof(err)), 0);
	CHECK_EQ_INT(json_in_string(o, "s", &s, &len), 1);
	CHECK_EQ_STR(s, "abc");
	CHECK_EQ_INT(len, 3);
	CHECK_EQ_INT(json_in_string(o, "z", &s, &len), 1);
	CHECK_EQ_INT(len, 3);
	/* Read as a C string it would say "a": not the string it is. */
	CHECK_EQ_INT(json_in_string(o, "z", &s, NULL), -EINVAL);
	CHECK_EQ_INT(json_in_string(o, "n", &s, &len), 0);
	CHECK_EQ_INT(json_in_string(o, "missing", &s, &len), 0);
	CHECK_EQ_INT(json_in_string(o, "i", &s, &len), -EINVAL);
	CHECK_EQ_INT(json_in_string(o, "o", &s, NULL), -EINVAL);
	CHECK_EQ_INT(json_in_int(o, "i", &v), 1);
	CHECK_EQ_INT(v, 42);
	CHECK_EQ_INT(json_in_int(o, "neg", &v), 1);
	CHECK_EQ_INT(v, -3);
	CHECK_EQ_INT(json_in_int(o, "d", &v), 1);
	CHECK_EQ_INT(v, 7);
	CHECK_EQ_INT(json_in_int(o, "e", &v), 1);
	CHECK_EQ_INT(v, 1000);
	CHECK_EQ_INT(json_in_int(o, "f", &v), -EINVAL);
	CHECK_EQ_INT(json_in_int(o, "s", &v), -EINVAL);
	CHECK_EQ_INT(json_in_int(o, "b", &v), -EINVAL);
	CHECK_EQ_INT(json_in_int(o, "n", &v), 0);
	CHECK_EQ_INT(json_in_int(o, "big", &v), -ERANGE);
	CHECK_EQ_INT(json_in_int(o, "huge", &v), -ERANGE);
	CHECK_EQ_INT(json_in_object(o, "o", &sub), 1);
	CHECK(json_object_is_type(sub, json_type_object));
	CHECK_EQ_INT(json_in_object(o, "s", &sub), -EINVAL);
	CHECK_EQ_INT(json_in_object(o, "n", &sub), 0);
	/* Getters on a non-object answer "absent". */
	CHECK_EQ_INT(json_in_string(sub ? json_object_object_get(sub, "x") : NULL, "x", &s, NULL),
		     0);
	json_object_put(o);
}

static void test_a_key_holding_nul_is_refused(void)
{
	char err[256];

	/* json-c would cut the key at the NUL: "method\u0000" would be a second "method". */
	CHECK_EQ_INT(P("{\"method\":\"ping\",\"method\\u0000\":\"tools/call\"}", 4), -EINVAL);
	CHECK(strstr(err, "NUL") != NULL);
	CHECK_EQ_INT(P("{\"a\":{\"k\\u0000\" : 1}}", 4), -EINVAL);
	/* In values it is kept (with the length), and an escaped backslash is no NUL. */
	CHECK_EQ_INT(P("{\"v\":\"x\\u0000y\"}", 4), 0);
	CHECK_EQ_INT(P("{\"k\\\\u0000\":1}", 4), 0);
	CHECK_EQ_INT(P("[\"\\u0000\", 1]", 4), 0);
}

static void test_utf8_valid_refuses_malformed_sequences(void)
{
	CHECK(utf8_valid("", 0));
	CHECK(utf8_valid("plain", 5));
	CHECK(utf8_valid("\xc3\xa9", 2));
	CHECK(!utf8_valid("\xc3", 1));
	CHECK(!utf8_valid("\xe0\x80\x80", 3));
	CHECK(!utf8_valid("\x80", 1));
	CHECK(!utf8_valid("\xf8\x88\x80\x80\x80", 5));
	CHECK(utf8_valid("\xef\xbf\xbf", 3));
}

/* What a sandbox may write: raw bytes that are not UTF-8 are refused, where the quick
 * parse takes them; an escaped lone surrogate becomes U+FFFD in both. */
static void test_sandboxed_json_must_be_utf8(void)
{
	static const char bad[] = "{\"a\":\"\xff\xfe\"}";
	json_object *o = json_in_parse_quick(bad, sizeof(bad) - 1, 4);

	CHECK(o != NULL);
	json_object_put(o);
	CHECK(json_in_parse_sandboxed(bad, sizeof(bad) - 1, 4) == NULL);
	CHECK(json_in_parse_sandboxed("{\"a\":\"\xc3\"}", 9, 4) == NULL);
	o = json_in_parse_sandboxed("{\"a\":\"\\ud800\xc3\xa9\"}", 16, 4);
	CHECK(o != NULL);
	if (o) {
		json_object *a = json_object_object_get(o, "a");

		CHECK_EQ_STR(json_object_get_string(a), "\xef\xbf\xbd\xc3\xa9");
	}
	json_object_put(o);
	/* Depth still holds. */
	CHECK(json_in_parse_sandboxed("[[[[[1]]]]]", 11, 4) == NULL);
}

int main(void)
{
	test_parse_takes_strict_json_within_its_depth();
	test_getters_tell_a_value_from_absent_and_wrong_type();
	test_a_key_holding_nul_is_refused();
	test_utf8_valid_refuses_malformed_sequences();
	test_sandboxed_json_must_be_utf8();
	return unit_summary();
}
