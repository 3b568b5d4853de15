/* SPDX-License-Identifier: MIT */
/* The tools an MCP session offers: their catalog with input schemas, and tools/call (a run
 * whose output streams as progress notifications, an edit, or a file tool). */
#include "mcp.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cleanup.h"
#include "json.h"
#include "log.h"
#include "proto.h"

/* The catalog, as tools/list answers it. The descriptions are what a model reads. */
static const char catalog[] =
	"["
	"{\"name\":\"code_execution\",\"title\":\"Run Python\","
	"\"description\":\"Run Python code in this session's sandbox. Variables, imports and "
	"files persist across calls. Returns what the code printed, the value of its last "
	"expression, figures shown with plt.show() or display() as images, and the traceback "
	"when it fails. The working directory is /workspace; there is no network access.\","
	"\"inputSchema\":{\"type\":\"object\",\"properties\":{"
	"\"code\":{\"type\":\"string\",\"minLength\":1,\"description\":\"The Python code to run.\"},"
	"\"timeout_seconds\":{\"type\":\"integer\",\"minimum\":1,"
	"\"description\":\"Wall-clock limit; the code is interrupted after it.\"}},"
	"\"required\":[\"code\"],\"additionalProperties\":false},"
	"\"annotations\":{\"readOnlyHint\":false,\"destructiveHint\":true,\"idempotentHint\":false,"
	"\"openWorldHint\":false}},"
	"{\"name\":\"bash_code_execution\",\"title\":\"Run a shell command\","
	"\"description\":\"Run a command in this session's persistent bash shell (the working "
	"directory and exported variables are kept between calls). Returns its stdout and "
	"stderr; a non-zero exit status marks the result as an error.\","
	"\"inputSchema\":{\"type\":\"object\",\"properties\":{"
	"\"command\":{\"type\":\"string\",\"minLength\":1,\"description\":\"The bash command.\"},"
	"\"timeout_seconds\":{\"type\":\"integer\",\"minimum\":1}},"
	"\"required\":[\"command\"],\"additionalProperties\":false},"
	"\"annotations\":{\"readOnlyHint\":false,\"destructiveHint\":true,\"idempotentHint\":false,"
	"\"openWorldHint\":false}},"
	"{\"name\":\"text_editor_code_execution\",\"title\":\"Edit files\","
	"\"description\":\"View, create and edit text files in the workspace. view shows a file "
	"(or lines view_range [first, last], last -1 for the end) or lists a directory; create "
	"writes file_text to a new file; str_replace replaces the one occurrence of old_str "
	"with new_str; insert puts new_str after line insert_line (0: at the top); undo_edit "
	"reverts the last str_replace or insert of a file.\","
	"\"inputSchema\":{\"type\":\"object\",\"properties\":{"
	"\"command\":{\"type\":\"string\",\"enum\":[\"view\",\"create\",\"str_replace\","
	"\"insert\",\"undo_edit\"]},"
	"\"path\":{\"type\":\"string\",\"description\":\"The file, relative to /workspace or "
	"under it.\"},"
	"\"file_text\":{\"type\":\"string\"},\"old_str\":{\"type\":\"string\"},"
	"\"new_str\":{\"type\":\"string\"},\"insert_line\":{\"type\":\"integer\",\"minimum\":0},"
	"\"view_range\":{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":2,"
	"\"maxItems\":2}},"
	"\"required\":[\"command\",\"path\"],\"additionalProperties\":false},"
	"\"annotations\":{\"readOnlyHint\":false,\"destructiveHint\":true,\"idempotentHint\":false,"
	"\"openWorldHint\":false}},"
	"{\"name\":\"list_files\",\"title\":\"List files\","
	"\"description\":\"List the regular files under a directory of the workspace (default: "
	"all of it), with their sizes, modification times and media types.\","
	"\"inputSchema\":{\"type\":\"object\",\"properties\":{"
	"\"path\":{\"type\":\"string\",\"description\":\"A directory; default the workspace.\"}},"
	"\"additionalProperties\":false},"
	"\"annotations\":{\"readOnlyHint\":true,\"openWorldHint\":false}},"
	"{\"name\":\"read_file\",\"title\":\"Read a file\","
	"\"description\":\"Read a file of the workspace: text as text, PNG, JPEG, GIF and WebP "
	"images as images, anything else as a base64 blob.\","
	"\"inputSchema\":{\"type\":\"object\",\"properties\":{"
	"\"path\":{\"type\":\"string\"}},\"required\":[\"path\"],\"additionalProperties\":false},"
	"\"annotations\":{\"readOnlyHint\":true,\"openWorldHint\":false}},"
	"{\"name\":\"write_file\",\"title\":\"Write a file\","
	"\"description\":\"Write a file in the workspace, replacing one that is there and "
	"making its directories. content is the text, or the bytes in base64 when encoding is "
	"base64.\","
	"\"inputSchema\":{\"type\":\"object\",\"properties\":{"
	"\"path\":{\"type\":\"string\"},\"content\":{\"type\":\"string\"},"
	"\"encoding\":{\"type\":\"string\",\"enum\":[\"utf-8\",\"base64\"],\"default\":\"utf-8\"}},"
	"\"required\":[\"path\",\"content\"],\"additionalProperties\":false},"
	"\"annotations\":{\"readOnlyHint\":false,\"destructiveHint\":true,\"idempotentHint\":true,"
	"\"openWorldHint\":false}}"
	"]";

