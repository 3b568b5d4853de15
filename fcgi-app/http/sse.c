/* SPDX-License-Identifier: MIT */
/* Server-Sent Events over libfcgi: every event is flushed, so nginx (told not to buffer)
 * passes it on as it is written. */
#include "http.h"

#include <errno.h>
#include <string.h>

#include "json.h"

bool http_wants_sse(const HttpReq *h)
{
	const char *accept = http_param(h, "HTTP_ACCEPT");

	return accept && strstr(accept, "text/event-stream");
}

static int sse_flush(HttpReq *h)
{
	if (FCGX_FFlush(h->fcgi->out) < 0) {
		int e = FCGX_GetError(h->fcgi->out);

		return e > 0 ? -e : -EIO;
	}
	return 0;
}

int sse_begin(HttpReq *h)
{
	int r;

	if (h->sse)
		return 0;
	r = http_send_head(h, 200, "text/event-stream", -1,
			   "Cache-Control: no-cache\r\nX-Accel-Buffering: no\r\n");
	if (r < 0)
		return r;
	h->sse = true;
	return sse_flush(h);
}

int sse_event(HttpReq *h, const char *event, const char *data, size_t len)
{
	int r;

	if (FCGX_FPrintF(h->fcgi->out, "event: %s\ndata: ", event) < 0)
		return -EIO;
	r = http_write(h, data, len);
	if (r == 0)
		r = http_write(h, "\n\n", 2);
	return r < 0 ? r : sse_flush(h);
}

int sse_json_event(HttpReq *h, const char *event, json_object *data)
{
	size_t len;
	const char *s = json_render(data, &len);

	return s ? sse_event(h, event, s, len) : -ENOMEM;
}

int sse_heartbeat(HttpReq *h)
{
	int r = http_write(h, ": keep-alive\n\n", 14);

	return r < 0 ? r : sse_flush(h);
}
