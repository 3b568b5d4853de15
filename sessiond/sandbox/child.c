/* SPDX-License-Identifier: MIT */
/* A sandbox's child between clone and exec: the setup checklist, then exec of paddock-init. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cleanup.h"
#include "init/init_proto.h"
#include "sandbox_internal.h"
#include "sandbox_layout.h"

/* Fds the child must keep are first moved at or above this, out of the way of 0..4. */
#define CHILD_FD_HIGH 10
/*
 * The namespaces clone3 could have made, made here instead: copying the mount table
 * costs time in proportion to the host's mounts, and the child can spend it where the
 * daemon's loop does not wait. Its pid namespace has to come from clone3.
 */
static int unshare_in_child(struct child_args *a)
{
	(void)a;
	return unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS) < 0 ? -errno : 0;
}

static int wait_for_parent_in_child(struct child_args *a)
{
	char go;
	ssize_t n;

	do
		n = read(a->sync_fd, &go, 1);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	/* EOF: the parent gave up on us (or died) before we were set up. */
	if (n != 1)
		return -EPIPE;
	a->released = true;
	return 0;
}

static int move_high(int *fd)
{
	int high = fcntl(*fd, F_DUPFD_CLOEXEC, CHILD_FD_HIGH);

	if (high < 0)
		return -errno;
	*fd = high;
	return 0;
}

/* 0..2 on /dev/null, the control socket on 3, sessiond's end on 4, nothing else inherited. */
static int fds_in_child(struct child_args *a)
{
	int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	int r;

	if (null_fd < 0)
		return -errno;
	r = move_high(&null_fd);
	if (r >= 0)
		r = move_high(&a->sync_fd);
	if (r >= 0)
		r = move_high(&a->init_fd);
	if (r >= 0)
		r = move_high(&a->ctl_child_fd);
	if (r >= 0)
		r = move_high(&a->ctl_parent_fd);
	if (r < 0)
		return r;
	for (int fd = 0; fd <= 2; fd++)
		if (dup3(null_fd, fd, 0) < 0)
			return -errno;
	if (dup3(a->ctl_child_fd, INIT_CTL_FD, 0) < 0 ||
	    dup3(a->ctl_parent_fd, INIT_CTL_PARENT_FD, 0) < 0)
		return -errno;
	/* Whatever else the daemon had open is closed by exec; old kernels lack the flag. */
	if (syscall(SYS_close_range, INIT_CTL_PARENT_FD + 1, ~0U, CLOSE_RANGE_CLOEXEC) < 0 &&
	    errno != EINVAL && errno != ENOSYS)
		return -errno;
	return 0;
}

static int exec_in_child(struct child_args *a)
{
	static char *const argv[] = { "paddock-init", NULL };
	static char *const envp[] = { "PATH=" SANDBOX_PATH, "HOME=" SANDBOX_WORKSPACE,
				      "LANG=C.UTF-8", NULL };

	syscall(SYS_execveat, a->init_fd, "", argv, envp, AT_EMPTY_PATH);
	return -errno;
}

struct child_step {
	enum sandbox_step step;
	int (*run)(struct child_args *a);
};

/* The child's setup, in its fixed order. */
static const struct child_step child_checklist[] = {
	{ STEP_CGROUP_CREATE, cgroup_create_in_child },
	{ STEP_CGROUP_ATTACH, cgroup_attach_in_child }, /* what follows is charged to it */
	{ STEP_WORKSPACE, workspace_create_in_child },	/* still in the daemon's mount ns */
	{ STEP_UNSHARE, unshare_in_child },
	{ STEP_HOST_SCAN, roots_open_in_child },
	{ STEP_HOST_SCAN, host_scan_in_child },
	{ STEP_NETNS_CHILD, netns_in_child },
	{ STEP_WAIT_PARENT, wait_for_parent_in_child },
	{ STEP_CGROUP_NS, cgroup_ns_in_child },
	{ STEP_MOUNT_PRIVATE, mount_private_in_child },
	{ STEP_MOUNT_ROOT, mount_root_in_child },
	{ STEP_MOUNT_USR, mount_usr_in_child },
	{ STEP_MOUNT_ROOT_LINKS, mount_root_links_in_child },
	{ STEP_MOUNT_ETC, mount_etc_in_child },
	{ STEP_MOUNT_DEV, mount_dev_in_child },
	{ STEP_MOUNT_PROC, mount_proc_in_child },
	{ STEP_MOUNT_TMP, mount_tmp_in_child },
	{ STEP_MOUNT_WORKSPACE, mount_workspace_in_child },
	{ STEP_MOUNT_LIB_DIR, mount_lib_dir_in_child },
	{ STEP_PIVOT_ROOT, mount_pivot_in_child },
	{ STEP_ROOT_READONLY, mount_root_readonly_in_child },
	{ STEP_CHDIR, mount_chdir_in_child },
	{ STEP_HOSTNAME, hostname_in_child },
	{ STEP_FDS, fds_in_child },
	{ STEP_RLIMITS, rlimits_in_child },
	{ STEP_CAPS_BOUNDING, caps_bounding_in_child },
	{ STEP_SETGROUPS, setgroups_in_child },
	{ STEP_SETGID, setgid_in_child },
	{ STEP_SETUID, setuid_in_child },
	{ STEP_CAPS_VERIFY, caps_verify_in_child },
	{ STEP_NO_NEW_PRIVS, no_new_privs_in_child },
	{ STEP_SECCOMP, seccomp_in_child }, /* the prepared BPF filter is installed here */
	{ STEP_EXEC, exec_in_child },
};