json_object *mcp_tools_list(void)
{
	json_object *o = json_object_new_object();

	json_set(o, "tools", json_tokener_parse(catalog));
	return o;
}

/* ---- runs: code_execution and bash_code_execution ---- */

/* What a run tool names. */
struct run_tool {
	const char *name;  /* the MCP tool */
	const char *field; /* its one required argument */
	const char *tool;  /* sessiond's exec "tool" */
	bool cell;	   /* notebook semantics: the last value, rich outputs, the error */
};

static const struct run_tool run_tools[] = {
	{ "code_execution", "code", "python", true },
	{ "bash_code_execution", "command", "bash", false },
};

/* The exec request for t with args, or NULL and *result the failing result that says why. */
static json_object *run_request(McpCall *c, const struct run_tool *t, json_object *args,
				json_object **result)
{
	const PaddockConfig *cfg = c->rq->app->cfg;
	json_object *req;
	const char *text, *tag;
	size_t len;
	int64_t timeout = cfg->exec_timeout_default;
	int r;

	*result = NULL;
	r = json_in_string(args, t->field, &text, &len);
	if (r <= 0 || len == 0) {
		*result = mcp_tool_error("%s is required: a non-empty string", t->field);
		return NULL;
	}
	if (len > (size_t)cfg->code_max_bytes) {
		*result = mcp_tool_error("%s is longer than the %" PRId64 "-byte limit", t->field,
					 cfg->code_max_bytes);
		return NULL;
	}
	if (memchr(text, '\0', len)) {
		*result = mcp_tool_error("%s must not contain NUL characters", t->field);
		return NULL;
	}
	r = json_in_int(args, "timeout_seconds", &timeout);
	if (r < 0 || timeout < 1 || timeout > cfg->exec_timeout_max) {
		*result = mcp_tool_error("timeout_seconds must be an integer from 1 to %" PRId64,
					 cfg->exec_timeout_max);
		return NULL;
	}
	req = mcp_sd_request(c, "exec");
	json_set(req, "tool", json_object_new_string(t->tool));
	json_set(req, "code", json_object_new_string_len(text, (int)len));
	json_set(req, "timeout_ms", json_object_new_int64(timeout * 1000));
	/* cancel finds the run by the request's id; one longer than sessiond keeps names a
	 * call that cannot be cancelled (MCP sets no bound on ids). */
	tag = rpc_id_text(c->id);
	if (strlen(tag) <= PROTO_CALL_TAG_MAX)
		json_set(req, "call_tag", json_object_new_string(tag));
	if (t->cell)
		json_set(req, "mode", json_object_new_string("cell"));
	/* MCP: a dropped connection is no cancel (the client sends notifications/cancelled
	 * for that); the call runs to its end, its state changes kept. */
	json_set(req, "finish_on_hangup", json_object_new_boolean(true));
	if (json_incomplete(req)) {
		json_object_put(req);
		*result = mcp_tool_error("out of memory");
		return NULL;
	}
	return req;
}

