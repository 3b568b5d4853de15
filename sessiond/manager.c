/* SPDX-License-Identifier: MIT */
/* The session manager: request dispatch, session lifetime, reclaim, teardown. */
#include "manager.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "clone.h"
#include "log.h"
#include "session/session.h"
#include "session/tenant.h"
#include "workspace/wsfs.h"

#define ZOMBIE_RETRY_MS 20
#define ZOMBIE_MAX_TRIES 500
#define EXEC_LOG_KEEP 100000

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

static int uid_take(Manager *m, uid_t *uid)
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

/* ---- teardown ---- */

void zombie_free(Zombie *z)
{
	Manager *m = z->m;

	loop_remove(m->loop, z->src);
	if (z->pidfd >= 0)
		close(z->pidfd);
	uid_release(m, z->uid);
	if (z->prev)
		z->prev->next = z->next;
	else
		m->zombies = z->next;
	if (z->next)
		z->next->prev = z->prev;
	free(z);
}

/*
 * The cleanup proper, in a child: removing cgroups and unmounting wait on kernel locks
 * that every sandbox build and teardown takes, and the loop should not wait with them.
 * The child shares the daemon's fd table (CLONE_FILES) and opens nothing, so it holds no
 * copy of a socket whose peer waits to see the daemon close it; and it dies with the
 * daemon, so that the shared table (the state dir's lock, the listening socket, the
 * workers' connections) does not outlive a crash. The next start cleans what it left.
 */
static _Noreturn void zombie_cleanup_in_child(const Zombie *z, pid_t daemon)
{
	int r;

	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != daemon)
		_exit(1);
	r = sandbox_cgroup_remove_wait(z->m->env, z->id, ZOMBIE_MAX_TRIES, ZOMBIE_RETRY_MS);

	if (r < 0)
		log_warn("SESSION_ID=%s cgroup not removed: %s (cleaned at next start)", z->id,
			 strerror(-r));
	r = workspace_destroy(z->m->env, z->id);
	if (r < 0)
		log_warn("SESSION_ID=%s workspace not removed: %s", z->id, strerror(-r));
	_exit(r < 0);
}

static void on_cleanup_done(Loop *l, int fd, uint32_t events, void *data)
{
	Zombie *z = data;

	(void)l;
	(void)fd;
	(void)events;
	log_debug("SESSION_ID=%s sandbox gone", z->id);
	zombie_free(z); /* the uid is free again once nothing is left that ran as it */
}

/* init is gone: a child removes the cgroup (retrying while tasks drain), then the
 * workspace; the zombie lasts until that child exits. */
static void zombie_reap(Loop *l, Zombie *z)
{
	pid_t pid, daemon = getpid();

	z->src = loop_remove(l, z->src);
	z->pidfd = safe_close(z->pidfd);
	pid = clone_pidfd(CLONE_FILES, &z->pidfd);
	if (pid == 0)
		zombie_cleanup_in_child(z, daemon);
	if (pid > 0 && loop_add_fd(l, z->pidfd, EPOLLIN, on_cleanup_done, z, &z->src) == 0)
		return;
	if (pid < 0) {
		/* No child: one attempt here; what is left is cleaned at the next start. */
		log_warn("SESSION_ID=%s cleanup child: %s", z->id, strerror(errno));
		sandbox_cgroup_remove(z->m->env, z->id);
		workspace_destroy(z->m->env, z->id);
	}
	/* With no watch on it, the child finishes on its own. */
	zombie_free(z);
}

void on_zombie_exit(Loop *l, int fd, uint32_t events, void *data)
{
	(void)fd;
	(void)events;
	zombie_reap(l, data);
}

static void session_unlink(Session *s)
{
	Manager *m = s->m;

	if (s->pooled) {
		pool_unlink(s);
		return;
	}
	if (s->prev)
		s->prev->next = s->next;
	else
		m->sessions = s->next;
	if (s->next)
		s->next->prev = s->prev;
	m->n_sessions--;
	session_index_remove(m, s);
}

