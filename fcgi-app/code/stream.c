/* SPDX-License-Identifier: MIT */
/* A cell streamed as Server-Sent Events: each notebook output as an event of its type,
 * while the cell runs, then the route's usual body as the last. */
#include "code.h"

#include <errno.h>
#include <string.h>

#include "cleanup.h"
#include "json.h"

static bool relay_all_keys(const OutputRelay *r)
{
	return *(const bool *)r->ctx;
}

static int stream_event(OutputRelay *r, bool is_stderr, const char *text, size_t len)
{
	_cleanup_json_ json_object *o =
		cell_stream_output(is_stderr ? "stderr" : "stdout", text, len, relay_all_keys(r));

	return o ? sse_json_event(r->http, "stream", o) : -ENOMEM;
}

static int display_event(OutputRelay *r, json_object *event)
{
	_cleanup_json_ json_object *o = cell_display_output(event, relay_all_keys(r));

	/* An event without data (forged by user code on the harness's channel) is dropped. */
	return o ? sse_json_event(r->http, "display_data", o) : 0;
}

int code_run_streamed(ReqCtx *rq, json_object *req, bool all_keys, SessiondReply *rep)
{
	const PaddockConfig *cfg = rq->app->cfg;
	OutputRelay relay = {
		.http = &rq->http,
		.text = stream_event,
		.display = display_event,
		.ctx = &all_keys,
		/* The cell keeps this many characters of its streams: the events show no more. */
		.max_chars = (size_t)cfg->code_output_max_chars,
		.heartbeat_ms = (int)cfg->stream_heartbeat_seconds * 1000,
	};
	int r = sessiond_call_relayed(&rq->w->sd, req, &relay, rep);

	if (r == 0 && rep->ok)
		return 0;
	/* A client that went away has nobody to answer. */
	if (r != -ECONNABORTED)
		code_sd_fail(rq, r, r < 0 ? NULL : rep);
	sessiond_reply_clear(rep);
	return -1;
}

int code_stream_final(ReqCtx *rq, const CellOutcome *o, bool all_keys)
{
	_cleanup_json_ json_object *outputs = cell_outputs_render(o, all_keys);
	size_t n = outputs ? json_object_array_length(outputs) : 0;

	if (!outputs)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		json_object *out = json_object_array_get_idx(outputs, i);
		const char *type;
		int r;

		if (json_in_string(out, "output_type", &type, NULL) <= 0 ||
		    (strcmp(type, "execute_result") != 0 && strcmp(type, "error") != 0))
			continue;
		r = sse_json_event(&rq->http, type, out);
		if (r < 0)
			return r;
	}
	return 0;
}
