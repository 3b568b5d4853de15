/* SPDX-License-Identifier: MIT */
/* paddock-init: pid 1 of a sandbox; starts interpreters for sessiond, reaps, reports exits. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "fdpass.h"
#include "init_proto.h"
#include "init_steps.h"
#include "sandbox_layout.h"

#define CTL_PARENT_FD 4	 /* sessiond's end, kept so a restarted sessiond can take it back */
#define SLOTS_MAX 64	 /* live interpreters */
#define OUTQ_MAX 256	 /* messages waiting for sessiond to read */
#define KILL_ROUNDS 5000 /* of 1 ms, for INIT_KILL with survivors to spare */

/* One interpreter we started, with our copies of the fds sessiond got. */
struct interp {
	bool used;    /* slot taken */
	bool exited;  /* reaped; EXITED queued, fds closed once it is sent */
	bool adopted; /* started outside init (INIT_ADOPT): not our child, gone when its
		       * pidfd turns readable, and never reported */
	pid_t pid;    /* in our pid namespace */
	uint32_t tag; /* sessiond's label */
	int fds[4];   /* pidfd, control (sessiond's end), stdout and stderr read ends */
};

/* A message waiting to be sent; slot >= 0 ties it to an interpreter. */
struct pending {
	struct init_msg m;
	int slot;
};

/* All of init's state. */
typedef struct Init {
	struct interp slots[SLOTS_MAX];
	struct pending outq[OUTQ_MAX]; /* ring */
	size_t outq_head, outq_len;
	int sfd;     /* signalfd for SIGCHLD */
	int null_fd; /* /dev/null, stdin of interpreters */
	bool ctl_ok; /* the control socket still works */
	char buf[INIT_MSG_MAX + 1];
} Init;

static void slot_release(Init *in, int i)
{
	struct interp *s = &in->slots[i];

	for (size_t k = 0; k < ARRAY_SIZE(s->fds); k++)
		s->fds[k] = safe_close(s->fds[k]);
	s->used = false;
}

