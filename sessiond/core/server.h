/* SPDX-License-Identifier: MIT */
/* The daemon's unix socket: accepts worker connections, decodes requests, sends replies. */
#pragma once

#include <stddef.h>
#include <sys/types.h>

#include "loop.h"

struct json_object;
typedef struct Server Server;
typedef struct Conn Conn;

/* Handles one decoded request; must end with exactly one conn_reply(), now or later. */
typedef void (*server_request_cb)(void *data, Conn *c, struct json_object *req);
/* Told when a connection goes away, so pending work can drop its reply. */
typedef void (*server_closed_cb)(void *data, Conn *c);

/* Peers allowed: uid 0, worker_uid, or primary gid == group. (uid_t)-1 / (gid_t)-1: unused. */
int server_new(Loop *l, const char *path, uid_t worker_uid, gid_t group, server_request_cb on_req,
	       server_closed_cb on_closed, void *data, Server **ret);
Server *server_free(Server *s);

/* Send a reply. Takes reply (put) and the fds (closed once sent or on failure). */
void conn_reply(Conn *c, struct json_object *reply, int *fds, size_t nfds);
/* Send a reply written as text: len bytes of one JSON object (copied); NULL for one that
 * could not be built (out of memory), which is answered with an error. */
void conn_reply_text(Conn *c, const char *txt, size_t len);

/* Send a streamed-output frame (PROTO_DATA: the stream byte, then data) ahead of the
 * reply; c stays busy. Bytes for the same stream as the last frame still unsent join it;
 * with more than backlog bytes unsent, nothing is queued (-ENOBUFS). -errno when it could
 * not be queued; the connection may have closed (the closed callback has run). */
int conn_send_data(Conn *c, uint8_t stream, const void *data, size_t len, size_t backlog);

/* The uid of the process at the other end (SO_PEERCRED at accept). */
uid_t conn_peer_uid(const Conn *c);

/* Connections open to the server c came in on, c included. */
size_t conn_server_connections(const Conn *c);

/* A pointer the request handler keeps per connection (e.g. a pending upload). */
void *conn_get_data(Conn *c);
void conn_set_data(Conn *c, void *data);
