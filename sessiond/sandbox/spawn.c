/* SPDX-License-Identifier: MIT */
/* Starting a sandbox, the daemon's side: its sockets, the clone asked of the spawner, its
 * network, and the wait for its exec of paddock-init. */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "clone.h"
#include "init/init_proto.h"
#include "sandbox_internal.h"

/* How long the whole setup in the child may take before we give up on it. */
#define SPAWN_TIMEOUT_MS 10000
/* How long a build given up waits for the spawner's answer, which takes a clone's time. */
#define SPAWNER_ANSWER_MS 1000

static bool limits_valid(const SandboxEnv *env, const SandboxLimits *l)
{
	return l && l->memory_bytes > 0 && l->pids > 0 && l->cpu_percent > 0 &&
	       l->workspace_bytes > 0 && l->tmp_bytes > 0 && l->nofile > 0 &&
	       l->runtime <= env->n_runtimes;
}

/* Where a spawn stopped, for its error: the step, and for a child that died before its
 * exec, how (si_code and si_status; code 0 when its exit was not seen yet). */
typedef struct SpawnStop {
	unsigned step;
	int died_code, died_status;
} SpawnStop;

/* Wait up to timeout_ms for the child to exec (EOF on the sync socket) or report a
 * failed step (into stop); -EAGAIN if it is still setting up when the time is up. */
static int wait_for_child_from_parent(int sync_fd, int pidfd, int timeout_ms, SpawnStop *stop)
{
	struct pollfd p = { .fd = sync_fd, .events = POLLIN };
	struct child_failure f;
	siginfo_t si = { 0 };
	ssize_t n;
	int r;

	do
		r = poll(&p, 1, timeout_ms);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return -errno;
	if (r == 0)
		return -EAGAIN;
	do
		n = recv(sync_fd, &f, sizeof(f), 0);
	while (n < 0 && errno == EINTR);
	/* A child that died with our "g" unread resets the socket: that error is reported
	 * once, and the child's message is still queued behind it. */
	if (n < 0 && errno == ECONNRESET)
		n = recv(sync_fd, &f, sizeof(f), MSG_DONTWAIT);
	if (n < 0)
		return -errno;
	if (n == sizeof(f)) {
		stop->step = f.step < STEP_MAX ? f.step : STEP_NONE;
		return f.err > 0 ? -f.err : -EIO;
	}
	/* EOF: exec closed the child's end, or the child died without a word. */
	if (waitid(P_PIDFD, pidfd, &si, WEXITED | WNOHANG | WNOWAIT) < 0)
		return -errno;
	if (si.si_pid != 0) {
		*stop = (SpawnStop){ STEP_CHILD_DIED, si.si_code, si.si_status };
		return -ECHILD;
	}
	return 0;
}

/* Whether the child may have made the workspace when it stopped at step: not when the
 * workspace step itself failed (the child removed its own half, and an existing
 * directory is not ours), nor before it. */
static bool workspace_maybe_made(unsigned step)
{
	return step > STEP_WORKSPACE || step == STEP_NETNS || step == STEP_RELEASE_CHILD ||
	       step == STEP_CHILD_DIED;
}

/* Kill the child, wait for it, remove its cgroup and workspace; stop and r say why (for
 * the error). */
static void spawn_undo(SandboxEnv *env, const char *id, int pidfd, const SpawnStop *stop, int r)
{
	unsigned step = stop->step;

	if (pidfd >= 0) {
		siginfo_t si;

		pidfd_kill(pidfd);
		while (waitid(P_PIDFD, pidfd, &si, WEXITED) < 0 && errno == EINTR)
			;
	}
	/* Reaped, the child has left the cgroup; the kernel may still need a moment. */
	sandbox_cgroup_remove_wait(env, id, 100, 1);
	if (workspace_maybe_made(step))
		workspace_destroy(env, id);
	if (step == STEP_CHILD_DIED && stop->died_code == CLD_EXITED)
		sandbox_set_error("%s (exit status %d)", sandbox_step_name(step),
				  stop->died_status);
	else if (step == STEP_CHILD_DIED &&
		 (stop->died_code == CLD_KILLED || stop->died_code == CLD_DUMPED))
		sandbox_set_error("%s (signal %d)", sandbox_step_name(step), stop->died_status);
	else
		sandbox_set_error("%s: %s", sandbox_step_name(step), strerror(-r));
}

