/* SPDX-License-Identifier: MIT */
/* Messages between paddock-sessiond and a sandbox's init (SOCK_SEQPACKET, one per datagram). */
#pragma once

#include <stdint.h>

/*
 * sessiond -> init requests. Each is a struct init_msg, followed for INIT_SPAWN
 * by a blob: argv strings, each NUL-terminated, an empty string, then env
 * strings likewise, then an empty string.
 */
enum init_op {
	INIT_SPAWN = 1,	 /* start an interpreter; reply INIT_SPAWNED + 4 fds, or INIT_ERROR */
	INIT_KILL = 2,	 /* kill every process but pid 1 and keep[]; reply INIT_KILLED when gone */
	INIT_PING = 3,	 /* reply INIT_PONG */
	INIT_RESEND = 4, /* re-send INIT_SPAWNED (with fds) for each live interpreter */
	INIT_ADOPT = 5,	 /* keep, for INIT_RESEND, an interpreter started outside init: pid,
			  * tag; SCM_RIGHTS: copies of sessiond's ctl, stdout and stderr ends.
			  * No reply; its exit is not reported (it is not init's child). */
};

/* init -> sessiond replies and events. */
enum init_event {
	INIT_SPAWNED = 101, /* pid = ns pid; SCM_RIGHTS: pidfd, ctl, stdout, stderr;
			     * status INIT_SPAWNED_ADOPTED for one INIT_ADOPT gave: its exit
			     * is the receiver's to watch (through the pidfd) */
	INIT_KILLED = 102,
	INIT_PONG = 103,
	INIT_EXITED = 104, /* an interpreter exited: pid = ns pid, status = wait status */
	INIT_ERROR = 105,  /* status = errno, step = what failed */
};

/*
 * The fds paddock-init finds at exec: its end of the control socket, and sessiond's end,
 * which it keeps so that a restarted sessiond can take the socket back (INIT_RESEND).
 */
#define INIT_CTL_FD 3
#define INIT_CTL_PARENT_FD 4

#define INIT_KEEP_MAX 4
#define INIT_MSG_MAX 65536 /* a request datagram, header and blob */

#define INIT_TAG_NONE UINT32_MAX /* an ERROR that no spawn's label names */
#define INIT_SPAWNED_ADOPTED 1	 /* INIT_SPAWNED.status of an adopted interpreter */

/* Fixed header of every message. */
struct init_msg {
	uint32_t op;		     /* enum init_op or enum init_event */
	uint32_t seq;		     /* echoed in the reply to a request */
	int32_t pid;		     /* ns pid (SPAWNED, EXITED) */
	int32_t status;		     /* wait status (EXITED) or errno (ERROR) */
	uint32_t step;		     /* which step failed (ERROR) */
	uint32_t tag;		     /* SPAWN: caller's label, echoed on SPAWNED, EXITED and the
				      * SPAWN's ERROR; INIT_TAG_NONE on other ERRORs */
	int32_t keep[INIT_KEEP_MAX]; /* KILL: ns pids to spare, 0 where unused */
};
