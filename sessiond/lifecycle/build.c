/* SPDX-License-Identifier: MIT */
/* A sandbox for a session: its uid, its spawn (the child sets itself up off the loop),
 * its workspace's fd and the watch on init's socket. */
#include <sys/epoll.h>

#include "cleanup.h"
#include "exec/exec.h"
#include "lifecycle.h"

/* What s gave up to a build that did not finish: its uid. A spawn that fails removes
 * what its child made, the workspace included (but not a directory it found there). */
static void build_undo(Manager *m, Session *s)
{
	s->ws_fd = safe_close(s->ws_fd);
	s->scan_root_fd = safe_close(s->scan_root_fd);
	uid_release(m, s->uid);
}

/* The limits of a sandbox of s's runtime: its profile's, else the global settings. */
static SandboxLimits build_limits(const Manager *m, const Session *s, bool background)
{
	const PaddockConfig *c = m->cfg;
	SandboxLimits lim = {
		.memory_bytes = c->memory_max_bytes,
		.pids = c->pids_max,
		.cpu_percent = c->cpu_quota_percent,
		.workspace_bytes = c->workspace_bytes,
		.tmp_bytes = c->tmp_bytes,
		.nofile = c->nofile_max,
		.cpu_background = background,
		.egress = c->egress,
		.runtime = s->runtime,
	};

	if (s->runtime >= 1 && s->runtime <= c->n_runtimes) {
		const RuntimeProfile *p = &c->runtimes[s->runtime - 1];

		lim.memory_bytes = p->memory_max_bytes;
		lim.pids = p->pids_max;
		lim.cpu_percent = p->cpu_quota_percent;
		lim.egress = p->egress;
	}
	return lim;
}

/* Give s (id and rid set, its runtime chosen) a uid and a sandbox whose child is setting
 * itself up, workspace included (p); build_finish() completes it. On failure s holds
 * nothing new. */
int build_start(Manager *m, Session *s, SandboxPending *p, bool background)
{
	SandboxLimits lim = build_limits(m, s, background);
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

/* Each time p's sync fd is readable (so this does not wait): -EAGAIN while the child is
 * setting up (the spawner's answer was taken); once it is init, s gets its running
 * sandbox. On failure s holds nothing but what it came with. */
int build_finish(Manager *m, Session *s, SandboxPending *p)
{
	int r = sandbox_spawn_finish(m->env, p, false, &s->sb);

	if (r == -EAGAIN)
		return r;

	if (r == 0) {
		/* The child made the workspace; file calls go through this fd. */
		s->ws_fd = workspace_open(m->env, s->rid);
		r = s->ws_fd;
		if (r >= 0)
			r = loop_add_fd(m->loop, s->sb.ctl_fd, EPOLLIN, init_on_event, s,
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
		build_undo(m, s);
	return r;
}

void build_abort(Manager *m, Session *s, SandboxPending *p)
{
	sandbox_spawn_abort(m->env, p);
	build_undo(m, s);
}
