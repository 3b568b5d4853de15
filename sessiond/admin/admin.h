/* SPDX-License-Identifier: MIT */
/* The admin room: what the daemon tells about itself, and the operator's controls. */
#pragma once

#include <json-c/json.h>

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
