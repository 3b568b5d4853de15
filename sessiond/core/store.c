/* SPDX-License-Identifier: MIT */
/* SQLite access: the one place sqlite result codes become -errno. */
#include "store.h"

#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "log.h"
#include "schema.h"
#include "random.h"

struct Store {
	sqlite3 *db; /* the connection; the daemon is its only writer */
	/* Prepared once, for the statements of every call, create, destroy and file id:
	 * preparing one costs about as much as running it. */
	sqlite3_stmt *touch;
	sqlite3_stmt *exec_log;
	sqlite3_stmt *session_insert;
	sqlite3_stmt *session_delete;
	sqlite3_stmt *set_tools;
	sqlite3_stmt *file_lookup;
	sqlite3_stmt *file_insert;
	sqlite3_stmt *file_path;
	StoreWalFn on_wal; /* told the WAL's size after each commit */
	void *on_wal_data;
};

static int errno_from_sqlite(int rc)
{
	switch (rc & 0xff) {
	case SQLITE_OK:
	case SQLITE_ROW:
	case SQLITE_DONE: return 0;
	case SQLITE_BUSY:
	case SQLITE_LOCKED: return -EBUSY;
	case SQLITE_NOMEM: return -ENOMEM;
	case SQLITE_CONSTRAINT: return -EEXIST;
	case SQLITE_NOTFOUND: return -ENOENT;
	case SQLITE_FULL: return -ENOSPC;
	case SQLITE_READONLY:
	case SQLITE_PERM:
	case SQLITE_AUTH: return -EACCES;
	case SQLITE_CORRUPT:
	case SQLITE_NOTADB: return -EUCLEAN;
	default: return -EIO;
	}
}

static void stmt_finalizep(sqlite3_stmt **st)
{
	sqlite3_finalize(*st);
}
#define _cleanup_stmt_ _cleanup_(stmt_finalizep)

static int exec_sql(Store *s, const char *sql)
{
	return errno_from_sqlite(sqlite3_exec(s->db, sql, NULL, NULL, NULL));
}

static int user_version(Store *s, int *v)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(s->db, "PRAGMA user_version", -1, &st, NULL);

	if (rc != SQLITE_OK)
		return errno_from_sqlite(rc);
	if (sqlite3_step(st) != SQLITE_ROW)
		return -EIO;
	*v = sqlite3_column_int(st, 0);
	return 0;
}

static int migrate(Store *s)
{
	int v = 0, r;

	r = user_version(s, &v);
	if (r < 0)
		return r;
	/* What a migration this program lacks changed, it cannot know: it must not read or
	 * write such a store (a downgrade with the newer one's state dir). */
	if (schema_migrations_count && v > schema_migrations[schema_migrations_count - 1].version) {
		log_err("the store is at schema version %d, newer than this paddock's %d: it was "
			"written by a newer paddock; run that one, or move the state dir away",
			v, schema_migrations[schema_migrations_count - 1].version);
		return -EPROTO;
	}
	for (unsigned i = 0; i < schema_migrations_count; i++) {
		const SchemaMigration *m = &schema_migrations[i];
		char pragma[64];

		if (m->version <= v)
			continue;
		snprintf(pragma, sizeof(pragma), "PRAGMA user_version = %d;", m->version);
		/* Each migration and its version bump commit together or not at all. */
		r = exec_sql(s, "BEGIN IMMEDIATE");
		if (r < 0)
			return r;
		r = exec_sql(s, m->sql);
		if (r == 0)
			r = exec_sql(s, pragma);
		if (r < 0) {
			/* SQLite's own words: the errno the caller gets says little. */
			log_err("store migration %d (%s) failed: %s; the store is left at version %d",
				m->version, m->name, sqlite3_errmsg(s->db), v);
			exec_sql(s, "ROLLBACK");
			return r;
		}
		r = exec_sql(s, "COMMIT");
		if (r < 0)
			return r;
		v = m->version;
	}
	return 0;
}

/* The -wal and -shm files an older daemon made with a wider mode, if any. */
static void narrow_companions(const char *path)
{
	static const char *const suffixes[] = { "-wal", "-shm" };
	char p[4096];

	for (size_t i = 0; i < ARRAY_SIZE(suffixes); i++) {
		snprintf(p, sizeof(p), "%s%s", path, suffixes[i]);
		if (chmod(p, 0600) < 0 && errno != ENOENT)
			log_warn("cannot narrow the mode of %s: %m", p);
	}
}

