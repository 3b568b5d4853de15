/* SPDX-License-Identifier: MIT */
/*
 * The spawner: a small process, forked from the daemon while the daemon is still small,
 * that clones each sandbox's child on the daemon's behalf.
 *
 * A clone copies the cloner's page tables, and until the child execs both sides take a
 * copy-on-write fault at each page either writes. Done by the daemon, that cost grew with
 * its heap and was paid on its loop, once per build. The spawner's address space stays as
 * it was when it was forked, and it does nothing else.
 *
 * The child is made the daemon's (CLONE_PARENT): the daemon reaps it and waits on its
 * pidfd, and it dies with the daemon (PR_SET_PDEATHSIG names the parent), exactly as if the
 * daemon had cloned it. The spawner trusts the daemon, its parent and the only other end of
 * its socket; it dies with it too.
 *
 * The daemon does not wait for the clone. A request goes one way; the answer (the child's
 * pid and pidfd) is the first message on the child's own sync socket, which the daemon
 * watches anyway for the child's exec. The child sends nothing there before the daemon has
 * read that answer and let it go (child.c), so the answer always comes first.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/sched.h>

#include "cleanup.h"
#include "clone.h"
#include "fdpass.h"
#include "sandbox_internal.h"

/* How long the daemon waits for room in the spawner's queue: it takes a request a clone's
 * time, about a millisecond. */
#define SPAWNER_SEND_MS 5000
/* The daemon's send buffer on the spawner's socket. */
#define SPAWNER_SNDBUF (4 * 1024 * 1024)
/* The namespaces a request may ask the clone for. */
#define SPAWNER_CLONE_FLAGS ((uint64_t)(CLONE_NEWPID | CLONE_NEWNET))

enum spawn_op {
	OP_SANDBOX = 1, /* clone a sandbox's child */
	OP_REMOVE,	/* clone a child that removes a dead sandbox's cgroup and workspace */
};

struct spawn_request {
	uint32_t op;
	uint32_t tries, retry_ms; /* OP_REMOVE: how long its cgroup may take to drain */
	uint64_t clone_flags;	  /* OP_SANDBOX: the namespaces the clone makes */
	struct child_args args;	  /* OP_SANDBOX; OP_REMOVE uses only the id. Its pointers
				   * and fds are the daemon's: the spawner sets them */
};

/* The fds that come with a request, in this order: OP_SANDBOX's three; OP_REMOVE's one,
 * the write end of the pipe its child reports on. */
enum { REQ_FD_SYNC, REQ_FD_CTL_CHILD, REQ_FD_CTL_PARENT, REQ_FDS };
#define REQ_FD_DONE 0

/* The answer: the child's pid, with its pidfd; or the clone's errno and no fd. */
struct spawn_reply {
	int32_t pid;
	int32_t err;
};

static void close_all(int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++)
		fds[i] = safe_close(fds[i]);
}

/* Everything below, up to spawner_start(), runs in the spawner. */

/* clone3 with the daemon as the child's parent. The exit signal is the spawner's own
 * (SIGCHLD): clone3 takes none with CLONE_PARENT. */
static pid_t clone_for_daemon(uint64_t flags, int *pidfd)
{
	struct clone_args ca = { .flags = flags | CLONE_PARENT | CLONE_PIDFD,
				 .pidfd = (uint64_t)(uintptr_t)pidfd };

	return (pid_t)syscall(SYS_clone3, &ca, sizeof(ca));
}

static bool request_valid(const struct spawn_request *req, size_t nfds)
{
	switch (req->op) {
	case OP_SANDBOX:
		return nfds == REQ_FDS && !(req->clone_flags & ~SPAWNER_CLONE_FLAGS) &&
		       (req->clone_flags & CLONE_NEWPID) && sandbox_id_valid(req->args.id) &&
		       req->args.uid != 0 && req->args.gid != 0;
	case OP_REMOVE: return nfds == 1 && sandbox_id_valid(req->args.id);
	default: return false;
	}
}

/* One request: 1 with req and fds filled in, 0 at EOF (the daemon is gone), -errno for a
 * malformed one (what came with it closed). */