/* Forget a session without touching its sandbox or its row: for a restart. */
static void session_release(Session *s)
{
	Manager *m = s->m;

	if (s->run) {
		/* The worker sees its connection close: the call failed, as far as it knows. */
		s->run->conn = NULL;
		run_abort(s, "daemon stopping");
	}
	scans_cancel(s);
	for (int k = 0; k < INTERP_KIND_COUNT; k++)
		interp_destroy(&s->interps[k]);
	loop_remove(m->loop, s->ctl_src);
	safe_close(s->sb.pidfd);
	safe_close(s->sb.ctl_fd);
	safe_close(s->ws_fd);
	sandbox_counters_free(s->counters);
	wsfs_changes_free(s->reported, s->n_reported);
	session_unlink(s);
	editor_undo_free(s->undo);
	free(s->tenant);
	free(s);
}

/* The metrics' reasons a session ends for: released, idle, lifetime, anything else. */
static int end_reason_index(const char *why)
{
	static const char *const reasons[] = { "released", "idle", "lifetime" };

	for (int i = 0; i < (int)ARRAY_SIZE(reasons); i++)
		if (strcmp(why, reasons[i]) == 0)
			return i;
	return 3;
}

/* Kill the sandbox and hand its remains to a zombie that waits for init to exit. */
void session_destroy(Session *s, const char *why)
{
	Manager *m = s->m;
	Zombie *z;

	log_info("SESSION_ID=%s destroyed KILL_REASON=%s", s->id, why);
	m->kills_by_reason[end_reason_index(why)]++;
	run_abort(s, why);
	scans_cancel(s);
	for (int k = 0; k < INTERP_KIND_COUNT; k++)
		interp_destroy(&s->interps[k]);
	loop_remove(m->loop, s->ctl_src);
	if (s->sb.pidfd >= 0)
		syscall(SYS_pidfd_send_signal, s->sb.pidfd, SIGKILL, NULL, 0);
	if (s->sb.ctl_fd >= 0)
		close(s->sb.ctl_fd);
	if (s->ws_fd >= 0)
		close(s->ws_fd);
	s->counters = sandbox_counters_free(s->counters);
	wsfs_changes_free(s->reported, s->n_reported);
	if (!s->pooled)
		journal_note_delete(m, s->id);
	session_unlink(s);
	tenant_session_leave(s);

	z = calloc(1, sizeof(*z));
	if (z) {
		*z = (Zombie){ .m = m, .uid = s->uid, .pidfd = s->sb.pidfd };
		memcpy(z->id, s->rid, sizeof(z->id));
		z->next = m->zombies;
		if (m->zombies)
			m->zombies->prev = z;
		m->zombies = z;
		if (z->pidfd < 0 ||
		    loop_add_fd(m->loop, z->pidfd, EPOLLIN, on_zombie_exit, z, &z->src) < 0)
			zombie_reap(m->loop, z);
	} else {
		/* Out of memory: leave the remains to the cleanup at next start. */
		if (s->sb.pidfd >= 0)
			close(s->sb.pidfd);
	}
	editor_undo_free(s->undo);
	free(s->tenant);
	free(s);
}

/* ---- building sessions ---- */

Session *session_alloc(Manager *m)
{
	Session *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->m = m;
	s->sb = (Sandbox){ .pidfd = -1, .ctl_fd = -1 };
	s->ws_fd = -1;
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
	s->prev = NULL;
	s->next = m->sessions;
	if (m->sessions)
		m->sessions->prev = s;
	m->sessions = s;
	m->n_sessions++;
}

/* What s gave up to a build that did not finish: its uid. A spawn that fails removes
 * what its child made, the workspace included (but not a directory it found there). */
static void session_build_undo(Manager *m, Session *s)
{
	s->ws_fd = safe_close(s->ws_fd);
	uid_release(m, s->uid);
}

/* Give s (id and rid set) a uid and a sandbox whose child is setting itself up, workspace
 * included (p); session_build_finish() completes it. On failure s holds nothing new. */