int store_open(const char *path, Store **ret)
{
	Store *s = calloc(1, sizeof(*s));
	int r;

	if (!s)
		return -ENOMEM;
	/* Root's alone: it holds programmatic tools' tokens. SQLite gives its -wal and -shm
	 * files the database's mode; one made by an older daemon is narrowed too. */
	r = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (r < 0 || fchmod(r, 0600) < 0) {
		r = r < 0 ? -errno : (close(r), -errno);
		free(s);
		return r;
	}
	close(r);
	narrow_companions(path);
	r = errno_from_sqlite(sqlite3_open_v2(
		path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
		NULL));
	/* No checkpoints on commit: they sync the files, in the daemon's loop. The owner
	 * checkpoints from another process (store_on_wal, store_checkpoint_file). */
	if (r == 0)
		r = exec_sql(s, "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;"
				"PRAGMA foreign_keys = ON; PRAGMA busy_timeout = 2000;"
				"PRAGMA wal_autocheckpoint = 0; PRAGMA secure_delete = FAST;");
	if (r == 0)
		r = migrate(s);
	if (r < 0) {
		store_close(s);
		return r;
	}
	*ret = s;
	return 0;
}

static int on_wal_commit(void *data, sqlite3 *db, const char *name, int pages)
{
	Store *s = data;

	(void)db;
	(void)name;
	if (s->on_wal)
		s->on_wal(s->on_wal_data, pages);
	return SQLITE_OK;
}

void store_on_wal(Store *s, StoreWalFn fn, void *data)
{
	s->on_wal = fn;
	s->on_wal_data = data;
	sqlite3_wal_hook(s->db, fn ? on_wal_commit : NULL, s);
}

int store_checkpoint(Store *s)
{
	return errno_from_sqlite(
		sqlite3_wal_checkpoint_v2(s->db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL));
}

int store_checkpoint_file(const char *path)
{
	sqlite3 *db = NULL;
	int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);

	if (rc == SQLITE_OK)
		rc = sqlite3_busy_timeout(db, 2000);
	/* A statement, not sqlite3_wal_checkpoint(): a connection that has read nothing
	 * yet does not know that the database is in WAL mode, and would do nothing. */
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(db, "PRAGMA wal_checkpoint(PASSIVE)", NULL, NULL, NULL);
	if (rc != SQLITE_OK)
		fprintf(stderr, "paddock-sessiond: checkpoint of %s: %s\n", path,
			db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
	sqlite3_close_v2(db);
	return errno_from_sqlite(rc);
}

Store *store_close(Store *s)
{
	if (!s)
		return NULL;
	sqlite3_finalize(s->touch);
	sqlite3_finalize(s->exec_log);
	sqlite3_finalize(s->session_insert);
	sqlite3_finalize(s->session_delete);
	sqlite3_finalize(s->set_tools);
	sqlite3_finalize(s->file_lookup);
	sqlite3_finalize(s->file_insert);
	sqlite3_finalize(s->file_path);
	sqlite3_close_v2(s->db);
	free(s);
	return NULL;
}

static int prepare(Store *s, const char *sql, sqlite3_stmt **st)
{
	return errno_from_sqlite(sqlite3_prepare_v2(s->db, sql, -1, st, NULL));
}

static int step_done(sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);

	return rc == SQLITE_DONE ? 0 : errno_from_sqlite(rc);
}

/* Done with a kept statement for now: a read ends its transaction (which would hold back a
 * checkpoint), and the bindings, which point at the caller's strings, go. */
static void stmt_release(sqlite3_stmt *st)
{
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
}

/* Run a kept statement that returns no rows once, then release it. */
static int step_kept(sqlite3_stmt *st)
{
	int r = step_done(st);

	stmt_release(st);
	return r;
}

