/* SPDX-License-Identifier: MIT */
/*
 * The /mcp endpoint of MCP's Streamable HTTP transport: the checks every message passes
 * (Origin, media types, the protocol revision, the session), then each message by kind:
 * initialize makes a session, ping and the tools methods are answered, notifications and
 * the client's responses are accepted, DELETE ends the session.
 */
#include "mcp.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "cleanup.h"
#include "json.h"
#include "log.h"

static const Route routes[] = {
	{ "mcp", "POST", "/mcp", mcp_post },
	{ "mcp_end", "DELETE", "/mcp", mcp_delete },
};

const RouteTable mcp_routes = { "mcp", routes, ARRAY_SIZE(routes) };

/* The protocol revisions served, newest first. */
static const char *const mcp_versions[] = { "2025-11-25", "2025-06-18", NULL };

static bool version_served(const char *v)
{
	for (size_t i = 0; mcp_versions[i]; i++)
		if (strcmp(v, mcp_versions[i]) == 0)
			return true;
	return false;
}

/* ---- the transport's checks ---- */

/* Whether origin (an Origin header's value) is one of the comma-separated allowed ones. */
static bool origin_allowed(const char *allowed, const char *origin)
{
	size_t olen = strlen(origin);
	const char *p = allowed;

	while (*p) {
		const char *end = strchrnul(p, ',');
		const char *s = p, *e = end;

		while (s < e && (*s == ' ' || *s == '\t'))
			s++;
		while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
			e--;
		if ((size_t)(e - s) == olen && strncasecmp(s, origin, olen) == 0)
			return true;
		p = *end ? end + 1 : end;
	}
	return false;
}

/*
 * A page in a browser can make the browser post to any address, this host's loopback
 * included (DNS rebinding gets around the same-origin rule): a request that carries an
 * Origin must come from one the operator allowed. Clients that are not browsers send none.
 */
static bool check_origin(ReqCtx *rq)
{
	const char *origin = http_param(&rq->http, "HTTP_ORIGIN");

	if (!origin || origin_allowed(rq->app->cfg->mcp_allowed_origins, origin))
		return true;
	mcp_http_error(rq, 403, NULL, RPC_INVALID_REQUEST, NULL,
		       "the Origin is not allowed (mcp_allowed_origins)");
	return false;
}

/* The media type of a header value, without parameters, is type. */
static bool media_type_is(const char *value, const char *type)
{
	size_t n = strlen(type);

	return value && strncasecmp(value, type, n) == 0 &&
	       (value[n] == '\0' || value[n] == ';' || value[n] == ' ');
}

/* The client must take JSON or an event stream; an Accept that names neither (nor a range
 * that covers one) cannot be answered. */
static bool check_accept(ReqCtx *rq)
{
	static const char *const ok[] = { "application/json", "text/event-stream", "*/*",
					  "application/*", "text/*" };
	const char *accept = http_param(&rq->http, "HTTP_ACCEPT");

	if (!accept || !*accept)
		return true;
	for (size_t i = 0; i < ARRAY_SIZE(ok); i++)
		if (strcasestr(accept, ok[i]))
			return true;
	mcp_http_error(rq, 406, NULL, RPC_INVALID_REQUEST, NULL,
		       "the client must accept application/json or text/event-stream");
	return false;
}

/* A request after initialize may name the revision it speaks; one not served is refused. */
static bool check_version_header(ReqCtx *rq, json_object *id)
{
	const char *v = http_param(&rq->http, "HTTP_MCP_PROTOCOL_VERSION");

	if (!v || version_served(v))
		return true;
	mcp_http_error(rq, 400, id, RPC_INVALID_REQUEST, NULL,
		       "unsupported MCP-Protocol-Version; this server speaks %s and %s",
		       mcp_versions[0], mcp_versions[1]);
	return false;
}

/* The Mcp-Session-Id every message after initialize carries; NULL after answering. */
static const char *take_session(ReqCtx *rq, json_object *id)
{
	const char *sid = http_param(&rq->http, "HTTP_MCP_SESSION_ID");

	if (!sid || !*sid) {
		mcp_http_error(rq, 400, id, RPC_INVALID_REQUEST, NULL,
			       "the Mcp-Session-Id header is required: initialize first");
		return NULL;
	}
	/* Nothing that is not a session id names a session: it has ended, or never was. */
	if (!route_id_valid(sid, strlen(sid))) {
		mcp_http_error(rq, 404, id, RPC_INVALID_REQUEST, NULL,
			       "unknown MCP session; initialize a new one");
		return NULL;
	}
	return sid;
}

/* Is the call's session still there? Answers and returns false when not. */
static bool session_alive(McpCall *c)
{
	_cleanup_json_ json_object *req = mcp_sd_request(c, "session_info");
	SessiondReply rep;
	int r;

	if (!req) {
		mcp_http_error(c->rq, 500, c->id, RPC_INTERNAL_ERROR, NULL, "out of memory");
		return false;
	}
	r = sessiond_call(&c->rq->w->sd, req, SESSIOND_RETRY_ANY, &rep);
	if (r == 0 && rep.ok) {
		sessiond_reply_clear(&rep);
		return true;
	}
	mcp_sd_fail(c, r, r < 0 ? NULL : &rep);
	sessiond_reply_clear(&rep);
	return false;
}

