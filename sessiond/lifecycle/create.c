/* SPDX-License-Identifier: MIT */
/*
 * CreateSession: admission, then a warm sandbox from the pool, now or when the next
 * one is built. A create never builds a sandbox in the loop: with none ready it waits,
 * the loop serving everyone else, until a build under way (or one started for it)
 * finishes.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "log.h"
#include "session/session.h"
#include "session/tenant.h"

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

/* <node>-<22 chars of base64url>: 128 random bits, URL-safe, routable by prefix. */
static int session_id_new(const char *node, char *out, size_t outlen)
{
	static const char abc[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	uint8_t rnd[22];
	size_t n;

	if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
		return -EIO;
	n = (size_t)snprintf(out, outlen, "%s-", node);
	if (n + sizeof(rnd) + 1 > outlen)
		return -ENAMETOOLONG;
	for (size_t i = 0; i < sizeof(rnd); i++)
		out[n + i] = abc[rnd[i] & 63];
	out[n + sizeof(rnd)] = '\0';
	return 0;
}

static bool req_is_code(json_object *req)
{
	const char *plane = req_string(req, "plane");

	return plane && strcmp(plane, "code") == 0;
}

/* The waiting create that asked for this id, if any. */
static CreateWait *waiting_for_id(Manager *m, const char *id)
{
	for (int which = 0; which < 2; which++)
		for (CreateWait *w = m->waiting[which]; w; w = w->next) {
			const char *want = req_string(w->req, "session_id");

			if (want && strcmp(want, id) == 0)
				return w;
		}
	return NULL;
}

size_t create_waiting_total(const Manager *m)
{
	return m->n_waiting[0] + m->n_waiting[1];
}

size_t create_waiting_of_tenant(const Manager *m, const char *tenant)
{
	size_t n = 0;

	for (int which = 0; which < 2; which++)
		for (const CreateWait *w = m->waiting[which]; w; w = w->next) {
			const char *t = req_string(w->req, "tenant");

			n += t && strcmp(t, tenant) == 0;
		}
	return n;
}

static int64_t clamp_hint(json_object *req, const char *key, int64_t def, int64_t max)
{
	int64_t v;

	if (!req_int(req, key, &v) || v < 1)
		return def;
	return v < max ? v : max;
}

json_object *session_handle(const Session *s)
{
	json_object *o = reply_ok();

	json_object_object_add(o, "session_id", json_object_new_string(s->id));
	json_object_object_add(o, "idle_timeout_seconds", json_object_new_int64(s->idle_timeout));
	json_object_object_add(o, "max_lifetime_seconds", json_object_new_int64(s->max_lifetime));
	json_object_object_add(o, "created_at", json_object_new_double(s->created_at));
	json_object_object_add(o, "last_activity_at", json_object_new_double(s->last_activity_at));
	json_object_object_add(o, "plane",
			       json_object_new_string(s->plane == PLANE_CODE ? "code" : "otari"));
	json_object_object_add(o, "kernel", json_object_new_boolean(s->kernel));
	json_object_object_add(o, "endpoint", json_object_new_boolean(s->endpoint));
	json_object_object_add(o, "execution_count",
			       json_object_new_int64((int64_t)s->execution_count));
	json_object_object_add(o, "running", json_object_new_boolean(s->run != NULL));
	return o;
}

/* The answer to a create whose sandbox could not be had: r as from a build, -ETIMEDOUT
 * when none was ready by its deadline. */
static json_object *create_error(const Manager *m, json_object *req, int r)
{
	json_object *e;

	log_err("REQUEST_ID=%s cannot create a session: %s (last build: %s)",
		req_string(req, "request_id") ?: "-", strerror(-r),
		m->build_error[0] ? m->build_error : "-");
	if (r == -EUSERS)
		e = reply_error("capacity", "no free sandbox user id");
	else if (r == -ETIMEDOUT)
		e = reply_error("unavailable", "no sandbox was ready within %lld s",
				(long long)m->cfg->create_wait_seconds);
	else
		e = reply_error("unavailable", "the sandbox could not be created");
	reply_retry_after(e, m->cfg->retry_after_seconds);
	return e;
}

/* s, just taken from the pool, becomes the session req asked for; c gets the answer.
 * 0 when the session is there, else the error c got. */
static int create_finish(Manager *m, Conn *c, json_object *req, Session *s)
{
	const PaddockConfig *cfg = m->cfg;
	const char *want_id = req_string(req, "session_id");
	const char *tenant = req_string(req, "tenant");
	const char *image = req_string(req, "image");
	bool code = req_is_code(req), kernel = req_bool(req, "kernel");
	int64_t idle_default = cfg->idle_timeout_default;
	SessionRow row;
	int r = 0;

	/* A ready sandbox: only the name and the owner are new. */
	if (want_id)
		snprintf(s->id, sizeof(s->id), "%s", want_id);
	else
		r = session_id_new(cfg->node_name, s->id, sizeof(s->id));
	if (r == 0)
		r = tenant_session_join(s, tenant);
	session_link(s);
	if (r < 0) {
		session_destroy(s, "setup failed");
		conn_reply(c, create_error(m, req, r), NULL, 0);
		return r;
	}
	if (code) {
		idle_default = kernel ? cfg->kernel_idle_timeout : cfg->code_idle_timeout;
		if (idle_default > cfg->idle_timeout_max)
			idle_default = cfg->idle_timeout_max;
	}
	s->plane = code ? PLANE_CODE : PLANE_OTARI;
	s->kernel = kernel;
	s->endpoint = req_bool(req, "endpoint") && cfg->jupyter_endpoint[0];
	s->idle_timeout =
		clamp_hint(req, "idle_timeout_seconds", idle_default, cfg->idle_timeout_max);
	s->max_lifetime =
		clamp_hint(req, "max_lifetime_seconds", cfg->lifetime_default, cfg->lifetime_max);
	s->created_at = s->last_activity_at = now_real();
	m->sessions_created++;
	if (image)
		log_info("SESSION_ID=%s image hint '%.64s' has no runtime profile: ignored", s->id,
			 image);
	row = (SessionRow){ .id = s->id,
			    .tenant = s->tenant,
			    .uid = s->uid,
			    .created_at = s->created_at,
			    .last_activity_at = s->last_activity_at,
			    .idle_timeout = s->idle_timeout,
			    .max_lifetime = s->max_lifetime,
			    .image = (char *)image,
			    .init_pid = s->sb.pid,
			    .init_ctl_fd = s->sb.ctl_fd_in_init,
			    .plane = code ? "code" : "otari",
			    .kernel = kernel,
			    .endpoint = s->endpoint,
			    .rid = s->rid };
	journal_before_insert(m, s->id);
	r = store_session_insert(m->store, &row);
	if (r < 0) {
		log_err("SESSION_ID=%s cannot record the session: %s", s->id, strerror(-r));
		session_destroy(s, "store failed");
		conn_reply(c, reply_error("internal", "the session could not be recorded"), NULL,
			   0);
		return r;
	}
	log_info("SESSION_ID=%s created uid=%u init_pid=%d tenant=%s sandbox=%s", s->id, s->uid,
		 s->sb.pid, s->tenant ?: "-", s->rid);
	pool_schedule(m);
	conn_reply(c, session_handle(s), NULL, 0);
	return 0;
}

/* The limits a create must pass before it may have or wait for a sandbox; replies and
 * returns false when one says no. Waiting creates count as the sessions they will be. */
static bool create_admit(Manager *m, Conn *c, json_object *req)
{
	const PaddockConfig *cfg = m->cfg;
	const char *want_id = req_string(req, "session_id");
	bool kernel = req_bool(req, "kernel");
	json_object *e;

	if (want_id && !session_id_valid(want_id)) {
		conn_reply(c, reply_error("invalid", "session ids are 1 to 128 of A-Z a-z 0-9 _ -"),
			   NULL, 0);
		return false;
	}
	if (want_id && session_index_find(m, want_id)) {
		conn_reply(c, reply_error("exists", "a session with this id exists"), NULL, 0);
		return false;
	}
	if (m->draining) {
		e = reply_error("unavailable", "this node is draining: no new sessions");
		reply_retry_after(e, cfg->retry_after_seconds);
		conn_reply(c, e, NULL, 0);
		return false;
	}
	if (req_is_code(req)) {
		size_t n_code = 0, n_kernel = 0;

		for (Session *o = m->sessions; o; o = o->next)
			if (o->plane == PLANE_CODE) {
				n_code++;
				n_kernel += o->kernel;
			}
		for (int which = 0; which < 2; which++)
			for (CreateWait *w = m->waiting[which]; w; w = w->next)
				if (req_is_code(w->req)) {
					n_code++;
					n_kernel += req_bool(w->req, "kernel");
				}
		/* The code plane's own caps answer 429 with these exact sentences. */
		if (kernel && (int64_t)n_kernel >= cfg->kernel_max_sessions) {
			conn_reply(c,
				   reply_error("limit",
					       "Maximum number of kernel sessions (%lld) reached",
					       (long long)cfg->kernel_max_sessions),
				   NULL, 0);
			return false;
		}
		if ((int64_t)n_code >= cfg->code_max_sessions) {
			conn_reply(c,
				   reply_error("limit", "Maximum number of sessions (%lld) reached",
					       (long long)cfg->code_max_sessions),
				   NULL, 0);
			return false;
		}
	}
	if (!tenant_admit(m, c, req))
		return false;
	if ((int64_t)(m->n_sessions + create_waiting_total(m)) >= cfg->max_sessions) {
		e = reply_error("capacity", "the session limit (%lld) is reached",
				(long long)cfg->max_sessions);
		reply_retry_after(e, cfg->retry_after_seconds);
		conn_reply(c, e, NULL, 0);
		return false;
	}
	/* The index has room for this one before it is promised a sandbox. */
	if (session_index_reserve(m, m->n_sessions + create_waiting_total(m) + 1) < 0) {
		conn_reply(c, create_error(m, req, -ENOMEM), NULL, 0);
		return false;
	}
	return true;
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
	for (int which = 0; which < 2; which++)
		for (const CreateWait *w = m->waiting[which]; w; w = w->next)
			if (w->deadline_ms < first)
				first = w->deadline_ms;
	if (first != UINT64_MAX && loop_add_timer(m->loop, first > now ? first - now : 0,
						  on_wait_deadline, m, &m->wait_timer) < 0)
		log_err("no timer for the creates waiting for a sandbox");
}

void op_create(Manager *m, Conn *c, json_object *req)
{
	const char *want_id = req_string(req, "session_id");
	bool kernel = req_bool(req, "kernel");
	int which = kernel ? POOL_KERNEL : POOL_NATIVE;
	CreateWait *w, *leader = want_id ? waiting_for_id(m, want_id) : NULL, **tail;
	Session *s;

	if (leader) {
		/* Another create for this id waits for its sandbox: answer this one after it. */
		if ((w = waiting_new(m, c, req))) {
			w->next = leader->followers;
			leader->followers = w;
		}
		return;
	}
	if (!create_admit(m, c, req))
		return;
	s = pool_take(m, kernel);
	if (s) {
		create_finish(m, c, req, s);
		return;
	}
	if (!(w = waiting_new(m, c, req)))
		return;
	/* First come, first served. */
	for (tail = &m->waiting[which]; *tail; tail = &(*tail)->next)
		;
	*tail = w;
	m->n_waiting[which]++;
	if (!m->wait_timer)
		waiting_arm(m); /* deadlines come in order: an armed timer is due first */
	pool_schedule(m);	/* starts a build for it at once */
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

void create_serve_waiting(Manager *m, int which)
{
	Session *s;

	while (m->waiting[which] && (s = pool_take(m, which == POOL_KERNEL))) {
		CreateWait *w = waiting_pop(m, which);

		waiting_done(m, w, create_finish(m, w->conn, w->req, s));
	}
}

/* w, out of its queue, gets the error r, and so do its followers. */
static void waiting_fail(Manager *m, CreateWait *w, int r)
{
	conn_reply(w->conn, create_error(m, w->req, r), NULL, 0);
	waiting_done(m, w, r);
}

void create_fail_unbuilt_waiting(Manager *m, const size_t building[2], int r)
{
	for (int which = 0; which < 2; which++) {
		CreateWait **pp = &m->waiting[which];

		/* Builds serve the oldest first: those past the builds under way have none. */
		for (size_t i = 0; *pp && i < building[which]; i++)
			pp = &(*pp)->next;
		while (*pp)
			waiting_fail(m, waiting_unlink(m, which, pp), r);
	}
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
	for (int which = 0; which < 2; which++) {
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
	for (int which = 0; which < 2; which++) {
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
	for (int which = 0; which < 2; which++)
		while (m->waiting[which])
			waiting_free(waiting_pop(m, which));
}
