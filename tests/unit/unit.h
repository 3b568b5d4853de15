/* SPDX-License-Identifier: MIT */
/* What every C unit test shares: the CHECK macros and the closing "N passed, N failed". */
#pragma once

#include <ftw.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int passed, failed;

/*
 * Each CHECK counts one assertion and, when it fails, names it on stderr with its file and
 * line; the test goes on. CHECK(cond) is for what is true or false. The comparisons take
 * what was computed first and what it should be second, evaluate each once, and print
 * both:
 *
 *   CHECK_EQ_INT(route_match(&table, "GET", path, &m), ROUTE_BAD_ID);
 *   test_route.c:40: FAILED: route_match(&table, "GET", path, &m) == ROUTE_BAD_ID:
 *   expected 3, got 0
 *
 * The integer ones compare as intmax_t (size_t, ssize_t, -errno and enums alike), and
 * refuse at compile time what is not an integer. The string ones print NULL as NULL and
 * escape what a terminal would not show as itself.
 */
#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (cond) {                                                                        \
			passed++;                                                                  \
		} else {                                                                           \
			failed++;                                                                  \
			fprintf(stderr, "%s:%d: FAILED: %s\n", __FILE__, __LINE__, #cond);         \
		}                                                                                  \
	} while (0)

/* Whether x has an integer type (bool, char and enums included): not a pointer, not a double. */
#define UNIT_IS_INTEGER(x) (__builtin_classify_type(x) >= 1 && __builtin_classify_type(x) <= 4)
#define UNIT_CHECK_INT(got, op, want, got_text, want_text)                                         \
	do {                                                                                       \
		_Static_assert(UNIT_IS_INTEGER(got) && UNIT_IS_INTEGER(want),                      \
			       "an integer comparison of something else");                         \
		unit_check_int(__FILE__, __LINE__, got_text, op, want_text, (intmax_t)(got),       \
			       (intmax_t)(want));                                                  \
	} while (0)
#define CHECK_EQ_INT(got, want) UNIT_CHECK_INT(got, UNIT_EQ, want, #got, #want) /* got == want */
#define CHECK_NE_INT(got, want) UNIT_CHECK_INT(got, UNIT_NE, want, #got, #want) /* got != want */
#define CHECK_LT_INT(got, want) UNIT_CHECK_INT(got, UNIT_LT, want, #got, #want) /* got < want */
#define CHECK_LE_INT(got, want) UNIT_CHECK_INT(got, UNIT_LE, want, #got, #want) /* got <= want */
#define CHECK_GT_INT(got, want) UNIT_CHECK_INT(got, UNIT_GT, want, #got, #want) /* got > want */
#define CHECK_GE_INT(got, want) UNIT_CHECK_INT(got, UNIT_GE, want, #got, #want) /* got >= want */
/* strcmp(got, want) == 0; NULL equals only NULL. */
#define CHECK_EQ_STR(got, want) unit_check_str(__FILE__, __LINE__, #got, #want, got, want)
/* got is a string with part in it. */
#define CHECK_CONTAINS(got, part) unit_check_contains(__FILE__, __LINE__, #got, #part, got, part)

typedef enum { UNIT_EQ, UNIT_NE, UNIT_LT, UNIT_LE, UNIT_GT, UNIT_GE } UnitOp;

static inline void unit_fail_head(const char *file, int line, const char *got_expr, const char *op,
				  const char *want_expr)
{
	failed++;
	fprintf(stderr, "%s:%d: FAILED: %s %s %s: ", file, line, got_expr, op, want_expr);
}

static inline void unit_check_int(const char *file, int line, const char *got_expr, UnitOp op,
				  const char *want_expr, intmax_t got, intmax_t want)
{
	static const char *const names[] = { "==", "!=", "<", "<=", ">", ">=" };
	bool ok;

	switch (op) {
	case UNIT_EQ: ok = got == want; break;
	case UNIT_NE: ok = got != want; break;
	case UNIT_LT: ok = got < want; break;
	case UNIT_LE: ok = got <= want; break;
	case UNIT_GT: ok = got > want; break;
	default: ok = got >= want; break;
	}
	if (ok) {
		passed++;
		return;
	}
	unit_fail_head(file, line, got_expr, names[op], want_expr);
	if (op == UNIT_EQ)
		fprintf(stderr, "expected %jd, got %jd\n", want, got);
	else
		fprintf(stderr, "expected %s %jd, got %jd\n", names[op], want, got);
}

/* s in double quotes, with C escapes for what a terminal would not show as itself. */
static inline void unit_print_str(const char *s)
{
	if (!s) {
		fputs("NULL", stderr);
		return;
	}
	fputc('"', stderr);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '\n')
			fputs("\\n", stderr);
		else if (*p == '\t')
			fputs("\\t", stderr);
		else if (*p == '"' || *p == '\\')
			fprintf(stderr, "\\%c", *p);
		else if (*p < 0x20 || *p == 0x7f)
			fprintf(stderr, "\\x%02x", *p);
		else
			fputc(*p, stderr);
	}
	fputc('"', stderr);
}

static inline void unit_check_str(const char *file, int line, const char *got_expr,
				  const char *want_expr, const char *got, const char *want)
{
	if (got && want ? strcmp(got, want) == 0 : got == want) {
		passed++;
		return;
	}
	unit_fail_head(file, line, got_expr, "==", want_expr);
	fputs("expected ", stderr);
	unit_print_str(want);
	fputs(", got ", stderr);
	unit_print_str(got);
	fputc('\n', stderr);
}

static inline void unit_check_contains(const char *file, int line, const char *got_expr,
				       const char *part_expr, const char *got, const char *part)
{
	if (got && part && strstr(got, part)) {
		passed++;
		return;
	}
	unit_fail_head(file, line, got_expr, "contains", part_expr);
	fputs("expected a string containing ", stderr);
	unit_print_str(part);
	fputs(", got ", stderr);
	unit_print_str(got);
	fputc('\n', stderr);
}

/* The closing line ctest's readers know, and the exit status that goes with it. */
static inline int unit_summary(void)
{
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}

/*
 * A scratch tree for the workspace tests: <root>/ws is the workspace, <root>/outside a
 * directory and <root>/secret a file beside it, for escapes to aim at. root must hold a
 * mkdtemp() template; ws gets <root>/ws. Exits on failure: nothing can be tested then.
 */
static inline void unit_scratch_workspace(char *root, char *ws, size_t wslen)
{
	char p[4096];

	if (!mkdtemp(root)) {
		perror("mkdtemp");
		exit(1);
	}
	snprintf(ws, wslen, "%s/ws", root);
	snprintf(p, sizeof(p), "%s/outside", root);
	if (mkdir(ws, 0755) < 0 || mkdir(p, 0755) < 0) {
		perror("mkdir");
		exit(1);
	}
	snprintf(p, sizeof(p), "%s/secret", root);
	fclose(fopen(p, "w"));
}

static inline int unit_remove_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(p);
}

/* Remove the scratch tree, without following links out of it. */
static inline void unit_remove_tree(const char *root)
{
	nftw(root, unit_remove_one, 16, FTW_DEPTH | FTW_PHYS);
}
