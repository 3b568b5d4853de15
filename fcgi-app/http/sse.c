/* SPDX-License-Identifier: MIT */
/* Server-Sent Events over libfcgi: every event is flushed, so nginx (told not to buffer)
 * passes it on as it is written. Written to the stream directly: http.c's answers end in
 * an event here once the stream has begun. */
#include "http.h"

#include <errno.h>
#include <limits.h>
#include <string.h>

#include "json.h"

static int sse_error(HttpReq *h)
{
	int e = FCGX_GetError(h->fcgi->out);

	return e > 0 ? -e : -EIO;
}

static int sse_put(HttpReq *h, const char *s, size_t len)
{
	while (len > 0) {
		int chunk = len > INT_MAX ? INT_MAX : (int)len;

		if (FCGX_PutStr(s, chunk, h->fcgi->out) != chunk)
			return sse_error(h);
		s += chunk;
		len -= (size_t)chunk;
	}
	return 0;
}

static int sse_flush(HttpReq *h)
{
	return FCGX_FFlush(h->fcgi->out) < 0 ? sse_error(h) : 0;
}

int sse_begin(HttpReq *h)
{
	static const char head[] = "Status: 200 OK\r\n"
				   "Content-Type: text/event-stream\r\n"
				   "Cache-Control: no-cache\r\n"
				   "X-Accel-Buffering: no\r\n\r\n";
	int r;

	if (h->sse)
		return 0;
	if (h->status)
		return -EALREADY;
	h->status = 200;
	r = sse_put(h, head, sizeof(head) - 1);
	if (r < 0)
		return r;
	h->sse = true;
	return sse_flush(h);
}

int sse_event(HttpReq *h, const char *event, const char *data, size_t len)
{
	int r = sse_put(h, "event: ", 7);

	if (r == 0)
		r = sse_put(h, event, strlen(event));
	if (r == 0)
		r = sse_put(h, "\ndata: ", 7);
	if (r == 0)
		r = sse_put(h, data, len);
	if (r == 0)
		r = sse_put(h, "\n\n", 2);
	return r < 0 ? r : sse_flush(h);
}

int sse_json_event(HttpReq *h, const char *event, json_object *data)
{
	_cleanup_(json_text_clear) JsonText t = { .buf = NULL };

	json_text_add_value(&t, data);
	return t.failed ? -ENOMEM : sse_event(h, event, t.buf, t.len);
}

int sse_heartbeat(HttpReq *h)
{
	int r = sse_put(h, ": keep-alive\n\n", 14);

	return r < 0 ? r : sse_flush(h);
}
