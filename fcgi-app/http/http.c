/* SPDX-License-Identifier: MIT */
/* HTTP over libfcgi: the one place its stream errors become -errno. */
#include "http.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <unistd.h>

#include "cleanup.h"
#include "io.h"
#include "json.h"
#include "log.h"

#define DRAIN_MAX (1 << 20) /* unread body we read away to keep a connection */

static int fcgx_errno(FCGX_Stream *s)
{
	int e = FCGX_GetError(s);

	/* Positive: an errno; negative: libfcgi's own protocol errors. */
	return e > 0 ? -e : -EIO;
}

static const char *reason(int status)
{
	switch (status) {
	case 200: return "OK";
	case 201: return "Created";
	case 202: return "Accepted";
	case 204: return "No Content";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 406: return "Not Acceptable";
	case 409: return "Conflict";
	case 411: return "Length Required";
	case 413: return "Content Too Large";
	case 415: return "Unsupported Media Type";
	case 422: return "Unprocessable Content";
	case 500: return "Internal Server Error";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	default: return "Unknown";
	}
}

static int64_t parse_length(const char *s)
{
	char *end;
	long long v;

	if (!s || !*s)
		return -1;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || *end || v < 0)
		return -1;
	return v;
}

int http_init(HttpReq *h, FCGX_Request *fcgi)
{
	const char *uri, *q;

	*h = (HttpReq){ .fcgi = fcgi };
	h->method = http_param(h, "REQUEST_METHOD");
	if (!h->method)
		h->method = "";
	h->request_id = http_param(h, "REQUEST_ID");
	if (!h->request_id || !*h->request_id)
		h->request_id = "-";
	h->content_type = http_param(h, "CONTENT_TYPE");
	if (!h->content_type)
		h->content_type = "";
	h->content_length = parse_length(http_param(h, "CONTENT_LENGTH"));
	/* REQUEST_URI is what the client sent, undecoded: routing decodes per segment. */
	uri = http_param(h, "REQUEST_URI");
	if (!uri)
		uri = http_param(h, "DOCUMENT_URI");
	if (!uri)
		uri = "";
	if (uri[0] != '/' && strstr(uri, "://")) { /* absolute-form: drop scheme and host */
		uri = strchr(strstr(uri, "://") + 3, '/');
		if (!uri)
			uri = "/";
	}
	q = strchr(uri, '?');
	h->path = strndup(uri, q ? (size_t)(q - uri) : strlen(uri));
	if (!h->path)
		return -ENOMEM;
	h->query = q ? q + 1 : "";
	return 0;
}

void http_done(HttpReq *h)
{
	free(h->path);
	h->path = NULL;
}

const char *http_param(const HttpReq *h, const char *name)
{
	return FCGX_GetParam(name, h->fcgi->envp);
}

/* One system call per 8 KiB was most of a large upload's cost in the worker. A libfcgi
 * whose stream is not the one expected keeps its own reads; the log says so once. */
static void reader_enlarge_once(HttpReq *h)
{
	static atomic_bool told;
	int r = http_reader_enlarge(h->fcgi, HTTP_LARGE_READ);

	if (r == -EPROTO && !atomic_exchange(&told, true))
		log_warn("libfcgi's request stream is not laid out as expected: large bodies are "
			 "read 8 KiB at a time");
}

ssize_t http_read(HttpReq *h, void *buf, size_t len)
{
	int n;

	if (h->body_eof || len == 0)
		return 0;
	if (!h->body_started) {
		h->body_started = true;
		if (h->content_length >= HTTP_LARGE_BODY)
			reader_enlarge_once(h);
	}
	if (len > INT32_MAX)
		len = INT32_MAX;
	n = FCGX_GetStr(buf, (int)len, h->fcgi->in);
	if (n < 0 || (n == 0 && FCGX_GetError(h->fcgi->in) != 0))
		return fcgx_errno(h->fcgi->in);
	if (n == 0)
		h->body_eof = true;
	return n;
}

