/* SPDX-License-Identifier: MIT */
/* Starting a sandbox: clone3 into new namespaces, the setup checklist, exec of paddock-init. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "clone.h"
#include "init/init_proto.h"
#include "sandbox_internal.h"
#include "sandbox_layout.h"

/* Fds the child must keep are first moved at or above this, out of the way of 0..4. */
#define CHILD_FD_HIGH 10
/* How long the whole setup in the child may take before we give up on it. */
#define SPAWN_TIMEOUT_MS 10000

/* Everything below, up to sandbox_spawn(), runs in the child between clone and exec. */

/*
 * The namespaces clone3 could have made, made here instead: copying the mount table
 * costs time in proportion to the host's mounts, and the child can spend it where the
 * daemon's loop does not wait. Its pid namespace has to come from clone3.
 */
static int unshare_in_child(struct child_args *a)
{
	(void)a;
	return unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS) < 0 ? -errno : 0;
}

static int wait_for_parent_in_child(struct child_args *a)
{
	char go;
	ssize_t n;

	do
		n = read(a->sync_fd, &go, 1);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	/* EOF: the parent gave up on us (or died) before we were set up. */
	return n == 1 ? 0 : -EPIPE;
}

static int move_high(int *fd)
{
	int high = fcntl(*fd, F_DUPFD_CLOEXEC, CHILD_FD_HIGH);

	if (high < 0)
		return -errno;
	*fd = high;
	return 0;
}

/* 0..2 on /dev/null, the control socket on 3, sessiond's end on 4, nothing else inherited. */
static int fds_in_child(struct child_args *a)
{
	int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	int r;

	if (null_fd < 0)
		return -errno;
	r = move_high(&null_fd);
	if (r >= 0)
		r = move_high(&a->sync_fd);
	if (r >= 0)
		r = move_high(&a->init_fd);
	if (r >= 0)
		r = move_high(&a->ctl_child_fd);
	if (r >= 0)
		r = move_high(&a->ctl_parent_fd);
	if (r < 0)
		return r;
	for (int fd = 0; fd <= 2; fd++)
		if (dup3(null_fd, fd, 0) < 0)
			return -errno;
	if (dup3(a->ctl_child_fd, INIT_CTL_FD, 0) < 0 ||
	    dup3(a->ctl_parent_fd, INIT_CTL_PARENT_FD, 0) < 0)
		return -errno;
	/* Whatever else the daemon had open is closed by exec; old kernels lack the flag. */
	if (syscall(SYS_close_range, INIT_CTL_PARENT_FD + 1, ~0U, CLOSE_RANGE_CLOEXEC) < 0 &&
	    errno != EINVAL && errno != ENOSYS)
		return -errno;
	return 0;
}

static int exec_in_child(struct child_args *a)
{
	static char *const argv[] = { "paddock-init", NULL };
	static char *const envp[] = { "PATH=" SANDBOX_PATH, "HOME=" SANDBOX_WORKSPACE,
				      "LANG=C.UTF-8", NULL };

	syscall(SYS_execveat, a->init_fd, "", argv, envp, AT_EMPTY_PATH);
	return -errno;
}

struct child_step {
	enum sandbox_step step;
	int (*run)(struct child_args *a);
};

