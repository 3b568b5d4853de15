/* SPDX-License-Identifier: MIT */
/* A streaming multipart/form-data parser (RFC 7578, RFC 2046) with a callback API. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#define MULTIPART_BOUNDARY_MAX 200

/*
 * Callbacks return >= 0 to go on, or -errno to stop: the parser then enters its
 * error state and multipart_feed() returns that value (now and on later calls).
 * Strings passed to them are valid only during the call.
 */
typedef struct MultipartCallbacks {
	/* A part starts: its form field name, and its filename or NULL when absent. */
	int (*part_begin)(void *userdata, const char *name, const char *filename);
	/* Some of the part's bytes, in order; any chunking, never across parts. */
	int (*part_data)(void *userdata, const char *buf, size_t len);
	/* The part ended with a well-formed delimiter. */
	int (*part_end)(void *userdata);
	void *userdata;
} MultipartCallbacks;

typedef struct MultipartParser MultipartParser;

/*
 * boundary: the Content-Type's boundary parameter (copied). max_parts bounds how
 * many parts may begin; max_header_bytes bounds each part's header block.
 * -EINVAL for a boundary that is empty, too long or holds CR, LF or NUL.
 */
int multipart_parser_new(const char *boundary, const MultipartCallbacks *cb, size_t max_parts,
			 size_t max_header_bytes, MultipartParser **ret);
MultipartParser *multipart_parser_free(MultipartParser *p);

/*
 * Feed the next bytes of the body. Returns 0, or -EBADMSG (malformed),
 * -E2BIG (more than max_parts parts), -EMSGSIZE (a header block over the cap),
 * or a callback's error. Memory use does not grow with the input.
 */
int multipart_feed(MultipartParser *p, const char *buf, size_t len);

/* The body ended: 0 when the close delimiter was seen, -EPIPE when truncated. */
int multipart_finish(MultipartParser *p);

/* How many parts have begun so far. */
size_t multipart_parts(const MultipartParser *p);

/*
 * Take the boundary out of a Content-Type value into out (NUL-terminated).
 * -EMEDIUMTYPE when the type is not multipart/form-data, -EINVAL when the
 * boundary is missing or malformed.
 */
int multipart_boundary_from_content_type(const char *content_type, char *out, size_t outlen);
