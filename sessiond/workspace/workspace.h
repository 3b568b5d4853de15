/* SPDX-License-Identifier: MIT */
/*
 * The workspace room: a session's files, reached only through confined operations
 * (wsfs.h), named the API's way (wsname.h), edited with an undo log (editor.h). What it
 * offers the daemon: the file requests, the replies that wait for a walk of the workspace,
 * and the reply a file operation's error gets.
 */
#pragma once

#include <json-c/json.h>
#include <stddef.h>
#include <time.h>

#include "json.h"
#include "session/session.h"

/* files.c: the requests (docs/internal-protocol.md) */
void op_edit(Manager *m, Conn *c, const Request *rq);
void op_list(Manager *m, Conn *c, const Request *rq);
void op_get(Manager *m, Conn *c, const Request *rq);
void op_put(Manager *m, Conn *c, const Request *rq);
void op_put_commit(Manager *m, Conn *c, const Request *rq);
void op_put_abort(Manager *m, Conn *c, const Request *rq);
/* c has gone: the upload it had open goes too. */
void upload_drop(Manager *m, Conn *c);

/* fs_error.c: the reply to a confined operation's error r (negative errno) on path */
json_object *fs_error(int r, const char *path);

/* scan.c: replies that wait for a walk of the workspace, done a slice per loop turn */
/* Called once a waiting reply has gone (or was dropped with its connection). */
typedef void ScanSentFn(void *arg);
/* Add "files" (those changed since `since`, minus those reported before) to a reply and
 * send it to c (NULL: nowhere); then sent(sent_arg), if given. head is the reply's text so
 * far, an object not yet closed, which this takes over (head is left empty). */
void reply_with_produced_files(Session *s, Conn *c, JsonText *head, const struct timespec *since,
			       ScanSentFn *sent, void *sent_arg);
/* Add "files" and "truncated" (the regular files below rel) to reply and send it to c;
 * or the error for api_path. */
void reply_with_listing(Session *s, Conn *c, json_object *reply, const char *api_path,
			const char *rel, size_t max);
/* The session is going away: waiting replies go now, without their files (sent is not
 * called: the run has ended with the session). */
void scans_cancel(Session *s);
void scans_conn_closed(Manager *m, Conn *c);
