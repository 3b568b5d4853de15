/* SPDX-License-Identifier: MIT */
/* Execute on the v1, v2, nodejs and jupyter routes: the request, its session, the run, the reply. */
#include "code.h"
#include "sandbox_layout.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "cleanup.h"
#include "json.h"

/* Which request and reply shapes a route speaks. */
enum surface {
	SURF_V2,      /* /v2/code/execute */
	SURF_V1,      /* /v1/code/execute: empty streams null, empty code runs */
	SURF_NODE,    /* /v1/nodejs/execute: always JavaScript */
	SURF_JUPYTER, /* /v1/jupyter/execute: Python on the kernel tier, nine keys per output */
};

enum lang { LANG_PYTHON, LANG_JAVASCRIPT };

/* ---- the request ---- */

/* One execute request, validated. Strings are borrowed from the body. */
struct exec_req {
	enum surface surf;
	enum lang lang;
	const char *code;	 /* the cell */
	size_t code_len;	 /* its bytes */
	int64_t timeout;	 /* seconds */
	const char *session_id;	 /* NULL: none given */
	bool stateful;		 /* a new session with a generated id when none is given */
	const char *cwd;	 /* NULL: the workspace */
	const char *user;	 /* NULL: the session's own account */
	const char *kernel_name; /* jupyter: the kernel asked for, NULL: the default */
	const char *image;	 /* a new session's runtime profile; NULL: the default */
};

static const struct {
	const char *name; /* what the request may say */
	enum lang lang;	  /* what it means */
} languages[] = {
	{ "python", LANG_PYTHON },	   { "python3", LANG_PYTHON },
	{ "javascript", LANG_JAVASCRIPT }, { "node", LANG_JAVASCRIPT },
	{ "nodejs", LANG_JAVASCRIPT },	   { "js", LANG_JAVASCRIPT },
};

/* Each language: its resolved name and the exec tool sessiond runs it with. */
static const struct {
	const char *name; /* what data.language says */
	const char *tool; /* sessiond's exec "tool" */
} lang_info[] = {
	[LANG_PYTHON] = { "python", "python" },
	[LANG_JAVASCRIPT] = { "javascript", "node" },
};

static const char *lang_name(enum lang l)
{
	return lang_info[l].name;
}

static int take_language(ReqCtx *rq, json_object *body, enum lang *ret)
{
	json_object *v;
	const char *s;

	if (!json_object_object_get_ex(body, "language", &v) || !v) {
		code_invalid(rq, "language", "missing",
			     "language is required: python or javascript");
		return -1;
	}
	s = json_object_is_type(v, json_type_string) ? json_object_get_string(v) :
						       json_object_to_json_string(v);
	if (json_object_is_type(v, json_type_string))
		for (size_t i = 0; i < ARRAY_SIZE(languages); i++)
			if (strcasecmp(languages[i].name, s) == 0) {
				*ret = languages[i].lang;
				return 0;
			}
	code_invalid(rq, "language", "enum",
		     "Unsupported language '%.*s'. Supported: python, "
		     "javascript",
		     (int)utf8_prefix_len(s, 64), s);
	return -1;
}

static int take_code(ReqCtx *rq, json_object *body, struct exec_req *x)
{
	const PaddockConfig *cfg = rq->app->cfg;
	int r = json_in_string(body, "code", &x->code, &x->code_len);

	if (r == 0) {
		code_invalid(rq, "code", "missing", "code is required");
		return -1;
	}
	if (r < 0) {
		code_invalid(rq, "code", "string_type", "code must be a string");
		return -1;
	}
	/* v2 refuses an empty cell; the 1.x routes run it and answer with no outputs. */
	if (x->code_len == 0 && x->surf == SURF_V2) {
		code_invalid(rq, "code", "string_too_short", "code must not be empty");
		return -1;
	}
	if (x->code_len > (size_t)cfg->code_max_bytes) {
		code_invalid(rq, "code", "string_too_long",
			     "code is longer than the %" PRId64 "-byte limit", cfg->code_max_bytes);
		return -1;
	}
	/* No interpreter takes a NUL in source, and a C string would silently end there. */
	if (memchr(x->code, '\0', x->code_len)) {
		code_invalid(rq, "code", "value_error", "code must not contain NUL characters");
		return -1;
	}
	return 0;
}

