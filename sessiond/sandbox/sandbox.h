/* SPDX-License-Identifier: MIT */
/* Building and tearing down one session's sandbox: namespaces, mounts, cgroup, privileges. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"

/* The longest sandbox id: it names a cgroup and a workspace directory. */
#define SANDBOX_ID_MAX 128

/* Resource limits applied to one sandbox, and what it runs on. */
typedef struct SandboxLimits {
	int64_t memory_bytes;	 /* memory.max; swap is always 0 */
	int64_t pids;		 /* pids.max */
	int64_t cpu_percent;	 /* 100 = one core */
	int64_t workspace_bytes; /* size of the /workspace file system */
	int64_t tmp_bytes;	 /* size of the /tmp tmpfs */
	int64_t nofile;		 /* RLIMIT_NOFILE */
	bool cpu_background;	 /* the least CPU weight, until sandbox_cpu_foreground() */
	bool egress;		 /* a veth with a default route (needs the env's egress pool) */
	size_t runtime;		 /* the tree it runs on: 0 the host's, i runtime profile i's */
} SandboxLimits;

/* What is fixed for the daemon's lifetime: cgroup layout, the init binary. Opaque. */
typedef struct SandboxEnv SandboxEnv;

/* Usage counters of one sandbox's cgroup. */
typedef struct SandboxUsage {
	uint64_t cpu_ns;	 /* CPU time used so far */
	uint64_t memory_peak;	 /* bytes, high-water mark (0 if the kernel lacks it) */
	uint64_t memory_current; /* bytes */
	uint64_t oom_kills;	 /* processes the OOM killer took */
	uint64_t pids_current;	 /* tasks now */
} SandboxUsage;

/* A live sandbox as the daemon holds it. */
typedef struct Sandbox {
	pid_t pid;	    /* host pid of the sandbox's init */
	int pidfd;	    /* pidfd of init, readable when it exits */
	int ctl_fd;	    /* sessiond's end of the init control socket (SEQPACKET) */
	int ctl_fd_in_init; /* the number init keeps a copy of ctl_fd under, for re-adoption */
} Sandbox;

/* Detect cgroup v1/v2, prepare the cgroup parent, open paddock-init. Caller frees. */
int sandbox_env_new(const PaddockConfig *cfg, SandboxEnv **ret);
SandboxEnv *sandbox_env_free(SandboxEnv *env);
/* Remove this daemon's (empty) cgroup parent directories, at a clean stop. */
void sandbox_env_remove_cgroup_parent(SandboxEnv *env);
/* "v1" or "v2", for logs and capabilities. */
const char *sandbox_env_cgroup_version(const SandboxEnv *env);
/* "disk" or "tmpfs": what workspaces are (workspace_backend). */
const char *sandbox_env_workspace_backend(const SandboxEnv *env);
/* Why no workspace can be made now (a full state directory), or NULL: sandbox_spawn()
 * fails with it until the cause is gone. */
const char *sandbox_env_workspace_problem(const SandboxEnv *env);

/* Why runtime profile i's tree cannot serve sandboxes (missing, no usr, no Python), or
 * NULL when it can; 0 is the host's own, always usable. */
const char *sandbox_env_runtime_problem(const SandboxEnv *env, size_t runtime);
/* Whether runtime i's Python has IPython, which the kernel tier needs (0: the host's,
 * which the code plane probes itself: true). */
bool sandbox_env_runtime_has_kernel(const SandboxEnv *env, size_t runtime);

/*
 * Set favordynmods on the cgroup2 mount (dynmods.c says why): 1 when set now, 0 when
 * it already was, -errno (logged) when it cannot be. The options to remount with are
 * cgroup2_favor_dynmods_options(): 1 and out filled, or 0 when already there.
 */
int sandbox_cgroup_favor_dynmods(void);
int cgroup2_favor_dynmods_options(const char *superopts, char *out, size_t len);

/*
 * Workspace: a file system of workspace_bytes at <state_dir>/workspaces/<id> (its own ext4
 * on a loop device, or a tmpfs), root dir owned by the session's uid, made by
 * sandbox_spawn().
 */

/* Detach the mount and remove the directory; 0 if it was already gone. */
int workspace_destroy(const SandboxEnv *env, const char *id);
/* An O_PATH|O_DIRECTORY fd of the workspace root, for openat2() confinement. */
int workspace_open(const SandboxEnv *env, const char *id);
/* Host path of the workspace, written into buf. */
int workspace_path(const SandboxEnv *env, const char *id, char *buf, size_t len);

/*
 * Start a sandbox for session id, running as uid/gid: new mount, pid, net (lo
 * up, nothing else), ipc, uts and cgroup namespaces; a cgroup with limits; a
 * read-only root built from the host's /usr and a few /etc files; /proc, a
 * minimal /dev, /tmp, the workspace at /workspace and a copy of lib_dir at /opt/paddock,
 * all read-only but /tmp and /workspace; rlimits, no capabilities,
 * no_new_privs; then exec paddock-init as pid 1 with the control socket on
 * fd 3. The workspace is made too, in the caller's mount namespace, and must not
 * exist yet. On failure nothing is left behind.
 */
int sandbox_spawn(SandboxEnv *env, const char *id, uid_t uid, gid_t gid,
		  const SandboxLimits *limits, Sandbox *ret);

/*
 * The same in steps, so a daemon need not wait while the child is cloned and sets itself
 * up: start returns once the spawner has the request (the child makes its cgroup and
 * namespaces itself, off the caller's thread). sync_fd turns readable when the spawner
 * has answered, and again when the child has become init or failed. finish takes what
 * came (wait: block until the child is init, at most the spawn timeout; else -EAGAIN
 * while it is not, after taking the spawner's answer if that is what came). A failed
 * finish, like abort, leaves nothing behind; -ECONNABORTED: the spawner died with the
 * request, and the next spawn has another.
 */
