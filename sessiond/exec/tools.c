/* SPDX-License-Identifier: MIT */
/*
 * Programmatic tool calls. A client registers its tools for a session (a callback URL the
 * operator allows, a bearer token, the tools' names and docs). Code in the sandbox calls
 * one by writing a line on its interpreter's channel; the daemon, not the sandbox, makes the
 * HTTP call (httpc/), with the token, and writes the answer back on the channel. The
 * sandbox keeps no network and never sees the token or the URL.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "httpc/httpc.h"
#include "log.h"
#include "run.h"
#include "utf8.h"
#include "random.h"

#define TOOL_NAME_MAX 64
#define TOOL_DOC_MAX 8192
#define TOOL_URL_MAX 2048
#define TOOL_TOKEN_MAX 4096
#define TOOL_JSON_DEPTH 64
/* Where the module the harness builds lives in the sandbox (the lib dir's copy). */
#define TOOL_STUB_PATH "/opt/paddock/_platform_tools.py"

/* One call in flight: the run that waits, the HTTP call, what the log says. */
typedef struct ToolCall {
	Run *run;
	HttpCall *http;
	char call_id[4 + 32 + 1];
	char name[TOOL_NAME_MAX + 1];
	uint64_t start_ms;
	bool to_deadline; /* its time is the run's: its timeout is the run's deadline */
} ToolCall;

void tools_free(ToolSet *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->n; i++)
		free(t->names[i]);
	free(t->names);
	free(t->callback_url);
	free(t->token);
	json_object_put(t->stub);
	free(t);
}

/* ---- registration ---- */

/* A Python identifier of ASCII letters, digits and _, not a keyword, not a name the module
 * itself holds (dunders, ToolError). */
static bool tool_name_ok(const char *n)
{
	static const char *const keywords[] = {
		"False",  "None",   "True",    "and",	   "as",       "assert", "async",
		"await",  "break",  "class",   "continue", "def",      "del",	 "elif",
		"else",	  "except", "finally", "for",	   "from",     "global", "if",
		"import", "in",	    "is",      "lambda",   "nonlocal", "not",	 "or",
		"pass",	  "raise",  "return",  "try",	   "while",    "with",	 "yield",
	};
	size_t len = strlen(n);

	if (len == 0 || len > TOOL_NAME_MAX || (n[0] >= '0' && n[0] <= '9'))
		return false;
	for (size_t i = 0; i < len; i++)
		if (!((n[i] >= 'a' && n[i] <= 'z') || (n[i] >= 'A' && n[i] <= 'Z') ||
		      (n[i] >= '0' && n[i] <= '9') || n[i] == '_'))
			return false;
	for (size_t i = 0; i < ARRAY_SIZE(keywords); i++)
		if (strcmp(n, keywords[i]) == 0)
			return false;
	return strncmp(n, "__", 2) != 0 && strcmp(n, "ToolError") != 0;
}

/* A bearer token goes into a header line: visible ASCII only, no blank, no line break. */
static bool token_ok(const char *t)
{
	size_t len = strlen(t);

	if (len == 0 || len > TOOL_TOKEN_MAX)
		return false;
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)t[i] < 0x21 || (unsigned char)t[i] > 0x7e)
			return false;
	return true;
}

/* Whether url (canonical) is under one of the operator's prefixes, at a boundary: the prefix
 * "http://h:1/a" allows http://h:1/a and http://h:1/a/b, not http://h:1/ab. */
static bool url_allowed(const char *allow, const char *url)
{
	_cleanup_free_ char *list = strdup(allow);
	char *save = NULL;

	for (char *p = list ? strtok_r(list, ", \t", &save) : NULL; p;
	     p = strtok_r(NULL, ", \t", &save)) {
		const char *why;
		_cleanup_free_ char *prefix = httpc_canonical_url(p, &why);
		size_t n = prefix ? strlen(prefix) : 0;

		if (n && strncmp(url, prefix, n) == 0 &&
		    (prefix[n - 1] == '/' || url[n] == '\0' || url[n] == '/' || url[n] == '?'))
			return true;
	}
	return false;
}

/* One entry of the tools array into t and its stub; the error it is answered with, or
 * NULL. */