static int recv_request(int sock, struct spawn_request *req, int fds[REQ_FDS])
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int) * REQ_FDS)];
	} ctl;
	struct iovec iov = { .iov_base = req, .iov_len = sizeof(*req) };
	struct msghdr mh = { .msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = ctl.buf,
			     .msg_controllen = sizeof(ctl.buf) };
	ssize_t n;
	size_t kept = 0, nfds;

	do
		n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n <= 0)
		return n == 0 ? 0 : -errno;
	for (size_t i = 0; i < REQ_FDS; i++)
		fds[i] = -1;
	/* How many came, not how many fit: a request with too many is refused. */
	nfds = cmsg_take_fds(&mh, fds, &kept, REQ_FDS);
	req->args.id[sizeof(req->args.id) - 1] = '\0';
	if ((size_t)n != sizeof(*req) || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ||
	    !request_valid(req, nfds)) {
		close_all(fds, REQ_FDS);
		return -EPROTO;
	}
	return 1;
}

/* The answer, on the child's sync socket: whether the daemon can read it. */
static bool send_reply(int sync_fd, pid_t pid, int err, int pidfd)
{
	struct spawn_reply rep = { .pid = pid, .err = err };
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int))];
	} ctl = { 0 };
	struct iovec iov = { .iov_base = &rep, .iov_len = sizeof(rep) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (pidfd >= 0) {
		struct cmsghdr *c;

		mh.msg_control = ctl.buf;
		mh.msg_controllen = sizeof(ctl.buf);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &pidfd, sizeof(int));
	}
	return sendmsg(sync_fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)sizeof(rep);
}

/* Clone the child a request describes, and tell the daemon which it is. */
static void serve(SandboxEnv *env, struct spawn_request *req, int fds[REQ_FDS])
{
	struct child_args *a = &req->args;
	int pidfd = -1;
	pid_t pid;

	a->env = env;
	a->seccomp_prog = &env->seccomp_prog;
	a->init_fd = env->init_fd;
	a->sync_fd = fds[REQ_FD_SYNC];
	a->ctl_child_fd = fds[REQ_FD_CTL_CHILD];
	a->ctl_parent_fd = fds[REQ_FD_CTL_PARENT];
	a->root_fd = a->host_fd = -1;

	pid = clone_for_daemon(req->clone_flags, &pidfd);
	if (pid == 0)
		child_main(a);
	/* A daemon that gave up on the build before our answer cannot kill the child: we do,
	 * before it makes more than it may have made already. */
	if (!send_reply(fds[REQ_FD_SYNC], pid > 0 ? pid : 0, pid < 0 ? errno : 0, pidfd))
		(void)pidfd_kill(pidfd);
	/* The child has its copies: ours would hide from the daemon that it exec'd. */
	close_all(fds, REQ_FDS);
	safe_close(pidfd);
}

/*
 * The removal proper, in a child: removing a cgroup and unmounting wait on kernel locks
 * that every sandbox build and teardown takes. It reports on its pipe, and dies with the
 * daemon; the next start cleans what it left.
 */
static _Noreturn void remove_in_child(SandboxEnv *env, const struct spawn_request *req, int done_fd,
				      pid_t daemon)
{
	SandboxRemoval res = { 0 };
	int keep[] = { done_fd };
	ssize_t n;

	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != daemon)
		_exit(1);
	(void)prctl(PR_SET_NAME, "paddock-cleanup");
	/* The spawner's socket above all: a copy here would keep it open past its death. */
	close_fds_except(keep, ARRAY_SIZE(keep));
	res.cgroup_err = sandbox_cgroup_remove_wait(env, req->args.id, req->tries, req->retry_ms);
	res.workspace_err = workspace_destroy(env, req->args.id);
	n = write(done_fd, &res, sizeof(res));
	_exit(n != sizeof(res));
}

