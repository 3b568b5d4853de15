/* SPDX-License-Identifier: MIT */
/*
 * The lifecycle room: how sessions come and go. Warm sandboxes are built ahead (pool.c,
 * build.c); a create takes one, or waits for the next (create.c, waiting.c, handout.c);
 * a restart re-adopts what the daemon before left (adopt.c); a session ends destroyed or
 * let go alive (end.c).
 */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>

#include "session/session.h"

/* create.c: {"op": "create", ...} */
void op_create(Manager *m, Conn *c, const Request *rq);

/* end.c */
/* {"op": "destroy", "session_id"}: {"existed": bool}. */
void op_destroy(Manager *m, Conn *c, const Request *rq);
/* Kill the sandbox; its remains go to a zombie. Also SessionEvents.sandbox_lost. */
void session_destroy(Session *s, const char *why);
/* Forget a session without touching its sandbox or its row: for a restart. */
void session_release(Session *s);
/* Free what s holds in memory only (its undo log, its tenant string) and s. */
void session_free(Session *s);

/* adopt.c */
/* Take back the sandbox row names (an earlier daemon's): 0, or -errno with nothing
 * changed (the caller cleans it with adopt_remains_kill()). */
int adopt_session(Manager *m, const SessionRow *row);
/* Kill what is left of row's sandbox, if its init still runs, as a zombie. */
void adopt_remains_kill(Manager *m, const SessionRow *row);

/* pool.c */
void pool_schedule(Manager *m);
/* How many pool sandboxes may warm up at once: pool_warm_max, or the CPUs + 1. */
size_t pool_warm_max(const PaddockConfig *cfg);
/* Pool sandboxes warming up: children setting up, and interpreters that have not
 * answered their first request yet. */
size_t pool_warming(const Manager *m);
/* Pool sandboxes whose interpreter has answered its first request: truly ready. */
size_t pool_started(const Manager *m);
/* Warm sandboxes whose children are still setting up, both kinds. */
size_t pool_building_total(const Manager *m);
/* SessionEvents.interp_settled: a pooled interpreter answered its first request, or
 * died: the next build may start; handed out meanwhile, its sandbox gets its weight. */
void pool_interp_settled(Session *s);
/* SessionEvents.template_ready: warm sandboxes of the default runtime whose interpreter of
 * kind init started (the template was not ready) are made again, from the template. */
void pool_template_ready(Manager *m, enum interp_kind kind);
/* A warm sandbox of pool which (pool_index()), or NULL when none is in it. */
Session *pool_take(Manager *m, int which);
/* How many sandboxes pool which keeps ready. */
size_t pool_target(const Manager *m, int which);
void pool_free_all(Manager *m);

/* waiting.c */
size_t create_waiting_total(const Manager *m);
/* Waiting creates of this tenant (their followers, which wait for the same id, aside). */
size_t create_waiting_of_tenant(const Manager *m, const char *tenant);
/* Add the code plane's waiting creates, and of those the kernel tier's. */
void create_waiting_of_code(const Manager *m, size_t *n_code, size_t *n_kernel);
void create_conn_closed(Manager *m, Conn *c);
void create_free_all(Manager *m);

/*
 * Within the room.
 */

/* build.c */
/* Give s (id and rid set) a uid and a sandbox whose child is setting itself up, workspace
 * included (p); build_finish() completes it. On failure s holds nothing new.
 * background: at the least CPU weight, until session_cpu_foreground(). */
int build_start(Manager *m, Session *s, SandboxPending *p, bool background);
/* Once p's child is init (its sync fd is readable, so this does not wait): s gets its
 * running sandbox. On failure s holds nothing but what it came with. */
int build_finish(Manager *m, Session *s, SandboxPending *p);
void build_abort(Manager *m, Session *s, SandboxPending *p);

/* handout.c */
/* s, just taken from the pool, becomes the session req asked for; c gets the answer.
 * 0 when the session is there, else the error c got. */
int create_finish(Manager *m, Conn *c, json_object *req, Session *s);
/* The answer to a create whose sandbox could not be had: r as from a build, -ETIMEDOUT
 * when none was ready by its deadline. */
json_object *create_error(const Manager *m, json_object *req, int r);
/* Whether a create is the code plane's. */
bool req_is_code(json_object *req);
/* Why a runtime cannot serve now (its tree, or its builds keep failing), or NULL. */
const char *runtime_problem(const Manager *m, size_t runtime);
/* The runtime a create's image selects: its profile's index when one of that name is
 * configured and can serve, else 0 (the default; logged when a name was given). */
size_t create_runtime(const Manager *m, json_object *req);

/* waiting.c */
/* A create for an id another waiting create asked for follows that one (true: it does). */
bool create_follow(Manager *m, Conn *c, json_object *req);
/* Queue a create for pool which's next sandbox, until its deadline. */
void create_wait(Manager *m, Conn *c, json_object *req, int which);
/* Every create waiting for pool from waits for pool to instead, after those there. */
void create_wait_move(Manager *m, int from, int to);
/* s, from pool which, goes to the create that has waited longest there. */
void create_serve_oldest(Manager *m, int which, Session *s);
/* Builds keep failing (r as from a build): the waiting creates beyond the oldest
 * `building` (those a build under way will serve) get the error. */
void create_fail_unbuilt_waiting(Manager *m, const size_t building[POOLS_MAX], int r);
