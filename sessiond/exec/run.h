/* SPDX-License-Identifier: MIT */
/* Within the exec room: the run, and what its files call of each other. */
#pragma once

#include <signal.h>
#include <stdarg.h>

#include "exec.h"

#define RC_TIMEOUT 124 /* as timeout(1) reports a program it stopped */
#define RC_KILLED 137  /* 128 + SIGKILL, as a shell reports a killed program */

/* Phases of an execution. */
enum run_phase {
	RUN_STARTING,	 /* waiting for the interpreter to start */
	RUN_RUNNING,	 /* request sent, waiting for its reply */
	RUN_INTERRUPTED, /* deadline passed, SIGINT sent, grace timer armed */
	RUN_REAPING,	 /* finished; killing what the run left behind */
	RUN_KILLING,	 /* grace passed; killing every process of the session */
	RUN_SCANNING,	 /* over; its reply waits for the walk that finds the files it made */
};

/* The one execution in flight in a session. */
struct Run {
	Session *s;
	Conn *conn; /* NULL once the worker went away */
	enum interp_kind kind;
	enum run_phase phase;
	char *code;		/* what to run */
	char *cwd;		/* cell mode: where the interpreter starts, or NULL */
	bool cell;		/* notebook mode: result and error objects (code plane) */
	bool stream;		/* the worker takes the output as it comes (PROTO_DATA) */
	bool finish_on_hangup;	/* streamed, yet not cancelled when its worker goes */
	char *tag;		/* the caller's name for the call (cancel finds it by), or NULL */
	bool cancelled;		/* cancelled (its worker went away, or asked): interrupted */
	const char *cancel_why; /* who cancelled it, for the note: "its client went away" */
	LoopSource *cancel;	/* that interruption, due on the next loop turn */
	size_t streamed_events; /* bytes of rich outputs streamed, up to reply_max_bytes */
	struct ToolCall *tool_call; /* the programmatic tool call in flight, or NULL */
	unsigned tool_calls;	    /* calls made so far, up to tool_calls_per_run */
	uint64_t deadline_ms;	    /* monotonic: when the code's time is up (once sent) */
	uint64_t timeout_ms;
	uint64_t start_ms;	  /* monotonic, for execution_time_ms */
	double start_real;	  /* POSIX seconds, for the log */
	struct timespec start_ts; /* realtime, for produced files */
	SandboxUsage usage0;	  /* cgroup counters at the start */
	LoopSource *timer;	  /* deadline or grace */
	bool timed_out;		  /* deadline passed */
	bool interrupted_ok;	  /* the interpreter answered after SIGINT */
	bool lost_state;	  /* interpreter killed; a new one will start */
	unsigned clear_rounds;	  /* times leftovers were stopped so that it could start */
	bool cleared;		  /* processes of earlier calls were stopped for it */
	int return_code;
	json_object *reply; /* the interpreter's reply object (python), owned */
	char *note;	    /* text appended to stderr, owned */
};

/* outbuf.c */
/* Keep what fits under cap of data; how many bytes were kept. */
size_t outbuf_append(OutBuf *b, const char *data, size_t len, size_t cap);
/* The kept bytes (NUL-terminated, valid UTF-8, a note of what was dropped), the caller's
 * to free; b is empty after. */
char *outbuf_finish(OutBuf *b, size_t *len);
void outbuf_clear(OutBuf *b);

/* tools.c: programmatic tool calls, from the interpreter's channel to the callback */
/* A {"event": "tool_call", "name", "input"} line from ip: call its tool, answer on ip's
 * channel when it is done (or refuse at once). */
void tool_call_start(Interp *ip, const char *line);
/* The run ends: its call in flight is dropped, never answered. */
void tool_call_drop(Run *run);
/* The run is interrupted: its call in flight is answered with an error, then dropped. */
void tool_call_interrupt(Run *run);
/* Write line (len bytes, ending in a newline) to ip's channel after what it has queued. */
void interp_send_line(Interp *ip, const char *line, size_t len);
/* Send a request (copied): queued answers the harness has not begun to read are dropped. */
void interp_queue_request(Interp *ip, const char *buf, size_t len);
/* An id for a request to an interpreter: random, non-zero, exact in a double. */
uint64_t interp_request_id(void);

/* hostinterp.c: interpreters that run outside the sandbox (the endpoint bridge) */
bool interp_on_host(enum interp_kind kind);
/* Fork and exec it as the worker user: its pid and fds (pidfd, ctl, out, err). */
int host_interp_spawn(Session *s, enum interp_kind kind, pid_t *pid, int fds[4]);
void host_interp_stop(Interp *ip, int sig);

/* start.c */
/* Start the interpreter of kind: Python from the template when it serves, else through
 * init (attached at INIT_SPAWNED), or on the host. */
int interp_spawn(Session *s, enum interp_kind kind);