static int take_timeout(ReqCtx *rq, json_object *body, int64_t *ret)
{
	const PaddockConfig *cfg = rq->app->cfg;
	int r = json_in_int(body, "timeout", ret);

	if (r == 0) {
		*ret = cfg->exec_timeout_default;
		return 0;
	}
	if (r < 0) {
		code_invalid(rq, "timeout", "int_type",
			     "timeout must be an integer number of seconds");
		return -1;
	}
	if (*ret < 1) {
		code_invalid(rq, "timeout", "greater_than_equal",
			     "timeout must be at least 1 second");
		return -1;
	}
	if (*ret > cfg->exec_timeout_max) {
		code_invalid(rq, "timeout", "less_than_equal",
			     "timeout must be at most %" PRId64 " seconds", cfg->exec_timeout_max);
		return -1;
	}
	return 0;
}

/* An optional string field; 422 for another type. */
static int take_opt_string(ReqCtx *rq, json_object *body, const char *key, const char **ret)
{
	int r = json_in_string(body, key, ret, NULL);

	if (r < 0) {
		code_invalid(rq, key, "string_type", "%s must be a string or null", key);
		return -1;
	}
	if (r == 0)
		*ret = NULL;
	return 0;
}

static int take_stateful(ReqCtx *rq, json_object *body, bool *ret)
{
	json_object *v;

	*ret = false;
	if (!json_object_object_get_ex(body, "stateful", &v) || !v)
		return 0;
	if (!json_object_is_type(v, json_type_boolean)) {
		code_invalid(rq, "stateful", "bool_type", "stateful must be true or false");
		return -1;
	}
	*ret = json_object_get_boolean(v);
	return 0;
}

static int parse_exec(ReqCtx *rq, json_object *body, struct exec_req *x)
{
	if (x->surf == SURF_V1 || x->surf == SURF_V2) {
		if (take_language(rq, body, &x->lang) < 0)
			return -1;
	} else {
		x->lang = x->surf == SURF_NODE ? LANG_JAVASCRIPT : LANG_PYTHON;
	}
	if (take_code(rq, body, x) < 0 || take_timeout(rq, body, &x->timeout) < 0 ||
	    code_take_session_id(rq, body, &x->session_id) < 0 ||
	    take_stateful(rq, body, &x->stateful) < 0 ||
	    take_opt_string(rq, body, "cwd", &x->cwd) < 0 ||
	    take_opt_string(rq, body, "user", &x->user) < 0 ||
	    take_opt_string(rq, body, "kernel_name", &x->kernel_name) < 0 ||
	    code_take_image(rq, body, &x->image) < 0)
		return -1;
	if (x->cwd && (!*x->cwd || strlen(x->cwd) > 4000)) {
		code_invalid(rq, "cwd", "value_error",
			     "cwd must name a directory under " SANDBOX_WORKSPACE);
		return -1;
	}
	if (x->user && !*x->user)
		x->user = NULL;
	return 0;
}

/* ---- runtimes ---- */

/* Is the runtime the request needs there? Answers 503 or 501 and returns -1 when not. */
static int need_runtime(ReqCtx *rq, const struct exec_req *x, bool *kernel)
{
	const CodeRuntimes *rt = code_runtimes(rq->app->cfg);

	*kernel = false;
	if (x->surf == SURF_JUPYTER) {
		/* The endpoint's kernels are Jupyter kernels too: the route runs there. */
		if (!rt->kernel_ok && !rt->endpoint_ok) {
			code_fail(rq, 501, "No Jupyter kernel is available here: %s",
				  rt->kernel_missing);
			return -1;
		}
		*kernel = true;
		return 0;
	}
	if (x->lang == LANG_JAVASCRIPT) {
		if (!rt->node_ok) {
			code_fail(rq, 503, "JavaScript is not available: %s", rt->node_missing);
			return -1;
		}
		return 0;
	}
	if (!rt->python_serves) {
		code_fail(rq, 503, "Python is not available: %s", rt->python_missing);
		return -1;
	}
	*kernel = rt->tier == CODE_TIER_KERNEL;
	return 0;
}

