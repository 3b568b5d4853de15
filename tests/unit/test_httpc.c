/* SPDX-License-Identifier: MIT */
/* The one form of a callback URL the daemon compares against tool_callback_allow and
 * calls: what curl would resolve, with nothing that could hide another host. */
#include <stdlib.h>

#include "httpc/httpc.h"
#include "unit.h"

static void check_canonical(const char *url, const char *want)
{
	const char *why = NULL;
	char *got = httpc_canonical_url(url, &why);

	if (want)
		CHECK_EQ_STR(got, want);
	else
		CHECK(got == NULL && why != NULL);
	free(got);
}

static void test_dot_segments_and_fragments_are_resolved(void)
{
	check_canonical("http://127.0.0.1:9000/tools/../admin", "http://127.0.0.1:9000/admin");
	check_canonical("http://127.0.0.1:9000/tools/./call#frag",
			"http://127.0.0.1:9000/tools/call");
	check_canonical("HTTP://127.0.0.1:9000/tools", "http://127.0.0.1:9000/tools");
	check_canonical("http://127.0.0.1:9000", "http://127.0.0.1:9000/");
}

static void test_what_could_hide_another_host_is_refused(void)
{
	check_canonical("http://127.0.0.1:9000@evil.example/tools", NULL);
	check_canonical("http://user:pass@127.0.0.1/tools", NULL);
	check_canonical("file:///etc/passwd", NULL);
	check_canonical("gopher://127.0.0.1/tools", NULL);
	check_canonical("http://127.0.0.1/to ols", NULL);
	check_canonical("http://127.0.0.1/a\r\nX: y", NULL);
	check_canonical("not a url", NULL);
	check_canonical("", NULL);
}

int main(void)
{
	test_dot_segments_and_fragments_are_resolved();
	test_what_could_hide_another_host_is_refused();
	return unit_summary();
}
