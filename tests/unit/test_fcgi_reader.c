/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for http_reader_enlarge() against the real libfcgi: a request written to a
 * unix socket as nginx frames it (records of many sizes, with padding), accepted by
 * libfcgi, its reader enlarged at several points of the body, and the body read back
 * byte for byte; the reads from the socket must then be larger than libfcgi's own.
 */
#include <errno.h>
#include <signal.h>
#include <fastcgi.h>
#include <fcgiapp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "http/http.h"

#include "unit.h"

#define BODY_LEN (2 * 1024 * 1024 + 777)

/* What the client side writes: the whole request, framed. */
struct wire {
	unsigned char *buf;
	size_t len, cap;
};

static void wire_put(struct wire *w, const void *p, size_t n)
{
	if (n == 0) /* an empty record's content: NULL, and memcpy() may not be given NULL */
		return;
	if (w->len + n > w->cap) {
		w->cap = (w->len + n) * 2;
		w->buf = realloc(w->buf, w->cap);
		if (!w->buf)
			abort();
	}
	memcpy(w->buf + w->len, p, n);
	w->len += n;
}

static void wire_record(struct wire *w, int type, const void *content, size_t len, size_t pad)
{
	unsigned char h[FCGI_HEADER_LEN] = {
		FCGI_VERSION_1,	    (unsigned char)type, 0, 1, (unsigned char)(len >> 8),
		(unsigned char)len, (unsigned char)pad,	 0
	};
	static const unsigned char zeros[8];

	wire_put(w, h, sizeof(h));
	wire_put(w, content, len);
	wire_put(w, zeros, pad);
}

/* BEGIN_REQUEST, CONTENT_LENGTH as the one param, then body in STDIN records whose sizes
 * and paddings cycle through sizes (0 ends a cycle's list). */
static void wire_request(struct wire *w, const unsigned char *body, size_t len, const size_t *sizes)
{
	unsigned char begin[8] = { 0, FCGI_RESPONDER, 0 };
	char value[32];
	unsigned char param[64];
	size_t vlen = (size_t)snprintf(value, sizeof(value), "%zu", len), off = 0, i = 0;

	wire_record(w, FCGI_BEGIN_REQUEST, begin, sizeof(begin), 0);
	param[0] = (unsigned char)strlen("CONTENT_LENGTH");
	param[1] = (unsigned char)vlen;
	memcpy(param + 2, "CONTENT_LENGTH", param[0]);
	memcpy(param + 2 + param[0], value, vlen);
	wire_record(w, FCGI_PARAMS, param, 2 + param[0] + vlen, 3);
	wire_record(w, FCGI_PARAMS, NULL, 0, 0);
	while (off < len) {
		size_t n = sizes[i];

		if (!n) {
			i = 0;
			continue;
		}
		if (n > len - off)
			n = len - off;
		wire_record(w, FCGI_STDIN, body + off, n, (off + i) % 8);
		off += n;
		i++;
	}
	wire_record(w, FCGI_STDIN, NULL, 0, 0);
}

/* A listening socket with one client connected that has written the whole request, so
 * the socket holds all of it before libfcgi reads any. */
