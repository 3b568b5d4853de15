/* SPDX-License-Identifier: MIT */
/* The sessiond connection: connect lazily, keep it, reconnect once when it broke. */
#include "client.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cleanup.h"
#include "json.h"
#include "proto.h"

int sessiond_client_init(SessiondClient *c, const char *runtime_dir, int64_t reply_timeout_s)
{
	*c = (SessiondClient){ .fd = -1, .reply_timeout_s = reply_timeout_s };
	if (asprintf(&c->sock_path, "%s/sessiond.sock", runtime_dir) < 0) {
		c->sock_path = NULL;
		return -ENOMEM;
	}
	return 0;
}

/* Close the connection, and forget what it brought. */
static void sessiond_disconnect(SessiondClient *c)
{
	c->fd = safe_close(c->fd);
	proto_reader_reset(&c->rd);
}

void sessiond_client_done(SessiondClient *c)
{
	sessiond_disconnect(c);
	free(c->sock_path);
	c->sock_path = NULL;
}

static int sessiond_connect(SessiondClient *c)
{
	int fd = proto_connect(c->sock_path, c->reply_timeout_s);

	if (fd < 0)
		return fd;
	c->fd = fd;
	return 0;
}

/*
 * Wait until sessiond has sent something, up to the reply timeout. The thread waits in
 * poll() rather than in recvmsg(): when sessiond reads the request, the kernel wakes
 * whoever sleeps on this socket to say it has room again, and only poll() sleeps for
 * input alone; a sleeping recvmsg() would be woken for nothing on every call.
 */
static int wait_readable(SessiondClient *c)
{
	struct pollfd p = { .fd = c->fd, .events = POLLIN };
	int timeout_ms =
		c->reply_timeout_s < INT_MAX / 1000 ? (int)c->reply_timeout_s * 1000 : INT_MAX;

	for (;;) {
		int n = poll(&p, 1, timeout_ms);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		return n == 0 ? -ETIMEDOUT : 0;
	}
}

/* Wait until sessiond has a frame for a streamed call, heartbeating meanwhile; -ECONNABORTED
 * when the client hung up or the stream could not be written. */
static int wait_frame(SessiondClient *c, const SessiondStream *st)
{
	struct pollfd p[2] = { { .fd = c->fd, .events = POLLIN },
			       { .fd = st->hangup_fd, .events = POLLRDHUP } };
	int64_t silent_ms = 0;

	for (;;) {
		int n = poll(p, 2, st->idle_ms);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (p[1].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL))
			return -ECONNABORTED;
		if (p[0].revents)
			return 0;
		if (n > 0)
			continue;
		silent_ms += st->idle_ms;
		if (silent_ms >= c->reply_timeout_s * 1000)
			return -ETIMEDOUT;
		if (st->on_idle(st->ctx) < 0)
			return -ECONNABORTED;
	}
}

/* Whether a reply's text begins as sessiond begins every successful reply (its first
 * member); the caller that relays it checks the whole when it looks for its members. */
static bool reply_text_ok(const char *text, size_t len)
{
	static const char ok[] = "{\"ok\":true,";

	return len > sizeof(ok) - 1 && memcmp(text, ok, sizeof(ok) - 1) == 0;
}

/* Read frames up to the JSON reply; the output frames before it go to st, or nowhere.
 * With keep_text, a reply that is ok stays as text. */
static int read_reply(SessiondClient *c, const SessiondStream *st, bool keep_text,
		      SessiondReply *rep)
{
	ProtoFrame f;
	int r;

	for (;;) {
		if (!proto_reader_ready(&c->rd) &&
		    (r = st ? wait_frame(c, st) : wait_readable(c)) < 0)
			return r;
		r = proto_reader_next(&c->rd, c->fd, &f);
		if (r < 0)
			return r == -EAGAIN ? -ETIMEDOUT : r;
		if (f.type == PROTO_JSON)
			break;
		if (st && f.type == PROTO_DATA && f.len >= 1 &&
		    st->on_data(st->ctx, (uint8_t)f.payload[0], f.payload + 1, f.len - 1) < 0) {
			proto_frame_clear(&f);
			return -ECONNABORTED;
		}
		proto_frame_clear(&f);
	}
	if (f.nfds > 0) {
		rep->fd = f.fds[0];
		f.fds[0] = -1;
	}
	if (keep_text && reply_text_ok(f.payload, f.len)) {
		rep->text = TAKE_PTR(f.payload);
		rep->len = f.len;
		rep->ok = true;
		proto_frame_clear(&f);
		return 0;
	}
	rep->obj = json_in_parse_quick(f.payload, f.len, JSON_TOKENER_DEFAULT_DEPTH);
	proto_frame_clear(&f);
	if (!rep->obj || !json_object_is_type(rep->obj, json_type_object))
		return -EBADMSG;
	return 0;
}

static void interpret(SessiondReply *rep)
{
	json_object *v;
	int64_t ra;

	if (rep->text)
		return; /* kept as text because it is ok */
	rep->ok = json_object_object_get_ex(rep->obj, "ok", &v) && json_object_get_boolean(v);
	if (rep->ok)
		return;
	if (json_in_string(rep->obj, "error", &rep->kind, NULL) <= 0)
		rep->kind = "internal";
	if (json_in_string(rep->obj, "detail", &rep->detail, NULL) <= 0)
		rep->detail = NULL;
	if (json_in_int(rep->obj, "retry_after", &ra) > 0 && ra > 0 && ra < 1000000)
		rep->retry_after = ra;
}

