/* SPDX-License-Identifier: MIT */
/* The Otari code-execution API (/sessions...): its routes, handlers and response shapes. */
#pragma once

#include <json-c/json.h>

#include "app.h"
#include "http/client.h"
#include "http/route.h"

/* The API's route tables (otari.c): the handlers below; the open one is served without a
 * token or a tenant. */
extern const RouteTable otari_routes;
extern const RouteTable otari_open_routes;

/* Handlers: sessions and execution (sessions.c), files (files.c). */
void otari_create(ReqCtx *rq);
void otari_exec(ReqCtx *rq);
void otari_destroy(ReqCtx *rq);
void otari_lookup(ReqCtx *rq);
/* GET /health (health.c): served to anyone, a token or not. */
void otari_health(ReqCtx *rq);
void otari_list(ReqCtx *rq);
void otari_get(ReqCtx *rq);
void otari_put(ReqCtx *rq);

/* Programmatic tools (tools.c). */
void otari_tools_register(ReqCtx *rq);

/* ---- the daemon (daemon.c) ---- */

/* The body as one JSON object (empty allowed: *ret NULL); answers and returns -1 when it
 * is not one. */
int otari_read_json(ReqCtx *rq, bool allow_empty, json_object **ret);

/* A sessiond request for op with request_id, tenant and session_id filled in (owned). */
json_object *otari_sd_request(ReqCtx *rq, const char *op);
/* The same written as text, left open (sessiond_request_begin). */
void otari_sd_request_begin(ReqCtx *rq, JsonText *req, const char *op);

/*
 * Answer a failed sessiond_call (r < 0: daemon unreachable) or an error reply
 * (rep->ok false) with the mapped status and a detail.
 */
void otari_sd_fail(ReqCtx *rq, int r, const SessiondReply *rep);

/* Send req and read the reply: 0 with an ok reply in *rep (the caller clears it), or -1
 * with the client answered (otari_sd_fail) and *rep cleared. */
int otari_sd_call(ReqCtx *rq, json_object *req, enum sessiond_retry retry, SessiondReply *rep);
/* The same for a request begun with otari_sd_request_begin(), an ok reply kept as text
 * (sessiond_call_text_open). */
int otari_sd_call_text(ReqCtx *rq, JsonText *req, enum sessiond_retry retry, SessiondReply *rep);
/* The same for an exec whose output streams to the client as `stdout` and `stderr` events
 * (sent once); -1 also when the client went away, with nobody to answer. */
int otari_sd_call_streamed(ReqCtx *rq, JsonText *req, SessiondReply *rep);
