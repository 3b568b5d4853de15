/* SPDX-License-Identifier: MIT */
/* Otari sessions and Execute: CreateSession, DestroySession, Execute; their checks and shapes. */
#include "otari.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cleanup.h"
#include "http/http.h"
#include "json.h"
#include "log.h"
#include "random.h"

#define IMAGE_MAX 255

/* An optional integer >= 1 (null: absent) copied into the sessiond request. */
static int take_positive(ReqCtx *rq, json_object *body, const char *key, json_object *sdreq)
{
	int64_t v;
	int r = json_in_int(body, key, &v);

	if (r == 0)
		return 0;
	if (r < 0 || v < 1) {
		http_error(&rq->http, 422, NULL, "%s must be an integer of at least 1, or null",
			   key);
		return -1;
	}
	if (json_set(sdreq, key, json_object_new_int64(v)) < 0) {
		http_error(&rq->http, 500, NULL, "out of memory");
		return -1;
	}
	return 0;
}

void otari_create(ReqCtx *rq)
{
	_cleanup_json_ json_object *body = NULL, *sdreq = NULL, *out = NULL;
	SessiondReply rep;
	const char *image;
	size_t image_len;
	json_object *sid;
	int r;

	if (otari_read_json(rq, true, &body) < 0)
		return;
	sdreq = otari_sd_request(rq, "create");
	if (!sdreq)
		goto oom;
	if (take_positive(rq, body, "idle_timeout_seconds", sdreq) < 0 ||
	    take_positive(rq, body, "max_lifetime_seconds", sdreq) < 0)
		return;
	r = json_in_string(body, "image", &image, &image_len);
	if (r < 0 || (r > 0 && image_len > IMAGE_MAX)) {
		http_error(&rq->http, 422, NULL,
			   "image must be a string of at most %d bytes, or null", IMAGE_MAX);
		return;
	}
	if (r > 0 &&
	    json_set(sdreq, "image", json_object_new_string_len(image, (int)image_len)) < 0)
		goto oom;

	if (otari_sd_call(rq, sdreq, SESSIOND_RETRY_ON_SEND, &rep) < 0)
		return;
	if (!json_object_object_get_ex(rep.obj, "session_id", &sid) ||
	    !json_object_is_type(sid, json_type_string)) {
		log_err("sessiond create reply without a session_id REQUEST_ID=%s",
			rq->http.request_id);
		sessiond_reply_clear(&rep);
		http_error(&rq->http, 500, NULL, "the session daemon gave no session id");
		return;
	}
	out = json_object_new_object();
	if (!out || json_copy_field(out, rep.obj, "session_id") < 0 ||
	    json_copy_field(out, rep.obj, "idle_timeout_seconds") < 0 ||
	    json_copy_field(out, rep.obj, "max_lifetime_seconds") < 0 ||
	    json_copy_field(out, rep.obj, "created_at") < 0 ||
	    json_copy_field(out, rep.obj, "last_activity_at") < 0) {
		sessiond_reply_clear(&rep);
		goto oom;
	}
	sessiond_reply_clear(&rep);
	http_send_json(&rq->http, 201, out, NULL);
	return;
oom:
	http_error(&rq->http, 500, NULL, "out of memory");
}

void otari_destroy(ReqCtx *rq)
{
	_cleanup_json_ json_object *sdreq = otari_sd_request(rq, "destroy");
	SessiondReply rep;
	int r;

	if (!sdreq) {
		http_error(&rq->http, 500, NULL, "out of memory");
		return;
	}
	r = sessiond_call(&rq->w->sd, sdreq, SESSIOND_RETRY_ANY, &rep);
	/* Releasing what is already gone is success: the session is in the state asked for. */
	if (r == 0 && (rep.ok || strcmp(rep.kind, "not_found") == 0))
		http_send_head(&rq->http, 204, NULL, -1, NULL);
	else
		otari_sd_fail(rq, r, r < 0 ? NULL : &rep);
	sessiond_reply_clear(&rep);
}