static int send_now(Init *in, const struct pending *p)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(4 * sizeof(int))];
	} cm;
	struct init_msg m = p->m;
	struct iovec iov = { &m, sizeof(m) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	const struct interp *s = p->slot >= 0 ? &in->slots[p->slot] : NULL;

	if (m.op == INIT_SPAWNED && s && s->used) {
		struct cmsghdr *c;

		memset(&cm, 0, sizeof(cm));
		mh.msg_control = cm.buf;
		mh.msg_controllen = sizeof(cm.buf);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(4 * sizeof(int));
		memcpy(CMSG_DATA(c), s->fds, 4 * sizeof(int));
	}
	/* Never block: sessiond may be gone or busy; we keep the message for later. */
	if (sendmsg(INIT_CTL_FD, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
		return -errno;
	return 0;
}

/* After a message left (or was dropped): an interpreter's EXITED ends its slot. */
static void sent(Init *in, const struct pending *p)
{
	if (p->m.op == INIT_EXITED && p->slot >= 0)
		slot_release(in, p->slot);
}

static void flush(Init *in)
{
	while (in->outq_len > 0 && in->ctl_ok) {
		struct pending *p = &in->outq[in->outq_head];
		int r = send_now(in, p);

		if (r == -EAGAIN || r == -ENOBUFS || r == -EINTR)
			return;
		if (r < 0 && r != -EMSGSIZE)
			in->ctl_ok = false; /* peer gone for good: drop what is left below */
		sent(in, p);
		in->outq_head = (in->outq_head + 1) % OUTQ_MAX;
		in->outq_len--;
	}
	while (in->outq_len > 0 && !in->ctl_ok) {
		sent(in, &in->outq[in->outq_head]);
		in->outq_head = (in->outq_head + 1) % OUTQ_MAX;
		in->outq_len--;
	}
}

static void queue(Init *in, const struct init_msg *m, int slot)
{
	struct pending p = { .m = *m, .slot = slot };

	if (in->outq_len == OUTQ_MAX) {
		/* sessiond has not read for a long time: drop, it can ask INIT_RESEND */
		sent(in, &p);
		return;
	}
	in->outq[(in->outq_head + in->outq_len) % OUTQ_MAX] = p;
	in->outq_len++;
	flush(in);
}

/* tag: the failed SPAWN's label, so that sessiond knows which interpreter did not start. */
static void reply_error(Init *in, uint32_t seq, uint32_t tag, int err, unsigned step)
{
	struct init_msg m = {
		.op = INIT_ERROR, .seq = seq, .tag = tag, .status = err, .step = step
	};

	queue(in, &m, -1);
}

static void child_reaped(Init *in, pid_t pid, int status)
{
	for (int i = 0; i < SLOTS_MAX; i++) {
		struct interp *s = &in->slots[i];
		struct init_msg m = { .op = INIT_EXITED };

		if (!s->used || s->exited || s->pid != pid)
			continue;
		s->exited = true;
		m.pid = pid;
		m.status = status;
		m.tag = s->tag;
		queue(in, &m, i);
		return;
	}
	/* an orphan that re-parented to us: nothing to report */
}

static void reap_nohang(Init *in)
{
	for (;;) {
		int status;
		pid_t pid = waitpid(-1, &status, WNOHANG);

		if (pid <= 0)
			return;
		child_reaped(in, pid, status);
	}
}

static void *mfree(void *p)
{
	free(p);
	return NULL;
}

/* Count the strings of a list that ends at an empty string; -EINVAL if it runs off the end. */
static ssize_t count_strings(const char *p, const char *end, const char **after)
{
	ssize_t n = 0;

	for (;;) {
		const char *nul = memchr(p, '\0', end - p);

		if (!nul)
			return -EINVAL;
		if (nul == p) {
			*after = p + 1;
			return n;
		}
		n++;
		p = nul + 1;
	}
}

static char **split_strings(char *p, size_t n)
{
	char **list = calloc(n + 1, sizeof(char *));

	if (!list)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		list[i] = p;
		p += strlen(p) + 1;
	}
	return list;
}

/* Split the blob into argv and envp, each a list ending at an empty string. */
static int parse_spawn(char *p, char *end, char ***argv_ret, char ***envp_ret)
{
	const char *envs;
	const char *rest;
	ssize_t argc = count_strings(p, end, &envs), envc;

	if (argc <= 0)
		return -EINVAL;
	envc = count_strings(envs, end, &rest);
	if (envc < 0)
		return -EINVAL;
	*argv_ret = split_strings(p, argc);
	*envp_ret = split_strings(p + (envs - p), envc);
	if (!*argv_ret || !*envp_ret) {
		*argv_ret = mfree(*argv_ret);
		*envp_ret = mfree(*envp_ret);
		return -ENOMEM;
	}
	return 0;
}

static _Noreturn void exec_interpreter(Init *in, char **argv, char **envp, int out_w, int err_w,
				       int ctl_w)
{
	sigset_t none;
	const char *msg = "paddock-init: exec ";
	const char *why;
	ssize_t n;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	for (int sig = 1; sig < NSIG; sig++)
		signal(sig, SIG_DFL);
	setsid();
	/* Everything we hold sits at 5 and up, so these do not clobber each other. */
	if (dup2(in->null_fd, 0) < 0 || dup2(out_w, 1) < 0 || dup2(err_w, 2) < 0 ||
	    dup2(ctl_w, 3) < 0)
		_exit(127);
	syscall(SYS_close_range, 4, ~0U, 0);
	if (chdir(SANDBOX_WORKSPACE) < 0) {
		/* still run: the interpreter may not need it */
	}
	execve(argv[0], argv, envp);
	why = strerror(errno);
	n = write(2, msg, strlen(msg));
	n = write(2, argv[0], strlen(argv[0]));
	n = write(2, ": ", 2);
	n = write(2, why, strlen(why));
	n = write(2, "\n", 1);
	(void)n;
	_exit(127);
}

static void do_spawn(Init *in, const struct init_msg *req, char *blob, char *end)
{
	_cleanup_free_ char **argv = NULL;
	_cleanup_free_ char **envp = NULL;
	int ctl[2] = { -1, -1 }, out[2] = { -1, -1 }, err[2] = { -1, -1 };
	struct init_msg m = { .op = INIT_SPAWNED, .seq = req->seq, .tag = req->tag };
	unsigned step;
	int slot = -1, pidfd, r;
	pid_t pid;

	r = parse_spawn(blob, end, &argv, &envp);
	if (r < 0) {
		reply_error(in, req->seq, req->tag, -r,
			    r == -ENOMEM ? INIT_STEP_ALLOC : INIT_STEP_MESSAGE);
		return;
	}
	for (int i = 0; i < SLOTS_MAX && slot < 0; i++)
		if (!in->slots[i].used)
			slot = i;
	if (slot < 0) {
		reply_error(in, req->seq, req->tag, ENOSPC, INIT_STEP_SLOTS);
		return;
	}

	step = INIT_STEP_SOCKETPAIR;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ctl) < 0)
		goto undo_fds;
	step = INIT_STEP_PIPE;
	if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0)
		goto undo_fds;
	step = INIT_STEP_FORK;
	pid = fork();
	if (pid < 0 && errno == EAGAIN) {
		/* Killed leftovers count against pids.max until they are reaped. */
		reap_nohang(in);
		pid = fork();
	}
	if (pid < 0)
		goto undo_fds;
	if (pid == 0)
		exec_interpreter(in, argv, envp, out[1], err[1], ctl[1]);
	ctl[1] = safe_close(ctl[1]);
	out[1] = safe_close(out[1]);
	err[1] = safe_close(err[1]);

	/* A pidfd lets sessiond watch and signal it from outside our pid namespace. */
	pidfd = syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0) {
		r = errno;
		step = INIT_STEP_PIDFD;
		kill(pid, SIGKILL); /* reaped by the SIGCHLD path as an unknown child */
		errno = r;
		goto undo_fds;
	}
	in->slots[slot] = (struct interp){
		.used = true,
		.pid = pid,
		.tag = req->tag,
		.fds = { pidfd, ctl[0], out[0], err[0] },
	};
	m.pid = pid;
	queue(in, &m, slot);
	return;
