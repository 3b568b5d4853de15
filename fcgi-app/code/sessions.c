/* SPDX-License-Identifier: MIT */
/* Code-plane sessions: /v2/code/sessions and the 1.x /v1/jupyter/sessions routes. */
#include "code.h"
#include "sandbox_layout.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "cleanup.h"
#include "json.h"

/* A handle field as a double (the daemon's times are float seconds). */
static double handle_time(json_object *h, const char *key)
{
	json_object *v;

	if (json_object_object_get_ex(h, key, &v) &&
	    (json_object_is_type(v, json_type_double) || json_object_is_type(v, json_type_int)))
		return json_object_get_double(v);
	return 0;
}

static bool handle_kernel(json_object *h)
{
	json_object *v;

	return json_object_object_get_ex(h, "kernel", &v) && json_object_get_boolean(v);
}

static bool handle_endpoint(json_object *h)
{
	json_object *v;

	return json_object_object_get_ex(h, "endpoint", &v) && json_object_get_boolean(v);
}

/* The v2 view of a daemon session handle. */
static json_object *session_view(json_object *h)
{
	json_object *o = json_object_new_object();
	static const char *const copied[] = {
		"session_id",		"execution_count", "created_at", "last_activity_at",
		"idle_timeout_seconds", "running",	   "runtime"
	};

	if (!o)
		return NULL;
	for (size_t i = 0; i < ARRAY_SIZE(copied); i++)
		if (json_copy_field(o, h, copied[i]) < 0)
			goto oom;
	if (json_set(o, "backend",
		     json_object_new_string(handle_endpoint(h) ? "endpoint" :
					    handle_kernel(h)   ? "kernel" :
								 "native")) < 0)
		goto oom;
	return o;
oom:
	json_object_put(o);
	return NULL;
}

/* Call sessiond; on failure answer in the envelope and return -1. */
static int call(ReqCtx *rq, json_object *req, enum sessiond_retry retry, SessiondReply *rep)
{
	int r;

	if (!req) {
		code_fail(rq, 500, "out of memory");
		return -1;
	}
	r = sessiond_call(&rq->w->sd, req, retry, rep);
	if (r < 0 || !rep->ok) {
		code_sd_fail(rq, r, r < 0 ? NULL : rep);
		sessiond_reply_clear(rep);
		return -1;
	}
	return 0;
}

/* The body of a session create: session_id, cwd, user, language; -1 after answering. */
struct create_req {
	const char *session_id; /* NULL: generated */
	const char *cwd;	/* NULL: the workspace */
	const char *image;	/* the runtime profile asked for; NULL: the default */
	bool kernel;		/* Python on the kernel tier */
};

static int parse_create(ReqCtx *rq, json_object *body, bool jupyter, struct create_req *c)
{
	const CodeRuntimes *rt = code_runtimes(rq->app->cfg);
	const char *user = NULL, *lang = NULL;

	*c = (struct create_req){ 0 };
	if (body && (code_take_session_id(rq, body, &c->session_id) < 0 ||
		     code_take_image(rq, body, &c->image) < 0))
		return -1;
	if (body && (json_in_string(body, "cwd", &c->cwd, NULL) < 0 ||
		     json_in_string(body, "user", &user, NULL) < 0 ||
		     json_in_string(body, "language", &lang, NULL) < 0)) {
		code_invalid(rq, NULL, "string_type",
			     "cwd, user and language must be strings or null");
		return -1;
	}
	if (user && *user && strcmp(user, SANDBOX_USER) != 0) {
		code_fail(rq, 400,
			  "cannot create a session as user '%.*s': every session runs as "
			  "its own unprivileged '%s' account",
			  (int)utf8_prefix_len(user, 64), user, SANDBOX_USER);
		return -1;
	}
	if (jupyter && !rt->kernel_ok && !rt->endpoint_ok) {
		code_fail(rq, 501, "No Jupyter kernel is available here: %s", rt->kernel_missing);
		return -1;
	}
	c->kernel = jupyter || (rt->tier == CODE_TIER_KERNEL && rt->python_serves &&
				(!lang || strncasecmp(lang, "python", 6) == 0));
	return 0;
}

