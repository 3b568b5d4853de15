/* SPDX-License-Identifier: MIT */
/* The runtimes as the daemon reports them: each profile's tree, limits, pools, sessions. */
#include <stdio.h>
#include <string.h>

#include "admin.h"
#include "lifecycle/lifecycle.h"
#include "runtimes.h"

/* Live sessions on runtime i (RUNTIME_RETIRED: on profiles no longer configured). */
static size_t sessions_on(const Manager *m, size_t runtime)
{
	size_t n = 0;

	for (const Session *s = m->sessions; s; s = s->next)
		n += s->runtime == runtime;
	return n;
}

static json_object *runtime_limits(const PaddockConfig *c, const RuntimeProfile *p)
{
	json_object *o = json_object_new_object();

	json_set(o, "memory_bytes",
		 json_object_new_int64(p ? p->memory_max_bytes : c->memory_max_bytes));
	json_set(o, "pids", json_object_new_int64(p ? p->pids_max : c->pids_max));
	json_set(o, "cpu_percent",
		 json_object_new_int64(p ? p->cpu_quota_percent : c->cpu_quota_percent));
	json_set(o, "egress", json_object_new_boolean(p ? p->egress : c->egress));
	return o;
}

static json_object *runtime_entry(const Manager *m, size_t i)
{
	const PaddockConfig *c = m->cfg;
	const RuntimeProfile *p = i ? &c->runtimes[i - 1] : NULL;
	const char *problem = runtime_problem(m, i);
	int native = pool_index(i, false), kernel = pool_index(i, true);
	json_object *o = json_object_new_object();

	json_set(o, "name", json_object_new_string(runtime_name(c, i)));
	json_set(o, "root", json_object_new_string(p ? p->root : "/"));
	json_set(o, "description",
		 json_object_new_string(p ? p->description : "the host's own /usr"));
	json_set(o, "usable", json_object_new_boolean(!problem));
	json_set_string_or_null(o, "problem", problem);
	json_set(o, "sessions", json_object_new_int64((int64_t)sessions_on(m, i)));
	json_set(o, "pool_ready", json_object_new_int64((int64_t)m->pool_n[native]));
	json_set(o, "pool_kernel_ready", json_object_new_int64((int64_t)m->pool_n[kernel]));
	json_set(o, "pool_target", json_object_new_int64((int64_t)pool_target(m, native)));
	json_set(o, "pool_kernel_target", json_object_new_int64((int64_t)pool_target(m, kernel)));
	json_set(o, "pool_building",
		 json_object_new_int64(
			 (int64_t)(m->pool_building[native] + m->pool_building[kernel])));
	json_set(o, "limits", runtime_limits(c, p));
	return o;
}

json_object *runtimes_stats(const Manager *m)
{
	json_object *a = json_object_new_array();

	for (size_t i = 0; a && i <= m->cfg->n_runtimes; i++)
		json_append(a, runtime_entry(m, i));
	return a;
}

size_t runtimes_retired_sessions(const Manager *m)
{
	return sessions_on(m, RUNTIME_RETIRED);
}

void runtimes_metrics_write(const Manager *m, FILE *f)
{
	const PaddockConfig *c = m->cfg;

	fprintf(f, "# HELP paddock_runtime_pool_ready Warm sandboxes ready, by runtime and pool.\n"
		   "# TYPE paddock_runtime_pool_ready gauge\n");
	for (size_t i = 0; i <= c->n_runtimes; i++)
		fprintf(f,
			"paddock_runtime_pool_ready{runtime=\"%s\",pool=\"native\"} %zu\n"
			"paddock_runtime_pool_ready{runtime=\"%s\",pool=\"kernel\"} %zu\n",
			runtime_name(c, i), m->pool_n[pool_index(i, false)], runtime_name(c, i),
			m->pool_n[pool_index(i, true)]);
	fprintf(f, "# HELP paddock_runtime_sessions Live sessions, by runtime (retired: on a "
		   "profile no longer configured).\n# TYPE paddock_runtime_sessions gauge\n");
	for (size_t i = 0; i <= c->n_runtimes; i++)
		fprintf(f, "paddock_runtime_sessions{runtime=\"%s\"} %zu\n", runtime_name(c, i),
			sessions_on(m, i));
	fprintf(f, "paddock_runtime_sessions{runtime=\"(retired)\"} %zu\n",
		runtimes_retired_sessions(m));
	fprintf(f, "# HELP paddock_runtime_usable Whether a runtime's tree can serve sessions.\n"
		   "# TYPE paddock_runtime_usable gauge\n");
	for (size_t i = 0; i <= c->n_runtimes; i++)
		fprintf(f, "paddock_runtime_usable{runtime=\"%s\"} %d\n", runtime_name(c, i),
			!runtime_problem(m, i));
}
