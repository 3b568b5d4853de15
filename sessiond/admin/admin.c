/* SPDX-License-Identifier: MIT */
/* Operator requests: listing, stats, Prometheus metrics, kill and drain (root only). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "cleanup.h"
#include "exec/exec.h"
#include "lifecycle/lifecycle.h"
#include "log.h"
#include "session/tenant.h"

void op_health(Manager *m, Conn *c, const Request *rq)
{
	json_object *o = reply_ok();

	(void)rq;
	json_set(o, "sessions", json_object_new_int64((int64_t)m->n_sessions));
	json_set(o, "max_sessions", json_object_new_int64(m->cfg->max_sessions));
	json_set(o, "draining", json_object_new_boolean(m->draining));
	conn_reply(c, o, NULL, 0);
}

void op_stats(Manager *m, Conn *c, const Request *rq)
{
	const PaddockConfig *cfg = m->cfg;
	json_object *o = reply_ok(), *lim = json_object_new_object();
	json_object *tmpl = json_object_new_object(), *forks = json_object_new_object();
	size_t running = 0, buffered = 0;
	uint64_t two_steps, direct;

	(void)rq;
	for (Session *s = m->sessions; s; s = s->next) {
		running += s->run != NULL;
		for (int k = 0; k < INTERP_KIND_COUNT; k++)
			buffered += interp_buffered_bytes(&s->interps[k]);
	}
	json_set(o, "sessions", json_object_new_int64((int64_t)m->n_sessions));
	json_set(o, "running", json_object_new_int64((int64_t)running));
	json_set(o, "max_sessions", json_object_new_int64(cfg->max_sessions));
	json_set(o, "tearing_down", json_object_new_int64((int64_t)zombie_count(m)));
	json_set(o, "draining", json_object_new_boolean(m->draining));
	json_set(o, "cgroup", json_object_new_string(sandbox_env_cgroup_version(m->env)));
	json_set(o, "node", json_object_new_string(cfg->node_name));
	/* The default runtime's pools here; each runtime's in "runtimes". */
	json_set(o, "pool_ready", json_object_new_int64((int64_t)m->pool_n[0]));
	json_set(o, "pool_kernel_ready", json_object_new_int64((int64_t)m->pool_n[1]));
	json_set(o, "pool_started", json_object_new_int64((int64_t)pool_started(m)));
	json_set(o, "pool_target", json_object_new_int64(cfg->pool_size + cfg->code_prewarm));
	json_set(o, "pool_building", json_object_new_int64((int64_t)pool_building_total(m)));
	json_set(o, "pool_warming", json_object_new_int64((int64_t)pool_warming(m)));
	json_set(o, "pool_warm_max", json_object_new_int64((int64_t)m->pool_warm_max));
	json_set(o, "pool_built", json_object_new_int64((int64_t)m->pool_built));
	json_set(o, "pool_taken", json_object_new_int64((int64_t)m->pool_taken));
	json_set(o, "creates_waiting", json_object_new_int64((int64_t)create_waiting_total(m)));
	/* Workers keep one per thread: this grows with the threads that have served. */
	json_set(o, "session_buffer_bytes", json_object_new_int64((int64_t)buffered));
	json_set(o, "connections", json_object_new_int64((int64_t)conn_server_connections(c)));
	json_set(o, "wal_checkpoints", json_object_new_int64((int64_t)m->checkpoints));
	json_set(o, "tenants", json_object_new_int64((int64_t)tenant_table_size(m->tenants)));
	json_set(o, "tenant_cap_refusals", json_object_new_int64((int64_t)m->tenant_cap_refusals));
	json_set(lim, "memory_bytes", json_object_new_int64(cfg->memory_max_bytes));
	json_set(lim, "pids", json_object_new_int64(cfg->pids_max));
	json_set(lim, "cpu_percent", json_object_new_int64(cfg->cpu_quota_percent));
	json_set(lim, "workspace_bytes", json_object_new_int64(cfg->workspace_bytes));
	json_set(lim, "tmp_bytes", json_object_new_int64(cfg->tmp_bytes));
	json_set(lim, "exec_timeout_max", json_object_new_int64(cfg->exec_timeout_max));
	json_set(lim, "output_max_bytes", json_object_new_int64(cfg->output_max_bytes));
	json_set(lim, "tenant_max_sessions", json_object_new_int64(tenant_session_cap(cfg)));
	json_set(lim, "tenant_cpu_weight", json_object_new_int64(cfg->tenant_cpu_weight));
	json_set(o, "limits", lim);
	json_set(o, "runtimes", runtimes_stats(m));
	json_set(tmpl, "python", json_object_new_string(template_state_name(m, INTERP_PYTHON)));
	json_set(tmpl, "kernel", json_object_new_string(template_state_name(m, INTERP_KERNEL)));
	json_set(o, "templates", tmpl);
	template_forks(m, &two_steps, &direct);
	json_set(forks, "two_steps", json_object_new_int64((int64_t)two_steps));
	json_set(forks, "direct", json_object_new_int64((int64_t)direct));
	json_set(o, "template_forks", forks);
	json_set(o, "retired_runtime_sessions",
		 json_object_new_int64((int64_t)runtimes_retired_sessions(m)));
	conn_reply(c, o, NULL, 0);
}

