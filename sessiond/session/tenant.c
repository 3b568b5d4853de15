/* SPDX-License-Identifier: MIT */
/*
 * Tenants: how many live sessions each one has, so that one tenant cannot take every
 * session of max_sessions, and so that its sandboxes share one tenant's worth of CPU
 * weight however many of them are busy.
 */
#include "tenant.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

#define TENANT_MIN_BUCKETS 16
#define CPU_WEIGHT_MIN 1
#define CPU_WEIGHT_MAX 10000

/* One tenant with live sessions. */
typedef struct TenantEntry {
	struct TenantEntry *next; /* the next in its bucket */
	uint64_t hash;		  /* of name */
	size_t n;		  /* its live sessions, above 0 */
	uint64_t cpu_ns;	  /* scratch of tenant_metrics_write() */
	char name[];		  /* the tenant string */
} TenantEntry;

/* Chained hash buckets: a grow that fails only makes the chains longer. */
struct TenantTable {
	TenantEntry **buckets; /* cap of them */
	size_t cap;	       /* a power of two */
	size_t size;	       /* entries */
};

/* FNV-1a, as the session index uses. */
static uint64_t tenant_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		h = (h ^ *p) * 0x100000001b3ull;
	return h;
}

int tenant_table_new(TenantTable **ret)
{
	TenantTable *t = calloc(1, sizeof(*t));

	if (!t)
		return -ENOMEM;
	t->buckets = calloc(TENANT_MIN_BUCKETS, sizeof(*t->buckets));
	if (!t->buckets) {
		free(t);
		return -ENOMEM;
	}
	t->cap = TENANT_MIN_BUCKETS;
	*ret = t;
	return 0;
}

TenantTable *tenant_table_free(TenantTable *t)
{
	if (!t)
		return NULL;
	for (size_t i = 0; i < t->cap; i++)
		while (t->buckets[i]) {
			TenantEntry *e = t->buckets[i];

			t->buckets[i] = e->next;
			free(e);
		}
	free(t->buckets);
	free(t);
	return NULL;
}

/* Where tenant's entry is, or where it would go: the link that points (or would) at it. */
static TenantEntry **entry_link(const TenantTable *t, const char *tenant, uint64_t h)
{
	TenantEntry **pp = &t->buckets[h & (t->cap - 1)];

	while (*pp && ((*pp)->hash != h || strcmp((*pp)->name, tenant) != 0))
		pp = &(*pp)->next;
	return pp;
}

/* Spread the entries over cap buckets; -ENOMEM leaves the table as it was. */
static int table_resize(TenantTable *t, size_t cap)
{
	TenantEntry **buckets = calloc(cap, sizeof(*buckets));

	if (!buckets)
		return -ENOMEM;
	for (size_t i = 0; i < t->cap; i++)
		while (t->buckets[i]) {
			TenantEntry *e = t->buckets[i];

			t->buckets[i] = e->next;
			e->next = buckets[e->hash & (cap - 1)];
			buckets[e->hash & (cap - 1)] = e;
		}
	free(t->buckets);
	t->buckets = buckets;
	t->cap = cap;
	return 0;
}

size_t tenant_count(const TenantTable *t, const char *tenant)
{
	const TenantEntry *e;

	if (!t || !tenant)
		return 0;
	e = *entry_link(t, tenant, tenant_hash(tenant));
	return e ? e->n : 0;
}

int64_t tenant_count_add(TenantTable *t, const char *tenant)
{
	uint64_t h = tenant_hash(tenant);
	TenantEntry **pp = entry_link(t, tenant, h), *e;
	size_t len = strlen(tenant);

	if (*pp)
		return (int64_t)++(*pp)->n;
	e = malloc(sizeof(*e) + len + 1);
	if (!e)
		return -ENOMEM;
	*e = (TenantEntry){ .hash = h, .n = 1 };
	memcpy(e->name, tenant, len + 1);
	*pp = e;
	t->size++;
	/* Chains of one on average; should the bigger array not come, longer ones do. */
	if (t->size > t->cap)
		(void)table_resize(t, t->cap * 2);
	return 1;
}

int64_t tenant_count_remove(TenantTable *t, const char *tenant)
{
	TenantEntry **pp = entry_link(t, tenant, tenant_hash(tenant)), *e = *pp;

	if (!e)
		return -ENOENT;
	if (--e->n > 0)
		return (int64_t)e->n;
	*pp = e->next;
	free(e);
	t->size--;
	/* The array follows the tenants down too, so what the table holds stays bounded by
	 * the live sessions. */
	if (t->cap > TENANT_MIN_BUCKETS && t->size < t->cap / 8)
		(void)table_resize(t, t->cap / 2);
	return 0;
}

size_t tenant_table_size(const TenantTable *t)
{
	return t ? t->size : 0;
}

int64_t tenant_session_cap(const PaddockConfig *cfg)
{
	if (cfg->tenant_max_sessions > 0)
		return cfg->tenant_max_sessions;
	return cfg->max_sessions / 2 > 1 ? cfg->max_sessions / 2 : 1;
}

int64_t tenant_cpu_weight_each(int64_t total, size_t n)
{
	int64_t w = n > 1 ? total / (int64_t)n : total;

	if (w < CPU_WEIGHT_MIN)
		return CPU_WEIGHT_MIN;
	return w > CPU_WEIGHT_MAX ? CPU_WEIGHT_MAX : w;
}

