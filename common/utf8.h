/* SPDX-License-Identifier: MIT */
/* Strict UTF-8: validation, and repair of untrusted bytes before they go into JSON. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Length of the well-formed sequence at s (1..4), or 0 when it is not one: overlong
 * forms, surrogates, code points above U+10FFFF and truncated sequences are refused. */
size_t utf8_sequence_length(const char *s, size_t avail);

/* Whether all len bytes are well-formed UTF-8 (NUL is a valid character here). */
bool utf8_valid(const char *s, size_t len);

/* A copy of s with every ill-formed byte replaced by U+FFFD; NUL-terminated, and
 * *outlen (if given) the length without the terminator. NULL when out of memory. */
char *utf8_sanitize(const char *s, size_t len, size_t *outlen);

/* How many of the first max bytes of s (a NUL-terminated string) to keep so that a cut
 * there splits no sequence: for quoting a prefix of client text in a message. */
size_t utf8_prefix_len(const char *s, size_t max);

/* How many of len bytes end on a whole character: a multi-byte sequence the bytes begin
 * but do not finish (cut by a read) is left out, for the next bytes to finish. */
size_t utf8_whole_prefix(const char *s, size_t len);

/* How many bytes of the valid UTF-8 s (len bytes) hold at most max_chars characters;
 * *chars (if given) how many they hold. */
size_t utf8_chars_prefix(const char *s, size_t len, size_t max_chars, size_t *chars);
