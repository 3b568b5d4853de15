/* SPDX-License-Identifier: MIT */
/* What the root sandbox tests share: a private env, a session, talking to its init. */
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "init/init_proto.h"
#include "sandbox/sandbox.h"

#define TU_TIMEOUT_MS 10000

static int failures;

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);            \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			failures++;                                                                \
		}                                                                                  \
	} while (0)

/* The closing line and the exit status of a sandbox test. */
static inline int tu_summary(void)
{
	if (failures) {
		fprintf(stderr, "%d check(s) failed\n", failures);
		return 1;
	}
	printf("ok\n");
	return 0;
}

static inline _Noreturn void tu_skip(const char *why)
{
	printf("SKIP: %s\n", why);
	exit(77);
}

static inline _Noreturn void tu_die(const char *what, int err)
{
	fprintf(stderr, "FATAL: %s: %s (%s)\n", what, strerror(err < 0 ? -err : err),
		sandbox_last_error());
	exit(1);
}

static inline double tu_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static inline void tu_sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

/* A private state dir and cgroup parent, removed by tu_teardown(). */
struct tu {
	char state[64];
	char cgroot[64];
	PaddockConfig cfg;
	SandboxEnv *env;
	SandboxLimits lim;
	uid_t uid;
};

static inline void tu_setup(struct tu *t, const char *name)
{
	const char *lib = getenv("PADDOCK_LIB_DIR");
	char path[4096], err[256];
	int status, r;
	pid_t pid;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (geteuid() != 0)
		tu_skip("needs root (namespaces, cgroups, mounts)");
	pid = fork();
	if (pid == 0)
		_exit(unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET) == 0 ? 0 : 1);
	if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) ||
	    WEXITSTATUS(status) != 0)
		tu_skip("cannot create mount/pid/net namespaces here");
	if (!lib)
		tu_skip("PADDOCK_LIB_DIR is not set (ctest sets it to the build's lib dir)");
	snprintf(path, sizeof(path), "%s/paddock-init", lib);
	if (access(path, X_OK) < 0)
		tu_skip("paddock-init is not built in PADDOCK_LIB_DIR");

	snprintf(t->state, sizeof(t->state), "/tmp/paddock-%s-XXXXXX", name);
	if (!mkdtemp(t->state))
		tu_die("mkdtemp", errno);
	snprintf(t->cgroot, sizeof(t->cgroot), "paddock-%s-%d", name, (int)getpid());
	setenv("PADDOCK_STATE_DIR", t->state, 1);
	setenv("PADDOCK_CGROUP_ROOT", t->cgroot, 1);
	setenv("PADDOCK_WORKSPACE_BYTES", "16M", 1); /* the size the workspace template is made */
	r = config_load(&t->cfg, NULL, err, sizeof(err));
	if (r < 0) {
		fprintf(stderr, "config_load: %s\n", err);
		exit(1);
	}
	r = sandbox_env_new(&t->cfg, &t->env);
	if (r == -EOPNOTSUPP) {
		printf("SKIP: %s\n", sandbox_last_error());
		exit(77);
	}
	if (r < 0)
		tu_die("sandbox_env_new", r);
	t->uid = (uid_t)t->cfg.uid_base + 7;
	t->lim = (SandboxLimits){
		.memory_bytes = 256LL << 20,
		.pids = 64,
		.cpu_percent = 100,
		.workspace_bytes = t->cfg.workspace_bytes,
		.tmp_bytes = 8 << 20,
		.nofile = 256,
		.egress = t->cfg.egress,
	};
}

