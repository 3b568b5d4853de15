/* SPDX-License-Identifier: MIT */
/* Unit tests for the kernel feature probes: their parsers, and their findings on this host. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <seccomp.h>

#include "kernel_features.h"

#include "unit.h"

static void test_release_at_least_compares_major_then_minor(void)
{
	CHECK(kernel_features_release_at_least("6.1.0-13-amd64", 5, 6));
	CHECK(kernel_features_release_at_least("5.6.0", 5, 6));
	CHECK(kernel_features_release_at_least("5.14.0-362.el9.x86_64", 5, 6));
	CHECK(!kernel_features_release_at_least("5.4.0-150-generic", 5, 6));
	CHECK(!kernel_features_release_at_least("4.19.0", 5, 6));
	CHECK(kernel_features_release_at_least("10.0", 6, 0));
	CHECK(!kernel_features_release_at_least("", 5, 6));
	CHECK(!kernel_features_release_at_least("linux", 5, 6));
}

static void test_cgroup1_line_gives_mount_point_controllers_and_ro(void)
{
	char mnt[64], tiny[8];
	unsigned ctrls = 99;
	bool ro = true;

	CHECK_EQ_INT(kernel_features_parse_cgroup1(
			     "40 30 0:35 / /sys/fs/cgroup/memory rw,nosuid,nodev,"
			     "noexec,relatime shared:18 - cgroup cgroup rw,memory\n",
			     mnt, sizeof(mnt), &ctrls, &ro),
		     0);
	CHECK_EQ_STR(mnt, "/sys/fs/cgroup/memory");
	CHECK_EQ_INT(ctrls, FEATURE_CG_MEMORY);
	CHECK(!ro);
	/* systemd-nspawn's: the controllers mounted read-only. */
	CHECK_EQ_INT(kernel_features_parse_cgroup1(
			     "51 45 0:40 / /sys/fs/cgroup/cpu,cpuacct ro,nosuid,"
			     "nodev,noexec,relatime - cgroup cgroup rw,cpu,cpuacct\n",
			     mnt, sizeof(mnt), &ctrls, &ro),
		     0);
	CHECK_EQ_STR(mnt, "/sys/fs/cgroup/cpu,cpuacct");
	CHECK_EQ_INT(ctrls, FEATURE_CG_CPU);
	CHECK(ro);
	CHECK_EQ_INT(kernel_features_parse_cgroup1("52 45 0:41 / /sys/fs/cgroup/pids rw,relatime - "
						   "cgroup cgroup ro,pids\n",
						   mnt, sizeof(mnt), &ctrls, &ro),
		     0);
	CHECK_EQ_INT(ctrls, FEATURE_CG_PIDS);
	CHECK(ro);
	/* A hierarchy without paddock's controllers, and other file systems. */
	CHECK_EQ_INT(
		kernel_features_parse_cgroup1("53 45 0:42 / /sys/fs/cgroup/systemd rw,relatime - "
					      "cgroup cgroup rw,xattr,name=systemd\n",
					      mnt, sizeof(mnt), &ctrls, &ro),
		0);
	CHECK_EQ_INT(ctrls, 0);
	CHECK_EQ_INT(
		kernel_features_parse_cgroup1("54 45 0:43 / /sys/fs/cgroup/cpuacct rw - cgroup "
					      "cgroup rw,cpuacct\n",
					      mnt, sizeof(mnt), &ctrls, &ro),
		0);
	CHECK_EQ_INT(ctrls, 0);
	CHECK_EQ_INT(
		kernel_features_parse_cgroup1("35 25 0:30 / /sys/fs/cgroup/unified rw - cgroup2 "
					      "cgroup2 rw\n",
					      mnt, sizeof(mnt), &ctrls, &ro),
		-ENOENT);
	CHECK_EQ_INT(kernel_features_parse_cgroup1("22 1 8:1 / / rw - ext4 /dev/sda1 rw\n", mnt,
						   sizeof(mnt), &ctrls, &ro),
		     -ENOENT);
	CHECK_EQ_INT(kernel_features_parse_cgroup1("garbage", mnt, sizeof(mnt), &ctrls, &ro),
		     -ENOENT);
	CHECK_EQ_INT(kernel_features_parse_cgroup1("40 30 0:35 / /sys/fs/cgroup/memory rw - cgroup "
						   "cgroup rw,memory\n",
						   tiny, sizeof(tiny), &ctrls, &ro),
		     -ENAMETOOLONG);
}

/* What the probes report on this host, kept for the checks below. */
struct seen {
	unsigned n;	    /* findings */
	unsigned bad;	    /* findings without a detail, or missing without a fix */
	bool openat2_ok;    /* this host's kernel and process allow openat2 */
	bool seccomp_ok;    /* filters load */
	bool pid_ns;	    /* the pid namespace probe ran (root) or said it needs root */
	unsigned unchecked; /* findings that could not be probed from here */
};