int http_read_all(HttpReq *h, size_t max, char **ret, size_t *len)
{
	_cleanup_free_ char *buf = NULL;
	size_t cap = 0, used = 0;

	if (h->content_length > 0 && (uint64_t)h->content_length > max)
		return -EFBIG;
	for (;;) {
		ssize_t n;

		if (cap - used < 4096) {
			size_t ncap = cap ? cap * 2 : 8192;
			char *nb;

			if (ncap > max + 4096 + 1)
				ncap = max + 4096 + 1;
			if (ncap <= cap)
				return -EFBIG;
			nb = realloc(buf, ncap);
			if (!nb)
				return -ENOMEM;
			buf = nb;
			cap = ncap;
		}
		n = http_read(h, buf + used, cap - used - 1);
		if (n < 0)
			return (int)n;
		if (n == 0)
			break;
		used += (size_t)n;
		if (used > max)
			return -EFBIG;
	}
	buf[used] = '\0';
	*len = used;
	*ret = TAKE_PTR(buf);
	return 0;
}

/* Head text built by appends: libfcgi's own printf formats each field through sprintf. */
typedef struct Head {
	char buf[1024];
	size_t len;
	bool overflow;
} Head;

static void head_add(Head *hd, const char *s)
{
	size_t n = strlen(s);

	if (hd->len + n >= sizeof(hd->buf)) {
		hd->overflow = true;
		return;
	}
	memcpy(hd->buf + hd->len, s, n);
	hd->len += n;
}

/* A non-negative decimal. */
static void head_add_u64(Head *hd, uint64_t v)
{
	char d[24], *p = d + sizeof(d) - 1;

	*p = '\0';
	do
		*--p = (char)('0' + v % 10);
	while ((v /= 10) != 0);
	head_add(hd, p);
}

int http_send_head(HttpReq *h, int status, const char *content_type, int64_t content_length,
		   const char *extra)
{
	Head hd = { .len = 0 };

	if (h->status)
		return -EALREADY;
	h->status = status;
	head_add(&hd, "Status: ");
	head_add_u64(&hd, (uint64_t)status);
	head_add(&hd, " ");
	head_add(&hd, reason(status));
	head_add(&hd, "\r\n");
	if (content_type) {
		head_add(&hd, "Content-Type: ");
		head_add(&hd, content_type);
		head_add(&hd, "\r\n");
	}
	if (content_length >= 0) {
		head_add(&hd, "Content-Length: ");
		head_add_u64(&hd, (uint64_t)content_length);
		head_add(&hd, "\r\n");
	}
	if (hd.overflow)
		return -ENOBUFS;
	/* extra may be long (a Link or an Allow list): written as it is. */
	if (FCGX_PutStr(hd.buf, (int)hd.len, h->fcgi->out) != (int)hd.len ||
	    (extra && http_write(h, extra, strlen(extra)) < 0) ||
	    FCGX_PutStr("\r\n", 2, h->fcgi->out) != 2)
		return fcgx_errno(h->fcgi->out);
	return 0;
}

int http_write(HttpReq *h, const void *buf, size_t len)
{
	while (len > 0) {
		int chunk = len > INT32_MAX ? INT32_MAX : (int)len;

		if (FCGX_PutStr(buf, chunk, h->fcgi->out) != chunk)
			return fcgx_errno(h->fcgi->out);
		buf = (const char *)buf + chunk;
		len -= (size_t)chunk;
	}
	return 0;
}

/* FastCGI's record header (version 1, FCGI_STDOUT); content is at most 65535 bytes. */
#define FCGI_STDOUT_TYPE 6
#define RECORD_CONTENT_MAX 65528 /* the largest multiple of 8 that fits */

