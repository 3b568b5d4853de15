/* SPDX-License-Identifier: MIT */
/* Unit tests for the streaming multipart/form-data parser: chunkings and malformed bodies. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/multipart.h"

#include "unit.h"

/* What the callbacks saw, as one transcript: "[name|filename]data{end}". */
struct transcript {
	char buf[1 << 16];
	size_t len;
	size_t data_calls;  /* part_data calls */
	int fail_data_with; /* make part_data fail with this, when non-zero */
};

static void put(struct transcript *t, const char *s, size_t n)
{
	if (t->len + n < sizeof(t->buf)) {
		memcpy(t->buf + t->len, s, n);
		t->len += n;
		t->buf[t->len] = '\0';
	}
}

static int on_begin(void *ud, const char *name, const char *filename)
{
	struct transcript *t = ud;

	put(t, "[", 1);
	put(t, name, strlen(name));
	put(t, "|", 1);
	if (filename)
		put(t, filename, strlen(filename));
	else
		put(t, "(none)", 6);
	put(t, "]", 1);
	return 0;
}

static int on_data(void *ud, const char *buf, size_t len)
{
	struct transcript *t = ud;

	if (t->fail_data_with)
		return t->fail_data_with;
	if (len == 0) /* the parser never reports empty data */
		CHECK_GT_INT(len, 0);
	t->data_calls++;
	put(t, buf, len);
	return 0;
}

static int on_end(void *ud)
{
	put(ud, "{end}", 5);
	return 0;
}

/* Parse body in chunks of the given sizes (cycled); 0 = all at once. Returns feed/finish error. */
static int run(const char *boundary, const char *body, size_t len, const size_t *chunks,
	       size_t nchunks, struct transcript *t, size_t max_parts, size_t max_hdr)
{
	MultipartCallbacks cb = { on_begin, on_data, on_end, t };
	MultipartParser *p;
	size_t off = 0, k = 0;
	int r;

	t->len = 0;
	t->data_calls = 0;
	t->buf[0] = '\0';
	r = multipart_parser_new(boundary, &cb, max_parts, max_hdr, &p);
	if (r < 0)
		return r;
	while (off < len) {
		size_t n = nchunks ? chunks[k++ % nchunks] : len;

		if (n > len - off)
			n = len - off;
		r = multipart_feed(p, body + off, n);
		if (r < 0)
			goto out;
		off += n;
	}
	r = multipart_finish(p);
out:
	multipart_parser_free(p);
	return r;
}

static int run_simple(const char *boundary, const char *body, struct transcript *t)
{
	return run(boundary, body, strlen(body), NULL, 0, t, 1000, 8192);
}

static const char BODY[] =
	"preamble line\r\n"
	"--XyZ\r\n"
	"Content-Disposition: form-data; name=\"path\"\r\n"
	"\r\n"
	"dir/out.txt\r\n"
	"--XyZ  \r\n"
	"content-disposition: form-data; name=file; filename=\"a \\\"q\\\".bin\"\r\n"
	"Content-Type: application/octet-stream\r\n"
	"\r\n"
	"line1\r\n--XyZa\r\n\r\r\n-\r\n--X\r\n--XyZ-x\r\n\r\n"
	"\r\n"
	"--XyZ\r\n"
	"Content-Disposition: form-data; name=\"empty\"\r\n"
	"\r\n"
	"\r\n"
	"--XyZ--\r\n"
	"epilogue --XyZ\r\n garbage";

static const char EXPECT[] =
	"[path|(none)]dir/out.txt{end}"
	"[file|a \"q\".bin]line1\r\n--XyZa\r\n\r\r\n-\r\n--X\r\n--XyZ-x\r\n\r\n{end}"
	"[empty|(none)]{end}";

