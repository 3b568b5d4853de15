/* SPDX-License-Identifier: MIT */
/* Probes of every kernel feature paddock depends on, each tried the way paddock uses it. */
#include "kernel_features.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/filter.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>

#include "cleanup.h"
#include "clone.h"
#include "mountinfo.h"

#define CGROUP_ROOT "/sys/fs/cgroup"

#define CAP_SYS_PTRACE_BIT 19

/* ---- the host ---- */

static void kernel_release(char *buf, size_t len)
{
	struct utsname u;

	snprintf(buf, len, "%s", uname(&u) == 0 ? u.release : "(unknown)");
}

bool kernel_features_release_at_least(const char *release, unsigned major, unsigned minor)
{
	unsigned a, b;

	if (!release || sscanf(release, "%u.%u", &a, &b) != 2)
		return false;
	return a > major || (a == major && b >= minor);
}

static bool kernel_at_least(unsigned major, unsigned minor)
{
	char rel[65];

	kernel_release(rel, sizeof(rel));
	return kernel_features_release_at_least(rel, major, minor);
}

/* A "Key: value" line of /proc/self/status, as text; false when it is not there. */
static bool proc_status_field(const char *key, char *out, size_t len)
{
	_cleanup_fclose_ FILE *f = fopen("/proc/self/status", "re");
	char line[256];
	size_t klen = strlen(key);

	while (f && fgets(line, sizeof(line), f))
		if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
			const char *v = line + klen + 1;

			v += strspn(v, " \t");
			snprintf(out, len, "%.*s", (int)strcspn(v, "\n"), v);
			return true;
		}
	return false;
}

/* Whether a seccomp filter is on this process: "Seccomp: 2". */
static bool under_seccomp_filter(void)
{
	char v[16];

	return proc_status_field("Seccomp", v, sizeof(v)) && strcmp(v, "2") == 0;
}

/* Whether systemd started this process as (part of) a unit: it sets INVOCATION_ID. */
static bool under_systemd_unit(void)
{
	return getenv("INVOCATION_ID") != NULL;
}

static bool has_effective_cap(unsigned bit)
{
	char v[32];

	return proc_status_field("CapEff", v, sizeof(v)) && (strtoull(v, NULL, 16) >> bit) & 1;
}

static const char *errname(int err)
{
	const char *n = strerrorname_np(err);

	return n ? n : "an unknown error";
}

/* ---- findings ---- */

static void check_say(FeatureCheck *c, enum feature_state st, const char *fmt, va_list ap)
{
	c->state = st;
	vsnprintf(c->detail, sizeof(c->detail), fmt, ap);
}

