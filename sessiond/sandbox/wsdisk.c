/* SPDX-License-Identifier: MIT */
/*
 * Workspaces on disk: each session's /workspace is its own ext4 file system, the size of
 * workspace_bytes, in an unnamed sparse file of the state directory, on a loop device.
 *
 * Why this shape: the kernel enforces the size (a full workspace is ENOSPC), the pages of
 * its files are page cache the session's memory cgroup can reclaim (writing files never
 * OOM-kills the session, unlike a tmpfs), and it needs nothing of the host's file system
 * (project quotas would need a state directory mounted with them).
 *
 * Nothing can be left behind: the image file never has a name (O_TMPFILE), the loop device
 * is set to detach itself when its last user lets go (LO_FLAGS_AUTOCLEAR), so unmounting
 * the workspace everywhere frees the device, and with it the file and its blocks.
 *
 * The file system is made once per daemon start, by mke2fs, into a template held open;
 * each session copies the template's few hundred KiB of metadata (its data extents, read
 * once here) into a fresh sparse file of the same size. That copy, the loop device and the
 * mount happen in the spawn child, off the daemon's loop, like the rest of a sandbox.
 */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/loop.h>

#include "cleanup.h"
#include "sandbox_internal.h"

extern char **environ;

/* Loop devices another spawn took between LOOP_CTL_GET_FREE and LOOP_CONFIGURE. */
#define LOOP_TRIES 32
/* discard: deleting files punches holes in the image, so the host gets the space back. */
#define WS_MOUNT_OPTS "discard,noinit_itable"
#define WS_PROBE_DIR ".disk-probe"

static const char *const mke2fs_paths[] = { "/usr/sbin/mke2fs", "/sbin/mke2fs" };

/* "/dev/loop<n>" into buf without stdio (it runs between clone and exec too). */
static void loop_dev_path(char buf[32], unsigned n)
{
	char digits[12];
	size_t k = 0, len = sizeof("/dev/loop") - 1;

	memcpy(buf, "/dev/loop", len);
	do {
		digits[k++] = (char)('0' + n % 10);
		n /= 10;
	} while (n && k < sizeof(digits));
	while (k)
		buf[len++] = digits[--k];
	buf[len] = '\0';
}

/*
 * Bind image_fd to a free loop device that detaches itself once unused; its path into
 * dev. Returns the device's fd (the caller closes it once the device is mounted).
 */
