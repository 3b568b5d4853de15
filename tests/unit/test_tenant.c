/* SPDX-License-Identifier: MIT */
/* Unit tests for the tenant table: counts, entries freed at 0, growth, the cap and weights. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "session/tenant.h"

#include "unit.h"

static void test_counts_are_per_tenant_and_entries_go_at_zero(void)
{
	TenantTable *t = NULL;

	CHECK_EQ_INT(tenant_table_new(&t), 0);
	CHECK(t);
	CHECK_EQ_INT(tenant_count(t, "acme"), 0);
	CHECK_EQ_INT(tenant_count(NULL, "acme"), 0);
	CHECK_EQ_INT(tenant_count_add(t, "acme"), 1);
	CHECK_EQ_INT(tenant_count_add(t, "acme"), 2);
	CHECK_EQ_INT(tenant_count_add(t, "globex"), 1);
	CHECK_EQ_INT(tenant_count(t, "acme"), 2);
	CHECK_EQ_INT(tenant_count(t, "globex"), 1);
	CHECK_EQ_INT(tenant_table_size(t), 2);
	/* Prefixes and case are other tenants. */
	CHECK_EQ_INT(tenant_count(t, "acm"), 0);
	CHECK_EQ_INT(tenant_count(t, "ACME"), 0);
	CHECK_EQ_INT(tenant_count_remove(t, "acme"), 1);
	CHECK_EQ_INT(tenant_count_remove(t, "acme"), 0);
	/* At 0 the entry goes: the table holds only tenants with sessions. */
	CHECK_EQ_INT(tenant_table_size(t), 1);
	CHECK_EQ_INT(tenant_count(t, "acme"), 0);
	CHECK_EQ_INT(tenant_count_remove(t, "acme"), -ENOENT);
	CHECK_EQ_INT(tenant_count_remove(t, "nobody"), -ENOENT);
	CHECK_EQ_INT(tenant_count_add(t, "acme"), 1);
	CHECK_EQ_INT(tenant_table_size(t), 2);
	CHECK_EQ_INT(tenant_count_add(t, "a\"b\\c"), 1);
	CHECK_EQ_INT(tenant_count(t, "a\"b\\c"), 1);
	CHECK(tenant_table_free(t) == NULL);
	CHECK(tenant_table_free(NULL) == NULL);
}

/* Many tenants: the table grows, every count stays right, and empties back to nothing. */
static void test_many_tenants_grow_the_table_and_empty_it(void)
{
	enum { N = 5000 };
	TenantTable *t = NULL;
	char name[32];
	bool ok = true;

	CHECK_EQ_INT(tenant_table_new(&t), 0);
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "tenant-%d", i);
		for (int k = 0; k <= i % 3; k++)
			ok &= tenant_count_add(t, name) == k + 1;
	}
	CHECK(ok);
	CHECK_EQ_INT(tenant_table_size(t), N);
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "tenant-%d", i);
		ok &= tenant_count(t, name) == (size_t)(i % 3 + 1);
	}
	CHECK(ok);
	/* Remove every tenant in another order than they came. */
	for (int i = N - 1; i >= 0; i -= 2) {
		snprintf(name, sizeof(name), "tenant-%d", i);
		for (int k = i % 3; k >= 0; k--)
			ok &= tenant_count_remove(t, name) == k;
	}
	CHECK(ok);
	CHECK_EQ_INT(tenant_table_size(t), N / 2);
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "tenant-%d", i);
		ok &= tenant_count(t, name) == (i % 2 == (N - 1) % 2 ? 0 : (size_t)(i % 3 + 1));
	}
	CHECK(ok);
	for (int i = N - 2; i >= 0; i -= 2) {
		snprintf(name, sizeof(name), "tenant-%d", i);
		for (int k = i % 3; k >= 0; k--)
			ok &= tenant_count_remove(t, name) == k;
	}
	CHECK(ok);
	CHECK_EQ_INT(tenant_table_size(t), 0);
	/* Shrunk back, it still works. */
	CHECK_EQ_INT(tenant_count_add(t, "again"), 1);
	CHECK_EQ_INT(tenant_count(t, "again"), 1);
	tenant_table_free(t);
}

static void test_tenant_cap_defaults_to_half_of_max_sessions(void)
{
	PaddockConfig c = { .max_sessions = 64, .tenant_max_sessions = 0 };

	CHECK_EQ_INT(tenant_session_cap(&c), 32);
	c.max_sessions = 3;
	CHECK_EQ_INT(tenant_session_cap(&c), 1);
	c.max_sessions = 1;
	CHECK_EQ_INT(tenant_session_cap(&c), 1);
	c.tenant_max_sessions = 5;
	CHECK_EQ_INT(tenant_session_cap(&c), 5);
	/* Set, it is absolute, even above max_sessions (then the global cap answers first). */
	c.tenant_max_sessions = 100;
	CHECK_EQ_INT(tenant_session_cap(&c), 100);
}

static void test_cpu_weight_is_split_among_sessions_down_to_1(void)
{
	CHECK_EQ_INT(tenant_cpu_weight_each(1000, 1), 1000);
	CHECK_EQ_INT(tenant_cpu_weight_each(1000, 4), 250);
	CHECK_EQ_INT(tenant_cpu_weight_each(1000, 3), 333);
	CHECK_EQ_INT(tenant_cpu_weight_each(1000, 0), 1000);
	CHECK_EQ_INT(tenant_cpu_weight_each(1000, 1000), 1);
	CHECK_EQ_INT(tenant_cpu_weight_each(1000, 5000), 1);
	CHECK_EQ_INT(tenant_cpu_weight_each(10000, 1), 10000);
	CHECK_EQ_INT(tenant_cpu_weight_each(1, 7), 1);
}

int main(void)
{
	test_counts_are_per_tenant_and_entries_go_at_zero();
	test_many_tenants_grow_the_table_and_empty_it();
	test_tenant_cap_defaults_to_half_of_max_sessions();
	test_cpu_weight_is_split_among_sessions_down_to_1();
	return unit_summary();
}