static int listen_with_request(const struct wire *w, int *client)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int lfd = socket(AF_UNIX, SOCK_STREAM, 0), c = socket(AF_UNIX, SOCK_STREAM, 0);
	int big = (int)w->len * 2;
	size_t done = 0;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "/tmp/paddock-test-fcgi-%d", (int)getpid());
	unlink(sa.sun_path);
	if (lfd < 0 || c < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(lfd, 4) < 0 || connect(c, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		abort();
	unlink(sa.sun_path);
	/* Above wmem_max, so that the writes below complete with nobody reading yet. */
	if (setsockopt(c, SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof(big)) < 0) {
		printf("skipped: a socket buffer above wmem_max needs CAP_NET_ADMIN\n");
		exit(77);
	}
	while (done < w->len) {
		ssize_t n = write(c, w->buf + done, w->len - done);

		if (n <= 0)
			abort();
		done += (size_t)n;
	}
	*client = c;
	return lfd;
}

static int queued(int fd)
{
	int n = -1;

	return ioctl(fd, FIONREAD, &n) < 0 ? -1 : n;
}

/* Read body_prefix bytes, enlarge, then the rest in chunks of odd sizes. */
static void read_back(const unsigned char *body, const size_t *sizes, size_t prefix,
		      bool check_reads)
{
	static const int chunks[] = { 1, 4093, 65536, 300000, 17, 8192, 131071 };
	struct wire w = { 0 };
	FCGX_Request req;
	FCGX_Stream *in;
	unsigned char *rd, *stop;
	unsigned char *got = malloc(BODY_LEN + 1);
	size_t have = 0;
	int lfd, client, r, ci = 0;

	wire_request(&w, body, BODY_LEN, sizes);
	lfd = listen_with_request(&w, &client);
	CHECK_EQ_INT(FCGX_InitRequest(&req, lfd, 0), 0);
	CHECK_EQ_INT(FCGX_Accept_r(&req), 0);
	CHECK_EQ_STR(FCGX_GetParam("CONTENT_LENGTH", req.envp), "2097929");
	if (prefix)
		have = (size_t)FCGX_GetStr((char *)got, (int)prefix, req.in);
	CHECK_EQ_INT(have, prefix);

	r = http_reader_enlarge(&req, HTTP_LARGE_READ);
	CHECK_EQ_INT(r, 0);
	rd = req.in->rdNext;
	stop = req.in->stop;
	CHECK_EQ_INT(http_reader_enlarge(&req, HTTP_LARGE_READ), 0); /* already that large */
	CHECK(req.in->rdNext == rd && req.in->stop == stop);
	/* A writer is not a reader: refused, untouched. */
	in = req.in;
	req.in = req.out;
	rd = req.out->wrNext;
	CHECK_EQ_INT(http_reader_enlarge(&req, 2 * HTTP_LARGE_READ), -EPROTO);
	CHECK(req.out->wrNext == rd);
	req.in = in;
	if (check_reads) {
		/* Byte by byte through what libfcgi had read already: the first byte that
		 * needs the socket is one read of the enlarged size, from a socket that holds
		 * far more. */
		int before = queued(req.ipcFd);

		CHECK(before > 2 * HTTP_LARGE_READ);
		while (queued(req.ipcFd) == before && have < BODY_LEN &&
		       FCGX_GetStr((char *)got + have, 1, req.in) == 1)
			have++;
		CHECK_EQ_INT(before - queued(req.ipcFd), HTTP_LARGE_READ);
	}
	for (;;) {
		int n = FCGX_GetStr((char *)got + have, chunks[ci++ % 7], req.in);

		if (n <= 0)
			break;
		have += (size_t)n;
		if (have > BODY_LEN)
			break;
	}
	CHECK_EQ_INT(have, BODY_LEN);
	CHECK(have == BODY_LEN && memcmp(got, body, BODY_LEN) == 0);
	CHECK_EQ_INT(FCGX_GetError(req.in), 0);
	/* Read to its end, the stream is closed: refused, untouched. */
	rd = req.in->rdNext;
	stop = req.in->stop;
	CHECK_EQ_INT(http_reader_enlarge(&req, 2 * HTTP_LARGE_READ), -EPROTO);
	CHECK(req.in->rdNext == rd && req.in->stop == stop);
	/* Gone first: libfcgi's close waits up to 2 s for its peer to hang up. */
	close(client);
	FCGX_Finish_r(&req);
	close(lfd);
	free(got);
	free(w.buf);
}

int main(void)
{
	/* nginx's records (32 KiB and what is left), the largest one, and small odd ones. */
	static const size_t nginx[] = { 32768, 0 };
	static const size_t mixed[] = { 65535, 1, 7, 8191, 8193, 3000, 65528, 5, 0 };
	static const size_t prefixes[] = { 0, 1, 5000, 8100, 32768, 40000 };
	unsigned char *body = malloc(BODY_LEN);
	uint32_t x = 2463534242u;
	FCGX_Request req;

	if (!body || FCGX_Init() != 0)
		return 1;
	signal(SIGPIPE, SIG_IGN);		/* the reply's records go to a closed client */
	for (size_t i = 0; i < BODY_LEN; i++) { /* xorshift: no period a record could hide */
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		body[i] = (unsigned char)x;
	}
	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
		read_back(body, nginx, prefixes[i], i == 0);
		read_back(body, mixed, prefixes[i], i == 2);
	}

	/* A request without a stream is refused, not touched. */
	memset(&req, 0, sizeof(req));
	CHECK_EQ_INT(http_reader_enlarge(&req, HTTP_LARGE_READ), -EINVAL);
	free(body);
	return unit_summary();
}