int session_build_start(Manager *m, Session *s, SandboxPending *p, bool background)
{
	SandboxLimits lim = {
		.memory_bytes = m->cfg->memory_max_bytes,
		.pids = m->cfg->pids_max,
		.cpu_percent = m->cfg->cpu_quota_percent,
		.workspace_bytes = m->cfg->workspace_bytes,
		.tmp_bytes = m->cfg->tmp_bytes,
		.nofile = m->cfg->nofile_max,
		.cpu_background = background,
	};
	int r;

	r = uid_take(m, &s->uid);
	if (r < 0)
		return r;
	r = sandbox_spawn_start(m->env, s->rid, s->uid, s->uid, &lim, p);
	if (r < 0)
		uid_release(m, s->uid);
	else
		s->cpu_background = background;
	return r;
}

/* Once p's child is init (its sync fd is readable, so this does not wait): s gets its
 * running sandbox. On failure s holds nothing but what it came with. */
int session_build_finish(Manager *m, Session *s, SandboxPending *p)
{
	int r = sandbox_spawn_finish(m->env, p, true, &s->sb);

	if (r == 0) {
		/* The child made the workspace; file calls go through this fd. */
		s->ws_fd = workspace_open(m->env, s->rid);
		r = s->ws_fd;
		if (r >= 0)
			r = loop_add_fd(m->loop, s->sb.ctl_fd, EPOLLIN, session_on_init_event, s,
					&s->ctl_src);
		if (r < 0) {
			sandbox_kill(&s->sb);
			s->sb = (Sandbox){ .pidfd = -1, .ctl_fd = -1 };
			/* The cgroup empties as init dies; the next start removes a straggler. */
			sandbox_cgroup_remove_wait(m->env, s->rid, 50, 1);
			workspace_destroy(m->env, s->rid);
		}
	}
	if (r < 0)
		session_build_undo(m, s);
	return r;
}

void session_build_abort(Manager *m, Session *s, SandboxPending *p)
{
	sandbox_spawn_abort(m->env, p);
	session_build_undo(m, s);
}

/* ---- dispatch ---- */

static enum interp_kind tool_kind(const char *tool, bool *ok)
{
	*ok = true;
	if (tool && strcmp(tool, "python") == 0)
		return INTERP_PYTHON;
	if (tool && strcmp(tool, "bash") == 0)
		return INTERP_BASH;
	if (tool && strcmp(tool, "node") == 0)
		return INTERP_NODE;
	*ok = false;
	return INTERP_PYTHON;
}

static void op_exec(Manager *m, Conn *c, Session *s, json_object *req)
{
	const char *code = req_string(req, "code");
	const char *mode = req_string(req, "mode");
	int64_t timeout_ms = m->cfg->exec_timeout_default * 1000;
	bool ok;
	enum interp_kind kind = tool_kind(req_string(req, "tool"), &ok);

	if (!ok) {
		conn_reply(c, reply_error("bad_request", "unknown tool"), NULL, 0);
		return;
	}
	if (!code) {
		conn_reply(c, reply_error("invalid", "code must be a string"), NULL, 0);
		return;
	}
	if ((int64_t)strlen(code) > m->cfg->code_max_bytes) {
		conn_reply(c,
			   reply_error("invalid", "code is longer than %lld bytes",
				       (long long)m->cfg->code_max_bytes),
			   NULL, 0);
		return;
	}
	if (req_int(req, "timeout_ms", &timeout_ms) &&
	    (timeout_ms < 1 || timeout_ms > m->cfg->exec_timeout_max * 1000)) {
		conn_reply(c,
			   reply_error("invalid", "timeout must be between 1 and %lld seconds",
				       (long long)m->cfg->exec_timeout_max),
			   NULL, 0);
		return;
	}
	if (s->run) {
		conn_reply(c, reply_error("busy", "the session is running another call"), NULL, 0);
		return;
	}
	/* A kernel-tier session serves Python through the IPython harness, an endpoint one
	 * through the bridge to the operator's Jupyter Server. */
	if (kind == INTERP_PYTHON && s->endpoint)
		kind = INTERP_ENDPOINT;
	else if (kind == INTERP_PYTHON && s->kernel)
		kind = INTERP_KERNEL;
	run_start(s, c, kind, code, req_string(req, "cwd"), mode && strcmp(mode, "cell") == 0,
		  (uint64_t)timeout_ms);
}

