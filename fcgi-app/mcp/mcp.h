/* SPDX-License-Identifier: MIT */
/*
 * The MCP endpoint (/mcp): the Model Context Protocol over its Streamable HTTP transport,
 * JSON-RPC 2.0 messages, and a session's sandbox offered as MCP tools. One MCP session is
 * one paddock session; its id is the Mcp-Session-Id.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <json-c/json.h>

#include "app.h"
#include "http/client.h"
#include "http/route.h"

/* The endpoint's route table (endpoint.c): POST and DELETE /mcp. */
extern const RouteTable mcp_routes;

void mcp_post(ReqCtx *rq);
void mcp_delete(ReqCtx *rq);

/* ---- within the room ---- */

/* One JSON-RPC request being served. */
typedef struct McpCall {
	ReqCtx *rq;
	json_object *id;		       /* the request's id (borrowed from the message) */
	const char *session_id;		       /* the Mcp-Session-Id: the paddock session */
	char session_id_buf[ROUTE_ID_MAX + 1]; /* a session made by this request (initialize) */
	json_object *progress_token;	       /* params._meta.progressToken (borrowed), or NULL */
	bool sse_ok;			       /* the client takes an event stream as the answer */
} McpCall;

/* JSON-RPC error codes: the specification's, and paddock's own in the server range. */
enum {
	RPC_PARSE_ERROR = -32700,
	RPC_INVALID_REQUEST = -32600,
	RPC_METHOD_NOT_FOUND = -32601,
	RPC_INVALID_PARAMS = -32602,
	RPC_INTERNAL_ERROR = -32603,
	RPC_NO_CAPACITY = -32010, /* no room for another session now: data.retry_after */
	RPC_UNAVAILABLE = -32011, /* the session daemon cannot serve now: data.retry_after */
};

/* ---- tools (tools.c): tools/list and tools/call ---- */

/* The result of tools/list (a new object). */
json_object *mcp_tools_list(void);
/* Serve tools/call with params; answers the client itself. */
void mcp_tools_call(McpCall *c, json_object *params);
/* notifications/cancelled: interrupt the call with that request id in the call's session,
 * if it still runs. 0, or -1 after answering a failure (the session has ended). */
int mcp_cancel(McpCall *c, json_object *request_id);

/* ---- file tools (files.c) ---- */

/* list_files, read_file and write_file with their arguments (an object); the tool result
 * (a new object), or NULL after answering a server failure. */
json_object *mcp_list_files(McpCall *c, json_object *args);
json_object *mcp_read_file(McpCall *c, json_object *args);
json_object *mcp_write_file(McpCall *c, json_object *args);

/* ---- results and content (content.c) ---- */

/* {"content": content, "isError": is_error}; content is taken (NULL: []). */
json_object *mcp_tool_result(json_object *content, bool is_error);
/* A result with one text block; mcp_tool_error: a failure the model can act on. */
json_object *mcp_tool_text(bool is_error, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
#define mcp_tool_error(...) mcp_tool_text(true, __VA_ARGS__)
/* {"type": "text", "text"}; {"type": "image", "data", "mimeType"}. */
json_object *mcp_text(const char *text, size_t len);
json_object *mcp_image(const char *base64, const char *mime);
/* The result of an exec or edit reply from sessiond: output, rich outputs, the error. */
json_object *mcp_exec_result(json_object *rep);
/* A refusal the model can act on (busy, invalid arguments, a path outside the workspace or
 * missing in it, something in the way, too large) as a failing result; NULL for the others
 * (the session has ended, the server failed). */
json_object *mcp_sd_refusal(const SessiondReply *rep);

/* ---- JSON-RPC over HTTP (rpc.c) ---- */

/* What a message is. */
enum rpc_kind {
	RPC_REQUEST,	  /* method and id */
	RPC_NOTIFICATION, /* method, no id */
	RPC_RESPONSE,	  /* result or error, and id: the client answering */
	RPC_INVALID,	  /* none of these; why says so */
};

typedef struct RpcMessage {
	enum rpc_kind kind;
	const char *method;  /* requests and notifications (borrowed) */
	json_object *id;     /* requests and responses (borrowed) */
	json_object *params; /* an object, or NULL when absent (borrowed) */
	const char *why;     /* RPC_INVALID: a sentence */
} RpcMessage;

/* An id (or a progress token): a string, or an integer within +-2^53 (I-JSON: exact in
 * every peer; the parser saturates larger ones, and two such ids would name one call).
 * MCP forbids null, and a fraction names nothing. */
bool rpc_id_valid(json_object *id);
/* Classify msg (one parsed JSON value). */
void rpc_classify(json_object *msg, RpcMessage *m);
/* The request id rendered as JSON text (a string keeps its quotes): the name of a call. */
const char *rpc_id_text(json_object *id);

/* {"jsonrpc", "id", "result"}; result is taken. */
json_object *rpc_result(json_object *id, json_object *result);
/* {"jsonrpc", "id", "error": {"code", "message", "data"}}; id NULL: null; data is taken. */
json_object *rpc_error(json_object *id, int code, json_object *data, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Answer the call with a response (taken): the last event of a stream that has begun, or a
 * JSON body with extra header lines (NULL: none). */
void mcp_answer(McpCall *c, json_object *response, const char *extra);
/* A result (taken) for the call. */
void mcp_answer_result(McpCall *c, json_object *result);
/* An HTTP error whose body is a JSON-RPC error with id (NULL: null). */
void mcp_http_error(ReqCtx *rq, int status, json_object *id, int code, const char *extra,
		    const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* A sessiond failure answered the MCP way: an unknown session is 404 (the client starts a
 * new one); capacity and an unreachable daemon are JSON-RPC errors with retry_after. */
void mcp_sd_fail(McpCall *c, int r, const SessiondReply *rep);
/* Answer the call as one on a session that has ended (404: the client starts anew). */
void mcp_session_ended(McpCall *c);
/* A sessiond request for op on the call's session (owned), NULL when out of memory. */
json_object *mcp_sd_request(McpCall *c, const char *op);