/* The child's setup, in its fixed order. */
static const struct child_step child_checklist[] = {
	{ STEP_CGROUP_CREATE, cgroup_create_in_child },
	{ STEP_CGROUP_ATTACH, cgroup_attach_in_child }, /* what follows is charged to it */
	{ STEP_WORKSPACE, workspace_create_in_child },	/* still in the daemon's mount ns */
	{ STEP_UNSHARE, unshare_in_child },
	{ STEP_HOST_SCAN, roots_open_in_child },
	{ STEP_HOST_SCAN, host_scan_in_child },
	{ STEP_NETNS_CHILD, netns_in_child },
	{ STEP_WAIT_PARENT, wait_for_parent_in_child },
	{ STEP_CGROUP_NS, cgroup_ns_in_child },
	{ STEP_MOUNT_PRIVATE, mount_private_in_child },
	{ STEP_MOUNT_ROOT, mount_root_in_child },
	{ STEP_MOUNT_USR, mount_usr_in_child },
	{ STEP_MOUNT_ROOT_LINKS, mount_root_links_in_child },
	{ STEP_MOUNT_ETC, mount_etc_in_child },
	{ STEP_MOUNT_DEV, mount_dev_in_child },
	{ STEP_MOUNT_PROC, mount_proc_in_child },
	{ STEP_MOUNT_TMP, mount_tmp_in_child },
	{ STEP_MOUNT_WORKSPACE, mount_workspace_in_child },
	{ STEP_MOUNT_LIB_DIR, mount_lib_dir_in_child },
	{ STEP_PIVOT_ROOT, mount_pivot_in_child },
	{ STEP_ROOT_READONLY, mount_root_readonly_in_child },
	{ STEP_CHDIR, mount_chdir_in_child },
	{ STEP_HOSTNAME, hostname_in_child },
	{ STEP_FDS, fds_in_child },
	{ STEP_RLIMITS, rlimits_in_child },
	{ STEP_CAPS_BOUNDING, caps_bounding_in_child },
	{ STEP_SETGROUPS, setgroups_in_child },
	{ STEP_SETGID, setgid_in_child },
	{ STEP_SETUID, setuid_in_child },
	{ STEP_CAPS_VERIFY, caps_verify_in_child },
	{ STEP_NO_NEW_PRIVS, no_new_privs_in_child },
	{ STEP_SECCOMP, seccomp_in_child }, /* the prepared BPF filter is installed here */
	{ STEP_EXEC, exec_in_child },
};

static _Noreturn void child_fail(struct child_args *a, unsigned step, int err)
{
	struct child_failure f = { .step = step, .err = err };
	ssize_t n;

	n = write(a->sync_fd, &f, sizeof(f));
	(void)n;
	_exit(127);
}

/*
 * The daemon's fds (its listening socket, its workers' connections) go at once rather than
 * at exec: a child of a daemon that died mid-build would hold them for as long as it sets
 * up, workers waiting for replies on connections no one serves. The state dir's lock
 * stays (sandbox_env_keep_in_child), and so does the workspace template until it is
 * copied. Kernels before 5.9 lack close_range: exec closes them.
 */
static void close_inherited_in_child(const struct child_args *a)
{
	int keep[] = { a->sync_fd, a->ctl_child_fd,	     a->ctl_parent_fd,
		       a->init_fd, a->env->keep_in_child_fd, a->env->ws_template_fd };
	unsigned from = 3;

	/* Ascending, so that the ranges between them can be closed in one pass. */
	for (size_t i = 1; i < ARRAY_SIZE(keep); i++)
		for (size_t j = i; j > 0 && keep[j - 1] > keep[j]; j--) {
			int t = keep[j];

			keep[j] = keep[j - 1];
			keep[j - 1] = t;
		}
	for (size_t i = 0; i < ARRAY_SIZE(keep); i++) {
		if (keep[i] < 0 || (unsigned)keep[i] < from)
			continue;
		if ((unsigned)keep[i] > from &&
		    syscall(SYS_close_range, from, (unsigned)keep[i] - 1, 0) < 0)
			return;
		from = (unsigned)keep[i] + 1;
	}
	(void)syscall(SYS_close_range, from, ~0U, 0);
}

/*
 * Until it drops its privileges (setresuid clears this) the child dies with the daemon:
 * what it made so far is then the next daemon's to clean, once the lock is free. Dead
 * already, the daemon has hung up its end of the sync socket.
 */
static void die_with_parent_in_child(const struct child_args *a)
{
	struct pollfd p = { .fd = a->sync_fd, .events = POLLIN };

	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 ||
	    (poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR))))
		_exit(127);
}

static _Noreturn void child_main(struct child_args *a, int sync_parent_fd)
{
	/* Our copy of the parent's end would hide the parent's death from us. */
	close(sync_parent_fd);
	die_with_parent_in_child(a);
	close_inherited_in_child(a);
	for (size_t i = 0; i < ARRAY_SIZE(child_checklist); i++) {
		int r = child_checklist[i].run(a);

		if (r < 0)
			child_fail(a, child_checklist[i].step, -r);
	}
	child_fail(a, STEP_EXEC, EIO); /* exec returned without an error: cannot happen */
}

static int pidfd_kill(int pidfd)
{
	return syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0) < 0 ? -errno : 0;
}

static bool limits_valid(const SandboxEnv *env, const SandboxLimits *l)
{
	return l && l->memory_bytes > 0 && l->pids > 0 && l->cpu_percent > 0 &&
	       l->workspace_bytes > 0 && l->tmp_bytes > 0 && l->nofile > 0 &&
	       l->runtime <= env->n_runtimes;
}