/* The fields of a session's handle GET /sessions/{id} shows, as sessiond has them. */
static const char *const handle_fields[] = {
	"session_id",
	"idle_timeout_seconds",
	"max_lifetime_seconds",
	"created_at",
	"last_activity_at",
	"execution_count",
	"running",
	"runtime",
};

void otari_lookup(ReqCtx *rq)
{
	_cleanup_json_ json_object *sdreq = otari_sd_request(rq, "session_info"), *out = NULL;
	SessiondReply rep;

	if (!sdreq) {
		http_error(&rq->http, 500, NULL, "out of memory");
		return;
	}
	if (otari_sd_call(rq, sdreq, SESSIOND_RETRY_ANY, &rep) < 0)
		return;
	out = json_object_new_object();
	for (size_t i = 0; out && i < ARRAY_SIZE(handle_fields); i++)
		json_copy_field(out, rep.obj, handle_fields[i]);
	sessiond_reply_clear(&rep);
	if (json_incomplete(out)) {
		http_error(&rq->http, 500, NULL, "out of memory");
		return;
	}
	http_send_json(&rq->http, 200, out, NULL);
}

/* The tools Execute accepts, and what each becomes for sessiond. */
struct tool {
	const char *name;	   /* the API's tool name */
	const char *sessiond_tool; /* exec's "tool", or NULL for the editor */
	const char *field;	   /* input's required field, or NULL */
};

static const struct tool tools[] = {
	{ "code_execution", "python", "code" },
	{ "bash_code_execution", "bash", "command" },
	{ "text_editor_code_execution", NULL, NULL },
};

/* srvtoolu_ and 24 lowercase hex digits from the kernel's CSPRNG. */
static int make_tool_use_id(char out[9 + 24 + 1])
{
	memcpy(out, "srvtoolu_", 9);
	return random_hex(out + 9, 12);
}

/*
 * Validate tool, input and timeout into the sessiond request, written as text and left
 * open (otari_sd_request_begin); answers and returns -1 on error.
 */
static int exec_request(ReqCtx *rq, json_object *body, const struct tool **tool_out,
			JsonText *sdreq)
{
	const PaddockConfig *cfg = rq->app->cfg;
	const struct tool *tool = NULL;
	json_object *input;
	const char *name, *text;
	size_t text_len;
	int64_t timeout = cfg->exec_timeout_default;
	int r;

	if (json_in_string(body, "tool", &name, NULL) <= 0) {
		http_error(&rq->http, 422, NULL, "tool is required and must be a string");
		return -1;
	}
	for (size_t i = 0; i < ARRAY_SIZE(tools); i++)
		if (strcmp(tools[i].name, name) == 0)
			tool = &tools[i];
	if (!tool) {
		http_error(&rq->http, 400, NULL,
			   "unknown tool; expected code_execution, bash_code_execution or "
			   "text_editor_code_execution");
		return -1;
	}
	if (json_in_object(body, "input", &input) <= 0) {
		http_error(&rq->http, 422, NULL, "input is required and must be an object");
		return -1;
	}
	r = json_in_int(body, "timeout_seconds", &timeout);
	if (r < 0 || timeout < 1) {
		http_error(&rq->http, 422, NULL,
			   "timeout_seconds must be an integer of at least 1");
		return -1;
	}
	if (timeout > cfg->exec_timeout_max) {
		http_error(&rq->http, 422, NULL, "timeout_seconds must be at most %" PRId64,
			   cfg->exec_timeout_max);
		return -1;
	}
	if (!tool->sessiond_tool) {
		/* sessiond validates the editor's fields; its "invalid" becomes 422. */
		otari_sd_request_begin(rq, sdreq, "edit");
		json_text_add_key(sdreq, "input");
		json_text_add_value(sdreq, input);
		if (sdreq->failed)
			goto oom;
		*tool_out = tool;
		return 0;
	}
	r = json_in_string(input, tool->field, &text, &text_len);
	if (r <= 0 || text_len == 0) {
		http_error(&rq->http, 422, NULL,
			   "input.%s is required and must be a non-empty string", tool->field);
		return -1;
	}
	if (text_len > (size_t)cfg->code_max_bytes) {
		http_error(&rq->http, 422, NULL,
			   "input.%s is longer than the %" PRId64 "-byte limit", tool->field,
			   cfg->code_max_bytes);
		return -1;
	}
	/* No interpreter takes a NUL in source, and a C string would silently end there. */
	if (memchr(text, '\0', text_len)) {
		http_error(&rq->http, 422, NULL, "input.%s must not contain NUL characters",
			   tool->field);
		return -1;
	}
	otari_sd_request_begin(rq, sdreq, "exec");
	json_text_add_key(sdreq, "tool");
	json_text_add_quoted(sdreq, tool->sessiond_tool);
	json_text_add_key(sdreq, "code");
	json_text_add_quoted_len(sdreq, text, text_len);
	json_text_add_key(sdreq, "timeout_ms");
	json_text_add_int(sdreq, timeout * 1000);
	if (sdreq->failed)
		goto oom;
	*tool_out = tool;
	return 0;
oom:
	http_error(&rq->http, 500, NULL, "out of memory");
	return -1;
}

