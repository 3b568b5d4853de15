/* SPDX-License-Identifier: MIT */
/* The code plane's envelope, its answers to the daemon's refusals, and the request pieces every
 * handler shares (body, session_id, cwd). */
#include "code.h"
#include "sandbox_layout.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cleanup.h"
#include "http/http.h"
#include "json.h"
#include "log.h"

/* The envelope with extra header lines (NULL: none). */
static void code_reply_extra(ReqCtx *rq, int status, bool success, const char *message,
			     json_object *data, const char *extra)
{
	_cleanup_json_ json_object *o = json_object_new_object();

	/* data is taken whatever happens: by the set, or freed here. */
	if (!o || json_set(o, "success", json_object_new_boolean(success)) < 0 ||
	    json_set(o, "message", json_object_new_string(message)) < 0) {
		json_object_put(data);
		http_error(&rq->http, 500, NULL, "out of memory");
		return;
	}
	if ((data ? json_set(o, "data", data) : json_set_null(o, "data")) < 0) {
		http_error(&rq->http, 500, NULL, "out of memory");
		return;
	}
	http_send_json(&rq->http, status, o, extra);
}

void code_reply(ReqCtx *rq, int status, bool success, const char *message, json_object *data)
{
	code_reply_extra(rq, status, success, message, data, NULL);
}

void code_fail(ReqCtx *rq, int status, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	code_reply(rq, status, false, msg, NULL);
}

void code_invalid(ReqCtx *rq, const char *field, const char *type, const char *fmt, ...)
{
	_cleanup_json_ json_object *o = json_object_new_object();
	json_object *errors = json_object_new_array(), *e = json_object_new_object();
	json_object *loc = json_object_new_array();
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (!o || !errors || !e || !loc ||
	    json_object_array_add(loc, json_object_new_string("body")) < 0 ||
	    (field && json_object_array_add(loc, json_object_new_string(field)) < 0) ||
	    json_set(e, "location", TAKE_PTR(loc)) < 0 ||
	    json_set(e, "message", json_object_new_string(msg)) < 0 ||
	    json_set(e, "type", json_object_new_string(type)) < 0 ||
	    json_object_array_add(errors, e) < 0) {
		json_object_put(loc);
		json_object_put(e);
		json_object_put(errors);
		http_error(&rq->http, 500, NULL, "out of memory");
		return;
	}
	if (json_set(o, "success", json_object_new_boolean(false)) < 0 ||
	    json_set(o, "message", json_object_new_string(msg)) < 0 ||
	    json_set_null(o, "data") < 0 || json_set(o, "errors", errors) < 0) {
		http_error(&rq->http, 500, NULL, "out of memory");
		return;
	}
	http_send_json(&rq->http, 422, o, NULL);
}

void code_sd_fail(ReqCtx *rq, int r, const SessiondReply *rep)
{
	int64_t retry_after = rq->app->cfg->retry_after_seconds;
	char retry[64];
	int status;

	if (r < 0 || !rep) {
		log_warn("sessiond call failed: %s REQUEST_ID=%s", strerror(-r),
			 rq->http.request_id);
		snprintf(retry, sizeof(retry), "Retry-After: %" PRId64 "\r\n", retry_after);
		code_reply_extra(rq, 503, false, "the session daemon is unavailable; retry later",
				 NULL, retry);
		return;
	}
	status = sessiond_kind_status(rep->kind);
	if (status == 500)
		log_err("sessiond internal error (%s): %s REQUEST_ID=%s", rep->kind,
			rep->detail ? rep->detail : "-", rq->http.request_id);
	/* capacity (the node's or the tenant's session limit) says when to come back. */
	if (status == 503) {
		snprintf(retry, sizeof(retry), "Retry-After: %" PRId64 "\r\n",
			 rep->retry_after > 0 ? rep->retry_after : retry_after);
		code_reply_extra(rq, status, false,
				 rep->detail && *rep->detail ? rep->detail :
							       "no capacity now; retry later",
				 NULL, retry);
		return;
	}
	/* limit: the detail is the exact sentence the plane promises ("Maximum number..."). */
	code_fail(rq, status, "%s",
		  rep->detail && *rep->detail ? rep->detail : "the request could not be served");
}