undo_fds:
	r = errno;
	safe_close(ctl[0]);
	safe_close(ctl[1]);
	safe_close(out[0]);
	safe_close(out[1]);
	safe_close(err[0]);
	safe_close(err[1]);
	reply_error(in, req->seq, req->tag, r, step);
}

static bool kept(const struct init_msg *req, pid_t pid)
{
	for (size_t i = 0; i < INIT_KEEP_MAX; i++)
		if (req->keep[i] > 0 && req->keep[i] == pid)
			return true;
	return false;
}

static bool keeps_any(const struct init_msg *req)
{
	for (size_t i = 0; i < INIT_KEEP_MAX; i++)
		if (req->keep[i] > 0)
			return true;
	return false;
}

/* A zombie cannot be killed again; its parent (dead or kept) deals with it. */
static bool is_zombie(pid_t pid)
{
	char path[64], buf[512], *p;
	int fd;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return true; /* gone */
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return true;
	buf[n] = '\0';
	p = strrchr(buf, ')');
	return !p || p[1] == '\0' || p[2] == 'Z' || p[2] == 'X';
}

/* SIGKILL every live process but pid 1 and the kept ones; how many were signalled. */
static int kill_walk(const struct init_msg *req)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	int victims = 0;

	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		char *e;
		long pid = strtol(de->d_name, &e, 10);

		if (*e || pid <= 1 || kept(req, pid) || is_zombie(pid))
			continue;
		if (kill(pid, SIGKILL) == 0)
			victims++;
	}
	closedir(d);
	return victims;
}