static void serve_remove(SandboxEnv *env, const struct spawn_request *req, int fds[REQ_FDS],
			 pid_t daemon)
{
	int pidfd = -1;
	pid_t pid = clone_for_daemon(0, &pidfd);

	if (pid == 0)
		remove_in_child(env, req, fds[REQ_FD_DONE], daemon);
	/* No child: EOF on the pipe, with nothing written, says so. */
	close_all(fds, REQ_FDS);
	safe_close(pidfd);
}

static _Noreturn void spawner_main(SandboxEnv *env, int sock, pid_t daemon)
{
	int keep[] = { sock, env->init_fd, env->keep_in_child_fd, env->ws_template_fd };
	struct spawn_request req;
	int fds[REQ_FDS];

	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != daemon)
		_exit(0);
	(void)prctl(PR_SET_NAME, "paddock-spawner");
	/* Nothing of the daemon's but what a sandbox's child inherits from it. */
	close_fds_except(keep, ARRAY_SIZE(keep));
	for (;;) {
		int r = recv_request(sock, &req, fds);

		/* A malformed request had its fds closed: the daemon sees EOF on its sync
		 * socket, if one came. */
		if (r == 0 || (r < 0 && r != -EPROTO))
			_exit(0);
		if (r > 0 && req.op == OP_SANDBOX)
			serve(env, &req, fds);
		else if (r > 0)
			serve_remove(env, &req, fds, daemon);
	}
}

/* What follows runs in the daemon. */

static int spawner_start(SandboxEnv *env)
{
	pid_t daemon = getpid(), pid;
	int sp[2], pidfd = -1;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
		return -errno;
	pid = clone_pidfd(0, &pidfd);
	if (pid < 0) {
		int r = -errno;

		close(sp[0]);
		close(sp[1]);
		return r;
	}
	if (pid == 0) {
		close(sp[0]);
		spawner_main(env, sp[1], daemon);
	}
	close(sp[1]);
	/* Room for a few hundred requests (of 12 KiB) rather than the default's dozen: a
	 * burst of builds and cleanups is queued there, not waited out on the loop. */
	(void)setsockopt(sp[0], SOL_SOCKET, SO_SNDBUFFORCE, &(int){ SPAWNER_SNDBUF }, sizeof(int));
	env->spawner.fd = sp[0];
	env->spawner.pidfd = pidfd;
	env->spawner.ws_gen = env->ws_gen;
	return 0;
}

void spawner_stop(SandboxEnv *env, bool wait)
{
	if (env->spawner.pidfd >= 0) {
		siginfo_t si;

		(void)pidfd_kill(env->spawner.pidfd);
		/* Not on the loop: a spawner in the middle of a clone may take a while to die,
		 * and the daemon's SIGCHLD handler reaps it. ECHILD: that handler was first. */
		while (wait && waitid(P_PIDFD, env->spawner.pidfd, &si, WEXITED) < 0 &&
		       errno == EINTR)
			;
	}
	env->spawner.pidfd = safe_close(env->spawner.pidfd);
	env->spawner.fd = safe_close(env->spawner.fd);
}

static int send_request(int sock, const struct spawn_request *req, const int *fds, size_t nfds)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int) * REQ_FDS)];
	} ctl = { 0 };
	struct iovec iov = { .iov_base = (void *)req, .iov_len = sizeof(*req) };
	struct msghdr mh = { .msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = ctl.buf,
			     .msg_controllen = CMSG_SPACE(sizeof(int) * nfds) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	struct pollfd p = { .fd = sock, .events = POLLOUT };
	ssize_t n;

	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
	memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
	for (;;) {
		n = sendmsg(sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n >= 0 || (errno != EINTR && errno != EAGAIN))
			break;
		/* Its queue is full of requests: it takes one a clone's time. */
		if (errno == EAGAIN && poll(&p, 1, SPAWNER_SEND_MS) == 0) {
			errno = ETIMEDOUT;
			break;
		}
	}
	if (n < 0)
		return -errno;
	return (size_t)n == sizeof(*req) ? 0 : -EPROTO;
}

/* A spawner that can serve this env: one that is running, forked since the workspace
 * template last changed (the spawner's copy of the env holds the template it had). */
