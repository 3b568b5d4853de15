/* SPDX-License-Identifier: MIT */
/* GET /metrics: the daemon's Prometheus text plus the worker's own request counters. */
#pragma once

#include <stdint.h>

#include "route.h"

/* The route table: GET /metrics. */
extern const RouteTable metrics_routes;

/* Count one answered request: route name (static, NULL when none), status, duration. */
void metrics_observe(const char *route, int status, int64_t ms);
