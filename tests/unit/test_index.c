/* SPDX-License-Identifier: MIT */
/* The manager's index of live sessions by id, against a plain array doing the same. */
#include <stdio.h>
#include <string.h>

#include "session/session.h"
#include "unit.h"

#define N 3000

static Session sessions[N];
static bool present[N];

static uint32_t rnd_state = 12345;

static uint32_t rnd(void)
{
	rnd_state = rnd_state * 1103515245u + 12345u;
	return rnd_state >> 8;
}

/* Every session is found exactly when present, and an id never added is not. */
static int check_all(const Manager *m)
{
	int bad = 0;

	for (int i = 0; i < N; i++) {
		Session *f = session_index_find(m, sessions[i].id);

		bad += present[i] ? f != &sessions[i] : f != NULL;
	}
	bad += session_index_find(m, "node-never-added") != NULL;
	return bad;
}

/* Added, removed at random, emptied and filled again, past several doublings of the
 * table: every session is found exactly while it is in the index. */
static void test_index_finds_exactly_the_sessions_in_it(void)
{
	Manager m = { 0 };
	size_t n = 0;

	CHECK(session_index_find(&m, "anything") == NULL);
	session_index_remove(&m, &sessions[0]); /* an empty table: nothing happens */
	for (int i = 0; i < N; i++)
		/* A shared prefix, as the node name makes it: the hash must spread the rest. */
		snprintf(sessions[i].id, sizeof(sessions[i].id), "tnode-%08x%d", rnd(), i);

	/* Grow from empty past several doublings, checking as it fills. */
	for (int i = 0; i < N / 2; i++) {
		CHECK_EQ_INT(session_index_reserve(&m, n + 1), 0);
		CHECK_EQ_INT(session_index_add(&m, &sessions[i]), 0);
		present[i] = true;
		n++;
		if (i % 250 == 0)
			CHECK_EQ_INT(check_all(&m), 0);
	}
	CHECK_EQ_INT(m.index_n, n);
	CHECK_GE_INT(m.index_cap, 2 * n);
	CHECK_EQ_INT(check_all(&m), 0);

	/* Random removals and additions: removal closes the gaps in the runs it leaves. */
	for (int round = 0; round < 20000; round++) {
		int i = (int)(rnd() % N);

		if (present[i]) {
			session_index_remove(&m, &sessions[i]);
			present[i] = false;
			n--;
		} else {
			CHECK_EQ_INT(session_index_reserve(&m, n + 1), 0);
			CHECK_EQ_INT(session_index_add(&m, &sessions[i]), 0);
			present[i] = true;
			n++;
		}
		if (round % 1000 == 0)
			CHECK_EQ_INT(check_all(&m), 0);
	}
	CHECK_EQ_INT(m.index_n, n);
	CHECK_EQ_INT(check_all(&m), 0);

	/* Removing what is not there changes nothing. */
	for (int i = 0; i < N; i++)
		if (!present[i]) {
			session_index_remove(&m, &sessions[i]);
			break;
		}
	CHECK_EQ_INT(m.index_n, n);
	CHECK_EQ_INT(check_all(&m), 0);

	/* Emptied, then filled again. */
	for (int i = 0; i < N; i++)
		if (present[i]) {
			session_index_remove(&m, &sessions[i]);
			present[i] = false;
		}
	CHECK_EQ_INT(m.index_n, 0);
	CHECK_EQ_INT(check_all(&m), 0);
	for (int i = 0; i < 100; i++) {
		CHECK_EQ_INT(session_index_add(&m, &sessions[i]), 0);
		present[i] = true;
	}
	CHECK_EQ_INT(check_all(&m), 0);
	session_index_free(&m);
	CHECK(m.index == NULL && session_index_find(&m, sessions[0].id) == NULL);
}

int main(void)
{
	test_index_finds_exactly_the_sessions_in_it();
	return unit_summary();
}
