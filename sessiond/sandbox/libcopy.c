/* SPDX-License-Identifier: MIT */
/*
 * The sandbox's /opt/paddock: a copy of lib_dir on a tmpfs of the daemon's, made read-only,
 * rather than a bind of lib_dir itself. A bind mount shows its source path to the sandbox
 * (the root field of /proc/self/mountinfo: a build directory, the host's layout); the root
 * of a tmpfs shows as "/". Each start of the daemon makes a fresh copy, so that sessions
 * made after an upgrade get the new harnesses while those still running keep the ones
 * their interpreters loaded (their binds hold the old tmpfs).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "sandbox_internal.h"

#define LIB_COPY_OPTS "size=16m,nr_inodes=256,mode=755"

static int copy_file(int from_dir, int to_dir, const char *name, mode_t mode, off_t size)
{
	_cleanup_close_ int in = openat(from_dir, name, O_RDONLY | O_CLOEXEC);
	_cleanup_close_ int out = -1;

	if (in < 0)
		return -errno;
	out = openat(to_dir, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (out < 0)
		return -errno;
	for (off_t done = 0; done < size;) {
		ssize_t n = sendfile(out, in, NULL, (size_t)(size - done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break; /* shorter than it was: what is there is copied */
		done += n;
	}
	/* The harnesses are read by the sandbox user, init executed: no one may write. */
	return fchmod(out, mode & 0555) < 0 ? -errno : 0;
}

/* The regular files at the top of lib_dir, links followed (lib_dir is root's: a package
 * or a build tree may link its harnesses); caches and other directories are left out. */
static int copy_dir(const char *from, const char *to)
{
	_cleanup_close_ int to_fd = open(to, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = opendir(from);
	struct dirent *e;
	int r = 0;

	if (!d || to_fd < 0) {
		r = -errno;
		if (d)
			closedir(d);
		return r;
	}
	while (r == 0 && (errno = 0, e = readdir(d))) {
		struct stat st;

		if (fstatat(dirfd(d), e->d_name, &st, 0) < 0) {
			if (errno == ENOENT)
				continue; /* a dangling link */
			r = -errno;
			break;
		}
		if (S_ISREG(st.st_mode))
			r = copy_file(dirfd(d), to_fd, e->d_name, st.st_mode, st.st_size);
	}
	if (r == 0 && errno)
		r = -errno;
	closedir(d);
	return r;
}

/* What every sandbox runs: without them the copy is useless, and so is starting. */
static int copied_what_sandboxes_run(const char *lib_dir, const char *copy)
{
	static const char *const needed[] = { "paddock-init", "harness.py", "harness_native.py",
					      "harness_channel.py" };
	char p[PATH_MAX];

	for (size_t i = 0; i < ARRAY_SIZE(needed); i++) {
		snprintf(p, sizeof(p), "%s/%s", copy, needed[i]);
		if (access(p, F_OK) < 0) {
			sandbox_set_error("%s/%s is missing: a broken installation", lib_dir,
					  needed[i]);
			return -ENOENT;
		}
	}
	return 0;
}

/* A copy left mounted by a daemon that did not stop cleanly goes first. */
static void detach_all(const char *path)
{
	for (int i = 0; i < 16 && umount2(path, MNT_DETACH) == 0; i++)
		;
}

int lib_copy_setup(SandboxEnv *env)
{
	const char *path = env->lib_copy;
	int r;

	detach_all(path);
	if (mount("paddock-lib", path, "tmpfs", MS_NOSUID | MS_NODEV, LIB_COPY_OPTS) < 0) {
		r = -errno;
		sandbox_set_error("mounting a tmpfs on %s: %s", path, strerror(errno));
		return r;
	}
	r = copy_dir(env->lib_dir, path);
	if (r < 0)
		sandbox_set_error("copying %s to %s: %s", env->lib_dir, path, strerror(-r));
	else if ((r = copied_what_sandboxes_run(env->lib_dir, path)) < 0)
		; /* it said what is missing */
	else if (mount(NULL, path, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV,
		       NULL) < 0) {
		r = -errno;
		sandbox_set_error("making %s read-only: %s", path, strerror(errno));
	}
	if (r < 0)
		detach_all(path);
	return r;
}

void lib_copy_clear(SandboxEnv *env)
{
	if (!env->lib_copy)
		return;
	/* Sandboxes still running (kept across a restart) hold their own binds of it. */
	detach_all(env->lib_copy);
	(void)rmdir(env->lib_copy);
}
