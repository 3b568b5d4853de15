/* SPDX-License-Identifier: MIT */
/* The exec op: a call's code, validated, for the interpreter its tool names. */
#include <string.h>

#include "cleanup.h"
#include "proto.h"
#include "run.h"

/* The interpreter a tool names; false for a tool sessiond does not know. */
static bool tool_kind(const char *tool, enum interp_kind *kind)
{
	static const struct {
		const char *name;
		enum interp_kind kind;
	} tools[] = { { "python", INTERP_PYTHON },
		      { "bash", INTERP_BASH },
		      { "node", INTERP_NODE } };

	for (size_t i = 0; tool && i < ARRAY_SIZE(tools); i++)
		if (strcmp(tool, tools[i].name) == 0) {
			*kind = tools[i].kind;
			return true;
		}
	return false;
}

/* req as an ExecRequest for session s, or the error it is answered with. */
static json_object *exec_request(const Manager *m, const Session *s, json_object *req,
				 ExecRequest *er)
{
	const char *mode = req_string(req, "mode");
	int64_t timeout_ms = m->cfg->exec_timeout_default * 1000;

	if (!tool_kind(req_string(req, "tool"), &er->kind))
		return reply_error("bad_request", "unknown tool");
	er->code = req_string(req, "code");
	if (!er->code)
		return reply_error("invalid", "code must be a string");
	if ((int64_t)strlen(er->code) > m->cfg->code_max_bytes)
		return reply_error("invalid", "code is longer than %lld bytes",
				   (long long)m->cfg->code_max_bytes);
	if (req_int(req, "timeout_ms", &timeout_ms) &&
	    (timeout_ms < 1 || timeout_ms > m->cfg->exec_timeout_max * 1000))
		return reply_error("invalid", "timeout must be between 1 and %lld seconds",
				   (long long)m->cfg->exec_timeout_max);
	er->timeout_ms = (uint64_t)timeout_ms;
	er->cwd = req_string(req, "cwd");
	er->cell = mode && strcmp(mode, "cell") == 0;
	er->stream = req_bool(req, "stream");
	er->tag = req_string(req, "call_tag");
	er->finish_on_hangup = req_bool(req, "finish_on_hangup");
	if (er->tag && strlen(er->tag) > PROTO_CALL_TAG_MAX)
		return reply_error("invalid", "call_tag is longer than %d bytes",
				   PROTO_CALL_TAG_MAX);
	/* A kernel-tier session serves Python through the IPython harness, an endpoint one
	 * through the bridge to the operator's Jupyter Server. */
	if (er->kind == INTERP_PYTHON && s->endpoint)
		er->kind = INTERP_ENDPOINT;
	else if (er->kind == INTERP_PYTHON && s->kernel)
		er->kind = INTERP_KERNEL;
	return NULL;
}

void op_exec(Manager *m, Conn *c, const Request *rq)
{
	ExecRequest er;
	json_object *e = exec_request(m, rq->s, rq->body, &er);

	if (!e && rq->s->run)
		e = reply_error("busy", "the session is running another call");
	if (e)
		conn_reply(c, e, NULL, 0);
	else
		run_start(rq->s, c, &er);
}

void op_cancel(Manager *m, Conn *c, const Request *rq)
{
	const char *tag = req_string(rq->body, "call_tag");
	Run *run = rq->s->run;
	bool found = tag && run && run->tag && strcmp(run->tag, tag) == 0;
	json_object *o = reply_ok();

	(void)m;
	/* A call that is already over, or another the session runs since, is left alone. */
	if (found)
		run_cancel(run, "its client cancelled it");
	json_set(o, "cancelled", json_object_new_boolean(found));
	conn_reply(c, o, NULL, 0);
}
