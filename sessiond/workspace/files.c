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
#include "editor.h"
#include "log.h"
#include "session/session.h"
#include "utf8.h"
#include "workspace.h"
#include "wsfs.h"
#include "wsname.h"

/* An upload in progress on one worker connection: the unnamed file and whose it is. */
typedef struct Upload {
	char session_id[SESSION_ID_MAX + 1];
	char *tenant; /* as checked at `put` */
	int fd;	      /* O_TMPFILE in the workspace; sessiond's copy */
} Upload;

/* The reply's "path": the API form of rel, which the client can pass back. */
static json_object *api_path_json(const char *rel)
{
	_cleanup_free_ char *api = wsname_encode_dup(rel);

	return api ? json_object_new_string(api) : NULL;
}

void op_list(Manager *m, Conn *c, const Request *rq)
{
	json_object *req = rq->body;
	Session *s = rq->s;
	const char *path = req_string(req, "path") ?: ".";
	char rel[4096];
	int r = wsfs_normalize(path, true, rel, sizeof(rel));

	if (r < 0) {
		conn_reply(c, fs_error(r, path), NULL, 0);
		return;
	}
	reply_with_listing(s, c, reply_ok(), path, rel, (size_t)m->cfg->list_max_entries);
}

void op_get(Manager *m, Conn *c, const Request *rq)
{
	json_object *req = rq->body;
	Session *s = rq->s;
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
	if (json_set(o, "path", api_path_json(rel)) < 0 ||
	    json_set(o, "size_bytes", json_object_new_int64(st.st_size)) < 0 ||
	    json_set(o, "mime_type", json_object_new_string(wsfs_guess_mime(rel))) < 0) {
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

void op_put(Manager *m, Conn *c, const Request *rq)
{
	json_object *req = rq->body;
	Session *s = rq->s;
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

void op_put_commit(Manager *m, Conn *c, const Request *rq)
{
	json_object *req = rq->body;
	Upload *u = conn_get_data(c);
	const char *path = req_string(req, "path");
	char rel[4096];
	struct stat st;
	Session *s;
	json_object *o;
	int replaced = -1, r;

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
		r = wsfs_commit(s->ws_fd, u->fd, rel, s->uid, s->uid, &replaced);
	upload_drop(m, c);
	if (r < 0) {
		conn_reply(c, fs_error(r, path), NULL, 0);
		return;
	}
	s->last_activity_at = now_real();
	o = reply_ok();
	if (json_set(o, "path", api_path_json(rel)) < 0 ||
	    json_set(o, "size_bytes", json_object_new_int64(st.st_size)) < 0) {
		json_object_put(o);
		if (replaced >= 0)
			close(replaced);
		conn_reply(c, fs_error(-ENOMEM, path), NULL, 0);
		return;
	}
	/* The file replaced goes with the reply: its data (100 MiB take about 10 ms to free)
	 * is freed as the worker drops it, after its answer, rather than here in the loop. */
	conn_reply(c, o, &replaced, replaced >= 0 ? 1 : 0);
}

/* Dropped either way; "not_found" tells the worker that the upload failed because its
 * session ended meanwhile (its workspace, shut down, fails every write with EIO). */
void op_put_abort(Manager *m, Conn *c, const Request *rq)
{
	Upload *u = conn_get_data(c);
	bool ended = u && !session_find(m, u->session_id, u->tenant);

	(void)rq;
	upload_drop(m, c);
	conn_reply(c, ended ? reply_error("not_found", "the session was destroyed") : reply_ok(),
		   NULL, 0);
}

void op_edit(Manager *m, Conn *c, const Request *rq)
{
	json_object *req = rq->body;
	Session *s = rq->s;
	json_object *input;
	JsonText o = { .buf = NULL };
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
	reply_ok_text(&o);
	json_text_add_key(&o, "stdout");
	json_text_add_quoted(&o, res.out ?: "");
	json_text_add_key(&o, "stderr");
	json_text_add_quoted(&o, res.err ?: "");
	json_text_add_key(&o, "return_code");
	json_text_add_int(&o, res.return_code);
	json_text_add_key(&o, "execution_time_ms");
	json_text_add_int(&o, (int64_t)(now_ms() - t0));
	json_text_add_str(&o, ",\"timed_out\":false,\"usage\":{}");
	s->last_activity_at = now_real();
	journal_note(s, "editor", now_real(), (int64_t)(now_ms() - t0), res.return_code,
		     res.return_code == 0 ? "ok" : "error");
	editor_result_clear(&res);
	reply_with_produced_files(s, c, &o, &since, NULL, NULL);
}
