/* SPDX-License-Identifier: MIT */
/* JSON-RPC 2.0 over HTTP: what a message is, responses and errors, and how each is sent
 * (a JSON body, or the last event of a stream that has begun). */
#include "mcp.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cleanup.h"
#include "json.h"
#include "log.h"

#define ID_INT_MAX ((int64_t)1 << 53)

bool rpc_id_valid(json_object *id)
{
	int64_t v;

	if (!id)
		return false;
	if (json_object_is_type(id, json_type_string))
		return true;
	if (!json_object_is_type(id, json_type_int))
		return false;
	errno = 0;
	v = json_object_get_int64(id);
	return errno == 0 && v > -ID_INT_MAX && v < ID_INT_MAX;
}

void rpc_classify(json_object *msg, RpcMessage *m)
{
	json_object *id = NULL, *params = NULL;
	bool has_id = json_object_object_get_ex(msg, "id", &id);
	bool has_result = json_object_object_get_ex(msg, "result", NULL);
	bool has_error = json_object_object_get_ex(msg, "error", NULL);
	bool has_method = json_object_object_get_ex(msg, "method", NULL);
	const char *version = NULL, *method = NULL;

	*m = (RpcMessage){ .kind = RPC_INVALID };
	/* Read as C strings: one with a NUL inside ("2.0\u0000x") is not these strings. */
	if (json_in_string(msg, "jsonrpc", &version, NULL) <= 0 || strcmp(version, "2.0") != 0) {
		m->why = "jsonrpc must be \"2.0\"";
		return;
	}
	if (has_method && json_in_string(msg, "method", &method, NULL) <= 0) {
		m->why = "method must be a string without NUL characters";
		return;
	}
	if (has_id && !rpc_id_valid(id)) {
		m->why = "id must be a string or an integer";
		return;
	}
	if (method) {
		if (has_result || has_error) {
			m->why = "a request has no result or error";
			return;
		}
		if (json_object_object_get_ex(msg, "params", &params) && params &&
		    !json_object_is_type(params, json_type_object)) {
			m->why = "params must be an object";
			return;
		}
		m->kind = has_id ? RPC_REQUEST : RPC_NOTIFICATION;
		m->method = method;
		m->id = id;
		m->params = params;
		return;
	}
	if (has_id && has_result != has_error) {
		m->kind = RPC_RESPONSE;
		m->id = id;
		return;
	}
	m->why = "a message needs a method, or an id with a result or an error";
}

const char *rpc_id_text(json_object *id)
{
	return json_object_to_json_string_ext(id, JSON_C_TO_STRING_PLAIN);
}

static json_object *rpc_envelope(json_object *id)
{
	json_object *o = json_object_new_object();

	if (json_set(o, "jsonrpc", json_object_new_string("2.0")) < 0)
		return o;
	if (id)
		json_set(o, "id", json_object_get(id));
	else
		json_set_null(o, "id");
	return o;
}

json_object *rpc_result(json_object *id, json_object *result)
{
	json_object *o = rpc_envelope(id);

	json_set(o, "result", result);
	return o;
}

static json_object *rpc_verror(json_object *id, int code, json_object *data, const char *fmt,
			       va_list ap)
{
	json_object *o = rpc_envelope(id), *e = json_object_new_object();
	char msg[512];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	json_set(e, "code", json_object_new_int(code));
	json_set(e, "message", json_object_new_string(msg));
	if (data)
		json_set(e, "data", data);
	json_set(o, "error", e);
	return o;
}

json_object *rpc_error(json_object *id, int code, json_object *data, const char *fmt, ...)
{
	json_object *o;
	va_list ap;

	va_start(ap, fmt);
	o = rpc_verror(id, code, data, fmt, ap);
	va_end(ap);
	return o;
}

/* Send a rendered response: once a stream has begun it is the stream's last message. */
static void send_response(HttpReq *h, int status, json_object *response, const char *extra)
{
	static const char oom[] = "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32603,"
				  "\"message\":\"out of memory\"}}";

	if (json_incomplete(response)) {
		if (h->sse)
			sse_event(h, "message", oom, sizeof(oom) - 1);
		else if (!h->status)
			http_error(h, 500, NULL, "out of memory");
		return;
	}
	if (h->sse)
		sse_json_event(h, "message", response);
	else
		http_send_json(h, status, response, extra);
}

