/* SPDX-License-Identifier: MIT */
/* The worker thread's connection to paddock-sessiond: request -> reply over common/proto. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "json.h"
#include "proto.h"

#include "http/http.h"

/* One per thread; the connection is kept open between requests. */
typedef struct SessiondClient {
	char *sock_path;	 /* <runtime_dir>/sessiond.sock (owned) */
	int fd;			 /* the connection, -1 when closed */
	int64_t reply_timeout_s; /* how long a reply may take before we give up */
	ProtoReader rd;		 /* what fd brought beyond the frames read so far */
} SessiondClient;

/* A reply from sessiond. */
typedef struct SessiondReply {
	json_object *obj;    /* the whole reply (owned); NULL when kept as text */
	char *text;	     /* a successful reply as it came (owned), from sessiond_call_text() */
	size_t len;	     /* of text */
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

/* sessiond_call, for a caller that relays the reply's values as they are: a reply that is
 * ok comes as rep->text, not parsed (the caller checks it, as json_scan_object() does);
 * any other as from sessiond_call. */
int sessiond_call_text(SessiondClient *c, json_object *req, enum sessiond_retry retry,
		       SessiondReply *rep);

/* What a streamed call (an exec with "stream") does with the output frames ahead of its
 * reply. A callback's < 0 abandons the call. */
typedef struct SessiondStream {
	/* A PROTO_DATA frame: its stream byte (enum proto_stream) and bytes. */
	int (*on_data)(void *ctx, uint8_t stream, const char *data, size_t len);
	/* Nothing came for idle_ms. */
	int (*on_idle)(void *ctx);
	void *ctx;
	int idle_ms;
	int hangup_fd; /* the client's connection: the call is abandoned when it hangs up */
} SessiondStream;

/*
 * sessiond_call (never sent twice) for a streamed call, the request's len bytes req.
 * -ECONNABORTED when it was abandoned: the connection to sessiond is closed, which
 * interrupts the run there.
 */
int sessiond_call_streamed(SessiondClient *c, const char *req, size_t len, const SessiondStream *st,
			   SessiondReply *rep);

/* ---- a streamed exec relayed to its client as Server-Sent Events (relay.c) ---- */

/* One relay: the plane's own events for what the run writes. */
typedef struct OutputRelay {
	HttpReq *http;
	/* Text one stream wrote: valid UTF-8 of whole characters. */
	int (*text)(struct OutputRelay *r, bool is_stderr, const char *text, size_t len);
	/* A rich output as the harness published it (a JSON object; NULL: none relayed). */
	int (*display)(struct OutputRelay *r, json_object *event);
	void *ctx;	  /* the plane's */
	size_t max_chars; /* characters of text relayed in all; the reply has the rest */
	int heartbeat_ms; /* a comment line after this long without an event */
	size_t chars;	  /* relayed so far */
	char carry[2][4]; /* a character each stream has begun but not finished */
	size_t carry_len[2];
} OutputRelay;

/*
 * Run req (an exec, given "stream": true here) with its output relayed through r: the
 * stream begins when sessiond says the run started (or on an ok reply), so errors before
 * that are answered as usual. Returns as sessiond_call; after an ok reply the stream has
 * begun and the caller's answer (http_send_json) is its last event. -ECONNABORTED: the
 * client went away, the run was cancelled, and there is nobody to answer.
 */
int sessiond_call_relayed(SessiondClient *c, json_object *req, OutputRelay *r, SessiondReply *rep);
/* The same for a request begun with sessiond_request_begin(), which it closes. */
int sessiond_call_relayed_open(SessiondClient *c, JsonText *req, OutputRelay *r,
			       SessiondReply *rep);
/*
 * A request written as text, for the calls on the hot path, which the worker need not
 * build as objects to render: {"op", "request_id", "tenant", "session_id" (tenant and
 * session_id left out when NULL), left open for the op's own members (json_text_add_key);
 * the call closes it. A failed allocation leaves req->failed, which the call answers.
 */
void sessiond_request_begin(JsonText *req, const char *op, const char *request_id,
			    const char *tenant, const char *session_id);
/* sessiond_call_text for a request so begun. */
int sessiond_call_text_open(SessiondClient *c, JsonText *req, enum sessiond_retry retry,
			    SessiondReply *rep);
/* The same fields as a json-c object, to add the op's own to; NULL when out of memory. */
json_object *sessiond_request_new(const char *op, const char *request_id, const char *tenant,
				  const char *session_id);

/* The HTTP status for a sessiond error kind (docs/internal-protocol.md); 500 if unknown. */
int sessiond_kind_status(const char *kind);
/* Whether a refusal says the session has ended (or never was), not that a file in it is
 * missing. */
bool sessiond_session_gone(const SessiondReply *rep);