/* Output as it comes: notifications/progress with the text as its message, and the
 * characters so far as its progress (which must grow with each). */
static int progress_text(OutputRelay *r, bool is_stderr, const char *text, size_t len)
{
	McpCall *c = r->ctx;
	_cleanup_json_ json_object *n = json_object_new_object();
	json_object *p = json_object_new_object();

	(void)is_stderr;
	json_set(n, "jsonrpc", json_object_new_string("2.0"));
	json_set(n, "method", json_object_new_string("notifications/progress"));
	json_set(p, "progressToken", json_object_get(c->progress_token));
	json_set(p, "progress", json_object_new_int64((int64_t)r->chars));
	json_set(p, "message", json_object_new_string_len(text, (int)len));
	json_set(n, "params", p);
	/* Progress is a courtesy: without memory for it the run goes on, and the result has
	 * everything. A write that fails is the client gone, which ends the call. */
	if (json_incomplete(n))
		return 0;
	return sse_json_event(r->http, "message", n);
}

/* Run req; its output streams as progress when the client gave a token and takes a stream.
 * 0 with an ok reply; -1 when answered (or the client went away, or it was cancelled on a
 * stream, which ends without a response). *result: a refusal the model can act on. */
static int run_call(McpCall *c, json_object *req, SessiondReply *rep, json_object **result)
{
	const PaddockConfig *cfg = c->rq->app->cfg;
	OutputRelay relay = {
		.http = &c->rq->http,
		.text = progress_text,
		.ctx = c,
		/* The reply keeps output_max_bytes a stream; the progress shows no more. */
		.max_chars = (size_t)cfg->output_max_bytes * 2,
		.heartbeat_ms = (int)cfg->stream_heartbeat_seconds * 1000,
	};
	int r;

	*result = NULL;
	if (c->progress_token && c->sse_ok)
		r = sessiond_call_relayed(&c->rq->w->sd, req, &relay, rep);
	else
		/* Running code twice is worse than failing once: no retry after sessiond saw it. */
		r = sessiond_call(&c->rq->w->sd, req, SESSIOND_RETRY_ON_SEND, rep);
	if (r == 0 && rep->ok)
		return 0;
	if (r == -ECONNABORTED)
		return -1; /* the client went away: nobody to answer */
	*result = r == 0 ? mcp_sd_refusal(rep) : NULL;
	if (!*result)
		mcp_sd_fail(c, r, r < 0 ? NULL : rep);
	sessiond_reply_clear(rep);
	return -1;
}

static void call_run(McpCall *c, const struct run_tool *t, json_object *args)
{
	_cleanup_json_ json_object *req = NULL;
	json_object *result = NULL;
	SessiondReply rep;
	bool cancelled = false;

	req = run_request(c, t, args, &result);
	if (!req) {
		mcp_answer_result(c, result);
		return;
	}
	if (run_call(c, req, &rep, &result) < 0) {
		if (result)
			mcp_answer_result(c, result);
		return;
	}
	json_in_bool(rep.obj, "cancelled", &cancelled);
	/* A request the client cancelled gets no response; a stream just ends. A plain
	 * HTTP answer still needs a body: the result, which the client ignores. */
	if (cancelled && c->rq->http.sse) {
		sessiond_reply_clear(&rep);
		return;
	}
	result = mcp_exec_result(rep.obj);
	sessiond_reply_clear(&rep);
	mcp_answer_result(c, result);
}

/* ---- the editor ---- */