static void test_every_chunking_gives_the_same_parts(void)
{
	static struct transcript t;
	size_t len = strlen(BODY);

	CHECK_EQ_INT(run_simple("XyZ", BODY, &t), 0);
	CHECK_EQ_STR(t.buf, EXPECT);

	/* Every fixed chunk size, including one byte at a time. */
	for (size_t n = 1; n <= len; n++) {
		size_t chunks[1] = { n };
		int r = run("XyZ", BODY, len, chunks, 1, &t, 1000, 8192);

		if (r != 0 || strcmp(t.buf, EXPECT) != 0) {
			CHECK_EQ_INT(r, 0);
			CHECK_EQ_STR(t.buf, EXPECT);
			fprintf(stderr, "  in chunks of %zu bytes\n", n);
			return;
		}
	}
	passed++;

	/* Random splits. */
	srand(12345);
	for (int iter = 0; iter < 2000; iter++) {
		size_t chunks[16];
		int r;

		for (size_t k = 0; k < 16; k++)
			chunks[k] = 1 + (size_t)rand() % 20;
		r = run("XyZ", BODY, len, chunks, 16, &t, 1000, 8192);
		if (r != 0 || strcmp(t.buf, EXPECT) != 0) {
			CHECK_EQ_INT(r, 0);
			CHECK_EQ_STR(t.buf, EXPECT);
			fprintf(stderr, "  in random chunks, round %d\n", iter);
			return;
		}
	}
	passed++;

	/* Every two-piece split: the boundary straddles each position once. */
	for (size_t cut = 0; cut <= len; cut++) {
		size_t chunks[2] = { cut ? cut : len, len };
		int r = run("XyZ", BODY, len, chunks, 2, &t, 1000, 8192);

		if (r != 0 || strcmp(t.buf, EXPECT) != 0) {
			CHECK_EQ_INT(r, 0);
			CHECK_EQ_STR(t.buf, EXPECT);
			fprintf(stderr, "  cut at byte %zu\n", cut);
			return;
		}
	}
	passed++;
}

static void test_body_may_start_without_a_preamble(void)
{
	static struct transcript t;

	CHECK_EQ_INT(run_simple("b",
				"--b\r\nContent-Disposition: form-data; name=a\r\n\r\nx\r\n--b--",
				&t),
		     0);
	CHECK_EQ_STR(t.buf, "[a|(none)]x{end}");
	/* A delimiter in the preamble needs a CRLF before it: here only the close one counts. */
	CHECK_EQ_INT(run_simple("b",
				"x--b\r\nContent-Disposition: form-data; name=a\r\n\r\nx\r\n--b--",
				&t),
		     0);
	CHECK_EQ_INT(t.len, 0);
	CHECK_EQ_INT(run_simple("b", "--b--", &t), 0);
	CHECK_EQ_INT(t.len, 0);
	/* Preamble with CR-heavy junk and a near miss. */
	CHECK_EQ_INT(run_simple("bb",
				"\r\r\n-\r\n--b\r\n--bb\r\nContent-Disposition: form-data; "
				"name=a\r\n\r\n\r\n--bb--\r\n",
				&t),
		     0);
	CHECK_EQ_STR(t.buf, "[a|(none)]{end}");
}