/* ---- methods ---- */

/* Destroy the call's session; whatever the daemon says, nothing is answered. */
static void end_session(McpCall *c)
{
	_cleanup_json_ json_object *req = mcp_sd_request(c, "destroy");
	SessiondReply rep;

	if (req && sessiond_call(&c->rq->w->sd, req, SESSIOND_RETRY_ANY, &rep) == 0)
		sessiond_reply_clear(&rep);
}

static json_object *initialize_result(const char *version)
{
	json_object *o = json_object_new_object(), *caps = json_object_new_object();
	json_object *tools = json_object_new_object(), *info = json_object_new_object();

	json_set(tools, "listChanged", json_object_new_boolean(false));
	json_set(caps, "tools", tools);
	json_set(info, "name", json_object_new_string("paddock"));
	json_set(info, "title", json_object_new_string("paddock code-execution sandbox"));
	json_set(info, "version", json_object_new_string(PADDOCK_VERSION));
	json_set(o, "protocolVersion", json_object_new_string(version));
	json_set(o, "capabilities", caps);
	json_set(o, "serverInfo", info);
	json_set(o, "instructions",
		 json_object_new_string(
			 "An isolated, stateful sandbox with Python, bash and files under "
			 "/workspace. State persists across calls for the life of this session; "
			 "the sandbox has no network access."));
	return o;
}

/* initialize: the session is made now (from the warm pool), and its id is the MCP
 * session's. The revision is the client's when served, else the newest. */
static void initialize(McpCall *c, json_object *params)
{
	_cleanup_json_ json_object *req = mcp_sd_request(c, "create");
	const char *asked = NULL, *sid = NULL;
	char header[ROUTE_ID_MAX + 32];
	json_object *result;
	SessiondReply rep;
	int r;

	if (!params || json_in_string(params, "protocolVersion", &asked, NULL) <= 0) {
		mcp_answer(c,
			   rpc_error(c->id, RPC_INVALID_PARAMS, NULL,
				     "initialize needs params.protocolVersion"),
			   NULL);
		return;
	}
	/* Python on the kernel tier, so figures come back as images (a runtime without
	 * IPython serves the plain tier instead). */
	if (json_set(req, "kernel", json_object_new_boolean(true)) < 0) {
		mcp_http_error(c->rq, 500, c->id, RPC_INTERNAL_ERROR, NULL, "out of memory");
		return;
	}
	r = sessiond_call(&c->rq->w->sd, req, SESSIOND_RETRY_ON_SEND, &rep);
	if (r < 0 || !rep.ok) {
		mcp_sd_fail(c, r, r < 0 ? NULL : &rep);
		sessiond_reply_clear(&rep);
		return;
	}
	if (json_in_string(rep.obj, "session_id", &sid, NULL) <= 0 ||
	    !route_id_valid(sid, strlen(sid))) {
		log_err("sessiond create reply without a session id REQUEST_ID=%s",
			c->rq->http.request_id);
		sessiond_reply_clear(&rep);
		mcp_http_error(c->rq, 500, c->id, RPC_INTERNAL_ERROR, NULL,
			       "the session daemon gave no session id");
		return;
	}
	snprintf(c->session_id_buf, sizeof(c->session_id_buf), "%s", sid);
	c->session_id = c->session_id_buf;
	sessiond_reply_clear(&rep);
	result = initialize_result(version_served(asked) ? asked : mcp_versions[0]);
	if (json_incomplete(result)) {
		/* A session nobody will know of is released now, not at its idle end. */
		json_object_put(result);
		end_session(c);
		mcp_http_error(c->rq, 500, c->id, RPC_INTERNAL_ERROR, NULL, "out of memory");
		return;
	}
	snprintf(header, sizeof(header), "Mcp-Session-Id: %s\r\n", c->session_id);
	log_info("MCP session started SESSION_ID=%s REQUEST_ID=%s", c->session_id,
		 c->rq->http.request_id);
	mcp_answer(c, rpc_result(c->id, result), header);
}

static void serve_request(McpCall *c, const RpcMessage *m)
{
	if (strcmp(m->method, "initialize") == 0) {
		initialize(c, m->params);
		return;
	}
	if (!check_version_header(c->rq, c->id) || !(c->session_id = take_session(c->rq, c->id)))
		return;
	if (strcmp(m->method, "tools/call") == 0) {
		/* The run itself finds out whether the session is there. */
		mcp_tools_call(c, m->params);
		return;
	}
	if (!session_alive(c))
		return;
	if (strcmp(m->method, "ping") == 0)
		mcp_answer_result(c, json_object_new_object());
	else if (strcmp(m->method, "tools/list") == 0)
		mcp_answer_result(c, mcp_tools_list());
	else
		mcp_answer(c,
			   rpc_error(c->id, RPC_METHOD_NOT_FOUND, NULL, "method not found: %.*s",
				     (int)utf8_prefix_len(m->method, 64), m->method),
			   NULL);
}

