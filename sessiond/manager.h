/* SPDX-License-Identifier: MIT */
/* The session manager: the daemon's one context, owning every session and its sandbox. */
#pragma once

#include "config.h"
#include "loop.h"
#include "server.h"

typedef struct Manager Manager;

/* Open the store, detect the sandbox environment, clean what a crash left. */
int manager_new(const PaddockConfig *cfg, Loop *loop, Manager **ret);
/* Destroy every session (waiting for their sandboxes to go) and free. */
Manager *manager_free(Manager *m);

/* server callbacks */
void manager_handle_request(void *m, Conn *c, struct json_object *req);
void manager_conn_closed(void *m, Conn *c);