/* Wait up to timeout_ms for the child to exec (EOF on the sync socket) or report a
 * failed step; -EAGAIN if it is still setting up when the time is up. */
static int wait_for_child_from_parent(int sync_fd, int pidfd, int timeout_ms, unsigned *step)
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
		*step = f.step < STEP_MAX ? f.step : STEP_NONE;
		return f.err > 0 ? -f.err : -EIO;
	}
	/* EOF: exec closed the child's end, or the child died without a word. */
	if (waitid(P_PIDFD, pidfd, &si, WEXITED | WNOHANG | WNOWAIT) < 0)
		return -errno;
	if (si.si_pid != 0) {
		*step = STEP_CHILD_DIED;
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

/* Kill the child, wait for it, remove its cgroup and workspace; step and r say why (for
 * the error). */
static void spawn_undo(SandboxEnv *env, const char *id, int pidfd, unsigned step, int r)
{
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
	sandbox_set_error("%s: %s", sandbox_step_name(step), strerror(-r));
}

int sandbox_spawn_start(SandboxEnv *env, const char *id, uid_t uid, gid_t gid,
			const SandboxLimits *limits, SandboxPending *ret)
{
	struct child_args a = { 0 };
	_cleanup_close_ int ctl_parent = -1, ctl_child = -1, sync_parent = -1, sync_child = -1;
	_cleanup_close_ int pidfd = -1;
	unsigned step = STEP_PREPARE;
	int sp[2], r;
	pid_t pid;

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
		sandbox_set_error("%s: %s", sandbox_step_name(step), strerror(-r));
		return r;
	}

	step = STEP_SOCKETS;
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

	step = STEP_CLONE;
	a.net_in_child = !(env->egress && limits->egress);
	pid = clone_pidfd(CLONE_NEWPID | (a.net_in_child ? 0 : CLONE_NEWNET), &pidfd);
	if (pid < 0) {
		r = -errno;
		goto undo;
	}
	if (pid == 0)
		child_main(&a, sync_parent);

	ctl_child = safe_close(ctl_child);
	sync_child = safe_close(sync_child);

	/* Meanwhile the child makes its cgroup and namespaces (its netns too without egress). */
	step = STEP_NETNS;
	r = a.net_in_child ? 0 : netns_setup_from_parent(env, pidfd, pid);
	if (r < 0)
		goto undo;
	step = STEP_RELEASE_CHILD;
	if (send(sync_parent, "g", 1, MSG_NOSIGNAL) != 1) {
		r = -errno;
		/* The child failed before it waited for us: it has said at which step. */
		if (r == -EPIPE || r == -ECONNRESET) {
			int w = wait_for_child_from_parent(sync_parent, pidfd, SPAWN_TIMEOUT_MS,
							   &step);

			r = w < 0 ? w : r;
		}
		goto undo;
	}

	*ret = (SandboxPending){ .pid = pid };
	snprintf(ret->id, sizeof(ret->id), "%s", id);
	ret->pidfd = TAKE_FD(pidfd);
	ret->ctl_fd = TAKE_FD(ctl_parent);
	ret->sync_fd = TAKE_FD(sync_parent);
	return 0;

undo:
	spawn_undo(env, id, pidfd, step, r);
	return r;
}

/* A pending spawn that will not finish: the child killed, p's fds closed. */
static void pending_undo(SandboxEnv *env, SandboxPending *p, unsigned step, int r)
{
	p->sync_fd = safe_close(p->sync_fd);
	spawn_undo(env, p->id, p->pidfd, step, r);
	p->pidfd = safe_close(p->pidfd);
	p->ctl_fd = safe_close(p->ctl_fd);
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
	unsigned step = STEP_RELEASE_CHILD;
	int r = wait_for_child_from_parent(p->sync_fd, p->pidfd, wait ? SPAWN_TIMEOUT_MS : 0,
					   &step);

	if (r == -EAGAIN && !wait)
		return r; /* still setting up: p is untouched */
	if (r == -EAGAIN)
		r = -ETIMEDOUT;
	if (r == 0 && !child_is_init(env, p->pid)) {
		r = -ECHILD;
		step = STEP_CHILD_DIED;
	}
	if (r < 0) {
		pending_undo(env, p, step, r);
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
	pending_undo(env, p, STEP_RELEASE_CHILD, -ECANCELED);
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