/* One FCGI_STDOUT record whose content is the next len bytes of fd, sent by sendfile. */
static int send_record_from_fd(int sock, int request_id, int fd, size_t len)
{
	const uint8_t hdr[8] = { 1,
				 FCGI_STDOUT_TYPE,
				 (uint8_t)(request_id >> 8),
				 (uint8_t)request_id,
				 (uint8_t)(len >> 8),
				 (uint8_t)len,
				 0,
				 0 };
	static const uint8_t zeros[4096];
	int r = io_write_all(sock, hdr, sizeof(hdr));

	while (r == 0 && len > 0) {
		ssize_t n = sendfile(sock, fd, NULL, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN && io_wait_writable(sock) == 0)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0) {
			/* The file shrank: keep the record whole, then report it. */
			while (r == 0 && len > 0) {
				size_t k = len < sizeof(zeros) ? len : sizeof(zeros);

				r = io_write_all(sock, zeros, k);
				len -= k;
			}
			return r < 0 ? r : -ENODATA;
		}
		len -= (size_t)n;
	}
	return r;
}

int http_send_fd(HttpReq *h, int fd, int64_t size)
{
	/*
	 * libfcgi copies a body through an 8 KiB buffer, one record and one write each;
	 * for a file, full-size records go straight to nginx's socket, the bytes moved by
	 * the kernel. What libfcgi buffered (the head) is flushed first, so records stay
	 * in order; FCGX_Finish_r then ends the stream as usual.
	 */
	FCGX_Request *f = h->fcgi;
	int64_t sent = 0;

	if (FCGX_FFlush(f->out) < 0)
		return fcgx_errno(f->out);
	while (sent < size) {
		size_t chunk = size - sent < RECORD_CONTENT_MAX ? (size_t)(size - sent) :
								  RECORD_CONTENT_MAX;
		int r = send_record_from_fd(f->ipcFd, f->requestId, fd, chunk);

		if (r < 0)
			return r;
		sent += (int64_t)chunk;
	}
	return 0;
}

bool http_wants_sse(const HttpReq *h)
{
	const char *accept = http_param(h, "HTTP_ACCEPT");

	return accept && strstr(accept, "text/event-stream");
}

int http_send_json_text(HttpReq *h, int status, const char *text, size_t len, const char *extra)
{
	int r;

	if (h->sse)
		return sse_event(h, status >= 400 ? "error" : "result", text, len);
	r = http_send_head(h, status, "application/json", (int64_t)len, extra);
	if (r < 0)
		return r;
	return http_write(h, text, len);
}

int http_send_json(HttpReq *h, int status, json_object *body, const char *extra)
{
	_cleanup_(json_text_clear) JsonText t = { .buf = NULL };

	json_text_add_value(&t, body);
	if (t.failed)
		return -ENOMEM;
	return http_send_json_text(h, status, t.buf, t.len, extra);
}

int http_error(HttpReq *h, int status, const char *extra, const char *fmt, ...)
{
	_cleanup_json_ json_object *o = json_object_new_object();
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (!o || json_set(o, "detail", json_object_new_string(msg)) < 0) {
		/* Out of memory: still answer, with a fixed body. */
		static const char fallback[] = "{\"detail\": \"out of memory\"}";

		if (h->sse)
			return sse_event(h, "error", fallback, sizeof(fallback) - 1);
		http_send_head(h, status, "application/json", sizeof(fallback) - 1, extra);
		return http_write(h, fallback, sizeof(fallback) - 1);
	}
	return http_send_json(h, status, o, extra);
}

void http_finish(HttpReq *h)
{
	char buf[16384];
	size_t drained = 0;

	while (!h->body_eof && drained < DRAIN_MAX) {
		ssize_t n = http_read(h, buf, sizeof(buf));

		if (n <= 0)
			break;
		drained += (size_t)n;
	}
	/* Records of this request left on a kept connection would confuse libfcgi's next
	 * accept; a closed connection is the clean way out. */
	if (!h->body_eof)
		h->fcgi->keepConnection = 0;
}
