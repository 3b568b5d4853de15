/* SPDX-License-Identifier: MIT */
/* Requests on a session's workspace: list, get, put (two steps), the text editor. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "log.h"
#include "session/session.h"
#include "utf8.h"
#include "wsfs.h"
#include "wsname.h"

/* An upload in progress on one worker connection: the unnamed file and whose it is. */
typedef struct Upload {
	char session_id[SESSION_ID_MAX + 1];
	char *tenant; /* as checked at `put` */
	int fd;	      /* O_TMPFILE in the workspace; sessiond's copy */
} Upload;

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

/* Add val (ownership taken) to the reply o; -ENOMEM when val could not be made. */
static int reply_add(json_object *o, const char *key, json_object *val)
{
	if (!val || json_object_object_add(o, key, val) < 0) {
		json_object_put(val);
		return -ENOMEM;
	}
	return 0;
}

/* The reply's "path": the API form of rel, which the client can pass back. */
static json_object *api_path_json(const char *rel)
{
	_cleanup_free_ char *api = wsname_encode_dup(rel);

	return api ? json_object_new_string(api) : NULL;
}

void op_list(Manager *m, Conn *c, Session *s, json_object *req)
{
	const char *path = req_string(req, "path") ?: ".";
	char rel[4096];
	int r = wsfs_normalize(path, true, rel, sizeof(rel));

	if (r < 0) {
		conn_reply(c, fs_error(r, path), NULL, 0);
		return;
	}
	reply_with_listing(s, c, reply_ok(), path, rel, (size_t)m->cfg->list_max_entries);
}

void op_get(Manager *m, Conn *c, Session *s, json_object *req)
{
	const char *path = req_string(req, "path");
	const char *file_id = req_string(req, "file_id");
	_cleanup_free_ char *by_id = NULL;
	char rel[4096];
	struct stat st;
	json_object *o;
	int fd, r;

	if (!path && file_id) {
		r = store_file_path(m->store, s->id, file_id, &by_id);
		if (r < 0) {
			conn_reply(c, reply_error("not_found", "unknown file_id"), NULL, 0);
			return;
		}
		path = by_id;
	}
	if (!path) {
		conn_reply(c, reply_error("invalid", "path or file_id is required"), NULL, 0);
		return;
	}
	/* The root is accepted here so that it is refused below as the directory it is. */
	r = wsfs_normalize(path, true, rel, sizeof(rel));
	if (r < 0) {
		conn_reply(c, fs_error(r, path), NULL, 0);
		return;
	}
	fd = wsfs_open_read(s->ws_fd, rel, &st);
	if (fd < 0) {
		conn_reply(c, fs_error(fd, path), NULL, 0);
		return;
	}
	o = reply_ok();
	if (reply_add(o, "path", api_path_json(rel)) < 0 ||
	    reply_add(o, "size_bytes", json_object_new_int64(st.st_size)) < 0 ||
	    reply_add(o, "mime_type", json_object_new_string(wsfs_guess_mime(rel))) < 0) {
		json_object_put(o);
		close(fd);
		conn_reply(c, fs_error(-ENOMEM, path), NULL, 0);
		return;
	}
	conn_reply(c, o, &fd, 1);
}

void upload_drop(Manager *m, Conn *c)
{
	Upload *u = conn_get_data(c);

	(void)m;
	if (!u)
		return;
	close(u->fd);
	free(u->tenant);
	free(u);
	conn_set_data(c, NULL);
}

void op_put(Manager *m, Conn *c, Session *s, json_object *req)
{
	Upload *u;
	int fd, dup_fd;

	(void)req;
	upload_drop(m, c);
	fd = wsfs_open_tmp(s->ws_fd, s->uid, s->uid);
	if (fd < 0) {
		conn_reply(c, fs_error(fd, "(upload)"), NULL, 0);
		return;
	}
	dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	u = calloc(1, sizeof(*u));
	if (dup_fd < 0 || !u || (s->tenant && !(u->tenant = strdup(s->tenant)))) {
		close(fd);
		if (dup_fd >= 0)
			close(dup_fd);
		if (u)
			free(u);
		conn_reply(c, reply_error("internal", "out of resources"), NULL, 0);
		return;
	}
	memcpy(u->session_id, s->id, sizeof(u->session_id));
	u->fd = fd;
	conn_set_data(c, u);
	conn_reply(c, reply_ok(), &dup_fd, 1);
}

