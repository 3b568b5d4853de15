/* SPDX-License-Identifier: MIT */
/* POST /sessions/{id}/programmatic-tools/register: the tools code in the session may call.
 * sessiond checks the registration (allowed URL, names, token) and keeps it; the worker
 * passes the fields on and shapes the answer. */
#include "otari.h"

#include "cleanup.h"
#include "http/http.h"
#include "json.h"

void otari_tools_register(ReqCtx *rq)
{
	static const char *const fields[] = { "callback_url", "token", "tools", "timeout_seconds" };
	_cleanup_json_ json_object *body = NULL, *sdreq = NULL, *out = NULL;
	SessiondReply rep;

	if (otari_read_json(rq, false, &body) < 0)
		return;
	sdreq = otari_sd_request(rq, "tools_register");
	for (size_t i = 0; sdreq && i < ARRAY_SIZE(fields); i++)
		json_copy_field(sdreq, body, fields[i]);
	if (!sdreq || json_incomplete(sdreq)) {
		http_error(&rq->http, 500, NULL, "out of memory");
		return;
	}
	/* Registering twice replaces the first: the same request may be sent again. */
	if (otari_sd_call(rq, sdreq, SESSIOND_RETRY_ANY, &rep) < 0)
		return;
	out = json_object_new_object();
	if (out) {
		json_copy_field(out, rep.obj, "stub_path");
		json_copy_field(out, rep.obj, "tool_count");
	}
	sessiond_reply_clear(&rep);
	if (!out || json_incomplete(out)) {
		http_error(&rq->http, 500, NULL, "out of memory");
		return;
	}
	http_send_json(&rq->http, 200, out, NULL);
}
