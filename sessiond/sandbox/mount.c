/* SPDX-License-Identifier: MIT */
/* The sandbox's file system view: a read-only tmpfs root built from its runtime's /usr and
 * /etc (the host's own, or a runtime profile's tree). */
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "cleanup.h"
#include "sandbox_internal.h"
#include "sandbox_layout.h"

/*
 * /etc entries a runtime may need, bound read-only when they exist.
 * Nothing that names users, holds secrets or configures services.
 */
static const char *const etc_whitelist[] = {
	"ld.so.cache",
	"ld.so.conf",
	"ld.so.conf.d",
	"nsswitch.conf",
	"hosts",
	"localtime",
	"timezone",
	"alternatives",
	"ssl",
	"ca-certificates",
	"ca-certificates.conf",
	"mime.types",
	"python3*",
	"bash.bashrc",
	"profile",
	"inputrc",
	"os-release",
	"debian_version",
	"host.conf",
	"resolv.conf",
	"matplotlibrc",
	"fonts",
	"gai.conf",
	"protocols",
	"services",
	"locale.alias",
	"magic",
	"magic.mime",
	"terminfo",
	"environment",
};

/*
 * Of those, what describes the host rather than the software: its network (the sandbox's
 * egress leaves through it) and its clock. They come from the host's /etc whatever tree
 * the sandbox runs on; everything else comes from the runtime's.
 */
static const char *const etc_of_host[] = {
	"hosts", "resolv.conf", "host.conf", "gai.conf", "localtime", "timezone",
};

/* Top-level directories that merged-/usr makes symlinks into usr. */
static const char *const root_dirs[] = { "bin", "sbin", "lib", "lib32", "lib64", "libx32" };

static bool name_in(const char *name, const char *const *patterns, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (fnmatch(patterns[i], name, 0) == 0)
			return true;
	return false;
}

int mount_prepare_from_parent(const SandboxEnv *env, const char *id, struct child_args *a)
{
	const char *shell = env->runtime_shell[a->limits.runtime];
	int r;

	r = workspace_path(env, id, a->workspace, sizeof(a->workspace));
	if (r < 0)
		return r;
	snprintf(a->ws_opts, sizeof(a->ws_opts), "size=%lld,mode=0700,uid=%u,gid=%u",
		 (long long)a->limits.workspace_bytes, (unsigned)a->uid, (unsigned)a->gid);
	snprintf(a->tmp_opts, sizeof(a->tmp_opts), "size=%lld,mode=1777",
		 (long long)a->limits.tmp_bytes);
	snprintf(a->passwd, sizeof(a->passwd),
		 "root:x:0:0:root:/root:/usr/sbin/nologin\n" SANDBOX_USER ":x:%u:%u:" SANDBOX_USER
		 ":" SANDBOX_WORKSPACE ":%s\n"
		 "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
		 (unsigned)a->uid, (unsigned)a->gid, shell);
	snprintf(a->group, sizeof(a->group),
		 "root:x:0:\n" SANDBOX_USER ":x:%u:\nnogroup:x:65534:\n", (unsigned)a->gid);
	return 0;
}

/* Everything below runs in the child between clone and exec: no allocation, no stdio. */

/* The layout getdents64 fills in (the kernel's, not libc's struct dirent). */
struct dirent64_raw {
	uint64_t ino;
	int64_t off;
	unsigned short reclen;
	unsigned char type;
	char name[];
};

static void etc_note(struct child_args *a, const char *name, bool from_host)
{
	struct etc_entry *e = &a->etc[a->n_etc];
	size_t len = strlen(name);

	if (name[0] == '.' || len >= sizeof(e->name) ||
	    !name_in(name, etc_whitelist, ARRAY_SIZE(etc_whitelist)) ||
	    name_in(name, etc_of_host, ARRAY_SIZE(etc_of_host)) != from_host)
		return;
	memcpy(e->name, name, len + 1);
	e->from_host = from_host;
	a->n_etc++;
}

/* The whitelisted entries of root_fd's /etc as they are now, read without opendir():
 * those of the host's kind (from_host) or the others. Which are files or directories is
 * seen when they are bound. */
