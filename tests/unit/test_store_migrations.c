/* SPDX-License-Identifier: MIT */
/* The store's migrations: a new database, one at each older version, a failed migration, a reopen. */
#include <errno.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "core/schema.h"
#include "core/store.h"

#include "unit.h"

static char root[] = "/tmp/paddock-store-XXXXXX";

/* A database path of its own for each case, under root. */
static const char *db_path(const char *name)
{
	static char p[4096];

	snprintf(p, sizeof(p), "%s/%s.db", root, name);
	return p;
}

static int latest_version(void)
{
	return schema_migrations[schema_migrations_count - 1].version;
}

/* A connection of the test's own, beside the store's. Exits on failure. */
static sqlite3 *raw_open(const char *path)
{
	sqlite3 *db = NULL;

	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) !=
	    SQLITE_OK) {
		fprintf(stderr, "open %s: %s\n", path, db ? sqlite3_errmsg(db) : "no memory");
		exit(1);
	}
	return db;
}

static void raw_exec(sqlite3 *db, const char *sql)
{
	char *err = NULL;

	if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) {
		fprintf(stderr, "%s: %s\n", sql, err);
		exit(1);
	}
}

/* The first column of the first row of sql, as an integer; -1 when there is no row. */
static int64_t raw_int(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *st = NULL;
	int64_t v = -1;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
		fprintf(stderr, "%s: %s\n", sql, sqlite3_errmsg(db));
		exit(1);
	}
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v;
}

static int64_t file_int(const char *path, const char *sql)
{
	sqlite3 *db = raw_open(path);
	int64_t v = raw_int(db, sql);

	sqlite3_close(db);
	return v;
}

static bool has_column(sqlite3 *db, const char *table, const char *column)
{
	char sql[256];

	snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM pragma_table_info('%s') WHERE name = '%s'",
		 table, column);
	return raw_int(db, sql) == 1;
}

/* A database made as the daemon of schema version schema_migrations[n - 1] left it. */
static sqlite3 *db_at_migration(const char *path, unsigned n)
{
	sqlite3 *db = raw_open(path);
	char pragma[64];

	for (unsigned i = 0; i < n; i++) {
		raw_exec(db, schema_migrations[i].sql);
		snprintf(pragma, sizeof(pragma), "PRAGMA user_version = %d",
			 schema_migrations[i].version);
		raw_exec(db, pragma);
	}
	return db;
}

/* Migrations apply in the order of their versions, so the files' numbers must rise. */
static void test_migrations_are_numbered_in_rising_order(void)
{
	CHECK_GT_INT(schema_migrations_count, 0);
	CHECK_EQ_INT(schema_migrations[0].version, 1);
	for (unsigned i = 0; i < schema_migrations_count; i++) {
		char prefix[16];

		snprintf(prefix, sizeof(prefix), "%03d_", schema_migrations[i].version);
		CHECK(strncmp(schema_migrations[i].name, prefix, strlen(prefix)) == 0);
		if (i > 0)
			CHECK_GT_INT(schema_migrations[i].version,
				     schema_migrations[i - 1].version);
	}
}

/* A session with every field set, as the daemon writes one. */
static const SessionRow full_row = {
	.id = "nodea-full",
	.tenant = "acme",
	.uid = 100123,
	.created_at = 1700000000.5,
	.last_activity_at = 1700000100.25,
	.idle_timeout = 600,
	.max_lifetime = 3600,
	.image = "python",
	.init_pid = 4321,
	.init_ctl_fd = 17,
	.plane = "code",
	.rid = "nodea-pool7",
	.kernel = true,
	.endpoint = true,
	.execution_count = 9,
};

