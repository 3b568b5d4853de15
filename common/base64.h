/* SPDX-License-Identifier: MIT */
/* Base64 (RFC 4648, the standard alphabet with padding): binary content inside JSON. */
#pragma once

#include <stddef.h>

/* The encoded length of n bytes, without the NUL. */
size_t base64_encoded_len(size_t n);

/* Encode len bytes of src into dst (base64_encoded_len(len) + 1 bytes), NUL-terminated. */
void base64_encode(const void *src, size_t len, char *dst);

/*
 * Decode len characters of src into dst (at least len / 4 * 3 bytes; NULL: only check
 * that src is an encoding, and say how many bytes it holds). Padding is
 * required (a length that is a multiple of 4), no white space; the bits a final
 * group leaves over must be zero, so each byte string has one encoding. Returns the
 * decoded length, or -EINVAL.
 */
long base64_decode(const char *src, size_t len, void *dst);
