/* SPDX-License-Identifier: MIT */
/* Bearer-token checks in constant time, and the tenant header. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#define TENANT_MAX 128

/* The configured tokens. Opaque. */
typedef struct AuthTokens AuthTokens;

/* Parse a comma-separated list (spaces around tokens ignored; empty entries dropped). */
int auth_tokens_new(const char *csv, AuthTokens **ret);
AuthTokens *auth_tokens_free(AuthTokens *t);
/* No tokens configured: every request is admitted. */
bool auth_open(const AuthTokens *t);

/*
 * Does an Authorization header value ("Bearer <token>", scheme case-insensitive)
 * carry one of the tokens? Every token is compared over its full length, whatever
 * the candidate, so timing tells nothing about which bytes or lengths differ.
 */
bool auth_check(const AuthTokens *t, const char *authorization);

/* The FastCGI parameter that carries a header: X-Paddock-Tenant -> HTTP_X_PADDOCK_TENANT. */
int auth_header_param(const char *header, char **ret);

/* A tenant value: 1..TENANT_MAX printable ASCII characters. */
bool auth_tenant_valid(const char *s);
