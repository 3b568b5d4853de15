/* SPDX-License-Identifier: MIT */
/* Warm pools: sandboxes built ahead, with Python started, so a new session is a hand-over. */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "exec/exec.h"
#include "lifecycle.h"
#include "log.h"
#include "runtimes.h"
#include "session/tenant.h"
#include "workspace/editor.h"
#include "random.h"

#define POOL_PACE_MS 20		    /* no build this soon after a hand-over */
#define BUILD_FAILURES_MAX 3	    /* builds failed in a row before waiting creates give up */
#define BUILD_RETRY_MS 100	    /* the pause after a failed build; it doubles, up to 16 times */
#define BUILD_DEADLINE_MIN_MS 10000 /* a build is given up after create_wait_seconds, or this */

static void on_pool_timer(Loop *l, void *data);

/* A build slower than the creates waiting for it is not given up for that alone: one who
 * comes later may take it. */
static uint64_t build_deadline_ms(const Manager *m)
{
	uint64_t wait = (uint64_t)m->cfg->create_wait_seconds * 1000;

	return wait > BUILD_DEADLINE_MIN_MS ? wait : BUILD_DEADLINE_MIN_MS;
}

size_t pool_warm_max(const PaddockConfig *cfg)
{
	cpu_set_t cpus;

	if (cfg->pool_warm_max > 0)
		return (size_t)cfg->pool_warm_max;
	/* A warming sandbox keeps a core busy for tens of milliseconds: with one more than the
	 * CPUs the daemon may use, a refill keeps them busy without queueing behind itself. */
	if (sched_getaffinity(0, sizeof(cpus), &cpus) < 0)
		return 2;
	return (size_t)CPU_COUNT(&cpus) + 1;
}

size_t pool_target(const Manager *m, int which)
{
	const PaddockConfig *c = m->cfg;
	size_t runtime = pool_runtime(which);
	const RuntimeProfile *p = runtime ? &c->runtimes[runtime - 1] : NULL;

	/* A profile whose tree cannot serve keeps no pool: its creates run on the default.
	 * Nor does one whose builds keep failing, nor any while sessions are being ended. */
	if (p && (runtime_problem(m, runtime) || c->end_sessions))
		return 0;
	if (pool_is_kernel(which)) {
		/* Its kernel-tier creates are served natively (create.c): none would take one. */
		if (p && !sandbox_env_runtime_has_kernel(m->env, runtime))
			return 0;
		return (size_t)(p ? p->kernel_prewarm : c->kernel_prewarm);
	}
	return (size_t)(p ? p->pool_size : c->pool_size + c->code_prewarm);
}

/* Whether the pool is below its target, counting the sandboxes already being built. */
static bool pool_short(const Manager *m, int which)
{
	return m->pool_n[which] + m->pool_building[which] < pool_target(m, which);
}

size_t pool_building_total(const Manager *m)
{
	size_t n = 0;

	for (int which = 0; which < m->n_pools; which++)
		n += m->pool_building[which];
	return n;
}

/* Ready sandboxes in every pool. */
static size_t pool_ready_total(const Manager *m)
{
	size_t n = 0;

	for (int which = 0; which < m->n_pools; which++)
		n += m->pool_n[which];
	return n;
}

/* Its interpreter has answered its first request: truly ready. */
static bool pool_interp_answered(const Session *s, int which)
{
	const Interp *ip = &s->interps[pool_is_kernel(which) ? INTERP_KERNEL : INTERP_PYTHON];

	return ip->state == INTERP_READY && !ip->probing;
}

/* Each takes most of a core while it warms up. */
size_t pool_warming(const Manager *m)
{
	size_t n = pool_building_total(m);

	for (int which = 0; which < m->n_pools; which++)
		for (const Session *s = m->pool[which]; s; s = s->next)
			for (int k = 0; k < INTERP_KIND_COUNT; k++)
				n += s->interps[k].state == INTERP_STARTING ||
				     (s->interps[k].state == INTERP_READY && s->interps[k].probing);
	return n;
}

size_t pool_started(const Manager *m)
{
	size_t n = 0;

	for (int which = 0; which < m->n_pools; which++)
		for (const Session *s = m->pool[which]; s; s = s->next)
			n += pool_interp_answered(s, which);
	return n;
}

/* A refill could not start or finish a build: try again later rather than spin on a host
 * that cannot build now. */
static void pool_retry_later(Manager *m)
{
	if (!m->pool_timer)
		loop_add_timer(m->loop, 1000, on_pool_timer, m, &m->pool_timer);
}

static void on_build_retry(Loop *l, void *data)
{
	Manager *m = data;

	(void)l;
	m->build_retry = NULL;
	pool_schedule(m);
}