static void check_row_is_full_row(const SessionRow *r)
{
	CHECK_EQ_STR(r->id, full_row.id);
	CHECK_EQ_STR(r->tenant, full_row.tenant);
	CHECK_EQ_INT(r->uid, full_row.uid);
	CHECK(r->created_at == full_row.created_at);
	CHECK(r->last_activity_at == full_row.last_activity_at);
	CHECK_EQ_INT(r->idle_timeout, full_row.idle_timeout);
	CHECK_EQ_INT(r->max_lifetime, full_row.max_lifetime);
	CHECK_EQ_STR(r->image, full_row.image);
	CHECK_EQ_INT(r->init_pid, full_row.init_pid);
	CHECK_EQ_INT(r->init_ctl_fd, full_row.init_ctl_fd);
	CHECK_EQ_STR(r->plane, full_row.plane);
	CHECK_EQ_STR(r->rid, full_row.rid);
	CHECK(r->kernel);
	CHECK(r->endpoint);
	CHECK_EQ_INT(r->execution_count, full_row.execution_count);
}

static void test_new_database_gets_the_latest_schema(void)
{
	const char *path = db_path("new");
	SessionRow *rows = NULL;
	Store *s = NULL;
	size_t n = 0;

	CHECK_EQ_INT(store_open(path, &s), 0);
	if (!s)
		return;
	CHECK_EQ_INT(store_session_insert(s, &full_row), 0);
	CHECK_EQ_INT(store_sessions_load(s, &rows, &n), 0);
	CHECK_EQ_INT(n, 1);
	if (n == 1)
		check_row_is_full_row(&rows[0]);
	session_rows_free(rows, n);
	CHECK_EQ_INT(store_integrity_check(s), 0);
	store_close(s);
	CHECK_EQ_INT(file_int(path, "PRAGMA user_version"), latest_version());
}

/*
 * A database at each older version, with a session, a file id and an execution in it,
 * opened by the store: it reaches the latest version, its rows kept and the columns added
 * since given their defaults; the store can then write a row with every field.
 */
static void test_database_at_each_older_version_migrates_keeping_its_rows(void)
{
	for (unsigned n = 1; n < schema_migrations_count; n++) {
		char name[32], *path_of_file = NULL;
		const char *path;
		bool has_plane, has_rid;
		SessionRow *rows = NULL;
		size_t n_rows = 0;
		Store *s = NULL;
		sqlite3 *db;

		snprintf(name, sizeof(name), "at-%d", schema_migrations[n - 1].version);
		path = db_path(name);
		db = db_at_migration(path, n);
		raw_exec(db, "INSERT INTO sessions (id, tenant, uid, created_at, last_activity_at,"
			     " idle_timeout, max_lifetime, image, init_pid, init_ctl_fd) VALUES"
			     " ('nodea-old', NULL, 100001, 1600000000.0, 1600000050.0, 300, 1200,"
			     " NULL, 999, 12)");
		raw_exec(db, "INSERT INTO files (file_id, session_id, path) VALUES"
			     " ('file_0123', 'nodea-old', 'out/plot.png')");
		raw_exec(db, "INSERT INTO executions (session_id, tool, started_at, duration_ms,"
			     " return_code, outcome) VALUES ('nodea-old', 'python', 1600000010.0,"
			     " 42, 0, 'ok')");
		/* Columns this version already has keep what is in them. */
		has_plane = has_column(db, "sessions", "plane");
		has_rid = has_column(db, "sessions", "rid");
		if (has_plane)
			raw_exec(db, "UPDATE sessions SET plane = 'code', execution_count = 7");
		if (has_rid)
			raw_exec(db, "UPDATE sessions SET rid = 'nodea-pool1'");
		sqlite3_close(db);

		CHECK_EQ_INT(store_open(path, &s), 0);
		if (!s) {
			fprintf(stderr, "  the database at version %d\n",
				schema_migrations[n - 1].version);
			continue;
		}
		CHECK_EQ_INT(store_sessions_load(s, &rows, &n_rows), 0);
		CHECK_EQ_INT(n_rows, 1);
		if (n_rows == 1) {
			const SessionRow *r = &rows[0];

			CHECK_EQ_STR(r->id, "nodea-old");
			CHECK_EQ_STR(r->tenant, NULL);
			CHECK_EQ_INT(r->uid, 100001);
			CHECK(r->created_at == 1600000000.0);
			CHECK(r->last_activity_at == 1600000050.0);
			CHECK_EQ_INT(r->idle_timeout, 300);
			CHECK_EQ_INT(r->max_lifetime, 1200);
			CHECK_EQ_INT(r->init_pid, 999);
			CHECK_EQ_INT(r->init_ctl_fd, 12);
			CHECK_EQ_STR(r->plane, has_plane ? "code" : "otari");
			CHECK_EQ_INT(r->execution_count, has_plane ? 7 : 0);
			CHECK_EQ_STR(r->rid, has_rid ? "nodea-pool1" : NULL);
			CHECK(!r->kernel);
			CHECK(!r->endpoint);
		}
		session_rows_free(rows, n_rows);
		CHECK_EQ_INT(store_file_path(s, "nodea-old", "file_0123", &path_of_file), 0);
		CHECK_EQ_STR(path_of_file, "out/plot.png");
		free(path_of_file);
		CHECK_EQ_INT(store_session_insert(s, &full_row), 0);
		CHECK_EQ_INT(store_integrity_check(s), 0);
		store_close(s);
		CHECK_EQ_INT(file_int(path, "PRAGMA user_version"), latest_version());
		CHECK_EQ_INT(
			file_int(path, "SELECT COUNT(*) FROM executions WHERE duration_ms = 42"),
			1);
	}
}