/* Notifications and the client's responses have no answer but 202. */
static void serve_notification(ReqCtx *rq, const RpcMessage *m)
{
	McpCall c = { .rq = rq };

	if (!check_version_header(rq, NULL) || !(c.session_id = take_session(rq, NULL)))
		return;
	if (m->kind == RPC_NOTIFICATION && strcmp(m->method, "notifications/cancelled") == 0) {
		json_object *request_id = NULL;

		if (m->params)
			json_object_object_get_ex(m->params, "requestId", &request_id);
		if (mcp_cancel(&c, request_id) < 0)
			return;
	} else if (!session_alive(&c)) {
		return;
	}
	http_send_head(&rq->http, 202, NULL, 0, NULL);
}

/* The body as one JSON-RPC message; answers and returns -1 when it is not one. */
static int read_message(ReqCtx *rq, json_object **ret)
{
	const PaddockConfig *cfg = rq->app->cfg;
	BodyError e;

	if (!media_type_is(rq->http.content_type, "application/json")) {
		mcp_http_error(rq, 415, NULL, RPC_INVALID_REQUEST, NULL,
			       "the body must be application/json");
		return -1;
	}
	if (body_read_json(&rq->http, (size_t)cfg->max_body_bytes, (int)cfg->json_max_depth, ret,
			   &e) == 0)
		return 0;
	switch (e.kind) {
	case BODY_EMPTY:
		mcp_http_error(rq, 400, NULL, RPC_INVALID_REQUEST, NULL,
			       "the body must be a JSON-RPC message");
		break;
	case BODY_TOO_LARGE:
		mcp_http_error(rq, 413, NULL, RPC_INVALID_REQUEST, NULL,
			       "the message is larger than %" PRId64 " bytes", cfg->max_body_bytes);
		break;
	case BODY_UNREADABLE:
		mcp_http_error(rq, 400, NULL, RPC_PARSE_ERROR, NULL, "the body could not be read");
		break;
	case BODY_NOT_JSON:
		mcp_http_error(rq, 400, NULL, RPC_PARSE_ERROR, NULL, "parse error: %s", e.detail);
		break;
	case BODY_NOT_OBJECT:
		mcp_http_error(rq, 400, NULL, RPC_INVALID_REQUEST, NULL,
			       "the body must be one JSON-RPC message object (batches are not "
			       "part of this protocol revision)");
		break;
	case BODY_NO_MEMORY:
		mcp_http_error(rq, 500, NULL, RPC_INTERNAL_ERROR, NULL, "out of memory");
		break;
	}
	return -1;
}

void mcp_post(ReqCtx *rq)
{
	_cleanup_json_ json_object *msg = NULL;
	RpcMessage m;
	McpCall c = { .rq = rq };

	if (!check_origin(rq) || !check_accept(rq) || read_message(rq, &msg) < 0)
		return;
	rpc_classify(msg, &m);
	switch (m.kind) {
	case RPC_INVALID:
		mcp_http_error(rq, 400, NULL, RPC_INVALID_REQUEST, NULL, "invalid request: %s",
			       m.why);
		return;
	case RPC_REQUEST:
		c.id = m.id;
		c.sse_ok = http_wants_sse(&rq->http);
		serve_request(&c, &m);
		return;
	case RPC_NOTIFICATION:
	case RPC_RESPONSE: serve_notification(rq, &m); return;
	}
}

void mcp_delete(ReqCtx *rq)
{
	_cleanup_json_ json_object *req = NULL;
	McpCall c = { .rq = rq };
	SessiondReply rep;
	bool existed = false;
	int r;

	if (!check_origin(rq) || !check_version_header(rq, NULL) ||
	    !(c.session_id = take_session(rq, NULL)))
		return;
	req = mcp_sd_request(&c, "destroy");
	if (!req) {
		mcp_http_error(rq, 500, NULL, RPC_INTERNAL_ERROR, NULL, "out of memory");
		return;
	}
	r = sessiond_call(&rq->w->sd, req, SESSIOND_RETRY_ANY, &rep);
	if (r < 0 || !rep.ok) {
		mcp_sd_fail(&c, r, r < 0 ? NULL : &rep);
		sessiond_reply_clear(&rep);
		return;
	}
	json_in_bool(rep.obj, "existed", &existed);
	sessiond_reply_clear(&rep);
	if (!existed) {
		mcp_http_error(rq, 404, NULL, RPC_INVALID_REQUEST, NULL,
			       "unknown MCP session; it has ended already");
		return;
	}
	log_info("MCP session ended SESSION_ID=%s REQUEST_ID=%s", c.session_id,
		 rq->http.request_id);
	http_send_head(&rq->http, 204, NULL, -1, NULL);
}