/* The file list: only well-formed entries, in the contract's shape. */
static json_object *render_files(json_object *files)
{
	json_object *out = json_object_new_array();

	if (!out || !json_object_is_type(files, json_type_array))
		return out;
	for (size_t i = 0; i < json_object_array_length(files); i++) {
		json_object *f = json_object_array_get_idx(files, i), *e;
		const char *id, *fn;

		if (json_in_string(f, "file_id", &id, NULL) <= 0 ||
		    json_in_string(f, "filename", &fn, NULL) <= 0)
			continue;
		e = json_object_new_object();
		if (!e || json_object_array_add(out, e) < 0) {
			json_object_put(e);
			json_object_put(out);
			return NULL;
		}
		if (json_set(e, "type", json_object_new_string("code_execution_output")) < 0 ||
		    json_copy_field(e, f, "file_id") < 0 || json_copy_field(e, f, "filename") < 0) {
			json_object_put(out);
			return NULL;
		}
	}
	return out;
}

/* Whether a span holds an array with nothing in it. */
static bool span_empty_array(const JsonSpan *sp)
{
	if (!json_span_is(sp, '['))
		return false;
	for (size_t i = 1; i + 1 < sp->len; i++)
		if (!strchr(" \t\r\n", sp->text[i]))
			return false;
	return true;
}

/* The files the call made; most make none, and only then is the list built as objects. */
static void add_files(JsonText *t, const JsonSpan *files)
{
	_cleanup_json_ json_object *arr = NULL, *out = NULL;
	const char *s;
	size_t len;

	if (!json_span_is(files, '[') || span_empty_array(files)) {
		json_text_add_str(t, "[]");
		return;
	}
	arr = json_in_parse_quick(files->text, files->len, JSON_TOKENER_DEFAULT_DEPTH);
	out = render_files(arr);
	s = out ? json_render(out, &len) : NULL;
	if (!s) {
		t->failed = true;
		return;
	}
	json_text_add(t, s, len);
}

/* A string member as it came, "" when missing or not a string. */
static void add_string(JsonText *t, const JsonSpan *sp)
{
	if (json_span_is(sp, '"'))
		json_text_add_span(t, sp);
	else
		json_text_add_str(t, "\"\"");
}

/* An integer member (at least min), or null. */
static void add_int_or_null(JsonText *t, const JsonSpan *sp, int64_t min)
{
	int64_t n;

	if (json_span_int(sp, &n) > 0 && n >= min)
		json_text_add_int(t, n);
	else
		json_text_add_str(t, "null");
}

/* What the answer takes from sessiond's exec reply. */
enum { R_STDOUT, R_STDERR, R_RETURN_CODE, R_TIME, R_USAGE, R_FILES, R_MEMBERS };
static const char *const reply_members[R_MEMBERS] = {
	"stdout", "stderr", "return_code", "execution_time_ms", "usage", "files",
};

