/* SPDX-License-Identifier: MIT */
/* Routing over tables of patterns, percent-decoding per path segment, and query look-ups. */
#include "route.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "utf8.h"

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

long route_pct_decode(const char *src, size_t len, char *dst, bool plus_is_space)
{
	size_t o = 0;

	for (size_t i = 0; i < len; i++) {
		if (src[i] == '%') {
			int hi, lo;

			if (len - i < 3)
				return -EINVAL;
			hi = hexval(src[i + 1]);
			lo = hexval(src[i + 2]);
			if (hi < 0 || lo < 0)
				return -EINVAL;
			dst[o++] = (char)(hi << 4 | lo);
			i += 2;
		} else if (src[i] == '+' && plus_is_space) {
			dst[o++] = ' ';
		} else {
			dst[o++] = src[i];
		}
	}
	dst[o] = '\0';
	return (long)o;
}

bool route_id_valid(const char *s, size_t len)
{
	if (len == 0 || len > ROUTE_ID_MAX)
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '-'))
			return false;
	}
	return true;
}

/* One segment of a raw path: from *p to the next '/' or the end. */
static bool next_segment(const char **p, const char **seg, size_t *len)
{
	const char *s = *p, *e;

	if (*s != '/')
		return false;
	s++;
	e = strchrnul(s, '/');
	*seg = s;
	*len = (size_t)(e - s);
	*p = e;
	return true;
}

/* Does a decoded segment equal a literal? Segments over the literal's escaped size cannot. */
static bool literal_matches(const char *seg, size_t len, const char *lit, size_t litlen)
{
	char buf[128];
	long n;

	if (len >= sizeof(buf) || len > litlen * 3)
		return false;
	n = route_pct_decode(seg, len, buf, false);
	return n >= 0 && (size_t)n == litlen && memcmp(buf, lit, litlen) == 0;
}

/*
 * Match a raw path against one pattern, structurally: {id} matches any one
 * segment. The raw {id} segment is handed back for the caller to decode.
 */
static bool pattern_matches(const char *pattern, const char *path, const char **id_seg,
			    size_t *id_len)
{
	const char *pp = pattern, *rp = path;

	*id_seg = NULL;
	*id_len = 0;
	for (;;) {
		const char *pseg, *rseg;
		size_t plen, rlen;
		bool pmore = next_segment(&pp, &pseg, &plen);
		bool rmore = next_segment(&rp, &rseg, &rlen);

		if (!pmore || !rmore)
			return !pmore && !rmore && *rp == '\0';
		if (plen == 4 && memcmp(pseg, "{id}", 4) == 0) {
			if (rlen == 0) /* "/sessions/" is not a session's path */
				return false;
			*id_seg = rseg;
			*id_len = rlen;
		} else if (!literal_matches(rseg, rlen, pseg, plen)) {
			return false;
		}
	}
}

static void allow_add(RouteMatch *m, const char *method)
{
	size_t n = strlen(m->allow);

	/* The same method twice on one path is a table bug; list it once anyway. */
	if (strstr(m->allow, method))
		return;
	snprintf(m->allow + n, sizeof(m->allow) - n, "%s%s", n ? ", " : "", method);
}

static enum route_result decode_id(const char *seg, size_t len, RouteMatch *m)
{
	char buf[ROUTE_ID_MAX * 3 + 1];
	long n;

	m->id[0] = '\0';
	if (!seg)
		return ROUTE_FOUND;
	/* More than 3 bytes of escape per id byte cannot decode to a valid id. */
	if (len == 0 || len >= sizeof(buf))
		return ROUTE_BAD_ID;
	n = route_pct_decode(seg, len, buf, false);
	if (n < 0 || !route_id_valid(buf, (size_t)n))
		return ROUTE_BAD_ID;
	memcpy(m->id, buf, (size_t)n + 1);
	return ROUTE_FOUND;
}

enum route_result route_match(const RouteTable *t, const char *method, const char *raw_path,
			      RouteMatch *m)
{
	bool path_known = false;

	*m = (RouteMatch){ 0 };
	for (size_t i = 0; i < t->n; i++) {
		const Route *r = &t->routes[i];
		const char *seg;
		size_t len;

		if (!pattern_matches(r->pattern, raw_path, &seg, &len))
			continue;
		path_known = true;
		allow_add(m, r->method);
		if (strcmp(r->method, method) != 0)
			continue;
		m->route = r;
		return decode_id(seg, len, m);
	}
	return path_known ? ROUTE_BAD_METHOD : ROUTE_NOT_FOUND;
}

int query_get(const char *query, const char *name, char **ret)
{
	size_t nlen = strlen(name);
	const char *p = query;

	*ret = NULL;
	while (p && *p) {
		const char *amp = strchrnul(p, '&'), *eq = memchr(p, '=', (size_t)(amp - p));
		const char *kend = eq ? eq : amp;
		size_t klen = (size_t)(kend - p);
		_cleanup_free_ char *key = malloc(klen + 1);
		long n;

		if (!key)
			return -ENOMEM;
		n = route_pct_decode(p, klen, key, true);
		if (n < 0)
			return -EINVAL;
		if ((size_t)n == nlen && memcmp(key, name, nlen) == 0) {
			const char *v = eq ? eq + 1 : amp;
			size_t vlen = (size_t)(amp - v);
			_cleanup_free_ char *val = malloc(vlen + 1);

			if (!val)
				return -ENOMEM;
			n = route_pct_decode(v, vlen, val, true);
			/* Values are text that ends up in JSON (requests to sessiond, error
			 * details echoing them): a NUL or bytes that are not UTF-8, such as
			 * "%c0%ae", are malformed here rather than passed on. */
			if (n < 0 || strlen(val) != (size_t)n || !utf8_valid(val, (size_t)n))
				return -EINVAL;
			*ret = TAKE_PTR(val);
			return 1;
		}
		p = *amp ? amp + 1 : amp;
	}
	return 0;
}
