/* SPDX-License-Identifier: MIT */
/* Base64 encoding and strict decoding. */
#include "base64.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t base64_encoded_len(size_t n)
{
	return (n + 2) / 3 * 4;
}

void base64_encode(const void *src, size_t len, char *dst)
{
	const unsigned char *s = src;
	size_t i = 0;

	for (; i + 3 <= len; i += 3) {
		uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];

		*dst++ = alphabet[v >> 18 & 63];
		*dst++ = alphabet[v >> 12 & 63];
		*dst++ = alphabet[v >> 6 & 63];
		*dst++ = alphabet[v & 63];
	}
	if (len - i == 1) {
		uint32_t v = (uint32_t)s[i] << 16;

		*dst++ = alphabet[v >> 18 & 63];
		*dst++ = alphabet[v >> 12 & 63];
		*dst++ = '=';
		*dst++ = '=';
	} else if (len - i == 2) {
		uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8;

		*dst++ = alphabet[v >> 18 & 63];
		*dst++ = alphabet[v >> 12 & 63];
		*dst++ = alphabet[v >> 6 & 63];
		*dst++ = '=';
	}
	*dst = '\0';
}

static int sextet(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

long base64_decode(const char *src, size_t len, void *dst)
{
	unsigned char *d = dst;
	size_t o = 0;

	if (len % 4)
		return -EINVAL;
	for (size_t i = 0; i < len; i += 4) {
		bool last = i + 4 == len;
		int pad = last ? (src[i + 3] == '=') + (src[i + 2] == '=') : 0;
		int a = sextet(src[i]), b = sextet(src[i + 1]);
		int c = pad >= 2 ? 0 : sextet(src[i + 2]);
		int e = pad >= 1 ? 0 : sextet(src[i + 3]);
		uint32_t v;

		/* "x=y=" is not padding: '=' only ends the text. */
		if (a < 0 || b < 0 || c < 0 || e < 0 || (pad == 1 && src[i + 2] == '='))
			return -EINVAL;
		v = (uint32_t)a << 18 | (uint32_t)b << 12 | (uint32_t)c << 6 | (uint32_t)e;
		/* Bits below the last byte must be zero: one encoding per byte string. */
		if ((pad == 2 && (v & 0xffff)) || (pad == 1 && (v & 0xff)))
			return -EINVAL;
		if (d) {
			d[o] = (unsigned char)(v >> 16);
			d[o + 1] = (unsigned char)(v >> 8);
			d[o + 2] = (unsigned char)v;
		}
		o += 3 - (size_t)pad;
	}
	return (long)o;
}
