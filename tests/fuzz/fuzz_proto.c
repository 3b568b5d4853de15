/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: the internal frame decoder (proto_frame_parse), the request decoding
 * sessiond does on each frame (json-c under the same depth limit, an object or the
 * connection is dropped), and the two blocking readers (proto_read_frame, and the worker's
 * buffered proto_reader_next, which must agree frame for frame) over a socketpair. The
 * input is a stream of frames as a peer would send them.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <json-c/json.h>

#include "fuzz.h"
#include "proto.h"

#define REQUEST_MAX_DEPTH 64 /* sessiond/server.c */

/* sessiond's conn_take_request on one whole frame: true when it would dispatch it. */
static bool sessiond_decode(const uint8_t *frame, size_t plen)
{
	/* An exact-size copy of the payload, unterminated as in the connection's buffer. */
	char *payload = malloc(plen ? plen : 1);
	struct json_tokener *tok;
	json_object *req;
	bool ok;

	FUZZ_ASSERT(payload);
	memcpy(payload, frame + PROTO_HEADER_SIZE, plen);
	tok = json_tokener_new_ex(REQUEST_MAX_DEPTH);
	FUZZ_ASSERT(tok);
	req = json_tokener_parse_ex(tok, payload, (int)plen);
	if (json_tokener_get_error(tok) != json_tokener_success) {
		json_object_put(req);
		req = NULL;
	}
	json_tokener_free(tok);
	free(payload);
	ok = req && json_object_is_type(req, json_type_object);
	if (ok) {
		/* What the dispatcher reads first. */
		json_object *op;

		if (json_object_object_get_ex(req, "op", &op))
			(void)json_object_get_string(op);
	}
	json_object_put(req);
	return ok;
}

/* Walk the stream as sessiond's read loop does: stop where it would drop the peer. */
static void decode_stream(const uint8_t *data, size_t size)
{
	size_t off = 0;

	while (off < size) {
		uint8_t type = 0;
		size_t plen = 0;
		ssize_t n = proto_frame_parse(data + off, size - off, &type, &plen);

		if (n == 0) {
			/* Incomplete: a short header, or a payload not all there yet. */
			FUZZ_ASSERT(size - off < PROTO_HEADER_SIZE ||
				    (size_t)(data[off] | data[off + 1] << 8 | data[off + 2] << 16 |
					     (uint32_t)data[off + 3] << 24) >
					    size - off - PROTO_HEADER_SIZE);
			return;
		}
		if (n < 0) {
			FUZZ_ASSERT(n == -EBADMSG || n == -EMSGSIZE);
			return;
		}
		FUZZ_ASSERT(type == PROTO_JSON || type == PROTO_DATA);
		FUZZ_ASSERT(plen <= PROTO_MAX_PAYLOAD);
		FUZZ_ASSERT((size_t)n == PROTO_HEADER_SIZE + plen && (size_t)n <= size - off);
		if (type != PROTO_JSON || !sessiond_decode(data + off, plen))
			return;
		off += (size_t)n;
	}
}

/* What a reader made of a stream: its frames (type, length, a sum of the payload) and how
 * it ended. */
typedef struct ReadLog {
	size_t frames;
	uint64_t sums[64];
	int end;
} ReadLog;

static void log_frame(ReadLog *lg, const ProtoFrame *f)
{
	uint64_t sum = (uint64_t)f->type << 56 | (uint64_t)f->len << 24;

	for (size_t i = 0; i < f->len; i++)
		sum = sum * 31 + (uint8_t)f->payload[i];
	if (lg->frames < sizeof(lg->sums) / sizeof(lg->sums[0]))
		lg->sums[lg->frames] = sum;
	lg->frames++;
}

/* The whole input sent down a socketpair, then EOF, read by the one-frame reader (buffered
 * false) or by the worker's buffered one. */
static void read_stream(const uint8_t *data, size_t size, bool buffered, ReadLog *lg)
{
	ProtoReader rd = { .buf = NULL };
	int sv[2];
	ProtoFrame f;
	int r;

	FUZZ_ASSERT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	if (size)
		FUZZ_ASSERT(write(sv[1], data, size) == (ssize_t)size);
	close(sv[1]);
	while ((r = buffered ? proto_reader_next(&rd, sv[0], &f) : proto_read_frame(sv[0], &f)) ==
	       0) {
		FUZZ_ASSERT(f.type == PROTO_JSON || f.type == PROTO_DATA);
		FUZZ_ASSERT(f.payload && f.payload[f.len] == '\0' && f.nfds == 0);
		log_frame(lg, &f);
		proto_frame_clear(&f);
	}
	FUZZ_ASSERT(r == -ECONNRESET || r == -EPIPE || r == -EBADMSG || r == -EMSGSIZE ||
		    r == -ENOMEM);
	/* A zeroed frame was left behind on failure. */
	FUZZ_ASSERT(!f.payload && f.nfds == 0);
	FUZZ_ASSERT(r != -ECONNRESET || size == 0 || lg->frames > 0);
	lg->end = r;
	proto_reader_reset(&rd);
	close(sv[0]);
}

/* Both readers see the same frames and end the same way. */
static void read_both(const uint8_t *data, size_t size)
{
	ReadLog one = { 0 }, buffered = { 0 };

	/* Beyond the socket buffer a blocking write would wait for a reader. */
	if (size > 64 * 1024)
		return;
	read_stream(data, size, false, &one);
	read_stream(data, size, true, &buffered);
	FUZZ_ASSERT(one.frames == buffered.frames && one.end == buffered.end);
	for (size_t i = 0; i < one.frames && i < sizeof(one.sums) / sizeof(one.sums[0]); i++)
		FUZZ_ASSERT(one.sums[i] == buffered.sums[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t hdr[PROTO_HEADER_SIZE];

	decode_stream(data, size);
	read_both(data, size);

	/* Encoding and parsing agree on a header made from the input's first bytes. */
	if (size >= 5) {
		uint32_t len = ((uint32_t)data[0] | (uint32_t)data[1] << 8 |
				(uint32_t)data[2] << 16 | (uint32_t)data[3] << 24) %
			       (PROTO_MAX_PAYLOAD + 1);
		uint8_t type = data[4] & 1 ? PROTO_JSON : PROTO_DATA;
		uint8_t t = 0;
		size_t plen = 0;

		proto_header_encode(hdr, type, len);
		FUZZ_ASSERT(proto_frame_parse(hdr, sizeof(hdr), &t, &plen) ==
			    (len == 0 ? PROTO_HEADER_SIZE : 0));
		if (len == 0)
			FUZZ_ASSERT(t == type && plen == 0);
	}
	return 0;
}