/* Send the request's len bytes s, and read the reply into rep. */
static int call(SessiondClient *c, const char *s, size_t len, enum sessiond_retry retry,
		const SessiondStream *st, bool keep_text, SessiondReply *rep)
{
	int r;

	*rep = (SessiondReply){ .fd = -1 };
	for (int attempt = 0;; attempt++) {
		bool may_retry = attempt == 0 && retry != SESSIOND_RETRY_NEVER;

		if (c->fd < 0) {
			r = sessiond_connect(c);
			if (r < 0)
				return r;
		}
		r = proto_write_frame(c->fd, PROTO_JSON, s, len, NULL, 0);
		if (r < 0) {
			sessiond_disconnect(c);
			if (may_retry && (r == -EPIPE || r == -ECONNRESET || r == -ENOTCONN))
				continue;
			return r;
		}
		r = read_reply(c, st, keep_text, rep);
		if (r < 0) {
			sessiond_reply_clear(rep);
			/* Closed, also when the call was abandoned: sessiond cancels a streamed run
			 * whose connection goes. */
			sessiond_disconnect(c);
			/* EOF before any reply: the daemon restarted under a kept connection. */
			if (may_retry && retry == SESSIOND_RETRY_ANY && r == -ECONNRESET)
				continue;
			return r;
		}
		interpret(rep);
		return 0;
	}
}

/* call() for a request built as a json-c object. */
static int call_object(SessiondClient *c, json_object *req, enum sessiond_retry retry,
		       bool keep_text, SessiondReply *rep)
{
	_cleanup_(json_text_clear) JsonText t = { .buf = NULL };

	*rep = (SessiondReply){ .fd = -1 };
	json_text_add_value(&t, req);
	if (t.failed)
		return -ENOMEM;
	return call(c, t.buf, t.len, retry, NULL, keep_text, rep);
}

int sessiond_call(SessiondClient *c, json_object *req, enum sessiond_retry retry,
		  SessiondReply *rep)
{
	return call_object(c, req, retry, false, rep);
}

int sessiond_call_text(SessiondClient *c, json_object *req, enum sessiond_retry retry,
		       SessiondReply *rep)
{
	return call_object(c, req, retry, true, rep);
}

int sessiond_call_text_open(SessiondClient *c, JsonText *req, enum sessiond_retry retry,
			    SessiondReply *rep)
{
	*rep = (SessiondReply){ .fd = -1 };
	json_text_add_str(req, "}");
	if (req->failed)
		return -ENOMEM;
	return call(c, req->buf, req->len, retry, NULL, true, rep);
}

int sessiond_call_streamed(SessiondClient *c, const char *req, size_t len, const SessiondStream *st,
			   SessiondReply *rep)
{
	return call(c, req, len, SESSIOND_RETRY_ON_SEND, st, false, rep);
}

void sessiond_reply_clear(SessiondReply *rep)
{
	json_putp(&rep->obj);
	free(rep->text);
	rep->fd = safe_close(rep->fd);
	*rep = (SessiondReply){ .fd = -1 };
}

int sessiond_kind_status(const char *kind)
{
	static const struct {
		const char *kind;
		int status;
	} map[] = {
		{ "invalid", 422 },   { "bad_request", 400 }, { "not_found", 404 },
		{ "forbidden", 403 }, { "busy", 409 },	      { "capacity", 503 },
		{ "too_large", 413 }, { "unavailable", 503 }, { "internal", 500 },
		{ "exists", 409 },    { "limit", 429 },
	};

	for (size_t i = 0; i < ARRAY_SIZE(map); i++)
		if (kind && strcmp(map[i].kind, kind) == 0)
			return map[i].status;
	return 500;
}

bool sessiond_session_gone(const SessiondReply *rep)
{
	const char *d = rep->detail ? rep->detail : "";

	return !rep->ok && rep->kind && strcmp(rep->kind, "not_found") == 0 &&
	       (strcmp(d, "unknown session") == 0 || strcmp(d, "the session was destroyed") == 0);
}

void sessiond_request_begin(JsonText *t, const char *op, const char *request_id, const char *tenant,
			    const char *session_id)
{
	json_text_add_str(t, "{\"op\":");
	json_text_add_quoted(t, op);
	json_text_add_key(t, "request_id");
	json_text_add_quoted(t, request_id);
	if (tenant) {
		json_text_add_key(t, "tenant");
		json_text_add_quoted(t, tenant);
	}
	if (session_id) {
		json_text_add_key(t, "session_id");
		json_text_add_quoted(t, session_id);
	}
}

json_object *sessiond_request_new(const char *op, const char *request_id, const char *tenant,
				  const char *session_id)
{
	json_object *o = json_object_new_object();

	json_set(o, "op", json_object_new_string(op));
	json_set(o, "request_id", json_object_new_string(request_id));
	if (tenant)
		json_set(o, "tenant", json_object_new_string(tenant));
	if (session_id)
		json_set(o, "session_id", json_object_new_string(session_id));
	if (json_incomplete(o)) {
		json_object_put(o);
		return NULL;
	}
	return o;
}
