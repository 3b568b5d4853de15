/* SPDX-License-Identifier: MIT */
/* Replies sessiond writes and the request fields it reads (docs/internal-protocol.md). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "json.h"

/* Replies are built with json_set() and json_append() (json.h): conn_reply() answers one
 * that is json_incomplete() with an error instead. */

/* {"ok": true}, to add fields to. */
json_object *reply_ok(void);
/* The same as text, left open for its members: replies on the hot path are written, not
 * built (conn_reply_text). */
void reply_ok_text(JsonText *t);
/* {"ok": false, "error": kind, "detail": the sentence}: kind as the protocol names them. */
json_object *reply_error(const char *kind, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* e with "retry_after": the seconds a refused caller should wait (503 + Retry-After). */
json_object *reply_retry_after(json_object *e, int64_t seconds);
/* A string field, or NULL when absent or not a string. */
const char *req_string(json_object *req, const char *key);
/* An integer field: false when absent or not an integer. */
bool req_int(json_object *req, const char *key, int64_t *v);
/* A field's truth: false when absent. */
bool req_bool(json_object *req, const char *key);
