/* SPDX-License-Identifier: MIT */
/* The sandbox's seccomp filter: built once with libseccomp, installed last before exec. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <linux/filter.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>
#include <seccomp.h>

#include "cleanup.h"
#include "sandbox_internal.h"

/*
 * Calls that reach kernel surface a sandbox never needs: mounting and
 * namespaces (escape), tracing other processes, loading code into the kernel,
 * key rings, io_uring and bpf (large attack surface), the clock, swap and
 * reboot. Most also need a capability the sandbox lacks; the filter keeps them
 * shut should a kernel bug hand one out. Each fails with EPERM.
 */
/* clang-format off */
static const char *const denied[] = {
	/* file systems and namespaces */
	"mount", "umount2", "pivot_root", "chroot", "unshare", "setns",
	"fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree", "mount_setattr",
	"open_by_handle_at", "name_to_handle_at",
	/* other processes' memory */
	"ptrace", "process_vm_readv", "process_vm_writev", "kcmp",
	/* code into the kernel */
	"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
	"create_module", "bpf", "perf_event_open", "userfaultfd", "lookup_dcookie",
	/* key rings */
	"keyctl", "add_key", "request_key",
	/* io_uring */
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	/* the machine */
	"swapon", "swapoff", "reboot", "acct", "quotactl", "quotactl_fd", "syslog",
	"settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
	"iopl", "ioperm", "vhangup", "uselib", "nfsservctl",
};
/* clang-format on */

/* clone() flags that would make a new namespace. */
static const uint64_t clone_ns_flags[] = {
	CLONE_NEWNS,  CLONE_NEWUTS, CLONE_NEWIPC,    CLONE_NEWUSER,
	CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWCGROUP,
};

/*
 * Address families a sandbox may open sockets of: the ones its network namespace
 * confines. Every other family is refused with EAFNOSUPPORT, as a kernel without it
 * would answer: some reach past any namespace (AF_VSOCK talks to the hypervisor), and
 * the rest are kernel surface nobody's code here needs. AF_NETLINK is kept for
 * NETLINK_ROUTE alone (getaddrinfo and getifaddrs ask it about the namespace's links).
 */
static const int allowed_families[] = { AF_UNIX, AF_INET, AF_INET6, AF_NETLINK };

/* Families are small numbers (AF_MAX is 46 in Linux 6.x); above this all are refused. */
#define FAMILY_RULES_MAX 64

/* personality(2) values a program may set: PER_LINUX, PER_LINUX32, UNAME26 and their sum. */
#define PERSONA_SAFE_BITS 0x20008u

static void seccomp_releasep(scmp_filter_ctx *ctx)
{
	if (*ctx)
		seccomp_release(*ctx);
}

static int deny_by_name(scmp_filter_ctx ctx, const char *name)
{
	int nr = seccomp_syscall_resolve_name(name);

	/* Not a system call on this architecture (or older than this libseccomp). */
	if (nr == __NR_SCMP_ERROR)
		return 0;
	return seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
}

static bool family_allowed(int family)
{
	for (size_t i = 0; i < ARRAY_SIZE(allowed_families); i++)
		if (allowed_families[i] == family)
			return true;
	return false;
}

/*
 * socket() and socketpair() of a family outside the allow-list. The kernel reads the
 * family as an int, the filter the whole register: a value with any bit above the low
 * ones set (high bits, a negative int) is at least FAMILY_RULES_MAX and refused too.
 * The second datum of each comparison is unused by these operators.
 */
static int add_family_rules(scmp_filter_ctx ctx)
{
	static const int calls[] = { SCMP_SYS(socket), SCMP_SYS(socketpair) };
	int r;

	for (size_t c = 0; c < ARRAY_SIZE(calls); c++) {
		for (int f = 0; f < FAMILY_RULES_MAX; f++) {
			if (family_allowed(f))
				continue;
			r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), calls[c], 1,
					     SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)f, 0));
			if (r < 0)
				return r;
		}
		r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), calls[c], 1,
				     SCMP_A0(SCMP_CMP_GE, FAMILY_RULES_MAX, 0));
		if (r < 0)
			return r;
		r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPROTONOSUPPORT), calls[c], 2,
				     SCMP_A0(SCMP_CMP_EQ, AF_NETLINK, 0),
				     SCMP_A2(SCMP_CMP_NE, NETLINK_ROUTE, 0));
		if (r < 0)
			return r;
	}
	return 0;
}