static void test_malformed_bodies_are_refused(void)
{
	static struct transcript t;
	const char *hdr = "Content-Disposition: form-data; name=a\r\n\r\n";
	char big[20000];

	/* Truncated: in data, in headers, before any delimiter, empty body. */
	CHECK_EQ_INT(
		run_simple("b", "--b\r\nContent-Disposition: form-data; name=a\r\n\r\nabc", &t),
		-EPIPE);
	CHECK_EQ_INT(run_simple("b", "--b\r\nContent-Disposition: form-da", &t), -EPIPE);
	CHECK_EQ_INT(run_simple("b", "just text", &t), -EPIPE);
	CHECK_EQ_INT(run_simple("b", "", &t), -EPIPE);
	CHECK_EQ_INT(run_simple("b",
				"--b\r\nContent-Disposition: form-data; name=a\r\n\r\nabc\r\n--b",
				&t),
		     -EPIPE);
	CHECK_EQ_INT(
		run_simple("b",
			   "--b\r\nContent-Disposition: form-data; name=a\r\n\r\nabc\r\n--b\r\n",
			   &t),
		-EPIPE);

	/* LF-only lines. */
	CHECK_EQ_INT(
		run_simple("b", "--b\nContent-Disposition: form-data; name=a\n\nx\n--b--\n", &t),
		-EBADMSG);
	CHECK_EQ_INT(run_simple("b",
				"--b\r\nContent-Disposition: form-data; name=a\n\r\n\r\nx\r\n--b--",
				&t),
		     -EBADMSG);
	/* CR not followed by LF in a header; junk after padding. */
	CHECK_EQ_INT(run_simple("b", "--b\r\nContent-Disposition: form-data;\r name=a\r\n\r\n", &t),
		     -EBADMSG);
	CHECK_EQ_INT(run_simple("b", "--b  x\r\n", &t), -EBADMSG);
	CHECK_EQ_INT(run_simple("b", "--b\rx", &t), -EBADMSG);

	/* Headers: none, no disposition, no name, not form-data, folded, no colon, NUL, twice. */
	CHECK_EQ_INT(run_simple("b", "--b\r\n\r\nx\r\n--b--", &t), -EBADMSG);
	CHECK_EQ_INT(run_simple("b", "--b\r\nContent-Type: text/plain\r\n\r\nx\r\n--b--", &t),
		     -EBADMSG);
	CHECK_EQ_INT(run_simple("b", "--b\r\nContent-Disposition: form-data\r\n\r\nx\r\n--b--", &t),
		     -EBADMSG);
	CHECK_EQ_INT(run_simple("b",
				"--b\r\nContent-Disposition: attachment; name=a\r\n\r\nx\r\n--b--",
				&t),
		     -EBADMSG);
	CHECK_EQ_INT(
		run_simple("b",
			   "--b\r\nContent-Disposition: form-data;\r\n name=a\r\n\r\nx\r\n--b--",
			   &t),
		-EBADMSG);
	CHECK_EQ_INT(run_simple("b", "--b\r\nbogus\r\n\r\nx\r\n--b--", &t), -EBADMSG);
	CHECK_EQ_INT(run_simple("b",
				"--b\r\nContent-Disposition: form-data; name=\"a\r\n\r\nx\r\n--b--",
				&t),
		     -EBADMSG);
	CHECK_EQ_INT(run_simple("b",
				"--b\r\nContent-Disposition: form-data; name=a\r\n"
				"Content-Disposition: form-data; name=b\r\n\r\nx\r\n--b--",
				&t),
		     -EBADMSG);
	{
		const char nul[] =
			"--b\r\nContent-Disposition: form-data; name=a\0\r\n\r\nx\r\n--b--";

		CHECK_EQ_INT(run("b", nul, sizeof(nul) - 1, NULL, 0, &t, 1000, 8192), -EBADMSG);
	}

	/* A header block over the cap. */
	snprintf(big, sizeof(big),
		 "--b\r\nContent-Disposition: form-data; name=a\r\nX-Pad: %0*d\r\n"
		 "\r\nx\r\n--b--",
		 9000, 0);
	CHECK_EQ_INT(run_simple("b", big, &t), -EMSGSIZE);
	CHECK_EQ_INT(run("b", big, strlen(big), NULL, 0, &t, 1000, 16384), 0);

	/* Too many parts. */
	{
		size_t n = 0;

		for (int i = 0; i < 5; i++)
			n += (size_t)snprintf(big + n, sizeof(big) - n, "--b\r\n%sx\r\n", hdr);
		snprintf(big + n, sizeof(big) - n, "--b--");
		CHECK_EQ_INT(run("b", big, strlen(big), NULL, 0, &t, 5, 8192), 0);
		CHECK_EQ_INT(run("b", big, strlen(big), NULL, 0, &t, 4, 8192), -E2BIG);
	}

	/* A callback's error stops the parser and sticks. */
	t.fail_data_with = -ENOSPC;
	CHECK_EQ_INT(run_simple("b",
				"--b\r\nContent-Disposition: form-data; name=a\r\n\r\nxyz\r\n--b--",
				&t),
		     -ENOSPC);
	t.fail_data_with = 0;
}

static void test_disposition_parameters_are_unquoted_in_any_case(void)
{
	static struct transcript t;

	CHECK_EQ_INT(
		run_simple("b",
			   "--b\r\nContent-Disposition: FORM-DATA ; NAME = \"a;b\" ; "
			   "filename*=UTF-8''x%20y ; filename=\"c:\\\\dir\\\\f.txt\"\r\n\r\nq\r\n"
			   "--b--",
			   &t),
		0);
	CHECK_EQ_STR(t.buf, "[a;b|c:\\dir\\f.txt]q{end}");
	CHECK_EQ_INT(
		run_simple("b",
			   "--b\r\nContent-Disposition: form-data; name=\"\"; filename=\"\"\r\n"
			   "\r\n\r\n--b--",
			   &t),
		0);
	CHECK_EQ_STR(t.buf, "[|]{end}");
}