static inline void tu_teardown(struct tu *t)
{
	char path[4200];
	glob_t g;

	sandbox_env_free(t->env);
	config_free(&t->cfg);
	snprintf(path, sizeof(path), "/sys/fs/cgroup/*/%s", t->cgroot);
	if (glob(path, 0, NULL, &g) == 0) {
		for (size_t i = 0; i < g.gl_pathc; i++)
			CHECK(rmdir(g.gl_pathv[i]) == 0, "rmdir %s: %s", g.gl_pathv[i],
			      strerror(errno));
		globfree(&g);
	}
	snprintf(path, sizeof(path), "/sys/fs/cgroup/%s", t->cgroot);
	rmdir(path);
	snprintf(path, sizeof(path), "%s/root", t->state);
	rmdir(path);
	snprintf(path, sizeof(path), "%s/workspaces", t->state);
	rmdir(path);
	CHECK(rmdir(t->state) == 0, "rmdir %s: %s", t->state, strerror(errno));
}

/* Kill the sandbox, reap its init, remove its cgroup and workspace. */
static inline void tu_destroy(struct tu *t, const char *id, Sandbox *sb)
{
	int pidfd = sb->pidfd >= 0 ? dup(sb->pidfd) : -1;
	siginfo_t si;

	sandbox_kill(sb);
	if (pidfd >= 0) {
		while (waitid(P_PIDFD, pidfd, &si, WEXITED) < 0 && errno == EINTR)
			;
		close(pidfd);
	}
	CHECK(sandbox_cgroup_remove_wait(t->env, id, 2000, 1) == 0, "cgroup remove: %s",
	      sandbox_last_error());
	CHECK(workspace_destroy(t->env, id) == 0, "workspace_destroy: %s", sandbox_last_error());
}

static inline void tu_spawn(struct tu *t, const char *id, Sandbox *sb)
{
	int r = sandbox_spawn(t->env, id, t->uid, t->uid, &t->lim, sb);

	if (r < 0)
		tu_die("sandbox_spawn", r);
}

static inline int tu_send(int ctl, const struct init_msg *m, const char *blob, size_t bloblen)
{
	char buf[INIT_MSG_MAX];

	if (sizeof(*m) + bloblen > sizeof(buf))
		return -EMSGSIZE;
	memcpy(buf, m, sizeof(*m));
	if (bloblen)
		memcpy(buf + sizeof(*m), blob, bloblen);
	return send(ctl, buf, sizeof(*m) + bloblen, MSG_NOSIGNAL) < 0 ? -errno : 0;
}

/* Receive one message from init (waiting up to TU_TIMEOUT_MS); its fds land in fds[4],
 * their number in *nfds. */
static inline int tu_recv(int ctl, struct init_msg *m, int fds[4], int *nfds)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(8 * sizeof(int))];
	} cm;
	struct iovec iov = { m, sizeof(*m) };
	struct msghdr mh = { .msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = cm.buf,
			     .msg_controllen = sizeof(cm.buf) };
	struct pollfd p = { .fd = ctl, .events = POLLIN };
	ssize_t n;

	*nfds = 0;
	if (poll(&p, 1, TU_TIMEOUT_MS) <= 0)
		return -ETIMEDOUT;
	n = recvmsg(ctl, &mh, MSG_CMSG_CLOEXEC);
	if (n < 0)
		return -errno;
	if ((size_t)n != sizeof(*m))
		return -EBADMSG;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		*nfds = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		if (*nfds > 4)
			*nfds = 4;
		memcpy(fds, CMSG_DATA(c), (size_t)*nfds * sizeof(int));
	}
	return 0;
}

/* Wait for a message of op (and tag, if not 0); its fds land in fds[4] (or are closed). */
static inline int tu_wait_for(int ctl, uint32_t op, uint32_t tag, struct init_msg *m, int fds[4])
{
	double deadline = tu_now_ms() + TU_TIMEOUT_MS;

	while (tu_now_ms() < deadline) {
		int got[4] = { -1, -1, -1, -1 }, nfds;
		int r = tu_recv(ctl, m, got, &nfds);

		if (r < 0)
			return r;
		if (m->op == op && (tag == 0 || m->tag == tag)) {
			if (fds)
				memcpy(fds, got, sizeof(got));
			else
				for (int i = 0; i < nfds; i++)
					close(got[i]);
			return nfds;
		}
		for (int i = 0; i < nfds; i++)
			close(got[i]);
	}
	return -ETIMEDOUT;
}

