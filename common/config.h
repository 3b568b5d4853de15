/* SPDX-License-Identifier: MIT */
/* paddock's settings: one key = value file, overridden by PADDOCK_* variables. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/*
 * node_name: letters and digits only, so that "<node_name>-" never begins another node's
 * ids and a front proxy can route on that prefix; short enough to leave room for the
 * random part within a session id.
 */
#define NODE_NAME_MAX 63

/* Runtime profiles: at most this many, named by 1 to RUNTIME_NAME_MAX of a-z 0-9 . _ -
 * (the first a letter or a digit); "default" names the host's own /usr. */
#define RUNTIMES_MAX 16
#define RUNTIME_NAME_MAX 63
#define RUNTIME_DEFAULT "default"

/*
 * One runtime profile (common/runtimes.c reads them): a tree sessions run on instead of
 * the host's /usr, with its own warm pool and, where its file says so, its own limits.
 * Every field is set: what the file leaves out is the global setting.
 */
typedef struct RuntimeProfile {
	char name[RUNTIME_NAME_MAX + 1];
	char *root;		/* absolute path of the tree: its usr, etc and top-level links */
	char *description;	/* for listings; may be empty */
	int64_t pool_size;	/* warm sandboxes with Python started */
	int64_t kernel_prewarm; /* warm kernel-tier sandboxes */
	int64_t memory_max_bytes;
	int64_t pids_max;
	int64_t cpu_quota_percent;
	bool egress; /* a veth with a default route in each of its sessions */
} RuntimeProfile;

