/* SPDX-License-Identifier: MIT */
/* The SQLite migrations compiled into the daemon from schema/ (see cmake/embed_schema.cmake). */
#pragma once

/* One migration: applied when PRAGMA user_version is below version. */
typedef struct SchemaMigration {
	int version;	  /* the file's number */
	const char *name; /* the file's name, for logs */
	const char *sql;  /* its statements */
} SchemaMigration;

extern const SchemaMigration schema_migrations[];
extern const unsigned schema_migrations_count;
