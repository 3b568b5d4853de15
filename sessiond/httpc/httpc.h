/* SPDX-License-Identifier: MIT */
/*
 * The httpc room: HTTP requests the daemon makes (programmatic tool calls' callbacks), with
 * libcurl's multi interface on the daemon's loop, so a slow or stuck server never holds the
 * loop. It knows URLs, headers and bytes; nothing of sessions.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/loop.h"

typedef struct HttpClient HttpClient;
typedef struct HttpCall HttpCall;

/* How a call ended. */
typedef struct HttpResult {
	bool ok;	     /* an answer came whole (any status) */
	long status;	     /* its HTTP status, when ok */
	const char *body;    /* its body (NUL-terminated), when ok */
	size_t len;	     /* bytes of body */
	bool timed_out;	     /* no whole answer within the call's time */
	bool too_large;	     /* the answer passed the call's max_reply */
	const char *problem; /* why there is no answer, a sentence fragment, when !ok */
} HttpResult;

/* The call ended; r and what it points to live until cb returns. The call is freed after. */
typedef void (*httpc_done_cb)(void *data, const HttpResult *r);

int httpc_new(Loop *l, HttpClient **ret);
/* Cancel every call in flight (no callbacks) and free. Accepts NULL. */
HttpClient *httpc_free(HttpClient *c);

/* What one call sends. */
typedef struct HttpPost {
	const char *url;     /* http:// or https://, no redirects followed */
	const char *bearer;  /* Authorization: Bearer <bearer>, NULL for none */
	const char *body;    /* a JSON document */
	size_t len;	     /* its bytes */
	uint64_t timeout_ms; /* for the whole call, connecting included */
	size_t max_reply;    /* bytes of answer body taken at most */
} HttpPost;

/* POST p; cb(data, result) once it ends, from the loop, never from within this call.
 * NULL when it could not be started (out of memory). */
HttpCall *httpc_post_json(HttpClient *c, const HttpPost *p, httpc_done_cb cb, void *data);
/* Stop a call in flight: its callback is never called. Accepts NULL. */
void httpc_cancel(HttpCall *call);
/* Calls in flight. */
size_t httpc_in_flight(const HttpClient *c);

/*
 * The URL in the one form the daemon compares and calls: scheme and host lower case, dot
 * segments resolved, no user name or password, http or https only. Owned by the caller;
 * NULL with *why (a sentence) set when url is not one the daemon calls.
 */
char *httpc_canonical_url(const char *url, const char **why);