static void test_boundary_comes_from_a_form_data_content_type(void)
{
	char b[MULTIPART_BOUNDARY_MAX + 1];

	CHECK_EQ_INT(multipart_boundary_from_content_type("multipart/form-data; boundary=abc", b,
							  sizeof(b)),
		     0);
	CHECK_EQ_STR(b, "abc");
	CHECK_EQ_INT(multipart_boundary_from_content_type("Multipart/Form-Data;charset=utf-8;"
							  "boundary=\"a b:c\"",
							  b, sizeof(b)),
		     0);
	CHECK_EQ_STR(b, "a b:c");
	CHECK_EQ_INT(multipart_boundary_from_content_type("multipart/form-data", b, sizeof(b)),
		     -EINVAL);
	CHECK_EQ_INT(multipart_boundary_from_content_type("multipart/form-data; boundary=", b,
							  sizeof(b)),
		     -EINVAL);
	CHECK_EQ_INT(multipart_boundary_from_content_type("multipart/form-data; boundary=\"abc", b,
							  sizeof(b)),
		     -EINVAL);
	CHECK_EQ_INT(multipart_boundary_from_content_type("application/json", b, sizeof(b)),
		     -EMEDIUMTYPE);
	CHECK_EQ_INT(multipart_boundary_from_content_type("multipart/form-dataX; boundary=a", b,
							  sizeof(b)),
		     -EMEDIUMTYPE);
	CHECK_EQ_INT(
		multipart_boundary_from_content_type("multipart/mixed; boundary=a", b, sizeof(b)),
		-EMEDIUMTYPE);
	{
		char ct[400];

		snprintf(ct, sizeof(ct), "multipart/form-data; boundary=%0*d",
			 MULTIPART_BOUNDARY_MAX + 1, 0);
		CHECK_EQ_INT(multipart_boundary_from_content_type(ct, b, sizeof(b)), -EINVAL);
	}
}

static void test_parser_new_refuses_empty_and_cr_boundaries(void)
{
	MultipartCallbacks cb = { 0 };
	MultipartParser *p = NULL;

	CHECK_EQ_INT(multipart_parser_new("", &cb, 10, 100, &p), -EINVAL);
	CHECK_EQ_INT(multipart_parser_new("a\rb", &cb, 10, 100, &p), -EINVAL);
	CHECK_EQ_INT(multipart_parser_new("ok", &cb, 10, 100, &p), 0);
	CHECK_EQ_INT(multipart_parts(p), 0);
	multipart_parser_free(p);
	CHECK(multipart_parser_free(NULL) == NULL);
}

/* Random bytes, and random mutations of a valid body: no crash, errors only as -errno. */
static void test_garbage_gives_errors_never_crashes(void)
{
	static struct transcript t;
	static char buf[4096];
	size_t len = strlen(BODY);
	bool ok = true;

	srand(777);
	for (int iter = 0; iter < 3000; iter++) {
		size_t chunks[3] = { 1 + (size_t)rand() % 7, 1 + (size_t)rand() % 100, 3 };
		int r;

		memcpy(buf, BODY, len);
		for (int m = 0; m < 1 + iter % 5; m++)
			buf[(size_t)rand() % len] = "\r\n-X\"\\;=:a\0"[rand() % 12];
		r = run("XyZ", buf, len, chunks, 3, &t, 1000, 8192);
		if (r > 0 || (r < 0 && r != -EBADMSG && r != -EPIPE && r != -EMSGSIZE))
			ok = false;
	}
	CHECK(ok);
}

/*
 * Binary data has a CR every 256 bytes or so. Those not followed by the delimiter are
 * data, so a part arrives in one piece per feed, not one per CR, and the same at any cut.
 */