/* kernel_name: null, "python3", or "python3.<minor>" of the Python that is there. */
static int check_kernel_name(ReqCtx *rq, const char *name)
{
	const CodeRuntimes *rt = code_runtimes(rq->app->cfg);
	char versioned[48];
	const char *dot;

	if (!name || strcmp(name, "python3") == 0)
		return 0;
	/* "3.11.2" -> "python3.11" */
	dot = strchr(rt->python_version, '.');
	dot = dot ? strchr(dot + 1, '.') : NULL;
	snprintf(versioned, sizeof(versioned), "python%.*s",
		 dot ? (int)(dot - rt->python_version) : (int)strlen(rt->python_version),
		 rt->python_version);
	if (strcmp(name, versioned) == 0)
		return 0;
	code_invalid(rq, "kernel_name", "enum", "Unknown kernel '%.*s'. Available: python3, %s",
		     (int)utf8_prefix_len(name, 64), name, versioned);
	return -1;
}

/* ---- the session ---- */

/* Where the cell runs. */
struct target {
	char id[ROUTE_ID_MAX + 1]; /* the session */
	bool created;		   /* made by this request */
	bool one_off;		   /* destroyed after the run */
};

/* create; *sid gets the new id. The daemon's errors are answered here. */
static int create_session(ReqCtx *rq, const char *want, bool kernel, const char *image,
			  struct target *t)
{
	_cleanup_json_ json_object *req = code_sd_request(rq, "create", want);
	const CodeRuntimes *rt = code_runtimes(rq->app->cfg);
	SessiondReply rep;
	const char *id;
	int r;

	/* endpoint: the session's Python goes to the Jupyter Server (its JavaScript does not). */
	if (!req || json_set(req, "plane", json_object_new_string("code")) < 0 ||
	    json_set(req, "kernel", json_object_new_boolean(kernel)) < 0 ||
	    code_request_image(req, image) < 0 ||
	    json_set(req, "endpoint", json_object_new_boolean(rt->endpoint_ok)) < 0) {
		code_fail(rq, 500, "out of memory");
		return -1;
	}
	r = sessiond_call(&rq->w->sd, req, SESSIOND_RETRY_ON_SEND, &rep);
	if (r == 0 && !rep.ok && want && rep.kind && strcmp(rep.kind, "exists") == 0) {
		/* Another request made it first: it is there, which is what we wanted. */
		snprintf(t->id, sizeof(t->id), "%s", want);
		sessiond_reply_clear(&rep);
		return 0;
	}
	if (r < 0 || !rep.ok) {
		code_sd_fail(rq, r, r < 0 ? NULL : &rep);
		sessiond_reply_clear(&rep);
		return -1;
	}
	if (json_in_string(rep.obj, "session_id", &id, NULL) <= 0) {
		sessiond_reply_clear(&rep);
		code_fail(rq, 500, "the session daemon gave no session id");
		return -1;
	}
	snprintf(t->id, sizeof(t->id), "%s", id);
	t->created = true;
	sessiond_reply_clear(&rep);
	return 0;
}

/* Does the session exist? 1 yes, 0 no, -1 after answering a failure. */
static int session_exists(ReqCtx *rq, const char *id)
{
	_cleanup_json_ json_object *req = code_sd_request(rq, "session_info", id);
	SessiondReply rep;
	int r;

	if (!req) {
		code_fail(rq, 500, "out of memory");
		return -1;
	}
	r = sessiond_call(&rq->w->sd, req, SESSIOND_RETRY_ANY, &rep);
	if (r == 0 && (rep.ok || (rep.kind && strcmp(rep.kind, "not_found") == 0))) {
		bool ok = rep.ok;

		sessiond_reply_clear(&rep);
		return ok;
	}
	code_sd_fail(rq, r, r < 0 ? NULL : &rep);
	sessiond_reply_clear(&rep);
	return -1;
}

static void destroy_session(ReqCtx *rq, const char *id)
{
	_cleanup_json_ json_object *req = code_sd_request(rq, "destroy", id);
	SessiondReply rep;

	if (req && sessiond_call(&rq->w->sd, req, SESSIOND_RETRY_ANY, &rep) == 0)
		sessiond_reply_clear(&rep);
}

/*
 * Find or make the session of x. A user other than the sandbox account is refused: a 400
 * on a session that exists (its user cannot change), else *refuse is set and no session is
 * made (the caller answers 200 with a ProcessError).
 */
