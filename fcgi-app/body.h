/* SPDX-License-Identifier: MIT */
/* Reading a request body as one JSON object: the checks both APIs share. */
#pragma once

#include <json-c/json.h>
#include <stddef.h>
#include <stdint.h>

#include "http.h"

/* What kept a body from becoming a JSON object; each API words and shapes it its own way. */
enum body_problem {
	BODY_EMPTY,	 /* nothing but white space */
	BODY_TOO_LARGE,	 /* over max_bytes */
	BODY_UNREADABLE, /* the connection failed */
	BODY_NOT_JSON,	 /* detail says why (the parser's words) */
	BODY_NOT_OBJECT, /* valid JSON, not an object */
	BODY_NO_MEMORY,
};

typedef struct BodyError {
	enum body_problem kind;
	char detail[256]; /* for BODY_NOT_JSON */
} BodyError;

/* Read at most max_bytes and parse them under max_depth. 0 and *ret the object, or -1 and
 * *e filled (with *ret NULL). */
int body_read_json(HttpReq *h, size_t max_bytes, int max_depth, json_object **ret, BodyError *e);
