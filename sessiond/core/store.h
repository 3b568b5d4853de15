/* SPDX-License-Identifier: MIT */
/* Session metadata in SQLite (WAL): what must outlive the daemon process. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct Store Store;

/* One row of the sessions table. Strings owned by the row. */
typedef struct SessionRow {
	char *id;
	char *tenant; /* NULL when none */
	uid_t uid;
	double created_at;
	double last_activity_at;
	int64_t idle_timeout;
	int64_t max_lifetime;
	char *image; /* the hint the create gave, NULL when none */
	pid_t init_pid;
	int init_ctl_fd;
	char *plane; /* "otari" or "code"; NULL reads as "otari" */
	char *rid;   /* name of its cgroup and workspace; NULL reads as id */
	bool kernel;
	bool endpoint; /* Python runs on the external Jupyter Server */
	int64_t execution_count;
	char *runtime; /* the runtime profile it runs on; NULL: the default */
	char *tools;   /* its programmatic tools' registration (JSON); NULL: none */
} SessionRow;

/* Open (creating) the database at path and apply pending migrations. */
int store_open(const char *path, Store **ret);
Store *store_close(Store *s);

int store_session_insert(Store *s, const SessionRow *row);
int store_session_touch(Store *s, const char *id, double last_activity_at, int64_t execution_count);
int store_session_delete(Store *s, const char *id);
/* Keep a session's programmatic tools registration (JSON text). */
int store_session_set_tools(Store *s, const char *id, const char *tools);
/* Every session row; the caller frees with session_rows_free(). */
int store_sessions_load(Store *s, SessionRow **rows_ret, size_t *n_ret);
void session_rows_free(SessionRow *rows, size_t n);

/* The stable file id of path in session id, made on first sight. out gets 40 bytes. */
int store_file_id(Store *s, const char *session_id, const char *path, char *out, size_t outlen);
/* The path a file id names in that session; -ENOENT if none. Caller frees *path. */
int store_file_path(Store *s, const char *session_id, const char *file_id, char **path);

/* Append to the executions log. */
int store_exec_log(Store *s, const char *session_id, const char *tool, double started_at,
		   int64_t duration_ms, int return_code, const char *outcome);
/* Drop log rows beyond the newest keep. */
int store_exec_prune(Store *s, int64_t keep);

/* Group the writes between these two into one transaction. */
int store_begin(Store *s);
int store_commit(Store *s);

/*
 * Checkpoints. The store never checkpoints on its own: fn(data, pages) is told the
 * WAL's length in pages after each commit, and the owner decides. store_checkpoint()
 * copies what it can from the WAL into the database here (blocking on the syncs);
 * store_checkpoint_file() does it from a connection of its own, for another process.
 */
typedef void (*StoreWalFn)(void *data, int pages);
void store_on_wal(Store *s, StoreWalFn fn, void *data);
int store_checkpoint(Store *s);
int store_checkpoint_file(const char *path);

/* 0 when PRAGMA integrity_check says ok. */
int store_integrity_check(Store *s);