static void test_binary_data_arrives_in_one_piece_per_feed(void)
{
	static struct transcript t;
	static char body[50000], expect[50000];
	static const char head[] = "--XyZ\r\nContent-Disposition: form-data; name=file\r\n\r\n";
	static const char tail[] = "\r\n--XyZ--\r\n";
	/* CRs alone, CRLFs, CRLF and dashes, a prefix of the delimiter with a wrong byte. */
	static const char *const near[] = { "\r", "\r\n", "\r\n--", "\r\n--Xy", "\r\n--XyQ" };
	size_t hl = strlen(head), len = hl, dlen;

	memcpy(body, head, hl);
	srand(4242);
	while (len < sizeof(body) - 200) {
		const char *s = near[(size_t)rand() % 5];

		for (int k = 0; k < 90; k++)
			body[len++] = (char)('a' + rand() % 26);
		memcpy(body + len, s, strlen(s));
		len += strlen(s);
	}
	dlen = len - hl;
	memcpy(expect, "[file|(none)]", 13);
	memcpy(expect + 13, body + hl, dlen);
	memcpy(expect + 13 + dlen, "{end}", 6);
	memcpy(body + len, tail, strlen(tail));
	len += strlen(tail);

	CHECK_EQ_INT(run("XyZ", body, len, NULL, 0, &t, 1000, 8192), 0);
	CHECK_EQ_STR(t.buf, expect);
	CHECK_EQ_INT(t.data_calls, 1);

	for (size_t n = 997; n < len; n += 1009) {
		size_t chunks[1] = { n };

		CHECK_EQ_INT(run("XyZ", body, len, chunks, 1, &t, 1000, 8192), 0);
		CHECK_EQ_STR(t.buf, expect);
		/* At most two pieces a feed: one before a delimiter prefix cut by the feed's
		 * end, and that prefix given back as data. */
		CHECK(t.data_calls <= 2 * (len / n + 1));
	}
}

/*
 * A boundary as long as clients make them (curl's is 40 characters), in data of every byte
 * value holding each proper prefix of the delimiter and the whole delimiter followed by a
 * byte that makes it data: the file comes out whole at every chunk size, a prefix cut by
 * each chunk's end included.
 */
static void test_long_boundary_prefixes_at_any_cut(void)
{
	static struct transcript t;
	static char body[8192], expect[8192];
	static const char boundary[] = "------------------------d74496d66958873e";
	static const char head[] =
		"--------------------------d74496d66958873e\r\n"
		"Content-Disposition: form-data; name=\"f\"; filename=\"b\"\r\n\r\n";
	char delim[64];
	size_t dlen = (size_t)snprintf(delim, sizeof(delim), "\r\n--%s", boundary);
	size_t hl = strlen(head), len = hl, flen;

	memcpy(body, head, hl);
	srand(777);
	for (size_t k = 1; k <= dlen; k++) {
		for (int i = 0; i < 20; i++)
			body[len++] = (char)(rand() % 256);
		/* Each proper prefix, then the whole delimiter with "x" after it: data too. */
		memcpy(body + len, delim, k);
		len += k;
		if (k == dlen)
			body[len++] = 'x';
	}
	flen = len - hl;
	memcpy(expect, "[f|b]", 5);
	memcpy(expect + 5, body + hl, flen);
	memcpy(expect + 5 + flen, "{end}", 5);
	len += (size_t)snprintf(body + len, sizeof(body) - len, "%s--\r\n", delim);

	for (size_t n = 1; n <= len; n++) {
		size_t chunks[1] = { n };
		int r = run(boundary, body, len, chunks, 1, &t, 1000, 8192);

		if (r != 0 || t.len != flen + 10 || memcmp(t.buf, expect, t.len) != 0) {
			CHECK_EQ_INT(r, 0);
			CHECK_EQ_INT(t.len, flen + 10);
			CHECK(memcmp(t.buf, expect, flen + 10) == 0);
			fprintf(stderr, "  in chunks of %zu bytes\n", n);
			return;
		}
	}
	passed++;
}

int main(void)
{
	test_parser_new_refuses_empty_and_cr_boundaries();
	test_every_chunking_gives_the_same_parts();
	test_body_may_start_without_a_preamble();
	test_malformed_bodies_are_refused();
	test_disposition_parameters_are_unquoted_in_any_case();
	test_boundary_comes_from_a_form_data_content_type();
	test_garbage_gives_errors_never_crashes();
	test_binary_data_arrives_in_one_piece_per_feed();
	test_long_boundary_prefixes_at_any_cut();
	return unit_summary();
}
