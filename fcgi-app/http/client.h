/* SPDX-License-Identifier: MIT */
/* The worker thread's connection to paddock-sessiond: request -> reply over common/proto. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <json-c/json.h>

/* One per thread; the connection is kept open between requests. */
typedef struct SessiondClient {
	char *sock_path;	 /* <runtime_dir>/sessiond.sock (owned) */
	int fd;			 /* the connection, -1 when closed */
	int64_t reply_timeout_s; /* how long a reply may take before we give up */
} SessiondClient;

/* A reply from sessiond. */
typedef struct SessiondReply {
	json_object *obj;    /* the whole reply (owned) */
	bool ok;	     /* "ok": true */
	const char *kind;    /* "error" on failure, borrowed from obj */
	const char *detail;  /* "detail" on failure, borrowed from obj */
	int64_t retry_after; /* "retry_after" with capacity, else 0 */
	int fd;		     /* a descriptor that came with the reply (owned), or -1 */
} SessiondReply;

int sessiond_client_init(SessiondClient *c, const char *runtime_dir, int64_t reply_timeout_s);
void sessiond_client_done(SessiondClient *c);

enum sessiond_retry {
	SESSIOND_RETRY_NEVER,	/* the request must not run twice, and holds connection state */
	SESSIOND_RETRY_ON_SEND, /* reconnect once when the send fails: sessiond never saw it */
	SESSIOND_RETRY_ANY,	/* idempotent: also when the reply never came */
};

/*
 * Send req (a JSON object; not consumed) and read the reply into rep. Returns 0
 * when a reply arrived (ok or not: see rep->ok), or -errno when sessiond could
 * not be reached or broke the connection (the caller answers 503).
 */
int sessiond_call(SessiondClient *c, json_object *req, enum sessiond_retry retry,
		  SessiondReply *rep);
void sessiond_reply_clear(SessiondReply *rep);
/* {"op", "request_id", "tenant", "session_id"}: a request's common fields (tenant and
 * session_id left out when NULL), to add the op's own to; NULL when out of memory. */
json_object *sessiond_request_new(const char *op, const char *request_id, const char *tenant,
				  const char *session_id);

/* The HTTP status for a sessiond error kind (docs/internal-protocol.md); 500 if unknown. */
int sessiond_kind_status(const char *kind);
