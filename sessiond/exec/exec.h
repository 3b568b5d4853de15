/* SPDX-License-Identifier: MIT */
/*
 * The exec room: a session's interpreters and the run in flight. It offers the exec op,
 * what the rooms above end a session's run and interpreters with, init's socket (watched
 * from a sandbox's build or re-adoption on), and the handlers of the interpreters' own
 * events (for SessionEvents). Within the room: run.h.
 */
#pragma once

#include <json-c/json.h>
#include <stdint.h>

#include "init/init_proto.h"
#include "session/session.h"

/* exec.c: {"op": "exec", "tool", "code", "timeout_ms", "mode", "cwd"} on session s */
void op_exec(Manager *m, Conn *c, const Request *rq);
/* {"op": "cancel", "call_tag"} on session s: its run in flight, if it has that tag, is
 * interrupted as at its deadline; {"cancelled": bool}. */
void op_cancel(Manager *m, Conn *c, const Request *rq);

/* tools.c: {"op": "tools_register", "callback_url", "token", "tools", "timeout_seconds"} */
void op_tools_register(Manager *m, Conn *c, const Request *rq);
/* A session's registration, freed (NULL accepted). */
void tools_free(ToolSet *t);
/* A re-adopted session's registration from the store's record, checked again. */
void tools_restore(Session *s, const char *record);

/* run.c */
/* The session is going: its run, if any, is answered (state lost) and freed. */
void run_abort(Session *s, const char *why);
/* The same without an answer: the daemon stops, and the worker sees its connection close. */
void run_abort_unanswered(Session *s, const char *why);
/* c has gone: runs keep going, their replies go nowhere. */
void run_conn_closed(Manager *m, Conn *c);
/* Start the interpreter of kind in s unless one runs (a warm pool's Python). */
int interp_start(Session *s, enum interp_kind kind);

/* interp.c */
const char *interp_kind_name(enum interp_kind k);
/* Close ip's files and free its buffers; one on the host gets SIGTERM. */
void interp_destroy(Interp *ip);
/* Bytes the daemon holds for an interpreter: its reply, request and output buffers. */
size_t interp_buffered_bytes(const Interp *ip);
/* Send init a message (and its blob) on s's control socket, numbered. */
int init_send(Session *s, struct init_msg *msg, const char *blob, size_t bloblen);

/* template.c: start the Python template when configured (a failure is logged: Python
 * then starts without it); free it and stop its process. */
int template_start(Manager *m);
void template_free(Manager *m);
/* The state of kind's template for stats: "off", "starting", "ready" or "down". */
const char *template_state_name(const Manager *m, enum interp_kind kind);
/* How many interpreters the templates forked, in two steps and in one (for stats). */
void template_forks(const Manager *m, uint64_t *two_steps, uint64_t *direct);

/* A child of the daemon exited (SIGCHLD): an interpreter whose exit is watched through
 * its pidfd is handled, and reaped, now, so that no other reaper takes its status. */
void interp_child_exited(Manager *m, pid_t host_pid);

/* events.c */
/* The loop's handler of init's control socket (data is the Session). */
void init_on_event(Loop *l, int fd, uint32_t events, void *data);
/* SessionEvents.interp_replied and .interp_exited. */
void interp_replied(Interp *ip, char *line);
void interp_exited(Session *s, enum interp_kind kind, pid_t pid, int status);