/* interp.c */
/* The environment every sandboxed interpreter starts with (NULL-terminated). */
const char *const *interp_sandbox_env(void);
/* Ask init to start it (INIT_SPAWNED attaches it). */
int interp_spawn_by_init(Session *s, enum interp_kind kind);
/* An interpreter forked into the sandbox from outside (the template), which is the
 * daemon's child: attached, its exit watched through its pidfd, and init told to keep it
 * (INIT_ADOPT) for a restart of the daemon. fds: pidfd, ctl, out, err (taken); its pids as
 * the caller read them from the pidfd. */
void interp_attach_forked(Session *s, enum interp_kind kind, pid_t ns_pid, pid_t host_pid,
			  int fds[4]);
/* The host pid of pidfd's process, or -1 once it is reaped (or on error); its pid in its
 * own (innermost) pid namespace in *ns_pid unless NULL, -1 if unknown. */
pid_t pidfd_host_pid(int pidfd, pid_t *ns_pid);
/* Watch ip's pidfd: its exit is reported from there (the daemon's child: with status). */
void interp_watch_exit(Interp *ip);

/* template.c: the Python template */
/* Fork s's interpreter of kind from the template (now, or once it is ready): 0, or
 * -EOPNOTSUPP when the template does not serve it (off, down, a runtime profile, not
 * Python), -errno when the request could not be made. The interpreter's tmpl_seq names
 * the request; closing it (tmpl_seq 0) abandons it. */
int template_spawn(Session *s, enum interp_kind kind);
/* ip's files from its start (pidfd, ctl, out, err) on the loop; then the probe, whose
 * answer says it is up. */
void interp_attach(Session *s, enum interp_kind kind, pid_t pid, int fds[4]);
void interp_close(Interp *ip);
/* Write what is left of ip's request; the rest when the socket takes more. */
void interp_flush_request(Interp *ip);
/* What the loop watches ip's control socket for, from what ip waits on. */
void ctl_watch(Interp *ip);
/* Read what ip's pipes hold now into its buffers. */
void drain_all(Interp *ip);
/* Streamed runs: what the worker is sent as the program writes it (stream: enum
 * proto_stream), when it still listens. */
void run_stream(Run *run, uint8_t stream, const char *data, size_t len);
/* A harness's event line (a published rich output) to a streamed run's worker, while the
 * run's events stay under reply_max_bytes; to nobody otherwise (the reply has them all). */
void interp_forward_event(Interp *ip, const char *line);
/* The host pids a kill of the session's processes spares; how many. */
size_t kill_keep_list(Session *s, bool keep_interps, pid_t keep[1 + INTERP_KIND_COUNT]);
/* Kill every process of s but init and (keep_interps) the live interpreters: 0 done,
 * 1 asked init (INIT_KILLED follows), or -errno. */
int kill_processes(Session *s, bool keep_interps);

/* run.c */
/* An exec request as op_exec has checked it (its strings are the request's). */
typedef struct ExecRequest {
	enum interp_kind kind; /* the tool's, resolved for the session's tier */
	const char *code;
	const char *cwd;       /* cell mode: where the interpreter starts, or NULL */
	bool cell;	       /* the code plane's notebook mode */
	bool stream;	       /* output is sent as it comes, ahead of the reply */
	const char *tag;       /* the caller's name for the call, for cancel; NULL: none */
	bool finish_on_hangup; /* a streamed call runs to its end when its worker goes */
	uint64_t timeout_ms;
} ExecRequest;

/* Start er's call on s (which runs none); c is answered when it ends. */
void run_start(Session *s, Conn *c, const ExecRequest *er);
void run_note(Run *run, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The call fails before its code ran, saying why (a sentence). */
void run_fail(Run *run, const char *why);
/* Send the run's request to its interpreter, which is up; its deadline starts. */
void run_send(Run *run);
/* The interpreter answered or died: finish, or first kill what the run left behind. */
void run_complete(Run *run);
/* Reply to the worker (with the files the run made), log, and forget the run. */
void run_finish(Run *run);
/* Every process but init is dead: collect what the run wrote, forget the interpreters. */
void interps_all_dead(Session *s);
/* The return code a reply line names (its object kept as run->reply). */
int reply_return_code(Run *run, const char *line);
/* Leftovers keep the interpreter from starting: stop them and start it again; false when
 * that was not tried. */
bool run_clear_leftovers(Run *run);
/* Whether the run's interpreter was killed for memory as it started. */
bool start_oom_killed(Run *run, int status);

/* Interrupt the run on the next loop turn, as at its deadline; why names who cancelled it
 * (static). */
void run_cancel(Run *run, const char *why);
/* The run's interpreter could not start (why: a sentence): the call fails saying so. */
void run_start_failed(Run *run, const char *why);
/* Start the run's interpreter again (after a re-adoption without it). */
void run_retry_start(Run *run);
