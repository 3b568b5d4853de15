/* SPDX-License-Identifier: MIT */
/* Random bytes from the kernel's CSPRNG, drawn in blocks: ids made per call cost no syscall. */
#pragma once

#include <stddef.h>

/*
 * Fill buf with len unpredictable bytes: 0, or -errno when the kernel gave none. Each
 * thread keeps its own block of bytes taken from getrandom(), used once each and wiped as
 * they are handed out. A forked child must not use the block it inherited before exec
 * (no paddock child does: they exec at once).
 */
int random_bytes(void *buf, size_t len);

/* n random bytes as 2n lowercase hex digits and a NUL, into out (2n + 1 bytes): 0 or -errno. */
int random_hex(char *out, size_t n);
