/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: the API form of workspace names (wsname.h). Input: any bytes. Checked: the
 * API form of a name is valid UTF-8 and decodes to exactly the name (so two names never
 * share a form); decoding any text either fails cleanly or gives bytes whose API form
 * decodes to them again; neither writes past its buffer.
 */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "utf8.h"
#include "workspace/wsname.h"

/* Names as the walk sees them: up to 255 bytes, no NUL. */
#define NAME_BYTES 255

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char name[NAME_BYTES + 1], api[NAME_BYTES * WSNAME_GROWTH + 1], back[NAME_BYTES + 1];
	char small[8];
	size_t len = strnlen((const char *)data, size < NAME_BYTES ? size : NAME_BYTES);
	ssize_t n, m;

	memcpy(name, data, len);
	name[len] = '\0';

	/* Encode: always fits the worst case, valid UTF-8, and decodes back exactly. */
	n = wsname_encode(name, len, api, sizeof(api));
	FUZZ_ASSERT(n >= 0 && (size_t)n == strlen(api));
	FUZZ_ASSERT(utf8_valid(api, (size_t)n));
	m = wsname_decode(api, back, sizeof(back));
	FUZZ_ASSERT(m == (ssize_t)len && memcmp(back, name, len) == 0);
	/* Names without a stray byte or an escape character are their own API form. */
	if (utf8_valid(name, len) && !strstr(name, WSNAME_ESCAPE))
		FUZZ_ASSERT(strcmp(api, name) == 0);
	/* A buffer too small is -ENOBUFS and an empty string, never an overflow. */
	n = wsname_encode(name, len, small, sizeof(small));
	FUZZ_ASSERT(n >= 0 ? (size_t)n < sizeof(small) : (n == -ENOBUFS && small[0] == '\0'));

	/* Decode the input as if a client sent it. */
	m = wsname_decode(name, back, sizeof(back));
	FUZZ_ASSERT(m >= 0 || m == -EINVAL || m == -ENOBUFS);
	if (m >= 0) {
		FUZZ_ASSERT((size_t)m <= len && !memchr(back, '\0', (size_t)m));
		n = wsname_encode(back, (size_t)m, api, sizeof(api));
		FUZZ_ASSERT(n >= 0);
		FUZZ_ASSERT(wsname_decode(api, name, sizeof(name)) == m);
		FUZZ_ASSERT(memcmp(name, back, (size_t)m) == 0);
	}
	m = wsname_decode(api, small, sizeof(small));
	FUZZ_ASSERT(m >= 0 || m == -ENOBUFS);
	return 0;
}