static int acquire_session(ReqCtx *rq, const struct exec_req *x, bool kernel, struct target *t,
			   bool *refuse)
{
	bool foreign_user = x->user && strcmp(x->user, SANDBOX_USER) != 0;
	int r;

	*t = (struct target){ 0 };
	*refuse = false;
	if (x->session_id) {
		r = session_exists(rq, x->session_id);
		if (r < 0)
			return -1;
		if (r > 0 && foreign_user) {
			code_fail(rq, 400,
				  "The user of session '%s' cannot change: it runs as '%s'",
				  x->session_id, SANDBOX_USER);
			return -1;
		}
		if (foreign_user) {
			*refuse = true;
			return 0;
		}
		if (r > 0) {
			snprintf(t->id, sizeof(t->id), "%s", x->session_id);
			return 0;
		}
		return create_session(rq, x->session_id, kernel, x->image, t);
	}
	if (foreign_user) {
		*refuse = true;
		return 0;
	}
	t->one_off = !x->stateful;
	return create_session(rq, NULL, kernel, x->image, t);
}

/* ---- the reply ---- */

static json_object *stream_value(const char *s, size_t len, bool null_when_empty)
{
	if (len == 0 && null_when_empty)
		return NULL;
	return json_object_new_string_len(s ? s : "", (int)len);
}

/* json_object_object_add for values that may be null on purpose. */
static int put(json_object *o, const char *key, json_object *v, bool null_ok)
{
	if (!v && !null_ok)
		return -ENOMEM;
	if (json_object_object_add(o, key, v) < 0) {
		json_object_put(v);
		return -ENOMEM;
	}
	return 0;
}

static json_object *count_value(int64_t n)
{
	return n >= 0 ? json_object_new_int64(n) : NULL;
}

/* data for the code and nodejs routes. */
static json_object *render_code_data(const struct exec_req *x, const CellOutcome *o,
				     const char *sid)
{
	bool v1 = x->surf == SURF_V1;
	json_object *d = json_object_new_object();

	if (!d)
		return NULL;
	if (put(d, "language", json_object_new_string(lang_name(x->lang)), false) < 0 ||
	    put(d, "code", json_object_new_string_len(x->code, (int)x->code_len), false) < 0 ||
	    put(d, "status", json_object_new_string(o->status), false) < 0 ||
	    put(d, "outputs", cell_outputs_render(o, false), false) < 0 ||
	    put(d, "stdout", stream_value(o->stdout_text, o->stdout_len, v1), v1) < 0 ||
	    put(d, "stderr", stream_value(o->stderr_text, o->stderr_len, v1), v1) < 0 ||
	    put(d, "exit_code", json_object_new_int(o->exit_code), false) < 0 ||
	    put(d, "execution_count", count_value(o->execution_count), true) < 0 ||
	    put(d, "session_id", sid ? json_object_new_string(sid) : NULL, true) < 0 ||
	    (v1 && put(d, "traceback", json_object_get(o->traceback), true) < 0)) {
		json_object_put(d);
		return NULL;
	}
	return d;
}

static json_object *render_jupyter_data(const struct exec_req *x, const CellOutcome *o,
					const char *sid)
{
	json_object *d = json_object_new_object();

	if (!d)
		return NULL;
	if (put(d, "kernel_name", json_object_new_string(x->kernel_name ?: "python3"), false) < 0 ||
	    put(d, "session_id", sid ? json_object_new_string(sid) : NULL, true) < 0 ||
	    put(d, "status", json_object_new_string(o->status), false) < 0 ||
	    put(d, "execution_count", count_value(o->execution_count), true) < 0 ||
	    put(d, "outputs", cell_outputs_render(o, true), false) < 0 ||
	    put(d, "code", json_object_new_string_len(x->code, (int)x->code_len), false) < 0 ||
	    put(d, "msg_id", NULL, true) < 0) {
		json_object_put(d);
		return NULL;
	}
	return d;
}

static void answer_outcome(ReqCtx *rq, const struct exec_req *x, const CellOutcome *o,
			   const char *sid)
{
	json_object *data = x->surf == SURF_JUPYTER ? render_jupyter_data(x, o, sid) :
						      render_code_data(x, o, sid);
	const char *msg = !strcmp(o->status, "ok")	? "Code executed successfully" :
			  !strcmp(o->status, "timeout") ? "Code execution timed out" :
							  "Code execution failed";

	if (!data) {
		code_fail(rq, 500, "out of memory");
		return;
	}
	code_reply(rq, 200, strcmp(o->status, "ok") == 0, msg, data);
}

