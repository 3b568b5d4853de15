/* SPDX-License-Identifier: MIT */
/* Strict UTF-8 decoding of one sequence, and the two walks built on it. */
#include "utf8.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

size_t utf8_sequence_length(const char *str, size_t avail)
{
	const unsigned char *p = (const unsigned char *)str;
	unsigned char c;
	uint32_t cp;
	size_t n;

	if (avail == 0)
		return 0;
	c = p[0];
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		n = 1;
		cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		n = 2;
		cp = c & 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 3;
		cp = c & 0x07;
	} else {
		return 0;
	}
	if (avail <= n)
		return 0;
	for (size_t i = 1; i <= n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (p[i] & 0x3f);
	}
	if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n + 1;
}

bool utf8_valid(const char *s, size_t len)
{
	for (size_t i = 0; i < len;) {
		size_t n = utf8_sequence_length(s + i, len - i);

		if (n == 0)
			return false;
		i += n;
	}
	return true;
}

char *utf8_sanitize(const char *s, size_t len, size_t *outlen)
{
	static const char replacement[] = "\xef\xbf\xbd";
	/* Each bad byte grows to 3: the worst case is 3 * len. */
	char *out = len < (SIZE_MAX - 1) / 3 ? malloc(3 * len + 1) : NULL;
	size_t o = 0;

	if (!out)
		return NULL;
	for (size_t i = 0; i < len;) {
		size_t n = utf8_sequence_length(s + i, len - i);

		if (n == 0) {
			memcpy(out + o, replacement, 3);
			o += 3;
			i++;
		} else {
			memcpy(out + o, s + i, n);
			o += n;
			i += n;
		}
	}
	out[o] = '\0';
	if (outlen)
		*outlen = o;
	return out;
}

size_t utf8_prefix_len(const char *s, size_t max)
{
	size_t len = strnlen(s, max), i = 0;

	while (i < len) {
		size_t n = utf8_sequence_length(s + i, len - i);

		/* A sequence cut by max, or a stray byte: stop before it. */
		if (n == 0)
			break;
		i += n;
	}
	return i;
}

size_t utf8_whole_prefix(const char *s, size_t len)
{
	/* The last lead byte within a sequence's reach of the end, and what it promises. */
	for (size_t back = 1; back <= 4 && back <= len; back++) {
		unsigned char c = (unsigned char)s[len - back];
		size_t want;

		if ((c & 0xC0) == 0x80)
			continue;
		/* A byte that leads no well-formed sequence waits for nothing. */
		want = c >= 0xF5 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 1;
		return want > back ? len - back : len;
	}
	return len; /* only continuation bytes: ill-formed, left for repair */
}

size_t utf8_chars_prefix(const char *s, size_t len, size_t max_chars, size_t *chars)
{
	size_t n = 0, i;

	for (i = 0; i < len; i++) {
		/* A character starts at every byte that is not a continuation byte. */
		if (((unsigned char)s[i] & 0xC0) != 0x80) {
			if (n == max_chars)
				break;
			n++;
		}
	}
	if (chars)
		*chars = n;
	return i;
}
