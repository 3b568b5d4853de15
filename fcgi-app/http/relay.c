/* SPDX-License-Identifier: MIT */
/*
 * A streamed exec relayed as Server-Sent Events: the stream begins when the run starts,
 * what the run writes becomes the plane's events in whole characters, a comment keeps an
 * idle stream alive, and a client that hangs up abandons the call (which cancels the run).
 */
#include "client.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "json.h"
#include "log.h"
#include "proto.h"
#include "utf8.h"

#define EVENT_MAX_DEPTH 64

/* Relay what a stream wrote: the character a previous read cut is finished first, and one
 * this read cuts waits for the next. Past max_chars in all, nothing more is relayed. */
static int relay_text(OutputRelay *r, bool is_stderr, const char *data, size_t len)
{
	size_t held = r->carry_len[is_stderr], whole, keep, n;
	_cleanup_free_ char *joined = malloc(held + len), *text = NULL;
	int ret = 0;

	if (!joined)
		return -ENOMEM;
	memcpy(joined, r->carry[is_stderr], held);
	memcpy(joined + held, data, len);
	whole = utf8_whole_prefix(joined, held + len);
	r->carry_len[is_stderr] = held + len - whole;
	memcpy(r->carry[is_stderr], joined + whole, r->carry_len[is_stderr]);
	if (whole == 0 || r->chars >= r->max_chars)
		return 0;
	text = utf8_sanitize(joined, whole, &n);
	if (!text)
		return -ENOMEM;
	keep = utf8_chars_prefix(text, n, r->max_chars - r->chars, &n);
	r->chars += n;
	if (keep)
		ret = r->text(r, is_stderr, text, keep);
	return ret;
}

static int relay_display(OutputRelay *r, const char *data, size_t len)
{
	_cleanup_json_ json_object *ev = json_in_parse_sandboxed(data, len, EVENT_MAX_DEPTH);

	/* The harness's channel carries what user code may forge: a bad event is dropped. */
	if (!ev || !json_object_is_type(ev, json_type_object) || !r->display)
		return 0;
	return r->display(r, ev);
}

static int relay_on_data(void *ctx, uint8_t stream, const char *data, size_t len)
{
	OutputRelay *r = ctx;
	int ret = sse_begin(r->http);

	if (ret < 0)
		return ret;
	switch (stream) {
	case PROTO_STREAM_STDOUT: return relay_text(r, false, data, len);
	case PROTO_STREAM_STDERR: return relay_text(r, true, data, len);
	case PROTO_STREAM_DISPLAY: return relay_display(r, data, len);
	default: return 0; /* PROTO_STREAM_STARTED, and what a newer daemon may add */
	}
}

static int relay_on_idle(void *ctx)
{
	OutputRelay *r = ctx;

	return r->http->sse ? sse_heartbeat(r->http) : 0;
}

/* The relayed call of the request's len bytes s, which hold "stream": true. */
static int relay_call(SessiondClient *c, const char *s, size_t len, OutputRelay *r,
		      SessiondReply *rep)
{
	SessiondStream st = {
		.on_data = relay_on_data,
		.on_idle = relay_on_idle,
		.ctx = r,
		.idle_ms = r->heartbeat_ms,
		.hangup_fd = r->http->fcgi->ipcFd,
	};
	int ret = sessiond_call_streamed(c, s, len, &st, rep);

	if (ret == -ECONNABORTED) {
		log_info("the client went away during a streamed call: cancelled REQUEST_ID=%s",
			 r->http->request_id);
		/* Answered as nginx says it: the client closed the request. */
		if (!r->http->status)
			r->http->status = 499;
	}
	/* An ok reply is the run's: the stream it began (or begins now) ends with it. */
	if (ret == 0 && rep->ok && sse_begin(r->http) < 0) {
		sessiond_reply_clear(rep);
		return -ECONNABORTED;
	}
	return ret;
}

int sessiond_call_relayed(SessiondClient *c, json_object *req, OutputRelay *r, SessiondReply *rep)
{
	_cleanup_(json_text_clear) JsonText t = { .buf = NULL };

	/* The caller clears *rep whatever happens: it must hold nothing before the call. */
	*rep = (SessiondReply){ .fd = -1 };
	if (json_set(req, "stream", json_object_new_boolean(1)) < 0)
		return -ENOMEM;
	json_text_add_value(&t, req);
	if (t.failed)
		return -ENOMEM;
	return relay_call(c, t.buf, t.len, r, rep);
}

int sessiond_call_relayed_open(SessiondClient *c, JsonText *req, OutputRelay *r, SessiondReply *rep)
{
	*rep = (SessiondReply){ .fd = -1 };
	json_text_add_str(req, ",\"stream\":true}");
	if (req->failed)
		return -ENOMEM;
	return relay_call(c, req->buf, req->len, r, rep);
}
