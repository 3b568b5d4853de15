/* SPDX-License-Identifier: MIT */
/* Unit tests for routing, per-segment percent-decoding, id checks and query look-ups. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/route.h"

#include "unit.h"

static void h(ReqCtx *rq)
{
	(void)rq;
}

static const Route routes[] = {
	{ "create", "POST", "/sessions", h },
	{ "exec", "POST", "/sessions/{id}/exec", h },
	{ "destroy", "DELETE", "/sessions/{id}", h },
	{ "list", "GET", "/sessions/{id}/files/list", h },
	{ "get", "GET", "/sessions/{id}/files", h },
	{ "put", "POST", "/sessions/{id}/files", h },
};
static const RouteTable table = { "test", routes, sizeof(routes) / sizeof(routes[0]) };

static void test_routes_match_by_method_and_decoded_segments(void)
{
	RouteMatch m;
	char big[12000];

	CHECK_EQ_INT(route_match(&table, "POST", "/sessions", &m), ROUTE_FOUND);
	CHECK_EQ_STR(m.route->name, "create");
	CHECK_EQ_INT(m.id[0], '\0');
	CHECK_EQ_INT(route_match(&table, "POST", "/sessions/abc-1_Z/exec", &m), ROUTE_FOUND);
	CHECK_EQ_STR(m.route->name, "exec");
	CHECK_EQ_STR(m.id, "abc-1_Z");
	CHECK_EQ_INT(route_match(&table, "GET", "/sessions/x/files/list", &m), ROUTE_FOUND);
	CHECK_EQ_STR(m.route->name, "list");
	CHECK_EQ_INT(route_match(&table, "GET", "/sessions/x/files", &m), ROUTE_FOUND);
	CHECK_EQ_STR(m.route->name, "get");
	CHECK_EQ_INT(route_match(&table, "POST", "/sessions/x/files", &m), ROUTE_FOUND);
	CHECK_EQ_STR(m.route->name, "put");
	CHECK_EQ_INT(route_match(&table, "DELETE", "/sessions/x", &m), ROUTE_FOUND);
	/* Escapes decode per segment; literals may be escaped too. */
	CHECK_EQ_INT(route_match(&table, "POST", "/sessions/a%2Db/exec", &m), ROUTE_FOUND);
	CHECK_EQ_STR(m.id, "a-b");
	CHECK_EQ_INT(route_match(&table, "POST", "/%73essions/a/%65xec", &m), ROUTE_FOUND);

	/* Unknown paths. */
	CHECK_EQ_INT(route_match(&table, "GET", "/", &m), ROUTE_NOT_FOUND);
	CHECK_EQ_INT(route_match(&table, "GET", "", &m), ROUTE_NOT_FOUND);
	CHECK_EQ_INT(route_match(&table, "POST", "/sessions/", &m), ROUTE_NOT_FOUND);
	CHECK_EQ_INT(route_match(&table, "POST", "/sessions/a/exec/", &m), ROUTE_NOT_FOUND);
	CHECK_EQ_INT(route_match(&table, "POST", "/sessions/a/exec/more", &m), ROUTE_NOT_FOUND);
	CHECK_EQ_INT(route_match(&table, "POST", "//sessions", &m), ROUTE_NOT_FOUND);
	CHECK_EQ_INT(route_match(&table, "POST", "/sessionsx", &m), ROUTE_NOT_FOUND);
	CHECK_EQ_INT(route_match(&table, "POST", "/sessions%2Fa/exec", &m), ROUTE_NOT_FOUND);
	CHECK_EQ_INT(route_match(&table, "POST", "/sess%zzions", &m), ROUTE_NOT_FOUND);
	CHECK_EQ_INT(route_match(&table, "GET", "/v1/code", &m), ROUTE_NOT_FOUND);

	/* Wrong method: the Allow list names every method on the path. */
	CHECK_EQ_INT(route_match(&table, "GET", "/sessions", &m), ROUTE_BAD_METHOD);
	CHECK_EQ_STR(m.allow, "POST");
	CHECK_EQ_INT(route_match(&table, "DELETE", "/sessions/x/files", &m), ROUTE_BAD_METHOD);
	CHECK_EQ_STR(m.allow, "GET, POST");
	CHECK_EQ_INT(route_match(&table, "PUT", "/sessions/x", &m), ROUTE_BAD_METHOD);
	CHECK_EQ_STR(m.allow, "DELETE");

	/* Ids that decode to something outside [A-Za-z0-9_-]{1,128}. */
	CHECK_EQ_INT(route_match(&table, "POST", "/sessions/a%2Fb/exec", &m), ROUTE_BAD_ID);
	CHECK_EQ_INT(route_match(&table, "POST", "/sessions/a%00b/exec", &m), ROUTE_BAD_ID);
	CHECK_EQ_INT(route_match(&table, "POST", "/sessions/a%zz/exec", &m), ROUTE_BAD_ID);
	CHECK_EQ_INT(route_match(&table, "POST", "/sessions/a%/exec", &m), ROUTE_BAD_ID);
	CHECK_EQ_INT(route_match(&table, "POST", "/sessions/a%4/exec", &m), ROUTE_BAD_ID);
	CHECK_EQ_INT(route_match(&table, "POST", "/sessions/../exec", &m), ROUTE_BAD_ID);
	CHECK_EQ_INT(route_match(&table, "POST", "/sessions/a.b/exec", &m), ROUTE_BAD_ID);
	CHECK_EQ_INT(route_match(&table, "DELETE", "/sessions/%20", &m), ROUTE_BAD_ID);
	CHECK_EQ_INT(route_match(&table, "DELETE", "/sessions/%C3%A9", &m), ROUTE_BAD_ID);
	memset(big, 'a', sizeof(big));
	memcpy(big, "/sessions/", 10);
	big[10 + 128] = '\0';
	CHECK_EQ_INT(route_match(&table, "DELETE", big, &m), ROUTE_FOUND);
	CHECK_EQ_INT(strlen(m.id), 128);
	big[10 + 128] = 'a';
	big[10 + 129] = '\0';
	CHECK_EQ_INT(route_match(&table, "DELETE", big, &m), ROUTE_BAD_ID);
	big[sizeof(big) - 1] = '\0';
	CHECK_EQ_INT(route_match(&table, "DELETE", big, &m), ROUTE_BAD_ID);
	for (size_t i = 10; i + 3 < sizeof(big) - 1; i += 3)
		memcpy(big + i, "%41", 3);
	CHECK_EQ_INT(route_match(&table, "DELETE", big, &m), ROUTE_BAD_ID);
}