/* Prometheus text exposition of the daemon's counters and gauges. */
void op_metrics(Manager *m, Conn *c, const Request *rq)
{
	(void)rq;
	static const char *const outcomes[] = { "ok", "error", "timeout", "killed", "cancelled" };
	static const char *const reasons[] = { "released", "idle", "lifetime", "other" };
	_cleanup_free_ char *text = NULL;
	size_t len = 0, running = 0;
	FILE *f = open_memstream(&text, &len);
	json_object *o;

	if (!f) {
		conn_reply(c, reply_error("internal", "out of memory"), NULL, 0);
		return;
	}
	for (Session *s = m->sessions; s; s = s->next)
		running += s->run != NULL;
	fprintf(f, "# HELP paddock_sessions Live sessions.\n# TYPE paddock_sessions gauge\n");
	fprintf(f, "paddock_sessions %zu\n", m->n_sessions);
	fprintf(f,
		"# HELP paddock_sessions_running Sessions running a call now.\n"
		"# TYPE paddock_sessions_running gauge\npaddock_sessions_running %zu\n",
		running);
	fprintf(f,
		"# HELP paddock_sessions_max The session cap.\n"
		"# TYPE paddock_sessions_max gauge\npaddock_sessions_max %lld\n",
		(long long)m->cfg->max_sessions);
	fprintf(f,
		"# HELP paddock_sessions_created_total Sessions created.\n"
		"# TYPE paddock_sessions_created_total counter\n"
		"paddock_sessions_created_total %llu\n",
		(unsigned long long)m->sessions_created);
	fprintf(f,
		"# HELP paddock_sandboxes_tearing_down Sandboxes being removed.\n"
		"# TYPE paddock_sandboxes_tearing_down gauge\n"
		"paddock_sandboxes_tearing_down %zu\n",
		zombie_count(m));
	fprintf(f,
		"# HELP paddock_pool_ready Warm sandboxes ready, by pool.\n"
		"# TYPE paddock_pool_ready gauge\n"
		"paddock_pool_ready{pool=\"native\"} %zu\npaddock_pool_ready{pool=\"kernel\"} %zu\n",
		m->pool_n[0], m->pool_n[1]);
	fprintf(f,
		"# HELP paddock_pool_built_total Warm sandboxes built.\n"
		"# TYPE paddock_pool_built_total counter\npaddock_pool_built_total %llu\n",
		(unsigned long long)m->pool_built);
	fprintf(f, "# HELP paddock_executions_total Calls run, by outcome.\n"
		   "# TYPE paddock_executions_total counter\n");
	for (size_t i = 0; i < ARRAY_SIZE(outcomes); i++)
		fprintf(f, "paddock_executions_total{outcome=\"%s\"} %llu\n", outcomes[i],
			(unsigned long long)m->runs_by_outcome[i]);
	fprintf(f, "# HELP paddock_sessions_ended_total Sessions ended, by reason.\n"
		   "# TYPE paddock_sessions_ended_total counter\n");
	for (size_t i = 0; i < ARRAY_SIZE(reasons); i++)
		fprintf(f, "paddock_sessions_ended_total{reason=\"%s\"} %llu\n", reasons[i],
			(unsigned long long)m->kills_by_reason[i]);
	tenant_metrics_write(m, f);
	runtimes_metrics_write(m, f);
	fclose(f);
	o = reply_ok();
	json_set(o, "text", json_object_new_string_len(text ? text : "", (int)len));
	conn_reply(c, o, NULL, 0);
}