/* Every setting, with the bounds config.c enforces. Strings are owned. */
typedef struct PaddockConfig {
	/* paths */
	char *state_dir;   /* SQLite, workspaces, sandbox roots */
	char *runtime_dir; /* sessiond.sock lives here */
	char *lib_dir;	   /* paddock-init and the harnesses */
	char *node_name;   /* prefix of session ids, for routing across nodes */
	char *log_level;   /* err, warn, info, debug */
	char *log_target;  /* stderr, journal or syslog */

	bool node_name_derived; /* node_name was not set: it comes from the host name */
	bool end_sessions;	/* --end-sessions: sessions are ended, no sandbox is made */

	/* who may talk to sessiond: peers with uid 0, this user's uid, or this group */
	char *worker_user;
	char *socket_group;

	/* runtimes */
	char *python_bin;
	bool python_template;	   /* fork sessions' Python from a preloaded template process */
	bool template_direct_fork; /* in one step (clone3) where it can, else in two */
	char *preload_modules;	   /* comma-separated modules the template imports */
	char *bash_bin;
	char *node_bin;

	/* fcgi worker */
	int64_t threads;	/* FastCGI threads; 0: as many as calls may be in flight */
	int64_t downloads_max;	/* GetFile answers streaming at once (each holds a thread) */
	int64_t max_body_bytes; /* JSON request bodies */
	int64_t json_max_depth; /* nesting of request JSON */
	int64_t code_max_bytes; /* code or command length */
	int64_t put_max_bytes;	/* one PutFile */
	char *auth_tokens;	/* comma-separated bearer tokens; empty: open */
	char *tenant_header;	/* header the front door sets, e.g. X-Paddock-Tenant */
	bool require_tenant;	/* fail closed without the tenant header */

	/* sessions */
	int64_t max_sessions;	       /* all sessions, both APIs */
	int64_t tenant_max_sessions;   /* one tenant's sessions; 0: half of max_sessions */
	int64_t tenant_cpu_weight;     /* CPU weight (v2 units) a tenant's sandboxes share */
	int64_t pool_size;	       /* ready sandboxes (Python started) kept for new sessions */
	int64_t pool_warm_max;	       /* pool sandboxes warming up at once; 0: CPUs + 1 */
	int64_t create_wait_seconds;   /* a create waits this long for a sandbox, at most */
	bool keep_sessions_on_exit;    /* on SIGTERM leave sessions running for the next start */
	int64_t code_max_sessions;     /* sessions made by the code-interpreter API */
	int64_t kernel_max_sessions;   /* of those, sessions served by the kernel tier */
	int64_t code_idle_timeout;     /* idle close of code-interpreter sessions, seconds */
	int64_t kernel_idle_timeout;   /* same for kernel-tier sessions */
	char *code_backend;	       /* Python tier of the code plane: auto, native or kernel */
	char *jupyter_endpoint;	       /* external Jupyter Server URL; empty: none */
	int64_t code_prewarm;	       /* warm native interpreters kept ready */
	int64_t kernel_prewarm;	       /* warm kernel-tier interpreters kept ready */
	int64_t code_output_max_chars; /* notebook output kept per cell, in characters */
	int64_t retry_after_seconds;   /* hint sent with 503 at capacity */
	int64_t stream_heartbeat_seconds; /* a streamed call's comment line when nothing else came */
	int64_t idle_timeout_default;
	int64_t idle_timeout_max;
	int64_t lifetime_default;
	int64_t lifetime_max;
	int64_t reclaim_interval_ms;
	int64_t wal_checkpoint_pages; /* WAL length that starts a checkpoint process */
	int64_t exec_timeout_default; /* seconds */
	int64_t exec_timeout_max;     /* seconds */
	int64_t interrupt_grace_ms;   /* SIGINT, then this long, then kill */
	int64_t output_max_bytes;     /* per stream */
	int64_t reply_max_bytes;      /* one reply line of an interpreter (rich outputs) */
	int64_t list_max_entries;
	int64_t produced_files_max;
	int64_t editor_max_bytes;

	/* sandbox */
	int64_t uid_base;
	int64_t uid_count;
	int64_t memory_max_bytes;
	int64_t pids_max;
	int64_t cpu_quota_percent; /* 100 = one core */
	int64_t workspace_bytes;
	char *workspace_backend; /* disk (an ext4 image per session) or tmpfs */
	int64_t tmp_bytes;
	int64_t program_memory_min_bytes; /* memory left to programs with both file systems full */
	int64_t nofile_max;
	char *cgroup_root;	   /* where session cgroups go; empty: detect */
	bool cgroup_favor_dynmods; /* set favordynmods on the cgroup2 mount at start */
	bool egress;	   /* a veth with a default route in each session (docs/egress.md) */
	char *egress_pool; /* IPv4 CIDR the sessions' /30 links come from */
	char *egress_host_iface_prefix; /* host-side veth names: prefix + link number */
	char *egress_host_netns;	/* netns file for the host side; empty: sessiond's own */

	/* programmatic tool calls (docs/otari.md) */
	char *tool_callback_allow;    /* URL prefixes callbacks may go to; "": the route is off */
	int64_t tool_timeout_default; /* seconds a call may take when the registration says none */
	int64_t tool_max_tools;	      /* tools one registration may name */
	int64_t tool_call_max_bytes;  /* a call's line from the sandbox, at most */
	int64_t tool_reply_max_bytes; /* a callback's answer, at most */
	int64_t tool_calls_per_run;   /* calls one exec may make */
	int64_t tool_calls_max_concurrent; /* calls in flight on the node */

	/* the MCP endpoint (docs/mcp.md) */
	char *mcp_allowed_origins;  /* Origin values browsers may post from; "": none */
	int64_t mcp_read_max_bytes; /* the largest file read_file returns */

	/* runtime profiles: <runtimes_dir>/<name>.conf, in the order of their names; read by
	 * runtimes_load() (common/runtimes.h), not by config_load(): only sessiond and
	 * paddockctl need them */
	char *runtimes_dir;
	RuntimeProfile *runtimes;
	size_t n_runtimes;
} PaddockConfig;

/* Fill defaults, then read path (NULL or missing file: none), then the environment.
 * On error, writes a message naming the key to err and returns -EINVAL. */
int config_load(PaddockConfig *c, const char *path, char *err, size_t errlen);

/* Set one key from a string (file or environment syntax). */
int config_set(PaddockConfig *c, const char *key, const char *value, char *err, size_t errlen);

/* Print the effective configuration as key = value lines. */
void config_dump(const PaddockConfig *c, FILE *out);

void config_free(PaddockConfig *c);

/* Whether name is a valid node_name: 1 to NODE_NAME_MAX letters and digits. */
bool config_node_name_valid(const char *name);

/*
 * The node name a host name gives when node_name is not set: the letters and digits of
 * its first label, in order, at most NODE_NAME_MAX ("paddock-vm.example.com" gives
 * "paddockvm"); "node" when none is left. out gets a terminated string (outlen >= 5).
 */
void config_node_name_from_host(const char *host, char *out, size_t outlen);
