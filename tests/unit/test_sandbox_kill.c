/* SPDX-License-Identifier: MIT */
/* Sandbox test (root): sandbox_cgroup_kill() ends fork bombs and setsid double forks, spares the kept. */
#include <stdatomic.h>
#include <sys/mman.h>

#include "sandbox/sandbox_internal.h"
#include "test_sandbox_util.h"

#define ID "k1"
/* Processes the bounded bomb of the v2 test may make in all. */
#define BOMB_MAX 300

static uint64_t pids_current(SandboxEnv *env)
{
	SandboxUsage u;

	return sandbox_usage(env, ID, &u) == 0 ? u.pids_current : UINT64_MAX;
}

/* pids.current once it is down to want, or what it still is after a bounded wait: the
 * killed are zombies, still counted, until the sandbox's init reaps them. */
static uint64_t pids_settled(SandboxEnv *env, uint64_t want)
{
	double t0 = tu_now_ms();
	uint64_t n;

	while ((n = pids_current(env)) > want && tu_now_ms() - t0 < 2000)
		tu_sleep_ms(1);
	return n;
}

static bool pidfd_alive(int pidfd)
{
	struct pollfd p = { .fd = pidfd, .events = POLLIN };

	return poll(&p, 1, 0) == 0;
}

static bool init_answers(Sandbox *sb, uint32_t seq)
{
	struct init_msg m = { .op = INIT_PING, .seq = seq };

	return tu_send(sb->ctl_fd, &m, NULL, 0) == 0 &&
	       tu_wait_for(sb->ctl_fd, INIT_PONG, 0, &m, NULL) >= 0 && m.seq == seq;
}

/* In a real sandbox (pids.max 64): a fork bomb racing at its limit, and setsid daemons. */
static void sandbox_test(struct tu *t)
{
	static const char hostile[] =
		"setsid sh -c 'sleep 1000 & sleep 1000 & exec sleep 1000' </dev/null >/dev/null 2>&1 &"
		"(setsid sleep 1000 &) ;"
		"exec python3 -c 'import os\nwhile True:\n try: os.fork()\n except OSError: pass'";
	int kept[4] = { -1, -1, -1, -1 }, bomb[4] = { -1, -1, -1, -1 };
	pid_t kept_pid, bomb_pid, keep[2];
	Sandbox sb;
	double t0, took;
	int r;

	tu_spawn(t, ID, &sb);
	r = tu_spawn_sh(sb.ctl_fd, 1, "exec sleep 1000", kept, &kept_pid);
	if (r < 0)
		tu_die("spawn the kept sleep", r);
	r = tu_spawn_sh(sb.ctl_fd, 2, hostile, bomb, &bomb_pid);
	if (r < 0)
		tu_die("spawn the bomb", r);
	/* The bomb is at its limit once pids.current reaches pids.max. */
	t0 = tu_now_ms();
	while (pids_current(t->env) < (uint64_t)t->lim.pids && tu_now_ms() - t0 < TU_TIMEOUT_MS)
		tu_sleep_ms(5);
	CHECK(pids_current(t->env) >= (uint64_t)t->lim.pids - 2, "bomb reached %llu tasks",
	      (unsigned long long)pids_current(t->env));

	keep[0] = sb.pid;
	keep[1] = tu_pidfd_pid(kept[0]);
	CHECK(keep[1] > 0, "host pid of the kept sleep");
	t0 = tu_now_ms();
	r = sandbox_cgroup_kill(t->env, ID, keep, 2);
	took = tu_now_ms() - t0;
	printf("kill of a fork bomb at pids.max %lld, keeping 2: %.2f ms\n", (long long)t->lim.pids,
	       took);
	CHECK(r == 0, "sandbox_cgroup_kill: %s", sandbox_last_error());
	CHECK(pids_settled(t->env, 2) == 2, "init and the kept sleep remain: pids.current %llu",
	      (unsigned long long)pids_current(t->env));
	CHECK(pidfd_alive(kept[0]), "the kept sleep lives");
	CHECK(!pidfd_alive(bomb[0]) || tu_pidfd_pid(bomb[0]) <= 0, "the bomb's shell is dead");
	CHECK(init_answers(&sb, 10), "init answers after the kill");

	/* Keeping only init: the kept sleep goes too, init stays. */
	r = sandbox_cgroup_kill(t->env, ID, keep, 1);
	CHECK(r == 0, "sandbox_cgroup_kill keeping init: %s", sandbox_last_error());
	CHECK(pids_settled(t->env, 1) == 1, "init alone remains: %llu",
	      (unsigned long long)pids_current(t->env));
	CHECK(init_answers(&sb, 11), "init answers");

	/* Nothing kept: the sandbox is empty, init included. */
	r = sandbox_cgroup_kill(t->env, ID, NULL, 0);
	CHECK(r == 0, "sandbox_cgroup_kill of all: %s", sandbox_last_error());
	CHECK(!pidfd_alive(sb.pidfd), "init is dead");
	{
		siginfo_t si;

		/* Init is our child: a zombie (still counted) until reaped. */
		CHECK(waitid(P_PIDFD, sb.pidfd, &si, WEXITED) == 0, "reap init");
	}
	CHECK(pids_current(t->env) == 0, "no task remains: %llu",
	      (unsigned long long)pids_current(t->env));
	CHECK(sandbox_cgroup_kill(t->env, "gone", NULL, 0) == 0, "a missing cgroup is no error");
	tu_close_fds(kept);
	tu_close_fds(bomb);
	tu_destroy(t, ID, &sb);
}