static json_object *take_tool(ToolSet *t, size_t i, json_object *tool)
{
	const char *name = req_string(tool, "name"), *d = req_string(tool, "doc");
	json_object *doc = NULL, *e;
	bool has_doc = json_object_object_get_ex(tool, "doc", &doc) && doc;

	if (!name || !tool_name_ok(name) || (has_doc && !d) || (d && strlen(d) > TOOL_DOC_MAX))
		return reply_error("invalid",
				   "tools[%zu]: name must be a Python identifier that is not a "
				   "keyword (at most %d characters), doc a string of at most %d "
				   "bytes",
				   i, TOOL_NAME_MAX, TOOL_DOC_MAX);
	for (size_t j = 0; j < t->n; j++)
		if (strcmp(t->names[j], name) == 0)
			return reply_error("invalid", "tools[%zu]: %s is named twice", i, name);
	e = json_object_new_object();
	json_set(e, "name", json_object_new_string(name));
	json_set(e, "doc", json_object_new_string(d ? d : ""));
	if (json_append(t->stub, e) < 0 || !(t->names[t->n] = strdup(name)))
		return reply_error("internal", "out of memory");
	t->n++;
	return NULL;
}

/* The tools array as t's names and stub; the error it is answered with, or NULL. */
static json_object *take_tools(const PaddockConfig *cfg, json_object *arr, ToolSet *t)
{
	size_t n = json_object_is_type(arr, json_type_array) ? json_object_array_length(arr) : 0;
	json_object *e = NULL;

	if (n == 0 || n > (size_t)cfg->tool_max_tools)
		return reply_error("invalid", "tools must be a list of 1 to %lld tools",
				   (long long)cfg->tool_max_tools);
	t->stub = json_object_new_array();
	t->names = calloc(n, sizeof(*t->names));
	if (!t->stub || !t->names)
		return reply_error("internal", "out of memory");
	for (size_t i = 0; !e && i < n; i++)
		e = take_tool(t, i, json_object_array_get_idx(arr, i));
	return e;
}

/* req as a ToolSet; the error it is answered with, or NULL. */
static json_object *tools_parse(const PaddockConfig *cfg, json_object *req, ToolSet *t)
{
	const char *url = req_string(req, "callback_url"), *token = req_string(req, "token");
	int64_t timeout = cfg->tool_timeout_default;
	json_object *tools = NULL, *e;
	const char *why;

	if (!*cfg->tool_callback_allow)
		return reply_error("forbidden", "programmatic tool calls are off here: "
						"tool_callback_allow names no URL");
	if (!url || strlen(url) > TOOL_URL_MAX)
		return reply_error("invalid", "callback_url must be a URL of at most %d bytes",
				   TOOL_URL_MAX);
	t->callback_url = httpc_canonical_url(url, &why);
	if (!t->callback_url)
		return reply_error("invalid", "%s", why);
	/* A server may decode %2e%2e into a parent directory the prefix did not allow. */
	if (strcasestr(t->callback_url, "%2e") || strcasestr(t->callback_url, "%2f") ||
	    strcasestr(t->callback_url, "%5c") || strchr(t->callback_url, '\\'))
		return reply_error("invalid", "callback_url must not encode dots, slashes or "
					      "backslashes");
	if (!url_allowed(cfg->tool_callback_allow, t->callback_url))
		return reply_error("forbidden", "callback_url is not under a URL prefix that "
						"tool_callback_allow names");
	if (!token || !token_ok(token))
		return reply_error("invalid", "token must be 1 to %d visible ASCII characters",
				   TOOL_TOKEN_MAX);
	if (json_object_object_get_ex(req, "timeout_seconds", &e) && e &&
	    (!req_int(req, "timeout_seconds", &timeout) || timeout < 1 ||
	     timeout > cfg->exec_timeout_max))
		return reply_error("invalid", "timeout_seconds must be an integer from 1 to %lld",
				   (long long)cfg->exec_timeout_max);
	t->timeout_ms = (uint64_t)timeout * 1000;
	if (!(t->token = strdup(token)))
		return reply_error("internal", "out of memory");
	json_object_object_get_ex(req, "tools", &tools);
	return take_tools(cfg, tools, t);
}

/* req as s's tools (replacing any), or the error it is answered with. */
static json_object *tools_set(Session *s, json_object *req)
{
	ToolSet *t = calloc(1, sizeof(*t));
	json_object *e =
		t ? tools_parse(s->m->cfg, req, t) : reply_error("internal", "out of memory");

	if (e) {
		tools_free(t);
		return e;
	}
	/* A second registration replaces the first; a call in flight keeps its own. */
	tools_free(s->tools);
	s->tools = t;
	return NULL;
}

