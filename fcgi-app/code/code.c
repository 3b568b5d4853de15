/* SPDX-License-Identifier: MIT */
/* The code-interpreter plane's routes: which handler serves each /v1 and /v2 path. */
#include "code.h"

#include "cleanup.h"

static const Route routes[] = {
	{ "code-exec-v2", "POST", "/v2/code/execute", code_execute_v2 },
	{ "code-exec-v1", "POST", "/v1/code/execute", code_execute_v1 },
	{ "code-info", "GET", "/v2/code/info", code_info },
	{ "code-info", "GET", "/v1/code/info", code_info },
	{ "capabilities", "GET", "/v1/capabilities", code_capabilities },
	{ "code-session-create", "POST", "/v2/code/sessions", code_session_create },
	{ "code-session-list", "GET", "/v2/code/sessions", code_session_list },
	{ "code-session-get", "GET", "/v2/code/sessions/{id}", code_session_get },
	{ "code-session-delete", "DELETE", "/v2/code/sessions/{id}", code_session_delete },
	{ "jupyter-exec", "POST", "/v1/jupyter/execute", jupyter_execute },
	{ "jupyter-sessions", "GET", "/v1/jupyter/sessions", jupyter_session_list },
	{ "jupyter-sessions-delete", "DELETE", "/v1/jupyter/sessions", jupyter_session_delete_all },
	{ "jupyter-session-create", "POST", "/v1/jupyter/sessions/create", jupyter_session_create },
	{ "jupyter-session-delete", "DELETE", "/v1/jupyter/sessions/{id}", jupyter_session_delete },
	{ "nodejs-exec", "POST", "/v1/nodejs/execute", nodejs_execute },
};

const RouteTable code_routes = { "code", routes, ARRAY_SIZE(routes) };
