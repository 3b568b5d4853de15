/* SPDX-License-Identifier: MIT */
/* The daemon's entry points: its one context (manager.c), owning every session and its
 * sandbox, and the server callbacks that hand it requests (dispatch.c). */
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

/* A child of the daemon exited (SIGCHLD names it): handled if it is an interpreter the
 * daemon watches, before the reaper that collects every other child. */
void manager_child_exited(Manager *m, pid_t pid);

/* dispatch.c: the server callbacks (data is the Manager) */
void manager_handle_request(void *m, Conn *c, struct json_object *req);
void manager_conn_closed(void *m, Conn *c);