static int etc_scan(struct child_args *a, int root_fd, bool from_host)
{
	_cleanup_close_ int dfd = root_open_in(root_fd, "etc", O_RDONLY | O_DIRECTORY);
	char buf[8192] __attribute__((aligned(8)));
	ssize_t n;

	if (dfd == -ENOENT)
		return 0; /* a tree without /etc: the sandbox's has passwd and group only */
	if (dfd < 0)
		return dfd;
	while ((n = syscall(SYS_getdents64, dfd, buf, sizeof(buf))) > 0)
		for (ssize_t off = 0; off < n && a->n_etc < ETC_ENTRIES_MAX;) {
			const struct dirent64_raw *de = (const void *)(buf + off);

			etc_note(a, de->name, from_host);
			off += de->reclen;
		}
	return n < 0 ? -errno : 0;
}

static void root_links_scan(struct child_args *a)
{
	a->n_links = 0;
	for (size_t i = 0; i < ARRAY_SIZE(root_dirs) && a->n_links < ROOT_LINKS_MAX; i++) {
		struct root_link *l = &a->links[a->n_links];
		struct stat st;
		ssize_t n;

		/* At the top of the tree: root_fd is its root, nothing above it to escape to. */
		if (fstatat(a->root_fd, root_dirs[i], &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		l->name = root_dirs[i];
		if (S_ISLNK(st.st_mode)) {
			/* Recreated as it is: resolved in the sandbox, where the tree is "/". */
			n = readlinkat(a->root_fd, root_dirs[i], l->target, sizeof(l->target) - 1);
			if (n < 0)
				continue;
			l->target[n] = '\0';
			l->is_link = true;
		} else if (S_ISDIR(st.st_mode)) {
			l->is_link = false;
		} else {
			continue;
		}
		a->n_links++;
	}
}

/* Read at every start, so a sandbox shows its tree and the host as they are when the
 * sandbox is made. */
int host_scan_in_child(struct child_args *a)
{
	int r;

	a->n_etc = 0;
	r = etc_scan(a, a->root_fd, false);
	if (r >= 0)
		r = etc_scan(a, a->host_fd, true);
	if (r < 0)
		return r;
	root_links_scan(a);
	return 0;
}

static int bind_ro(const char *src, const char *dst, unsigned long extra)
{
	if (mount(src, dst, NULL, MS_BIND, NULL) < 0)
		return -errno;
	/* A bind mount takes its flags only on a second, remounting call. */
	if (mount(NULL, dst, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | extra,
		  NULL) < 0)
		return -errno;
	return 0;
}

/* The fd's own path, for mount(2): the magic link names exactly the file opened. Written
 * by hand: no stdio in the child. */
static void fd_path(int fd, char out[32])
{
	static const char prefix[] = "/proc/self/fd/";
	char digits[12];
	size_t n = 0, len = sizeof(prefix) - 1;

	memcpy(out, prefix, len);
	do
		digits[n++] = (char)('0' + fd % 10);
	while ((fd /= 10) > 0 && n < sizeof(digits));
	while (n)
		out[len++] = digits[--n];
	out[len] = '\0';
}

/* path of root_fd's tree, resolved inside it, bound read-only at dst. */
static int bind_ro_in(int root_fd, const char *path, const char *dst, unsigned long extra)
{
	_cleanup_close_ int fd = root_open_in(root_fd, path, O_PATH);
	char src[32];

	if (fd < 0)
		return fd;
	fd_path(fd, src);
	return bind_ro(src, dst, extra);
}

static int write_file(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
	size_t len = strlen(text);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, text, len);
	close(fd);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EIO;
}

static int touch(const char *path, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, mode);

	if (fd < 0)
		return -errno;
	close(fd);
	return 0;
}

int mount_private_in_child(struct child_args *a)
{
	(void)a;
	/* Modes below are given in full; the parent's umask is restored before exec. */
	umask(0);
	/* Nothing we mount may leak back to the host, nor host mounts in. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return -errno;
	return 0;
}

int mount_root_in_child(struct child_args *a)
{
	if (mount("tmpfs", a->env->root_dir, "tmpfs", MS_NOSUID | MS_NODEV,
		  "mode=0755,size=1048576,nr_inodes=4096") < 0)
		return -errno;
	/* From here on targets are relative to the new root. */
	if (chdir(a->env->root_dir) < 0)
		return -errno;
	return 0;
}

int mount_usr_in_child(struct child_args *a)
{
	if (mkdir("usr", 0755) < 0)
		return -errno;
	return bind_ro_in(a->root_fd, "usr", "usr", 0);
}

