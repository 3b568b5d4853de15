/* SPDX-License-Identifier: MIT */
/* The MCP endpoint's pure parts: base64 both ways (strict decoding: one text per byte
 * string), and what a JSON-RPC message is. */
#include "base64.h"
#include "cleanup.h"
#include "mcp/mcp.h"
#include "unit.h"

#include <errno.h>

static void test_base64_known_answers(void)
{
	static const struct {
		const char *bytes, *text;
	} cases[] = {
		{ "", "" },
		{ "f", "Zg==" },
		{ "fo", "Zm8=" },
		{ "foo", "Zm9v" },
		{ "foob", "Zm9vYg==" },
		{ "fooba", "Zm9vYmE=" },
		{ "foobar", "Zm9vYmFy" },
	};
	char enc[32], dec[32];

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		size_t n = strlen(cases[i].bytes);

		CHECK_EQ_INT(base64_encoded_len(n), strlen(cases[i].text));
		base64_encode(cases[i].bytes, n, enc);
		CHECK_EQ_STR(enc, cases[i].text);
		CHECK_EQ_INT(base64_decode(cases[i].text, strlen(cases[i].text), dec), n);
		CHECK(memcmp(dec, cases[i].bytes, n) == 0);
	}
}

static void test_base64_every_byte_round_trips(void)
{
	unsigned char all[256], back[256];
	char text[400];

	for (int i = 0; i < 256; i++)
		all[i] = (unsigned char)i;
	for (size_t n = 0; n <= sizeof(all); n += 37) {
		base64_encode(all, n, text);
		CHECK_EQ_INT(base64_decode(text, strlen(text), back), n);
		CHECK(memcmp(all, back, n) == 0);
	}
}

static void test_base64_refuses_what_is_not_one_encoding(void)
{
	static const char *const bad[] = {
		"Zg",		      /* no padding */
		"Zg=",		      /* short padding */
		"Z===",		      /* too much padding */
		"Zg=a",		      /* padding inside */
		"Zh==",		      /* bits left over: "Zg==" is the one text of "f" */
		"Zm9=",		      /* the same with one '=' */
		"Zm9v Zg==",	      /* white space */
		"Zm9v\nZg==", "Zm9-", /* the URL alphabet */
		"Zg==Zg==",	      /* padding before the end */
		"====",
	};
	char dec[32];

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		CHECK_EQ_INT(base64_decode(bad[i], strlen(bad[i]), dec), -EINVAL);
}

static enum rpc_kind kind_of(const char *text, const char **why)
{
	json_object *o = json_tokener_parse(text);
	RpcMessage m;

	rpc_classify(o, &m);
	*why = m.why;
	json_object_put(o);
	return m.kind;
}

static void test_messages_are_classified(void)
{
	const char *why;

	CHECK_EQ_INT(kind_of("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}", &why),
		     RPC_REQUEST);
	CHECK_EQ_INT(
		kind_of("{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"x\",\"params\":{}}", &why),
		RPC_REQUEST);
	CHECK_EQ_INT(
		kind_of("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", &why),
		RPC_NOTIFICATION);
	CHECK_EQ_INT(kind_of("{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}", &why), RPC_RESPONSE);
	CHECK_EQ_INT(
		kind_of("{\"jsonrpc\":\"2.0\",\"id\":9007199254740991,\"method\":\"x\"}", &why),
		RPC_REQUEST);
	CHECK_EQ_INT(kind_of("{\"jsonrpc\":\"2.0\",\"id\":3,\"error\":{\"code\":1}}", &why),
		     RPC_RESPONSE);
	/* Not messages, each with its reason. */
	static const char *const invalid[] = {
		"{\"id\":1,\"method\":\"ping\"}",
		"{\"jsonrpc\":2.0,\"id\":1,\"method\":\"ping\"}",
		"{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}",
		"{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}",
		"{\"jsonrpc\":\"2.0\",\"id\":9007199254740992,\"method\":\"ping\"}",
		"{\"jsonrpc\":\"2.0\",\"id\":-9007199254740992,\"method\":\"ping\"}",
		"{\"jsonrpc\":\"2.0\",\"id\":[1],\"method\":\"ping\"}",
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":7}",
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":[1]}",
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"result\":{}}",
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{},\"error\":{}}",
		"{\"jsonrpc\":\"2.0\",\"result\":{}}",
		"{\"jsonrpc\":\"2.0\"}",
	};
	for (size_t i = 0; i < ARRAY_SIZE(invalid); i++) {
		CHECK_EQ_INT(kind_of(invalid[i], &why), RPC_INVALID);
		CHECK(why && *why);
	}
}

static void test_ids_render_as_json(void)
{
	json_object *s = json_object_new_string("a\"b"), *n = json_object_new_int64(42);

	/* A string id and the number with the same digits name different calls. */
	CHECK_EQ_STR(rpc_id_text(s), "\"a\\\"b\"");
	CHECK_EQ_STR(rpc_id_text(n), "42");
	json_object_put(s);
	json_object_put(n);
}

int main(void)
{
	test_base64_known_answers();
	test_base64_every_byte_round_trips();
	test_base64_refuses_what_is_not_one_encoding();
	test_messages_are_classified();
	test_ids_render_as_json();
	return unit_summary();
}
