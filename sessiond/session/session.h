/* SPDX-License-Identifier: MIT */
/* Internal types of the manager: sessions, their interpreters and the run in flight. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "config.h"
#include "workspace/editor.h"
#include "init/init_proto.h"
#include "core/loop.h"
#include "core/reply.h"
#include "sandbox/sandbox.h"
#include "core/server.h"
#include "core/store.h"

#define SESSION_ID_MAX 128

/* The interpreters a session can hold, one of each at most. */
enum interp_kind {
	INTERP_PYTHON,	 /* the stdlib harness */
	INTERP_BASH,	 /* a persistent bash */
	INTERP_NODE,	 /* the node harness (vm context) */
	INTERP_KERNEL,	 /* Python with IPython semantics (the kernel tier) */
	INTERP_ENDPOINT, /* Python on an external Jupyter Server, through a bridge on the host */
	INTERP_KIND_COUNT
};

/* Which API made a session: each has its own cap and idle default. */
enum session_plane { PLANE_OTARI, PLANE_CODE };

enum interp_state {
	INTERP_DEAD,	 /* not running; started on demand */
	INTERP_STARTING, /* INIT_SPAWN sent, waiting for INIT_SPAWNED */
	INTERP_READY,	 /* idle or running a request */
};

typedef struct Session Session;
typedef struct Run Run;
typedef struct Manager Manager;
typedef struct CreateWait CreateWait;
typedef struct ScanReply ScanReply;

/* The warm pools, by the interpreter their sandboxes start. */
enum { POOL_NATIVE, POOL_KERNEL };
typedef struct Journal Journal;
typedef struct TenantTable TenantTable;

/* Bytes of one output stream of a run, capped: the head is kept, the rest counted. */
typedef struct OutBuf {
	char *buf;	  /* kept bytes */
	size_t len, cap;  /* used and allocated */
	uint64_t omitted; /* bytes dropped past the cap */
} OutBuf;

/* One interpreter process inside a session's sandbox. */
typedef struct Interp {
	Session *s;
	enum interp_kind kind;
	enum interp_state state;
	pid_t ns_pid;		  /* pid inside the sandbox */
	pid_t host_pid;		  /* the same process seen from the daemon */
	int pidfd, ctl, out, err; /* from INIT_SPAWNED */
	LoopSource *ctl_src, *out_src, *err_src;
	char *line; /* reply bytes received on ctl */
	size_t line_len, line_cap;
	char *wbuf; /* request bytes not yet written to ctl */
	size_t wlen, woff;
	uint32_t ctl_events;	 /* what the loop watches ctl for (see ctl_watch) */
	OutBuf out_buf, err_buf; /* the current run's output */
	uint64_t expect_id;	 /* id of the request whose reply we wait for; 0: none */
	LoopSource *pid_src;	 /* host-side interpreters: their pidfd, readable at exit */
	bool probing;		 /* re-adopted: waiting for a no-op to know it is idle */
	bool reap;		 /* its children were killed after a run: the next request
				  * asks it to collect them (they hold pids of the limit) */
} Interp;

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
	char *code; /* what to run */
	char *cwd;  /* cell mode: where the interpreter starts, or NULL */
	bool cell;  /* notebook mode: result and error objects (code plane) */
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

/* One session: a sandbox and what runs in it. */
struct Session {
	Manager *m;
	char id[SESSION_ID_MAX + 1];  /* what clients address it by */
	char rid[SESSION_ID_MAX + 1]; /* what its cgroup and workspace are named after */
	bool pooled;		      /* ready in a warm pool, not yet handed out */
	bool cpu_background;	      /* its cgroup may have the least CPU weight */
	char *tenant;		      /* NULL when none */
	uid_t uid;
	double created_at, last_activity_at;
	int64_t idle_timeout, max_lifetime;
	Sandbox sb;	     /* pid, pidfd, ctl of init */
	LoopSource *ctl_src; /* init's control socket */
	int ws_fd;	     /* O_PATH of the workspace root */
	EditorUndo *undo;
	Interp interps[INTERP_KIND_COUNT];
	Run *run; /* the execution in flight, or NULL */
	enum session_plane plane;
	bool kernel;		     /* Python is served by the kernel tier */
	bool endpoint;		     /* Python is served by the external Jupyter Server */
	uint64_t execution_count;    /* calls run so far (the code plane's cell counter) */
	bool adopting;		     /* re-adopted: init is re-sending its interpreters */
	bool dirty;		     /* activity not yet written to the store */
	SandboxCounters *counters;   /* the cgroup counters a run reports, kept open */
	struct WsfsChange *reported; /* what the last scan for produced files saw */
	size_t n_reported;
	uint32_t seq;	  /* last init request number */
	uint64_t id_hash; /* of id, for the manager's index */
	ScanReply *scans; /* replies waiting for a walk of the workspace */
	Session *prev, *next;
};

