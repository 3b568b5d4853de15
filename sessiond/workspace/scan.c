/* SPDX-License-Identifier: MIT */
/*
 * Replies that wait for a walk of their session's workspace: the files a call produced,
 * or a listing. The loop walks a slice of entries per turn, so a workspace of a hundred
 * thousand files delays the calls on that session, not everyone's.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "list.h"
#include "log.h"
#include "session/session.h"
#include "workspace.h"
#include "wsfs.h"

/* Directory entries looked at per loop turn: a few hundred microseconds of the loop. */
#define SCAN_SLICE 256

struct ScanReply {
	Session *s;
	Conn *conn;	    /* who gets the reply; NULL once gone */
	json_object *reply; /* a listing's reply, sent when the walk is done with what it found */
	JsonText head;	    /* the same for produced files: the reply's text so far */
	WsfsScan *scan;
	char *list_path;  /* a listing: the path asked for (for errors); NULL: produced files */
	bool lent_root;	  /* scan reads the session's scan_root_fd */
	ScanSentFn *sent; /* called with sent_arg once the reply has gone; or NULL */
	void *sent_arg;
	LoopSource *timer;
	ScanReply *prev, *next; /* the session's */
};

/* Whether the previous scan reported this very version of the file: file times come from a
 * coarse clock, so a file written at the end of one call can look new to the next. */
static bool reported_before(const Session *s, const WsfsChange *c)
{
	for (size_t i = 0; i < s->n_reported; i++)
		if (wsfs_change_same(&s->reported[i], c))
			return true;
	return false;
}

/* The files the walk found changed, as an array of {file_id, filename}, minus those
 * reported before. */
static void add_produced(JsonText *t, Session *s, WsfsScan *scan)
{
	const char *sep = "";
	WsfsChange *changes;
	size_t n;

	wsfs_scan_take_changes(scan, &changes, &n);
	json_text_add_str(t, "[");
	for (size_t i = 0; i < n; i++) {
		char id[64];

		if (reported_before(s, &changes[i]) ||
		    store_file_id(s->m->store, s->id, changes[i].path, id, sizeof(id)) < 0)
			continue;
		json_text_add_str(t, sep);
		json_text_add_str(t, "{\"file_id\":");
		json_text_add_quoted(t, id);
		json_text_add_key(t, "filename");
		json_text_add_quoted(t, changes[i].path);
		json_text_add_str(t, "}");
		sep = ",";
	}
	json_text_add_str(t, "]");
	wsfs_changes_free(s->reported, s->n_reported);
	s->reported = changes;
	s->n_reported = n;
}

/* Close a reply's text with its files (found: the walk's, taken; or none) and send it to c. */
static void send_with_files(Session *s, Conn *c, JsonText *head, WsfsScan *found)
{
	json_text_add_key(head, "files");
	if (found)
		add_produced(head, s, found);
	else
		json_text_add_str(head, "[]");
	json_text_add_str(head, "}");
	if (c)
		conn_reply_text(c, head->failed ? NULL : head->buf, head->len);
	json_text_clear(head);
}

static void scan_unlink(ScanReply *sr)
{
	LIST_UNLINK(sr->s->scans, sr);
}

static void scan_free(ScanReply *sr)
{
	loop_remove(sr->s->m->loop, sr->timer);
	wsfs_scan_free(sr->scan);
	if (sr->lent_root)
		sr->s->scan_root_lent = false;
	json_object_put(sr->reply);
	json_text_clear(&sr->head);
	free(sr->list_path);
	free(sr);
}

/* Send the reply with what the walk found (r: 1 done, < 0 failed). */
static void scan_done(ScanReply *sr, int r)
{
	ScanSentFn *sent = sr->sent;
	void *sent_arg = sr->sent_arg;
	json_object *o = sr->reply;

	sr->reply = NULL;
	if (!sr->list_path) {
		/* Produced files are a courtesy of the reply: a failed walk reports none (and
		 * leaves its scan to scan_free()). */
		send_with_files(sr->s, sr->conn, &sr->head, r < 0 ? NULL : TAKE_PTR(sr->scan));
	} else if (r < 0) {
		json_object_put(o);
		o = r == -ECANCELED ? reply_error("not_found", "the session was destroyed") :
				      fs_error(r, sr->list_path);
	} else {
		bool truncated = false;

		json_set(o, "files", wsfs_scan_take_list(TAKE_PTR(sr->scan), &truncated));
		json_set(o, "truncated", json_object_new_boolean(truncated));
	}
	if (o && sr->conn)
		conn_reply(sr->conn, o, NULL, 0);
	else
		json_object_put(o);
	scan_unlink(sr);
	scan_free(sr);
	if (sent)
		sent(sent_arg);
}

