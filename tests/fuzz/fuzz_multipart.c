/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: the streaming multipart/form-data parser and the Content-Type boundary
 * parser. Input: 4 bytes seeding the chunking, a Content-Type line ending in LF, then
 * the body. The body is fed twice, whole and in chunks of sizes drawn from the seed;
 * both feeds must tell the same story (parts, names, bytes, result).
 */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "http/multipart.h"

#define MAX_PARTS 1000 /* PutFile's caps */
#define MAX_HEADER 8192

/* The caps for one input: PutFile's, or (seed's top nibble 0xe) small ones to reach them. */
struct caps {
	size_t parts;  /* max_parts */
	size_t header; /* max_header_bytes */
};

/* What the callbacks saw, folded into a hash so chunking cannot change it. */
struct story {
	uint64_t hash; /* FNV-1a over events and data bytes */
	size_t parts;  /* part_begin calls */
	size_t ends;   /* part_end calls */
	bool open;     /* inside a part */
	size_t bytes;  /* data bytes seen */
	int fail_at;   /* part_begin number that fails with -ENOSPC, 0 for never */
};

static void mix(struct story *s, const void *p, size_t n)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++) {
		s->hash ^= b[i];
		s->hash *= 0x100000001b3ULL;
	}
}

static int on_begin(void *ud, const char *name, const char *filename)
{
	struct story *s = ud;

	FUZZ_ASSERT(!s->open);
	FUZZ_ASSERT(name && strlen(name) < MAX_HEADER);
	FUZZ_ASSERT(!filename || strlen(filename) < MAX_HEADER);
	s->open = true;
	s->parts++;
	mix(s, "[", 1);
	mix(s, name, strlen(name) + 1);
	if (filename)
		mix(s, filename, strlen(filename) + 1);
	else
		mix(s, "-", 1);
	if (s->fail_at && s->parts == (size_t)s->fail_at)
		return -ENOSPC;
	return 0;
}

static int on_data(void *ud, const char *buf, size_t len)
{
	struct story *s = ud;

	FUZZ_ASSERT(s->open);
	FUZZ_ASSERT(len > 0);
	s->bytes += len;
	mix(s, buf, len);
	return 0;
}

static int on_end(void *ud)
{
	struct story *s = ud;

	FUZZ_ASSERT(s->open);
	s->open = false;
	s->ends++;
	mix(s, "]", 1);
	return 0;
}

static uint32_t next(uint32_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 17;
	*x ^= *x << 5;
	return *x;
}

/* Feed body in chunks (seed 0: all at once), then finish; the story is in *s. */
static int run(const char *boundary, const struct caps *caps, const uint8_t *body, size_t len,
	       uint32_t seed, struct story *s)
{
	MultipartCallbacks cb = { on_begin, on_data, on_end, s };
	MultipartParser *p = NULL;
	size_t off = 0;
	int r;

	r = multipart_parser_new(boundary, &cb, caps->parts, caps->header, &p);
	FUZZ_ASSERT(r == 0);
	r = 0;
	while (off < len) {
		size_t n = len - off;
		char *chunk;

		if (seed) {
			uint32_t k = next(&seed);

			/* Mostly tiny chunks, where state carries across calls; some larger. */
			n = (k & 3) ? 1 + (k >> 8) % 8 : 1 + (k >> 8) % 512;
			if (n > len - off)
				n = len - off;
		}
		/* An exact-size copy: a read past the chunk is an ASan error. */
		chunk = malloc(n);
		FUZZ_ASSERT(chunk);
		memcpy(chunk, body + off, n);
		r = multipart_feed(p, chunk, n);
		free(chunk);
		off += n;
		if (r < 0)
			break;
	}
	if (r == 0)
		r = multipart_finish(p);
	FUZZ_ASSERT(multipart_parts(p) >= s->parts);
	FUZZ_ASSERT(multipart_parts(p) <= caps->parts);
	/* A parser in its error state keeps saying so. */
	if (r < 0) {
		FUZZ_ASSERT(multipart_feed(p, "x", 1) == r);
		FUZZ_ASSERT(multipart_finish(p) == r);
	}
	multipart_parser_free(p);
	return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char boundary[MULTIPART_BOUNDARY_MAX + 1];
	struct story whole = { .hash = 0xcbf29ce484222325ULL };
	struct story chunked = { .hash = 0xcbf29ce484222325ULL };
	struct caps caps = { MAX_PARTS, MAX_HEADER };
	const uint8_t *nl;
	char *ctype;
	uint32_t seed;
	int r, r1, r2;

	if (size < 4)
		return 0;
	seed = (uint32_t)data[0] | (uint32_t)data[1] << 8 | (uint32_t)data[2] << 16 |
	       (uint32_t)data[3] << 24;
	data += 4;
	size -= 4;
	nl = memchr(data, '\n', size);
	if (!nl)
		return 0;
	/* The Content-Type reaches the worker as a C string (a FastCGI param). */
	ctype = strndup((const char *)data, (size_t)(nl - data));
	FUZZ_ASSERT(ctype);
	r = multipart_boundary_from_content_type(ctype, boundary, sizeof(boundary));
	free(ctype);
	FUZZ_ASSERT(r == 0 || r == -EMEDIUMTYPE || r == -EINVAL || r == -ENOMEM);
	if (r < 0)
		return 0;
	FUZZ_ASSERT(strlen(boundary) >= 1 && strlen(boundary) <= MULTIPART_BOUNDARY_MAX);
	size -= (size_t)(nl + 1 - data);
	data = nl + 1;

	/* A callback error stops the parser the same way in both feeds. */
	whole.fail_at = chunked.fail_at = (seed >> 28) == 0xf ? 1 + (int)(seed & 3) : 0;
	if ((seed >> 28) == 0xe) {
		caps.parts = 1 + (seed & 3);
		caps.header = 1 + ((seed >> 4) & 0xff);
	}
	r1 = run(boundary, &caps, data, size, 0, &whole);
	r2 = run(boundary, &caps, data, size, seed | 1, &chunked);
	FUZZ_ASSERT(r1 == 0 || r1 == -EBADMSG || r1 == -E2BIG || r1 == -EMSGSIZE || r1 == -EPIPE ||
		    r1 == -ENOSPC);
	if (r1 != r2 || whole.hash != chunked.hash || whole.parts != chunked.parts)
		fprintf(stderr,
			"whole: r=%d parts=%zu bytes=%zu; chunked: r=%d parts=%zu bytes=%zu\n", r1,
			whole.parts, whole.bytes, r2, chunked.parts, chunked.bytes);
	FUZZ_ASSERT(r1 == r2);
	FUZZ_ASSERT(whole.parts == chunked.parts && whole.ends == chunked.ends);
	FUZZ_ASSERT(whole.bytes == chunked.bytes);
	FUZZ_ASSERT(whole.hash == chunked.hash);
	/* A clean finish means every part that began also ended. */
	if (r1 == 0)
		FUZZ_ASSERT(!whole.open && whole.parts == whole.ends);
	return 0;
}
