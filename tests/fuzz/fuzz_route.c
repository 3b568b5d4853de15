/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: routing of a raw request path (percent-decoding per segment, the {id}
 * segment) and query-string look-ups. Input: a method selector byte, then a
 * REQUEST_URI (path, '?', query), cut at the first NUL as a FastCGI param would be.
 */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "http/route.h"
#include "otari/otari.h"
#include "utf8.h"

static const char *const methods[] = { "GET", "POST", "DELETE", "PUT", "", "get" };

/* Checks one match result against what route.h promises. */
static void check_match(const RouteTable *t, const char *method, const char *path)
{
	RouteMatch m;
	enum route_result r = route_match(t, method, path, &m);

	FUZZ_ASSERT(strlen(m.allow) < sizeof(m.allow));
	switch (r) {
	case ROUTE_FOUND:
		FUZZ_ASSERT(m.route && strcmp(m.route->method, method) == 0);
		FUZZ_ASSERT(strlen(m.id) <= ROUTE_ID_MAX);
		if (strstr(m.route->pattern, "{id}"))
			FUZZ_ASSERT(route_id_valid(m.id, strlen(m.id)));
		else
			FUZZ_ASSERT(m.id[0] == '\0');
		break;
	case ROUTE_BAD_ID: FUZZ_ASSERT(m.route && strstr(m.route->pattern, "{id}")); break;
	case ROUTE_BAD_METHOD: FUZZ_ASSERT(m.allow[0] != '\0'); break;
	case ROUTE_NOT_FOUND: FUZZ_ASSERT(m.allow[0] == '\0'); break;
	default: FUZZ_ASSERT(!"unknown route_result");
	}
}

static void check_query(const char *query, const char *name)
{
	char *val = NULL;
	int r = query_get(query, name, &val);

	FUZZ_ASSERT(r == 0 || r == 1 || r == -EINVAL || r == -ENOMEM);
	FUZZ_ASSERT((r == 1) == (val != NULL));
	/* A found value is UTF-8 text no longer than the query it came from. */
	if (val)
		FUZZ_ASSERT(strlen(val) <= strlen(query) && utf8_valid(val, strlen(val)));
	free(val);
}

static void dummy(ReqCtx *rq)
{
	(void)rq;
}

/* Patterns otari's table does not have: {id} in the middle, literals that need escapes. */
static const Route extra_routes[] = {
	{ "a", "GET", "/", dummy },
	{ "b", "GET", "/v1/{id}/x y", dummy },
	{ "c", "POST", "/v1/{id}/x y", dummy },
	{ "d", "GET", "/v2/%/{id}", dummy },
};
static const RouteTable extra = { "extra", extra_routes,
				  sizeof(extra_routes) / sizeof(extra_routes[0]) };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *method;
	char *uri, *q, *dec;
	long n;

	if (size < 1)
		return 0;
	method = methods[data[0] % (sizeof(methods) / sizeof(methods[0]))];
	uri = strndup((const char *)data + 1, size - 1);
	FUZZ_ASSERT(uri);
	q = strchr(uri, '?');
	if (q)
		*q++ = '\0';

	check_match(&otari_routes, method, uri);
	check_match(&extra, method, uri);

	/* The decoder on its own: never longer than its input, always terminated. */
	dec = malloc(strlen(uri) + 1);
	FUZZ_ASSERT(dec);
	n = route_pct_decode(uri, strlen(uri), dec, data[0] & 1);
	FUZZ_ASSERT(n == -EINVAL || (n >= 0 && (size_t)n <= strlen(uri) && dec[n] == '\0'));
	free(dec);

	if (q) {
		check_query(q, "path");
		check_query(q, "file_id");
		check_query(q, "");
		/* A name taken from the path, so the fuzzer can steer both. */
		check_query(q, uri);
	}
	free(uri);
	return 0;
}
