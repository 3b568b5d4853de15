/* SPDX-License-Identifier: MIT */
/* The checked setters sessiond builds its replies with: a failed set marks the reply, and
 * what holds it; a null on purpose does not. And the protocol's request getters. */
#include <errno.h>
#include <string.h>

#include "core/reply.h"
#include "unit.h"

static void test_a_whole_reply_is_not_incomplete(void)
{
	json_object *o = reply_ok(), *arr = json_object_new_array();

	CHECK_EQ_INT(json_set(o, "n", json_object_new_int(1)), 0);
	CHECK_EQ_INT(json_append(arr, json_object_new_string("x")), 0);
	CHECK_EQ_INT(json_set(o, "list", arr), 0);
	CHECK(!json_incomplete(o));
	CHECK_EQ_INT(json_object_get_int(json_object_object_get(o, "n")), 1);
	json_object_put(o);
}

static void test_a_value_that_could_not_be_made_marks_the_reply(void)
{
	json_object *o = reply_ok();

	CHECK_EQ_INT(json_set(o, "stdout", NULL), -ENOMEM);
	CHECK(json_incomplete(o));
	CHECK(!json_object_object_get_ex(o, "stdout", NULL));
	json_object_put(o);
}

static void test_a_failure_inside_marks_every_object_it_is_set_in(void)
{
	json_object *o = reply_ok(), *usage = json_object_new_object();
	json_object *arr = json_object_new_array(), *entry = json_object_new_object();

	CHECK_EQ_INT(json_set(usage, "cpu_ms", NULL), -ENOMEM);
	CHECK_EQ_INT(json_set(o, "usage", usage), 0);
	CHECK(json_incomplete(o));
	json_object_put(o);

	o = reply_ok();
	CHECK_EQ_INT(json_append(arr, NULL), -ENOMEM);
	CHECK(json_incomplete(arr));
	CHECK_EQ_INT(json_set(entry, "files", arr), 0);
	CHECK_EQ_INT(json_set(o, "entry", entry), 0);
	CHECK(json_incomplete(o));
	json_object_put(o);
}

static void test_a_null_on_purpose_is_not_a_failure(void)
{
	json_object *o = reply_ok(), *src = json_tokener_parse("{\"result\": null}");

	CHECK_EQ_INT(json_set_null(o, "tenant"), 0);
	CHECK_EQ_INT(json_set_string_or_null(o, "image", NULL), 0);
	CHECK_EQ_INT(json_set_string_or_null(o, "name", "x"), 0);
	CHECK_EQ_INT(json_copy_field(o, src, "result"), 0);
	CHECK(!json_incomplete(o));
	CHECK(json_object_object_get_ex(o, "tenant", NULL));
	CHECK(json_object_object_get_ex(o, "result", NULL));
	CHECK(json_object_object_get(o, "result") == NULL);
	CHECK_EQ_STR(json_object_get_string(json_object_object_get(o, "name")), "x");
	json_object_put(src);
	json_object_put(o);
}

/* The written form begins as the built one renders: the worker tells an ok reply by it. */
static void test_an_ok_reply_written_begins_as_one_built(void)
{
	json_object *o = reply_ok();
	JsonText t = { .buf = NULL };
	size_t len;
	const char *want = json_render(o, &len);

	reply_ok_text(&t);
	json_text_add_str(&t, "}");
	CHECK(!t.failed);
	CHECK(t.buf && t.len == len && memcmp(t.buf, want, len) == 0);
	json_text_clear(&t);
	json_object_put(o);
}

static void test_no_reply_at_all_is_incomplete(void)
{
	json_object *v = json_object_new_int(3);

	CHECK(json_incomplete(NULL));
	/* The value is taken even so: nothing leaks (the ASan build checks). */
	CHECK_EQ_INT(json_set(NULL, "k", v), -ENOMEM);
	CHECK_EQ_INT(json_append(NULL, json_object_new_int(4)), -ENOMEM);
}

static void test_request_getters_read_only_their_type(void)
{
	json_object *req = json_tokener_parse("{\"s\":\"x\",\"i\":5,\"b\":true,\"si\":\"5\"}");
	int64_t v = 0;

	CHECK_EQ_STR(req_string(req, "s"), "x");
	CHECK(req_string(req, "i") == NULL);
	CHECK(req_int(req, "i", &v));
	CHECK_EQ_INT(v, 5);
	CHECK(!req_int(req, "si", &v));
	CHECK(req_bool(req, "b"));
	CHECK(!req_bool(req, "missing"));
	json_object_put(req);
}

int main(void)
{
	test_a_whole_reply_is_not_incomplete();
	test_a_value_that_could_not_be_made_marks_the_reply();
	test_a_failure_inside_marks_every_object_it_is_set_in();
	test_a_null_on_purpose_is_not_a_failure();
	test_an_ok_reply_written_begins_as_one_built();
	test_no_reply_at_all_is_incomplete();
	test_request_getters_read_only_their_type();
	return unit_summary();
}