static void check_ok(FeatureCheck *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check_ok(FeatureCheck *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	check_say(c, FEATURE_OK, fmt, ap);
	va_end(ap);
}

static void check_missing(FeatureCheck *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void check_missing(FeatureCheck *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	check_say(c, FEATURE_MISSING, fmt, ap);
	va_end(ap);
}

static void check_fix(FeatureCheck *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check_fix(FeatureCheck *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->fix, sizeof(c->fix), fmt, ap);
	va_end(ap);
}

/* A call paddock makes, and what is known about the ways it gets refused. */
struct call_info {
	const char *call;	  /* "openat2" */
	unsigned since_major;	  /* the Linux that brought it */
	unsigned since_minor;	  /* ... */
	const char *unit_filter;  /* a unit setting whose seccomp filter refuses it, or NULL */
	const char *unit_fix;	  /* how to lift that setting */
	const char *other_filter; /* the filter that refuses it elsewhere */
	const char *other_fix;	  /* how to lift that one, or NULL: "let it through" */
	const char *consequence;  /* what paddock loses without it, or NULL: it cannot run */
};

/*
 * The sentence for a call that failed with err. ENOSYS comes either from a kernel older
 * than the call or from a seccomp filter that answers for it (systemd's filters do, for
 * calls whose arguments they cannot inspect); the release and our own seccomp state tell
 * which.
 */
static void explain_refusal(FeatureCheck *c, const struct call_info *ci, int err)
{
	char rel[65];

	kernel_release(rel, sizeof(rel));
	if (err == ENOSYS && !kernel_at_least(ci->since_major, ci->since_minor)) {
		check_missing(c, "%s() does not exist in Linux %s (ENOSYS)%s%s", ci->call, rel,
			      ci->consequence ? ", and " : "",
			      ci->consequence ? ci->consequence : "");
		check_fix(c,
			  "use Linux %u.%u or later (Debian 12, Ubuntu 22.04 and RHEL 9 have it)",
			  ci->since_major, ci->since_minor);
		return;
	}
	if ((err == ENOSYS || err == EPERM || err == EACCES) && under_seccomp_filter()) {
		if (under_systemd_unit() && ci->unit_filter) {
			check_missing(c,
				      "%s() is refused (%s): a seccomp filter on this service "
				      "blocks it, such as %s%s%s",
				      ci->call, errname(err), ci->unit_filter,
				      ci->consequence ? ", and " : "",
				      ci->consequence ? ci->consequence : "");
			check_fix(c, "%s, or let %s() through whatever filter refuses it",
				  ci->unit_fix, ci->call);
		} else {
			check_missing(c,
				      "%s() is refused (%s): a seccomp filter this process runs "
				      "under blocks it, such as %s%s%s",
				      ci->call, errname(err), ci->other_filter,
				      ci->consequence ? ", and " : "",
				      ci->consequence ? ci->consequence : "");
			if (ci->other_fix)
				check_fix(c, "%s", ci->other_fix);
			else
				check_fix(c, "let %s() through that filter", ci->call);
		}
		return;
	}
	check_missing(c, "%s() fails (%s) on Linux %s, which has it%s%s", ci->call, errname(err),
		      rel, ci->consequence ? ", and " : "", ci->consequence ? ci->consequence : "");
	check_fix(c,
		  "find what refuses %s() on this host (a security module, a container "
		  "runtime: see dmesg and the audit log) and allow it",
		  ci->call);
}

/* ---- the probes ---- */

static void probe_kernel(const FeatureContext *ctx, FeatureCheck *c, int arg)
{
	char rel[65];

	(void)ctx;
	(void)arg;
	kernel_release(rel, sizeof(rel));
	if (kernel_at_least(FEATURES_MIN_KERNEL_MAJOR, FEATURES_MIN_KERNEL_MINOR)) {
		check_ok(c, "Linux %s", rel);
		return;
	}
	check_missing(c, "Linux %s is older than %u.%u, the oldest paddock supports", rel,
		      FEATURES_MIN_KERNEL_MAJOR, FEATURES_MIN_KERNEL_MINOR);
	check_fix(c, "use Linux %u.%u or later (Debian 12, Ubuntu 22.04 and RHEL 9 have one)",
		  FEATURES_MIN_KERNEL_MAJOR, FEATURES_MIN_KERNEL_MINOR);
}

static long openat2_at(int dfd, const char *path)
{
	struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
				.resolve = WORKSPACE_RESOLVE };

	return syscall(SYS_openat2, dfd, path, &how, sizeof(how));
}

/* Every workspace file operation: openat2 with the RESOLVE flags, and their confinement. */
static void probe_openat2(const FeatureContext *ctx, FeatureCheck *c, int arg)
{
	static const struct call_info ci = {
		.call = "openat2",
		.since_major = 5,
		.since_minor = 6,
		.unit_filter = "systemd's RestrictSUIDSGID=",
		.unit_fix = "remove that setting (RestrictSUIDSGID=no in a drop-in: systemctl "
			    "edit paddock-sessiond)",
		.other_filter = "a container's seccomp profile",
	};
	_cleanup_close_ int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	_cleanup_close_ int fd = -1;
	long up;

	(void)ctx;
	(void)arg;
	if (root < 0) {
		check_missing(c, "openat2() cannot be probed: opening /: %s", strerror(errno));
		return;
	}
	fd = (int)openat2_at(root, ".");
	if (fd < 0 && errno == EINVAL) {
		check_missing(c, "openat2() does not know RESOLVE_BENEATH, RESOLVE_NO_MAGICLINKS "
				 "or RESOLVE_NO_XDEV (EINVAL)");
		check_fix(c, "use Linux 5.6 or later");
		return;
	}
	if (fd < 0) {
		explain_refusal(c, &ci, errno);
		return;
	}
	/* ".." from the starting point must be refused, or nothing is confined. */
	up = openat2_at(root, "..");
	if (up >= 0 || errno != EXDEV) {
		if (up >= 0)
			close((int)up);
		check_missing(c, "openat2() with RESOLVE_BENEATH does not refuse \"..\" (%s)",
			      up >= 0 ? "it opened it" : errname(errno));
		check_fix(c, "use a kernel whose openat2() confines lookups (Linux 5.6 or later)");
		return;
	}
	check_ok(c, "RESOLVE_BENEATH, RESOLVE_NO_MAGICLINKS and RESOLVE_NO_XDEV work");
}

static const struct call_info clone3_info = {
	.call = "clone3",
	.since_major = 5,
	.since_minor = 3,
	.unit_filter = "systemd's RestrictNamespaces= (it answers clone3 with ENOSYS) or a "
		       "SystemCallFilter= without clone3",
	.unit_fix = "remove that setting (RestrictNamespaces=no in a drop-in: systemctl edit "
		    "paddock-sessiond), or add clone3 to SystemCallFilter=",
	.other_filter = "a container's default seccomp profile (Docker answers ENOSYS)",
};

/* A sandbox is born from clone3 with CLONE_PIDFD (common/clone.h) and waited on by pidfd. */
static void probe_clone3(const FeatureContext *ctx, FeatureCheck *c, int arg)
{
	_cleanup_close_ int pidfd = -1;
	siginfo_t si = { 0 };
	pid_t pid;

	(void)ctx;
	(void)arg;
	pid = clone_pidfd(0, &pidfd);
	if (pid == 0)
		_exit(0);
	if (pid < 0) {
		explain_refusal(c, &clone3_info, errno);
		return;
	}
	while (waitid(P_PIDFD, pidfd, &si, WEXITED) < 0) {
		if (errno == EINTR)
			continue;
		check_missing(c, "waitid(P_PIDFD) fails: %s", strerror(errno));
		check_fix(c, "use Linux 5.4 or later");
		(void)waitpid(pid, NULL, 0);
		return;
	}
	check_ok(c, "clone3() with CLONE_PIDFD, and waitid(P_PIDFD)");
}

/* The name of one kind of namespace, for the sentences. */
static const char *ns_noun(int flag)
{
	switch (flag) {
	case CLONE_NEWPID: return "pid";
	case CLONE_NEWNET: return "network";
	case CLONE_NEWNS: return "mount";
	case CLONE_NEWIPC: return "ipc";
	case CLONE_NEWUTS: return "uts";
	case CLONE_NEWCGROUP: return "cgroup";
	}
	return "some";
}

/* The sysctl that caps one kind of namespace (ENOSPC when it is 0). */
static const char *ns_sysctl(int flag)
{
	switch (flag) {
	case CLONE_NEWPID: return "user.max_pid_namespaces";
	case CLONE_NEWNET: return "user.max_net_namespaces";
	case CLONE_NEWNS: return "user.max_mnt_namespaces";
	case CLONE_NEWIPC: return "user.max_ipc_namespaces";
	case CLONE_NEWUTS: return "user.max_uts_namespaces";
	case CLONE_NEWCGROUP: return "user.max_cgroup_namespaces";
	}
	return "user.max_*_namespaces";
}

static void explain_namespace(FeatureCheck *c, int flag, int err)
{
	static const struct call_info unshare_info = {
		.call = "unshare",
		.since_major = 4,
		.since_minor = 6,
		.unit_filter = "systemd's RestrictNamespaces=",
		.unit_fix = "remove that setting (RestrictNamespaces=no in a drop-in)",
		.other_filter = "a container's seccomp profile",
	};

	if (err == ENOSPC) {
		check_missing(c, "%s namespaces cannot be created: %s is 0", ns_noun(flag),
			      ns_sysctl(flag));
		check_fix(c, "raise it: sysctl -w %s=15000 (and in /etc/sysctl.d)",
			  ns_sysctl(flag));
	} else if (err == EINVAL) {
		check_missing(c,
			      "%s namespaces cannot be created: the kernel is built without "
			      "them (EINVAL)",
			      ns_noun(flag));
		check_fix(c,
			  "use a kernel with namespaces (CONFIG_NAMESPACES and its _NS options)");
	} else if (err == EPERM && !under_seccomp_filter()) {
		check_missing(c,
			      "%s namespaces cannot be created (EPERM): this process lacks "
			      "CAP_SYS_ADMIN",
			      ns_noun(flag));
		check_fix(c, "run paddock-sessiond as root with CAP_SYS_ADMIN (a container needs "
			     "--privileged or the capability)");
	} else {
		explain_refusal(c, flag == CLONE_NEWPID ? &clone3_info : &unshare_info, err);
	}
}

/* Child side: unshare the namespace in *arg, and say how it went. */
static int try_unshare(const void *arg)
{
	return unshare(*(const int *)arg) < 0 ? errno : 0;
}

/*
 * The namespaces of a sandbox: its pid namespace comes with clone3 (sandbox/spawn.c), the
 * network one too or from unshare, mount, ipc and uts from unshare in the child, and the
 * cgroup one last (sandbox/cgroup.c). Each is made in a child of ours, once.
 */
static void probe_namespace(const FeatureContext *ctx, FeatureCheck *c, int flag)
{
	int r;

	if (!ctx->root) {
		c->state = FEATURE_UNCHECKED;
		snprintf(c->detail, sizeof(c->detail), "%s namespaces not checked: that needs root",
			 ns_noun(flag));
		check_fix(c, "run this as root");
		return;
	}
	if (flag == CLONE_NEWPID) {
		_cleanup_close_ int pidfd = -1;
		pid_t pid = clone_pidfd(CLONE_NEWPID, &pidfd);

		if (pid == 0)
			_exit(0);
		r = pid < 0 ? errno : 0;
		if (pid > 0)
			(void)waitpid(pid, NULL, 0);
	} else {
		r = run_in_child(try_unshare, &flag);
		if (r < 0) {
			check_missing(c, "%s namespaces cannot be probed: %s", ns_noun(flag),
				      strerror(-r));
			return;
		}
	}
	if (r) {
		explain_namespace(c, flag, r);
		return;
	}
	check_ok(c, "%s namespaces can be created", ns_noun(flag));
}

/* Sessiond watches and signals every sandbox's processes through pidfds. */
static void probe_pidfd(const FeatureContext *ctx, FeatureCheck *c, int arg)
{
	static const struct call_info open_info = {
		.call = "pidfd_open",
		.since_major = 5,
		.since_minor = 3,
		.unit_filter = "a SystemCallFilter= without it",
		.unit_fix = "add pidfd_open and pidfd_send_signal to SystemCallFilter=",
		.other_filter = "a container's seccomp profile",
	};
	static const struct call_info signal_info = {
		.call = "pidfd_send_signal",
		.since_major = 5,
		.since_minor = 1,
		.unit_filter = "a SystemCallFilter= without it",
		.unit_fix = "add pidfd_open and pidfd_send_signal to SystemCallFilter=",
		.other_filter = "a container's seccomp profile",
	};
	_cleanup_close_ int pidfd = -1;

	(void)ctx;
	(void)arg;
	pidfd = (int)syscall(SYS_pidfd_open, getpid(), 0);
	if (pidfd < 0) {
		explain_refusal(c, &open_info, errno);
		return;
	}
	if (syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) < 0) {
		explain_refusal(c, &signal_info, errno);
		return;
	}
	check_ok(c, "pidfd_open() and pidfd_send_signal()");
}

