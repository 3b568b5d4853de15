/* SPDX-License-Identifier: MIT */
/* What every C unit test shares: the CHECK counter and the closing "N passed, N failed". */
#pragma once

#include <stdio.h>

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