static int spawner_ready(SandboxEnv *env)
{
	if (env->spawner.fd >= 0 && env->spawner.ws_gen == env->ws_gen)
		return 0;
	spawner_stop(env, false);
	return spawner_start(env);
}

/* Send req with its fds to a spawner that can serve it. */
static int spawner_send(SandboxEnv *env, const struct spawn_request *req, const int *fds,
			size_t nfds)
{
	int r = spawner_ready(env);

	if (r >= 0)
		r = send_request(env->spawner.fd, req, fds, nfds);
	/* Gone before this request (killed): no child of its has these fds, so a new
	 * spawner may have them. */
	if (r == -EPIPE || r == -ECONNRESET) {
		spawner_stop(env, false);
		r = spawner_start(env);
		if (r >= 0)
			r = send_request(env->spawner.fd, req, fds, nfds);
	}
	/* One that does not take requests is not asked again. */
	if (r < 0)
		spawner_stop(env, false);
	return r;
}

int spawner_request(SandboxEnv *env, const struct child_args *a, uint64_t flags)
{
	static struct spawn_request req; /* 12 KiB: not on the daemon's stack */
	const int fds[REQ_FDS] = { [REQ_FD_SYNC] = a->sync_fd,
				   [REQ_FD_CTL_CHILD] = a->ctl_child_fd,
				   [REQ_FD_CTL_PARENT] = a->ctl_parent_fd };

	req = (struct spawn_request){ .op = OP_SANDBOX, .clone_flags = flags, .args = *a };
	return spawner_send(env, &req, fds, REQ_FDS);
}

int sandbox_remove_start(SandboxEnv *env, const char *id, unsigned tries, unsigned retry_ms,
			 int *fd)
{
	static struct spawn_request req;
	int p[2], r;

	if (!sandbox_id_valid(id))
		return -EINVAL;
	if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
		return -errno;
	req = (struct spawn_request){ .op = OP_REMOVE, .tries = tries, .retry_ms = retry_ms };
	snprintf(req.args.id, sizeof(req.args.id), "%s", id);
	r = spawner_send(env, &req, &p[1], 1);
	close(p[1]);
	if (r < 0) {
		close(p[0]);
		return r;
	}
	*fd = p[0];
	return 0;
}

int sandbox_remove_finish(int fd, SandboxRemoval *ret)
{
	ssize_t n = read(fd, ret, sizeof(*ret));

	if (n < 0)
		return -errno;
	/* EOF with nothing said: the child died, or was never made. */
	return n == sizeof(*ret) ? 0 : -ECHILD;
}

int spawner_reply(int sync_fd, int timeout_ms, pid_t *pid, int *pidfd)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int))];
	} ctl;
	struct spawn_reply rep;
	struct iovec iov = { .iov_base = &rep, .iov_len = sizeof(rep) };
	struct msghdr mh = { .msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = ctl.buf,
			     .msg_controllen = sizeof(ctl.buf) };
	struct pollfd p = { .fd = sync_fd, .events = POLLIN };
	int fd = -1, r;
	size_t kept = 0;
	ssize_t n;

	if (timeout_ms > 0) {
		do
			r = poll(&p, 1, timeout_ms);
		while (r < 0 && errno == EINTR);
		if (r < 0)
			return -errno;
	}
	do
		n = recvmsg(sync_fd, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	/* -EINPROGRESS, not -EAGAIN: that is also an answer (clone3 at pids.max). */
	if (n < 0)
		return errno == EWOULDBLOCK ? -EINPROGRESS : -errno;
	/* EOF: the spawner died, or dropped the request, before it cloned. */
	if (n == 0)
		return -ECONNABORTED;
	if (cmsg_take_fds(&mh, &fd, &kept, 1) > 1 || (size_t)n != sizeof(rep) ||
	    (rep.pid > 0) != (fd >= 0) || (rep.pid <= 0 && rep.err <= 0)) {
		safe_close(fd);
		return -EPROTO;
	}
	if (rep.pid <= 0)
		return -rep.err;
	*pid = rep.pid;
	*pidfd = fd;
	return 0;
}