/* Whether kernel.yama.ptrace_scope is 3: no process may take another's fds. */
static bool yama_forbids_all(void)
{
	_cleanup_fclose_ FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "re");
	int scope = 0;

	return f && fscanf(f, "%d", &scope) == 1 && scope == 3;
}

/*
 * A restarted sessiond takes back each sandbox's control socket from its init with
 * pidfd_getfd (adopt.c); without it sessions do not outlive the daemon. Tried on a child
 * of ours; taking a sandbox's also needs CAP_SYS_PTRACE (another uid).
 */
static void probe_pidfd_getfd(const FeatureContext *ctx, FeatureCheck *c, int arg)
{
	static const struct call_info ci = {
		.call = "pidfd_getfd",
		.since_major = 5,
		.since_minor = 6,
		.unit_filter = "a SystemCallFilter= without it",
		.unit_fix = "add pidfd_getfd to SystemCallFilter=",
		.other_filter = "systemd-nspawn's",
		.other_fix = "let pidfd_getfd() through that filter (systemd-nspawn: "
			     "--system-call-filter=pidfd_getfd)",
		.consequence = "sessions do not survive a restart of paddock-sessiond",
	};
	_cleanup_close_ int pidfd = -1, got = -1;
	int hold[2], err = 0;
	pid_t pid;

	(void)arg;
	if (yama_forbids_all()) {
		check_missing(c, "kernel.yama.ptrace_scope is 3: sessions do not survive a restart "
				 "of paddock-sessiond");
		check_fix(c, "sysctl -w kernel.yama.ptrace_scope=1 (it cannot be lowered from 3 "
			     "without a reboot)");
		return;
	}
	if (ctx->root && !has_effective_cap(CAP_SYS_PTRACE_BIT)) {
		check_missing(c, "this process lacks CAP_SYS_PTRACE: sessions do not survive a "
				 "restart of paddock-sessiond");
		check_fix(c, "keep CAP_SYS_PTRACE in the unit's CapabilityBoundingSet=");
		return;
	}
	if (pipe2(hold, O_CLOEXEC) < 0) {
		check_missing(c, "pidfd_getfd() cannot be probed: %s", strerror(errno));
		return;
	}
	pid = fork();
	if (pid == 0) {
		char b;

		close(hold[1]);
		_exit(read(hold[0], &b, 1) < 0 ? 1 : 0);
	}
	if (pid > 0) {
		pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
		if (pidfd >= 0)
			got = (int)syscall(SYS_pidfd_getfd, pidfd, hold[0], 0);
		err = got < 0 ? errno : 0;
	} else {
		err = errno;
	}
	close(hold[0]);
	close(hold[1]);
	if (pid > 0)
		(void)waitpid(pid, NULL, 0);
	if (pid < 0) {
		check_missing(c, "pidfd_getfd() cannot be probed: %s", strerror(err));
		return;
	}
	if (got < 0) {
		explain_refusal(c, &ci, err);
		return;
	}
	check_ok(c, "pidfd_getfd() works: a restarted paddock-sessiond takes back its sessions");
}