/* Start argv in the sandbox; fds get pidfd, ctl, stdout, stderr. */
static inline int tu_spawn_argv(int ctl, uint32_t tag, const char *const *argv, int fds[4],
				pid_t *pid)
{
	static const char env[] = "PATH=/usr/bin:/bin\0HOME=/workspace\0";
	struct init_msg m = { .op = INIT_SPAWN, .seq = tag, .tag = tag };
	char blob[8192];
	size_t len = 0;
	int r;

	for (size_t i = 0; argv[i]; i++) {
		size_t l = strlen(argv[i]) + 1;

		if (len + l + sizeof(env) + 2 > sizeof(blob))
			return -E2BIG;
		memcpy(blob + len, argv[i], l);
		len += l;
	}
	blob[len++] = '\0';
	memcpy(blob + len, env, sizeof(env) - 1);
	len += sizeof(env) - 1;
	blob[len++] = '\0';
	r = tu_send(ctl, &m, blob, len);
	if (r < 0)
		return r;
	r = tu_wait_for(ctl, INIT_SPAWNED, tag, &m, fds);
	if (r < 0)
		return r;
	if (r != 4)
		return -EBADMSG;
	*pid = m.pid;
	return 0;
}

/* Start shell -c script in the sandbox (shell: /bin/sh or /bin/bash). */
static inline int tu_spawn_shell(int ctl, uint32_t tag, const char *shell, const char *script,
				 int fds[4], pid_t *pid)
{
	const char *argv[] = { shell, "-c", script, NULL };

	return tu_spawn_argv(ctl, tag, argv, fds, pid);
}

static inline int tu_spawn_sh(int ctl, uint32_t tag, const char *script, int fds[4], pid_t *pid)
{
	return tu_spawn_shell(ctl, tag, "/bin/sh", script, fds, pid);
}

static inline ssize_t tu_read_all(int fd, char *buf, size_t len)
{
	size_t got = 0;

	while (got + 1 < len) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (poll(&p, 1, TU_TIMEOUT_MS) <= 0)
			return -ETIMEDOUT;
		n = read(fd, buf + got, len - 1 - got);
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		got += n;
	}
	buf[got] = '\0';
	return got;
}

static inline void tu_close_fds(int fds[4])
{
	for (int i = 0; i < 4; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

/* Run a shell script in the sandbox and collect its stdout; returns its wait status. */
static inline int tu_run_shell(Sandbox *sb, uint32_t tag, const char *shell, const char *script,
			       char *out, size_t len)
{
	int fds[4] = { -1, -1, -1, -1 };
	struct init_msg m;
	pid_t pid;
	int r = tu_spawn_shell(sb->ctl_fd, tag, shell, script, fds, &pid);

	if (r < 0)
		return r;
	r = tu_read_all(fds[2], out, len) < 0 ? -ETIMEDOUT : 0;
	if (r == 0)
		r = tu_wait_for(sb->ctl_fd, INIT_EXITED, tag, &m, NULL);
	tu_close_fds(fds);
	return r < 0 ? r : m.status;
}

static inline int tu_run_sh(Sandbox *sb, uint32_t tag, const char *script, char *out, size_t len)
{
	return tu_run_shell(sb, tag, "/bin/sh", script, out, len);
}

static inline bool tu_has_line(const char *out, const char *line)
{
	size_t l = strlen(line);

	for (const char *p = out; (p = strstr(p, line)); p += l)
		if ((p == out || p[-1] == '\n') && (p[l] == '\n' || p[l] == '\0'))
			return true;
	return false;
}

/* The host pid behind a pidfd, from its fdinfo. */
static inline pid_t tu_pidfd_pid(int pidfd)
{
	char path[64], line[128];
	FILE *f;
	long pid = -1;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", pidfd);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Pid: %ld", &pid) == 1)
			break;
	fclose(f);
	return (pid_t)pid;
}