/* Waiting creates get their next builds when the pause after a failed one is over. */
static void build_retry_arm(Manager *m, uint64_t now)
{
	if (create_waiting_total(m) && !m->build_retry && m->build_retry_ms > now)
		loop_add_timer(m->loop, m->build_retry_ms - now, on_build_retry, m,
			       &m->build_retry);
}

/* Why a build failed, in a sentence for the log (r as from a build; deadline: the pool's
 * own deadline passed, rather than a step of the build failing, which may time out too). */
static void build_error_note(Manager *m, int r, bool deadline)
{
	const char *why = sandbox_last_error();

	if (deadline)
		snprintf(m->build_error, sizeof(m->build_error), "not ready within %llu ms",
			 (unsigned long long)build_deadline_ms(m));
	else if (r == -EUSERS)
		snprintf(m->build_error, sizeof(m->build_error), "no free sandbox user id");
	else
		snprintf(m->build_error, sizeof(m->build_error), "%s", why[0] ? why : strerror(-r));
}

/* Whether a failure says something of the host's ability to build: not a build that ran
 * out of time (a slow host builds the next one), nor one whose request the spawner took
 * with it when it died (the next build has a new spawner). */
static bool build_failure_counts(int r)
{
	return r != -ETIMEDOUT && r != -ECONNABORTED;
}

/*
 * A build of a runtime profile's failed. Its failures are its own: they neither pause nor
 * fail the other runtimes' builds. BUILD_FAILURES_MAX in a row for a reason other than
 * time, and the profile is taken as broken until the daemon restarts: no more warm
 * sandboxes, and creates naming it, those waiting included, run the default (an image is
 * a hint, never a reason to fail).
 */
static void profile_build_failed(Manager *m, int which, int r)
{
	size_t runtime = pool_runtime(which);

	if (!build_failure_counts(r) || ++m->runtime_failures[runtime] < BUILD_FAILURES_MAX)
		return;
	m->runtime_broken[runtime] = true;
	log_err("runtime profile '%s': %u builds failed in a row (%s): no more of its sandboxes "
		"are built; creates naming it run the default",
		runtime_name(m->cfg, runtime), m->runtime_failures[runtime], m->build_error);
	for (int kind = 0; kind < POOL_KINDS; kind++)
		create_wait_move(m, pool_index(runtime, kind == POOL_KERNEL),
				 pool_index(0, kind == POOL_KERNEL));
}

/*
 * A build failed. Waiting creates do not inherit its error: they wait for another build,
 * started after a pause that grows with the failures in a row, until their own deadline
 * (create_wait_seconds), since a host that is only slow builds the next one. Builds that
 * fail for a reason other than time, BUILD_FAILURES_MAX in a row, end at once the waits
 * of the creates no build under way serves: that host cannot build now, and they hear so
 * without waiting it out.
 */
static void pool_build_failed(Manager *m, int which, int r, bool deadline)
{
	uint64_t pause;

	build_error_note(m, r, deadline);
	log_warn("sandbox build failed (runtime %s): %s", runtime_name(m->cfg, pool_runtime(which)),
		 m->build_error);
	if (pool_runtime(which) != 0) {
		profile_build_failed(m, which, r);
		return;
	}
	if (r == -EUSERS)
		m->build_failures = BUILD_FAILURES_MAX;
	else if (build_failure_counts(r) && m->build_failures < 16)
		m->build_failures++;
	pause = (uint64_t)BUILD_RETRY_MS << (m->build_failures < 4 ? m->build_failures : 4);
	m->build_retry_ms = now_ms() + pause;
	if (build_failure_counts(r) && m->build_failures >= BUILD_FAILURES_MAX)
		create_fail_unbuilt_waiting(m, m->pool_building_fg, r);
}

/* Pool sandboxes get their own names: a session id is only known when one is taken. */
static int pool_rid(char *out, size_t len)
{
	uint8_t rnd[8];

	if (random_bytes(rnd, sizeof(rnd)) < 0)
		return -EIO;
	snprintf(out, len, "w%02x%02x%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1], rnd[2], rnd[3],
		 rnd[4], rnd[5], rnd[6], rnd[7]);
	return 0;
}

/* One warm sandbox being built: its child sets itself up while the loop goes on. */
typedef struct PoolBuild {
	Manager *m;
	Session *s;
	int which;
	bool background; /* a refill, at the least CPU weight; else started for a create */
	SandboxPending p;
	LoopSource *src;   /* p.sync_fd: readable at the spawner's answer, then at the end */
	LoopSource *timer; /* the spawn's deadline */
	struct PoolBuild *next;
} PoolBuild;