/* ---- the flow ---- */

static int run_cell(ReqCtx *rq, const struct exec_req *x, const char *sid, SessiondReply *rep)
{
	_cleanup_json_ json_object *req = code_sd_request(rq, "exec", sid);
	int r;

	if (!req || json_set(req, "tool", json_object_new_string(lang_info[x->lang].tool)) < 0 ||
	    json_set(req, "code", json_object_new_string_len(x->code, (int)x->code_len)) < 0 ||
	    json_set(req, "timeout_ms", json_object_new_int64(x->timeout * 1000)) < 0 ||
	    json_set(req, "mode", json_object_new_string("cell")) < 0 ||
	    (x->cwd && json_set(req, "cwd", json_object_new_string(x->cwd)) < 0)) {
		code_fail(rq, 500, "out of memory");
		return -1;
	}
	if (http_wants_sse(&rq->http))
		return code_run_streamed(rq, req, x->surf == SURF_JUPYTER, rep);
	/* Running code twice is worse than failing once: no retry after sessiond saw it. */
	r = sessiond_call(&rq->w->sd, req, SESSIOND_RETRY_ON_SEND, rep);
	if (r < 0 || !rep->ok) {
		code_sd_fail(rq, r, r < 0 ? NULL : rep);
		sessiond_reply_clear(rep);
		return -1;
	}
	return 0;
}

static void refuse_user(ReqCtx *rq, const struct exec_req *x)
{
	_cleanup_(cell_outcome_clear) CellOutcome o = { 0 };
	char why[256];

	snprintf(why, sizeof(why),
		 "cannot run as user '%.*s': every session runs as its own unprivileged '%s' "
		 "account, and no other",
		 (int)utf8_prefix_len(x->user, 64), x->user, SANDBOX_USER);
	if (cell_outcome_process_error(why, &o) < 0) {
		code_fail(rq, 500, "out of memory");
		return;
	}
	/* Nothing ran, but the answer is a cell's: a client that asked for events gets them. */
	if (http_wants_sse(&rq->http) &&
	    (sse_begin(&rq->http) < 0 || code_stream_final(rq, &o, x->surf == SURF_JUPYTER) < 0))
		return;
	answer_outcome(rq, x, &o, NULL);
}

static void execute(ReqCtx *rq, enum surface surf)
{
	_cleanup_json_ json_object *body = NULL;
	_cleanup_(cell_outcome_clear) CellOutcome o = { 0 };
	struct exec_req x = { .surf = surf };
	struct target t;
	bool kernel, refuse;
	SessiondReply rep;
	int r;

	if (code_read_body(rq, false, &body) < 0 || parse_exec(rq, body, &x) < 0)
		return;
	if (surf == SURF_JUPYTER && check_kernel_name(rq, x.kernel_name) < 0)
		return;
	if (need_runtime(rq, &x, &kernel) < 0)
		return;
	if (acquire_session(rq, &x, kernel, &t, &refuse) < 0)
		return;
	if (refuse) {
		refuse_user(rq, &x);
		return;
	}
	/* A bad cwd changes nothing: a session made for this request goes again. */
	if (x.cwd && code_check_cwd(rq, t.id, x.cwd) < 0) {
		if (t.created)
			destroy_session(rq, t.id);
		return;
	}
	r = run_cell(rq, &x, t.id, &rep);
	if (t.one_off)
		destroy_session(rq, t.id);
	if (r < 0)
		return;
	r = cell_outcome_build(rq->app->cfg, rep.obj, x.timeout, &o);
	sessiond_reply_clear(&rep);
	if (r < 0) {
		code_fail(rq, 500, "out of memory");
		return;
	}
	if (rq->http.sse && code_stream_final(rq, &o, surf == SURF_JUPYTER) < 0)
		return;
	answer_outcome(rq, &x, &o, t.one_off ? NULL : t.id);
}

void code_execute_v2(ReqCtx *rq)
{
	execute(rq, SURF_V2);
}

void code_execute_v1(ReqCtx *rq)
{
	execute(rq, SURF_V1);
}

void nodejs_execute(ReqCtx *rq)
{
	execute(rq, SURF_NODE);
}

void jupyter_execute(ReqCtx *rq)
{
	execute(rq, SURF_JUPYTER);
}
