/* SPDX-License-Identifier: MIT */
/* Frame encoding and blocking frame I/O for the worker side. */
#include "proto.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/uio.h>
#include <unistd.h>

#include "fdpass.h"

void proto_header_encode(uint8_t hdr[PROTO_HEADER_SIZE], uint8_t type, uint32_t len)
{
	hdr[0] = len & 0xff;
	hdr[1] = (len >> 8) & 0xff;
	hdr[2] = (len >> 16) & 0xff;
	hdr[3] = (len >> 24) & 0xff;
	hdr[4] = type;
}

static bool type_known(uint8_t t)
{
	return t == PROTO_JSON || t == PROTO_DATA;
}

ssize_t proto_frame_parse(const uint8_t *buf, size_t len, uint8_t *type, size_t *payload_len)
{
	uint32_t n;

	if (len < PROTO_HEADER_SIZE)
		return 0;
	n = (uint32_t)buf[0] | (uint32_t)buf[1] << 8 | (uint32_t)buf[2] << 16 |
	    (uint32_t)buf[3] << 24;
	if (!type_known(buf[4]))
		return -EBADMSG;
	if (n > PROTO_MAX_PAYLOAD)
		return -EMSGSIZE;
	if (len - PROTO_HEADER_SIZE < n)
		return 0;
	*type = buf[4];
	*payload_len = n;
	return (ssize_t)(PROTO_HEADER_SIZE + n);
}

int proto_write_frame(int fd, uint8_t type, const void *payload, size_t len, const int *fds,
		      size_t nfds)
{
	uint8_t hdr[PROTO_HEADER_SIZE];
	struct iovec iov[2];
	union {
		char buf[CMSG_SPACE(sizeof(int) * PROTO_MAX_FDS)];
		struct cmsghdr align;
	} cbuf;
	struct msghdr msg = { .msg_iov = iov, .msg_iovlen = 2 };
	size_t total = PROTO_HEADER_SIZE + len, done = 0;

	if (len > PROTO_MAX_PAYLOAD || nfds > PROTO_MAX_FDS)
		return -EMSGSIZE;
	proto_header_encode(hdr, type, (uint32_t)len);
	if (nfds > 0) {
		struct cmsghdr *c;

		memset(&cbuf, 0, sizeof(cbuf));
		msg.msg_control = cbuf.buf;
		msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
	}
	while (done < total) {
		ssize_t r;

		if (done < PROTO_HEADER_SIZE) {
			iov[0] = (struct iovec){ hdr + done, PROTO_HEADER_SIZE - done };
			iov[1] = (struct iovec){ (void *)payload, len };
			msg.msg_iovlen = 2;
		} else {
			iov[0] = (struct iovec){ (char *)payload + (done - PROTO_HEADER_SIZE),
						 total - done };
			msg.msg_iovlen = 1;
		}
		r = sendmsg(fd, &msg, MSG_NOSIGNAL);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		done += (size_t)r;
		msg.msg_control = NULL;
		msg.msg_controllen = 0;
	}
	return 0;
}

/* Read exactly len bytes, collecting any descriptors that arrive. */
static int read_full(int fd, void *buf, size_t len, ProtoFrame *f, bool eof_ok)
{
	size_t got = 0;

	while (got < len) {
		union {
			char buf[CMSG_SPACE(sizeof(int) * PROTO_MAX_FDS)];
			struct cmsghdr align;
		} cbuf;
		struct iovec iov = { (char *)buf + got, len - got };
		struct msghdr msg = { .msg_iov = &iov,
				      .msg_iovlen = 1,
				      .msg_control = cbuf.buf,
				      .msg_controllen = sizeof(cbuf.buf) };
		ssize_t r = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		cmsg_take_fds(&msg, f->fds, &f->nfds, PROTO_MAX_FDS);
		if (r == 0)
			return (got == 0 && eof_ok) ? -ECONNRESET : -EPIPE;
		got += (size_t)r;
	}
	return 0;
}

int proto_read_frame(int fd, ProtoFrame *f)
{
	uint8_t hdr[PROTO_HEADER_SIZE];
	size_t n;
	uint8_t type;
	int r;

	*f = (ProtoFrame){ .fds = { -1, -1, -1, -1 } };
	r = read_full(fd, hdr, sizeof(hdr), f, true);
	if (r < 0)
		goto fail;
	/* Only the header is present: parse reports the length it announces. */
	n = (uint32_t)hdr[0] | (uint32_t)hdr[1] << 8 | (uint32_t)hdr[2] << 16 |
	    (uint32_t)hdr[3] << 24;
	type = hdr[4];
	if (!type_known(type)) {
		r = -EBADMSG;
		goto fail;
	}
	if (n > PROTO_MAX_PAYLOAD) {
		r = -EMSGSIZE;
		goto fail;
	}
	f->payload = malloc(n + 1);
	if (!f->payload) {
		r = -ENOMEM;
		goto fail;
	}
	r = read_full(fd, f->payload, n, f, false);
	if (r < 0)
		goto fail;
	f->payload[n] = '\0';
	f->len = n;
	f->type = type;
	return 0;
fail:
	proto_frame_clear(f);
	return r;
}

