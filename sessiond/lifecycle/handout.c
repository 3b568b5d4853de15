/* SPDX-License-Identifier: MIT */
/* A warm sandbox, just taken from its pool, becomes the session a create asked for. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "lifecycle.h"
#include "log.h"
#include "runtimes.h"
#include "session/tenant.h"
#include "random.h"

/* Whether a create is the code plane's. */
bool req_is_code(json_object *req)
{
	const char *plane = req_string(req, "plane");

	return plane && strcmp(plane, "code") == 0;
}

/* <node>-<22 chars of base64url>: 128 random bits, URL-safe, routable by prefix. */
static int session_id_new(const char *node, char *out, size_t outlen)
{
	static const char abc[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	uint8_t rnd[22];
	size_t n;

	if (random_bytes(rnd, sizeof(rnd)) < 0)
		return -EIO;
	n = (size_t)snprintf(out, outlen, "%s-", node);
	if (n + sizeof(rnd) + 1 > outlen)
		return -ENAMETOOLONG;
	for (size_t i = 0; i < sizeof(rnd); i++)
		out[n + i] = abc[rnd[i] & 63];
	out[n + sizeof(rnd)] = '\0';
	return 0;
}

static int64_t clamp_hint(json_object *req, const char *key, int64_t def, int64_t max)
{
	int64_t v;

	if (!req_int(req, key, &v) || v < 1)
		return def;
	return v < max ? v : max;
}

/* The answer to a create whose sandbox could not be had: r as from a build, -ETIMEDOUT
 * when none was ready by its deadline. */
json_object *create_error(const Manager *m, json_object *req, int r)
{
	json_object *e;

	log_err("REQUEST_ID=%s cannot create a session: %s (last build: %s)",
		req_string(req, "request_id") ?: "-", strerror(-r),
		m->build_error[0] ? m->build_error : "-");
	if (r == -EUSERS)
		e = reply_error("capacity", "no free sandbox user id");
	else if (r == -ETIMEDOUT)
		e = reply_error("unavailable", "no sandbox was ready within %lld s",
				(long long)m->cfg->create_wait_seconds);
	else
		e = reply_error("unavailable", "the sandbox could not be created");
	reply_retry_after(e, m->cfg->retry_after_seconds);
	return e;
}

const char *runtime_problem(const Manager *m, size_t runtime)
{
	const char *why = sandbox_env_runtime_problem(m->env, runtime);

	if (!why && runtime && runtime != RUNTIME_RETIRED && m->runtime_broken[runtime])
		why = "its builds keep failing";
	return why;
}

size_t create_runtime(const Manager *m, json_object *req)
{
	const char *image = req_string(req, "image");
	size_t i = runtime_find(m->cfg, image);
	const char *problem = i ? runtime_problem(m, i) : NULL;

	/* The protocol's rule: an image is a hint, never a reason to fail. */
	if (image && !i && strcmp(image, RUNTIME_DEFAULT) != 0)
		log_info("REQUEST_ID=%s image '%.64s' names no runtime profile: the default runs",
			 req_string(req, "request_id") ?: "-", image);
	if (problem)
		log_warn("REQUEST_ID=%s runtime profile '%s' cannot serve (%s): the default runs",
			 req_string(req, "request_id") ?: "-", image, problem);
	return problem ? 0 : i;
}

/* s, just taken from the pool, becomes the session req asked for; c gets the answer.
 * 0 when the session is there, else the error c got. */
int create_finish(Manager *m, Conn *c, json_object *req, Session *s)
{
	const PaddockConfig *cfg = m->cfg;
	const char *want_id = req_string(req, "session_id");
	const char *tenant = req_string(req, "tenant");
	const char *image = req_string(req, "image");
	bool code = req_is_code(req), kernel = req_bool(req, "kernel");
	int64_t idle_default = cfg->idle_timeout_default;
	SessionRow row;
	int r = 0;

	/* A ready sandbox: only the name and the owner are new. */
	if (want_id)
		snprintf(s->id, sizeof(s->id), "%s", want_id);
	else
		r = session_id_new(cfg->node_name, s->id, sizeof(s->id));
	if (r == 0)
		r = tenant_session_join(s, tenant);
	session_link(s);
	if (r < 0) {
		session_destroy(s, "setup failed");
		conn_reply(c, create_error(m, req, r), NULL, 0);
		return r;
	}
	if (code) {
		idle_default = kernel ? cfg->kernel_idle_timeout : cfg->code_idle_timeout;
		if (idle_default > cfg->idle_timeout_max)
			idle_default = cfg->idle_timeout_max;
	}
	s->plane = code ? PLANE_CODE : PLANE_OTARI;
	s->kernel = kernel;
	s->endpoint = req_bool(req, "endpoint") && cfg->jupyter_endpoint[0];
	s->idle_timeout =
		clamp_hint(req, "idle_timeout_seconds", idle_default, cfg->idle_timeout_max);
	s->max_lifetime =
		clamp_hint(req, "max_lifetime_seconds", cfg->lifetime_default, cfg->lifetime_max);
	s->created_at = s->last_activity_at = now_real();
	m->sessions_created++;
	snprintf(s->runtime_name, sizeof(s->runtime_name), "%s", runtime_name(cfg, s->runtime));
	row = (SessionRow){ .id = s->id,
			    .tenant = s->tenant,
			    .uid = s->uid,
			    .created_at = s->created_at,
			    .last_activity_at = s->last_activity_at,
			    .idle_timeout = s->idle_timeout,
			    .max_lifetime = s->max_lifetime,
			    .image = (char *)image,
			    .init_pid = s->sb.pid,
			    .init_ctl_fd = s->sb.ctl_fd_in_init,
			    .plane = code ? "code" : "otari",
			    .kernel = kernel,
			    .endpoint = s->endpoint,
			    .rid = s->rid,
			    .runtime = s->runtime ? s->runtime_name : NULL };
	journal_before_insert(m, s->id);
	r = store_session_insert(m->store, &row);
	if (r < 0) {
		log_err("SESSION_ID=%s cannot record the session: %s", s->id, strerror(-r));
		session_destroy(s, "store failed");
		conn_reply(c, reply_error("internal", "the session could not be recorded"), NULL,
			   0);
		return r;
	}
	log_info("SESSION_ID=%s created uid=%u init_pid=%d tenant=%s sandbox=%s runtime=%s", s->id,
		 s->uid, s->sb.pid, s->tenant ?: "-", s->rid, s->runtime_name);
	conn_reply(c, session_handle(s), NULL, 0);
	return 0;
}