/* Child side: what a sandbox's last step does, with a filter that allows everything. */
static int try_seccomp_filter(const void *arg)
{
	struct sock_filter allow[] = { BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW) };
	struct sock_fprog prog = { .len = ARRAY_SIZE(allow), .filter = allow };

	(void)arg;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return errno;
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) < 0 ? errno : 0;
}

static bool word_in(const char *list, const char *word)
{
	size_t n = strlen(word);

	for (const char *p = list; (p = strstr(p, word)); p += n)
		if ((p == list || p[-1] == ' ' || p[-1] == '\t') &&
		    (p[n] == '\0' || p[n] == ' ' || p[n] == '\n' || p[n] == '\t'))
			return true;
	return false;
}

static const struct call_info prctl_info = {
	.call = "prctl",
	.since_major = 3,
	.since_minor = 5,
	.unit_filter = "a SystemCallFilter= without prctl",
	.unit_fix = "add prctl to SystemCallFilter=",
	.other_filter = "a container's seccomp profile",
};

/* Every sandbox runs under a filter of its own (sandbox/seccomp.c), with errno actions. */
static void probe_seccomp(const FeatureContext *ctx, FeatureCheck *c, int arg)
{
	_cleanup_fclose_ FILE *f = fopen("/proc/sys/kernel/seccomp/actions_avail", "re");
	char line[512] = "";
	int r;

	(void)ctx;
	(void)arg;
	r = run_in_child(try_seccomp_filter, NULL);
	if (r == EINVAL || r < 0) {
		check_missing(c, "a seccomp filter cannot be loaded: %s", strerror(r < 0 ? -r : r));
		check_fix(c, "use a kernel built with CONFIG_SECCOMP and CONFIG_SECCOMP_FILTER");
		return;
	}
	if (r > 0) {
		explain_refusal(c, &prctl_info, r);
		return;
	}
	if (f && fgets(line, sizeof(line), f) &&
	    (!word_in(line, "errno") || !word_in(line, "kill_process"))) {
		check_missing(c, "the kernel's seccomp lacks the errno or kill_process action");
		check_fix(c, "use Linux 4.14 or later");
		return;
	}
	check_ok(c, "seccomp filters load");
}