static int add_rules(scmp_filter_ctx ctx)
{
	int r;

	for (size_t i = 0; i < ARRAY_SIZE(denied); i++) {
		r = deny_by_name(ctx, denied[i]);
		if (r < 0)
			return r;
	}
	r = add_family_rules(ctx);
	if (r < 0)
		return r;
	/*
	 * clone3 passes its flags in memory, where a filter cannot look: ENOSYS
	 * makes libc fall back to clone, whose flags are a register we check.
	 */
	r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
	if (r < 0)
		return r;
	for (size_t i = 0; i < ARRAY_SIZE(clone_ns_flags); i++) {
		uint64_t f = clone_ns_flags[i];

		r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
				     SCMP_A0(SCMP_CMP_MASKED_EQ, f, f));
		if (r < 0)
			return r;
	}
	/*
	 * The kernel reads the low 32 bits of the persona; any bit outside the
	 * safe ones is refused. (The 0xffffffff query is refused with them:
	 * libseccomp cannot compare one argument twice in a rule.)
	 */
	for (unsigned bit = 0; bit < 32; bit++) {
		uint32_t b = 1u << bit;

		if (b & PERSONA_SAFE_BITS)
			continue;
		r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(personality), 1,
				     SCMP_A0_32(SCMP_CMP_MASKED_EQ, b, b));
		if (r < 0)
			return r;
	}
	return 0;
}

/* Export the filter's BPF through a memfd into a buffer we own. */
static int export_bpf(scmp_filter_ctx ctx, struct sock_filter **ret, size_t *n_ret)
{
	_cleanup_close_ int fd = memfd_create("paddock-seccomp", MFD_CLOEXEC);
	_cleanup_free_ struct sock_filter *prog = NULL;
	struct stat st;
	ssize_t n;
	int r;

	if (fd < 0)
		return -errno;
	r = seccomp_export_bpf(ctx, fd);
	if (r < 0)
		return r;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (st.st_size <= 0 || st.st_size % sizeof(struct sock_filter) != 0 ||
	    st.st_size / sizeof(struct sock_filter) > BPF_MAXINSNS)
		return -E2BIG;
	prog = malloc(st.st_size);
	if (!prog)
		return -ENOMEM;
	n = pread(fd, prog, st.st_size, 0);
	if (n < 0)
		return -errno;
	if (n != st.st_size)
		return -EIO;
	*ret = TAKE_PTR(prog);
	*n_ret = st.st_size / sizeof(struct sock_filter);
	return 0;
}

int seccomp_env_setup(SandboxEnv *env)
{
	_cleanup_(seccomp_releasep) scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	struct sock_filter *prog = NULL;
	size_t n = 0;
	int r;

	if (!ctx)
		return -ENOMEM;
	/*
	 * Only the native ABI: a 32-bit (int 0x80) or x32 call from an x86_64
	 * sandbox is a way around every rule above, so it gets EPERM as a whole.
	 */
	r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_ERRNO(EPERM));
	if (r >= 0)
		r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
	if (r >= 0)
		r = add_rules(ctx);
	if (r >= 0)
		r = export_bpf(ctx, &prog, &n);
	if (r < 0) {
		sandbox_set_error("building the seccomp filter: %s", strerror(-r));
		return r;
	}
	env->seccomp_filter = prog;
	env->seccomp_prog.len = (unsigned short)n;
	env->seccomp_prog.filter = prog;
	return 0;
}

int sandbox_env_seccomp_memfd(const SandboxEnv *env)
{
	size_t len = (size_t)env->seccomp_prog.len * sizeof(struct sock_filter);
	int fd = memfd_create("paddock-seccomp", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	if (fd < 0)
		return -errno;
	if (len == 0 || pwrite(fd, env->seccomp_filter, len, 0) != (ssize_t)len ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) < 0) {
		int r = len == 0 ? -EINVAL : -errno;

		close(fd);
		return r;
	}
	return fd;
}

void seccomp_env_clear(SandboxEnv *env)
{
	free(env->seccomp_filter);
	env->seccomp_filter = NULL;
	env->seccomp_prog = (struct sock_fprog){ 0 };
}

/* Runs in the child between clone and exec, after no_new_privs: the last step before exec. */
int seccomp_in_child(struct child_args *a)
{
	if (!a->seccomp_prog || a->seccomp_prog->len == 0)
		return -EINVAL; /* never run a sandbox without its filter */
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, a->seccomp_prog, 0, 0) < 0)
		return -errno;
	return 0;
}