static void on_check(const FeatureCheck *c, void *data)
{
	struct seen *s = data;

	s->n++;
	if (!c->name || !c->detail[0] || (c->state == FEATURE_MISSING && !c->fix[0]) ||
	    (c->state == FEATURE_OK && c->fix[0]))
		s->bad++;
	if (c->state != FEATURE_OK)
		fprintf(stderr, "%s: %s; %s\n", c->name, c->detail, c->fix);
	if (strcmp(c->name, "openat2") == 0)
		s->openat2_ok = c->state == FEATURE_OK && c->required;
	if (strcmp(c->name, "seccomp") == 0)
		s->seccomp_ok = c->state == FEATURE_OK && c->required;
	if (strcmp(c->name, "pid namespace") == 0)
		s->pid_ns = c->state == (geteuid() == 0 ? FEATURE_OK : FEATURE_UNCHECKED);
	if (c->state == FEATURE_UNCHECKED)
		s->unchecked++;
}

/* This host runs the test suite's sandboxes, so what they need is here. */
static void test_probes_here_find_what_the_sandboxes_need(void)
{
	FeatureContext ctx = { .root = geteuid() == 0, .favor_dynmods = true };
	struct seen s = { 0 };
	unsigned missing = kernel_features_probe(&ctx, on_check, &s);

	CHECK_GE_INT(s.n, 15);
	CHECK_EQ_INT(s.bad, 0);
	CHECK(s.openat2_ok);
	CHECK(s.seccomp_ok);
	CHECK(s.pid_ns);
	CHECK(ctx.root ? s.unchecked == 0 : s.unchecked > 0);
	CHECK_EQ_INT(missing, 0);
}

/* One probe's finding, kept by name. */
struct wanted {
	const char *name; /* the probe asked about */
	FeatureCheck got; /* its finding */
	bool seen;	  /* it reported */
};

static void keep_wanted(const FeatureCheck *c, void *data)
{
	struct wanted *w = data;

	if (strcmp(c->name, w->name) == 0) {
		w->got = *c;
		w->seen = true;
	}
}

/*
 * Child side: refuse call with err as a unit's seccomp filter would, probe, and exit 0 when
 * the finding for probe starts with want and its fix with fix.
 */
static int refused_in_child(const char *call, int err, bool unit, const char *probe,
			    const char *want, const char *fix)
{
	FeatureContext ctx = { .root = geteuid() == 0, .favor_dynmods = true };
	struct wanted w = { .name = probe };
	scmp_filter_ctx f = seccomp_init(SCMP_ACT_ALLOW);

	if (!f ||
	    seccomp_rule_add(f, SCMP_ACT_ERRNO(err), seccomp_syscall_resolve_name(call), 0) < 0 ||
	    seccomp_load(f) < 0)
		return 2;
	seccomp_release(f);
	if (unit)
		setenv("INVOCATION_ID", "0123456789abcdef0123456789abcdef", 1);
	else
		unsetenv("INVOCATION_ID");
	(void)kernel_features_probe(&ctx, keep_wanted, &w);
	if (!w.seen || w.got.state != FEATURE_MISSING ||
	    strncmp(w.got.detail, want, strlen(want)) || strncmp(w.got.fix, fix, strlen(fix))) {
		fprintf(stderr, "%s: got '%s; %s'\n", probe, w.got.detail, w.got.fix);
		return 1;
	}
	return 0;
}

static bool refused(const char *call, int err, bool unit, const char *probe, const char *want,
		    const char *fix)
{
	int status;
	pid_t pid = fork();

	if (pid == 0)
		_exit(refused_in_child(call, err, unit, probe, want, fix));
	return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
	       WEXITSTATUS(status) == 0;
}

/* The sentences for a refused call: a unit's filter, another filter; ENOSYS or EPERM. */
static void test_refused_call_is_named_with_its_errno_and_filter(void)
{
	CHECK(refused("openat2", ENOSYS, true, "openat2",
		      "openat2() is refused (ENOSYS): a seccomp filter on this service blocks it, "
		      "such as systemd's RestrictSUIDSGID=",
		      "remove that setting (RestrictSUIDSGID=no in a drop-in"));
	CHECK(refused("openat2", EPERM, false, "openat2",
		      "openat2() is refused (EPERM): a seccomp filter this process runs under "
		      "blocks it",
		      "let openat2() through that filter"));
	CHECK(refused("clone3", ENOSYS, true, "clone3",
		      "clone3() is refused (ENOSYS): a seccomp filter on this service blocks it, "
		      "such as systemd's RestrictNamespaces=",
		      "remove that setting (RestrictNamespaces=no"));
	CHECK(refused("pidfd_getfd", EPERM, false, "pidfd_getfd",
		      "pidfd_getfd() is refused (EPERM): a seccomp filter this process runs under "
		      "blocks it, such as systemd-nspawn's, and sessions do not survive a restart",
		      "let pidfd_getfd() through that filter (systemd-nspawn: "
		      "--system-call-filter=pidfd_getfd)"));
	CHECK(refused("pidfd_open", ENOSYS, false, "pidfd", "pidfd_open() is refused (ENOSYS)",
		      "let pidfd_open() through"));
	CHECK(refused("prctl", EPERM, false, "seccomp", "prctl() is refused (EPERM)",
		      "let prctl() through that filter"));
}

int main(void)
{
	test_release_at_least_compares_major_then_minor();
	test_cgroup1_line_gives_mount_point_controllers_and_ro();
	test_probes_here_find_what_the_sandboxes_need();
	test_refused_call_is_named_with_its_errno_and_filter();
	return unit_summary();
}