int sandbox_spawn_start(SandboxEnv *env, const char *id, uid_t uid, gid_t gid,
			const SandboxLimits *limits, SandboxPending *ret)
{
	struct child_args a = { 0 };
	_cleanup_close_ int ctl_parent = -1, ctl_child = -1, sync_parent = -1, sync_child = -1;
	SpawnStop stop = { .step = STEP_PREPARE };
	int sp[2], r;

	sandbox_set_error("%s", ""); /* what follows is this spawn's error, if any */
	if (!env || !sandbox_id_valid(id) || uid == 0 || gid == 0 || !limits_valid(env, limits) ||
	    !ret) {
		sandbox_set_error("invalid arguments");
		return -EINVAL;
	}
	if (!env->runtime_roots[limits->runtime]) {
		sandbox_set_error("runtime profile %zu: %s", limits->runtime,
				  env->runtime_problem[limits->runtime]);
		return -ENOENT;
	}

	r = ws_disk_ready(env);
	if (r < 0)
		return r; /* it said why */
	a.env = env;
	snprintf(a.id, sizeof(a.id), "%s", id);
	a.uid = uid;
	a.gid = gid;
	a.limits = *limits;
	a.init_fd = env->init_fd;
	a.root_fd = a.host_fd = -1; /* opened by the child, in its mount namespace */
	a.seccomp_prog = &env->seccomp_prog;
	r = mount_prepare_from_parent(env, id, &a);
	if (r < 0) {
		sandbox_set_error("%s: %s", sandbox_step_name(stop.step), strerror(-r));
		return r;
	}

	stop.step = STEP_SOCKETS;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0) {
		r = -errno;
		goto undo;
	}
	ctl_parent = sp[0];
	ctl_child = sp[1];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0) {
		r = -errno;
		goto undo;
	}
	sync_parent = sp[0];
	sync_child = sp[1];
	a.sync_fd = sync_child;
	a.ctl_child_fd = ctl_child;
	a.ctl_parent_fd = ctl_parent;

	stop.step = STEP_CLONE;
	a.net_in_child = !(env->egress && limits->egress);
	r = spawner_request(env, &a, CLONE_NEWPID | (a.net_in_child ? 0 : CLONE_NEWNET));
	if (r < 0)
		goto undo;

	*ret = (SandboxPending){ .pid = 0, .net_in_child = a.net_in_child };
	snprintf(ret->id, sizeof(ret->id), "%s", id);
	ret->pidfd = -1;
	ret->ctl_fd = TAKE_FD(ctl_parent);
	ret->sync_fd = TAKE_FD(sync_parent);
	return 0;

undo:
	spawn_undo(env, id, -1, &stop, r);
	return r;
}

/* A pending spawn that will not finish: the child killed, p's fds closed. */
static void pending_undo(SandboxEnv *env, SandboxPending *p, const SpawnStop *stop, int r)
{
	/*
	 * A child may be cloned whose pid we have not read yet: wait a moment for the
	 * spawner's answer, so that it is killed before what it made is removed. A spawner
	 * that gives none is stuck: it goes (the next build starts another), and a child it
	 * may have made ends at its wait for our "g", which the close below answers with
	 * EOF; what it made by then is the next start's to clean.
	 */
	if (!p->answered &&
	    spawner_reply(p->sync_fd, SPAWNER_ANSWER_MS, &p->pid, &p->pidfd) == -EINPROGRESS)
		spawner_stop(env, false);
	p->sync_fd = safe_close(p->sync_fd);
	spawn_undo(env, p->id, p->pidfd, stop, r);
	p->pidfd = safe_close(p->pidfd);
	p->ctl_fd = safe_close(p->ctl_fd);
}

/*
 * The spawner's answer, the first message on p's sync socket (within timeout_ms; 0: if it
 * is there): the child's pid and pidfd. Its network is then set up if the daemon makes it,
 * and it is let go. -EAGAIN if no answer came yet; any other failure undoes p.
 */