int code_read_body(ReqCtx *rq, bool allow_empty, json_object **ret)
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
		code_invalid(rq, NULL, "missing", "a JSON object body is required");
		break;
	case BODY_TOO_LARGE:
		code_fail(rq, 413, "the request body is larger than %" PRId64 " bytes",
			  cfg->max_body_bytes);
		break;
	case BODY_UNREADABLE: code_fail(rq, 400, "the request body could not be read"); break;
	case BODY_NOT_JSON:
		code_invalid(rq, NULL, "json_invalid", "the body is not valid JSON: %s", e.detail);
		break;
	case BODY_NOT_OBJECT:
		code_invalid(rq, NULL, "model_type", "the body must be a JSON object");
		break;
	case BODY_NO_MEMORY: code_fail(rq, 500, "out of memory"); break;
	}
	return -1;
}

json_object *code_sd_request(ReqCtx *rq, const char *op, const char *session_id)
{
	return sessiond_request_new(op, rq->http.request_id, rq->tenant, session_id);
}

int code_take_session_id(ReqCtx *rq, json_object *body, const char **ret)
{
	size_t len;
	int r = json_in_string(body, "session_id", ret, &len);

	if (r == 0) {
		*ret = NULL;
		return 0;
	}
	if (r < 0) {
		code_invalid(rq, "session_id", "string_type",
			     "session_id must be a string or null");
		return -1;
	}
	if (!route_id_valid(*ret, len)) {
		code_invalid(rq, "session_id", "value_error",
			     "session_id must be 1 to %d characters of A-Z a-z 0-9 _ -",
			     ROUTE_ID_MAX);
		return -1;
	}
	return 0;
}

int code_take_image(ReqCtx *rq, json_object *body, const char **ret)
{
	size_t len;
	int r = json_in_string(body, "image", ret, &len);

	if (r == 0)
		*ret = NULL;
	if (r < 0 || (r > 0 && len > CODE_IMAGE_MAX)) {
		code_invalid(rq, "image", "string_type",
			     "image must be a string of at most %d bytes, or null", CODE_IMAGE_MAX);
		return -1;
	}
	return 0;
}

int code_request_image(json_object *req, const char *image)
{
	return image ? json_set(req, "image", json_object_new_string(image)) : 0;
}

int code_check_cwd(ReqCtx *rq, const char *session_id, const char *cwd)
{
	_cleanup_json_ json_object *req = code_sd_request(rq, "list", session_id);
	SessiondReply rep;
	int r;

	if (!req || json_set(req, "path", json_object_new_string(cwd)) < 0) {
		code_fail(rq, 500, "out of memory");
		return -1;
	}
	r = sessiond_call(&rq->w->sd, req, SESSIOND_RETRY_ANY, &rep);
	if (r < 0) {
		code_sd_fail(rq, r, NULL);
		return -1;
	}
	if (!rep.ok) {
		const char *kind = rep.kind ? rep.kind : "";
		bool bad_path = !strcmp(kind, "not_found") || !strcmp(kind, "forbidden") ||
				!strcmp(kind, "invalid") || !strcmp(kind, "bad_request");

		if (bad_path)
			code_invalid(rq, "cwd", "value_error",
				     "cwd must name a directory under " SANDBOX_WORKSPACE ": %.*s",
				     (int)utf8_prefix_len(cwd, 200), cwd);
		else
			code_sd_fail(rq, r, &rep);
		sessiond_reply_clear(&rep);
		return -1;
	}
	sessiond_reply_clear(&rep);
	return 0;
}
