/* SPDX-License-Identifier: MIT */
/*
 * Workspaces on disk: each session's /workspace is its own ext4 file system, holding
 * workspace_bytes of files, in an unnamed sparse file of the state directory, on a loop
 * device.
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
 * each session copies the template's metadata (about 130 KiB: its data extents, read once
 * here) into a fresh sparse file of the same size. That copy, the loop device and the mount
 * happen in the spawn child, off the daemon's loop, like the rest of a sandbox.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/loop.h>
#include <linux/magic.h>

#include "cleanup.h"
#include "sandbox_internal.h"

/* Loop devices another spawn took between LOOP_CTL_GET_FREE and LOOP_CONFIGURE. */
#define LOOP_TRIES 32
#define LOOP_MAJOR 7
/* What a template may hold: its metadata is about 130 KiB for 512 MiB, a few MiB at 1 TiB. */
#define TEMPLATE_DATA_MAX (64 << 20)
/*
 * nobarrier: a workspace is not kept across a crash of the host, so its flushes would buy
 * nothing, and each would make the host's file system commit (sandboxed code calling
 * fsync in a loop could keep the host's disk busy). No discard: freeing blocks would wait
 * on the host's file system for each deleted file; the image keeps at most its peak use,
 * within workspace_bytes, and all of it goes when the session ends. noauto_da_alloc: for
 * the same reason, replacing a file by rename (as PutFile does) need not start writing the
 * new file out in the renaming process: that was half of a 100 MiB PutFile's commit, in
 * sessiond's loop. errors=remount-ro: a write the host cannot store (its file system
 * full) stops the workspace, not the host.
 */
#define WS_MOUNT_OPTS "noinit_itable,nobarrier,noauto_da_alloc,errors=remount-ro"
#define WS_PROBE_DIR ".disk-probe"
/* How often a spawn may try again to make a template that could not be made. */
#define WS_RETRY_MS 2000

/* ext4's "shut down, drop what is not written" (linux/ext4.h is not exported). */
#define EXT4_IOC_SHUTDOWN _IOR('X', 125, uint32_t)
#define EXT4_GOING_FLAGS_NOLOGFLUSH 0x2

static const char *const mke2fs_paths[] = { "/usr/sbin/mke2fs", "/sbin/mke2fs" };

/* prefix, n in decimal, suffix into buf without stdio (it runs between clone and exec too);
 * buf holds 64 bytes, more than the paths here need. */
static void number_path(char buf[64], const char *prefix, unsigned n, const char *suffix)
{
	char digits[12];
	size_t k = 0, len = strlen(prefix);

	memcpy(buf, prefix, len);
	do {
		digits[k++] = (char)('0' + n % 10);
		n /= 10;
	} while (n && k < sizeof(digits));
	while (k)
		buf[len++] = digits[--k];
	memcpy(buf + len, suffix, strlen(suffix) + 1);
}

/*
 * Bind image_fd to a free loop device that detaches itself once unused; its path into
 * dev. Returns the device's fd (the caller closes it once the device is mounted).
 */
