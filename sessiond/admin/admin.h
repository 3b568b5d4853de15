/* SPDX-License-Identifier: MIT */
/* The admin room: what the daemon tells about itself, and the operator's controls. */
#pragma once

#include <json-c/json.h>
#include <stdio.h>

#include "session/session.h"

/* {"op": "health"}: what a load balancer asks every second, in constant time: the live
 * sessions, the cap, whether the node is draining. */
void op_health(Manager *m, Conn *c, const Request *rq);
/* {"op": "stats"}: counts, limits, the pools. */
void op_stats(Manager *m, Conn *c, const Request *rq);
/* {"op": "metrics"}: the Prometheus text of /metrics. */
void op_metrics(Manager *m, Conn *c, const Request *rq);
/* {"op": "sessions"}: the caller's (tenant's) sessions. */
void op_sessions(Manager *m, Conn *c, const Request *rq);
/* {"op": "kill" | "drain" | "admin_sessions"} (root only: the server checks the peer). */
void op_admin(Manager *m, Conn *c, const Request *rq);

/* runtimes.c: the runtimes (default first, then each profile) for stats and metrics */
json_object *runtimes_stats(const Manager *m);
/* Live sessions on profiles no longer configured. */
size_t runtimes_retired_sessions(const Manager *m);
void runtimes_metrics_write(const Manager *m, FILE *f);
