/* SPDX-License-Identifier: MIT */
/*
 * CreateSession: admission, then a warm sandbox from the pool, now or when the next
 * one is built. A create never builds a sandbox in the loop: with none ready it waits,
 * the loop serving everyone else, until a build under way (or one started for it)
 * finishes.
 */
#include <errno.h>
#include <string.h>

#include "lifecycle.h"
#include "log.h"
#include "session/tenant.h"

/* A refusal the caller may retry later (503 with Retry-After). */
static json_object *busy_error(const Manager *m, json_object *e)
{
	return reply_retry_after(e, m->cfg->retry_after_seconds);
}

/* Why req's tenant may not have one more session (its live ones and its creates waiting
 * for a sandbox count), or NULL when it may. A create without a tenant is not capped
 * here. */
static json_object *tenant_refusal(Manager *m, json_object *req)
{
	const char *tenant = req_string(req, "tenant");
	int64_t cap = tenant_session_cap(m->cfg);
	size_t n;

	if (!tenant)
		return NULL;
	n = tenant_count(m->tenants, tenant) + create_waiting_of_tenant(m, tenant);
	if ((int64_t)n < cap)
		return NULL;
	m->tenant_cap_refusals++;
	log_debug("REQUEST_ID=%s create refused: tenant '%.128s' has %zu sessions",
		  req_string(req, "request_id") ?: "-", tenant, n);
	return busy_error(m,
			  reply_error("capacity", "this tenant's session limit (%lld) is reached",
				      (long long)cap));
}

/* Why the code plane's own caps refuse req (429, with these exact sentences), or NULL. */
static json_object *code_plane_refusal(const Manager *m, json_object *req)
{
	const PaddockConfig *cfg = m->cfg;
	size_t n_code = 0, n_kernel = 0;

	for (const Session *o = m->sessions; o; o = o->next)
		if (o->plane == PLANE_CODE) {
			n_code++;
			n_kernel += o->kernel;
		}
	create_waiting_of_code(m, &n_code, &n_kernel);
	if (req_bool(req, "kernel") && (int64_t)n_kernel >= cfg->kernel_max_sessions)
		return reply_error("limit", "Maximum number of kernel sessions (%lld) reached",
				   (long long)cfg->kernel_max_sessions);
	if ((int64_t)n_code >= cfg->code_max_sessions)
		return reply_error("limit", "Maximum number of sessions (%lld) reached",
				   (long long)cfg->code_max_sessions);
	return NULL;
}

/* Why req may not have or wait for a sandbox, or NULL when every limit lets it. Waiting
 * creates count as the sessions they will be. */
static json_object *create_refusal(Manager *m, json_object *req)
{
	const PaddockConfig *cfg = m->cfg;
	const char *want_id = req_string(req, "session_id");
	size_t promised = m->n_sessions + create_waiting_total(m);
	json_object *e;

	if (want_id && !session_id_valid(want_id))
		return reply_error("invalid", "session ids are 1 to 128 of A-Z a-z 0-9 _ -");
	if (want_id && session_index_find(m, want_id))
		return reply_error("exists", "a session with this id exists");
	if (m->draining)
		return busy_error(
			m, reply_error("unavailable", "this node is draining: no new sessions"));
	if (req_is_code(req) && (e = code_plane_refusal(m, req)))
		return e;
	if ((e = tenant_refusal(m, req)))
		return e;
	if ((int64_t)promised >= cfg->max_sessions)
		return busy_error(m, reply_error("capacity", "the session limit (%lld) is reached",
						 (long long)cfg->max_sessions));
	/* The index has room for this one before it is promised a sandbox. */
	if (session_index_reserve(m, promised + 1) < 0)
		return create_error(m, req, -ENOMEM);
	return NULL;
}

void op_create(Manager *m, Conn *c, const Request *rq)
{
	json_object *req = rq->body;
	json_object *refusal;
	Session *s;
	size_t runtime;
	bool kernel;
	int which;

	/* Another create for this id waits for its sandbox: this one is answered after it. */
	if (create_follow(m, c, req))
		return;
	runtime = create_runtime(m, req);
	/* A profile whose Python lacks IPython serves the kernel tier's sessions natively:
	 * same code, plainer outputs (the handle says which). Before the caps, which count
	 * the kernel tier's sessions. */
	kernel = req_bool(req, "kernel") && sandbox_env_runtime_has_kernel(m->env, runtime);
	if (kernel != req_bool(req, "kernel"))
		json_set(req, "kernel", json_object_new_boolean(false));
	if ((refusal = create_refusal(m, req))) {
		conn_reply(c, refusal, NULL, 0);
		return;
	}
	which = pool_index(runtime, kernel);
	s = pool_take(m, which);
	if (s)
		create_finish(m, c, req, s);
	else
		create_wait(m, c, req, which);
	pool_schedule(m); /* a refill after a hand-over; a build at once for a wait */
}
