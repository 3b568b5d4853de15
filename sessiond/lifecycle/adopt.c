/* SPDX-License-Identifier: MIT */
/* Re-adoption: after a restart, take back the sandboxes an earlier daemon left running. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cleanup.h"
#include "clone.h"
#include "exec/exec.h"
#include "lifecycle.h"
#include "runtimes.h"
#include "log.h"
#include "session/tenant.h"
#include "workspace/editor.h"

/* Whether pid is still that session's init: its cgroup path names the session. */
static bool init_is_session(pid_t pid, const char *id)
{
	char path[64], buf[4096];
	_cleanup_close_ int fd = -1;
	ssize_t n;
	size_t idlen = strlen(id);

	snprintf(path, sizeof(path), "/proc/%d/cgroup", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	/* Match "/<id>" ending a path component, so one id cannot match a longer one. */
	for (char *p = strstr(buf, id); p; p = strstr(p + 1, id))
		if (p > buf && p[-1] == '/' && (p[idlen] == '\n' || p[idlen] == '/' || !p[idlen]))
			return true;
	return false;
}

static const char *row_rid(const SessionRow *row)
{
	return row->rid ? row->rid : row->id;
}

void adopt_remains_kill(Manager *m, const SessionRow *row)
{
	int pidfd = (int)syscall(SYS_pidfd_open, row->init_pid, 0);

	if (pidfd < 0)
		return;
	if (!init_is_session(row->init_pid, row_rid(row))) {
		close(pidfd);
		return;
	}
	pidfd_kill(pidfd);
	/* Its uid was never marked in this run: release nothing. */
	zombie_add(m, row_rid(row), (uid_t)-1, pidfd);
}

/* The runtime it was built on, by name: the same profile if it is still configured, else
 * retired (it runs on as it was built; new sessions cannot have it). */
static void adopt_runtime(Session *s, const char *name)
{
	size_t i = runtime_find(s->m->cfg, name);

	snprintf(s->runtime_name, sizeof(s->runtime_name), "%s", name ?: RUNTIME_DEFAULT);
	s->runtime = name && !i ? RUNTIME_RETIRED : i;
	if (s->runtime == RUNTIME_RETIRED)
		log_info("SESSION_ID=%s runs on runtime profile '%s', no longer configured: it "
			 "keeps its sandbox until it ends",
			 s->id, s->runtime_name);
}

int adopt_session(Manager *m, const SessionRow *row)
{
	_cleanup_close_ int pidfd = -1, ctl = -1, ws = -1;
	struct init_msg resend = { .op = INIT_RESEND }, ping = { .op = INIT_PING };
	Session *s;
	int r;

	pidfd = (int)syscall(SYS_pidfd_open, row->init_pid, 0);
	if (pidfd < 0)
		return -errno;
	if (!init_is_session(row->init_pid, row_rid(row)))
		return -ESRCH;
	/* init keeps a copy of our end of its socket for exactly this. */
	ctl = (int)syscall(SYS_pidfd_getfd, pidfd, row->init_ctl_fd, 0);
	if (ctl < 0)
		return -errno;
	ws = workspace_open(m->env, row_rid(row));
	if (ws < 0)
		return ws;
	if (session_index_reserve(m, m->n_sessions + 1) < 0)
		return -ENOMEM;
	if (!uid_mark(m, row->uid))
		return -EEXIST;
	s = session_alloc(m);
	if (!s || !(s->undo = editor_undo_new())) {
		uid_release(m, row->uid);
		free(s);
		return -ENOMEM;
	}
	snprintf(s->id, sizeof(s->id), "%s", row->id);
	snprintf(s->rid, sizeof(s->rid), "%s", row_rid(row));
	s->uid = row->uid;
	/* The daemon before may have handed it out while it started, at the least weight. */
	s->cpu_background = true;
	s->created_at = row->created_at;
	s->last_activity_at = row->last_activity_at;
	s->idle_timeout = row->idle_timeout;
	s->max_lifetime = row->max_lifetime;
	s->plane = row->plane && !strcmp(row->plane, "code") ? PLANE_CODE : PLANE_OTARI;
	s->kernel = row->kernel;
	adopt_runtime(s, row->runtime);
	if (row->tools)
		tools_restore(s, row->tools);
	/* An endpoint bridge died with the old daemon: the next call starts a new kernel. */
	s->endpoint = row->endpoint;
	s->execution_count = (uint64_t)row->execution_count;
	/* It counts for its tenant's cap again (its weight comes with its next call). */
	r = tenant_session_join(s, row->tenant);
	if (r < 0) {
		uid_release(m, row->uid);
		session_free(s);
		return r;
	}
	s->sb = (Sandbox){ .pid = row->init_pid,
			   .pidfd = TAKE_FD(pidfd),
			   .ctl_fd = TAKE_FD(ctl),
			   .ctl_fd_in_init = row->init_ctl_fd };
	s->ws_fd = TAKE_FD(ws);
	s->adopting = true;
	session_link(s);
	r = loop_add_fd(m->loop, s->sb.ctl_fd, EPOLLIN, init_on_event, s, &s->ctl_src);
	/* init answers RESEND with one SPAWNED per live interpreter, then PING's PONG. */
	if (r == 0)
		r = init_send(s, &resend, NULL, 0);
	if (r == 0)
		r = init_send(s, &ping, NULL, 0);
	if (r < 0) {
		session_destroy(s, "re-adoption failed");
		return 0; /* handed to teardown: nothing more for the caller to clean */
	}
	return 0;
}
