/* SPDX-License-Identifier: MIT */
/* The worker thread's connection to paddock-sessiond: request -> reply over common/proto. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <json-c/json.h>

/* One per thread; the connection is kept open between requests. */
typedef struct SdClient {
	char *sock_path;	 /* <runtime_dir>/sessiond.sock (owned) */
	int fd;			 /* the connection, -1 when closed */
	int64_t reply_timeout_s; /* how long a reply may take before we give up */
} SdClient;

/* A reply from sessiond. */
typedef struct SdReply {
	json_object *obj;    /* the whole reply (owned) */
	bool ok;	     /* "ok": true */
	const char *kind;    /* "error" on failure, borrowed from obj */
	const char *detail;  /* "detail" on failure, borrowed from obj */
	int64_t retry_after; /* "retry_after" with capacity, else 0 */
	int fd;		     /* a descriptor that came with the reply (owned), or -1 */
} SdReply;

int sd_client_init(SdClient *c, const char *runtime_dir, int64_t reply_timeout_s);
void sd_client_done(SdClient *c);

enum sd_retry {
	SD_RETRY_NEVER,	  /* the request must not run twice, and holds connection state */
	SD_RETRY_ON_SEND, /* reconnect once when the send fails: sessiond never saw it */
	SD_RETRY_ANY,	  /* idempotent: also when the reply never came */
};

/*
 * Send req (a JSON object; not consumed) and read the reply into rep. Returns 0
 * when a reply arrived (ok or not: see rep->ok), or -errno when sessiond could
 * not be reached or broke the connection (the caller answers 503).
 */
int sd_call(SdClient *c, json_object *req, enum sd_retry retry, SdReply *rep);
void sd_reply_clear(SdReply *rep);

/* The HTTP status for a sessiond error kind (docs/internal-protocol.md); 500 if unknown. */
int sd_kind_status(const char *kind);
