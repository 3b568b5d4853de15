/* SPDX-License-Identifier: MIT */
/* What every C unit test shares: the CHECK counter and the closing "N passed, N failed". */
#pragma once

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

static int passed, failed;

/* Count the assertion, and name it on stderr when it fails; the test goes on. */
#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (cond) {                                                                        \
			passed++;                                                                  \
		} else {                                                                           \
			failed++;                                                                  \
			fprintf(stderr, "%s:%d: FAILED: %s\n", __FILE__, __LINE__, #cond);         \
		}                                                                                  \
	} while (0)

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