static _Noreturn void child_fail(struct child_args *a, unsigned step, int err)
{
	struct child_failure f = { .step = step, .err = err };
	ssize_t n;

	/* The daemon reads the spawner's answer (our pid) first, then lets us go: before
	 * that, a word from us would be taken for the answer. */
	if (!a->released && wait_for_parent_in_child(a) < 0)
		_exit(127);
	n = write(a->sync_fd, &f, sizeof(f));
	(void)n;
	_exit(127);
}

static bool kept(int fd, const int *keep, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (keep[i] == fd)
			return true;
	return false;
}

/* Kernels before 5.9 have no close_range: every fd /proc lists, one by one. No
 * allocation, so that it is safe in a child between clone and exec too. */
static void close_listed_fds_except(const int *keep, size_t n)
{
	char buf[4096] __attribute__((aligned(8)));
	int dir = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ssize_t len;

	if (dir < 0)
		return;
	while ((len = getdents64(dir, buf, sizeof(buf))) > 0)
		for (ssize_t off = 0; off < len;) {
			const struct dirent64 *d = (const struct dirent64 *)(buf + off);
			char *end;
			long fd = strtol(d->d_name, &end, 10);

			off += d->d_reclen;
			if (*end == '\0' && end != d->d_name && fd > 2 && fd != dir &&
			    !kept((int)fd, keep, n))
				close((int)fd);
		}
	close(dir);
}

void close_fds_except(int *keep, size_t n)
{
	unsigned from = 3;

	/* Ascending, so that the ranges between them can be closed in one pass. */
	for (size_t i = 1; i < n; i++)
		for (size_t j = i; j > 0 && keep[j - 1] > keep[j]; j--) {
			int t = keep[j];

			keep[j] = keep[j - 1];
			keep[j - 1] = t;
		}
	for (size_t i = 0; i < n; i++) {
		if (keep[i] < 0 || (unsigned)keep[i] < from)
			continue;
		if ((unsigned)keep[i] > from &&
		    syscall(SYS_close_range, from, (unsigned)keep[i] - 1, 0) < 0) {
			close_listed_fds_except(keep, n);
			return;
		}
		from = (unsigned)keep[i] + 1;
	}
	if (syscall(SYS_close_range, from, ~0U, 0) < 0)
		close_listed_fds_except(keep, n);
}

/*
 * What the spawner had open (its socket to the daemon, and what the daemon had when it
 * forked the spawner) goes at once rather than at exec: a child of a daemon that died
 * mid-build would hold it for as long as it sets up. The state dir's lock stays
 * (sandbox_env_keep_in_child), and so does the workspace template until it is copied.
 */
static void close_inherited_in_child(const struct child_args *a)
{
	int keep[] = { a->sync_fd, a->ctl_child_fd,	     a->ctl_parent_fd,
		       a->init_fd, a->env->keep_in_child_fd, a->env->ws_template_fd };

	close_fds_except(keep, ARRAY_SIZE(keep));
}

/*
 * Until it drops its privileges (setresuid clears this) the child dies with the daemon,
 * its parent (the spawner clones it as the daemon's): what it made so far is then the
 * next daemon's to clean, once the lock is free. Dead already, the daemon has hung up its
 * end of the sync socket.
 */
static void die_with_parent_in_child(const struct child_args *a)
{
	struct pollfd p = { .fd = a->sync_fd, .events = POLLIN };

	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 ||
	    (poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR))))
		_exit(127);
}

_Noreturn void child_main(struct child_args *a)
{
	die_with_parent_in_child(a);
	close_inherited_in_child(a);
	for (size_t i = 0; i < ARRAY_SIZE(child_checklist); i++) {
		int r = child_checklist[i].run(a);

		if (r < 0)
			child_fail(a, child_checklist[i].step, -r);
	}
	child_fail(a, STEP_EXEC, EIO); /* exec returned without an error: cannot happen */
}