/* A session whose sandbox is being torn down: waiting for init to exit. */
typedef struct Zombie {
	Manager *m;
	char id[SESSION_ID_MAX + 1]; /* the resource id (cgroup, workspace) */
	uid_t uid;
	int pidfd;	 /* init's, then the cleanup child's */
	LoopSource *src; /* the watch on pidfd */
	struct Zombie *prev, *next;
} Zombie;

struct Manager {
	const PaddockConfig *cfg;
	Loop *loop;
	Store *store;
	SandboxEnv *env;
	Session *sessions; /* live sessions */
	Session **index;   /* the same by id, open addressing (index.c) */
	size_t index_cap, index_n;
	Session *pool[2]; /* ready sandboxes: [0] Python native, [1] Python kernel tier */
	size_t pool_n[2];
	LoopSource *pool_timer;	       /* the next refill step */
	struct PoolBuild *pool_builds; /* sandboxes being built, their children setting up */
	size_t pool_building[2];
	size_t pool_building_fg[2]; /* of those, started for waiting creates (default weight) */
	size_t pool_warm_max;	    /* sandboxes warming up at once, at most */
	uint64_t pool_built, pool_taken;
	uint64_t pool_last_take_ms; /* monotonic time of the last hand-over */
	CreateWait *waiting[2];	    /* creates waiting for a sandbox, by pool, oldest first */
	size_t n_waiting[2];
	LoopSource *wait_timer;	 /* the earliest deadline of a waiting create */
	unsigned build_failures; /* builds failed in a row for a reason other than time */
	uint64_t build_retry_ms; /* no build for waiting creates before then (monotonic) */
	LoopSource *build_retry; /* then, the waiting creates get their builds */
	char build_error[160];	 /* why the last build failed, for the log and the answer */
	size_t n_sessions;
	Zombie *zombies;		  /* sandboxes being torn down */
	uint8_t *uids;			  /* one byte per uid in the range: in use */
	LoopSource *reclaim;		  /* periodic reclaim timer */
	char *argv[INTERP_KIND_COUNT][8]; /* how init starts each interpreter */
	bool draining;			  /* no new sessions; existing ones run on */
	int lock_fd;			  /* flock on <state_dir>/sessiond.lock, held for life */
	Journal *journal;		  /* store writes waiting for the next batch */
	uint64_t runs_by_outcome[4];	  /* ok, error, timeout, killed */
	uint64_t kills_by_reason[4];	  /* released, idle, lifetime, other */
	uint64_t sessions_created;
	uint64_t request_seq; /* ids of requests sent to interpreters */
	char *db_path;	      /* the store's file, for the checkpoint process */
	int ckpt_pidfd;	      /* the checkpoint process running, or -1 */
	LoopSource *ckpt_src;
	uint64_t ckpt_retry_ms; /* no new checkpoint process before then (monotonic ms) */
	uint64_t checkpoints;	/* checkpoint processes that ran */

	TenantTable *tenants;	      /* live sessions by tenant (tenant.c); NULL until one */
	uint64_t tenant_cap_refusals; /* creates refused at their tenant's session limit */
};

/* manager.c */
bool session_id_valid(const char *id);
Session *session_alloc(Manager *m);
void session_link(Session *s);
bool uid_mark(Manager *m, uid_t uid);
void uid_release(Manager *m, uid_t uid);
void zombie_free(Zombie *z);
void zombies_drain(Manager *m);
void on_zombie_exit(Loop *l, int fd, uint32_t events, void *data);

/* checkpoint.c: a StoreWalFn (data is the Manager) and its teardown */
void checkpoint_on_wal(void *data, int pages);
void checkpoint_free(Manager *m);

/* journal.c: the executions log, activity times and destroyed sessions' rows, in batches */
int journal_new(Manager *m);
void journal_free(Manager *m);
void journal_flush(Manager *m);
/* Delete a destroyed session's row with the next batch. */
void journal_note_delete(Manager *m, const char *id);
/* Before inserting a row for id: a pending delete of the same id goes first. */
void journal_before_insert(Manager *m, const char *id);
void journal_note(Session *s, const char *tool, double started_at, int64_t duration_ms,
		  int return_code, const char *outcome);

/* pool.c */
void pool_schedule(Manager *m);
/* How many pool sandboxes may warm up at once: pool_warm_max, or the CPUs + 1. */
size_t pool_warm_max(const PaddockConfig *cfg);
/* Pool sandboxes warming up: children setting up, and interpreters that have not
 * answered their first request yet. */
size_t pool_warming(const Manager *m);
/* Pool sandboxes whose interpreter has answered its first request: truly ready. */
size_t pool_started(const Manager *m);
/* A pooled interpreter answered its first request, or died: the next build may start;
 * handed out meanwhile, its sandbox gets the default CPU weight. */
void pool_interp_settled(Session *s);
/* The weight in use (the default, or its tenant's share) for a sandbox built at the least
 * (SandboxLimits.cpu_background). */
