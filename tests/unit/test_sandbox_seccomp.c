/* SPDX-License-Identifier: MIT */
/* Sandbox test (root): the seccomp filter refuses what it lists, with EPERM, and lets the rest be. */
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/socket.h>

#include <linux/netlink.h>

#include "sandbox/sandbox_internal.h"
#include "test_sandbox_util.h"

#define ID "sc1"
#define X32_SYSCALL_BIT 0x40000000

static int child_failures;

#define EXPECT_ERRNO(call, want)                                                                   \
	do {                                                                                       \
		long rv_;                                                                          \
		errno = 0;                                                                         \
		rv_ = (call);                                                                      \
		if (rv_ != -1 || errno != (want)) {                                                \
			fprintf(stderr, "FAIL %s:%d: %s: returned %ld, errno %d (%s), want %s\n",  \
				__FILE__, __LINE__, #call, rv_, errno, strerror(errno), #want);    \
			child_failures++;                                                          \
		}                                                                                  \
	} while (0)

static void *thread_main(void *arg)
{
	return arg;
}

/* A 32-bit getpid through int 0x80: the whole compat ABI is refused. */
static void check_int80(void)
{
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		long ret = 20; /* __NR_getpid on i386 */

		/* Without ia32 emulation the instruction faults: let the fault kill the child as
		 * the kernel means it to, not a sanitizer's handler turn it into an exit(1). */
		signal(SIGSEGV, SIG_DFL);
		__asm__ volatile("int $0x80" : "+a"(ret) : : "memory");
		_exit(ret == -EPERM ? 0 : 1);
	}
	if (pid < 0 || waitpid(pid, &status, 0) < 0) {
		child_failures++;
		return;
	}
	if (WIFSIGNALED(status)) {
		/* The kernel has no ia32 emulation: the ABI is not there to refuse. */
		printf("int 0x80 raises signal %d here (no ia32 emulation)\n", WTERMSIG(status));
		return;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "FAIL: int 0x80 getpid was not refused with EPERM\n");
		child_failures++;
	}
}

/* socket() of family f: open and closed again (1), or refused with errno (0). */
static int socket_opens(long f, int type, int proto)
{
	long fd = syscall(SYS_socket, f, type, proto);

	if (fd < 0)
		return 0;
	close((int)fd);
	return 1;
}

static void check_families_allowed(void)
{
	static const int fams[] = { AF_UNIX, AF_INET, AF_INET6 };
	int sv[2];

	for (size_t i = 0; i < sizeof(fams) / sizeof(fams[0]); i++)
		if (!socket_opens(fams[i], SOCK_STREAM, 0)) {
			fprintf(stderr, "FAIL: socket(%d) under the filter: %s\n", fams[i],
				strerror(errno));
			child_failures++;
		}
	if (!socket_opens(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE)) {
		fprintf(stderr, "FAIL: a NETLINK_ROUTE socket: %s\n", strerror(errno));
		child_failures++;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0) {
		fprintf(stderr, "FAIL: socketpair(AF_UNIX): %s\n", strerror(errno));
		child_failures++;
	} else {
		close(sv[0]);
		close(sv[1]);
	}
}

/*
 * Every other family number, each socket type, and the tricks around an int argument:
 * high bits above it, negative numbers, numbers past AF_MAX. AF_VSOCK, AF_PACKET,
 * AF_KEY and AF_ALG open for root without the filter, so a hole shows as a failure.
 */
static void check_families_denied(void)
{
	static const int types[] = { SOCK_STREAM, SOCK_DGRAM, SOCK_RAW, SOCK_SEQPACKET };
	static const long tricks[] = {
		0x100000000L | AF_VSOCK, -1, -AF_VSOCK, 64, 255, 1 << 20, 0x7fffffff
	};
	static const int netlink_protos[] = { 1, 2, 4, 5, 6, 9, 10, 12, 15, 16, 21 };
	int sv[2];

	for (long f = 0; f < 128; f++) {
		if (f == AF_UNIX || f == AF_INET || f == AF_INET6 || f == AF_NETLINK)
			continue;
		for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++)
			EXPECT_ERRNO(syscall(SYS_socket, f, types[t], 0), EAFNOSUPPORT);
		EXPECT_ERRNO(syscall(SYS_socketpair, f, SOCK_STREAM, 0, sv), EAFNOSUPPORT);
	}
	for (size_t i = 0; i < sizeof(tricks) / sizeof(tricks[0]); i++) {
		EXPECT_ERRNO(syscall(SYS_socket, tricks[i], SOCK_STREAM, 0), EAFNOSUPPORT);
		EXPECT_ERRNO(syscall(SYS_socketpair, tricks[i], SOCK_STREAM, 0, sv), EAFNOSUPPORT);
	}
	for (size_t i = 0; i < sizeof(netlink_protos) / sizeof(netlink_protos[0]); i++)
		EXPECT_ERRNO(syscall(SYS_socket, AF_NETLINK, SOCK_RAW, netlink_protos[i]),
			     EPROTONOSUPPORT);
}