static void call_editor(McpCall *c, json_object *args)
{
	_cleanup_json_ json_object *req = mcp_sd_request(c, "edit");
	json_object *result = NULL;
	SessiondReply rep;
	int r;

	/* sessiond checks the editor's fields as it does for Otari. */
	if (json_set(req, "input", json_object_get(args)) < 0) {
		mcp_answer_result(c, mcp_tool_error("out of memory"));
		return;
	}
	r = sessiond_call(&c->rq->w->sd, req, SESSIOND_RETRY_ON_SEND, &rep);
	if (r < 0 || !rep.ok) {
		result = r == 0 ? mcp_sd_refusal(&rep) : NULL;
		if (result)
			mcp_answer_result(c, result);
		else
			mcp_sd_fail(c, r, r < 0 ? NULL : &rep);
		sessiond_reply_clear(&rep);
		return;
	}
	result = mcp_exec_result(rep.obj);
	sessiond_reply_clear(&rep);
	mcp_answer_result(c, result);
}

/* ---- tools/call ---- */

static const struct {
	const char *name;
	json_object *(*call)(McpCall *c, json_object *args);
} file_tools[] = {
	{ "list_files", mcp_list_files },
	{ "read_file", mcp_read_file },
	{ "write_file", mcp_write_file },
};

void mcp_tools_call(McpCall *c, json_object *params)
{
	_cleanup_json_ json_object *empty = NULL;
	json_object *args = NULL, *meta;
	const char *name;
	int r;

	if (!params || json_in_string(params, "name", &name, NULL) <= 0) {
		mcp_answer(c,
			   rpc_error(c->id, RPC_INVALID_PARAMS, NULL,
				     "tools/call needs params.name, a tool's name"),
			   NULL);
		return;
	}
	r = json_in_object(params, "arguments", &args);
	if (r < 0) {
		mcp_answer(c,
			   rpc_error(c->id, RPC_INVALID_PARAMS, NULL,
				     "params.arguments must be an object"),
			   NULL);
		return;
	}
	if (r == 0)
		args = empty = json_object_new_object();
	/* A token that is not a valid one is no request for progress. */
	if (json_in_object(params, "_meta", &meta) > 0 &&
	    json_object_object_get_ex(meta, "progressToken", &c->progress_token) &&
	    !rpc_id_valid(c->progress_token))
		c->progress_token = NULL;
	for (size_t i = 0; i < ARRAY_SIZE(run_tools); i++)
		if (strcmp(name, run_tools[i].name) == 0) {
			call_run(c, &run_tools[i], args);
			return;
		}
	if (strcmp(name, "text_editor_code_execution") == 0) {
		call_editor(c, args);
		return;
	}
	for (size_t i = 0; i < ARRAY_SIZE(file_tools); i++)
		if (strcmp(name, file_tools[i].name) == 0) {
			json_object *result = file_tools[i].call(c, args);

			/* NULL: a server failure, answered already. */
			if (result)
				mcp_answer_result(c, result);
			return;
		}
	mcp_answer(c,
		   rpc_error(c->id, RPC_INVALID_PARAMS, NULL, "unknown tool: %.*s",
			     (int)utf8_prefix_len(name, 64), name),
		   NULL);
}

int mcp_cancel(McpCall *c, json_object *request_id)
{
	_cleanup_json_ json_object *req = mcp_sd_request(c, "cancel");
	SessiondReply rep;
	int r;

	/* A cancel of nothing in particular, or of what no call can be named, changes
	 * nothing: accepted as such. */
	if (!rpc_id_valid(request_id))
		return 0;
	if (json_set(req, "call_tag", json_object_new_string(rpc_id_text(request_id))) < 0) {
		mcp_http_error(c->rq, 500, NULL, RPC_INTERNAL_ERROR, NULL, "out of memory");
		return -1;
	}
	r = sessiond_call(&c->rq->w->sd, req, SESSIOND_RETRY_ANY, &rep);
	if (r < 0 || !rep.ok) {
		mcp_sd_fail(c, r, r < 0 ? NULL : &rep);
		sessiond_reply_clear(&rep);
		return -1;
	}
	sessiond_reply_clear(&rep);
	return 0;
}