void mcp_answer(McpCall *c, json_object *response, const char *extra)
{
	_cleanup_json_ json_object *o = response;

	send_response(&c->rq->http, 200, o, extra);
}

void mcp_answer_result(McpCall *c, json_object *result)
{
	mcp_answer(c, rpc_result(c->id, result), NULL);
}

void mcp_http_error(ReqCtx *rq, int status, json_object *id, int code, const char *extra,
		    const char *fmt, ...)
{
	_cleanup_json_ json_object *o = NULL;
	va_list ap;

	va_start(ap, fmt);
	o = rpc_verror(id, code, NULL, fmt, ap);
	va_end(ap);
	send_response(&rq->http, status, o, extra);
}

json_object *mcp_sd_request(McpCall *c, const char *op)
{
	return sessiond_request_new(op, c->rq->http.request_id, c->rq->tenant, c->session_id);
}

/* {"retry_after": seconds} */
static json_object *retry_data(int64_t seconds)
{
	json_object *d = json_object_new_object();

	json_set(d, "retry_after", json_object_new_int64(seconds));
	return d;
}

/*
 * Answer a failure with a JSON-RPC error. A request gets its response (HTTP 200); a
 * notification, a client's response or a DELETE has no response to carry one, so the HTTP
 * status says it (with the error, without an id, as the body).
 */
static void answer_failure(McpCall *c, int status, int code, json_object *data, const char *header,
			   const char *msg)
{
	if (c->id)
		mcp_answer(c, rpc_error(c->id, code, data, "%s", msg), header);
	else {
		json_object_put(data);
		mcp_http_error(c->rq, status, NULL, code, header, "%s", msg);
	}
}

void mcp_session_ended(McpCall *c)
{
	/* The transport's rule: a session that has ended is 404, and the client initializes
	 * a new one. */
	mcp_http_error(c->rq, 404, c->id, RPC_INVALID_REQUEST, NULL,
		       "the MCP session has ended (or never was); initialize a new one");
}

void mcp_sd_fail(McpCall *c, int r, const SessiondReply *rep)
{
	ReqCtx *rq = c->rq;
	int64_t retry = rq->app->cfg->retry_after_seconds;
	char header[64], msg[512];

	if (r < 0 || !rep) {
		log_warn("sessiond call failed: %s REQUEST_ID=%s", strerror(-r),
			 rq->http.request_id);
		snprintf(header, sizeof(header), "Retry-After: %" PRId64 "\r\n", retry);
		snprintf(msg, sizeof(msg),
			 "the session daemon is unavailable; retry in %" PRId64 " s", retry);
		answer_failure(c, 503, RPC_UNAVAILABLE, retry_data(retry), header, msg);
		return;
	}
	if (rep->kind && strcmp(rep->kind, "not_found") == 0) {
		mcp_session_ended(c);
		return;
	}
	if (rep->kind && (strcmp(rep->kind, "capacity") == 0 || strcmp(rep->kind, "limit") == 0 ||
			  strcmp(rep->kind, "unavailable") == 0)) {
		bool capacity = strcmp(rep->kind, "unavailable") != 0;

		if (rep->retry_after > 0)
			retry = rep->retry_after;
		snprintf(header, sizeof(header), "Retry-After: %" PRId64 "\r\n", retry);
		snprintf(msg, sizeof(msg), "%s; retry in %" PRId64 " s",
			 rep->detail && *rep->detail ? rep->detail :
			 capacity		     ? "no capacity for another session" :
						       "the session daemon cannot serve this now",
			 retry);
		answer_failure(c, 503, capacity ? RPC_NO_CAPACITY : RPC_UNAVAILABLE,
			       retry_data(retry), header, msg);
		return;
	}
	log_err("sessiond error (%s): %s REQUEST_ID=%s", rep->kind ? rep->kind : "-",
		rep->detail ? rep->detail : "-", rq->http.request_id);
	answer_failure(c, 500, RPC_INTERNAL_ERROR, NULL, NULL,
		       rep->detail && *rep->detail ? rep->detail : "the request failed");
}
