/* SPDX-License-Identifier: MIT */
/* The two clocks paddock reads: monotonic milliseconds for deadlines, real seconds for
 * what is reported (created_at, log lines). */
#pragma once

#include <stdint.h>
#include <time.h>

static inline uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static inline double now_real(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}
