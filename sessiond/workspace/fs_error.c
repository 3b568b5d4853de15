/* SPDX-License-Identifier: MIT */
/* The replies a confined file operation's errors get: one table for every file request. */
#include <errno.h>
#include <string.h>

#include "cleanup.h"
#include "log.h"
#include "utf8.h"
#include "workspace.h"

/*
 * What each error of a confined file operation means to the client, in one table: the
 * states a session can put its own workspace in (a socket, a FIFO, a lease, a full disk)
 * are the client's to hear about, never an internal error.
 */
static const struct {
	int err;	  /* the negative errno */
	const char *kind; /* the reply's error kind (its HTTP status in the worker) */
	const char *what; /* the sentence */
	bool quote;	  /* followed by ": " and the path */
} fs_errors[] = {
	{ -EXDEV, "forbidden", "path is outside the session workspace", true },
	{ -ELOOP, "forbidden", "path is outside the session workspace", true },
	{ -EPERM, "forbidden", "path is outside the session workspace", true },
	{ -EACCES, "forbidden", "path is outside the session workspace", true },
	{ -ENOENT, "not_found", "no such file or directory", true },
	{ -ENOTDIR, "not_found", "not a directory", true },
	{ -EISDIR, "bad_request", "path is a directory", true },
	{ -ENXIO, "bad_request", "not a regular file (a socket, FIFO or device)", true },
	{ -EINVAL, "invalid", "invalid path", true },
	{ -ENAMETOOLONG, "invalid", "invalid path", true },
	{ -EWOULDBLOCK, "busy",
	  "a program in the session holds a lease on the file; try again once it lets go", true },
	{ -EBUSY, "busy", "the file is in use in the session; try again", true },
	{ -ETXTBSY, "busy", "the file is in use in the session; try again", true },
	{ -ENOTEMPTY, "exists", "a directory that is not empty is in the way", true },
	{ -EEXIST, "exists", "something is in the way", true },
	{ -EMLINK, "too_large", "the directory holds too many entries", true },
	{ -ENOSPC, "too_large", "the session workspace is full", false },
	{ -EFBIG, "too_large", "the session workspace is full", false },
	{ -EDQUOT, "too_large", "the session workspace is full", false },
	{ -EOVERFLOW, "too_large", "the file is too large", true },
	{ -EROFS, "busy", "the session workspace is read-only", false },
	{ -EMFILE, "unavailable", "the session daemon is out of file descriptors", false },
	{ -ENFILE, "unavailable", "the session daemon is out of file descriptors", false },
	{ -ENOMEM, "unavailable", "the session daemon is out of memory", false },
};

/* How much of a path a message quotes: enough to recognise it, and never half a character,
 * so the reply stays valid UTF-8 (and valid JSON) whatever the path. */
#define FS_ERROR_PATH_MAX 200

/* Map a confined file operation's error to a reply. */
json_object *fs_error(int r, const char *path)
{
	const char *p = path ? path : "";
	int n = (int)utf8_prefix_len(p, FS_ERROR_PATH_MAX);

	for (size_t i = 0; i < ARRAY_SIZE(fs_errors); i++) {
		if (fs_errors[i].err != r)
			continue;
		if (!fs_errors[i].quote)
			return reply_error(fs_errors[i].kind, "%s", fs_errors[i].what);
		return reply_error(fs_errors[i].kind, "%s: %.*s", fs_errors[i].what, n, p);
	}
	log_err("workspace operation failed: %s", strerror(-r));
	return reply_error("internal", "workspace operation failed");
}
