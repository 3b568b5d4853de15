/* SPDX-License-Identifier: MIT */
/* The framed protocol between paddock-fcgi and paddock-sessiond. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * A frame is a 5-byte header (payload length as u32 little-endian, then a type
 * byte) followed by the payload. A request is one PROTO_JSON frame. A reply is
 * one or more frames ending with a PROTO_JSON frame; file descriptors ride on
 * the reply's first byte as SCM_RIGHTS.
 */
enum proto_type {
	PROTO_JSON = 'J', /* a JSON object */
	PROTO_DATA = 'D', /* a streamed run's output, before its reply: enum proto_stream */
};

/*
 * A PROTO_DATA payload is one byte naming what it carries, then the bytes. Only an exec
 * request that asked for "stream" gets them; its reply (a PROTO_JSON frame) ends them.
 */
enum proto_stream {
	PROTO_STREAM_STARTED = 's', /* the call was taken and runs (no bytes follow) */
	PROTO_STREAM_STDOUT = 'o',  /* bytes the program wrote to stdout, as read */
	PROTO_STREAM_STDERR = 'e',  /* the same for stderr */
	PROTO_STREAM_DISPLAY = 'd', /* a rich output as the harness published it: one JSON object */
};

#define PROTO_HEADER_SIZE 5
#define PROTO_MAX_PAYLOAD (32u << 20)
#define PROTO_MAX_FDS 4
/* The longest call_tag an exec may carry (the name cancel finds the call by). */
#define PROTO_CALL_TAG_MAX 256

/* One received frame; payload is owned by the frame. */
typedef struct ProtoFrame {
	uint8_t type;		/* enum proto_type */
	char *payload;		/* NUL-terminated copy of the payload */
	size_t len;		/* payload length without the NUL */
	int fds[PROTO_MAX_FDS]; /* received descriptors, -1 where unused */
	size_t nfds;		/* how many of fds are set */
} ProtoFrame;

void proto_header_encode(uint8_t hdr[PROTO_HEADER_SIZE], uint8_t type, uint32_t len);

/*
 * Look at buf for one whole frame. Returns the frame's total size (header and
 * payload) when complete, 0 when more bytes are needed, -EBADMSG for an unknown
 * type and -EMSGSIZE for a payload over PROTO_MAX_PAYLOAD.
 */
ssize_t proto_frame_parse(const uint8_t *buf, size_t len, uint8_t *type, size_t *payload_len);

/*
 * Connect to sessiond's unix socket at path; replies that take longer than
 * reply_timeout_s make reads fail with EAGAIN. Returns the fd or -errno.
 */
int proto_connect(const char *path, int reply_timeout_s);

/* Blocking write of a whole frame, with optional descriptors attached. */
int proto_write_frame(int fd, uint8_t type, const void *payload, size_t len, const int *fds,
		      size_t nfds);

/* Blocking read of one frame; -ECONNRESET on a clean EOF before a header. */
int proto_read_frame(int fd, ProtoFrame *f);

/* Close received descriptors and free the payload. Accepts a zeroed frame. */
void proto_frame_clear(ProtoFrame *f);

/*
 * A blocking reader that takes what the socket holds in one recvmsg() (a reply's header and
 * payload together, usually) and keeps the rest for the next frame. Zero it to start;
 * descriptors that came go with the next frame handed out.
 */
typedef struct ProtoReader {
	uint8_t *buf;		/* bytes received, not yet handed out, from buf[0] */
	size_t len, cap;	/* used and allocated bytes of buf */
	int fds[PROTO_MAX_FDS]; /* descriptors received, not yet handed out */
	size_t nfds;
} ProtoReader;

/* Whether a whole frame (or a bad header) waits in rd: the next call reads nothing. */
bool proto_reader_ready(const ProtoReader *rd);
/* The next frame, as proto_read_frame() reads one. */
int proto_reader_next(ProtoReader *rd, int fd, ProtoFrame *f);
/* Forget what was received (the connection is closed): free and close, and zero rd. */
void proto_reader_reset(ProtoReader *rd);