static int loop_attach(int image_fd, bool read_only, char dev[32])
{
	struct loop_config lc = {
		.fd = (uint32_t)image_fd,
		.info.lo_flags = LO_FLAGS_AUTOCLEAR | LO_FLAGS_DIRECT_IO |
				 (read_only ? LO_FLAGS_READ_ONLY : 0),
	};
	int ctl, r = -EBUSY;

	ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	if (ctl < 0)
		return -errno;
	for (int i = 0; i < LOOP_TRIES && r == -EBUSY; i++) {
		int n = ioctl(ctl, LOOP_CTL_GET_FREE);
		int fd;

		if (n < 0) {
			r = -errno;
			break;
		}
		loop_dev_path(dev, (unsigned)n);
		fd = open(dev, (read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC);
		if (fd < 0) {
			r = -errno;
			break;
		}
		if (ioctl(fd, LOOP_CONFIGURE, &lc) == 0) {
			close(ctl);
			return fd;
		}
		r = -errno; /* EBUSY: another spawn configured it first; take the next */
		close(fd);
	}
	close(ctl);
	return r;
}

/* Copy the template's data extents into a fresh unnamed file of the same size. */
static int image_new(const SandboxEnv *env)
{
	int fd = open(env->workspaces_dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	int r = 0;

	if (fd < 0)
		return -errno;
	if (ftruncate(fd, env->ws_image_bytes) < 0)
		r = -errno;
	for (size_t i = 0; r == 0 && i < env->n_ws_extents; i++) {
		loff_t in = env->ws_extents[i].off, out = in;
		int64_t left = env->ws_extents[i].len;

		while (r == 0 && left > 0) {
			ssize_t n = copy_file_range(env->ws_template_fd, &in, fd, &out,
						    (size_t)left, 0);

			if (n <= 0)
				r = n < 0 ? -errno : -EIO;
			left -= n;
		}
	}
	if (r < 0) {
		close(fd);
		return r;
	}
	return fd;
}

/* ext4 makes lost+found at its root; a workspace starts empty. */
static void remove_lost_found(const char *root)
{
	char path[PATH_MAX];

	if (path_join(path, sizeof(path), root, "lost+found") == 0)
		(void)rmdir(path);
}

/* Mount a new copy of the template at a->workspace, a directory it makes (an existing one
 * is a caller bug, and left as it was). */
static int mount_new_image(struct child_args *a)
{
	char dev[32];
	int img, loop, r = 0;

	img = image_new(a->env);
	close(a->env->ws_template_fd); /* the child's copy: nothing else here reads it */
	if (img < 0)
		return img;
	loop = loop_attach(img, false, dev);
	close(img); /* the loop device holds it now */
	if (loop < 0)
		return loop;
	if (mount(dev, a->workspace, "ext4", MS_NOSUID | MS_NODEV, WS_MOUNT_OPTS) < 0)
		r = -errno;
	else if (chown(a->workspace, a->uid, a->gid) < 0 || chmod(a->workspace, 0700) < 0)
		r = -errno;
	if (r < 0)
		(void)umount2(a->workspace, MNT_DETACH);
	else
		remove_lost_found(a->workspace);
	close(loop); /* with the mount its only user, AUTOCLEAR frees it at the last unmount */
	return r;
}

int ws_disk_create_in_child(struct child_args *a)
{
	int r;

	/* The template is made for one size; a different one would need its own. */
	if (a->limits.workspace_bytes != a->env->ws_workspace_bytes)
		return -EINVAL;
	if (mkdir(a->workspace, 0700) < 0)
		return -errno;
	r = mount_new_image(a);
	if (r < 0)
		(void)rmdir(a->workspace);
	return r;
}

/* Run mke2fs on fd, as /proc/self/fd/3 of the child. */
static int run_mke2fs(int fd)
{
	posix_spawn_file_actions_t fa;
	const char *bin = NULL;
	char *argv[] = {
		"mke2fs", "-q", "-F", "-t", "ext4",
		/* 4 KiB blocks whatever the size (mke2fs.conf would pick 1 KiB below 512 MiB),
		 * an inode for each, so that a workspace holds as many small files as a tmpfs
		 * of its size would (image_bytes() adds room for their table); no journal: the
		 * file system does not outlive the host's uptime, and a journal is a kernel
		 * thread per session */
		"-b", "4096", "-i", "4096", "-m", "0", "-O", "^has_journal", "-E",
		"lazy_itable_init=1,nodiscard", "/proc/self/fd/3", NULL
	};
	pid_t pid;
	int status, r;

	for (size_t i = 0; i < ARRAY_SIZE(mke2fs_paths) && !bin; i++)
		if (access(mke2fs_paths[i], X_OK) == 0)
			bin = mke2fs_paths[i];
	if (!bin) {
		sandbox_set_error("workspace_backend = disk needs mke2fs (e2fsprogs)");
		return -ENOENT;
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fd, 3);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	r = -posix_spawn(&pid, bin, &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (r < 0) {
		sandbox_set_error("starting %s: %s", bin, strerror(-r));
		return r;
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		sandbox_set_error("%s failed (status %d) making the workspace template", bin,
				  status);
		return -EIO;
	}
	return 0;
}

/*
 * The image's size for workspace_bytes of files: the inode table takes a 16th of the image
 * (256-byte inodes, one per 4 KiB), the bitmaps and descriptors under 1 MiB more. Its
 * unused part is never written (lazy_itable_init, noinit_itable), so it costs no disk.
 */
static int64_t image_bytes(int64_t workspace_bytes)
{
	int64_t bytes = workspace_bytes + workspace_bytes / 15 + (1 << 20);

	return bytes & ~(int64_t)4095;
}

/* Where the template holds data: what each session's copy must contain. */
static int read_extents(SandboxEnv *env)
{
	off_t off = 0, end;

	env->n_ws_extents = 0;
	for (;;) {
		off = lseek(env->ws_template_fd, off, SEEK_DATA);
		if (off < 0)
			return errno == ENXIO ? 0 : -errno;
		end = lseek(env->ws_template_fd, off, SEEK_HOLE);
		if (end < 0)
			return -errno;
		if (env->n_ws_extents == WS_EXTENTS_MAX) {
			sandbox_set_error("the workspace template has over %d extents",
					  WS_EXTENTS_MAX);
			return -E2BIG;
		}
		env->ws_extents[env->n_ws_extents++] = (struct ws_extent){ off, end - off };
		off = end;
	}
}

/* Mount the template read-only once, so a host that cannot (no loop devices, no ext4)
 * is told at start, not at each session. */
static int probe_mount(SandboxEnv *env)
{
	char dir[PATH_MAX], dev[32];
	int loop, r = 0;

	if (path_join(dir, sizeof(dir), env->workspaces_dir, WS_PROBE_DIR) < 0)
		return -ENAMETOOLONG;
	(void)umount2(dir, MNT_DETACH); /* a daemon that died here */
	(void)rmdir(dir);
	loop = loop_attach(env->ws_template_fd, true, dev);
	if (loop < 0) {
		sandbox_set_error("workspace_backend = disk: no loop device (%s); set "
				  "workspace_backend = tmpfs where loop devices are not available",
				  strerror(-loop));
		return loop;
	}
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		r = -errno;
	else if (mount(dev, dir, "ext4", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		r = -errno;
	else
		(void)umount2(dir, 0);
	(void)rmdir(dir);
	close(loop);
	if (r < 0)
		sandbox_set_error("workspace_backend = disk: mounting an ext4 image from %s: %s",
				  dev, strerror(-r));
	return r;
}

int ws_disk_env_setup(SandboxEnv *env, const PaddockConfig *cfg)
{
	int r;

	env->ws_template_fd = -1;
	env->ws_disk = strcmp(cfg->workspace_backend, "disk") == 0;
	if (!env->ws_disk)
		return 0;
	env->ws_workspace_bytes = cfg->workspace_bytes;
	env->ws_image_bytes = image_bytes(cfg->workspace_bytes);
	env->ws_template_fd = open(env->workspaces_dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (env->ws_template_fd < 0) {
		r = -errno;
		sandbox_set_error("an unnamed file in %s: %s", env->workspaces_dir,
				  strerror(errno));
		return r;
	}
	if (ftruncate(env->ws_template_fd, env->ws_image_bytes) < 0) {
		r = -errno;
		sandbox_set_error("sizing the workspace template: %s", strerror(errno));
		return r;
	}
	r = run_mke2fs(env->ws_template_fd);
	if (r == 0)
		r = read_extents(env);
	if (r == 0)
		r = probe_mount(env);
	return r;
}

void ws_disk_env_clear(SandboxEnv *env)
{
	env->ws_template_fd = safe_close(env->ws_template_fd);
}