static void bind_text_or_null(sqlite3_stmt *st, int i, const char *v)
{
	if (v)
		sqlite3_bind_text(st, i, v, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(st, i);
}

/* A statement prepared on first use and kept; each use releases it (step_kept(),
 * step_first_text()), so it is ready for the next. */
static int cached(Store *s, sqlite3_stmt **slot, const char *sql)
{
	return *slot ? 0 : prepare(s, sql, slot);
}

int store_session_insert(Store *s, const SessionRow *row)
{
	sqlite3_stmt *st;
	int r = cached(s, &s->session_insert,
		       "INSERT INTO sessions (id, tenant, uid, created_at, last_activity_at,"
		       " idle_timeout, max_lifetime, image, init_pid, init_ctl_fd, plane, kernel,"
		       " execution_count, rid, endpoint, runtime)"
		       " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");

	if (r < 0)
		return r;
	st = s->session_insert;
	sqlite3_bind_text(st, 1, row->id, -1, SQLITE_STATIC);
	bind_text_or_null(st, 2, row->tenant);
	sqlite3_bind_int64(st, 3, row->uid);
	sqlite3_bind_double(st, 4, row->created_at);
	sqlite3_bind_double(st, 5, row->last_activity_at);
	sqlite3_bind_int64(st, 6, row->idle_timeout);
	sqlite3_bind_int64(st, 7, row->max_lifetime);
	bind_text_or_null(st, 8, row->image);
	sqlite3_bind_int64(st, 9, row->init_pid);
	sqlite3_bind_int(st, 10, row->init_ctl_fd);
	sqlite3_bind_text(st, 11, row->plane ? row->plane : "otari", -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 12, row->kernel);
	sqlite3_bind_int64(st, 13, row->execution_count);
	bind_text_or_null(st, 14, row->rid);
	sqlite3_bind_int(st, 15, row->endpoint);
	bind_text_or_null(st, 16, row->runtime);
	return step_kept(st);
}

int store_session_touch(Store *s, const char *id, double last_activity_at, int64_t execution_count)
{
	int r = cached(
		s, &s->touch,
		"UPDATE sessions SET last_activity_at = ?, execution_count = ? WHERE id = ?");

	if (r < 0)
		return r;
	sqlite3_bind_double(s->touch, 1, last_activity_at);
	sqlite3_bind_int64(s->touch, 2, execution_count);
	sqlite3_bind_text(s->touch, 3, id, -1, SQLITE_STATIC);
	return step_kept(s->touch);
}

int store_session_set_tools(Store *s, const char *id, const char *tools)
{
	int r = cached(s, &s->set_tools, "UPDATE sessions SET tools = ? WHERE id = ?");

	if (r < 0)
		return r;
	sqlite3_bind_text(s->set_tools, 1, tools, -1, SQLITE_STATIC);
	sqlite3_bind_text(s->set_tools, 2, id, -1, SQLITE_STATIC);
	return step_kept(s->set_tools);
}

int store_session_delete(Store *s, const char *id)
{
	int r = cached(s, &s->session_delete, "DELETE FROM sessions WHERE id = ?");

	if (r < 0)
		return r;
	sqlite3_bind_text(s->session_delete, 1, id, -1, SQLITE_STATIC);
	return step_kept(s->session_delete);
}

static char *dup_col(sqlite3_stmt *st, int i)
{
	const unsigned char *t = sqlite3_column_text(st, i);

	return t ? strdup((const char *)t) : NULL;
}

void session_rows_free(SessionRow *rows, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(rows[i].id);
		free(rows[i].tenant);
		free(rows[i].image);
		free(rows[i].plane);
		free(rows[i].rid);
		free(rows[i].runtime);
		free(rows[i].tools);
	}
	free(rows);
}

int store_sessions_load(Store *s, SessionRow **rows_ret, size_t *n_ret)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	SessionRow *rows = NULL;
	size_t n = 0;
	int rc, r;

	r = prepare(s,
		    "SELECT id, tenant, uid, created_at, last_activity_at, idle_timeout,"
		    " max_lifetime, image, init_pid, init_ctl_fd, plane, kernel, execution_count,"
		    " rid, endpoint, runtime, tools FROM sessions",
		    &st);
	if (r < 0)
		return r;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		SessionRow *grown = realloc(rows, (n + 1) * sizeof(*rows));

		if (!grown) {
			session_rows_free(rows, n);
			return -ENOMEM;
		}
		rows = grown;
		rows[n] = (SessionRow){
			.id = dup_col(st, 0),
			.tenant = dup_col(st, 1),
			.uid = (uid_t)sqlite3_column_int64(st, 2),
			.created_at = sqlite3_column_double(st, 3),
			.last_activity_at = sqlite3_column_double(st, 4),
			.idle_timeout = sqlite3_column_int64(st, 5),
			.max_lifetime = sqlite3_column_int64(st, 6),
			.image = dup_col(st, 7),
			.init_pid = (pid_t)sqlite3_column_int64(st, 8),
			.init_ctl_fd = sqlite3_column_int(st, 9),
			.plane = dup_col(st, 10),
			.kernel = sqlite3_column_int(st, 11) != 0,
			.execution_count = sqlite3_column_int64(st, 12),
			.rid = dup_col(st, 13),
			.endpoint = sqlite3_column_int(st, 14) != 0,
			.runtime = dup_col(st, 15),
			.tools = dup_col(st, 16),
		};
		n++;
	}
	if (rc != SQLITE_DONE) {
		session_rows_free(rows, n);
		return errno_from_sqlite(rc);
	}
	*rows_ret = rows;
	*n_ret = n;
	return 0;
}