/*
 * The answer to an Execute, written around the reply's values as they came (sessiond's
 * text is checked JSON): output, return code, time and usage are relayed, not rebuilt.
 * -EBADMSG when the reply is not a JSON object, -ENOMEM.
 */
static int render_exec(const struct tool *tool, const char *tool_use_id, const char *reply,
		       size_t reply_len, JsonText *t)
{
	JsonSpan v[R_MEMBERS];

	if (json_scan_object(reply, reply_len, JSON_TOKENER_DEFAULT_DEPTH, reply_members, v,
			     R_MEMBERS) < 0)
		return -EBADMSG;
	json_text_add_str(t, "{\"tool_use_id\":");
	json_text_add_quoted(t, tool_use_id);
	json_text_add_str(t, ",\"result_block\":{\"type\":");
	{
		char type[64];

		snprintf(type, sizeof(type), "%s_tool_result", tool->name);
		json_text_add_quoted(t, type);
	}
	json_text_add_str(t, ",\"tool_use_id\":");
	json_text_add_quoted(t, tool_use_id);
	json_text_add_str(t, ",\"content\":{\"type\":\"code_execution_result\",\"stdout\":");
	add_string(t, &v[R_STDOUT]);
	json_text_add_str(t, ",\"stderr\":");
	add_string(t, &v[R_STDERR]);
	json_text_add_str(t, ",\"content\":");
	add_files(t, &v[R_FILES]);
	json_text_add_str(t, ",\"return_code\":");
	add_int_or_null(t, &v[R_RETURN_CODE], INT64_MIN);
	json_text_add_str(t, "}},\"execution_time_ms\":");
	add_int_or_null(t, &v[R_TIME], 0);
	/* Resource usage is an additive field; an empty object when sessiond sent none. */
	json_text_add_str(t, ",\"usage\":");
	if (json_span_is(&v[R_USAGE], '{'))
		json_text_add_span(t, &v[R_USAGE]);
	else
		json_text_add_str(t, "{}");
	json_text_add_str(t, "}");
	return t->failed ? -ENOMEM : 0;
}

void otari_exec(ReqCtx *rq)
{
	_cleanup_json_ json_object *body = NULL;
	_cleanup_(json_text_clear) JsonText sdreq = { .buf = NULL }, out = { .buf = NULL };
	const struct tool *tool;
	char generated[9 + 24 + 1];
	const char *tool_use_id, *reply;
	size_t reply_len = 0;
	SessiondReply rep;
	int r;

	if (otari_read_json(rq, false, &body) < 0)
		return;
	if (exec_request(rq, body, &tool, &sdreq) < 0)
		return;
	r = json_in_string(body, "tool_use_id", &tool_use_id, NULL);
	if (r < 0) {
		http_error(&rq->http, 422, NULL, "tool_use_id must be a string or null");
		return;
	}
	if (r == 0) {
		if (make_tool_use_id(generated) < 0) {
			http_error(&rq->http, 500, NULL, "no randomness for a tool_use_id");
			return;
		}
		tool_use_id = generated;
	}
	/* Running code twice is worse than failing once: no retry after sessiond saw it. */
	r = http_wants_sse(&rq->http) ?
		    otari_sd_call_streamed(rq, &sdreq, &rep) :
		    otari_sd_call_text(rq, &sdreq, SESSIOND_RETRY_ON_SEND, &rep);
	if (r < 0)
		return;
	/* A streamed call's reply came parsed: rendered again, off the hot path. */
	reply = rep.text;
	reply_len = rep.len;
	if (!reply)
		reply = json_render(rep.obj, &reply_len);
	r = reply ? render_exec(tool, tool_use_id, reply, reply_len, &out) : -ENOMEM;
	sessiond_reply_clear(&rep);
	if (r < 0) {
		http_error(&rq->http, 500, NULL,
			   r == -ENOMEM ? "out of memory" : "sessiond sent a malformed reply");
		return;
	}
	http_send_json_text(&rq->http, 200, out.buf, out.len, NULL);
}
