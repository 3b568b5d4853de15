/* SPDX-License-Identifier: MIT */
/* Sessions at the lowest level: ids, uids, the live list and the pools' lists, lookup. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "list.h"
#include "log.h"
#include "session.h"
#include "tenant.h"

/* ---- ids and uids ---- */

bool session_id_valid(const char *id)
{
	size_t n = 0;

	for (const char *p = id; *p; p++, n++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '-' || *p == '_'))
			return false;
	return n >= 1 && n <= SESSION_ID_MAX;
}

bool uid_mark(Manager *m, uid_t uid)
{
	int64_t i = (int64_t)uid - m->cfg->uid_base;

	/* Outside today's range (the range was reconfigured): not ours to track. */
	if (i < 0 || i >= m->cfg->uid_count)
		return true;
	if (m->uids[i])
		return false;
	m->uids[i] = 1;
	return true;
}

int uid_take(Manager *m, uid_t *uid)
{
	for (int64_t i = 0; i < m->cfg->uid_count; i++)
		if (!m->uids[i]) {
			m->uids[i] = 1;
			*uid = (uid_t)(m->cfg->uid_base + i);
			return 0;
		}
	return -EUSERS;
}

void uid_release(Manager *m, uid_t uid)
{
	int64_t i = (int64_t)uid - m->cfg->uid_base;

	if (i >= 0 && i < m->cfg->uid_count)
		m->uids[i] = 0;
}

/* ---- lookup ---- */

Session *session_find(Manager *m, const char *id, const char *tenant)
{
	Session *s;

	if (!id || !session_id_valid(id) || !(s = session_index_find(m, id)))
		return NULL;
	/* Another tenant's session does not exist, as far as this caller knows. */
	if ((s->tenant == NULL) != (tenant == NULL))
		return NULL;
	if (s->tenant && strcmp(s->tenant, tenant) != 0)
		return NULL;
	return s;
}

Session *session_alloc(Manager *m)
{
	Session *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->m = m;
	s->sb = (Sandbox){ .pidfd = -1, .ctl_fd = -1 };
	s->ws_fd = -1;
	s->scan_root_fd = -1;
	for (int k = 0; k < INTERP_KIND_COUNT; k++)
		s->interps[k] =
			(Interp){ .s = s, .kind = k, .pidfd = -1, .ctl = -1, .out = -1, .err = -1 };
	return s;
}

void session_link(Session *s)
{
	Manager *m = s->m;

	if (session_index_add(m, s) < 0)
		log_err("SESSION_ID=%s not indexed: no memory (it is reclaimed when idle)", s->id);
	LIST_PUSH(m->sessions, s);
	m->n_sessions++;
}

void session_pool_push(Session *s, int which)
{
	Manager *m = s->m;

	s->pooled = true;
	s->kernel = pool_is_kernel(which);
	s->runtime = pool_runtime(which);
	LIST_PUSH(m->pool[which], s);
	m->pool_n[which]++;
}

/* A pooled sandbox has no client-visible id yet: it is on its pool's list only. */
static void pool_list_unlink(Session *s)
{
	Manager *m = s->m;
	int which = pool_index(s->runtime, s->kernel);

	LIST_UNLINK(m->pool[which], s);
	s->pooled = false;
	m->pool_n[which]--;
}

void session_unlink(Session *s)
{
	Manager *m = s->m;

	if (s->pooled) {
		pool_list_unlink(s);
		return;
	}
	LIST_UNLINK(m->sessions, s);
	m->n_sessions--;
	session_index_remove(m, s);
}

json_object *session_handle(const Session *s)
{
	json_object *o = reply_ok();

	json_set(o, "session_id", json_object_new_string(s->id));
	json_set(o, "idle_timeout_seconds", json_object_new_int64(s->idle_timeout));
	json_set(o, "max_lifetime_seconds", json_object_new_int64(s->max_lifetime));
	json_set(o, "created_at", json_object_new_double(s->created_at));
	json_set(o, "last_activity_at", json_object_new_double(s->last_activity_at));
	json_set(o, "plane", json_object_new_string(s->plane == PLANE_CODE ? "code" : "otari"));
	json_set(o, "kernel", json_object_new_boolean(s->kernel));
	json_set(o, "runtime", json_object_new_string(s->runtime_name));
	json_set(o, "endpoint", json_object_new_boolean(s->endpoint));
	json_set(o, "execution_count", json_object_new_int64((int64_t)s->execution_count));
	json_set(o, "running", json_object_new_boolean(s->run != NULL));
	return o;
}
