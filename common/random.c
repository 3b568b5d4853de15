/* SPDX-License-Identifier: MIT */
#include "random.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>

/* One getrandom() per this many bytes handed out: a few dozen ids. */
#define RANDOM_BLOCK 512

static _Thread_local unsigned char block[RANDOM_BLOCK];
static _Thread_local size_t left; /* unused bytes at the end of block */

static int refill(void)
{
	size_t got = 0;

	while (got < sizeof(block)) {
		ssize_t n = getrandom(block + got, sizeof(block) - got, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		got += (size_t)n;
	}
	left = sizeof(block);
	return 0;
}

int random_bytes(void *buf, size_t len)
{
	unsigned char *out = buf;

	while (len > 0) {
		size_t take;
		int r;

		if (left == 0 && (r = refill()) < 0)
			return r;
		take = len < left ? len : left;
		memcpy(out, block + sizeof(block) - left, take);
		/* Handed out: not kept where a later bug could read it twice. */
		memset(block + sizeof(block) - left, 0, take);
		left -= take;
		out += take;
		len -= take;
	}
	return 0;
}

int random_hex(char *out, size_t n)
{
	static const char digits[] = "0123456789abcdef";
	unsigned char b[64];

	while (n > 0) {
		size_t k = n < sizeof(b) ? n : sizeof(b);
		int r = random_bytes(b, k);

		if (r < 0)
			return r;
		for (size_t i = 0; i < k; i++) {
			*out++ = digits[b[i] >> 4];
			*out++ = digits[b[i] & 15];
		}
		n -= k;
	}
	*out = '\0';
	return 0;
}
