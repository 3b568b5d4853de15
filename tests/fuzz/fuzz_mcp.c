/* SPDX-License-Identifier: MIT */
/* Fuzz target: what the MCP endpoint makes of a client's bytes: a body parsed and classified
 * as a JSON-RPC message, and write_file's base64 content, which must decode only when it is
 * the one encoding of its bytes. */
#include <string.h>

#include "base64.h"
#include "fuzz.h"
#include "json.h"
#include "mcp/mcp.h"

static void check_base64(const char *s, size_t size)
{
	char *bytes = malloc(size / 4 * 3 + 1), *again;
	long n = base64_decode(s, size, bytes);

	FUZZ_ASSERT(bytes);
	if (n >= 0) {
		FUZZ_ASSERT((size_t)n <= size / 4 * 3 && base64_encoded_len((size_t)n) == size);
		again = malloc(size + 1);
		FUZZ_ASSERT(again);
		base64_encode(bytes, (size_t)n, again);
		FUZZ_ASSERT(memcmp(again, s, size) == 0 && again[size] == '\0');
		free(again);
	}
	free(bytes);
}

static void check_message(const char *s, size_t size)
{
	json_object *msg = NULL;
	char err[256];
	RpcMessage m;

	if (json_in_parse(s, size, 32, &msg, err, sizeof(err)) < 0)
		return;
	if (json_object_is_type(msg, json_type_object)) {
		rpc_classify(msg, &m);
		FUZZ_ASSERT(m.kind == RPC_INVALID ? m.why != NULL : m.why == NULL);
		if (m.kind == RPC_REQUEST || m.kind == RPC_NOTIFICATION)
			FUZZ_ASSERT(m.method &&
				    (!m.params || json_object_is_type(m.params, json_type_object)));
		if (m.kind == RPC_REQUEST || m.kind == RPC_RESPONSE)
			FUZZ_ASSERT(m.id && rpc_id_text(m.id));
	}
	json_object_put(msg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check_base64((const char *)data, size);
	check_message((const char *)data, size);
	return 0;
}