static void on_scan_slice(Loop *l, void *data);

/* Walk a slice; on to the next turn if there is more. */
static void scan_step(ScanReply *sr)
{
	int r = wsfs_scan_step(sr->scan, SCAN_SLICE);

	if (r == 0 && loop_add_timer(sr->s->m->loop, 0, on_scan_slice, sr, &sr->timer) == 0)
		return;
	scan_done(sr, r == 0 ? -ENOMEM : r);
}

static void on_scan_slice(Loop *l, void *data)
{
	ScanReply *sr = data;

	(void)l;
	sr->timer = NULL;
	scan_step(sr);
}

/* Take reply over and start on the walk; the first slice runs now, which is the whole walk
 * for most workspaces. */
static void scan_begin(Session *s, ScanReply *sr)
{
	sr->s = s;
	LIST_PUSH(s->scans, sr);
	scan_step(sr);
}

/*
 * Start the walk for a run's produced files. The root is read through the session's own
 * descriptor, opened at its first walk and kept: a call's walk of a small workspace is
 * then two getdents64() rather than an openat2() and a close() around them too. A walk
 * already holding it (another reply's, still walking) leaves the next to open its own.
 */
static int produced_scan_start(Session *s, ScanReply *sr, const struct timespec *since, size_t max)
{
	if (s->scan_root_fd < 0 && s->ws_fd >= 0) {
		int fd = wsfs_root_open(s->ws_fd);

		s->scan_root_fd = fd < 0 ? -1 : fd;
	}
	int r;

	if (s->scan_root_fd < 0 || s->scan_root_lent)
		return wsfs_scan_changes(s->ws_fd, since, max, &sr->scan);
	r = wsfs_scan_changes_from(s->scan_root_fd, since, max, &sr->scan);
	if (r == 0)
		sr->lent_root = s->scan_root_lent = true;
	return r;
}

void reply_with_produced_files(Session *s, Conn *c, JsonText *head, const struct timespec *since,
			       ScanSentFn *sent, void *sent_arg)
{
	ScanReply *sr = calloc(1, sizeof(*sr));
	size_t max = (size_t)s->m->cfg->produced_files_max;
	int r = sr ? 0 : -ENOMEM;

	if (r == 0 && max > 0)
		r = produced_scan_start(s, sr, since, max);
	if (r < 0 || max == 0) {
		free(sr);
		send_with_files(s, c, head, NULL);
		if (sent)
			sent(sent_arg);
		return;
	}
	sr->conn = c;
	sr->head = *head;
	*head = (JsonText){ .buf = NULL };
	sr->sent = sent;
	sr->sent_arg = sent_arg;
	scan_begin(s, sr);
}

void reply_with_listing(Session *s, Conn *c, json_object *reply, const char *api_path,
			const char *rel, size_t max)
{
	ScanReply *sr = calloc(1, sizeof(*sr));
	int r = sr ? 0 : -ENOMEM;

	if (r == 0 && !(sr->list_path = strdup(api_path)))
		r = -ENOMEM;
	if (r == 0)
		r = wsfs_scan_list(s->ws_fd, rel, max, &sr->scan);
	if (r < 0) {
		if (sr)
			free(sr->list_path);
		free(sr);
		json_object_put(reply);
		conn_reply(c, fs_error(r, api_path), NULL, 0);
		return;
	}
	sr->conn = c;
	sr->reply = reply;
	scan_begin(s, sr);
}

void scans_cancel(Session *s)
{
	while (s->scans) {
		ScanReply *sr = s->scans;

		/* The sandbox is going: a reply goes without its files, a listing not at all.
		 * A run's reply is the run's to end (run_abort() has). */
		sr->sent = NULL;
		scan_done(sr, -ECANCELED);
	}
}

void scans_conn_closed(Manager *m, Conn *c)
{
	for (Session *s = m->sessions; s; s = s->next)
		for (ScanReply *sr = s->scans; sr; sr = sr->next)
			if (sr->conn == c)
				sr->conn = NULL;
}
