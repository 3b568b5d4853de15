/* SPDX-License-Identifier: MIT */
/*
 * Creates waiting for a warm sandbox, one queue per pool, oldest first: served as builds
 * finish, failed when builds keep failing, given up at their deadline; a create for an id
 * another one waits for follows that one.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lifecycle.h"
#include "log.h"

/* A create that found no warm sandbox: answered when a build finishes, or at its deadline. */
struct CreateWait {
	Conn *conn;
	json_object *req;     /* the request, one reference held */
	uint64_t deadline_ms; /* monotonic: create_wait_seconds after it came */
	struct CreateWait *next;
	/* Creates for the same id that came meanwhile (linked by next): once this one is
	 * answered they get what a create for an existing id gets ("exists", which the code
	 * plane takes as "there it is"), or this one's error. */
	struct CreateWait *followers;
};

/* The waiting create that asked for this id, if any. */
static CreateWait *waiting_for_id(Manager *m, const char *id)
{
	for (int which = 0; which < m->n_pools; which++)
		for (CreateWait *w = m->waiting[which]; w; w = w->next) {
			const char *want = req_string(w->req, "session_id");

			if (want && strcmp(want, id) == 0)
				return w;
		}
	return NULL;
}

size_t create_waiting_total(const Manager *m)
{
	size_t n = 0;

	for (int which = 0; which < m->n_pools; which++)
		n += m->n_waiting[which];
	return n;
}

size_t create_waiting_of_tenant(const Manager *m, const char *tenant)
{
	size_t n = 0;

	for (int which = 0; which < m->n_pools; which++)
		for (const CreateWait *w = m->waiting[which]; w; w = w->next) {
			const char *t = req_string(w->req, "tenant");

			n += t && strcmp(t, tenant) == 0;
		}
	return n;
}

void create_waiting_of_code(const Manager *m, size_t *n_code, size_t *n_kernel)
{
	for (int which = 0; which < m->n_pools; which++)
		for (const CreateWait *w = m->waiting[which]; w; w = w->next)
			if (req_is_code(w->req)) {
				(*n_code)++;
				*n_kernel += req_bool(w->req, "kernel");
			}
}

static CreateWait *waiting_new(Manager *m, Conn *c, json_object *req)
{
	CreateWait *w = calloc(1, sizeof(*w));

	if (!w) {
		conn_reply(c, create_error(m, req, -ENOMEM), NULL, 0);
		return NULL;
	}
	*w = (CreateWait){ .conn = c,
			   .req = json_object_get(req),
			   .deadline_ms = now_ms() + (uint64_t)m->cfg->create_wait_seconds * 1000 };
	return w;
}

static void on_wait_deadline(Loop *l, void *data);

/* The wait timer, at the earliest deadline of the creates in the queues, if any. */
static void waiting_arm(Manager *m)
{
	uint64_t first = UINT64_MAX, now = now_ms();

	m->wait_timer = loop_remove(m->loop, m->wait_timer);
	for (int which = 0; which < m->n_pools; which++)
		for (const CreateWait *w = m->waiting[which]; w; w = w->next)
			if (w->deadline_ms < first)
				first = w->deadline_ms;
	if (first != UINT64_MAX && loop_add_timer(m->loop, first > now ? first - now : 0,
						  on_wait_deadline, m, &m->wait_timer) < 0)
		log_err("no timer for the creates waiting for a sandbox");
}

void create_wait(Manager *m, Conn *c, json_object *req, int which)
{
	CreateWait *w = waiting_new(m, c, req), **tail;

	if (!w)
		return;
	/* First come, first served. */
	for (tail = &m->waiting[which]; *tail; tail = &(*tail)->next)
		;
	*tail = w;
	m->n_waiting[which]++;
	if (!m->wait_timer)
		waiting_arm(m); /* deadlines come in order: an armed timer is due first */
}

bool create_follow(Manager *m, Conn *c, json_object *req)
{
	const char *want_id = req_string(req, "session_id");
	CreateWait *w, *leader = want_id ? waiting_for_id(m, want_id) : NULL;

	if (!leader)
		return false;
	if ((w = waiting_new(m, c, req))) {
		w->next = leader->followers;
		leader->followers = w;
	}
	return true;
}

/* Take the create *pp points at out of the queue of which. */
static CreateWait *waiting_unlink(Manager *m, int which, CreateWait **pp)
{
	CreateWait *w = *pp;

	*pp = w->next;
	m->n_waiting[which]--;
	return w;
}

