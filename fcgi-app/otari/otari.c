/* SPDX-License-Identifier: MIT */
/* The Otari API's routes: which handler serves each /sessions path. */
#include "otari.h"

#include "cleanup.h"

static const Route routes[] = {
	{ "create", "POST", "/sessions", otari_create },
	{ "exec", "POST", "/sessions/{id}/exec", otari_exec },
	{ "destroy", "DELETE", "/sessions/{id}", otari_destroy },
	{ "lookup", "GET", "/sessions/{id}", otari_lookup },
	{ "list", "GET", "/sessions/{id}/files/list", otari_list },
	{ "get", "GET", "/sessions/{id}/files", otari_get },
	{ "put", "POST", "/sessions/{id}/files", otari_put },
	{ "tools_register", "POST", "/sessions/{id}/programmatic-tools/register",
	  otari_tools_register },
};

const RouteTable otari_routes = { "otari", routes, ARRAY_SIZE(routes) };

/* Load balancers probe with GET or HEAD; nginx drops the body of a HEAD's answer. */
static const Route open_routes[] = {
	{ "health", "GET", "/health", otari_health },
	{ "health", "HEAD", "/health", otari_health },
};

const RouteTable otari_open_routes = { "otari", open_routes, ARRAY_SIZE(open_routes) };