static int loop_attach(int image_fd, bool read_only, char dev[64])
{
	struct loop_config lc = {
		.fd = (uint32_t)image_fd,
		.block_size = 4096, /* the file system's: direct I/O on 4Kn disks too */
		.info.lo_flags = LO_FLAGS_AUTOCLEAR | LO_FLAGS_DIRECT_IO |
				 (read_only ? LO_FLAGS_READ_ONLY : 0),
	};
	int ctl, r = -EBUSY;

	ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	if (ctl < 0)
		return -errno;
	for (int i = 0; i < LOOP_TRIES && (r == -EBUSY || r == -ENXIO); i++) {
		int n = ioctl(ctl, LOOP_CTL_GET_FREE);
		int fd;

		if (n < 0) {
			r = -errno;
			break;
		}
		number_path(dev, "/dev/loop", (unsigned)n, "");
		fd = open(dev, (read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC);
		if (fd < 0) {
			r = -errno; /* ENXIO: removed meanwhile; take the next */
			continue;
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

/* Mount a new copy of the template at a->workspace, a directory it makes (an existing one
 * is a caller bug, and left as it was). */
static int mount_new_image(struct child_args *a)
{
	char dev[64];
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
	close(loop); /* with the mount its only user, AUTOCLEAR frees it at the last unmount */
	return r;
}

int ws_disk_create_in_child(struct child_args *a)
{
	int r;

	/* The template is made for one size, the configured one; sessiond asks for no other. */
	if (a->limits.workspace_bytes != a->env->ws_workspace_bytes)
		return -EINVAL;
	if (mkdir(a->workspace, 0700) < 0)
		return -errno;
	r = mount_new_image(a);
	if (r < 0)
		(void)rmdir(a->workspace);
	return r;
}

/*
 * A workspace that is going away: its unwritten pages are dropped rather than written
 * through the loop device into an image about to be freed. Only a loop-backed file system
 * mounted right there is touched (the fd pins which one), never the state directory's own.
 */
void ws_disk_shut_down(const char *path)
{
	struct stat st, parent;
	uint32_t how = EXT4_GOING_FLAGS_NOLOGFLUSH;
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		return;
	if (fstat(fd, &st) == 0 && fstatat(fd, "..", &parent, 0) == 0 &&
	    st.st_dev != parent.st_dev && major(st.st_dev) == LOOP_MAJOR)
		(void)ioctl(fd, EXT4_IOC_SHUTDOWN, &how);
	close(fd);
}

/* "exit status 1", "killed by signal 9": what a wait status says. */
static void describe_status(int status, char *buf, size_t len)
{
	if (WIFEXITED(status))
		snprintf(buf, len, "exit status %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(buf, len, "killed by signal %d", WTERMSIG(status));
	else
		snprintf(buf, len, "wait status %d", status);
}

/* The file system's options, all given here: the host's mke2fs.conf (or a MKE2FS_CONFIG
 * in the daemon's environment) decides nothing, mke2fs running on its built-in profile. */
static char *mke2fs_argv[] = {
	"mke2fs", "-q", "-F", "-t", "ext4", "-T", "default",
	/* 4 KiB blocks whatever the size (the "small" type would pick 1 KiB), an inode
	 * of 256 bytes for each, so that a workspace holds as many small files as a tmpfs
	 * of its size would (image_bytes() adds room for their table) */
	"-b", "4096", "-i", "4096", "-I", "256", "-m", "0",
	/* no journal: the file system does not outlive the host's uptime, and a journal is
	 * a kernel thread per session; no blocks reserved for growing it online, which
	 * would triple what each workspace copies */
	"-O", "^has_journal,^resize_inode", "-e", "remount-ro", "-E",
	"lazy_itable_init=1,nodiscard", "/proc/self/fd/3", NULL
};
static char *mke2fs_envp[] = { "MKE2FS_CONFIG=/nonexistent", "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
			       "LANG=C", NULL };

/* Run mke2fs on fd, as /proc/self/fd/3 of the child, with no signal of ours blocked. */
static int run_mke2fs(int fd)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t none, all;
	const char *bin = NULL;
	char why[64];
	pid_t pid;
	int status, r;

	for (size_t i = 0; i < ARRAY_SIZE(mke2fs_paths) && !bin; i++)
		if (access(mke2fs_paths[i], X_OK) == 0)
			bin = mke2fs_paths[i];
	if (!bin) {
		sandbox_set_error("workspace_backend = disk needs mke2fs (e2fsprogs)");
		return -EOPNOTSUPP;
	}
	sigemptyset(&none);
	sigfillset(&all);
	posix_spawnattr_init(&attr);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setsigdefault(&attr, &all);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fd, 3);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	r = -posix_spawn(&pid, bin, &fa, &attr, mke2fs_argv, mke2fs_envp);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	if (r < 0) {
		sandbox_set_error("starting %s: %s", bin, strerror(-r));
		return r;
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		describe_status(status, why, sizeof(why));
		sandbox_set_error("%s making the workspace template: %s", bin, why);
		return -EIO;
	}
	return 0;
}

/*
 * The image's size for workspace_bytes of files: the inode table takes a 16th of the image
 * (one 256-byte inode per 4 KiB) and ext4 holds back 2% of the blocks (at most 16 MiB) from
 * writers. The bitmaps and descriptors, and what a kernel reserves besides, are left to
 * come out of workspace_bytes, so that files never fill more than it (about 1% less, by
 * kernel). The unused part is never written (lazy_itable_init, noinit_itable), so it costs
 * no disk.
 */
static int64_t image_bytes(int64_t workspace_bytes)
{
	int64_t held_back = workspace_bytes / 50 < (16 << 20) ? workspace_bytes / 50 : 16 << 20;
	int64_t bytes = workspace_bytes + workspace_bytes / 15 + held_back;

	return bytes & ~(int64_t)4095;
}

/* Where the template holds data: what each session's copy must contain. */
static int read_extents(SandboxEnv *env)
{
	off_t off = 0, end;
	int64_t total = 0;
	size_t cap = 0;

	env->n_ws_extents = 0;
	for (;;) {
		off = lseek(env->ws_template_fd, off, SEEK_DATA);
		if (off < 0)
			return errno == ENXIO ? 0 : -errno;
		end = lseek(env->ws_template_fd, off, SEEK_HOLE);
		if (end < 0)
			return -errno;
		total += end - off;
		if (total > TEMPLATE_DATA_MAX) {
			/* A file system that reports no holes would make each session copy
			 * the whole image. */
			sandbox_set_error("the workspace template holds over %d MiB: the state "
					  "directory's file system does not keep sparse files",
					  TEMPLATE_DATA_MAX >> 20);
			return -EFBIG;
		}
		if (env->n_ws_extents == cap) {
			size_t ncap = cap ? 2 * cap : 16;
			struct ws_extent *e = realloc(env->ws_extents, ncap * sizeof(*e));

			if (!e)
				return -ENOMEM;
			env->ws_extents = e;
			cap = ncap;
		}
		env->ws_extents[env->n_ws_extents++] = (struct ws_extent){ off, end - off };
		off = end;
	}
}

/* What an unusable loop device means for the operator. */
static void explain_loop_failure(int r)
{
	if (r == -ENOTTY || r == -EINVAL)
		sandbox_set_error("workspace_backend = disk: the kernel's loop driver lacks "
				  "LOOP_CONFIGURE (Linux 5.8); set workspace_backend = tmpfs");
	else
		sandbox_set_error("workspace_backend = disk: no loop device (%s); set "
				  "workspace_backend = tmpfs where loop devices are not available",
				  strerror(-r));
}

/*
 * Mount the template read-write once, as sessions will: a host that cannot (no loop
 * devices, no ext4) is told at start, not at each session; and ext4's lost+found goes from
 * the template, so that every workspace starts empty.
 */
static int prepare_template(SandboxEnv *env)
{
	char dir[PATH_MAX], lf[PATH_MAX], dev[64];
	int loop, r = 0;

	if (path_join(dir, sizeof(dir), env->workspaces_dir, WS_PROBE_DIR) < 0 ||
	    path_join(lf, sizeof(lf), dir, "lost+found") < 0)
		return -ENAMETOOLONG;
	(void)umount2(dir, MNT_DETACH); /* a daemon that died here */
	(void)rmdir(dir);
	loop = loop_attach(env->ws_template_fd, false, dev);
	if (loop < 0) {
		explain_loop_failure(loop);
		return -EOPNOTSUPP;
	}
	if (mkdir(dir, 0700) < 0)
		r = -errno;
	else if (mount(dev, dir, "ext4", MS_NOSUID | MS_NODEV | MS_NOEXEC, WS_MOUNT_OPTS) < 0)
		r = -errno;
	else {
		if (rmdir(lf) < 0 && errno != ENOENT)
			r = -errno;
		if (umount2(dir, 0) < 0 && r == 0)
			r = -errno;
	}
	(void)umount2(dir, MNT_DETACH); /* if the plain unmount failed */
	(void)rmdir(dir);
	close(loop);
	if (r < 0)
		sandbox_set_error("workspace_backend = disk: preparing the workspace template on "
				  "%s: %s",
				  dev, strerror(-r));
	return r;
}

/* The images live in the state directory: on a tmpfs they would be memory again, and
 * overlayfs (before 6.6) refuses unnamed files. */
static int check_state_fs(const SandboxEnv *env)
{
	struct statfs sf;

	if (statfs(env->workspaces_dir, &sf) < 0)
		return -errno;
	if (sf.f_type == TMPFS_MAGIC || sf.f_type == RAMFS_MAGIC ||
	    sf.f_type == OVERLAYFS_SUPER_MAGIC) {
		sandbox_set_error("workspace_backend = disk: %s is on a %s, not a disk; move "
				  "state_dir to a disk file system (ext4, XFS, btrfs) or set "
				  "workspace_backend = tmpfs",
				  env->workspaces_dir,
				  sf.f_type == OVERLAYFS_SUPER_MAGIC ? "overlayfs" :
								       "memory file system");
		return -EOPNOTSUPP;
	}
	return 0;
}

/* The template and what each session copies of it; on failure nothing is kept. */
static int template_make(SandboxEnv *env)
{
	int r;

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
	} else {
		r = run_mke2fs(env->ws_template_fd);
	}
	if (r == 0)
		r = prepare_template(env);
	if (r == 0)
		r = read_extents(env);
	if (r < 0)
		ws_disk_env_clear(env);
	return r;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A template that could not be made for want of space (or another passing cause): kept as
 * the reason new sandboxes are refused, and tried again at the next spawn after a while. */
static void template_failed(SandboxEnv *env, int r)
{
	env->ws_error = r;
	env->ws_retry_at_ms = now_ms() + WS_RETRY_MS;
	snprintf(env->ws_problem, sizeof(env->ws_problem), "%s", sandbox_last_error());
}

int ws_disk_env_setup(SandboxEnv *env, const PaddockConfig *cfg)
{
	int r;

	env->ws_template_fd = -1;
	env->ws_disk = strcmp(cfg->workspace_backend, "disk") == 0;
	if (!env->ws_disk)
		return 0;
	if (cfg->end_sessions) {
		/* Ending sessions needs no template: neither a host that lost its loop devices
		 * nor a full disk may keep paddock from being removed. */
		snprintf(env->ws_problem, sizeof(env->ws_problem), "sessions are being ended");
		env->ws_error = -ESHUTDOWN;
		env->ws_retry_at_ms = INT64_MAX;
		return 0;
	}
	r = check_state_fs(env);
	if (r < 0)
		return r;
	env->ws_workspace_bytes = cfg->workspace_bytes;
	env->ws_image_bytes = image_bytes(cfg->workspace_bytes);
	r = template_make(env);
	/*
	 * A host that cannot (no loop devices, no mke2fs) is a refusal to start. A full state
	 * directory is not: the daemon must still start to adopt and clean up the sessions
	 * that hold the space, and serve them, while new ones wait for room.
	 */
	if (r == -EOPNOTSUPP)
		return r;
	if (r < 0)
		template_failed(env, r);
	return 0;
}

int ws_disk_ready(SandboxEnv *env)
{
	int r;

	if (!env->ws_disk || env->ws_template_fd >= 0)
		return 0;
	/* mke2fs runs here, on the caller's thread: at most once per WS_RETRY_MS. */
	if (now_ms() >= env->ws_retry_at_ms) {
		r = template_make(env);
		if (r == 0) {
			env->ws_gen++;
			env->ws_error = 0;
			env->ws_problem[0] = '\0';
			return 0;
		}
		template_failed(env, r);
	}
	sandbox_set_error("no workspace can be made: %s", env->ws_problem);
	return env->ws_error;
}

const char *sandbox_env_workspace_problem(const SandboxEnv *env)
{
	return env->ws_disk && env->ws_template_fd < 0 ? env->ws_problem : NULL;
}

void ws_disk_env_clear(SandboxEnv *env)
{
	env->ws_template_fd = safe_close(env->ws_template_fd);
	free(env->ws_extents);
	env->ws_extents = NULL;
	env->n_ws_extents = 0;
}