/* Create the session; *handle gets the daemon's handle (owned). -1 after answering. */
static int create(ReqCtx *rq, const struct create_req *c, json_object **handle)
{
	_cleanup_json_ json_object *req = code_sd_request(rq, "create", c->session_id);
	SessiondReply rep;

	if (req &&
	    (json_set(req, "plane", json_object_new_string("code")) < 0 ||
	     json_set(req, "kernel", json_object_new_boolean(c->kernel)) < 0 ||
	     code_request_image(req, c->image) < 0 ||
	     json_set(req, "endpoint",
		      json_object_new_boolean(code_runtimes(rq->app->cfg)->endpoint_ok)) < 0))
		json_putp(&req);
	if (call(rq, req, SESSIOND_RETRY_ON_SEND, &rep) < 0)
		return -1;
	*handle = json_object_get(rep.obj);
	sessiond_reply_clear(&rep);
	return 0;
}

static void destroy_quietly(ReqCtx *rq, const char *id)
{
	_cleanup_json_ json_object *req = code_sd_request(rq, "destroy", id);
	SessiondReply rep;

	if (req && sessiond_call(&rq->w->sd, req, SESSIOND_RETRY_ANY, &rep) == 0)
		sessiond_reply_clear(&rep);
}

/* Create, then check cwd against the new workspace (a bad one undoes the create). */
static int create_checked(ReqCtx *rq, const struct create_req *c, json_object **handle)
{
	const char *id;

	if (create(rq, c, handle) < 0)
		return -1;
	if (c->cwd && json_in_string(*handle, "session_id", &id, NULL) > 0 &&
	    code_check_cwd(rq, id, c->cwd) < 0) {
		destroy_quietly(rq, id);
		json_putp(handle);
		return -1;
	}
	return 0;
}

void code_session_create(ReqCtx *rq)
{
	_cleanup_json_ json_object *body = NULL, *handle = NULL;
	struct create_req c;

	if (code_read_body(rq, true, &body) < 0 || parse_create(rq, body, false, &c) < 0 ||
	    create_checked(rq, &c, &handle) < 0)
		return;
	code_reply(rq, 200, true, "Session created", session_view(handle));
}

/* The code plane's sessions (handles, owned by rep). -1 after answering. */
static int list_sessions(ReqCtx *rq, SessiondReply *rep, json_object **list)
{
	_cleanup_json_ json_object *req = code_sd_request(rq, "sessions", NULL);

	if (req && json_set(req, "plane", json_object_new_string("code")) < 0)
		json_putp(&req);
	if (call(rq, req, SESSIOND_RETRY_ANY, rep) < 0)
		return -1;
	if (!json_object_object_get_ex(rep->obj, "sessions", list) ||
	    !json_object_is_type(*list, json_type_array)) {
		sessiond_reply_clear(rep);
		code_fail(rq, 500, "the session daemon sent no session list");
		return -1;
	}
	return 0;
}

void code_session_list(ReqCtx *rq)
{
	json_object *list, *data = json_object_new_object(), *arr = json_object_new_array();
	SessiondReply rep;

	if (!data || !arr || json_set(data, "sessions", arr) < 0) {
		json_object_put(data);
		code_fail(rq, 500, "out of memory");
		return;
	}
	if (list_sessions(rq, &rep, &list) < 0) {
		json_object_put(data);
		return;
	}
	for (size_t i = 0; i < json_object_array_length(list); i++) {
		json_object *v = session_view(json_object_array_get_idx(list, i));

		if (!v || json_object_array_add(arr, v) < 0) {
			json_object_put(v);
			json_object_put(data);
			sessiond_reply_clear(&rep);
			code_fail(rq, 500, "out of memory");
			return;
		}
	}
	sessiond_reply_clear(&rep);
	if (json_set(data, "count", json_object_new_int64((int64_t)json_object_array_length(arr))) <
	    0) {
		json_object_put(data);
		code_fail(rq, 500, "out of memory");
		return;
	}
	code_reply(rq, 200, true, "Sessions listed", data);
}

void code_session_get(ReqCtx *rq)
{
	_cleanup_json_ json_object *req = code_sd_request(rq, "session_info", rq->match.id);
	SessiondReply rep;

	if (call(rq, req, SESSIOND_RETRY_ANY, &rep) < 0)
		return;
	code_reply(rq, 200, true, "Session found", session_view(rep.obj));
	sessiond_reply_clear(&rep);
}

/* destroy; *existed says whether there was a session. -1 after answering. */
static int destroy(ReqCtx *rq, const char *id, bool *existed)
{
	_cleanup_json_ json_object *req = code_sd_request(rq, "destroy", id);
	json_object *v;
	SessiondReply rep;

	if (call(rq, req, SESSIOND_RETRY_ANY, &rep) < 0)
		return -1;
	*existed = json_object_object_get_ex(rep.obj, "existed", &v) && json_object_get_boolean(v);
	sessiond_reply_clear(&rep);
	return 0;
}