/* ---- cgroups ---- */

int kernel_features_parse_cgroup1(const char *line, char *mnt, size_t mnt_len, unsigned *ctrls,
				  bool *read_only)
{
	static const struct {
		const char *name;
		unsigned bit;
	} known[] = {
		{ "memory", FEATURE_CG_MEMORY },
		{ "pids", FEATURE_CG_PIDS },
		{ "cpu", FEATURE_CG_CPU },
	};
	MountLine m;

	if (mountinfo_parse(line, &m) < 0 || strcmp(m.fstype, "cgroup") != 0)
		return -ENOENT;
	if (snprintf(mnt, mnt_len, "%s", m.mnt) >= (int)mnt_len)
		return -ENAMETOOLONG;
	*ctrls = 0;
	for (size_t i = 0; i < ARRAY_SIZE(known); i++)
		if (mount_options_have(m.super_opts, known[i].name))
			*ctrls |= known[i].bit;
	*read_only = m.read_only;
	return 0;
}

/* What paddock would write to: the unified hierarchy, or the v1 ones with its controllers. */
typedef struct CgroupLayout {
	bool present;		  /* /sys/fs/cgroup exists */
	bool v2;		  /* it is the unified (cgroup2) hierarchy */
	unsigned ctrls;		  /* FEATURE_CG_* available */
	char read_only[PATH_MAX]; /* the first hierarchy paddock writes that is read-only */
	char error[128];	  /* why the layout could not be read, or "" */
} CgroupLayout;