int mount_root_links_in_child(struct child_args *a)
{
	for (size_t i = 0; i < a->n_links; i++) {
		const struct root_link *l = &a->links[i];
		int r;

		if (l->is_link) {
			if (symlink(l->target, l->name) < 0)
				return -errno;
			continue;
		}
		/* A tree without merged /usr: the directory itself, read-only. */
		if (mkdir(l->name, 0755) < 0)
			return -errno;
		r = bind_ro_in(a->root_fd, l->name, l->name, 0);
		if (r < 0)
			return r;
	}
	return 0;
}

/* One entry of the runtime's (or the host's) /etc at its place in the sandbox's: a
 * placeholder of its kind to mount on, then the bind. Gone since the scan, or neither a
 * file nor a directory (a dangling link): left out. */
static int etc_bind(const struct child_args *a, const struct etc_entry *e)
{
	int root = e->from_host ? a->host_fd : a->root_fd;
	/* "etc/<name>": below the tree's root, and below the new root (the cwd) alike */
	char path[ETC_NAME_MAX + 8], src[32];
	_cleanup_close_ int fd = -1;
	struct stat st;
	int r;

	r = path_join(path, sizeof(path), "etc", e->name);
	if (r < 0)
		return r;
	fd = root_open_in(root, path, O_PATH);
	if (fd == -ENOENT || fd == -ELOOP)
		return 0;
	if (fd < 0)
		return fd;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (S_ISDIR(st.st_mode))
		r = mkdir(path, 0755) < 0 ? -errno : 0;
	else if (S_ISREG(st.st_mode))
		r = touch(path, 0644);
	else
		return 0;
	if (r < 0)
		return r;
	fd_path(fd, src);
	return bind_ro(src, path, MS_NOEXEC);
}