static void do_kill(Init *in, const struct init_msg *req)
{
	struct init_msg m = { .op = INIT_KILLED, .seq = req->seq };

	if (!keeps_any(req)) {
		/* From pid 1, -1 means everyone else in the namespace. Repeat until no child is left. */
		for (;;) {
			int status;
			pid_t pid;

			kill(-1, SIGKILL);
			pid = waitpid(-1, &status, 0);
			if (pid > 0)
				child_reaped(in, pid, status);
			else if (errno == ECHILD)
				break;
			else if (errno != EINTR)
				break;
		}
	} else {
		int rounds;

		for (rounds = 0; rounds < KILL_ROUNDS; rounds++) {
			struct timespec ms = { 0, 1000000 };
			int victims = kill_walk(req);

			reap_nohang(in);
			if (victims <= 0)
				break;
			nanosleep(&ms, NULL);
		}
		if (rounds == KILL_ROUNDS) {
			reply_error(in, req->seq, INIT_TAG_NONE, ETIMEDOUT, INIT_STEP_KILL);
			return;
		}
	}
	queue(in, &m, -1);
}

static void do_resend(Init *in, const struct init_msg *req)
{
	for (int i = 0; i < SLOTS_MAX; i++) {
		const struct interp *s = &in->slots[i];
		struct init_msg m = { .op = INIT_SPAWNED, .seq = req->seq };

		if (!s->used || s->exited)
			continue;
		m.pid = s->pid;
		m.tag = s->tag;
		m.status = s->adopted ? INIT_SPAWNED_ADOPTED : 0;
		queue(in, &m, i);
	}
}

/* Keep an interpreter sessiond started in the sandbox by other means: the fds that came
 * (ctl, stdout, stderr: sessiond's ends) and a pidfd of our own, so that a restarted
 * sessiond gets it back with the others. Nothing is answered. */
static void do_adopt(Init *in, const struct init_msg *req, const int *fds, size_t nfds)
{
	int slot = -1, pidfd;

	for (int i = 0; i < SLOTS_MAX && slot < 0; i++)
		if (!in->slots[i].used)
			slot = i;
	pidfd = req->pid > 1 ? (int)syscall(SYS_pidfd_open, req->pid, 0) : -1;
	if (slot < 0 || nfds != 3 || pidfd < 0) {
		safe_close(pidfd);
		for (size_t i = 0; i < nfds; i++)
			close(fds[i]);
		return;
	}
	fcntl(pidfd, F_SETFD, FD_CLOEXEC);
	in->slots[slot] = (struct interp){
		.used = true,
		.adopted = true,
		.pid = req->pid,
		.tag = req->tag,
		.fds = { pidfd, fds[0], fds[1], fds[2] },
	};
}

/* An adopted interpreter's pidfd turned readable: it is gone. */
static void adopted_gone(Init *in, int i)
{
	if (in->slots[i].used && in->slots[i].adopted)
		slot_release(in, i);
}