/*
 * Every process forks children (each in a new session) until BOMB_MAX were
 * made in all: a bounded bomb, for a hierarchy with no pids controller.
 */
static _Noreturn void bounded_bomb(atomic_int *made)
{
	for (;;) {
		if (atomic_fetch_add(made, 1) >= BOMB_MAX) {
			pause();
			continue;
		}
		if (fork() == 0)
			setsid();
	}
}

static int write_str(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, s, strlen(s));
	close(fd);
	return n == (ssize_t)strlen(s) ? 0 : -errno;
}

static int count_procs(const char *dir)
{
	char path[512];
	FILE *f;
	long pid;
	int n = 0;

	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fscanf(f, "%ld", &pid) == 1)
		n++;
	fclose(f);
	return n;
}

/* The v2 freeze/kill path on a cgroup2 mount, when the host has one (hybrid or unified). */
static void v2_test(const char *mount_point, bool keep_one)
{
	char dir[512], procs[600], buf[32];
	atomic_int *made = mmap(NULL, sizeof(*made), PROT_READ | PROT_WRITE,
				MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	pid_t keeper, bomb;
	int status, r, sync[2];
	double t0;

	snprintf(dir, sizeof(dir), "%s/paddock-killtest-%d", mount_point, (int)getpid());
	if (made == MAP_FAILED || mkdir(dir, 0755) < 0 || pipe2(sync, O_CLOEXEC) < 0) {
		printf("v2 path not tested: cannot make %s: %s\n", dir, strerror(errno));
		return;
	}
	atomic_init(made, 0);
	keeper = fork();
	if (keeper == 0) {
		pause();
		_exit(0);
	}
	bomb = fork();
	if (bomb == 0) {
		char go;

		if (read(sync[0], &go, 1) != 1)
			_exit(1);
		bounded_bomb(made);
	}
	snprintf(procs, sizeof(procs), "%s/cgroup.procs", dir);
	snprintf(buf, sizeof(buf), "%d", (int)keeper);
	r = write_str(procs, buf);
	snprintf(buf, sizeof(buf), "%d", (int)bomb);
	if (r == 0)
		r = write_str(procs, buf);
	CHECK(r == 0, "moving into %s: %s", dir, strerror(-r));
	CHECK(write(sync[1], "g", 1) == 1, "release the bomb");
	t0 = tu_now_ms();
	while (atomic_load(made) < BOMB_MAX / 3 && tu_now_ms() - t0 < TU_TIMEOUT_MS)
		tu_sleep_ms(1);

	t0 = tu_now_ms();
	r = cgroup_kill_dir(dir, CG_FREEZER_V2, keep_one ? &keeper : NULL, keep_one ? 1 : 0);
	printf("v2 kill (%s) while forking, %d made so far: %.2f ms\n",
	       keep_one ? "freeze, keep one" : "cgroup.kill", atomic_load(made), tu_now_ms() - t0);
	CHECK(r == 0, "cgroup_kill_dir v2: %s", strerror(-r));
	if (r < 0)
		cgroup_kill_dir(dir, CG_FREEZER_V2, NULL, 0);
	/* Killed children become zombies of their (dead) parents and are reaped by init. */
	t0 = tu_now_ms();
	while (waitpid(bomb, &status, WNOHANG) == 0 && tu_now_ms() - t0 < TU_TIMEOUT_MS)
		tu_sleep_ms(1);
	t0 = tu_now_ms();
	while (count_procs(dir) > (keep_one ? 1 : 0) && tu_now_ms() - t0 < TU_TIMEOUT_MS)
		tu_sleep_ms(1);
	CHECK(count_procs(dir) == (keep_one ? 1 : 0), "%d tasks left in %s", count_procs(dir), dir);
	if (keep_one)
		CHECK(kill(keeper, 0) == 0, "the kept task lives");
	kill(keeper, SIGKILL);
	waitpid(keeper, &status, 0);
	t0 = tu_now_ms();
	while (rmdir(dir) < 0 && errno == EBUSY && tu_now_ms() - t0 < TU_TIMEOUT_MS)
		tu_sleep_ms(1);
	CHECK(access(dir, F_OK) < 0, "rmdir %s", dir);
	close(sync[0]);
	close(sync[1]);
	munmap(made, sizeof(*made));
}

static const char *cgroup2_mount(void)
{
	static const char *const candidates[] = { "/sys/fs/cgroup/unified", "/sys/fs/cgroup" };
	char path[256];

	for (size_t i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "%s/cgroup.subtree_control", candidates[i]);
		if (access(path, F_OK) == 0)
			return candidates[i];
	}
	return NULL;
}

int main(void)
{
	struct tu t;
	const char *v2;

	tu_setup(&t, "kill");
	printf("cgroup %s\n", sandbox_env_cgroup_version(t.env));
	sandbox_test(&t);
	v2 = cgroup2_mount();
	if (v2) {
		v2_test(v2, true);
		v2_test(v2, false);
	} else {
		printf("no cgroup2 mount: the v2 path is not tested here\n");
	}
	tu_teardown(&t);
	return tu_summary();
}