static void op_destroy(Manager *m, Conn *c, json_object *req, const char *tenant)
{
	Session *s = session_find(m, req_string(req, "session_id"), tenant);
	json_object *o = reply_ok();

	json_object_object_add(o, "existed", json_object_new_boolean(s != NULL));
	if (s)
		session_destroy(s, "released");
	conn_reply(c, o, NULL, 0);
}

/* Ops that address one session: find it or answer not_found. */
static Session *need_session(Manager *m, Conn *c, json_object *req, const char *tenant)
{
	Session *s = session_find(m, req_string(req, "session_id"), tenant);

	if (!s)
		conn_reply(c, reply_error("not_found", "unknown session"), NULL, 0);
	return s;
}

void manager_handle_request(void *data, Conn *c, json_object *req)
{
	Manager *m = data;
	const char *op = req_string(req, "op");
	const char *tenant = req_string(req, "tenant");
	Session *s;

	if (!op) {
		conn_reply(c, reply_error("invalid", "op is missing"), NULL, 0);
	} else if (strcmp(op, "create") == 0) {
		op_create(m, c, req);
	} else if (strcmp(op, "destroy") == 0) {
		op_destroy(m, c, req, tenant);
	} else if (strcmp(op, "stats") == 0) {
		op_stats(m, c);
	} else if (strcmp(op, "metrics") == 0) {
		op_metrics(m, c);
	} else if (strcmp(op, "sessions") == 0) {
		op_sessions(m, c, req, tenant);
	} else if (strcmp(op, "session_info") == 0) {
		if ((s = need_session(m, c, req, tenant)))
			conn_reply(c, session_handle(s), NULL, 0);
	} else if (strcmp(op, "kill") == 0 || strcmp(op, "drain") == 0 ||
		   strcmp(op, "admin_sessions") == 0) {
		op_admin(m, c, op, req);
	} else if (strcmp(op, "put_commit") == 0) {
		op_put_commit(m, c, req);
	} else if (strcmp(op, "put_abort") == 0) {
		op_put_abort(m, c);
	} else if (strcmp(op, "exec") == 0) {
		if ((s = need_session(m, c, req, tenant)))
			op_exec(m, c, s, req);
	} else if (strcmp(op, "edit") == 0) {
		if ((s = need_session(m, c, req, tenant)))
			op_edit(m, c, s, req);
	} else if (strcmp(op, "list") == 0) {
		if ((s = need_session(m, c, req, tenant)))
			op_list(m, c, s, req);
	} else if (strcmp(op, "get") == 0) {
		if ((s = need_session(m, c, req, tenant)))
			op_get(m, c, s, req);
	} else if (strcmp(op, "put") == 0) {
		if ((s = need_session(m, c, req, tenant)))
			op_put(m, c, s, req);
	} else {
		conn_reply(c, reply_error("bad_request", "unknown op"), NULL, 0);
	}
	json_object_put(req);
}

void manager_conn_closed(void *data, Conn *c)
{
	Manager *m = data;

	run_conn_closed(m, c);
	upload_drop(m, c);
	create_conn_closed(m, c);
	scans_conn_closed(m, c);
}

/* ---- reclaim ---- */

static void on_reclaim(Loop *l, void *data)
{
	Manager *m = data;
	double now = now_real();
	Session *next;

	m->reclaim = NULL;
	for (Session *s = m->sessions; s; s = next) {
		next = s->next;
		if (now - s->created_at >= (double)s->max_lifetime)
			session_destroy(s, "lifetime");
		else if (!s->run && now - s->last_activity_at >= (double)s->idle_timeout)
			session_destroy(s, "idle");
	}
	store_exec_prune(m->store, EXEC_LOG_KEEP);
	loop_add_timer(l, (uint64_t)m->cfg->reclaim_interval_ms, on_reclaim, m, &m->reclaim);
}

/* ---- start and stop ---- */

