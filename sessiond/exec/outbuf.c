/* SPDX-License-Identifier: MIT */
/* Bytes of one output stream of a run, capped: the head is kept, the rest counted. */
#include <stdlib.h>
#include <string.h>

#include "run.h"
#include "utf8.h"

size_t outbuf_append(OutBuf *b, const char *data, size_t len, size_t cap)
{
	size_t room = b->len < cap ? cap - b->len : 0;
	size_t take = len < room ? len : room;

	if (take > 0 && b->len + take > b->cap) {
		size_t ncap = b->cap ? b->cap : 4096;
		char *grown;

		while (ncap < b->len + take)
			ncap *= 2;
		if (ncap > cap)
			ncap = cap;
		grown = realloc(b->buf, ncap + 1);
		if (!grown) {
			b->omitted += len;
			return 0;
		}
		b->buf = grown;
		b->cap = ncap;
	}
	if (take > 0) {
		memcpy(b->buf + b->len, data, take);
		b->len += take;
	}
	b->omitted += len - take;
	return take;
}

/* The kept bytes, made valid UTF-8 for JSON, plus the truncation note; resets b. */
char *outbuf_finish(OutBuf *b, size_t *len)
{
	char note[96] = "";
	size_t n = 0, nl;
	char *s = utf8_sanitize(b->buf ? b->buf : "", b->len, &n);

	if (b->omitted)
		snprintf(note, sizeof(note), "\n[output truncated: %llu bytes omitted]\n",
			 (unsigned long long)b->omitted);
	nl = strlen(note);
	if (s && nl) {
		char *grown = realloc(s, n + nl + 1);

		if (grown) {
			memcpy(grown + n, note, nl + 1);
			n += nl;
		}
		s = grown ? grown : s;
	}
	free(b->buf);
	*b = (OutBuf){ 0 };
	*len = s ? n : 0;
	return s;
}

void outbuf_clear(OutBuf *b)
{
	free(b->buf);
	*b = (OutBuf){ 0 };
}