/* What the store keeps of a registration: its fields, the URL canonical. */
static char *tools_record(const ToolSet *t)
{
	_cleanup_json_ json_object *o = json_object_new_object();
	const char *txt;

	json_set(o, "callback_url", json_object_new_string(t->callback_url));
	json_set(o, "token", json_object_new_string(t->token));
	json_set(o, "tools", json_object_get(t->stub));
	json_set(o, "timeout_seconds", json_object_new_int64((int64_t)(t->timeout_ms / 1000)));
	txt = json_incomplete(o) ? NULL : json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
	return txt ? strdup(txt) : NULL;
}

void tools_restore(Session *s, const char *record)
{
	_cleanup_json_ json_object *req = json_tokener_parse(record);
	json_object *e = req ? tools_set(s, req) : reply_error("invalid", "not JSON");

	/* The operator's allow-list may have changed since: it decides again. */
	if (e)
		log_warn("SESSION_ID=%s its programmatic tools are not kept: %s", s->id,
			 req_string(e, "detail"));
	json_object_put(e);
}

void op_tools_register(Manager *m, Conn *c, const Request *rq)
{
	json_object *e = tools_set(rq->s, rq->body), *o;
	_cleanup_free_ char *record = NULL;
	const ToolSet *t = rq->s->tools;

	if (e) {
		conn_reply(c, e, NULL, 0);
		return;
	}
	/* Kept for a restarted daemon, which re-adopts the session. */
	record = tools_record(t);
	if (!record || store_session_set_tools(m->store, rq->s->id, record) < 0)
		log_warn("SESSION_ID=%s programmatic tools not stored: a restarted daemon will "
			 "not know them",
			 rq->s->id);
	log_info("SESSION_ID=%s registered %zu programmatic tools calling %s", rq->s->id, t->n,
		 t->callback_url);
	o = reply_ok();
	json_set(o, "stub_path", json_object_new_string(TOOL_STUB_PATH));
	json_set(o, "tool_count", json_object_new_int64((int64_t)t->n));
	conn_reply(c, o, NULL, 0);
}

/* ---- calls ---- */

/*
 * The answer on ip's channel. The Python harnesses read a JSON line, {"tool_result":
 * {"is_error", "content" | "error"}}; the bash command a status and one JSON value,
 * "0 <content>" or "1 <message as a JSON string>".
 */
static void tool_answer(Interp *ip, bool is_error, json_object *content, const char *raw)
{
	/* A message may quote what the sandbox or the callback sent: valid UTF-8 only. */
	_cleanup_free_ char *message = raw ? utf8_sanitize(raw, strlen(raw), NULL) : NULL;
	json_object *o = NULL, *r;
	const char *txt;
	char *line = NULL;
	size_t len;
	int n;

	if (is_error && !message)
		return;

	if (ip->kind == INTERP_BASH) {
		r = is_error ? json_object_new_string(message) : json_object_get(content);
		txt = json_object_to_json_string_ext(r, JSON_C_TO_STRING_PLAIN);
		n = asprintf(&line, "%d %s\n", is_error ? 1 : 0, txt ? txt : "null");
		json_object_put(r);
	} else {
		o = json_object_new_object();
		r = json_object_new_object();
		json_set(o, "tool_result", r);
		json_set(r, "is_error", json_object_new_boolean(is_error));
		if (is_error)
			json_set(r, "error", json_object_new_string(message));
		else
			json_object_object_add(r, "content", json_object_get(content));
		txt = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN, &len);
		n = asprintf(&line, "%s\n",
			     txt ? txt :
				   "{\"tool_result\":{\"is_error\":true,"
				   "\"error\":\"out of memory\"}}");
		json_object_put(o);
	}
	if (n > 0)
		interp_send_line(ip, line, (size_t)n);
	free(line);
}

