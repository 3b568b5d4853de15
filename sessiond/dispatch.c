/* SPDX-License-Identifier: MIT */
/* Requests from the workers, by op: the op table, and what a closed connection ends. */
#include <string.h>

#include "admin/admin.h"
#include "cleanup.h"
#include "exec/exec.h"
#include "lifecycle/lifecycle.h"
#include "manager.h"
#include "workspace/workspace.h"

static void op_session_info(Manager *m, Conn *c, const Request *rq)
{
	(void)m;
	conn_reply(c, session_handle(rq->s), NULL, 0);
}

/* Every op of the protocol (docs/internal-protocol.md); one that names a session finds it
 * first, among the caller's tenant's, or is answered not_found. */
static const struct Op {
	const char *name;
	bool needs_session;
	void (*handle)(Manager *m, Conn *c, const Request *rq);
} ops[] = {
	{ "create", false, op_create },
	{ "destroy", false, op_destroy },
	{ "session_info", true, op_session_info },
	{ "exec", true, op_exec },
	{ "cancel", true, op_cancel },
	{ "edit", true, op_edit },
	{ "tools_register", true, op_tools_register },
	{ "list", true, op_list },
	{ "get", true, op_get },
	{ "put", true, op_put },
	{ "put_commit", false, op_put_commit },
	{ "put_abort", false, op_put_abort },
	{ "sessions", false, op_sessions },
	{ "health", false, op_health },
	{ "stats", false, op_stats },
	{ "metrics", false, op_metrics },
	{ "kill", false, op_admin },
	{ "drain", false, op_admin },
	{ "admin_sessions", false, op_admin },
};

static const struct Op *op_find(const char *name)
{
	for (size_t i = 0; name && i < ARRAY_SIZE(ops); i++)
		if (strcmp(ops[i].name, name) == 0)
			return &ops[i];
	return NULL;
}

void manager_handle_request(void *data, Conn *c, json_object *body)
{
	Manager *m = data;
	Request r = { .op = req_string(body, "op"),
		      .tenant = req_string(body, "tenant"),
		      .body = body };
	const struct Op *op = op_find(r.op);

	if (!r.op)
		conn_reply(c, reply_error("invalid", "op is missing"), NULL, 0);
	else if (!op)
		conn_reply(c, reply_error("bad_request", "unknown op"), NULL, 0);
	else if (op->needs_session &&
		 !(r.s = session_find(m, req_string(body, "session_id"), r.tenant)))
		conn_reply(c, reply_error("not_found", "unknown session"), NULL, 0);
	else
		op->handle(m, c, &r);
	json_object_put(body);
}

void manager_conn_closed(void *data, Conn *c)
{
	Manager *m = data;

	run_conn_closed(m, c);
	upload_drop(m, c);
	create_conn_closed(m, c);
	scans_conn_closed(m, c);
}
