/* SPDX-License-Identifier: MIT */
/* Table-driven routing: method + path -> handler, path segments percent-decoded; query strings. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* The request a handler serves; defined by the server. */
typedef struct ReqCtx ReqCtx;
typedef void (*RouteHandler)(ReqCtx *rq);

#define ROUTE_ID_MAX 128

/*
 * One route. A pattern is literal segments and at most one "{id}" segment,
 * which matches one path segment; its decoded value must be a valid id.
 */
typedef struct Route {
	const char *name;     /* short name for the log, e.g. "exec" */
	const char *method;   /* "GET", "POST", "DELETE" */
	const char *pattern;  /* e.g. "/sessions/{id}/exec" */
	RouteHandler handler; /* serves the request */
} Route;

/* The routes of one API, tried in order. */
typedef struct RouteTable {
	const char *api;     /* "otari", ... */
	const Route *routes; /* the table */
	size_t n;	     /* entries in routes */
} RouteTable;

enum route_result {
	ROUTE_FOUND,	  /* match->route set; match->id set when the pattern has {id} */
	ROUTE_NOT_FOUND,  /* no pattern matches the path */
	ROUTE_BAD_METHOD, /* the path matches, the method does not: see match->allow */
	ROUTE_BAD_ID,	  /* the {id} segment decodes to something that is not a valid id */
};

typedef struct RouteMatch {
	const Route *route;	   /* the route found */
	char id[ROUTE_ID_MAX + 1]; /* decoded {id} segment, "" when none */
	char allow[64];		   /* methods allowed on the path, "GET, POST" */
} RouteMatch;

/* Match method and raw path (the path part of REQUEST_URI, still percent-encoded). */
enum route_result route_match(const RouteTable *t, const char *method, const char *raw_path,
			      RouteMatch *m);

/* Session ids: [A-Za-z0-9_-]{1,128}. */
bool route_id_valid(const char *s, size_t len);

/*
 * Percent-decode len bytes of src into dst (at least len + 1 bytes); '+' is a
 * space when plus_is_space. Returns the decoded length, or -EINVAL for a bad
 * escape. The result is NUL-terminated and may hold NUL bytes.
 */
long route_pct_decode(const char *src, size_t len, char *dst, bool plus_is_space);

/*
 * Find name in a query string (a=1&b=2) and decode its value into *ret (owned).
 * Returns 1 when found, 0 when absent, -EINVAL for a bad escape, a NUL byte or
 * invalid UTF-8 in the value, -ENOMEM. The first occurrence wins.
 */
int query_get(const char *query, const char *name, char **ret);
