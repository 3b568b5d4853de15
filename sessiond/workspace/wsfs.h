/* SPDX-License-Identifier: MIT */
/* Confined file operations on a session workspace, resolved by the kernel (openat2). */
#pragma once

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

struct json_object;

/* The longest API path (wsname.h): a PATH_MAX path of which every byte is escaped. */
#define WSFS_API_PATH_MAX (5 * PATH_MAX)

/*
 * Turn an API path into a workspace-relative one: "a/b", "./a", "/workspace/a"
 * are accepted; "" (for dirs: means "."), other absolute paths, NUL bytes,
 * over-long paths are refused with -EPERM (outside) or -EINVAL (malformed).
 * ".." is left for the kernel to judge. out gets at most outlen bytes.
 * api_path is in API form (wsname.h) and out gets the bytes it stands for: text
 * that is not UTF-8, or an escape that names no byte 0x80-0xFF, is -EINVAL.
 */
int wsfs_normalize(const char *api_path, bool allow_root, char *out, size_t outlen);

/* openat2() relative to dfd, never leaving it (RESOLVE_BENEATH, no magic links, no other
 * mount), O_CLOEXEC added, retried when the kernel asks to; -errno on failure. */
int wsfs_openat2(int dfd, const char *path, uint64_t flags, uint64_t mode);

/*
 * Open a regular file for reading. -EISDIR for a directory, -ENOENT, -EXDEV or -ELOOP
 * when the path leaves the workspace or goes through a symlink out; -ENXIO for a socket,
 * FIFO or device, which is looked at but never opened; -EWOULDBLOCK when a program holds
 * a write lease on it (the open would wait for the holder); -EMFILE, -ENFILE, -ENOMEM
 * when the daemon is short of them. Advisory locks (flock, fcntl) do not stop it.
 */
int wsfs_open_read(int ws_fd, const char *rel, struct stat *st);

/* An unnamed file (O_TMPFILE) in the workspace, owned by uid:gid, mode 0644, for writing. */
int wsfs_open_tmp(int ws_fd, uid_t uid, gid_t gid);

/*
 * Give tmp_fd the name rel (replacing a file there), making parents owned by uid:gid.
 * -EISDIR when rel is a directory. With replaced, *replaced is a reference (O_PATH) to the
 * file that was replaced, or -1: its data is freed when that goes, where the caller
 * chooses, not in the rename (for a large file, milliseconds of the kernel's time).
 */
int wsfs_commit(int ws_fd, int tmp_fd, const char *rel, uid_t uid, gid_t gid, int *replaced);

/* Make the directories of rel (not its last component) as uid:gid. */
int wsfs_mkdirs(int ws_fd, const char *rel, uid_t uid, gid_t gid);

/* Regular files below rel (recursive, symlinks not followed), as a json array of
 * {path, size_bytes, modified_at, mime_type} with paths in API form (wsname.h); sockets,
 * FIFOs and devices are left out. *truncated when max was reached. */
int wsfs_list(int ws_fd, const char *rel, size_t max, struct json_object **ret, bool *truncated);

/* A file found changed: its path and the stamp that tells one version from the next. */
typedef struct WsfsChange {
	char *path;	       /* workspace-relative, in API form (wsname.h), owned */
	struct timespec mtime; /* modification time */
	off_t size;
	ino_t ino;
} WsfsChange;

/* Regular files modified at or after since, at most max, sorted by path. The caller frees
 * them with wsfs_changes_free(). */
int wsfs_changed_since(int ws_fd, const struct timespec *since, size_t max, WsfsChange **ret,
		       size_t *n_ret);
void wsfs_changes_free(WsfsChange *c, size_t n);
/* Whether a and b are the same version of the same file. */
bool wsfs_change_same(const WsfsChange *a, const WsfsChange *b);

/*
 * The same two walks, a slice at a time: the daemon's loop looks at a bounded number of
 * entries per turn, so a workspace of many files delays only the call that walks it.
 * Start one, call wsfs_scan_step() until it returns 1 (done) rather than 0 (more to see),
 * then take the result, which frees the scan. Results are as from the calls above.
 */
typedef struct WsfsScan WsfsScan;
int wsfs_scan_list(int ws_fd, const char *rel, size_t max, WsfsScan **ret);
int wsfs_scan_changes(int ws_fd, const struct timespec *since, size_t max, WsfsScan **ret);
/* The same from root_fd, the workspace root open for reading (wsfs_root_open()), which the
 * scan borrows: it reads it from its start, and neither closes it nor keeps it past
 * wsfs_scan_free(). One scan at a time may hold it: they would share its offset.
 * 0, or -ENOMEM; a root_fd that cannot be read fails the first wsfs_scan_step(). */
int wsfs_scan_changes_from(int root_fd, const struct timespec *since, size_t max, WsfsScan **ret);
/* The workspace root below ws_fd opened for reading (O_RDONLY | O_DIRECTORY, close on
 * exec), for wsfs_scan_changes_from(): the descriptor, or -errno as wsfs_openat2(). */
int wsfs_root_open(int ws_fd);
/* Look at up to `entries` more directory entries: 1 done, 0 more to see, -errno. */
int wsfs_scan_step(WsfsScan *sc, size_t entries);
struct json_object *wsfs_scan_take_list(WsfsScan *sc, bool *truncated);
void wsfs_scan_take_changes(WsfsScan *sc, WsfsChange **ret, size_t *n_ret);
/* Give up a scan (done or not); accepts NULL, returns NULL. */
WsfsScan *wsfs_scan_free(WsfsScan *sc);

/* A MIME type guessed from the file name's extension ("application/octet-stream" if none). */
const char *wsfs_guess_mime(const char *path);