static void handle_request(Init *in)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(16 * sizeof(int))];
	} cm;
	struct iovec iov = { in->buf, INIT_MSG_MAX };
	struct msghdr mh = { .msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = cm.buf,
			     .msg_controllen = sizeof(cm.buf) };
	struct init_msg req;
	int fds[3];
	size_t nfds = 0;
	ssize_t n;

	n = recvmsg(INIT_CTL_FD, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0) {
		if (errno != EAGAIN && errno != EINTR)
			in->ctl_ok = false;
		return;
	}
	if (n == 0) {
		in->ctl_ok = false;
		return;
	}
	/* Only INIT_ADOPT takes fds (up to 3); any others that came along are closed. */
	cmsg_take_fds(&mh, fds, &nfds, ARRAY_SIZE(fds));
	memcpy(&req, in->buf, (size_t)n < sizeof(req) ? (size_t)n : sizeof(req));
	if (((size_t)n < sizeof(req) || (mh.msg_flags & MSG_TRUNC) || req.op != INIT_ADOPT) &&
	    nfds > 0) {
		for (size_t i = 0; i < nfds; i++)
			close(fds[i]);
		nfds = 0;
	}
	if ((size_t)n < sizeof(req) || (mh.msg_flags & MSG_TRUNC)) {
		uint32_t seq = 0;

		if ((size_t)n >= 2 * sizeof(uint32_t))
			memcpy(&seq, in->buf + sizeof(uint32_t), sizeof(seq));
		reply_error(in, seq, INIT_TAG_NONE, (mh.msg_flags & MSG_TRUNC) ? EMSGSIZE : EINVAL,
			    INIT_STEP_MESSAGE);
		return;
	}
	memcpy(&req, in->buf, sizeof(req));
	switch (req.op) {
	case INIT_SPAWN: do_spawn(in, &req, in->buf + sizeof(req), in->buf + n); break;
	case INIT_KILL: do_kill(in, &req); break;
	case INIT_PING: {
		struct init_msg m = { .op = INIT_PONG, .seq = req.seq };

		queue(in, &m, -1);
		break;
	}
	case INIT_RESEND: do_resend(in, &req); break;
	case INIT_ADOPT: do_adopt(in, &req, fds, nfds); break;
	default: reply_error(in, req.seq, INIT_TAG_NONE, EINVAL, INIT_STEP_OP); break;
	}
}

static void handle_signals(Init *in)
{
	struct signalfd_siginfo si[16];

	/* Drain: one SIGCHLD may stand for many children. */
	while (read(in->sfd, si, sizeof(si)) > 0)
		;
	reap_nohang(in);
}

int main(void)
{
	static Init in;
	sigset_t all, chld;
	int type = 0;
	socklen_t len = sizeof(type);

	/* Nobody in the sandbox may ptrace us or open /proc/1/fd: we hold sessiond's end. */
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	if (getsockopt(INIT_CTL_FD, SOL_SOCKET, SO_TYPE, &type, &len) < 0 ||
	    type != SOCK_SEQPACKET) {
		fprintf(stderr,
			"paddock-init: fd %d is not the control socket; "
			"this program is started by paddock-sessiond\n",
			INIT_CTL_FD);
		return 2;
	}
	fcntl(INIT_CTL_FD, F_SETFD, FD_CLOEXEC);
	fcntl(CTL_PARENT_FD, F_SETFD, FD_CLOEXEC);

	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, NULL);
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	in.sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
	in.null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (in.sfd < 0 || in.null_fd < 0)
		return 2;
	in.ctl_ok = true;
	for (int i = 0; i < SLOTS_MAX; i++)
		for (size_t k = 0; k < ARRAY_SIZE(in.slots[i].fds); k++)
			in.slots[i].fds[k] = -1;

	for (;;) {
		/* The control socket, SIGCHLD, and the pidfd of each adopted interpreter. */
		struct pollfd p[2 + SLOTS_MAX] = {
			{ .fd = in.ctl_ok ? INIT_CTL_FD : -1,
			  .events = POLLIN | (in.outq_len ? POLLOUT : 0) },
			{ .fd = in.sfd, .events = POLLIN },
		};

		for (int i = 0; i < SLOTS_MAX; i++)
			p[2 + i] = (struct pollfd){
				.fd = in.slots[i].used && in.slots[i].adopted ? in.slots[i].fds[0] :
										-1,
				.events = POLLIN,
			};
		if (poll(p, ARRAY_SIZE(p), -1) < 0)
			continue;
		if (p[1].revents & POLLIN)
			handle_signals(&in);
		if (p[0].revents & POLLOUT)
			flush(&in);
		if (p[0].revents & (POLLIN | POLLHUP | POLLERR))
			handle_request(&in);
		for (int i = 0; i < SLOTS_MAX; i++)
			if (p[2 + i].revents)
				adopted_gone(&in, i);
	}
}
