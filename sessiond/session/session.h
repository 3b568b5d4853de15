/* SPDX-License-Identifier: MIT */
/*
 * The session room: what a session is (its sandbox, its interpreters' slots, its owner),
 * the daemon's one context (Manager) that holds them, and what every room above does with
 * them at the lowest level: ids and uids, the lists and the index, lookup, tenants, the
 * remains of a killed sandbox (zombies), and the store's batched writes.
 */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "config.h"
#include "core/loop.h"
#include "core/reply.h"
#include "core/server.h"
#include "core/store.h"
#include "sandbox/sandbox.h"

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
typedef struct EditorUndo EditorUndo; /* workspace/editor.h */

/* The warm pools, by the interpreter their sandboxes start... */
enum { POOL_NATIVE, POOL_KERNEL, POOL_KINDS };
/* ...and by the runtime they run on (0 the host's, i runtime profile i): pool "which" is
 * runtime * POOL_KINDS + kind. */
#define POOLS_MAX ((RUNTIMES_MAX + 1) * POOL_KINDS)
/* Session.runtime of a re-adopted session whose profile is no longer configured: it runs
 * on as it was built, and its name is kept. */
#define RUNTIME_RETIRED ((size_t)-1)

static inline int pool_index(size_t runtime, bool kernel)
{
	return (int)(runtime * POOL_KINDS) + (kernel ? POOL_KERNEL : POOL_NATIVE);
}
static inline size_t pool_runtime(int which)
{
	return (size_t)which / POOL_KINDS;
}
static inline bool pool_is_kernel(int which)
{
	return which % POOL_KINDS == POOL_KERNEL;
}
typedef struct Journal Journal;
typedef struct TenantTable TenantTable;
typedef struct HttpClient HttpClient; /* httpc/httpc.h */
typedef struct Template Template;     /* exec/template.c */
#define TEMPLATE_KINDS 2	      /* a template for native Python, one for the kernel tier */

/* A session's programmatic tools, as registered (exec/tools.c). */
typedef struct ToolSet {
	char *callback_url; /* canonical, under a tool_callback_allow prefix */
	char *token;	    /* the callback's bearer token: never sent into the sandbox */
	uint64_t timeout_ms;
	size_t n;
	char **names;	   /* Python identifiers, none repeated */
	json_object *stub; /* [{"name", "doc"}...]: what the harness builds the module from */
} ToolSet;

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
	uint32_t tmpl_seq;	 /* its request to the Python template in flight, or 0 */
	bool forked;		 /* it came from a template (not from init) */
} Interp;

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
	int scan_root_fd;    /* the root open for reading, kept for the produced-files walk */
	bool scan_root_lent; /* a walk holds scan_root_fd now */
	EditorUndo *undo;
	Interp interps[INTERP_KIND_COUNT];
	Run *run; /* the execution in flight, or NULL */
	enum session_plane plane;
	bool kernel;	/* Python is served by the kernel tier */
	size_t runtime; /* what it runs on: 0 the host, i profile i, or retired */
	char runtime_name[RUNTIME_NAME_MAX + 1]; /* the profile's name, "default" for 0 */
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
	ToolSet *tools;	  /* programmatic tools registered, or NULL */
	Session *prev, *next;
};

/*
 * What the rooms below a concern report to it: exec/'s interpreters tell exec/events.c
 * about their replies and exits, and exec/ tells lifecycle/ that a sandbox is lost or an
 * interpreter has settled. The lower room knows only this table; manager.c fills it.
 */
typedef struct SessionEvents {
	/* A reply line to the request ip waits for (exec/events.c). */
	void (*interp_replied)(Interp *ip, char *line);
	/* An interpreter exited with a wait status (exec/events.c). */
	void (*interp_exited)(Session *s, enum interp_kind kind, pid_t pid, int status);
	/* An interpreter answered its first request, failed to start or exited
	 * (lifecycle/pool.c). */
	void (*interp_settled)(Session *s);
	/* The sandbox can serve no more: init exited, or its processes cannot be killed
	 * (lifecycle/end.c). s is freed. */
	void (*sandbox_lost)(Session *s, const char *why);
	/* The template of interpreters of kind is ready: warm sandboxes whose interpreter of
	 * that kind init started meanwhile may be made again (lifecycle/pool.c). */
	void (*template_ready)(Manager *m, enum interp_kind kind);
} SessionEvents;

/* A worker's request as dispatch.c hands it to its op. */
typedef struct Request {
	const char *op;
	const char *tenant; /* the caller's tenant, or NULL */
	Session *s;	    /* the session it names, for the ops that need one; else NULL */
	json_object *body;  /* the whole request */
} Request;

/* A session whose sandbox is being torn down: waiting for init to exit. */
typedef struct Zombie {
	Manager *m;
	char id[SESSION_ID_MAX + 1]; /* the resource id (cgroup, workspace) */
	uid_t uid;
	int pidfd;	   /* init's, until it has exited */
	int done_fd;	   /* then the cleanup's report (sandbox_remove_start) */
	unsigned cleanups; /* cleanup children that did not report */
	LoopSource *src;   /* the watch on pidfd, then on done_fd */
	struct Zombie *prev, *next;
} Zombie;