static void pool_build_unlink(PoolBuild *b)
{
	Manager *m = b->m;

	for (PoolBuild **pp = &m->pool_builds; *pp; pp = &(*pp)->next)
		if (*pp == b) {
			*pp = b->next;
			break;
		}
	m->pool_building[b->which]--;
	if (!b->background)
		m->pool_building_fg[b->which]--;
	b->src = loop_remove(m->loop, b->src);
	b->timer = loop_remove(m->loop, b->timer);
}

static void pool_build_free(PoolBuild *b, bool failed)
{
	if (failed)
		session_free(b->s);
	free(b);
}

static void on_build_ready(Loop *l, int fd, uint32_t events, void *data);

/* The child is init (or failed): the sandbox joins the pool and starts Python, and the
 * create that has waited longest, if any, takes it. Before that, the spawner's answer
 * came: the build goes on. */
static void pool_build_complete(PoolBuild *b)
{
	Manager *m = b->m;
	Session *s = b->s;
	int which = b->which, r;

	/* Off the loop before finishing may close the fd: its number can be reused at once. */
	b->src = loop_remove(m->loop, b->src);
	r = build_finish(m, s, &b->p);
	if (r == -EAGAIN) {
		r = loop_add_fd(m->loop, b->p.sync_fd, EPOLLIN, on_build_ready, b, &b->src);
		if (r == 0)
			return;
		build_abort(m, s, &b->p);
	}
	pool_build_unlink(b);
	pool_build_free(b, r < 0);
	if (r < 0) {
		pool_build_failed(m, which, r, false);
		pool_retry_later(m);
		return;
	}
	if (pool_runtime(which) == 0)
		m->build_failures = 0;
	m->runtime_failures[pool_runtime(which)] = 0;
	m->build_error[0] = '\0';
	session_pool_push(s, which);
	m->pool_built++;
	r = interp_start(s, pool_is_kernel(which) ? INTERP_KERNEL : INTERP_PYTHON);
	if (r < 0)
		log_warn("pool sandbox %s: interpreter not started: %s", s->rid, strerror(-r));
	while (m->waiting[which] && (s = pool_take(m, which)))
		create_serve_oldest(m, which, s);
	/* Built for a create whose worker has gone since, into a pool already full. */
	while (m->pool_n[which] > pool_target(m, which))
		session_destroy(m->pool[which], "not needed");
}

/* Give a build up: its child is killed and what it held released. */
static void pool_build_drop(PoolBuild *b)
{
	pool_build_unlink(b);
	build_abort(b->m, b->s, &b->p);
	pool_build_free(b, true);
}

static void on_build_ready(Loop *l, int fd, uint32_t events, void *data)
{
	PoolBuild *b = data;
	Manager *m = b->m;

	(void)l;
	(void)fd;
	(void)events;
	pool_build_complete(b); /* readable: this does not block */
	pool_schedule(m);
}

static void on_build_deadline(Loop *l, void *data)
{
	PoolBuild *b = data;
	Manager *m = b->m;
	int which = b->which;

	(void)l;
	b->timer = NULL;
	log_warn("pool sandbox %s: not ready within %llu ms, given up", b->s->rid,
		 (unsigned long long)build_deadline_ms(m));
	pool_build_drop(b);
	pool_build_failed(m, which, -ETIMEDOUT, true);
	pool_schedule(m);
}

/*
 * Start building one sandbox; it joins the pool when its child has become init. A refill
 * (background) runs at the least CPU weight, so that the sessions in use come first; one
 * started because a create waits runs at the default weight, as its caller's requests do.
 */
static int pool_build_one(Manager *m, int which, bool background)
{
	PoolBuild *b = calloc(1, sizeof(*b));
	Session *s = b ? session_alloc(m) : NULL;
	int r;

	if (!s) {
		free(b);
		return -ENOMEM;
	}
	*b = (PoolBuild){ .m = m, .s = s, .which = which, .background = background };
	s->runtime = pool_runtime(which);
	s->kernel = pool_is_kernel(which);
	s->undo = editor_undo_new();
	r = s->undo ? pool_rid(s->rid, sizeof(s->rid)) : -ENOMEM;
	if (r == 0) {
		memcpy(s->id, s->rid, sizeof(s->id));
		r = build_start(m, s, &b->p, background);
	}
	if (r < 0) {
		pool_build_free(b, true);
		return r;
	}
	if (loop_add_fd(m->loop, b->p.sync_fd, EPOLLIN, on_build_ready, b, &b->src) < 0 ||
	    loop_add_timer(m->loop, build_deadline_ms(m), on_build_deadline, b, &b->timer) < 0) {
		loop_remove(m->loop, b->src);
		build_abort(m, s, &b->p);
		pool_build_free(b, true);
		return -ENOMEM;
	}
	b->next = m->pool_builds;
	m->pool_builds = b;
	m->pool_building[which]++;
	m->pool_building_fg[which] += !background;
	return 0;
}

