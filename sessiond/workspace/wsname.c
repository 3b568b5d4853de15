/* SPDX-License-Identifier: MIT */
/* The API form of workspace names: escapes for the bytes of a name that are not UTF-8. */
#include "wsname.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "utf8.h"

static const char hex_digits[] = "0123456789ABCDEF";

/* Whether the bytes at s (avail of them) begin with the escape character. */
static bool at_escape(const char *s, size_t avail)
{
	return avail >= WSNAME_ESCAPE_LEN && memcmp(s, WSNAME_ESCAPE, WSNAME_ESCAPE_LEN) == 0;
}

ssize_t wsname_encode(const char *raw, size_t len, char *out, size_t outlen)
{
	size_t o = 0;

	if (outlen == 0)
		return -ENOBUFS;
	for (size_t i = 0; i < len;) {
		size_t n = utf8_sequence_length(raw + i, len - i);
		size_t esc = n == 0 ? 1 : at_escape(raw + i, len - i) ? WSNAME_ESCAPE_LEN : 0;

		if (esc == 0) {
			if (o + n >= outlen)
				goto nobufs;
			memcpy(out + o, raw + i, n);
			o += n;
			i += n;
			continue;
		}
		/* A stray byte, or the escape character spelt out byte by byte. */
		for (size_t k = 0; k < esc; k++, i++) {
			unsigned char b = (unsigned char)raw[i];

			if (o + WSNAME_GROWTH >= outlen)
				goto nobufs;
			memcpy(out + o, WSNAME_ESCAPE, WSNAME_ESCAPE_LEN);
			out[o + WSNAME_ESCAPE_LEN] = hex_digits[b >> 4];
			out[o + WSNAME_ESCAPE_LEN + 1] = hex_digits[b & 0xf];
			o += WSNAME_GROWTH;
		}
	}
	out[o] = '\0';
	return (ssize_t)o;
nobufs:
	out[0] = '\0';
	return -ENOBUFS;
}

char *wsname_encode_dup(const char *raw)
{
	size_t len = strlen(raw);
	size_t cap = len * WSNAME_GROWTH + 1;
	char *out = malloc(cap);

	if (!out)
		return NULL;
	if (wsname_encode(raw, len, out, cap) < 0) {
		free(out); /* cannot happen: cap is the worst case */
		return NULL;
	}
	return out;
}

static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

ssize_t wsname_decode(const char *api, char *out, size_t outlen)
{
	size_t len = strlen(api), o = 0;

	if (!utf8_valid(api, len))
		return -EINVAL;
	for (size_t i = 0; i < len;) {
		if (o + 1 >= outlen)
			return -ENOBUFS;
		if (at_escape(api + i, len - i)) {
			int hi, lo;

			if (len - i < WSNAME_GROWTH)
				return -EINVAL;
			hi = hex_value(api[i + WSNAME_ESCAPE_LEN]);
			lo = hex_value(api[i + WSNAME_ESCAPE_LEN + 1]);
			/* Only bytes the encoder escapes: never NUL, "/" or "." from an escape. */
			if (hi < 8 || lo < 0)
				return -EINVAL;
			out[o++] = (char)(hi << 4 | lo);
			i += WSNAME_GROWTH;
		} else {
			out[o++] = api[i++];
		}
	}
	out[o] = '\0';
	return (ssize_t)o;
}