/*
 * A migration that fails part-way leaves nothing of itself behind: here a table the first
 * migration creates third is already there, so the two it created before are rolled back
 * with it, and the version stays 0.
 */
static void test_failed_migration_leaves_the_database_as_it_was(void)
{
	const char *path = db_path("failed");
	sqlite3 *db = raw_open(path);
	Store *s = NULL;

	raw_exec(db, "CREATE TABLE files (x INTEGER); INSERT INTO files VALUES (5)");
	sqlite3_close(db);
	CHECK_LT_INT(store_open(path, &s), 0);
	CHECK(s == NULL);
	store_close(s);
	CHECK_EQ_INT(file_int(path, "PRAGMA user_version"), 0);
	CHECK_EQ_INT(file_int(path, "SELECT COUNT(*) FROM sqlite_master WHERE name = 'sessions'"),
		     0);
	CHECK_EQ_INT(file_int(path, "SELECT x FROM files"), 5);
}

/* Opening the latest schema again changes nothing: no migration runs twice. */
static void test_reopening_changes_nothing(void)
{
	const char *path = db_path("reopen");
	char id[64] = "", again[64] = "";
	int64_t cookie;
	SessionRow *rows = NULL;
	size_t n = 0;
	Store *s = NULL;

	CHECK_EQ_INT(store_open(path, &s), 0);
	if (!s)
		return;
	CHECK_EQ_INT(store_session_insert(s, &full_row), 0);
	CHECK_EQ_INT(store_file_id(s, full_row.id, "a/b.txt", id, sizeof(id)), 0);
	store_close(s);
	/* The schema cookie goes up with every change to the schema. */
	cookie = file_int(path, "PRAGMA schema_version");

	for (int round = 0; round < 3; round++) {
		s = NULL;
		CHECK_EQ_INT(store_open(path, &s), 0);
		if (!s)
			return;
		CHECK_EQ_INT(store_sessions_load(s, &rows, &n), 0);
		CHECK_EQ_INT(n, 1);
		if (n == 1)
			check_row_is_full_row(&rows[0]);
		session_rows_free(rows, n);
		CHECK_EQ_INT(store_file_id(s, full_row.id, "a/b.txt", again, sizeof(again)), 0);
		CHECK_EQ_STR(again, id);
		store_close(s);
		CHECK_EQ_INT(file_int(path, "PRAGMA user_version"), latest_version());
		CHECK_EQ_INT(file_int(path, "PRAGMA schema_version"), cookie);
	}
}

int main(void)
{
	if (!mkdtemp(root)) {
		perror("mkdtemp");
		return 1;
	}
	test_migrations_are_numbered_in_rising_order();
	test_new_database_gets_the_latest_schema();
	test_database_at_each_older_version_migrates_keeping_its_rows();
	test_failed_migration_leaves_the_database_as_it_was();
	test_reopening_changes_nothing();
	unit_remove_tree(root);
	return unit_summary();
}