static bool mounted_read_only(const char *path)
{
	struct statvfs sv;

	return statvfs(path, &sv) == 0 && (sv.f_flag & ST_RDONLY);
}

static void cgroup_layout_v2(CgroupLayout *l)
{
	_cleanup_fclose_ FILE *f = fopen(CGROUP_ROOT "/cgroup.controllers", "re");
	char line[512];

	if (!f || !fgets(line, sizeof(line), f)) {
		snprintf(l->error, sizeof(l->error), "cannot read %s/cgroup.controllers",
			 CGROUP_ROOT);
		return;
	}
	l->ctrls = (word_in(line, "memory") ? FEATURE_CG_MEMORY : 0) |
		   (word_in(line, "pids") ? FEATURE_CG_PIDS : 0) |
		   (word_in(line, "cpu") ? FEATURE_CG_CPU : 0);
	if (mounted_read_only(CGROUP_ROOT))
		snprintf(l->read_only, sizeof(l->read_only), "%s", CGROUP_ROOT);
}

static void cgroup_layout_v1(CgroupLayout *l)
{
	_cleanup_fclose_ FILE *f = fopen("/proc/self/mountinfo", "re");
	_cleanup_free_ char *line = NULL;
	size_t cap = 0;

	if (!f) {
		snprintf(l->error, sizeof(l->error), "cannot read /proc/self/mountinfo: %s",
			 strerror(errno));
		return;
	}
	while (getline(&line, &cap, f) > 0) {
		char mnt[PATH_MAX];
		unsigned ctrls;
		bool ro;

		if (kernel_features_parse_cgroup1(line, mnt, sizeof(mnt), &ctrls, &ro) < 0 ||
		    !ctrls)
			continue;
		l->ctrls |= ctrls;
		if ((ro || mounted_read_only(mnt)) && !l->read_only[0])
			snprintf(l->read_only, sizeof(l->read_only), "%s", mnt);
	}
}