static CreateWait *waiting_pop(Manager *m, int which)
{
	return waiting_unlink(m, which, &m->waiting[which]);
}

/* Free w and its followers, unanswered (their workers have gone, or the daemon stops). */
static void waiting_free(CreateWait *w)
{
	while (w->followers) {
		CreateWait *f = w->followers;

		w->followers = f->next;
		waiting_free(f);
	}
	json_object_put(w->req);
	free(w);
}

/* w was answered (r: 0, its session is there; else its error): its followers get theirs,
 * then it goes. */
static void waiting_done(Manager *m, CreateWait *w, int r)
{
	for (CreateWait *f = w->followers; f; f = f->next)
		conn_reply(f->conn,
			   r == 0 ? reply_error("exists", "a session with this id exists") :
				    create_error(m, f->req, r),
			   NULL, 0);
	waiting_free(w);
}

void create_serve_oldest(Manager *m, int which, Session *s)
{
	CreateWait *w = waiting_pop(m, which);

	waiting_done(m, w, create_finish(m, w->conn, w->req, s));
}

/* w, out of its queue, gets the error r, and so do its followers. */
static void waiting_fail(Manager *m, CreateWait *w, int r)
{
	conn_reply(w->conn, create_error(m, w->req, r), NULL, 0);
	waiting_done(m, w, r);
}

void create_fail_unbuilt_waiting(Manager *m, const size_t building[POOLS_MAX], int r)
{
	for (int which = 0; which < m->n_pools; which++) {
		CreateWait **pp = &m->waiting[which];

		/* Builds serve the oldest first: those past the builds under way have none. */
		for (size_t i = 0; *pp && i < building[which]; i++)
			pp = &(*pp)->next;
		while (*pp)
			waiting_fail(m, waiting_unlink(m, which, pp), r);
	}
	waiting_arm(m);
}

void create_wait_move(Manager *m, int from, int to)
{
	CreateWait **tail = &m->waiting[to];

	while (*tail)
		tail = &(*tail)->next;
	/* Behind those already waiting there: their deadlines come first. */
	*tail = m->waiting[from];
	m->n_waiting[to] += m->n_waiting[from];
	m->waiting[from] = NULL;
	m->n_waiting[from] = 0;
	waiting_arm(m);
}

/* Creates that waited create_wait_seconds for a sandbox give up: the host is too busy to
 * build one now, and the caller may try again later (503, Retry-After). */
static void on_wait_deadline(Loop *l, void *data)
{
	Manager *m = data;
	uint64_t now = now_ms();

	(void)l;
	m->wait_timer = NULL;
	for (int which = 0; which < m->n_pools; which++) {
		CreateWait **pp = &m->waiting[which];

		while (*pp) {
			if ((*pp)->deadline_ms > now)
				pp = &(*pp)->next;
			else
				waiting_fail(m, waiting_unlink(m, which, pp), -ETIMEDOUT);
		}
	}
	waiting_arm(m);
}

/* Drop the followers of w whose worker is c. */
static void followers_conn_closed(CreateWait *w, Conn *c)
{
	CreateWait **pp = &w->followers;

	while (*pp) {
		CreateWait *f = *pp;

		if (f->conn == c) {
			*pp = f->next;
			waiting_free(f);
		} else {
			pp = &f->next;
		}
	}
}

void create_conn_closed(Manager *m, Conn *c)
{
	for (int which = 0; which < m->n_pools; which++) {
		CreateWait **pp = &m->waiting[which];

		while (*pp) {
			CreateWait *w = *pp, *heir;

			followers_conn_closed(w, c);
			if (w->conn != c) {
				pp = &w->next;
				continue;
			}
			/* Its build goes on: the sandbox joins the pool, or is let go if the
			 * pool is full (pool.c). A follower takes its place in the queue. */
			heir = w->followers;
			if (heir) {
				w->followers = heir->next;
				heir->followers = w->followers;
				w->followers = NULL;
				heir->next = w->next;
				*pp = heir;
				pp = &heir->next;
			} else {
				waiting_unlink(m, which, pp);
			}
			waiting_free(w);
		}
	}
}

void create_free_all(Manager *m)
{
	m->wait_timer = loop_remove(m->loop, m->wait_timer);
	for (int which = 0; which < m->n_pools; which++)
		while (m->waiting[which])
			waiting_free(waiting_pop(m, which));
}
