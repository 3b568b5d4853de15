/* SPDX-License-Identifier: MIT */
/* A database a newer paddock migrated, opened by this one: refused, and left as it is. */
#include <sqlite3.h>
#include <stdio.h>

#include "core/schema.h"
#include "core/store.h"

#include "unit.h"

static char root[] = "/tmp/paddock-store-XXXXXX";

static int64_t file_int(const char *path, const char *sql)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	int64_t v = -1;

	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK &&
	    sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
	return v;
}

/*
 * The store cannot know what a migration it does not have changed (a column renamed, a
 * meaning changed), so it must not read or write such a database: store_open fails, and
 * nothing in the file changes.
 */
static void test_database_newer_than_the_migrations_is_refused(void)
{
	const SessionRow row = {
		.id = "nodea-new", .uid = 100001, .idle_timeout = 60, .max_lifetime = 600
	};
	int newer = schema_migrations[schema_migrations_count - 1].version + 1;
	char path[4096], sql[128];
	sqlite3 *db = NULL;
	Store *s = NULL;

	snprintf(path, sizeof(path), "%s/newer.db", root);
	CHECK_EQ_INT(store_open(path, &s), 0);
	if (!s)
		return;
	CHECK_EQ_INT(store_session_insert(s, &row), 0);
	store_close(s);
	/* What the newer migration did. */
	snprintf(sql, sizeof(sql),
		 "ALTER TABLE sessions ADD COLUMN later TEXT; PRAGMA user_version = %d", newer);
	CHECK_EQ_INT(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
	CHECK_EQ_INT(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);

	s = NULL;
	CHECK_LT_INT(store_open(path, &s), 0);
	CHECK(s == NULL);
	store_close(s);
	CHECK_EQ_INT(file_int(path, "PRAGMA user_version"), newer);
	CHECK_EQ_INT(file_int(path, "SELECT COUNT(*) FROM sessions"), 1);
}

int main(void)
{
	if (!mkdtemp(root)) {
		perror("mkdtemp");
		return 1;
	}
	test_database_newer_than_the_migrations_is_refused();
	unit_remove_tree(root);
	return unit_summary();
}