static void cgroup_layout_read(CgroupLayout *l)
{
	struct statfs sfs;

	*l = (CgroupLayout){ 0 };
	if (statfs(CGROUP_ROOT, &sfs) < 0) {
		snprintf(l->error, sizeof(l->error), "%s: %s", CGROUP_ROOT, strerror(errno));
		return;
	}
	l->present = true;
	l->v2 = sfs.f_type == CGROUP2_SUPER_MAGIC;
	if (l->v2)
		cgroup_layout_v2(l);
	else
		cgroup_layout_v1(l);
}

static const char *cgroup_fix(const CgroupLayout *l)
{
	return l->v2 ? "enable the controller on the kernel command line (cgroup_enable=memory) "
		       "and make sure nothing disables it (cgroup_disable=)" :
		       "mount the memory and pids hierarchies under /sys/fs/cgroup "
		       "(cgroup_enable=memory on the kernel command line), or boot with "
		       "systemd.unified_cgroup_hierarchy=1 for cgroup v2";
}

/* The cgroup layout in *l; false, with c saying so, when there are no cgroups. */
static bool cgroup_layout_present(FeatureCheck *c, CgroupLayout *l)
{
	cgroup_layout_read(l);
	if (l->present && !l->error[0])
		return true;
	check_missing(c, "cgroups are not there: %s", l->error);
	check_fix(c, "mount cgroup2 on /sys/fs/cgroup (systemd does at boot)");
	return false;
}

static void probe_cgroup_version(const FeatureContext *ctx, FeatureCheck *c, int arg)
{
	CgroupLayout l;

	(void)ctx;
	(void)arg;
	if (!cgroup_layout_present(c, &l))
		return;
	check_ok(c, "%s", l.v2 ? "cgroup v2 (unified)" : "cgroup v1 (legacy or hybrid hierarchy)");
}

/* One controller, FEATURE_CG_* in arg. */
static void probe_cgroup_controller(const FeatureContext *ctx, FeatureCheck *c, int arg)
{
	const char *name = arg == FEATURE_CG_MEMORY ? "memory" :
			   arg == FEATURE_CG_PIDS   ? "pids" :
						      "cpu";
	CgroupLayout l;

	(void)ctx;
	if (!cgroup_layout_present(c, &l))
		return;
	if (l.ctrls & (unsigned)arg) {
		check_ok(c, "the %s controller is available", name);
		return;
	}
	check_missing(c, "the %s controller is missing%s", name,
		      arg == FEATURE_CG_CPU ? ": cpu_quota_percent is not enforced" : "");
	check_fix(c, "%s", cgroup_fix(&l));
}

/*
 * Every sandbox's cgroup is made and limited by writes to the hierarchy; one mounted
 * read-only (a container's default, systemd's ProtectControlGroups=) stops every create.
 */
static void probe_cgroup_writable(const FeatureContext *ctx, FeatureCheck *c, int arg)
{
	CgroupLayout l;

	(void)ctx;
	(void)arg;
	if (!cgroup_layout_present(c, &l))
		return;
	if (l.read_only[0]) {
		check_missing(c, "%s is mounted read-only: no session's cgroup can be created",
			      l.read_only);
		check_fix(c,
			  "mount it read-write (mount -o remount,bind,rw %s); for a service, drop "
			  "ProtectControlGroups=; for a container, have it mount cgroups "
			  "read-write",
			  l.read_only);
		return;
	}
	check_ok(c, "%s", l.v2 ? CGROUP_ROOT " is writable" : "the v1 hierarchies are writable");
}