static int spawn_release(SandboxEnv *env, SandboxPending *p, int timeout_ms)
{
	SpawnStop stop = { .step = STEP_CLONE };
	int r = spawner_reply(p->sync_fd, timeout_ms, &p->pid, &p->pidfd);

	if (r == -EINPROGRESS && timeout_ms == 0)
		return -EAGAIN;
	p->answered = r != -EINPROGRESS;
	if (r == -EINPROGRESS)
		r = -ETIMEDOUT;
	if (r < 0)
		goto undo;
	/* Meanwhile the child makes its cgroup and namespaces (its netns too without egress). */
	stop.step = STEP_NETNS;
	r = p->net_in_child ? 0 : netns_setup_from_parent(env, p->pidfd, p->pid);
	if (r < 0)
		goto undo;
	stop.step = STEP_RELEASE_CHILD;
	if (send(p->sync_fd, "g", 1, MSG_NOSIGNAL) != 1) {
		r = -errno;
		/* The child died before it read it (a failed step waits for the "g"). */
		if (r == -EPIPE || r == -ECONNRESET) {
			int w = wait_for_child_from_parent(p->sync_fd, p->pidfd, SPAWN_TIMEOUT_MS,
							   &stop);

			r = w < 0 ? w : r;
		}
		goto undo;
	}
	p->released = true;
	return 0;

undo:
	pending_undo(env, p, &stop, r);
	return r;
}

/*
 * EOF on the sync socket means that exec closed the child's end, or that the child died:
 * one killed just before its exec closes its files before it is seen to exit. Its
 * executable says which (a dying child has none left).
 */
static bool child_is_init(const SandboxEnv *env, pid_t pid)
{
	char path[64];
	struct stat exe, init;

	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	return stat(path, &exe) == 0 && fstat(env->init_fd, &init) == 0 &&
	       exe.st_dev == init.st_dev && exe.st_ino == init.st_ino;
}

int sandbox_spawn_finish(SandboxEnv *env, SandboxPending *p, bool wait, Sandbox *ret)
{
	SpawnStop stop = { .step = STEP_RELEASE_CHILD };
	int r;

	if (!p->released) {
		r = spawn_release(env, p, wait ? SPAWN_TIMEOUT_MS : 0);
		if (r < 0 || !wait)
			return r < 0 ? r : -EAGAIN; /* let go: its exec or failure comes next */
	}
	r = wait_for_child_from_parent(p->sync_fd, p->pidfd, wait ? SPAWN_TIMEOUT_MS : 0, &stop);
	if (r == -EAGAIN && !wait)
		return r; /* still setting up: p is untouched */
	if (r == -EAGAIN)
		r = -ETIMEDOUT;
	if (r == 0 && !child_is_init(env, p->pid)) {
		r = -ECHILD;
		stop = (SpawnStop){ .step = STEP_CHILD_DIED }; /* its exit not seen yet */
	}
	if (r < 0) {
		pending_undo(env, p, &stop, r);
		return r;
	}
	p->sync_fd = safe_close(p->sync_fd);
	ret->pid = p->pid;
	ret->pidfd = TAKE_FD(p->pidfd);
	ret->ctl_fd = TAKE_FD(p->ctl_fd);
	ret->ctl_fd_in_init = INIT_CTL_PARENT_FD;
	sandbox_set_error("%s", "");
	return 0;
}

void sandbox_spawn_abort(SandboxEnv *env, SandboxPending *p)
{
	pending_undo(env, p, &(SpawnStop){ .step = STEP_RELEASE_CHILD }, -ECANCELED);
}

int sandbox_spawn(SandboxEnv *env, const char *id, uid_t uid, gid_t gid,
		  const SandboxLimits *limits, Sandbox *ret)
{
	SandboxPending p;
	int r = sandbox_spawn_start(env, id, uid, gid, limits, &p);

	return r < 0 ? r : sandbox_spawn_finish(env, &p, true, ret);
}

void sandbox_kill(Sandbox *sb)
{
	if (!sb)
		return;
	/* Init is pid 1 of its namespace: its death takes every process in it. */
	if (sb->pidfd >= 0)
		pidfd_kill(sb->pidfd);
	sb->pidfd = safe_close(sb->pidfd);
	sb->ctl_fd = safe_close(sb->ctl_fd);
}
