/* SPDX-License-Identifier: MIT */
/* Session workspaces under <state_dir>/workspaces: an ext4 image of its own per session
 * (wsdisk.c), or with workspace_backend = tmpfs a size-capped tmpfs. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "sandbox_internal.h"

int workspace_path(const SandboxEnv *env, const char *id, char *buf, size_t len)
{
	if (!sandbox_id_valid(id))
		return -EINVAL;
	if (snprintf(buf, len, "%s/%s", env->workspaces_dir, id) >= (int)len)
		return -ENAMETOOLONG;
	return 0;
}

/* In the child, before it leaves the daemon's mount namespace: the mount is made there,
 * where the daemon (and a restarted one) finds it. */
int workspace_create_in_child(struct child_args *a)
{
	int r;

	if (a->env->ws_disk)
		return ws_disk_create_in_child(a);
	/* The parents are created 0700 by sandbox_env_new(); an existing id is a caller bug. */
	if (mkdir(a->workspace, 0700) < 0)
		return -errno;
	if (mount("tmpfs", a->workspace, "tmpfs", MS_NOSUID | MS_NODEV, a->ws_opts) < 0) {
		r = -errno;
		rmdir(a->workspace);
		return r;
	}
	return 0;
}

int workspace_destroy(const SandboxEnv *env, const char *id)
{
	char path[PATH_MAX];
	int r;

	r = workspace_path(env, id, path, sizeof(path));
	if (r < 0)
		return r;
	if (env->ws_disk)
		ws_disk_shut_down(path);
	/* EINVAL: not a mount point (already detached); the directory may still be there. */
	if (umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW) < 0 && errno != EINVAL && errno != ENOENT) {
		r = -errno;
		sandbox_set_error("unmounting %s: %s", path, strerror(errno));
		return r;
	}
	if (rmdir(path) < 0 && errno != ENOENT) {
		r = -errno;
		sandbox_set_error("rmdir %s: %s", path, strerror(errno));
		return r;
	}
	return 0;
}

int workspace_open(const SandboxEnv *env, const char *id)
{
	char path[PATH_MAX];
	int r, fd;

	r = workspace_path(env, id, path, sizeof(path));
	if (r < 0)
		return r;
	fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	return fd < 0 ? -errno : fd;
}

int workspace_list_ids(const SandboxEnv *env, char ***ids, size_t *n, size_t *cap)
{
	return ids_add_dir(env->workspaces_dir, ids, n, cap);
}
