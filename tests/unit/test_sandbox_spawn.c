/* SPDX-License-Identifier: MIT */
/* Sandbox test (root): spawn a session sandbox, probe it from inside, kill it, leave nothing. */
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "init/init_proto.h"
#include "sandbox/sandbox.h"
#include "test_sandbox_util.h"

#define ID "t1"
#define MEMORY_BYTES (256LL << 20)
#define TIMEOUT_MS 10000
#define SPAWN_RUNS 20

static bool namespaces_available(void)
{
	int status;
	pid_t pid = fork();

	if (pid == 0)
		_exit(unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC |
			      CLONE_NEWUTS) == 0 ?
			      0 :
			      1);
	if (pid < 0 || waitpid(pid, &status, 0) < 0)
		return false;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static bool lo_up(int pidfd)
{
	int self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC), s = -1;
	struct ifreq ifr = { 0 };
	bool up = false;

	if (self < 0)
		return false;
	if (setns(pidfd, CLONE_NEWNET) == 0) {
		s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		if (setns(self, CLONE_NEWNET) < 0)
			tu_die("returning to our netns", errno);
	}
	close(self);
	if (s < 0)
		return false;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (ioctl(s, SIOCGIFFLAGS, &ifr) == 0)
		up = ifr.ifr_flags & IFF_UP;
	close(s);
	return up;
}

