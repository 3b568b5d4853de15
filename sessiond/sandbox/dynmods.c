/* SPDX-License-Identifier: MIT */
/*
 * cgroup "favordynmods": moving a task between cgroups (every sandbox's first step
 * joins its cgroup) otherwise waits for an RCU grace period on the kernel's global
 * threadgroup lock, about 10 ms, most of a cold sandbox build. The flag belongs to
 * the cgroup2 superblock but switches the migration locking for every hierarchy,
 * v1 ones included, and the kernel keeps it until reboot: so it is an operator's
 * setting (cgroup_favor_dynmods, docs/operations.md).
 */
#include "sandbox.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>

#include "log.h"
#include "mountinfo.h"

int cgroup2_favor_dynmods_options(const char *superopts, char *out, size_t len)
{
	if (mount_options_have(superopts, "favordynmods"))
		return 0;
	/* A remount replaces every cgroup2 option: the ones in force go along. */
	if (snprintf(out, len, "%s%sfavordynmods", superopts, *superopts ? "," : "") >= (int)len)
		return -ENAMETOOLONG;
	return 1;
}

int sandbox_cgroup_favor_dynmods(void)
{
	char mnt[PATH_MAX], opts[512], want[576];
	bool ro;
	int r;

	r = mountinfo_find_cgroup2(mnt, sizeof(mnt), opts, sizeof(opts), &ro);
	if (r < 0) {
		log_warn("cgroup_favor_dynmods: no cgroup2 mount to set favordynmods on (%s); "
			 "each sandbox build waits for an RCU grace period",
			 strerror(-r));
		return r;
	}
	r = cgroup2_favor_dynmods_options(opts, want, sizeof(want));
	if (r <= 0)
		return r;
	if (ro) {
		log_warn("cgroup_favor_dynmods: %s is read-only here; favordynmods not set", mnt);
		return -EROFS;
	}
	if (mount(NULL, mnt, NULL, MS_REMOUNT, want) < 0) {
		r = -errno;
		log_warn("cgroup_favor_dynmods: remounting %s with %s: %s", mnt, want,
			 strerror(-r));
		return r;
	}
	log_info("cgroup: favordynmods set on %s (cgroup_favor_dynmods); the kernel keeps it "
		 "until reboot",
		 mnt);
	return 1;
}
