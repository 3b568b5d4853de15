/* SPDX-License-Identifier: MIT */
/* Tenants: each one's live sessions, counted for its session cap and its share of the CPU. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "session.h"

/*
 * The table: live sessions by tenant string. An entry exists only while its count is
 * above 0, so the memory it takes is bounded by the live sessions. Opaque.
 */

/* An empty table; -ENOMEM. The caller owns it. */
int tenant_table_new(TenantTable **ret);
/* Free t and every entry; accepts NULL, returns NULL. */
TenantTable *tenant_table_free(TenantTable *t);
/* The tenant's count: 0 for a tenant the table does not hold (t may be NULL). */
size_t tenant_count(const TenantTable *t, const char *tenant);
/* One more for tenant (copied on its first): the new count, or -ENOMEM with nothing changed. */
int64_t tenant_count_add(TenantTable *t, const char *tenant);
/* One fewer: the new count, its entry freed at 0; -ENOENT for a tenant the table lacks. */
int64_t tenant_count_remove(TenantTable *t, const char *tenant);
/* Tenants the table holds (those with a count above 0). */
size_t tenant_table_size(const TenantTable *t);

/* The cap a tenant's sessions have: tenant_max_sessions, or half of max_sessions (>= 1). */
int64_t tenant_session_cap(const PaddockConfig *cfg);
/* The CPU weight (v2 units) of each of n sandboxes sharing total: total / n in 1..10000. */
int64_t tenant_cpu_weight_each(int64_t total, size_t n);

/*
 * The sessions' side: the table is m->tenants, made on the first tenant's session.
 */

/* s (not counted yet, s->tenant NULL) gets a copy of tenant (NULL: none, nothing to do)
 * and counts for it; when that changes the tenant's per-sandbox CPU weight, its other
 * sandboxes get the new one, and s gets it unless it waits at the least weight.
 * -ENOMEM: nothing changed. */
int tenant_session_join(Session *s, const char *tenant);
/* s is going: it no longer counts for its tenant, whose sandboxes left get the new weight
 * when that changes. Its tenant string stays the caller's to free. */
void tenant_session_leave(Session *s);
/* The weight of a sandbox in use, for one built at the least (SandboxLimits.cpu_background),
 * once someone may be waiting on it. */
void session_cpu_foreground(Session *s);
/* Write s's CPU weight for when it is in use: its tenant's share, or the default weight
 * without a tenant. -errno from the cgroup write. */
int session_cpu_weight_write(Session *s);
/* The per-tenant series of /metrics: sessions and CPU seconds by tenant, refusals. */
void tenant_metrics_write(Manager *m, FILE *f);