struct Manager {
	const PaddockConfig *cfg;
	const SessionEvents *events; /* see SessionEvents */
	Loop *loop;
	Store *store;
	SandboxEnv *env;
	Session *sessions; /* live sessions */
	Session **index;   /* the same by id, open addressing (index.c) */
	size_t index_cap, index_n;
	Session *pool[POOLS_MAX]; /* ready sandboxes, by pool_index(runtime, kernel) */
	size_t pool_n[POOLS_MAX];
	int n_pools;		       /* the pools in use: POOL_KINDS for each runtime */
	LoopSource *pool_timer;	       /* the next refill step */
	struct PoolBuild *pool_builds; /* sandboxes being built, their children setting up */
	size_t pool_building[POOLS_MAX];
	size_t pool_building_fg
		[POOLS_MAX];  /* of those, started for waiting creates (default weight) */
	size_t pool_warm_max; /* sandboxes warming up at once, at most */
	uint64_t pool_built, pool_taken;
	uint64_t pool_last_take_ms;	/* monotonic time of the last hand-over */
	CreateWait *waiting[POOLS_MAX]; /* creates waiting for a sandbox, by pool, oldest first */
	size_t n_waiting[POOLS_MAX];
	LoopSource *wait_timer;	 /* the earliest deadline of a waiting create */
	unsigned build_failures; /* builds failed in a row for a reason other than time */
	uint64_t build_retry_ms; /* no build for waiting creates before then (monotonic) */
	LoopSource *build_retry; /* then, the waiting creates get their builds */
	char build_error[160];	 /* why the last build failed, for the log and the answer */
	/* runtime profiles' own build failures in a row, and those taken as broken for it
	 * (lifecycle/pool.c); [0], the default's, is build_failures' business */
	unsigned runtime_failures[RUNTIMES_MAX + 1];
	bool runtime_broken[RUNTIMES_MAX + 1];
	size_t n_sessions;
	Zombie *zombies;		  /* sandboxes being torn down */
	uint8_t *uids;			  /* one byte per uid in the range: in use */
	LoopSource *reclaim;		  /* periodic reclaim timer */
	char *argv[INTERP_KIND_COUNT][8]; /* how init starts each interpreter */
	bool draining;			  /* no new sessions; existing ones run on */
	int lock_fd;			  /* flock on <state_dir>/sessiond.lock, held for life */
	Journal *journal;		  /* store writes waiting for the next batch */
	uint64_t runs_by_outcome[5];	  /* ok, error, timeout, killed, cancelled */
	uint64_t kills_by_reason[4];	  /* released, idle, lifetime, other */
	uint64_t sessions_created;
	char *db_path;	/* the store's file, for the checkpoint process */
	int ckpt_pidfd; /* the checkpoint process running, or -1 */
	LoopSource *ckpt_src;
	uint64_t ckpt_retry_ms; /* no new checkpoint process before then (monotonic ms) */
	uint64_t checkpoints;	/* checkpoint processes that ran */

	TenantTable *tenants;		/* live sessions by tenant (tenant.c); NULL until one */
	HttpClient *httpc;		/* tool calls' callbacks in flight (httpc/) */
	Template *tmpl[TEMPLATE_KINDS]; /* the native and kernel templates (exec/template.c) */
	uint64_t tool_calls;		/* tool calls made */
	uint64_t tool_call_errors;	/* of those, the ones that ended in a ToolError */
	uint64_t tenant_cap_refusals;	/* creates refused at their tenant's session limit */
};

/* session.c: ids, uids, the lists, lookup */
bool session_id_valid(const char *id);
/* A session with nothing open: its fds -1, its interpreters' slots dead. */
Session *session_alloc(Manager *m);
/* Into the live list and the index. */
void session_link(Session *s);
/* Into pool which (pool_index()), ready to be handed out: s takes its kind and runtime. */
void session_pool_push(Session *s, int which);
/* Out of whichever list s is on (live or pool), and the index. */
void session_unlink(Session *s);
/* The live session id names, if it is tenant's (NULL: none) to see; else NULL. */
Session *session_find(Manager *m, const char *id, const char *tenant);
/* The session as the protocol describes it (session_info, create). */
json_object *session_handle(const Session *s);
/* Mark uid in use (a re-adopted session's): false when it already is. */
bool uid_mark(Manager *m, uid_t uid);
/* The lowest free uid of the range; -EUSERS when every one is in use. */
int uid_take(Manager *m, uid_t *uid);
void uid_release(Manager *m, uid_t uid);

/* zombie.c: the remains of killed sandboxes, cleaned off the loop */
/* Watch pidfd (init's, already killed; -1: gone) and, once it has exited, remove the
 * cgroup and workspace of rid; then uid ((uid_t)-1: none of this run's) is free again.
 * Takes pidfd. */
void zombie_add(Manager *m, const char *rid, uid_t uid, int pidfd);
/* Remove rid's cgroup (waiting while its tasks drain) and workspace, here and now. */
void zombie_remains_remove(Manager *m, const char *rid);
/* Wait for every zombie synchronously: at start and at shutdown, when blocking is fine. */
void zombies_drain(Manager *m);
size_t zombie_count(const Manager *m);

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

/* index.c: live sessions by id */
/* Make room for n sessions; a create or adoption reserves before it may link one. */
int session_index_reserve(Manager *m, size_t n);
int session_index_add(Manager *m, Session *s);
void session_index_remove(Manager *m, const Session *s);
Session *session_index_find(const Manager *m, const char *id);
void session_index_free(Manager *m);
