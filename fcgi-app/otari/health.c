/* SPDX-License-Identifier: MIT */
/*
 * GET /health: for a load balancer, every second, without a token. It asks sessiond the one
 * question that costs it nothing (its "health" op) and answers 503 with the reason (the
 * error shape's detail) when the daemon cannot serve, so that the balancer sends no one to
 * this node meanwhile.
 */
#include <string.h>

#include "json.h"
#include "log.h"
#include "otari.h"

static void unhealthy(ReqCtx *rq, const char *reason)
{
	_cleanup_json_ json_object *o = json_object_new_object();

	json_set(o, "status", json_object_new_string("unavailable"));
	json_set(o, "detail", json_object_new_string(reason));
	if (json_incomplete(o))
		http_error(&rq->http, 503, NULL, "%s", reason);
	else
		http_send_json(&rq->http, 503, o, NULL);
}

void otari_health(ReqCtx *rq)
{
	_cleanup_json_ json_object *sdreq =
		sessiond_request_new("health", rq->http.request_id, NULL, NULL);
	_cleanup_json_ json_object *o = NULL;
	SessiondReply rep;
	int64_t n = 0, max = 0;
	int r;

	if (!sdreq) {
		unhealthy(rq, "the worker is out of memory");
		return;
	}
	r = sessiond_call(&rq->w->sd, sdreq, SESSIOND_RETRY_ANY, &rep);
	if (r < 0 || !rep.ok) {
		unhealthy(rq, r < 0 ? "the session daemon is unreachable" :
				      "the session daemon answered with an error");
		sessiond_reply_clear(&rep);
		return;
	}
	json_in_int(rep.obj, "sessions", &n);
	json_in_int(rep.obj, "max_sessions", &max);
	o = json_object_new_object();
	json_set(o, "status", json_object_new_string("ok"));
	json_set(o, "session_count", json_object_new_int64(n));
	json_set(o, "max_sessions", json_object_new_int64(max));
	/* A draining node serves its sessions and takes no new ones. */
	json_copy_field(o, rep.obj, "draining");
	sessiond_reply_clear(&rep);
	if (json_incomplete(o))
		unhealthy(rq, "the worker is out of memory");
	else
		http_send_json(&rq->http, 200, o, NULL);
}
