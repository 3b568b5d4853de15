/* SPDX-License-Identifier: MIT */
/* HTTP over FastCGI: CGI params, capped body reads, a body as one JSON object, responses,
 * JSON error bodies. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <fcgiapp.h>
#include <json-c/json.h>

/* One request's HTTP view. Strings are borrowed from the FastCGI params except path. */
typedef struct HttpReq {
	FCGX_Request *fcgi;	  /* the libfcgi request */
	const char *method;	  /* REQUEST_METHOD */
	char *path;		  /* raw path part of REQUEST_URI (owned) */
	const char *query;	  /* raw query string, "" when none */
	const char *request_id;	  /* nginx's $request_id, "-" when absent */
	const char *content_type; /* CONTENT_TYPE, "" when absent */
	int64_t content_length;	  /* CONTENT_LENGTH, -1 when absent or unparseable */
	bool body_eof;		  /* stdin was read to its end */
	bool body_started;	  /* the body's first read was made */
	int status;		  /* the status sent, 0 before the head */
	bool sse;		  /* the body is an event stream (sse_begin) */
} HttpReq;

int http_init(HttpReq *h, FCGX_Request *fcgi);
void http_done(HttpReq *h);

/* A FastCGI param, or NULL. */
const char *http_param(const HttpReq *h, const char *name);

/* Read up to len body bytes: > 0 read, 0 at the end, -EIO on a broken stream. A body of
 * HTTP_LARGE_BODY bytes or more is read from the socket HTTP_LARGE_READ at a time. */
ssize_t http_read(HttpReq *h, void *buf, size_t len);
#define HTTP_LARGE_BODY (1 << 20)
#define HTTP_LARGE_READ (256 * 1024)

/* Have libfcgi read req's stdin from its socket into a buffer of size bytes instead of
 * its own 8 KiB (reader.c says how). 0 when done or not needed; -EPROTO when the stream
 * is not laid out as expected (then it is left as it was); -ENOMEM, -EINVAL. */
int http_reader_enlarge(FCGX_Request *req, size_t size);

/*
 * Read the whole body into *ret (owned, NUL-terminated). -EFBIG as soon as it is
 * known to exceed max (from CONTENT_LENGTH or while reading), -EIO, -ENOMEM.
 */
int http_read_all(HttpReq *h, size_t max, char **ret, size_t *len);

/*
 * Send the head: status, Content-Type (NULL: none), Content-Length (< 0: none)
 * and extra header lines ("Name: value\r\n"..., or NULL).
 */
int http_send_head(HttpReq *h, int status, const char *content_type, int64_t content_length,
		   const char *extra);
int http_write(HttpReq *h, const void *buf, size_t len);
/* Send size bytes of fd (read from its current offset) as the body, after the head.
 * -ENODATA if the file ended early; on any error the connection must not be reused. */
int http_send_fd(HttpReq *h, int fd, int64_t size);

/* A JSON response; body is not consumed. Once an event stream has begun, the body is its
 * last event instead: `result`, or `error` for a status of 400 or more. */
int http_send_json(HttpReq *h, int status, json_object *body, const char *extra);
/* The same for a body already rendered: len bytes of JSON text on one line. */
int http_send_json_text(HttpReq *h, int status, const char *text, size_t len, const char *extra);

/* {"detail": "<sentence>"} with Content-Type: application/json. */
int http_error(HttpReq *h, int status, const char *extra, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* ---- Server-Sent Events (sse.c): a 200 whose body is events, each flushed at once ---- */

/* The client asked for an event stream (Accept names text/event-stream). */
bool http_wants_sse(const HttpReq *h);
/* The head: 200, text/event-stream, no caching, and no buffering in nginx. */
int sse_begin(HttpReq *h);
/* "event: <event>\ndata: <data>\n\n"; data holds no line break (rendered JSON). */
int sse_event(HttpReq *h, const char *event, const char *data, size_t len);
int sse_json_event(HttpReq *h, const char *event, json_object *data);
/* A comment line, so that proxies and clients see the stream is alive. */
int sse_heartbeat(HttpReq *h);

/* ---- a body as one JSON object (body.c): the checks both APIs share ---- */

/* What kept a body from becoming a JSON object; each API words and shapes it its own way. */
enum body_problem {
	BODY_EMPTY,	 /* nothing but white space */
	BODY_TOO_LARGE,	 /* over max_bytes */
	BODY_UNREADABLE, /* the connection failed */
	BODY_NOT_JSON,	 /* detail says why (the parser's words) */
	BODY_NOT_OBJECT, /* valid JSON, not an object */
	BODY_NO_MEMORY,
};

typedef struct BodyError {
	enum body_problem kind;
	char detail[256]; /* for BODY_NOT_JSON */
} BodyError;

/* Read at most max_bytes and parse them under max_depth. 0 and *ret the object, or -1 and
 * *e filled (with *ret NULL). */
int body_read_json(HttpReq *h, size_t max_bytes, int max_depth, json_object **ret, BodyError *e);

/*
 * Before the request is finished: read what is left of a small body so the
 * connection stays usable; past a bound, ask libfcgi to close it instead.
 */
void http_finish(HttpReq *h);