void proto_frame_clear(ProtoFrame *f)
{
	for (size_t i = 0; i < f->nfds; i++)
		if (f->fds[i] >= 0)
			close(f->fds[i]);
	free(f->payload);
	*f = (ProtoFrame){ .fds = { -1, -1, -1, -1 } };
}

int proto_connect(const char *path, int reply_timeout_s)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = reply_timeout_s };
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* A hung daemon must not hold a caller forever. */
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0) {
		int r = -errno;

		close(fd);
		return r;
	}
	return fd;
}

/* What a read asks the socket for beyond the frame in hand: a reply of any usual size. */
#define READER_CHUNK 65536

void proto_reader_reset(ProtoReader *rd)
{
	for (size_t i = 0; i < rd->nfds; i++)
		close(rd->fds[i]);
	free(rd->buf);
	*rd = (ProtoReader){ .buf = NULL };
}

/* Room in rd->buf for want bytes in all. */
static int reader_reserve(ProtoReader *rd, size_t want)
{
	uint8_t *grown;

	if (rd->cap >= want)
		return 0;
	grown = realloc(rd->buf, want);
	if (!grown)
		return -ENOMEM;
	rd->buf = grown;
	rd->cap = want;
	return 0;
}

/* One recvmsg() into the free end of rd->buf: bytes and descriptors kept in rd. */
static int reader_fill(ProtoReader *rd, int fd)
{
	for (;;) {
		union {
			char buf[CMSG_SPACE(sizeof(int) * PROTO_MAX_FDS)];
			struct cmsghdr align;
		} cbuf;
		struct iovec iov = { rd->buf + rd->len, rd->cap - rd->len };
		struct msghdr msg = { .msg_iov = &iov,
				      .msg_iovlen = 1,
				      .msg_control = cbuf.buf,
				      .msg_controllen = sizeof(cbuf.buf) };
		ssize_t r = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		cmsg_take_fds(&msg, rd->fds, &rd->nfds, PROTO_MAX_FDS);
		if (r == 0)
			return rd->len == 0 ? -ECONNRESET : -EPIPE;
		rd->len += (size_t)r;
		return 0;
	}
}

/* Hand out the whole frame at the start of rd->buf (type, payload of n bytes). */
static int reader_take(ProtoReader *rd, uint8_t type, size_t n, ProtoFrame *f)
{
	size_t total = PROTO_HEADER_SIZE + n;

	f->payload = malloc(n + 1);
	if (!f->payload)
		return -ENOMEM;
	memcpy(f->payload, rd->buf + PROTO_HEADER_SIZE, n);
	f->payload[n] = '\0';
	f->len = n;
	f->type = type;
	for (size_t i = 0; i < rd->nfds; i++)
		f->fds[f->nfds++] = rd->fds[i];
	rd->nfds = 0;
	memmove(rd->buf, rd->buf + total, rd->len - total);
	rd->len -= total;
	/* A large frame's buffer goes back once it is handed out. */
	if (rd->cap > 16 * READER_CHUNK && rd->len <= READER_CHUNK) {
		uint8_t *small = realloc(rd->buf, READER_CHUNK);

		if (small) {
			rd->buf = small;
			rd->cap = READER_CHUNK;
		}
	}
	return 0;
}

bool proto_reader_ready(const ProtoReader *rd)
{
	const uint8_t *h = rd->buf;
	size_t n;

	if (rd->len < PROTO_HEADER_SIZE)
		return false;
	n = (uint32_t)h[0] | (uint32_t)h[1] << 8 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 24;
	return !type_known(h[4]) || n > PROTO_MAX_PAYLOAD || rd->len >= PROTO_HEADER_SIZE + n;
}

int proto_reader_next(ProtoReader *rd, int fd, ProtoFrame *f)
{
	int r;

	*f = (ProtoFrame){ .fds = { -1, -1, -1, -1 } };
	for (;;) {
		size_t need = PROTO_HEADER_SIZE;

		if (rd->len >= PROTO_HEADER_SIZE) {
			const uint8_t *h = rd->buf;
			size_t n = (uint32_t)h[0] | (uint32_t)h[1] << 8 | (uint32_t)h[2] << 16 |
				   (uint32_t)h[3] << 24;

			if (!type_known(h[4]))
				return -EBADMSG;
			if (n > PROTO_MAX_PAYLOAD)
				return -EMSGSIZE;
			if (rd->len >= PROTO_HEADER_SIZE + n)
				return reader_take(rd, h[4], n, f);
			need = PROTO_HEADER_SIZE + n;
		}
		r = reader_reserve(rd,
				   need > rd->len + READER_CHUNK ? need : rd->len + READER_CHUNK);
		if (r < 0)
			return r;
		r = reader_fill(rd, fd);
		if (r < 0)
			return r;
	}
}