static void check_allowed(void)
{
	pthread_t th;
	int status;
	pid_t pid;

	if (getpid() <= 0)
		child_failures++;
	pid = fork();
	if (pid == 0)
		_exit(0);
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) {
		fprintf(stderr, "FAIL: fork under the filter\n");
		child_failures++;
	}
	/* glibc tries clone3 first and falls back to clone on ENOSYS. */
	if (pthread_create(&th, NULL, thread_main, NULL) != 0 || pthread_join(th, NULL) != 0) {
		fprintf(stderr, "FAIL: pthread_create under the filter\n");
		child_failures++;
	}
	if (personality(PER_LINUX) < 0 || personality(PER_LINUX32) < 0 ||
	    personality(PER_LINUX | UNAME26) < 0 || personality(PER_LINUX) < 0) {
		fprintf(stderr, "FAIL: safe personality values: %s\n", strerror(errno));
		child_failures++;
	}
}

static void check_denied(void)
{
	struct clone_args ca = { .exit_signal = SIGCHLD };
	long r;

	EXPECT_ERRNO(mount("none", "/nonexistent-paddock", "tmpfs", 0, NULL), EPERM);
	EXPECT_ERRNO(umount2("/nonexistent-paddock", 0), EPERM);
	EXPECT_ERRNO(syscall(SYS_pivot_root, "/nonexistent-a", "/nonexistent-b"), EPERM);
	EXPECT_ERRNO(syscall(SYS_fsopen, "tmpfs", 0), EPERM);
	EXPECT_ERRNO(syscall(SYS_open_tree, -1, "/nonexistent", 0), EPERM);
	EXPECT_ERRNO(unshare(CLONE_NEWUSER), EPERM);
	EXPECT_ERRNO(unshare(0), EPERM);
	EXPECT_ERRNO(setns(-1, 0), EPERM);
	EXPECT_ERRNO(syscall(SYS_ptrace, 0 /* TRACEME */, 0, 0, 0), EPERM);
	EXPECT_ERRNO(syscall(SYS_process_vm_readv, getppid(), NULL, 0, NULL, 0, 0), EPERM);
	EXPECT_ERRNO(syscall(SYS_bpf, 5 /* PROG_LOAD */, NULL, 0), EPERM);
	EXPECT_ERRNO(syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0), EPERM);
	EXPECT_ERRNO(syscall(SYS_userfaultfd, 0), EPERM);
	EXPECT_ERRNO(syscall(SYS_keyctl, 0 /* GET_KEYRING_ID */, -3, 0), EPERM);
	EXPECT_ERRNO(syscall(SYS_add_key, "user", "k", "v", 1, -3), EPERM);
	EXPECT_ERRNO(syscall(SYS_request_key, "user", "k", NULL, 0), EPERM);
	EXPECT_ERRNO(syscall(SYS_io_uring_setup, 1, NULL), EPERM);
	EXPECT_ERRNO(syscall(SYS_io_uring_enter, -1, 0, 0, 0, NULL, 0), EPERM);
	EXPECT_ERRNO(syscall(SYS_io_uring_register, -1, 0, NULL, 0), EPERM);
	EXPECT_ERRNO(syscall(SYS_kexec_load, 0, 0, NULL, 0), EPERM);
	EXPECT_ERRNO(syscall(SYS_kexec_file_load, -1, -1, 0, NULL, 0), EPERM);
	EXPECT_ERRNO(syscall(SYS_init_module, NULL, 0, ""), EPERM);
	EXPECT_ERRNO(syscall(SYS_finit_module, -1, "", 0), EPERM);
	EXPECT_ERRNO(syscall(SYS_delete_module, "paddock-none", 0), EPERM);
	EXPECT_ERRNO(syscall(SYS_open_by_handle_at, -1, NULL, 0), EPERM);
	EXPECT_ERRNO(syscall(SYS_name_to_handle_at, -1, "", NULL, NULL, 0), EPERM);
	EXPECT_ERRNO(syscall(SYS_swapon, NULL, 0), EPERM);
	EXPECT_ERRNO(syscall(SYS_swapoff, NULL), EPERM);
	EXPECT_ERRNO(syscall(SYS_reboot, 0, 0, 0, NULL), EPERM);
	EXPECT_ERRNO(syscall(SYS_settimeofday, NULL, NULL), EPERM);
	EXPECT_ERRNO(syscall(SYS_clock_settime, 0, NULL), EPERM);
	EXPECT_ERRNO(syscall(SYS_clock_adjtime, 0, NULL), EPERM);
	EXPECT_ERRNO(syscall(SYS_adjtimex, NULL), EPERM);
	EXPECT_ERRNO(syscall(SYS_acct, NULL), EPERM);
	EXPECT_ERRNO(syscall(SYS_quotactl, 0, NULL, 0, NULL), EPERM);
	EXPECT_ERRNO(syscall(SYS_lookup_dcookie, 0, NULL, 0), EPERM);
	/* A bad size: without the filter EINVAL, never a fork. */
	EXPECT_ERRNO(syscall(SYS_clone3, &ca, 1), ENOSYS);
	EXPECT_ERRNO(personality(ADDR_NO_RANDOMIZE), EPERM);
	EXPECT_ERRNO(personality(READ_IMPLIES_EXEC), EPERM);
	EXPECT_ERRNO(personality(0x100000000UL | READ_IMPLIES_EXEC), EPERM);
	EXPECT_ERRNO(syscall(X32_SYSCALL_BIT | SYS_getpid), EPERM);
	for (unsigned i = 0; i < 7; i++) {
		static const unsigned long ns[] = { CLONE_NEWNS,    CLONE_NEWUTS, CLONE_NEWIPC,
						    CLONE_NEWUSER,  CLONE_NEWPID, CLONE_NEWNET,
						    CLONE_NEWCGROUP };

		r = syscall(SYS_clone, ns[i] | SIGCHLD, 0, NULL, NULL, 0);
		if (r == 0)
			_exit(99); /* the filter let it through: the parent sees the failure */
		if (r != -1 || errno != EPERM) {
			fprintf(stderr, "FAIL: clone with namespace flag %#lx: %ld (%s)\n", ns[i],
				r, strerror(errno));
			child_failures++;
			if (r > 0)
				waitpid((pid_t)r, NULL, 0);
		}
	}
	check_int80();
}