/* The memory limit of init's cgroup, from the path the kernel reports for it. */
static long long memory_limit_of(pid_t pid)
{
	char path[512], line[512], file[700];
	FILE *f;
	long long v = -1;

	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	file[0] = '\0';
	while (fgets(line, sizeof(line), f)) {
		char *ctrl = strchr(line, ':'), *cg;

		if (!ctrl)
			continue;
		cg = strchr(ctrl + 1, ':');
		if (!cg)
			continue;
		*cg++ = '\0';
		cg[strcspn(cg, "\n")] = '\0';
		if (strcmp(ctrl + 1, "memory") == 0) {
			snprintf(file, sizeof(file),
				 "/sys/fs/cgroup/memory%s/memory.limit_in_bytes", cg);
			break;
		}
		if (strncmp(line, "0", 1) == 0 && ctrl[1] == '\0' && !file[0])
			snprintf(file, sizeof(file), "/sys/fs/cgroup%s/memory.max", cg);
	}
	fclose(f);
	f = file[0] ? fopen(file, "re") : NULL;
	if (f) {
		if (fscanf(f, "%lld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

/* Kill the sandbox and wait until its init is gone and reaped. */
static void kill_and_reap(Sandbox *sb)
{
	int pidfd = dup(sb->pidfd);
	struct pollfd p = { .fd = pidfd, .events = POLLIN };
	siginfo_t si;

	sandbox_kill(sb);
	CHECK(sb->pidfd < 0 && sb->ctl_fd < 0, "sandbox_kill leaves fds open");
	CHECK(poll(&p, 1, TIMEOUT_MS) == 1, "init did not exit after sandbox_kill");
	CHECK(waitid(P_PIDFD, pidfd, &si, WEXITED) == 0, "waitid: %s", strerror(errno));
	close(pidfd);
}

static void probe(Sandbox *sb, uid_t uid, int64_t nofile)
{
	static const char script[] =
		"echo uid=$(id -u); echo user=$(id -un);"
		"grep -E '^(NoNewPrivs|CapEff|CapPrm|CapBnd):' /proc/self/status;"
		"echo ifaces=$(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\\n' ,);"
		"if touch /probe 2>/dev/null; then echo root=rw; else echo root=ro; fi;"
		"if touch /usr/probe 2>/dev/null; then echo usr=rw; else echo usr=ro; fi;"
		"if touch /workspace/probe; then echo ws=rw; else echo ws=ro; fi;"
		"if touch /tmp/probe; then echo tmp=rw; else echo tmp=ro; fi;"
		"if [ -e /etc/shadow ]; then echo shadow=present; else echo shadow=absent; fi;"
		"echo pid=$$; echo host=$(cat /proc/sys/kernel/hostname); echo cwd=$(pwd);"
		"echo stdin=$(cat);"
		"if echo x >/dev/null; then echo devnull=ok; fi;"
		"echo urandom=$(head -c 4 /dev/urandom | wc -c);"
		"if touch /dev/shm/probe; then echo shm=rw; fi;"
		"if touch /dev/probe 2>/dev/null; then echo dev=rw; else echo dev=ro; fi;"
		"if touch /etc/probe 2>/dev/null; then echo etc=rw; else echo etc=ro; fi;"
		"if [ -c /proc/keys ]; then echo keys=masked; fi;"
		"if echo 1 >/proc/sys/kernel/hostname 2>/dev/null; then echo procsys=rw; "
		"else echo procsys=ro; fi;"
		"grep -q ' /workspace .*nosuid,nodev' /proc/self/mountinfo && echo ws_flags=ok;"
		"grep -q ' /tmp .*nosuid,nodev' /proc/self/mountinfo && echo tmp_flags=ok;"
		"echo nofile=$(ulimit -n); echo core=$(ulimit -c);"
		"echo mounts=$(wc -l </proc/self/mountinfo)";
	char out[8192], want[64];
	int fds[4] = { -1, -1, -1, -1 };
	struct init_msg m;
	pid_t pid = 0;
	int r;

	r = tu_spawn_sh(sb->ctl_fd, 7, script, fds, &pid);
	if (r < 0)
		tu_die("INIT_SPAWN of the probe", r);
	CHECK(tu_read_all(fds[2], out, sizeof(out)) > 0, "no probe output");
	printf("probe output:\n%s", out);
	r = tu_wait_for(sb->ctl_fd, INIT_EXITED, 7, &m, NULL);
	CHECK(r >= 0 && m.pid == pid && WIFEXITED(m.status) && WEXITSTATUS(m.status) == 0,
	      "probe exit: r=%d status=%#x", r, m.status);
	tu_close_fds(fds);

	snprintf(want, sizeof(want), "uid=%u", (unsigned)uid);
	CHECK(tu_has_line(out, want), "want %s", want);
	CHECK(tu_has_line(out, "user=sandbox"), "passwd names the session uid sandbox");
	CHECK(tu_has_line(out, "NoNewPrivs:\t1"), "no_new_privs");
	CHECK(tu_has_line(out, "CapEff:\t0000000000000000"), "effective caps");
	CHECK(tu_has_line(out, "CapPrm:\t0000000000000000"), "permitted caps");
	CHECK(tu_has_line(out, "CapBnd:\t0000000000000000"), "bounding set");
	CHECK(tu_has_line(out, "ifaces=lo,"), "only lo in the netns");
	CHECK(tu_has_line(out, "root=ro"), "/ read-only");
	CHECK(tu_has_line(out, "usr=ro"), "/usr read-only");
	CHECK(tu_has_line(out, "ws=rw"), "/workspace writable");
	CHECK(tu_has_line(out, "tmp=rw"), "/tmp writable");
	CHECK(tu_has_line(out, "shadow=absent"), "/etc/shadow hidden");
	CHECK(tu_has_line(out, "pid=2") || tu_has_line(out, "pid=3"), "shell pid small (pid ns)");
	CHECK(tu_has_line(out, "host=sandbox"), "hostname");
	CHECK(tu_has_line(out, "cwd=/workspace"), "cwd");
	CHECK(tu_has_line(out, "stdin="), "stdin is /dev/null");
	CHECK(tu_has_line(out, "devnull=ok"), "/dev/null writable");
	CHECK(tu_has_line(out, "urandom=4"), "/dev/urandom readable");
	CHECK(tu_has_line(out, "shm=rw"), "/dev/shm writable");
	CHECK(tu_has_line(out, "dev=ro"), "/dev read-only");
	CHECK(tu_has_line(out, "etc=ro"), "/etc read-only");
	CHECK(tu_has_line(out, "keys=masked"), "/proc/keys masked");
	CHECK(tu_has_line(out, "procsys=ro"), "/proc/sys read-only");
	CHECK(tu_has_line(out, "ws_flags=ok"), "/workspace nosuid,nodev");
	CHECK(tu_has_line(out, "tmp_flags=ok"), "/tmp nosuid,nodev");
	CHECK(tu_has_line(out, "core=0"), "no core dumps");
	snprintf(want, sizeof(want), "nofile=%lld", (long long)nofile);
	CHECK(tu_has_line(out, want), "want %s", want);
}

/* INIT_RESEND then PING: every live interpreter comes again with its fds, before the PONG. */
static void resend_test(Sandbox *sb, pid_t a, pid_t b)
{
	struct init_msg m = { .op = INIT_RESEND, .seq = 40 };
	int seen = 0;

	CHECK(tu_send(sb->ctl_fd, &m, NULL, 0) == 0, "send RESEND");
	m = (struct init_msg){ .op = INIT_PING, .seq = 41 };
	CHECK(tu_send(sb->ctl_fd, &m, NULL, 0) == 0, "send PING");
	for (;;) {
		int fds[4], nfds, r = tu_recv(sb->ctl_fd, &m, fds, &nfds);

		if (r < 0 || m.op == INIT_PONG)
			break;
		if (m.op == INIT_SPAWNED && m.seq == 40 && nfds == 4 &&
		    ((m.pid == a && m.tag == 21) || (m.pid == b && m.tag == 22)))
			seen++;
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
	}
	CHECK(seen == 2, "RESEND re-sent %d of 2 interpreters", seen);
}

/* What a restarted sessiond does: take its end of the control socket back from init. */
static void readopt_test(Sandbox *sb)
{
	int fd = syscall(SYS_pidfd_getfd, sb->pidfd, sb->ctl_fd_in_init, 0);
	struct init_msg m = { .op = INIT_PING, .seq = 99 };
	int r;

	CHECK(fd >= 0, "pidfd_getfd: %s", strerror(errno));
	if (fd < 0)
		return;
	CHECK(tu_send(fd, &m, NULL, 0) == 0, "PING on the recovered fd");
	r = tu_wait_for(fd, INIT_PONG, 0, &m, NULL);
	CHECK(r >= 0 && m.seq == 99, "PONG on the recovered fd");
	close(fd);
}

/* Bad requests get INIT_ERROR; a failed exec is an exit with 127 and a word on stderr. */
static void error_test(Sandbox *sb)
{
	static const char bad_blob[] = { 'x', 'y' }; /* no NUL */
	const char *argv[] = { "/nonexistent", NULL };
	struct init_msg m = { .op = 77, .seq = 2 };
	int fds[4] = { -1, -1, -1, -1 };
	char err[256];
	pid_t pid;
	int r;

	CHECK(tu_send(sb->ctl_fd, &m, NULL, 0) == 0, "send bad op");
	r = tu_wait_for(sb->ctl_fd, INIT_ERROR, 0, &m, NULL);
	CHECK(r >= 0 && m.seq == 2 && m.status == EINVAL, "bad op gets INIT_ERROR");

	m = (struct init_msg){ .op = INIT_SPAWN, .seq = 3 };
	CHECK(tu_send(sb->ctl_fd, &m, bad_blob, sizeof(bad_blob)) == 0, "send bad blob");
	r = tu_wait_for(sb->ctl_fd, INIT_ERROR, 0, &m, NULL);
	CHECK(r >= 0 && m.seq == 3 && m.status == EINVAL, "bad blob gets INIT_ERROR");

	CHECK(send(sb->ctl_fd, "hi", 2, 0) == 2, "send short datagram");
	r = tu_wait_for(sb->ctl_fd, INIT_ERROR, 0, &m, NULL);
	CHECK(r >= 0 && m.status == EINVAL, "short datagram gets INIT_ERROR");

	r = tu_spawn_argv(sb->ctl_fd, 9, argv, fds, &pid);
	CHECK(r == 0, "spawn of a missing program still forks: %s", strerror(-r));
	if (r < 0)
		return;
	CHECK(tu_read_all(fds[3], err, sizeof(err)) > 0 && strstr(err, "/nonexistent"),
	      "exec error on stderr");
	r = tu_wait_for(sb->ctl_fd, INIT_EXITED, 9, &m, NULL);
	CHECK(r >= 0 && WIFEXITED(m.status) && WEXITSTATUS(m.status) == 127, "exit 127");
	tu_close_fds(fds);
}

static void kill_test(SandboxEnv *env, Sandbox *sb)
{
	int kept[4] = { -1, -1, -1, -1 }, other[4] = { -1, -1, -1, -1 };
	struct init_msg m = { .op = INIT_KILL, .seq = 50 };
	SandboxUsage u;
	pid_t kept_pid = 0, other_pid = 0;
	char line[64];
	int r;

	r = tu_spawn_sh(sb->ctl_fd, 21, "exec sleep 1000", kept, &kept_pid);
	if (r < 0)
		tu_die("INIT_SPAWN sleep", r);
	r = tu_spawn_sh(sb->ctl_fd, 22, "setsid sleep 1000 & echo started; exec sleep 1000", other,
			&other_pid);
	if (r < 0)
		tu_die("INIT_SPAWN setsid sleep", r);
	/* The background sleep exists once the shell says so. */
	{
		struct pollfd p = { .fd = other[2], .events = POLLIN };
		ssize_t n =
			poll(&p, 1, TIMEOUT_MS) == 1 ? read(other[2], line, sizeof(line) - 1) : -1;

		CHECK(n > 0 && strncmp(line, "started", 7) == 0, "background sleep started");
	}
	resend_test(sb, kept_pid, other_pid);
	CHECK(sandbox_usage(env, ID, &u) == 0 && u.pids_current == 4,
	      "pids.current before kill: %llu", (unsigned long long)u.pids_current);

	m.keep[0] = kept_pid;
	r = tu_send(sb->ctl_fd, &m, NULL, 0);
	CHECK(r == 0, "send INIT_KILL");
	r = tu_wait_for(sb->ctl_fd, INIT_KILLED, 0, &m, NULL);
	CHECK(r >= 0 && m.seq == 50, "INIT_KILLED with keep");
	CHECK(sandbox_usage(env, ID, &u) == 0 && u.pids_current == 2,
	      "after kill with keep: init and the kept sleep remain, pids.current=%llu",
	      (unsigned long long)u.pids_current);

	m = (struct init_msg){ .op = INIT_KILL, .seq = 51 };
	r = tu_send(sb->ctl_fd, &m, NULL, 0);
	CHECK(r == 0, "send INIT_KILL");
	r = tu_wait_for(sb->ctl_fd, INIT_KILLED, 0, &m, NULL);
	CHECK(r >= 0 && m.seq == 51, "INIT_KILLED");
	CHECK(sandbox_usage(env, ID, &u) == 0 && u.pids_current == 1,
	      "after kill: only init remains, pids.current=%llu",
	      (unsigned long long)u.pids_current);
	printf("usage: cpu %llu ns, memory %llu (peak %llu), oom kills %llu\n",
	       (unsigned long long)u.cpu_ns, (unsigned long long)u.memory_current,
	       (unsigned long long)u.memory_peak, (unsigned long long)u.oom_kills);
	tu_close_fds(kept);
	tu_close_fds(other);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static void timing(SandboxEnv *env, const SandboxLimits *lim, uid_t uid)
{
	double spawn[SPAWN_RUNS], pong[SPAWN_RUNS];

	for (int i = 0; i < SPAWN_RUNS; i++) {
		Sandbox sb;
		struct init_msg m = { .op = INIT_PING, .seq = 1000 + i };
		double t0 = tu_now_ms();
		int r = sandbox_spawn(env, "timing", uid, uid, lim, &sb);

		if (r < 0)
			tu_die("sandbox_spawn (timing)", r);
		spawn[i] = tu_now_ms() - t0;
		r = tu_send(sb.ctl_fd, &m, NULL, 0);
		if (r >= 0)
			r = tu_wait_for(sb.ctl_fd, INIT_PONG, 0, &m, NULL);
		pong[i] = tu_now_ms() - t0;
		CHECK(r >= 0, "PONG in timing run %d", i);
		kill_and_reap(&sb);
		CHECK(sandbox_cgroup_remove_wait(env, "timing", 1000, 1) == 0,
		      "cgroup remove in timing run %d", i);
		CHECK(workspace_destroy(env, "timing") == 0, "workspace destroy in timing run %d",
		      i);
	}
	qsort(spawn, SPAWN_RUNS, sizeof(double), cmp_double);
	qsort(pong, SPAWN_RUNS, sizeof(double), cmp_double);
	printf("spawn time over %d runs: median %.2f ms (min %.2f, max %.2f); "
	       "to first PONG: median %.2f ms\n",
	       SPAWN_RUNS, spawn[SPAWN_RUNS / 2], spawn[0], spawn[SPAWN_RUNS - 1],
	       pong[SPAWN_RUNS / 2]);
}

/* Leave nothing behind on the machine: our cgroup parents and the state dir. */
static void cleanup_host(const char *state, const char *cgroot)
{
	char path[4200];
	glob_t g;

	snprintf(path, sizeof(path), "/sys/fs/cgroup/*/%s", cgroot);
	if (glob(path, 0, NULL, &g) == 0) {
		for (size_t i = 0; i < g.gl_pathc; i++)
			CHECK(rmdir(g.gl_pathv[i]) == 0, "rmdir %s: %s", g.gl_pathv[i],
			      strerror(errno));
		globfree(&g);
	}
	snprintf(path, sizeof(path), "/sys/fs/cgroup/%s", cgroot);
	rmdir(path);
	snprintf(path, sizeof(path), "%s/root", state);
	CHECK(rmdir(path) == 0 || errno == ENOENT, "rmdir %s: %s", path, strerror(errno));
	snprintf(path, sizeof(path), "%s/workspaces", state);
	CHECK(rmdir(path) == 0 || errno == ENOENT, "rmdir %s: %s", path, strerror(errno));
	CHECK(rmdir(state) == 0, "rmdir %s: %s", state, strerror(errno));
}

int main(void)
{
	char state[] = "/tmp/paddock-sandbox-test-XXXXXX";
	char cgroot[64], err[256], path[4096], wsdir[4200];
	PaddockConfig cfg = { 0 };
	SandboxEnv *env = NULL;
	SandboxLimits lim;
	Sandbox sb;
	struct init_msg m;
	struct stat st;
	char **ids = NULL;
	size_t n_ids = 0;
	const char *lib = getenv("PADDOCK_LIB_DIR");
	uid_t uid;
	int r;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (geteuid() != 0)
		tu_skip("needs root (namespaces, cgroups, mounts)");
	if (!namespaces_available())
		tu_skip("cannot create mount/pid/net/ipc/uts namespaces here");
	if (!lib)
		tu_skip("PADDOCK_LIB_DIR is not set (ctest sets it to the build's lib dir)");
	snprintf(path, sizeof(path), "%s/paddock-init", lib);
	if (access(path, X_OK) < 0)
		tu_skip("paddock-init is not built in PADDOCK_LIB_DIR");
	if (!mkdtemp(state))
		tu_die("mkdtemp", errno);

	/* A cgroup parent of our own, so that we can remove it afterwards. */
	snprintf(cgroot, sizeof(cgroot), "paddock-test-%d", (int)getpid());
	setenv("PADDOCK_STATE_DIR", state, 1);
	setenv("PADDOCK_CGROUP_ROOT", cgroot, 1);
	setenv("PADDOCK_WORKSPACE_BYTES", "64M", 1); /* the size the workspace template is made */
	r = config_load(&cfg, NULL, err, sizeof(err));
	if (r < 0) {
		fprintf(stderr, "config_load: %s\n", err);
		return 1;
	}
	r = sandbox_env_new(&cfg, &env);
	if (r == -EOPNOTSUPP) {
		printf("SKIP: %s\n", sandbox_last_error());
		cleanup_host(state, cgroot);
		return 77;
	}
	if (r < 0)
		tu_die("sandbox_env_new", r);
	printf("cgroup %s\n", sandbox_env_cgroup_version(env));

	uid = (uid_t)cfg.uid_base;
	lim = (SandboxLimits){
		.memory_bytes = MEMORY_BYTES,
		.pids = 64,
		.cpu_percent = 100,
		.workspace_bytes = cfg.workspace_bytes,
		.tmp_bytes = 32 << 20,
		.nofile = cfg.nofile_max,
		.egress = cfg.egress,
	};

	CHECK(sandbox_spawn(env, "a/b", uid, uid, &lim, &sb) == -EINVAL, "bad id refused");
	/* A failed spawn (the id's workspace is there already) says where, leaves no cgroup
	 * and leaves alone the directory it did not make. */
	snprintf(wsdir, sizeof(wsdir), "%s/workspaces/taken", state);
	CHECK(mkdir(wsdir, 0700) == 0, "mkdir %s", wsdir);
	r = sandbox_spawn(env, "taken", uid, uid, &lim, &sb);
	CHECK(r == -EEXIST && strstr(sandbox_last_error(), "workspace"),
	      "spawn onto an existing workspace: %d %s", r, sandbox_last_error());
	r = sandbox_list_leftovers(env, &ids, &n_ids);
	CHECK(r == 0 && n_ids == 1 && strcmp(ids[0], "taken") == 0,
	      "failed spawn left %zu ids besides the directory", n_ids);
	for (size_t i = 0; i < n_ids; i++)
		free(ids[i]);
	free(ids);
	ids = NULL;
	CHECK(rmdir(wsdir) == 0, "the directory is still a plain directory");

	r = sandbox_spawn(env, ID, uid, uid, &lim, &sb);
	if (r < 0)
		tu_die("sandbox_spawn", r);
	r = workspace_open(env, ID);
	CHECK(r >= 0, "workspace_open: %s", strerror(-r));
	if (r >= 0) {
		CHECK(fstat(r, &st) == 0 && st.st_uid == uid && (st.st_mode & 0777) == 0700,
		      "workspace root owned by the session, 0700");
		close(r);
	}
	CHECK(sb.ctl_fd_in_init == 4, "ctl fd in init");

	m = (struct init_msg){ .op = INIT_PING, .seq = 1 };
	CHECK(tu_send(sb.ctl_fd, &m, NULL, 0) == 0, "send PING");
	r = tu_wait_for(sb.ctl_fd, INIT_PONG, 0, &m, NULL);
	CHECK(r >= 0 && m.seq == 1, "PONG");

	error_test(&sb);
	readopt_test(&sb);

	CHECK(lo_up(sb.pidfd), "lo is up in the sandbox's netns");
	CHECK(memory_limit_of(sb.pid) == MEMORY_BYTES, "memory limit reads back %lld",
	      memory_limit_of(sb.pid));

	probe(&sb, uid, lim.nofile);
	kill_test(env, &sb);

	kill_and_reap(&sb);
	CHECK(sandbox_cgroup_remove_wait(env, ID, 1000, 1) == 0, "sandbox_cgroup_remove: %s",
	      sandbox_last_error());

	timing(env, &lim, uid);

	r = sandbox_list_leftovers(env, &ids, &n_ids);
	CHECK(r == 0 && n_ids == 1 && strcmp(ids[0], ID) == 0, "leftovers: the workspace only");
	for (size_t i = 0; i < n_ids; i++)
		free(ids[i]);
	free(ids);

	CHECK(workspace_destroy(env, ID) == 0, "workspace_destroy: %s", sandbox_last_error());
	CHECK(workspace_destroy(env, ID) == 0, "workspace_destroy twice");
	snprintf(wsdir, sizeof(wsdir), "%s/workspaces/%s", state, ID);
	CHECK(stat(wsdir, &st) < 0 && errno == ENOENT, "workspace dir gone");
	r = sandbox_list_leftovers(env, &ids, &n_ids);
	CHECK(r == 0 && n_ids == 0, "no leftovers");
	free(ids);

	sandbox_env_free(env);
	config_free(&cfg);

	cleanup_host(state, cgroot);

	return tu_summary();
}
