/* SPDX-License-Identifier: MIT */
/* Warm pools: sandboxes built ahead, with Python started, so a new session is a hand-over. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "log.h"
#include "session.h"

enum { POOL_NATIVE, POOL_KERNEL };

#define POOL_PACE_MS 20 /* no build this soon after a hand-over */

static size_t pool_target(const Manager *m, int which)
{
	const PaddockConfig *c = m->cfg;

	if (which == POOL_KERNEL)
		return (size_t)c->kernel_prewarm;
	return (size_t)(c->pool_size + c->code_prewarm);
}

/* Pool sandboxes get their own names: a session id is only known when one is taken. */
static int pool_rid(char *out, size_t len)
{
	uint8_t rnd[8];

	if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
		return -EIO;
	snprintf(out, len, "w%02x%02x%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1], rnd[2], rnd[3],
		 rnd[4], rnd[5], rnd[6], rnd[7]);
	return 0;
}

static void pool_push(Manager *m, int which, Session *s)
{
	s->pooled = true;
	s->kernel = which == POOL_KERNEL;
	s->prev = NULL;
	s->next = m->pool[which];
	if (m->pool[which])
		m->pool[which]->prev = s;
	m->pool[which] = s;
	m->pool_n[which]++;
}

void pool_unlink(Session *s)
{
	Manager *m = s->m;
	int which = s->kernel ? POOL_KERNEL : POOL_NATIVE;

	if (s->prev)
		s->prev->next = s->next;
	else
		m->pool[which] = s->next;
	if (s->next)
		s->next->prev = s->prev;
	s->prev = s->next = NULL;
	s->pooled = false;
	m->pool_n[which]--;
}

/* Build one sandbox and start its interpreter; the loop goes on meanwhile. */
static int pool_build_one(Manager *m, int which)
{
	Session *s = session_alloc(m);
	int r;

	if (!s)
		return -ENOMEM;
	s->undo = editor_undo_new();
	r = s->undo ? pool_rid(s->rid, sizeof(s->rid)) : -ENOMEM;
	if (r == 0) {
		memcpy(s->id, s->rid, sizeof(s->id));
		r = session_build(m, s);
	}
	if (r < 0) {
		editor_undo_free(s->undo);
		free(s);
		return r;
	}
	pool_push(m, which, s);
	m->pool_built++;
	sandbox_cpu_background(m->env, s->rid, true);
	r = session_start_interp(s, which == POOL_KERNEL ? INTERP_KERNEL : INTERP_PYTHON);
	if (r < 0)
		log_warn("pool sandbox %s: interpreter not started: %s", s->rid, strerror(-r));
	return 0;
}

static void on_pool_timer(Loop *l, void *data)
{
	Manager *m = data;

	(void)l;
	m->pool_timer = NULL;
	if (m->draining)
		return;
	for (int which = POOL_NATIVE; which <= POOL_KERNEL; which++) {
		if (m->pool_n[which] >= pool_target(m, which))
			continue;
		/* Warm sandboxes count against the host's capacity like live ones. */
		if ((int64_t)(m->n_sessions + m->pool_n[0] + m->pool_n[1]) >= m->cfg->max_sessions)
			return;
		if (pool_build_one(m, which) < 0) {
			log_warn("pool refill failed: %s", sandbox_last_error());
			/* Try again later rather than spin on a host that cannot build now. */
			loop_add_timer(m->loop, 1000, on_pool_timer, m, &m->pool_timer);
			return;
		}
		/* One sandbox per loop turn, so requests are served between builds. */
		pool_schedule(m);
		return;
	}
}

void pool_schedule(Manager *m)
{
	/* A build waits until POOL_PACE_MS after the last hand-over, so the session just
	 * handed out gets its first calls answered before a spawn takes the loop. */
	uint64_t now = now_ms(), ready_at = m->pool_last_take_ms + POOL_PACE_MS;

	if (m->pool_timer)
		return;
	if (m->pool_n[POOL_NATIVE] >= pool_target(m, POOL_NATIVE) &&
	    m->pool_n[POOL_KERNEL] >= pool_target(m, POOL_KERNEL))
		return;
	loop_add_timer(m->loop, ready_at > now ? ready_at - now : 0, on_pool_timer, m,
		       &m->pool_timer);
}

Session *pool_take(Manager *m, bool kernel)
{
	int which = kernel ? POOL_KERNEL : POOL_NATIVE;
	Session *s = m->pool[which];

	if (!s)
		return NULL;
	pool_unlink(s);
	s->id[0] = '\0';
	m->pool_taken++;
	m->pool_last_take_ms = now_ms();
	sandbox_cpu_background(m->env, s->rid, false);
	return s;
}

void pool_free_all(Manager *m)
{
	m->pool_timer = loop_remove(m->loop, m->pool_timer);
	for (int which = POOL_NATIVE; which <= POOL_KERNEL; which++)
		while (m->pool[which])
			session_destroy(m->pool[which], "shutdown");
}