static void test_percent_decoding_refuses_bad_escapes(void)
{
	char out[64];

	CHECK_EQ_INT(route_pct_decode("a%41%62+c", 9, out, true), 5);
	CHECK_EQ_STR(out, "aAb c");
	CHECK_EQ_INT(route_pct_decode("a+c", 3, out, false), 3);
	CHECK_EQ_STR(out, "a+c");
	CHECK_EQ_INT(route_pct_decode("%", 1, out, false), -EINVAL);
	CHECK_EQ_INT(route_pct_decode("%4", 2, out, false), -EINVAL);
	CHECK_EQ_INT(route_pct_decode("%4g", 3, out, false), -EINVAL);
	CHECK_EQ_INT(route_pct_decode("%00", 3, out, false), 1);
	CHECK_EQ_INT(out[0], '\0');
	CHECK_EQ_INT(route_pct_decode("", 0, out, false), 0);
}

static void test_id_is_letters_digits_dash_and_underscore(void)
{
	CHECK(route_id_valid("node1-AbC_9", 11));
	CHECK(!route_id_valid("", 0));
	CHECK(!route_id_valid("a/b", 3));
	CHECK(!route_id_valid("a\0b", 3));
}

static void test_query_get_decodes_the_first_value_of_a_name(void)
{
	char *v = NULL;

	CHECK_EQ_INT(query_get("path=a%2Fb.txt&x=1", "path", &v), 1);
	CHECK_EQ_STR(v, "a/b.txt");
	free(v);
	CHECK_EQ_INT(query_get("x=1&path=a+b&path=c", "path", &v), 1);
	CHECK_EQ_STR(v, "a b");
	free(v);
	CHECK_EQ_INT(query_get("pa%74h=q", "path", &v), 1);
	CHECK_EQ_STR(v, "q");
	free(v);
	CHECK_EQ_INT(query_get("path=", "path", &v), 1);
	CHECK_EQ_STR(v, "");
	free(v);
	CHECK_EQ_INT(query_get("path", "path", &v), 1);
	CHECK_EQ_STR(v, "");
	free(v);
	CHECK_EQ_INT(query_get("", "path", &v), 0);
	CHECK(v == NULL);
	CHECK_EQ_INT(query_get("paths=1&xpath=2&&", "path", &v), 0);
	CHECK_EQ_INT(query_get("path=%00", "path", &v), -EINVAL);
	CHECK_EQ_INT(query_get("path=%zz", "path", &v), -EINVAL);
	/* Not UTF-8: overlong dots, a lone continuation byte, a truncated sequence. */
	CHECK_EQ_INT(query_get("path=%c0%ae%c0%ae%2fetc", "path", &v), -EINVAL);
	CHECK_EQ_INT(query_get("path=a%80", "path", &v), -EINVAL);
	CHECK_EQ_INT(query_get("path=%e2%82", "path", &v), -EINVAL);
	CHECK_EQ_INT(query_get("path=%C3%A9t%C3%A9", "path", &v), 1);
	CHECK_EQ_STR(v, "\xc3\xa9t\xc3\xa9");
	free(v);
	CHECK_EQ_INT(query_get("file_id=f1", "file_id", &v), 1);
	CHECK_EQ_STR(v, "f1");
	free(v);
}

int main(void)
{
	test_routes_match_by_method_and_decoded_segments();
	test_percent_decoding_refuses_bad_escapes();
	test_id_is_letters_digits_dash_and_underscore();
	test_query_get_decodes_the_first_value_of_a_name();
	return unit_summary();
}
