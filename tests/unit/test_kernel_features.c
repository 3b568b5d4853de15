/* SPDX-License-Identifier: MIT */
/* Unit tests for the kernel feature probes: their parsers, and their findings on this host. */
#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "kernel_features.h"

#include "unit.h"

static void test_release(void)
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

static void test_parse_cgroup1(void)
{
	char mnt[64], tiny[8];
	unsigned ctrls = 99;
	bool ro = true;

	CHECK(kernel_features_parse_cgroup1("40 30 0:35 / /sys/fs/cgroup/memory rw,nosuid,nodev,"
					    "noexec,relatime shared:18 - cgroup cgroup rw,memory\n",
					    mnt, sizeof(mnt), &ctrls, &ro) == 0);
	CHECK(strcmp(mnt, "/sys/fs/cgroup/memory") == 0);
	CHECK(ctrls == FEATURE_CG_MEMORY);
	CHECK(!ro);
	/* systemd-nspawn's: the controllers mounted read-only. */
	CHECK(kernel_features_parse_cgroup1(
		      "51 45 0:40 / /sys/fs/cgroup/cpu,cpuacct ro,nosuid,"
		      "nodev,noexec,relatime - cgroup cgroup rw,cpu,cpuacct\n",
		      mnt, sizeof(mnt), &ctrls, &ro) == 0);
	CHECK(strcmp(mnt, "/sys/fs/cgroup/cpu,cpuacct") == 0);
	CHECK(ctrls == FEATURE_CG_CPU);
	CHECK(ro);
	CHECK(kernel_features_parse_cgroup1("52 45 0:41 / /sys/fs/cgroup/pids rw,relatime - "
					    "cgroup cgroup ro,pids\n",
					    mnt, sizeof(mnt), &ctrls, &ro) == 0);
	CHECK(ctrls == FEATURE_CG_PIDS && ro);
	/* A hierarchy without paddock's controllers, and other file systems. */
	CHECK(kernel_features_parse_cgroup1("53 45 0:42 / /sys/fs/cgroup/systemd rw,relatime - "
					    "cgroup cgroup rw,xattr,name=systemd\n",
					    mnt, sizeof(mnt), &ctrls, &ro) == 0);
	CHECK(ctrls == 0);
	CHECK(kernel_features_parse_cgroup1("54 45 0:43 / /sys/fs/cgroup/cpuacct rw - cgroup "
					    "cgroup rw,cpuacct\n",
					    mnt, sizeof(mnt), &ctrls, &ro) == 0);
	CHECK(ctrls == 0);
	CHECK(kernel_features_parse_cgroup1("35 25 0:30 / /sys/fs/cgroup/unified rw - cgroup2 "
					    "cgroup2 rw\n",
					    mnt, sizeof(mnt), &ctrls, &ro) == -ENOENT);
	CHECK(kernel_features_parse_cgroup1("22 1 8:1 / / rw - ext4 /dev/sda1 rw\n", mnt,
					    sizeof(mnt), &ctrls, &ro) == -ENOENT);
	CHECK(kernel_features_parse_cgroup1("garbage", mnt, sizeof(mnt), &ctrls, &ro) == -ENOENT);
	CHECK(kernel_features_parse_cgroup1("40 30 0:35 / /sys/fs/cgroup/memory rw - cgroup "
					    "cgroup rw,memory\n",
					    tiny, sizeof(tiny), &ctrls, &ro) == -ENAMETOOLONG);
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
static void test_probe_here(void)
{
	FeatureContext ctx = { .root = geteuid() == 0, .favor_dynmods = true };
	struct seen s = { 0 };
	unsigned missing = kernel_features_probe(&ctx, on_check, &s);

	CHECK(s.n >= 15);
	CHECK(s.bad == 0);
	CHECK(s.openat2_ok);
	CHECK(s.seccomp_ok);
	CHECK(s.pid_ns);
	CHECK(ctx.root ? s.unchecked == 0 : s.unchecked > 0);
	CHECK(missing == 0);
}

int main(void)
{
	test_release();
	test_parse_cgroup1();
	test_probe_here();
	return unit_summary();
}