typedef struct SandboxPending {
	pid_t pid;	   /* the child, init to be; 0 until the spawner has answered */
	int pidfd;	   /* its pidfd, or -1 */
	int ctl_fd;	   /* the daemon's end of the control socket */
	int sync_fd;	   /* the spawner's answer, then the child's exec or failure */
	bool net_in_child; /* the child makes its network namespace; else the daemon does */
	bool answered;	   /* the spawner's answer was read */
	bool released;	   /* the child was let go: what comes next is its exec or failure */
	char id[SANDBOX_ID_MAX + 1];
} SandboxPending;

int sandbox_spawn_start(SandboxEnv *env, const char *id, uid_t uid, gid_t gid,
			const SandboxLimits *limits, SandboxPending *ret);
int sandbox_spawn_finish(SandboxEnv *env, SandboxPending *p, bool wait, Sandbox *ret);
void sandbox_spawn_abort(SandboxEnv *env, SandboxPending *p);

/*
 * What a dead sandbox leaves, removed off the caller's thread by a child the spawner
 * clones: its cgroup (tried up to tries times, retry_ms apart, while its tasks drain),
 * then its workspace. *fd turns readable when that is done; remove_finish then says how
 * it went. -errno if it could not be started.
 */
typedef struct SandboxRemoval {
	int32_t cgroup_err;    /* 0 or -errno */
	int32_t workspace_err; /* 0 or -errno */
} SandboxRemoval;

int sandbox_remove_start(SandboxEnv *env, const char *id, unsigned tries, unsigned retry_ms,
			 int *fd);
/* Once fd is readable: 0 with *ret filled in, or -errno (-ECHILD: the child said
 * nothing, it died). The caller closes fd. */
int sandbox_remove_finish(int fd, SandboxRemoval *ret);

/* Kill init (so the kernel kills the whole pid namespace) and close fds. Does not wait. */
void sandbox_kill(Sandbox *sb);
/*
 * SIGKILL every task in the session's cgroup except the given host pids (the
 * init, the interpreters to keep), including double-forked and setsid ones the
 * sandbox's init no longer sees as children. sessiond calls it when it ends a
 * run. Robust against fork races: the cgroup is frozen (v1 freezer, v2
 * cgroup.freeze) while its task list is read and signalled, then thawed, in
 * rounds until only the kept tasks (and zombies) remain; with nothing kept on
 * v2 it is one write to cgroup.kill. Blocks for at most about 2 s (usually
 * under a few ms); -ETIMEDOUT if tasks survive that long. 0 if the cgroup is gone.
 */
int sandbox_cgroup_kill(SandboxEnv *env, const char *id, const pid_t *keep_host_pids, size_t nkeep);
/*
 * The session's cgroup.procs files, one per hierarchy (the v1 freezer's last, as a
 * sandbox's init joins them), opened for writing into fds (max of them): a process that
 * writes "0" to each joins the session's cgroups. How many, or -errno.
 */
int sandbox_cgroup_procs_open(SandboxEnv *env, const char *id, int *fds, size_t max);
/* The sandboxes' seccomp filter as compiled BPF, in a sealed memfd (the caller's). */
int sandbox_env_seccomp_memfd(const SandboxEnv *env);
/* Remove the session's cgroup; -EBUSY while tasks remain (call again later). */
int sandbox_cgroup_remove(SandboxEnv *env, const char *id);
/* The same, blocking: up to tries attempts, interval_ms apart, while tasks drain. */
int sandbox_cgroup_remove_wait(SandboxEnv *env, const char *id, unsigned tries,
			       unsigned interval_ms);
/*
 * The counters a run reports (cpu_ns, memory_peak, oom_kills), from files kept open:
 * reading them costs three pread()s instead of path walks in cgroupfs. Opaque; the
 * caller owns it and frees it before the cgroup is removed.
 */
typedef struct SandboxCounters SandboxCounters;
int sandbox_counters_open(SandboxEnv *env, const char *id, SandboxCounters **ret);
/* with_peak false: memory_peak is left 0 and its file not read (a run's start needs only
 * the counters it subtracts at the end). */
int sandbox_counters_read(SandboxCounters *c, SandboxUsage *u, bool with_peak);
SandboxCounters *sandbox_counters_free(SandboxCounters *c);

/* Give a sandbox built with SandboxLimits.cpu_background the default CPU weight: someone
 * uses it now. */
int sandbox_cpu_foreground(SandboxEnv *env, const char *id);
/* Give a sandbox this CPU weight, in cgroup v2 units (1..10000, the default 100); on v1 the
 * same proportion of cpu.shares (x 1024 / 100, within 2..262144). 0 without a cpu
 * controller; -EINVAL for a weight outside 1..10000. */
int sandbox_cpu_weight(SandboxEnv *env, const char *id, int64_t weight);

/* Read the session cgroup's counters. */
int sandbox_usage(SandboxEnv *env, const char *id, SandboxUsage *ret);
/* Ids of session cgroups and workspaces that exist on the host, for orphan cleanup. */
int sandbox_list_leftovers(SandboxEnv *env, char ***ids_ret, size_t *n_ret);

/*
 * An fd of the daemon's that a sandbox's child keeps while it sets up (it closes all
 * others at once): the state dir's lock, so that a daemon started after a crash waits for
 * the dead one's children to end (they die with it, or become init) before it cleans up
 * what they made. One; the last given counts.
 */
void sandbox_env_keep_in_child(SandboxEnv *env, int fd);

/* Why the last failing sandbox_* call of this thread failed: step and errno, for the log. */
const char *sandbox_last_error(void);