/* Wait for every zombie synchronously: only at shutdown, when blocking is fine. */
void zombies_drain(Manager *m)
{
	while (m->zombies) {
		Zombie *z = m->zombies;

		if (z->pidfd >= 0) {
			struct pollfd p = { .fd = z->pidfd, .events = POLLIN };

			poll(&p, 1, 5000);
			close(z->pidfd);
			z->pidfd = -1;
		}
		z->src = loop_remove(m->loop, z->src);
		sandbox_cgroup_remove_wait(m->env, z->id, ZOMBIE_MAX_TRIES, ZOMBIE_RETRY_MS);
		workspace_destroy(m->env, z->id);
		zombie_free(z);
	}
}

/* Re-adopt the sandboxes an earlier run of the daemon left alive; clean the rest. */
static void adopt_or_clean(Manager *m)
{
	SessionRow *rows = NULL;
	size_t n = 0;
	char **ids = NULL;
	size_t nids = 0;

	if (store_sessions_load(m->store, &rows, &n) == 0) {
		for (size_t i = 0; i < n; i++) {
			int r = session_adopt(m, &rows[i]);

			if (r == 0) {
				log_info("SESSION_ID=%s re-adopted (init pid %d)", rows[i].id,
					 rows[i].init_pid);
				continue;
			}
			log_info("SESSION_ID=%s left by an earlier run cannot be re-adopted (%s): "
				 "cleaned",
				 rows[i].id, strerror(-r));
			session_remains_kill(m, &rows[i]);
			store_session_delete(m->store, rows[i].id);
		}
		session_rows_free(rows, n);
	}
	zombies_drain(m);
	if (sandbox_list_leftovers(m->env, &ids, &nids) == 0) {
		for (size_t i = 0; i < nids; i++) {
			bool live = false;

			for (Session *s = m->sessions; s && !live; s = s->next)
				live = strcmp(s->rid, ids[i]) == 0;
			if (!live) {
				/* A warm sandbox of the dead daemon, or a crash's remains: its
				 * processes go first, so the cgroup can be removed. */
				sandbox_cgroup_kill(m->env, ids[i], NULL, 0);
				sandbox_cgroup_remove_wait(m->env, ids[i], ZOMBIE_MAX_TRIES,
							   ZOMBIE_RETRY_MS);
				workspace_destroy(m->env, ids[i]);
				log_info("SESSION_ID=%s orphaned sandbox remains removed", ids[i]);
			}
			free(ids[i]);
		}
		free(ids);
	}
}

/* The command line init runs for each interpreter kind, inside the sandbox. */
static int interp_argv_init(Manager *m)
{
	const PaddockConfig *cfg = m->cfg;
	char endpoint_harness[4096]; /* on the host, where the host keeps lib_dir */
	const char *const table[INTERP_KIND_COUNT][6] = {
		/* -S: the harness sets up sys.path itself, without the host's .pth files. */
		[INTERP_PYTHON] = { cfg->python_bin, "-I", "-S", "-u", "/opt/paddock/harness.py" },
		[INTERP_BASH] = { cfg->bash_bin, "--noprofile", "--norc",
				  "/opt/paddock/harness.bash" },
		[INTERP_NODE] = { cfg->node_bin, "/opt/paddock/harness.js" },
		[INTERP_KERNEL] = { cfg->python_bin, "-I", "-u", "/opt/paddock/harness_kernel.py" },
		[INTERP_ENDPOINT] = { cfg->python_bin, "-I", "-u", endpoint_harness },
	};

	snprintf(endpoint_harness, sizeof(endpoint_harness), "%s/harness_endpoint.py",
		 cfg->lib_dir);
	for (int k = 0; k < INTERP_KIND_COUNT; k++)
		for (int i = 0; table[k][i]; i++)
			if (!(m->argv[k][i] = strdup(table[k][i])))
				return -ENOMEM;
	return 0;
}

/* One daemon per state dir: a second one would reclaim the first one's sandboxes. */
static int state_lock(const char *state_dir, int wait_ms)
{
	struct timespec pause = { 0, 100 * 1000000L };
	char path[4096];
	int fd;

	snprintf(path, sizeof(path), "%s/sessiond.lock", state_dir);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		int r = -errno;

		log_err("cannot open %s: %s", path, strerror(-r));
		return r;
	}
	for (int waited = 0; flock(fd, LOCK_EX | LOCK_NB) < 0; waited += 100) {
		int r = errno == EWOULDBLOCK ? -EBUSY : -errno;

		if (r != -EBUSY || waited >= wait_ms) {
			if (r == -EBUSY)
				log_err("another paddock-sessiond is running on %s", state_dir);
			else
				log_err("cannot lock %s: %s", path, strerror(-r));
			close(fd);
			return r;
		}
		nanosleep(&pause, NULL);
	}
	return fd;
}