/* One row's first column as a string, or -ENOENT; the statement is released. */
static int step_first_text(sqlite3_stmt *st, char *out, size_t outlen, char **dup)
{
	int rc = sqlite3_step(st), r = 0;

	if (rc == SQLITE_ROW && dup)
		r = (*dup = dup_col(st, 0)) ? 0 : -ENOMEM;
	else if (rc == SQLITE_ROW)
		snprintf(out, outlen, "%s", (const char *)sqlite3_column_text(st, 0));
	else
		r = rc == SQLITE_DONE ? -ENOENT : errno_from_sqlite(rc);
	stmt_release(st);
	return r;
}

static int lookup_file_id(Store *s, const char *sid, const char *path, char *out, size_t outlen)
{
	int r = cached(s, &s->file_lookup,
		       "SELECT file_id FROM files WHERE session_id = ? AND path = ?");

	if (r < 0)
		return r;
	sqlite3_bind_text(s->file_lookup, 1, sid, -1, SQLITE_STATIC);
	sqlite3_bind_text(s->file_lookup, 2, path, -1, SQLITE_STATIC);
	return step_first_text(s->file_lookup, out, outlen, NULL);
}

int store_file_id(Store *s, const char *session_id, const char *path, char *out, size_t outlen)
{
	int r;

	r = lookup_file_id(s, session_id, path, out, outlen);
	if (r != -ENOENT)
		return r;
	if (outlen < 5 + 2 * 12 + 1)
		return -ENOBUFS;
	memcpy(out, "file_", 5);
	if (random_hex(out + 5, 12) < 0)
		return -EIO;
	r = cached(s, &s->file_insert,
		   "INSERT INTO files (file_id, session_id, path) VALUES (?,?,?)");
	if (r < 0)
		return r;
	sqlite3_bind_text(s->file_insert, 1, out, -1, SQLITE_STATIC);
	sqlite3_bind_text(s->file_insert, 2, session_id, -1, SQLITE_STATIC);
	sqlite3_bind_text(s->file_insert, 3, path, -1, SQLITE_STATIC);
	return step_kept(s->file_insert);
}

int store_file_path(Store *s, const char *session_id, const char *file_id, char **path)
{
	int r = cached(s, &s->file_path,
		       "SELECT path FROM files WHERE session_id = ? AND file_id = ?");

	if (r < 0)
		return r;
	sqlite3_bind_text(s->file_path, 1, session_id, -1, SQLITE_STATIC);
	sqlite3_bind_text(s->file_path, 2, file_id, -1, SQLITE_STATIC);
	return step_first_text(s->file_path, NULL, 0, path);
}

int store_exec_log(Store *s, const char *session_id, const char *tool, double started_at,
		   int64_t duration_ms, int return_code, const char *outcome)
{
	sqlite3_stmt *st;
	int r = cached(s, &s->exec_log,
		       "INSERT INTO executions (session_id, tool, started_at, duration_ms,"
		       " return_code, outcome) VALUES (?,?,?,?,?,?)");

	if (r < 0)
		return r;
	st = s->exec_log;
	sqlite3_bind_text(st, 1, session_id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, tool, -1, SQLITE_STATIC);
	sqlite3_bind_double(st, 3, started_at);
	sqlite3_bind_int64(st, 4, duration_ms);
	sqlite3_bind_int(st, 5, return_code);
	sqlite3_bind_text(st, 6, outcome, -1, SQLITE_STATIC);
	return step_kept(st);
}

int store_exec_prune(Store *s, int64_t keep)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	int r = prepare(
		s, "DELETE FROM executions WHERE id <= (SELECT MAX(id) FROM executions) - ?", &st);

	if (r < 0)
		return r;
	sqlite3_bind_int64(st, 1, keep);
	return step_done(st);
}

int store_begin(Store *s)
{
	return exec_sql(s, "BEGIN");
}

int store_commit(Store *s)
{
	return exec_sql(s, "COMMIT");
}

int store_integrity_check(Store *s)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	const unsigned char *t;
	int r = prepare(s, "PRAGMA integrity_check", &st);

	if (r < 0)
		return r;
	if (sqlite3_step(st) != SQLITE_ROW)
		return -EIO;
	t = sqlite3_column_text(st, 0);
	return t && strcmp((const char *)t, "ok") == 0 ? 0 : -EUCLEAN;
}
