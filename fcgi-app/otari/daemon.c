/* SPDX-License-Identifier: MIT */
/* What the Otari handlers share about sessiond: a request for an op, and its refusals answered
 * as HTTP errors. */
#include "otari.h"

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cleanup.h"
#include "http/http.h"
#include "json.h"
#include "log.h"

json_object *otari_sd_request(ReqCtx *rq, const char *op)
{
	return sessiond_request_new(op, rq->http.request_id, rq->tenant,
				    rq->match.id[0] ? rq->match.id : NULL);
}

void otari_sd_request_begin(ReqCtx *rq, JsonText *req, const char *op)
{
	sessiond_request_begin(req, op, rq->http.request_id, rq->tenant,
			       rq->match.id[0] ? rq->match.id : NULL);
}

static const char *default_detail(const char *kind)
{
	if (strcmp(kind, "not_found") == 0)
		return "unknown session";
	if (strcmp(kind, "busy") == 0)
		return "the session is busy running another call";
	if (strcmp(kind, "capacity") == 0)
		return "no capacity for another session; retry later";
	if (strcmp(kind, "too_large") == 0)
		return "the content is larger than the configured limit";
	if (strcmp(kind, "forbidden") == 0)
		return "the path is outside the session workspace";
	if (strcmp(kind, "unavailable") == 0)
		return "the session daemon cannot serve this now; retry later";
	return "the request could not be served";
}

void otari_sd_fail(ReqCtx *rq, int r, const SessiondReply *rep)
{
	const PaddockConfig *cfg = rq->app->cfg;
	char retry[64];
	int status;

	if (r < 0 || !rep) {
		log_warn("sessiond call failed: %s REQUEST_ID=%s", strerror(-r),
			 rq->http.request_id);
		snprintf(retry, sizeof(retry), "Retry-After: %" PRId64 "\r\n",
			 cfg->retry_after_seconds);
		http_error(&rq->http, 503, retry, "session daemon unavailable");
		return;
	}
	status = sessiond_kind_status(rep->kind);
	if (status == 500)
		log_err("sessiond internal error (%s): %s REQUEST_ID=%s", rep->kind,
			rep->detail ? rep->detail : "-", rq->http.request_id);
	retry[0] = '\0';
	if (status == 503)
		snprintf(retry, sizeof(retry), "Retry-After: %" PRId64 "\r\n",
			 rep->retry_after > 0 ? rep->retry_after : cfg->retry_after_seconds);
	http_error(&rq->http, status, retry[0] ? retry : NULL, "%s",
		   rep->detail && *rep->detail ? rep->detail : default_detail(rep->kind));
}

/* What otari_sd_call() and otari_sd_call_text() do with what came back (r, rep). */
static int sd_called(ReqCtx *rq, int r, SessiondReply *rep)
{
	if (r == 0 && rep->ok)
		return 0;
	otari_sd_fail(rq, r, r < 0 ? NULL : rep);
	sessiond_reply_clear(rep);
	return -1;
}

int otari_sd_call(ReqCtx *rq, json_object *req, enum sessiond_retry retry, SessiondReply *rep)
{
	return sd_called(rq, sessiond_call(&rq->w->sd, req, retry, rep), rep);
}

int otari_sd_call_text(ReqCtx *rq, JsonText *req, enum sessiond_retry retry, SessiondReply *rep)
{
	return sd_called(rq, sessiond_call_text_open(&rq->w->sd, req, retry, rep), rep);
}

/* {"text": ...} as a stdout or stderr event. */
static int text_event(OutputRelay *r, bool is_stderr, const char *text, size_t len)
{
	_cleanup_json_ json_object *o = json_object_new_object();

	if (!o || json_set(o, "text", json_object_new_string_len(text, (int)len)) < 0)
		return -ENOMEM;
	return sse_json_event(r->http, is_stderr ? "stderr" : "stdout", o);
}

int otari_sd_call_streamed(ReqCtx *rq, JsonText *req, SessiondReply *rep)
{
	OutputRelay relay = {
		.http = &rq->http,
		.text = text_event,
		/* sessiond streams what the reply keeps, and no more. */
		.max_chars = SIZE_MAX,
		.heartbeat_ms = (int)rq->app->cfg->stream_heartbeat_seconds * 1000,
	};
	int r = sessiond_call_relayed_open(&rq->w->sd, req, &relay, rep);

	if (r == 0 && rep->ok)
		return 0;
	/* A client that went away has nobody to answer. */
	if (r != -ECONNABORTED)
		otari_sd_fail(rq, r, r < 0 ? NULL : rep);
	sessiond_reply_clear(rep);
	return -1;
}

int otari_read_json(ReqCtx *rq, bool allow_empty, json_object **ret)
{
	const PaddockConfig *cfg = rq->app->cfg;
	BodyError e;

	if (body_read_json(&rq->http, (size_t)cfg->max_body_bytes, (int)cfg->json_max_depth, ret,
			   &e) == 0)
		return 0;
	switch (e.kind) {
	case BODY_EMPTY:
		if (allow_empty)
			return 0;
		http_error(&rq->http, 422, NULL, "a JSON object body is required");
		break;
	case BODY_TOO_LARGE:
		http_error(&rq->http, 413, NULL,
			   "the request body is larger than %" PRId64 " bytes",
			   cfg->max_body_bytes);
		break;
	case BODY_UNREADABLE:
		http_error(&rq->http, 400, NULL, "the request body could not be read");
		break;
	case BODY_NOT_JSON: http_error(&rq->http, 422, NULL, "%s", e.detail); break;
	case BODY_NOT_OBJECT:
		http_error(&rq->http, 422, NULL, "the body must be a JSON object");
		break;
	case BODY_NO_MEMORY: http_error(&rq->http, 500, NULL, "out of memory"); break;
	}
	return -1;
}