int session_cpu_weight_write(Session *s)
{
	Manager *m = s->m;

	if (!s->tenant)
		return sandbox_cpu_foreground(m->env, s->rid);
	return sandbox_cpu_weight(m->env, s->rid,
				  tenant_cpu_weight_each(m->cfg->tenant_cpu_weight,
							 tenant_count(m->tenants, s->tenant)));
}

/* The weight of a sandbox in use (the default, or its tenant's share), once someone may be
 * waiting on it: its interpreter answered after it was handed out, or a call came. */
void session_cpu_foreground(Session *s)
{
	int r;

	if (!s->cpu_background)
		return;
	s->cpu_background = false;
	r = session_cpu_weight_write(s);
	if (r < 0)
		log_warn("SESSION_ID=%s cannot restore its CPU weight: %s", s->id, strerror(-r));
}

static void cpu_weight_write_logged(Session *s)
{
	int r = session_cpu_weight_write(s);

	if (r < 0)
		log_warn("SESSION_ID=%s cannot set its CPU weight: %s", s->id, strerror(-r));
}

/* The tenant's per-sandbox weight changed: its sandboxes in use but except get it. Those
 * at the least weight get theirs when they come into use (session_cpu_foreground). */
static void tenant_weights_rewrite(Manager *m, const char *tenant, const Session *except)
{
	for (Session *o = m->sessions; o; o = o->next)
		if (o != except && !o->cpu_background && o->tenant && !strcmp(o->tenant, tenant))
			cpu_weight_write_logged(o);
}

int tenant_session_join(Session *s, const char *tenant)
{
	Manager *m = s->m;
	int64_t total = m->cfg->tenant_cpu_weight, n;

	if (!tenant)
		return 0;
	if (!m->tenants && tenant_table_new(&m->tenants) < 0)
		return -ENOMEM;
	s->tenant = strdup(tenant);
	if (!s->tenant)
		return -ENOMEM;
	n = tenant_count_add(m->tenants, tenant);
	if (n < 0) {
		free(s->tenant);
		s->tenant = NULL;
		return (int)n;
	}
	if (n > 1 && tenant_cpu_weight_each(total, (size_t)n) !=
			     tenant_cpu_weight_each(total, (size_t)n - 1))
		tenant_weights_rewrite(m, tenant, s);
	if (!s->cpu_background)
		cpu_weight_write_logged(s);
	return 0;
}

void tenant_session_leave(Session *s)
{
	Manager *m = s->m;
	int64_t total = m->cfg->tenant_cpu_weight, n;

	if (!s->tenant || !m->tenants)
		return;
	n = tenant_count_remove(m->tenants, s->tenant);
	if (n > 0 && tenant_cpu_weight_each(total, (size_t)n) !=
			     tenant_cpu_weight_each(total, (size_t)n + 1))
		tenant_weights_rewrite(m, s->tenant, s);
}

/* A label value in the Prometheus text format: backslash, double quote and newline escaped. */
static void label_value_write(FILE *f, const char *v)
{
	for (const char *p = v; *p; p++) {
		if (*p == '\\')
			fputs("\\\\", f);
		else if (*p == '"')
			fputs("\\\"", f);
		else if (*p == '\n')
			fputs("\\n", f);
		else
			fputc(*p, f);
	}
}

/* Each tenant's sandboxes' CPU time into its entry's scratch: from the counter files a
 * session keeps open once it has run a call, else read once (nothing kept open for it). */
static void tenant_cpu_sum(Manager *m, TenantTable *t)
{
	for (size_t i = 0; i < t->cap; i++)
		for (TenantEntry *e = t->buckets[i]; e; e = e->next)
			e->cpu_ns = 0;
	for (Session *s = m->sessions; s; s = s->next) {
		TenantEntry *e;
		SandboxUsage u;

		if (!s->tenant || !(e = *entry_link(t, s->tenant, tenant_hash(s->tenant))))
			continue;
		if (s->counters ? sandbox_counters_read(s->counters, &u, false) == 0 :
				  sandbox_usage(m->env, s->rid, &u) == 0)
			e->cpu_ns += u.cpu_ns;
	}
}

void tenant_metrics_write(Manager *m, FILE *f)
{
	TenantTable *t = m->tenants;

	fprintf(f,
		"# HELP paddock_tenant_cap_refusals_total Creates refused at their tenant's "
		"session limit.\n# TYPE paddock_tenant_cap_refusals_total counter\n"
		"paddock_tenant_cap_refusals_total %llu\n",
		(unsigned long long)m->tenant_cap_refusals);
	fprintf(f, "# HELP paddock_tenant_sessions Live sessions of each tenant that has any.\n"
		   "# TYPE paddock_tenant_sessions gauge\n");
	if (t)
		for (size_t i = 0; i < t->cap; i++)
			for (const TenantEntry *e = t->buckets[i]; e; e = e->next) {
				fputs("paddock_tenant_sessions{tenant=\"", f);
				label_value_write(f, e->name);
				fprintf(f, "\"} %zu\n", e->n);
			}
	fprintf(f, "# HELP paddock_tenant_cpu_seconds CPU time used by the sandboxes of each "
		   "tenant's live sessions.\n# TYPE paddock_tenant_cpu_seconds gauge\n");
	if (!t)
		return;
	tenant_cpu_sum(m, t);
	for (size_t i = 0; i < t->cap; i++)
		for (const TenantEntry *e = t->buckets[i]; e; e = e->next) {
			fputs("paddock_tenant_cpu_seconds{tenant=\"", f);
			label_value_write(f, e->name);
			fprintf(f, "\"} %.3f\n", (double)e->cpu_ns / 1e9);
		}
}
