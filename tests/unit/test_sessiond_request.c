/* SPDX-License-Identifier: MIT */
/* Unit tests for the worker's requests to sessiond written as text: the same bytes the
 * json-c form renders to, for the fields the two share. */
#include <string.h>

#include "http/client.h"

#include "unit.h"

/* begin + close against sessiond_request_new rendered, for one set of common fields. */
static void check_same(const char *op, const char *rid, const char *tenant, const char *sid)
{
	JsonText t = { .buf = NULL }, want = { .buf = NULL };
	json_object *o = sessiond_request_new(op, rid, tenant, sid);

	CHECK(o != NULL);
	json_object_object_add(o, "code", json_object_new_string_len("a\0\"/\n", 5));
	json_text_add_value(&want, o);
	sessiond_request_begin(&t, op, rid, tenant, sid);
	json_text_add_key(&t, "code");
	json_text_add_quoted_len(&t, "a\0\"/\n", 5);
	json_text_add_str(&t, "}");
	CHECK(!t.failed && !want.failed);
	CHECK_EQ_STR(t.buf, want.buf);
	json_text_clear(&t);
	json_text_clear(&want);
	json_object_put(o);
}

static void test_text_requests_render_as_the_objects_do(void)
{
	check_same("exec", "0123abcd", NULL, NULL);
	check_same("exec", "0123abcd", NULL, "n1-AbC_d");
	check_same("edit", "r", "tenant \"quoted\" \\ é", "n1-x");
	check_same("exec", "", "", "");
}

static void test_a_text_request_opens_the_common_fields(void)
{
	JsonText t = { .buf = NULL };

	sessiond_request_begin(&t, "exec", "rid", "t1", "s1");
	CHECK_EQ_STR(t.buf, "{\"op\":\"exec\",\"request_id\":\"rid\",\"tenant\":\"t1\","
			    "\"session_id\":\"s1\"");
	json_text_clear(&t);
}

int main(void)
{
	test_text_requests_render_as_the_objects_do();
	test_a_text_request_opens_the_common_fields();
	return unit_summary();
}