static void tool_refuse(Interp *ip, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tool_refuse(Interp *ip, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	ip->s->m->tool_calls++;
	ip->s->m->tool_call_errors++;
	tool_answer(ip, true, NULL, msg);
}

static void tool_log(const ToolCall *tc, const char *outcome)
{
	log_info("SESSION_ID=%s tool call %s %s: %s in %" PRIu64 " ms", tc->run->s->id, tc->call_id,
		 tc->name, outcome, now_ms() - tc->start_ms);
}

/* The callback's answer, {"content", "is_error"}: a ToolError's message, or the content. */
static void tool_answer_http(Interp *ip, ToolCall *tc, const HttpResult *r)
{
	struct json_tokener *tok;
	_cleanup_json_ json_object *body = NULL;
	json_object *content = NULL, *flag;
	char msg[4096];

	if (!r->ok) {
		/* Cut to the run's deadline, the callback's time and the run's end together:
		 * said as the deadline's interrupt says it, whichever timer the loop saw first. */
		if (r->timed_out && tc->to_deadline)
			snprintf(msg, sizeof(msg), "the call's time is up");
		else
			snprintf(msg, sizeof(msg), "the tool call failed: %s",
				 r->timed_out ? "the callback did not answer in time" : r->problem);
		goto error;
	}
	if (r->status < 200 || r->status > 299) {
		snprintf(msg, sizeof(msg), "the tool callback answered HTTP %ld", r->status);
		goto error;
	}
	if (!utf8_valid(r->body, r->len)) {
		snprintf(msg, sizeof(msg), "the tool callback's answer is not UTF-8");
		goto error;
	}
	tok = json_tokener_new_ex(TOOL_JSON_DEPTH);
	body = tok ? json_tokener_parse_ex(tok, r->body, (int)r->len) : NULL;
	json_tokener_free(tok);
	if (!json_object_is_type(body, json_type_object)) {
		snprintf(msg, sizeof(msg), "the tool callback's answer is not a JSON object");
		goto error;
	}
	json_object_object_get_ex(body, "content", &content);
	if (json_object_object_get_ex(body, "is_error", &flag) && json_object_get_boolean(flag)) {
		const char *txt =
			json_object_is_type(content, json_type_string) ?
				json_object_get_string(content) :
				json_object_to_json_string_ext(content, JSON_C_TO_STRING_PLAIN);

		txt = txt ? txt : "the tool reported an error";
		snprintf(msg, sizeof(msg), "%.*s", (int)utf8_prefix_len(txt, sizeof(msg) - 1), txt);
		goto error;
	}
	tool_log(tc, "ok");
	tool_answer(ip, false, content, NULL);
	return;
error:
	ip->s->m->tool_call_errors++;
	tool_log(tc, msg);
	tool_answer(ip, true, NULL, msg);
}

static void on_tool_done(void *data, const HttpResult *r)
{
	ToolCall *tc = data;
	Run *run = tc->run;

	run->tool_call = NULL;
	tool_answer_http(&run->s->interps[run->kind], tc, r);
	free(tc);
}

void tool_call_interrupt(Run *run)
{
	if (!run->tool_call)
		return;
	tool_answer(&run->s->interps[run->kind], true, NULL,
		    run->cancelled ? "the call was cancelled" : "the call's time is up");
	tool_call_drop(run);
}

void tool_call_drop(Run *run)
{
	ToolCall *tc = run->tool_call;

	if (!tc)
		return;
	run->tool_call = NULL;
	tool_log(tc, "dropped: the call it was made in ended");
	httpc_cancel(tc->http);
	free(tc);
}

/* {"call_id", "name", "input"}: what the callback is sent. */
static char *tool_request_body(const ToolCall *tc, json_object *input, size_t *len)
{
	JsonText t = { .buf = NULL };

	json_text_add_str(&t, "{\"call_id\":");
	json_text_add_quoted(&t, tc->call_id);
	json_text_add_key(&t, "name");
	json_text_add_quoted(&t, tc->name);
	json_text_add_key(&t, "input");
	/* The sandbox's input as it wrote it, but for a NaN or an infinity (null). */
	json_text_add_value(&t, input);
	json_text_add_str(&t, "}");
	if (t.failed) {
		json_text_clear(&t);
		return NULL;
	}
	*len = t.len;
	return t.buf;
}

static bool tool_known(const ToolSet *t, const char *name)
{
	for (size_t i = 0; t && i < t->n; i++)
		if (strcmp(t->names[i], name) == 0)
			return true;
	return false;
}

static void call_id_make(char *out)
{
	memcpy(out, "ptc_", 4);
	if (random_hex(out + 4, 16) < 0)
		snprintf(out + 4, 33, "%032d", 0);
}

/* Start the HTTP call of a checked call; false when it could not start. */
static bool tool_call_send(Run *run, ToolCall *tc, json_object *input, uint64_t timeout_ms)
{
	const PaddockConfig *cfg = run->s->m->cfg;
	size_t len = 0;
	_cleanup_free_ char *body = tool_request_body(tc, input, &len);
	HttpPost p = {
		.url = run->s->tools->callback_url,
		.bearer = run->s->tools->token,
		.body = body,
		.len = len,
		.timeout_ms = timeout_ms,
		.max_reply = (size_t)cfg->tool_reply_max_bytes,
	};

	if (!body)
		return false;
	tc->http = httpc_post_json(run->s->m->httpc, &p, on_tool_done, tc);
	return tc->http != NULL;
}

/* Why the call ev (NULL: not JSON) from ip cannot be made, into msg; NULL when it can. */
static const char *tool_call_problem(Interp *ip, json_object *ev, size_t line_len, char *msg,
				     size_t size)
{
	Session *s = ip->s;
	const PaddockConfig *cfg = s->m->cfg;
	const char *name = req_string(ev, "name");
	json_object *input = NULL;

	if (s->run->tool_call)
		snprintf(msg, size, "one tool call at a time: another is in flight");
	else if (line_len > (size_t)cfg->tool_call_max_bytes)
		snprintf(msg, size, "the tool call is larger than %lld bytes",
			 (long long)cfg->tool_call_max_bytes);
	else if (!name || !json_object_object_get_ex(ev, "input", &input) ||
		 !json_object_is_type(input, json_type_object))
		snprintf(msg, size, "a tool call names its tool and gives its input as an object");
	else if (!s->tools)
		snprintf(msg, size, "no tools are registered for this session");
	else if (!tool_known(s->tools, name))
		snprintf(msg, size, "no tool named %.64s is registered", name);
	else if (s->run->tool_calls >= (unsigned)cfg->tool_calls_per_run)
		snprintf(msg, size, "this call has made %u tool calls, the most one call may make",
			 s->run->tool_calls);
	else if (httpc_in_flight(s->m->httpc) >= (size_t)cfg->tool_calls_max_concurrent)
		snprintf(msg, size, "too many tool calls are in flight on this host; try again");
	else if (s->run->deadline_ms <= now_ms() + 1)
		snprintf(msg, size, "no time is left for a tool call");
	else
		return NULL;
	return msg;
}

void tool_call_start(Interp *ip, const char *line)
{
	Run *run = ip->s->run;
	size_t len = strlen(line);
	_cleanup_json_ json_object *ev = NULL;
	json_object *input = NULL;
	uint64_t now = now_ms(), timeout;
	char msg[256];
	ToolCall *tc;

	/* A call nobody waits for (between runs, or past the deadline) is not made, nor one
	 * while an answer is still unread: the harness waits for one at a time, and a flood
	 * of calls queues nothing. */
	if (!run || run->kind != ip->kind || run->phase != RUN_RUNNING || ip->wbuf)
		return;
	ev = len <= (size_t)ip->s->m->cfg->tool_call_max_bytes ?
		     json_in_parse_sandboxed(line, len, TOOL_JSON_DEPTH) :
		     NULL;
	if (tool_call_problem(ip, ev, len, msg, sizeof(msg))) {
		tool_refuse(ip, "%s", msg);
		return;
	}
	json_object_object_get_ex(ev, "input", &input);
	timeout = run->deadline_ms - now;
	if (timeout > ip->s->tools->timeout_ms)
		timeout = ip->s->tools->timeout_ms;
	tc = calloc(1, sizeof(*tc));
	if (!tc) {
		tool_refuse(ip, "out of memory");
		return;
	}
	tc->run = run;
	tc->start_ms = now;
	tc->to_deadline = timeout < ip->s->tools->timeout_ms;
	snprintf(tc->name, sizeof(tc->name), "%s", req_string(ev, "name"));
	call_id_make(tc->call_id);
	if (!tool_call_send(run, tc, input, timeout)) {
		free(tc);
		tool_refuse(ip, "the tool call could not be started");
		return;
	}
	ip->s->m->tool_calls++;
	run->tool_calls++;
	run->tool_call = tc;
}
