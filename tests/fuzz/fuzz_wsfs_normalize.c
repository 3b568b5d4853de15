/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: sessiond's API-path normalizer (wsfs_normalize). Input: a flags byte
 * (allow_root, output size class), then the path, cut at the first NUL as a JSON
 * string handed over with json_object_get_string would be. The path is in API form
 * (wsname.h): escapes stand for bytes that are not UTF-8.
 */
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "fuzz.h"
#include "workspace/wsfs.h"
#include "workspace/wsname.h"

/* The output's promises: relative, no empty or "." component, none over NAME_MAX. */
static void check_out(const char *out, size_t outlen, bool allow_root)
{
	size_t len = strnlen(out, outlen);
	const char *p = out;

	FUZZ_ASSERT(len < outlen);
	FUZZ_ASSERT(len > 0);
	if (strcmp(out, ".") == 0) {
		FUZZ_ASSERT(allow_root);
		return;
	}
	FUZZ_ASSERT(out[0] != '/' && out[len - 1] != '/');
	while (*p) {
		size_t c = strcspn(p, "/");

		FUZZ_ASSERT(c > 0 && c <= NAME_MAX);
		FUZZ_ASSERT(!(c == 1 && p[0] == '.'));
		p += c;
		if (*p == '/')
			p++;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const size_t sizes[] = { 1, 2, 3, 16, 255, 256, PATH_MAX };
	static char raw[PATH_MAX];
	bool allow_root;
	size_t outlen;
	char *path, *out;
	int r;

	if (size < 1)
		return 0;
	allow_root = data[0] & 1;
	outlen = sizes[(data[0] >> 1) % (sizeof(sizes) / sizeof(sizes[0]))];
	path = strndup((const char *)data + 1, size - 1);
	FUZZ_ASSERT(path);
	/* Exactly outlen bytes: a write past the end is an ASan error. */
	out = malloc(outlen);
	FUZZ_ASSERT(out);
	r = wsfs_normalize(path, allow_root, out, outlen);
	FUZZ_ASSERT(r == 0 || r == -EPERM || r == -EINVAL || r == -ENOBUFS);
	if (r == 0) {
		check_out(out, outlen, allow_root);
		/* Only /workspace and below may be absolute. */
		if (path[0] == '/')
			FUZZ_ASSERT(strncmp(path, "/workspace", 10) == 0 &&
				    (path[10] == '\0' || path[10] == '/'));
		/* Normalizing is idempotent: the API form of the result normalizes to it. */
		if (strcmp(out, ".") != 0) {
			char *again = malloc(outlen), *api = wsname_encode_dup(out);

			FUZZ_ASSERT(again && api);
			FUZZ_ASSERT(wsfs_normalize(api, allow_root, again, outlen) == 0);
			FUZZ_ASSERT(strcmp(out, again) == 0);
			free(api);
			free(again);
		}
	} else if (path[0] == '/' && strncmp(path, "/workspace", 10) != 0 &&
		   strlen(path) < PATH_MAX && wsname_decode(path, raw, sizeof(raw)) >= 0) {
		FUZZ_ASSERT(r == -EPERM);
	}
	free(out);
	free(path);
	return 0;
}