static bool same_tenant(const Session *s, const char *tenant)
{
	if (!s->tenant || !tenant)
		return !s->tenant && !tenant;
	return strcmp(s->tenant, tenant) == 0;
}

/* The caller's sessions; plane narrows to one API's. */
void op_sessions(Manager *m, Conn *c, const Request *rq)
{
	json_object *req = rq->body;
	const char *tenant = rq->tenant;
	const char *plane = req_string(req, "plane");
	json_object *o = reply_ok(), *arr = json_object_new_array();

	for (Session *s = m->sessions; s; s = s->next) {
		json_object *h;

		if (!same_tenant(s, tenant))
			continue;
		if (plane && strcmp(plane, s->plane == PLANE_CODE ? "code" : "otari") != 0)
			continue;
		h = session_handle(s);
		json_object_object_del(h, "ok");
		json_append(arr, h);
	}
	json_set(o, "sessions", arr);
	conn_reply(c, o, NULL, 0);
}

/* Every session with its tenant and resource use, for paddockctl. */
static json_object *admin_session(Session *s)
{
	SandboxUsage u = { 0 };
	json_object *h = session_handle(s);

	json_object_object_del(h, "ok");
	sandbox_usage(s->m->env, s->rid, &u);
	json_set_string_or_null(h, "tenant", s->tenant);
	json_set(h, "uid", json_object_new_int64(s->uid));
	json_set(h, "init_pid", json_object_new_int64(s->sb.pid));
	json_set(h, "memory_bytes", json_object_new_int64((int64_t)u.memory_current));
	json_set(h, "cpu_ms", json_object_new_int64((int64_t)(u.cpu_ns / 1000000)));
	json_set(h, "pids", json_object_new_int64((int64_t)u.pids_current));
	return h;
}

void op_admin(Manager *m, Conn *c, const Request *rq)
{
	json_object *req = rq->body;
	const char *op = rq->op;
	if (conn_peer_uid(c) != 0) {
		conn_reply(c, reply_error("forbidden", "operator requests need root"), NULL, 0);
		return;
	}
	if (strcmp(op, "admin_sessions") == 0) {
		json_object *o = reply_ok(), *arr = json_object_new_array();

		for (Session *s = m->sessions; s; s = s->next)
			json_append(arr, admin_session(s));
		json_set(o, "sessions", arr);
		conn_reply(c, o, NULL, 0);
	} else if (strcmp(op, "kill") == 0) {
		const char *id = req_string(req, "session_id");
		json_object *o = reply_ok();
		bool found = false;

		for (Session *s = m->sessions; s && id; s = s->next)
			if (strcmp(s->id, id) == 0) {
				session_destroy(s, "operator");
				found = true;
				break;
			}
		json_set(o, "existed", json_object_new_boolean(found));
		conn_reply(c, o, NULL, 0);
	} else {
		json_object *v, *o = reply_ok();

		/* drain: {"on": false} resumes; the reply says how many sessions remain. */
		m->draining =
			!json_object_object_get_ex(req, "on", &v) || json_object_get_boolean(v);
		log_info("draining %s", m->draining ? "on" : "off");
		json_set(o, "draining", json_object_new_boolean(m->draining));
		json_set(o, "sessions", json_object_new_int64((int64_t)m->n_sessions));
		conn_reply(c, o, NULL, 0);
	}
}
