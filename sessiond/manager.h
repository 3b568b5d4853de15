/* SPDX-License-Identifier: MIT */
/* The session manager: the daemon's one context, owning every session and its sandbox. */
#pragma once

#include "config.h"
#include "core/loop.h"
#include "core/server.h"

typedef struct Manager Manager;

/* Take the state dir's lock (waiting up to lock_wait_ms for a daemon that is going away),
 * open the store, detect the sandbox environment, clean what a crash left. -EBUSY: another
 * daemon holds the state dir. */
int manager_new(const PaddockConfig *cfg, Loop *loop, int lock_wait_ms, Manager **ret);
/* Destroy every session (waiting for their sandboxes to go) and free. */
Manager *manager_free(Manager *m);

/* server callbacks */
void manager_handle_request(void *m, Conn *c, struct json_object *req);
void manager_conn_closed(void *m, Conn *c);