/* Without favordynmods every sandbox build waits ~10 ms in its cgroup migration (dynmods.c). */
static void probe_favordynmods(const FeatureContext *ctx, FeatureCheck *c, int arg)
{
	char mnt[PATH_MAX], opts[512];
	bool ro;

	(void)arg;
	if (mountinfo_find_cgroup2(mnt, sizeof(mnt), opts, sizeof(opts), &ro) < 0) {
		check_missing(c, "no cgroup2 mount for favordynmods: each sandbox build waits for "
				 "an RCU grace period");
		check_fix(c, "mount cgroup2 (the hybrid layout's /sys/fs/cgroup/unified will do)");
		return;
	}
	if (mount_options_have(opts, "favordynmods")) {
		check_ok(c, "favordynmods is set on %s", mnt);
		return;
	}
	if (!kernel_at_least(6, 0)) {
		check_missing(c, "this kernel has no favordynmods: each sandbox build waits "
				 "about 10 ms to join its cgroup");
		check_fix(c, "use Linux 6.0 or later");
	} else if (ro || mounted_read_only(mnt)) {
		check_missing(c, "%s is read-only: favordynmods cannot be set on it", mnt);
		check_fix(c, "mount %s read-write", mnt);
	} else if (ctx->favor_dynmods) {
		check_ok(c,
			 "favordynmods is not set on %s yet: paddock-sessiond sets it when it "
			 "starts",
			 mnt);
	} else {
		check_missing(c,
			      "favordynmods is not set on %s: each sandbox build waits about "
			      "10 ms to join its cgroup",
			      mnt);
		check_fix(c, "cgroup_favor_dynmods = true (the default) sets it when "
			     "paddock-sessiond starts");
	}
}

/* One probe: the name it reports under, whether sessiond needs it, and its argument. */
struct probe {
	const char *name;
	bool required;
	void (*run)(const FeatureContext *ctx, FeatureCheck *c, int arg);
	int arg;
};

/* Every feature, in the order they are reported. */
static const struct probe probes[] = {
	{ "kernel", false, probe_kernel, 0 },
	{ "openat2", true, probe_openat2, 0 },
	{ "clone3", true, probe_clone3, 0 },
	{ "pid namespace", true, probe_namespace, CLONE_NEWPID },
	{ "network namespace", true, probe_namespace, CLONE_NEWNET },
	{ "mount namespace", true, probe_namespace, CLONE_NEWNS },
	{ "ipc namespace", true, probe_namespace, CLONE_NEWIPC },
	{ "uts namespace", true, probe_namespace, CLONE_NEWUTS },
	{ "cgroup namespace", true, probe_namespace, CLONE_NEWCGROUP },
	{ "pidfd", true, probe_pidfd, 0 },
	{ "pidfd_getfd", false, probe_pidfd_getfd, 0 },
	{ "seccomp", true, probe_seccomp, 0 },
	{ "cgroup version", true, probe_cgroup_version, 0 },
	{ "cgroup memory", true, probe_cgroup_controller, FEATURE_CG_MEMORY },
	{ "cgroup pids", true, probe_cgroup_controller, FEATURE_CG_PIDS },
	{ "cgroup cpu", false, probe_cgroup_controller, FEATURE_CG_CPU },
	{ "cgroup writable", true, probe_cgroup_writable, 0 },
	{ "cgroup favordynmods", false, probe_favordynmods, 0 },
};

unsigned kernel_features_probe(const FeatureContext *ctx, feature_report_fn report, void *userdata)
{
	unsigned missing = 0;

	for (size_t i = 0; i < ARRAY_SIZE(probes); i++) {
		FeatureCheck c = { .name = probes[i].name, .required = probes[i].required };

		probes[i].run(ctx, &c, probes[i].arg);
		if (c.state == FEATURE_OK)
			c.fix[0] = '\0';
		if (c.state == FEATURE_MISSING && c.required)
			missing++;
		report(&c, userdata);
	}
	return missing;
}