/* Install the env's filter in a child of ours (root, so only the filter can refuse). */
static void filter_test(SandboxEnv *env)
{
	int status;
	pid_t pid;

	CHECK(env->seccomp_prog.len > 0 && env->seccomp_prog.len < BPF_MAXINSNS,
	      "filter of %u instructions", env->seccomp_prog.len);
	printf("seccomp filter: %u BPF instructions\n", env->seccomp_prog.len);
	pid = fork();
	if (pid == 0) {
		/* Should the filter fail open, mounts stay in a namespace of our own. */
		if (unshare(CLONE_NEWNS) < 0 ||
		    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
			_exit(2);
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
		    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &env->seccomp_prog, 0, 0) < 0)
			_exit(3);
		check_allowed();
		check_families_allowed();
		check_denied();
		check_families_denied();
		_exit(child_failures ? 1 : 0);
	}
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "fork/wait");
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "filter checks: status %#x", status);
}

/* In a real sandbox: the filter is on (mode 2), exactly one, with no_new_privs. */
static void sandbox_test(struct tu *t)
{
	char out[4096];
	Sandbox sb;
	int st;

	tu_spawn(t, ID, &sb);
	st = tu_run_sh(&sb, 5,
		       "grep -E '^(Seccomp|Seccomp_filters|NoNewPrivs|CapEff):' "
		       "/proc/self/status; "
		       "if unshare -U true 2>/dev/null; then echo unshare=ok; "
		       "else echo unshare=refused; fi",
		       out, sizeof(out));
	printf("%s", out);
	CHECK(st == 0, "probe status %#x", st);
	CHECK(tu_has_line(out, "Seccomp:\t2"), "Seccomp: 2");
	CHECK(tu_has_line(out, "Seccomp_filters:\t1"), "Seccomp_filters: 1");
	CHECK(tu_has_line(out, "NoNewPrivs:\t1"), "NoNewPrivs: 1");
	CHECK(tu_has_line(out, "CapEff:\t0000000000000000"), "CapEff: 0");
	CHECK(tu_has_line(out, "unshare=refused"), "unshare(1) in the sandbox");
	tu_destroy(t, ID, &sb);
}

int main(void)
{
	struct tu t;

	tu_setup(&t, "seccomp");
	filter_test(t.env);
	sandbox_test(&t);
	tu_teardown(&t);
	return tu_summary();
}