int mount_etc_in_child(struct child_args *a)
{
	int r;

	if (mkdir("etc", 0755) < 0)
		return -errno;
	if (mount("tmpfs", "etc", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
		  "mode=0755,size=262144") < 0)
		return -errno;
	for (size_t i = 0; i < a->n_etc; i++) {
		r = etc_bind(a, &a->etc[i]);
		if (r < 0)
			return r;
	}
	r = write_file("etc/passwd", a->passwd, 0644);
	if (r >= 0)
		r = write_file("etc/group", a->group, 0644);
	if (r < 0)
		return r;
	if (symlink("../proc/self/mounts", "etc/mtab") < 0)
		return -errno;
	if (mount(NULL, "etc", NULL,
		  MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		return -errno;
	return 0;
}

int mount_dev_in_child(struct child_args *a)
{
	static const struct {
		const char *name;
		unsigned maj, min;
	} nodes[] = {
		{ "dev/null", 1, 3 },	{ "dev/zero", 1, 5 },	 { "dev/full", 1, 7 },
		{ "dev/random", 1, 8 }, { "dev/urandom", 1, 9 }, { "dev/tty", 5, 0 },
	};
	static const struct {
		const char *name, *target;
	} links[] = {
		{ "dev/fd", "/proc/self/fd" },
		{ "dev/stdin", "/proc/self/fd/0" },
		{ "dev/stdout", "/proc/self/fd/1" },
		{ "dev/stderr", "/proc/self/fd/2" },
	};

	(void)a;
	if (mkdir("dev", 0755) < 0)
		return -errno;
	/* Device nodes need a mount without nodev; nosuid still holds. */
	if (mount("tmpfs", "dev", "tmpfs", MS_NOSUID, "mode=0755,size=65536") < 0)
		return -errno;
	for (size_t i = 0; i < ARRAY_SIZE(nodes); i++)
		if (mknod(nodes[i].name, S_IFCHR | 0666, makedev(nodes[i].maj, nodes[i].min)) < 0)
			return -errno;
	for (size_t i = 0; i < ARRAY_SIZE(links); i++)
		if (symlink(links[i].target, links[i].name) < 0)
			return -errno;
	if (mkdir("dev/shm", 01777) < 0)
		return -errno;
	if (mount("tmpfs", "dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=16777216") < 0)
		return -errno;
	/* Writes to device nodes do not need a writable mount. */
	if (mount(NULL, "dev", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID, NULL) < 0)
		return -errno;
	return 0;
}

/*
 * Kernel interfaces the sandbox has no business reading or poking, and what they would
 * tell it about the host: its boot line and build, kernel addresses, timers and keys of
 * other processes, physical memory maps. Each reads as empty (/dev/null on top).
 */
static const char *const proc_masked_files[] = {
	"proc/kcore",
	"proc/keys",
	"proc/key-users",
	"proc/timer_list",
	"proc/timer_stats",
	"proc/latency_stats",
	"proc/sched_debug",
	"proc/sysrq-trigger",
	"proc/cmdline",
	"proc/config.gz",
	"proc/bootconfig",
	"proc/kallsyms",
	"proc/kmsg",
	"proc/modules",
	"proc/vmallocinfo",
	"proc/slabinfo",
	"proc/iomem",
	"proc/ioports",
	"proc/kpagecount",
	"proc/kpageflags",
	"proc/kpagecgroup",
	"proc/mtrr",
	/* every block device's I/O counters and sizes: with workspaces on loop devices,
	 * other sessions' activity */
	"proc/diskstats",
	"proc/partitions",
};

/* Directories of host hardware and drivers: an empty read-only directory on top. */
static const char *const proc_masked_dirs[] = {
	"proc/acpi",
	"proc/asound",
	"proc/scsi",
	"proc/driver",
	/* file systems' internals: /proc/fs/ext4/loopN shows each session's workspace */
	"proc/fs",
};

static int mask_dir(const char *dir)
{
	if (mount("tmpfs", dir, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
		  "size=4k,nr_inodes=1,mode=0555") < 0)
		return errno == ENOENT ? 0 : -errno;
	return 0;
}

int mount_proc_in_child(struct child_args *a)
{
	static const char *const readonly[] = {
		"proc/sys",
		"proc/irq",
		"proc/bus",
	};
	int r;

	(void)a;
	if (mkdir("proc", 0555) < 0)
		return -errno;
	/* We are pid 1 of the new pid namespace: this proc shows only the sandbox. */
	if (mount("proc", "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		return -errno;
	for (size_t i = 0; i < ARRAY_SIZE(proc_masked_files); i++)
		if (mount("dev/null", proc_masked_files[i], NULL, MS_BIND, NULL) < 0 &&
		    errno != ENOENT)
			return -errno;
	for (size_t i = 0; i < ARRAY_SIZE(proc_masked_dirs); i++) {
		r = mask_dir(proc_masked_dirs[i]);
		if (r < 0)
			return r;
	}
	for (size_t i = 0; i < ARRAY_SIZE(readonly); i++) {
		r = bind_ro(readonly[i], readonly[i], MS_NOEXEC);
		if (r < 0 && r != -ENOENT)
			return r;
	}
	return 0;
}

int mount_tmp_in_child(struct child_args *a)
{
	if (mkdir("tmp", 01777) < 0)
		return -errno;
	if (mount("tmpfs", "tmp", "tmpfs", MS_NOSUID | MS_NODEV, a->tmp_opts) < 0)
		return -errno;
	return 0;
}

/* A path of the layout as seen from the new root, the working directory while it is built. */
#define IN_ROOT(path) ((path) + 1)

int mount_workspace_in_child(struct child_args *a)
{
	const char *ws = IN_ROOT(SANDBOX_WORKSPACE);

	if (mkdir(ws, 0755) < 0)
		return -errno;
	if (mount(a->workspace, ws, NULL, MS_BIND, NULL) < 0)
		return -errno;
	if (mount(NULL, ws, NULL, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV, NULL) < 0)
		return -errno;
	return 0;
}

int mount_lib_dir_in_child(struct child_args *a)
{
	/* "opt": SANDBOX_LIB_DIR's parent, on the root tmpfs. */
	if (mkdir("opt", 0755) < 0 || mkdir(IN_ROOT(SANDBOX_LIB_DIR), 0755) < 0)
		return -errno;
	return bind_ro(a->env->lib_copy, IN_ROOT(SANDBOX_LIB_DIR), 0);
}

int mount_pivot_in_child(struct child_args *a)
{
	(void)a;
	/* The old root ends up stacked on ".", where we detach it: no put_old directory needed. */
	if (syscall(SYS_pivot_root, ".", ".") < 0)
		return -errno;
	if (umount2(".", MNT_DETACH) < 0)
		return -errno;
	if (chdir("/") < 0)
		return -errno;
	return 0;
}

int mount_root_readonly_in_child(struct child_args *a)
{
	(void)a;
	if (mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) <
	    0)
		return -errno;
	return 0;
}

int mount_chdir_in_child(struct child_args *a)
{
	(void)a;
	umask(022);
	if (chdir(SANDBOX_WORKSPACE) < 0)
		return -errno;
	return 0;
}