int manager_new(const PaddockConfig *cfg, Loop *loop, int lock_wait_ms, Manager **ret)
{
	Manager *m = calloc(1, sizeof(*m));
	char path[4096];
	int r;

	if (!m)
		return -ENOMEM;
	m->cfg = cfg;
	m->lock_fd = -1;
	m->ckpt_pidfd = -1;
	m->loop = loop;
	m->uids = calloc((size_t)cfg->uid_count, 1);
	if (!m->uids || interp_argv_init(m) < 0) {
		r = -ENOMEM;
		goto fail;
	}
	if (mkdir(cfg->state_dir, 0711) < 0 && errno != EEXIST) {
		r = -errno;
		log_err("cannot create state_dir %s: %m", cfg->state_dir);
		goto fail;
	}
	m->lock_fd = state_lock(cfg->state_dir, lock_wait_ms);
	if (m->lock_fd < 0) {
		r = m->lock_fd;
		goto fail;
	}
	snprintf(path, sizeof(path), "%s/paddock.db", cfg->state_dir);
	r = store_open(path, &m->store);
	if (r < 0) {
		log_err("cannot open the store %s: %s", path, strerror(-r));
		goto fail;
	}
	m->db_path = strdup(path);
	if (!m->db_path) {
		r = -ENOMEM;
		goto fail;
	}
	store_on_wal(m->store, checkpoint_on_wal, m);
	r = journal_new(m);
	if (r < 0)
		goto fail;
	if (cfg->cgroup_favor_dynmods)
		(void)sandbox_cgroup_favor_dynmods();
	r = sandbox_env_new(cfg, &m->env);
	if (r < 0) {
		log_err("cannot prepare sandboxes: %s (%s)", strerror(-r), sandbox_last_error());
		goto fail;
	}
	sandbox_env_keep_in_child(m->env, m->lock_fd);
	m->pool_warm_max = pool_warm_max(cfg);
	log_info("cgroup %s; sessions up to %lld; %zu pool sandboxes warming at once",
		 sandbox_env_cgroup_version(m->env), (long long)cfg->max_sessions,
		 m->pool_warm_max);
	adopt_or_clean(m);
	r = loop_add_timer(loop, (uint64_t)cfg->reclaim_interval_ms, on_reclaim, m, &m->reclaim);
	if (r < 0)
		goto fail;
	pool_schedule(m);
	*ret = m;
	return 0;
fail:
	manager_free(m);
	return r;
}

Manager *manager_free(Manager *m)
{
	if (!m)
		return NULL;
	/* What is waiting to be written goes in before anything is torn down. */
	journal_flush(m);
	if (m->cfg->keep_sessions_on_exit) {
		/* The next daemon re-adopts them: let go without killing anything. */
		while (m->sessions)
			session_release(m->sessions);
	}
	while (m->sessions)
		session_destroy(m->sessions, "shutdown");
	create_free_all(m);
	pool_free_all(m);
	zombies_drain(m);
	session_index_free(m);
	m->tenants = tenant_table_free(m->tenants);
	/* A clean stop leaves no cgroup behind. Sessions kept for the next daemon keep the
	 * parent busy, and then it stays; with none kept it goes too. */
	if (m->env)
		sandbox_env_remove_cgroup_parent(m->env);
	loop_remove(m->loop, m->reclaim);
	for (int k = 0; k < INTERP_KIND_COUNT; k++)
		for (int i = 0; i < 8; i++)
			free(m->argv[k][i]);
	sandbox_env_free(m->env);
	journal_free(m);
	checkpoint_free(m);
	store_close(m->store);
	free(m->db_path);
	free(m->uids);
	if (m->lock_fd >= 0)
		close(m->lock_fd);
	free(m);
	return NULL;
}
