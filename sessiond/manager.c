/* SPDX-License-Identifier: MIT */
/* The daemon's one context: construction (the state dir's lock, the store, the sandbox
 * environment, re-adoption), the wiring of the rooms' events, reclaim, and teardown. */
#include "manager.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "exec/exec.h"
#include "httpc/httpc.h"
#include "lifecycle/lifecycle.h"
#include "log.h"
#include "sandbox_layout.h"
#include "session/session.h"
#include "session/tenant.h"

#define EXEC_LOG_KEEP 100000

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

/* Re-adopt the sandboxes an earlier run of the daemon left alive; clean the rest. */
static void adopt_or_clean(Manager *m)
{
	SessionRow *rows = NULL;
	size_t n = 0;
	char **ids = NULL;
	size_t nids = 0;

	if (store_sessions_load(m->store, &rows, &n) == 0) {
		for (size_t i = 0; i < n; i++) {
			int r = adopt_session(m, &rows[i]);

			if (r == 0) {
				log_info("SESSION_ID=%s re-adopted (init pid %d)", rows[i].id,
					 rows[i].init_pid);
				continue;
			}
			log_info("SESSION_ID=%s left by an earlier run cannot be re-adopted (%s): "
				 "cleaned",
				 rows[i].id, strerror(-r));
			adopt_remains_kill(m, &rows[i]);
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
				zombie_remains_remove(m, ids[i]);
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
		[INTERP_PYTHON] = { cfg->python_bin, "-I", "-S", "-u",
				    SANDBOX_LIB_DIR "/harness.py" },
		[INTERP_BASH] = { cfg->bash_bin, "--noprofile", "--norc",
				  SANDBOX_LIB_DIR "/harness.bash" },
		[INTERP_NODE] = { cfg->node_bin, SANDBOX_LIB_DIR "/harness.js" },
		[INTERP_KERNEL] = { cfg->python_bin, "-I", "-u",
				    SANDBOX_LIB_DIR "/harness_kernel.py" },
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

/* What the rooms below a concern tell it (session/session.h): wired here, where every room
 * is known, so that none of them names a room above its own. */
static const SessionEvents session_events = {
	.interp_replied = interp_replied,
	.interp_exited = interp_exited,
	.interp_settled = pool_interp_settled,
	.sandbox_lost = session_destroy,
	.template_ready = pool_template_ready,
};

int manager_new(const PaddockConfig *cfg, Loop *loop, int lock_wait_ms, Manager **ret)
{
	Manager *m = calloc(1, sizeof(*m));
	char path[4096];
	int r;

	if (!m)
		return -ENOMEM;
	m->cfg = cfg;
	m->events = &session_events;
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
	if (!cfg->end_sessions && sandbox_env_workspace_problem(m->env))
		log_err("no workspace can be made: %s; sessions are served and cleaned, new "
			"ones refused until there is room",
			sandbox_env_workspace_problem(m->env));
	m->pool_warm_max = pool_warm_max(cfg);
	m->n_pools = (int)(cfg->n_runtimes + 1) * POOL_KINDS;
	log_info("cgroup %s; workspaces on %s; sessions up to %lld; %zu pool sandboxes warming "
		 "at once; %zu runtime profiles",
		 sandbox_env_cgroup_version(m->env), sandbox_env_workspace_backend(m->env),
		 (long long)cfg->max_sessions, m->pool_warm_max, cfg->n_runtimes);
	for (size_t i = 0; i < cfg->n_runtimes; i++)
		if (!sandbox_env_runtime_problem(m->env, i + 1))
			log_info("runtime profile '%s' on %s, %lld warm", cfg->runtimes[i].name,
				 cfg->runtimes[i].root, (long long)cfg->runtimes[i].pool_size);
	r = httpc_new(loop, &m->httpc);
	if (r < 0)
		goto fail;
	template_start(m);
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

void manager_child_exited(Manager *m, pid_t pid)
{
	interp_child_exited(m, pid);
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
	template_free(m);
	m->httpc = httpc_free(m->httpc);
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