void op_put_commit(Manager *m, Conn *c, json_object *req)
{
	Upload *u = conn_get_data(c);
	const char *path = req_string(req, "path");
	char rel[4096];
	struct stat st;
	Session *s;
	json_object *o;
	int r;

	if (!u) {
		conn_reply(c, reply_error("bad_request", "no upload in progress"), NULL, 0);
		return;
	}
	s = session_find(m, u->session_id, u->tenant);
	if (!s) {
		upload_drop(m, c);
		conn_reply(c, reply_error("not_found", "unknown session"), NULL, 0);
		return;
	}
	if (!path) {
		upload_drop(m, c);
		conn_reply(c, reply_error("invalid", "path is required"), NULL, 0);
		return;
	}
	if (fstat(u->fd, &st) < 0 || st.st_size > m->cfg->put_max_bytes) {
		upload_drop(m, c);
		conn_reply(c,
			   reply_error("too_large", "the file is larger than %lld bytes",
				       (long long)m->cfg->put_max_bytes),
			   NULL, 0);
		return;
	}
	r = wsfs_normalize(path, false, rel, sizeof(rel));
	if (r == 0)
		r = wsfs_commit(s->ws_fd, u->fd, rel, s->uid, s->uid);
	upload_drop(m, c);
	if (r < 0) {
		conn_reply(c, fs_error(r, path), NULL, 0);
		return;
	}
	s->last_activity_at = now_real();
	o = reply_ok();
	if (reply_add(o, "path", api_path_json(rel)) < 0 ||
	    reply_add(o, "size_bytes", json_object_new_int64(st.st_size)) < 0) {
		json_object_put(o);
		conn_reply(c, fs_error(-ENOMEM, path), NULL, 0);
		return;
	}
	conn_reply(c, o, NULL, 0);
}

void op_put_abort(Manager *m, Conn *c)
{
	upload_drop(m, c);
	conn_reply(c, reply_ok(), NULL, 0);
}

void op_edit(Manager *m, Conn *c, Session *s, json_object *req)
{
	json_object *input, *o;
	EditorResult res = { 0 };
	const char *detail = NULL;
	struct timespec since;
	uint64_t t0 = now_ms();
	int r;

	if (!json_object_object_get_ex(req, "input", &input) ||
	    !json_object_is_type(input, json_type_object)) {
		conn_reply(c, reply_error("invalid", "input must be an object"), NULL, 0);
		return;
	}
	if (s->run) {
		conn_reply(c, reply_error("busy", "the session is running another call"), NULL, 0);
		return;
	}
	clock_gettime(CLOCK_REALTIME_COARSE, &since); /* as file times */
	r = editor_run(s->ws_fd, s->uid, s->uid, (size_t)m->cfg->editor_max_bytes, s->undo, input,
		       &res, &detail);
	if (r == -EINVAL) {
		conn_reply(c, reply_error("invalid", "%s", detail ?: "invalid editor input"), NULL,
			   0);
		return;
	}
	if (r < 0) {
		log_err("SESSION_ID=%s editor failed: %s", s->id, strerror(-r));
		conn_reply(c, reply_error("internal", "the editor failed"), NULL, 0);
		return;
	}
	o = reply_ok();
	json_object_object_add(o, "stdout", json_object_new_string(res.out ?: ""));
	json_object_object_add(o, "stderr", json_object_new_string(res.err ?: ""));
	json_object_object_add(o, "return_code", json_object_new_int(res.return_code));
	json_object_object_add(o, "execution_time_ms",
			       json_object_new_int64((int64_t)(now_ms() - t0)));
	json_object_object_add(o, "timed_out", json_object_new_boolean(false));
	json_object_object_add(o, "usage", json_object_new_object());
	s->last_activity_at = now_real();
	journal_note(s, "editor", now_real(), (int64_t)(now_ms() - t0), res.return_code,
		     res.return_code == 0 ? "ok" : "error");
	editor_result_clear(&res);
	reply_with_produced_files(s, c, o, &since, NULL);
}
