/* SPDX-License-Identifier: MIT */
/* Bearer tokens compared in constant time; tenant header name and value checks. */
#include "auth.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cleanup.h"

struct AuthTokens {
	char **tokens; /* owned, NUL-terminated */
	size_t n;      /* how many */
};

AuthTokens *auth_tokens_free(AuthTokens *t)
{
	if (!t)
		return NULL;
	for (size_t i = 0; i < t->n; i++) {
		/* Tokens are secrets: do not leave them in freed memory. */
		explicit_bzero(t->tokens[i], strlen(t->tokens[i]));
		free(t->tokens[i]);
	}
	free(t->tokens);
	free(t);
	return NULL;
}

int auth_tokens_new(const char *csv, AuthTokens **ret)
{
	AuthTokens *t = calloc(1, sizeof(*t));
	const char *p = csv ? csv : "";

	if (!t)
		return -ENOMEM;
	while (*p) {
		const char *e = strchrnul(p, ','), *s = p, *end = e;
		char **grown;

		while (s < end && isspace((unsigned char)*s))
			s++;
		while (end > s && isspace((unsigned char)end[-1]))
			end--;
		p = *e ? e + 1 : e;
		if (s == end)
			continue;
		grown = realloc(t->tokens, (t->n + 1) * sizeof(*grown));
		if (!grown)
			goto oom;
		t->tokens = grown;
		t->tokens[t->n] = strndup(s, (size_t)(end - s));
		if (!t->tokens[t->n])
			goto oom;
		t->n++;
	}
	*ret = t;
	return 0;
oom:
	auth_tokens_free(t);
	return -ENOMEM;
}

bool auth_open(const AuthTokens *t)
{
	return !t || t->n == 0;
}

/* 0 when equal; the loop runs over all of tok whatever cand is. */
static unsigned ct_compare(const char *tok, size_t toklen, const char *cand, size_t candlen)
{
	unsigned diff = toklen != candlen;

	for (size_t i = 0; i < toklen; i++) {
		unsigned char c = i < candlen ? (unsigned char)cand[i] : 0;

		diff |= c ^ (unsigned char)tok[i];
	}
	return diff;
}

bool auth_check(const AuthTokens *t, const char *authorization)
{
	const char *cand;
	size_t candlen;
	unsigned ok = 0;

	if (auth_open(t))
		return true;
	if (!authorization || strncasecmp(authorization, "Bearer ", 7) != 0)
		return false;
	cand = authorization + 7;
	while (*cand == ' ')
		cand++;
	candlen = strlen(cand);
	while (candlen > 0 && cand[candlen - 1] == ' ')
		candlen--;
	/* No early exit: every configured token is compared. */
	for (size_t i = 0; i < t->n; i++)
		ok |= ct_compare(t->tokens[i], strlen(t->tokens[i]), cand, candlen) == 0;
	return ok != 0 && candlen > 0;
}

int auth_header_param(const char *header, char **ret)
{
	size_t n = strlen(header);
	char *p = malloc(n + 6);

	if (!p)
		return -ENOMEM;
	memcpy(p, "HTTP_", 5);
	for (size_t i = 0; i < n; i++)
		p[5 + i] = header[i] == '-' ? '_' : (char)toupper((unsigned char)header[i]);
	p[5 + n] = '\0';
	*ret = p;
	return 0;
}

bool auth_tenant_valid(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > TENANT_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
			return false;
	return true;
}
