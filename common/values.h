/* SPDX-License-Identifier: MIT */
/* The syntax of setting values: integers, sizes with K/M/G suffixes, booleans. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#define KiB (1024LL)
#define MiB (1024LL * KiB)
#define GiB (1024LL * MiB)

/* A decimal integer; sized: with an optional K, M or G suffix (KiB, MiB... alike).
 * -EINVAL for anything else, -ERANGE when it does not fit. */
int value_parse_int(const char *s, bool sized, int64_t *ret);
/* true/yes/on/1 or false/no/off/0, any case; -EINVAL for anything else. */
int value_parse_bool(const char *s, bool *ret);
/* s without leading and trailing blanks, in place. */
char *value_trim(char *s);