static void answer_deleted(ReqCtx *rq, bool existed)
{
	json_object *d = json_object_new_object();

	if (!d || json_set(d, "deleted", json_object_new_boolean(existed)) < 0) {
		json_object_put(d);
		code_fail(rq, 500, "out of memory");
		return;
	}
	code_reply(rq, 200, true, existed ? "Session deleted" : "No such session", d);
}

void code_session_delete(ReqCtx *rq)
{
	bool existed;

	if (destroy(rq, rq->match.id, &existed) == 0)
		answer_deleted(rq, existed);
}

void jupyter_session_delete(ReqCtx *rq)
{
	code_session_delete(rq);
}

/* The 1.x SessionInfo of a handle: kernel_name, last_used, age_seconds. */
static json_object *jupyter_info(json_object *h)
{
	json_object *o = json_object_new_object();
	double now = (double)time(NULL), age = now - handle_time(h, "created_at");

	if (!o || json_set(o, "kernel_name", json_object_new_string("python3")) < 0 ||
	    json_set(o, "last_used", json_object_new_double(handle_time(h, "last_activity_at"))) <
		    0 ||
	    json_set(o, "age_seconds", json_object_new_int64(age > 0 ? (int64_t)age : 0)) < 0) {
		json_object_put(o);
		return NULL;
	}
	return o;
}

void jupyter_session_list(ReqCtx *rq)
{
	json_object *list, *data = json_object_new_object(), *map = json_object_new_object();
	SessiondReply rep;

	if (!data || !map || json_set(data, "sessions", map) < 0) {
		json_object_put(data);
		code_fail(rq, 500, "out of memory");
		return;
	}
	if (list_sessions(rq, &rep, &list) < 0) {
		json_object_put(data);
		return;
	}
	for (size_t i = 0; i < json_object_array_length(list); i++) {
		json_object *h = json_object_array_get_idx(list, i);
		const char *id;

		/* Jupyter sessions are the kernel-tier ones. */
		if (!handle_kernel(h) || json_in_string(h, "session_id", &id, NULL) <= 0)
			continue;
		if (json_set(map, id, jupyter_info(h)) < 0) {
			json_object_put(data);
			sessiond_reply_clear(&rep);
			code_fail(rq, 500, "out of memory");
			return;
		}
	}
	sessiond_reply_clear(&rep);
	code_reply(rq, 200, true, "Sessions listed", data);
}

void jupyter_session_delete_all(ReqCtx *rq)
{
	json_object *list, *d;
	SessiondReply rep;
	int64_t n = 0;
	char msg[64];

	if (list_sessions(rq, &rep, &list) < 0)
		return;
	for (size_t i = 0; i < json_object_array_length(list); i++) {
		json_object *h = json_object_array_get_idx(list, i);
		const char *id;
		bool existed = false;

		if (!handle_kernel(h) || json_in_string(h, "session_id", &id, NULL) <= 0)
			continue;
		if (destroy(rq, id, &existed) < 0) {
			sessiond_reply_clear(&rep);
			return;
		}
		n += existed;
	}
	sessiond_reply_clear(&rep);
	d = json_object_new_object();
	if (!d || json_set(d, "deleted", json_object_new_int64(n)) < 0) {
		json_object_put(d);
		code_fail(rq, 500, "out of memory");
		return;
	}
	snprintf(msg, sizeof(msg), "Deleted %lld sessions", (long long)n);
	code_reply(rq, 200, true, msg, d);
}

void jupyter_session_create(ReqCtx *rq)
{
	_cleanup_json_ json_object *body = NULL, *handle = NULL;
	const char *kernel_name = NULL, *id;
	json_object *d;
	struct create_req c;

	if (code_read_body(rq, true, &body) < 0 || parse_create(rq, body, true, &c) < 0)
		return;
	if (body && json_in_string(body, "kernel_name", &kernel_name, NULL) < 0) {
		code_invalid(rq, "kernel_name", "string_type",
			     "kernel_name must be a string or null");
		return;
	}
	if (create_checked(rq, &c, &handle) < 0)
		return;
	d = json_object_new_object();
	if (!d || json_in_string(handle, "session_id", &id, NULL) <= 0 ||
	    json_set(d, "session_id", json_object_new_string(id)) < 0 ||
	    json_set(d, "kernel_name", json_object_new_string(kernel_name ?: "python3")) < 0 ||
	    json_set(d, "message", json_object_new_string("Session created")) < 0) {
		json_object_put(d);
		code_fail(rq, 500, "out of memory");
		return;
	}
	code_reply(rq, 200, true, "Session created", d);
}
