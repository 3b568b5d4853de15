/* SPDX-License-Identifier: MIT */
/* Privileges of the sandbox: hostname, rlimits, capabilities, ids, no_new_privs. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/capability.h>

#include "cleanup.h"
#include "sandbox_internal.h"
#include "sandbox_layout.h"

int privs_cap_last(void)
{
	char buf[16] = "";
	_cleanup_close_ int fd = open("/proc/sys/kernel/cap_last_cap", O_RDONLY | O_CLOEXEC);
	ssize_t n;
	int last;

	/* Without the file (very old kernels) the child drops until the kernel says EINVAL. */
	if (fd < 0)
		return 63;
	n = read(fd, buf, sizeof(buf) - 1);
	if (n <= 0)
		return 63;
	buf[n] = '\0';
	last = atoi(buf);
	return last < 0 || last > 63 ? 63 : last;
}

/* Everything below runs in the child between clone and exec: no allocation, no stdio. */

int hostname_in_child(struct child_args *a)
{
	(void)a;
	return sethostname(SANDBOX_HOSTNAME, sizeof(SANDBOX_HOSTNAME) - 1) < 0 ? -errno : 0;
}

int rlimits_in_child(struct child_args *a)
{
	int64_t fsize_max =
		(a->limits.workspace_bytes > a->limits.tmp_bytes ? a->limits.workspace_bytes :
								   a->limits.tmp_bytes) +
		(1 << 20);
	const struct {
		int res;
		rlim_t v;
	} lims[] = {
		{ RLIMIT_NOFILE, (rlim_t)a->limits.nofile },
		{ RLIMIT_CORE, 0 },
		/* Counted per uid on the host; the session uid is the sandbox's alone. */
		{ RLIMIT_NPROC, (rlim_t)a->limits.pids },
		/*
		 * No file can outgrow the largest file system it could be on; a little
		 * above it, so a full file system answers ENOSPC first (not EFBIG and
		 * SIGXFSZ, which kills shells).
		 */
		{ RLIMIT_FSIZE, (rlim_t)fsize_max },
	};

	for (size_t i = 0; i < ARRAY_SIZE(lims); i++) {
		struct rlimit rl = { lims[i].v, lims[i].v };

		if (setrlimit(lims[i].res, &rl) < 0)
			return -errno;
	}
	return 0;
}

int caps_bounding_in_child(struct child_args *a)
{
	for (int cap = 0; cap <= a->env->cap_last; cap++) {
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0) {
			/* Past the kernel's last capability when cap_last_cap was unreadable. */
			if (errno == EINVAL && cap > CAP_LAST_CAP)
				break;
			return -errno;
		}
	}
	/* Ambient capabilities would survive the uid change; there should be none. */
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return -errno;
	return 0;
}

int setgroups_in_child(struct child_args *a)
{
	(void)a;
	return setgroups(0, NULL) < 0 ? -errno : 0;
}

int setgid_in_child(struct child_args *a)
{
	return setresgid(a->gid, a->gid, a->gid) < 0 ? -errno : 0;
}

int setuid_in_child(struct child_args *a)
{
	/* Leaving uid 0 clears the permitted and effective sets (no SECBIT_KEEP_CAPS). */
	return setresuid(a->uid, a->uid, a->uid) < 0 ? -errno : 0;
}

int caps_verify_in_child(struct child_args *a)
{
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
	uid_t ru, eu, su;
	gid_t rg, eg, sg;

	if (syscall(SYS_capget, &hdr, data) < 0)
		return -errno;
	for (size_t i = 0; i < ARRAY_SIZE(data); i++)
		if (data[i].effective || data[i].permitted || data[i].inheritable)
			return -EPERM;
	if (getresuid(&ru, &eu, &su) < 0 || getresgid(&rg, &eg, &sg) < 0)
		return -errno;
	if (ru != a->uid || eu != a->uid || su != a->uid || rg != a->gid || eg != a->gid ||
	    sg != a->gid)
		return -EPERM;
	return 0;
}

int no_new_privs_in_child(struct child_args *a)
{
	(void)a;
	return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ? -errno : 0;
}
