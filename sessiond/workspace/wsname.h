/* SPDX-License-Identifier: MIT */
/* The API form of workspace names: UTF-8 text that stands for any bytes a name can hold. */
#pragma once

#include <stddef.h>
#include <sys/types.h>

/*
 * A Linux file name is bytes; the APIs speak JSON text. The API form of a name writes each
 * byte that is not part of well-formed UTF-8, and each byte of the escape character itself
 * (U+201B, "‛"), as the escape character and two upper-case hex digits: the name
 * "bad-\xc3(-\xff.txt" is "bad-‛C3(-‛FF.txt". Every other character stands for itself, so a
 * name that is valid UTF-8 without a "‛" is its own API form.
 *
 * Escaping the escape character's bytes (rather than doubling it) keeps one rule for
 * decoding: "‛HH" is the byte 0xHH, always. Escapes stand only for bytes 0x80-0xFF, which
 * is all the encoder ever writes, so a decoded name never gains a NUL, a "/" or a ".".
 */
#define WSNAME_ESCAPE "\xe2\x80\x9b"
#define WSNAME_ESCAPE_LEN 3

/* Bytes of API form one byte of a name can take at most (escape plus two digits). */
#define WSNAME_GROWTH (WSNAME_ESCAPE_LEN + 2)

/*
 * Write the API form of len bytes at raw to out (outlen bytes, NUL-terminated). Returns its
 * length, or -ENOBUFS when it does not fit (out is then an empty string).
 */
ssize_t wsname_encode(const char *raw, size_t len, char *out, size_t outlen);

/* The API form of the NUL-terminated raw, allocated (the caller frees it); NULL on ENOMEM. */
char *wsname_encode_dup(const char *raw);

/*
 * Decode the API form api into its bytes at out (outlen bytes, NUL-terminated). Returns their
 * length; -EINVAL when api is not UTF-8 or has an escape not followed by two hex digits
 * naming a byte 0x80-0xFF; -ENOBUFS when the bytes do not fit.
 */
ssize_t wsname_decode(const char *api, char *out, size_t outlen);