void session_cpu_foreground(Session *s);
Session *pool_take(Manager *m, bool kernel);
void pool_unlink(Session *s);
void pool_free_all(Manager *m);
/* Warm sandboxes whose children are still setting up, both kinds. */
size_t pool_building_total(const Manager *m);
/* background: at the least CPU weight, until session_cpu_foreground(). */
int session_build_start(Manager *m, Session *s, SandboxPending *p, bool background);
int session_build_finish(Manager *m, Session *s, SandboxPending *p);
void session_build_abort(Manager *m, Session *s, SandboxPending *p);

/* index.c: live sessions by id */
/* Make room for n sessions; a create or adoption reserves before it may link one. */
int session_index_reserve(Manager *m, size_t n);
int session_index_add(Manager *m, Session *s);
void session_index_remove(Manager *m, const Session *s);
Session *session_index_find(const Manager *m, const char *id);
void session_index_free(Manager *m);

/* create.c */
void op_create(Manager *m, Conn *c, json_object *req);
/* Hand the sandboxes now in the pool to the creates waiting for one, oldest first. */
void create_serve_waiting(Manager *m, int which);
/* Builds keep failing (r as from a build): the waiting creates beyond the oldest
 * `building` (those a build under way will serve) get the error. */
void create_fail_unbuilt_waiting(Manager *m, const size_t building[2], int r);
size_t create_waiting_total(const Manager *m);
/* Waiting creates of this tenant (their followers, which wait for the same id, aside). */
size_t create_waiting_of_tenant(const Manager *m, const char *tenant);
void create_conn_closed(Manager *m, Conn *c);
void create_free_all(Manager *m);

/* adopt.c */
int session_adopt(Manager *m, const SessionRow *row);
void session_remains_kill(Manager *m, const SessionRow *row);
void session_adopt_done(Session *s);
Session *session_find(Manager *m, const char *id, const char *tenant);
void session_destroy(Session *s, const char *why);

json_object *session_handle(const Session *s);

/* admin.c */
void op_stats(Manager *m, Conn *c);
void op_metrics(Manager *m, Conn *c);
void op_sessions(Manager *m, Conn *c, json_object *req, const char *tenant);
void op_admin(Manager *m, Conn *c, const char *op, json_object *req);

/* run.c */
void run_start(Session *s, Conn *c, enum interp_kind kind, const char *code, const char *cwd,
	       bool cell, uint64_t timeout_ms);
void run_abort(Session *s, const char *why);
/* A run's reply has gone: the session takes the next call. */
void run_ended(Run *run);
void run_retry_start(Run *run);
int session_start_interp(Session *s, enum interp_kind kind);
void interp_attach(Session *s, enum interp_kind kind, pid_t pid, int fds[4]);
void interp_exited(Session *s, enum interp_kind kind, pid_t pid, int status);

/* hostinterp.c: interpreters that run outside the sandbox (the endpoint bridge) */
bool interp_on_host(enum interp_kind kind);
int host_interp_spawn(Session *s, enum interp_kind kind);
void host_interp_stop(Interp *ip, int sig);
int session_send_init(Session *s, struct init_msg *msg, const char *blob, size_t bloblen);
void run_conn_closed(Manager *m, Conn *c);
const char *interp_kind_name(enum interp_kind k);
void session_on_init_event(Loop *l, int fd, uint32_t events, void *data);
void interp_close(Interp *ip);
void interp_destroy(Interp *ip);
/* Bytes the daemon holds for an interpreter: its reply, request and output buffers. */
size_t interp_buffered_bytes(const Interp *ip);
void outbuf_append(OutBuf *b, const char *data, size_t len, size_t cap);
char *outbuf_finish(OutBuf *b, size_t *len);

/* files.c */
void op_edit(Manager *m, Conn *c, Session *s, json_object *req);
void op_list(Manager *m, Conn *c, Session *s, json_object *req);
void op_get(Manager *m, Conn *c, Session *s, json_object *req);
void op_put(Manager *m, Conn *c, Session *s, json_object *req);
void op_put_commit(Manager *m, Conn *c, json_object *req);
void op_put_abort(Manager *m, Conn *c);
void upload_drop(Manager *m, Conn *c);
json_object *fs_error(int r, const char *path);

/* scan.c: replies that wait for a walk of the workspace, done a slice per loop turn */
/* Add "files" (those changed since `since`, minus those reported before) to reply and send
 * it to c (NULL: nowhere); then end run, if given (run_ended()). */
void reply_with_produced_files(Session *s, Conn *c, json_object *reply,
			       const struct timespec *since, Run *run);
/* Add "files" and "truncated" (the regular files below rel) to reply and send it to c;
 * or the error for api_path. */
void reply_with_listing(Session *s, Conn *c, json_object *reply, const char *api_path,
			const char *rel, size_t max);
/* The session is going away: waiting replies go now, without their files. */
void scans_cancel(Session *s);
void scans_conn_closed(Manager *m, Conn *c);