static void on_pool_timer(Loop *l, void *data)
{
	Manager *m = data;
	int r;

	(void)l;
	m->pool_timer = NULL;
	if (m->draining)
		return;
	for (int which = 0; which < m->n_pools; which++) {
		if (!pool_short(m, which))
			continue;
		/* The cores left over serve requests while the pool refills. */
		if (pool_warming(m) >= m->pool_warm_max)
			return; /* a sandbox that settles schedules the next */
		/* Warm sandboxes count against the host's capacity like live ones. */
		if ((int64_t)(m->n_sessions + pool_ready_total(m) + pool_building_total(m)) >=
		    m->cfg->max_sessions)
			return;
		r = pool_build_one(m, which, true);
		if (r < 0) {
			pool_build_failed(m, which, r, false);
			pool_retry_later(m);
			return;
		}
		/* One start per loop turn, so requests are served between them. */
		pool_schedule(m);
		return;
	}
}

/* Its interpreter answered: a pool's next build may start, or, handed out already, the
 * sandbox is one of the live sessions now. */
void pool_interp_settled(Session *s)
{
	if (s->pooled)
		pool_schedule(s->m);
	else
		session_cpu_foreground(s);
}

void pool_template_ready(Manager *m, enum interp_kind kind)
{
	int which = pool_index(0, kind == INTERP_KERNEL);
	Session *next;

	for (Session *s = m->pool[which]; s; s = next) {
		const Interp *ip = &s->interps[kind];

		next = s->next;
		if (ip->state != INTERP_DEAD && !ip->forked)
			session_destroy(s, "remade with the template's interpreter");
	}
	pool_schedule(m);
}

/*
 * Creates waiting for a sandbox get a build each at the default CPU weight: a refill under
 * way runs at the least, and busy sessions could starve it for as long as they run. One
 * for their kind starts at once; more within pool_warm_max. Whichever build finishes
 * first serves the oldest create; the others refill the pool.
 */
static void pool_feed_waiting(Manager *m)
{
	uint64_t now = now_ms();

	if (now < m->build_retry_ms) {
		build_retry_arm(m, now); /* after a failure, the pause first */
		return;
	}
	for (int which = 0; which < m->n_pools; which++)
		while (m->pool_building_fg[which] < m->n_waiting[which]) {
			int r;

			if (m->pool_building_fg[which] > 0 && pool_warming(m) >= m->pool_warm_max)
				break;
			r = pool_build_one(m, which, false);
			if (r < 0) {
				pool_build_failed(m, which, r, false);
				build_retry_arm(m, now_ms());
				return;
			}
		}
}

static bool pool_any_short(const Manager *m)
{
	for (int which = 0; which < m->n_pools; which++)
		if (pool_short(m, which))
			return true;
	return false;
}

void pool_schedule(Manager *m)
{
	/* A refill waits until POOL_PACE_MS after the last hand-over, so the session just
	 * handed out gets its first calls answered before a spawn takes the loop. */
	uint64_t now = now_ms(), ready_at = m->pool_last_take_ms + POOL_PACE_MS;

	pool_feed_waiting(m);
	if (m->pool_timer)
		return;
	if (!pool_any_short(m))
		return;
	loop_add_timer(m->loop, ready_at > now ? ready_at - now : 0, on_pool_timer, m,
		       &m->pool_timer);
}

/* The sandbox to hand out: one whose interpreter already answered, else the oldest
 * (new ones are pushed at the head: the tail has had the longest to start). */
static Session *pool_pick(Manager *m, int which)
{
	Session *s, *last = NULL;

	for (s = m->pool[which]; s; s = s->next) {
		if (pool_interp_answered(s, which))
			return s;
		last = s;
	}
	return last;
}

/* A warm sandbox, or NULL when none is in the pool: the caller waits for a build rather
 * than finishing one here, which would hold the loop while a child sets itself up. */
Session *pool_take(Manager *m, int which)
{
	Session *s = pool_pick(m, which);

	if (!s)
		return NULL;
	session_unlink(s);
	s->id[0] = '\0';
	m->pool_taken++;
	m->pool_last_take_ms = now_ms();
	/* One still starting keeps the least weight until it answers or is called: the
	 * create is answered meanwhile, and the sessions in use keep their cores. */
	if (pool_interp_answered(s, which))
		session_cpu_foreground(s);
	return s;
}

void pool_free_all(Manager *m)
{
	m->pool_timer = loop_remove(m->loop, m->pool_timer);
	m->build_retry = loop_remove(m->loop, m->build_retry);
	while (m->pool_builds)
		pool_build_drop(m->pool_builds);
	for (int which = 0; which < m->n_pools; which++)
		while (m->pool[which])
			session_destroy(m->pool[which], "shutdown");
}
