/* SPDX-License-Identifier: MIT */
/* What the sandbox's files share: the environment, the child's arguments, the setup steps. */
#pragma once

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <linux/filter.h>

#include "sandbox.h"

#define CGROUP_HIER_MAX 8
#define CGROUP_ROOT "/sys/fs/cgroup"

/* Controllers paddock uses, as bits of CgroupHier.ctrls. */
enum {
	CG_MEMORY = 1u << 0,
	CG_PIDS = 1u << 1,
	CG_CPU = 1u << 2,
	CG_CPUACCT = 1u << 3,
	CG_FREEZER = 1u << 4,
};

/* One cgroup hierarchy session cgroups live in (v2: exactly one). */
typedef struct CgroupHier {
	char *mount;	/* where the hierarchy is mounted */
	char *parent;	/* absolute path of the directory holding session cgroups */
	unsigned ctrls; /* CG_* controllers attached to it (v2: all) */
} CgroupHier;

struct SandboxEnv {
	char *state_dir;	 /* owned copy of cfg->state_dir */
	char *lib_dir;		 /* owned copy of cfg->lib_dir */
	char *lib_copy;		 /* <state_dir>/lib: lib_dir copied on a read-only tmpfs */
	char *root_dir;		 /* <state_dir>/root: empty mount point of every sandbox root */
	char *workspaces_dir;	 /* <state_dir>/workspaces */
	int init_fd;		 /* O_PATH fd of <lib_dir>/paddock-init */
	int host_netns_fd;	 /* our own network namespace, to return to after setns */
	bool v2;		 /* unified hierarchy */
	bool cgroup_parent_ours; /* hier[].parent made for this state dir (no cgroup_root) */
	CgroupHier hier[CGROUP_HIER_MAX]; /* v1: one per distinct hierarchy used */
	size_t n_hier;
	bool egress;			    /* give each sandbox a veth with a default route */
	uint32_t egress_net;		    /* the pool's network address, host order */
	uint32_t egress_slots;		    /* /30 links in the pool */
	uint32_t egress_next;		    /* link number to try first, rotating */
	char egress_prefix[9];		    /* host-side veth names: prefix + link number */
	int egress_netns_fd;		    /* netns of the host side; -1: ours */
	int cap_last;			    /* highest capability the kernel knows */
	struct sock_filter *seccomp_filter; /* owned BPF program, built once */
	struct sock_fprog seccomp_prog;	    /* points at seccomp_filter, for the child */
	int keep_in_child_fd;		    /* the daemon's lock: a child keeps it, or -1 */
	bool ws_disk;			    /* workspaces on loop devices (wsdisk.c), not tmpfs */
	int ws_template_fd;		    /* the empty file system each workspace copies */
	int64_t ws_workspace_bytes;	    /* the size it holds files of */
	int64_t ws_image_bytes;		    /* its size: that and its metadata */
	struct ws_extent {
		int64_t off, len;
	} * ws_extents; /* where the template holds data */
	size_t n_ws_extents;
	int ws_error;		/* why there is no template (-errno), 0 */
	int64_t ws_retry_at_ms; /* CLOCK_MONOTONIC: when a spawn may try to make it again */
	char ws_problem[256];	/* what went wrong, for logs and refusals */
	/* the trees sandboxes run on (roots.c): [0] "/", [i] runtime profile i's root;
	 * NULL where a profile's tree cannot serve, runtime_problem[i] saying why */
	char *runtime_roots[RUNTIMES_MAX + 1];
	bool runtime_kernel[RUNTIMES_MAX + 1];	     /* its Python can run the kernel tier */
	const char *runtime_shell[RUNTIMES_MAX + 1]; /* the user's login shell, seen at start */
	char runtime_problem[RUNTIMES_MAX + 1][256];
	size_t n_runtimes;
	unsigned ws_gen; /* counts the workspace templates made */
	struct {
		int fd;		 /* our end of its socket, or -1 */
		int pidfd;	 /* -1: none running */
		unsigned ws_gen; /* the template its copy of this env holds */
	} spawner;		 /* the process that clones sandboxes' children (spawner.c) */
};

/*
 * Steps of the spawn, in order. The child reports the one that failed on the
 * sync socket; the parent turns it into a name with sandbox_step_name().
 */
enum sandbox_step {
	STEP_NONE = 0,
	/* parent side */
	STEP_PREPARE,
	STEP_SOCKETS,
	STEP_CLONE,
	STEP_NETNS,
	STEP_RELEASE_CHILD,
	STEP_CHILD_DIED,
	/* child side */
	STEP_CGROUP_CREATE,
	STEP_CGROUP_ATTACH,
	STEP_WORKSPACE,
	STEP_UNSHARE,
	STEP_HOST_SCAN,
	STEP_NETNS_CHILD,
	STEP_WAIT_PARENT,
	STEP_CGROUP_NS,
	STEP_MOUNT_PRIVATE,
	STEP_MOUNT_ROOT,
	STEP_MOUNT_USR,
	STEP_MOUNT_ROOT_LINKS,
	STEP_MOUNT_ETC,
	STEP_MOUNT_DEV,
	STEP_MOUNT_PROC,
	STEP_MOUNT_TMP,
	STEP_MOUNT_WORKSPACE,
	STEP_MOUNT_LIB_DIR,
	STEP_PIVOT_ROOT,
	STEP_ROOT_READONLY,
	STEP_CHDIR,
	STEP_HOSTNAME,
	STEP_FDS,
	STEP_RLIMITS,
	STEP_CAPS_BOUNDING,
	STEP_SETGROUPS,
	STEP_SETGID,
	STEP_SETUID,
	STEP_CAPS_VERIFY,
	STEP_NO_NEW_PRIVS,
	STEP_SECCOMP,
	STEP_EXEC,
	STEP_MAX,
};

#define ETC_ENTRIES_MAX 64
#define ETC_NAME_MAX 64
#define ROOT_LINKS_MAX 8
#define FILE_BUF_MAX 1024

/* An /etc entry bound read-only into the sandbox's /etc: the runtime's, or for what
 * describes the host's network and clock, the host's. */
struct etc_entry {
	char name[ETC_NAME_MAX]; /* file name under /etc */
	bool from_host;		 /* the host's /etc, not the runtime's */
};

/* A top-level directory of the runtime's root (bin, lib, ...): a symlink into usr, or a
 * directory. */
struct root_link {
	const char *name; /* "bin", "lib", ... */
	char target[128]; /* symlink target when is_link */
	bool is_link;	  /* recreate as a symlink; otherwise bind the directory */
};

/*
 * Everything the child needs. The parent fills in what is cheap to know; the child,
 * off the daemon's loop, makes what costs system calls (its cgroup, its workspace) and
 * reads the host's /etc and root links. The child gets its own copy with the address
 * space.
 */
struct child_args {
	const SandboxEnv *env;
	char id[SANDBOX_ID_MAX + 1]; /* names the session's cgroup */
	int sync_fd;		     /* child's end of the sync socket */
	int ctl_child_fd;	     /* becomes fd 3 */
	int ctl_parent_fd; /* becomes fd 4: sessiond's end, kept by init for re-adoption */
	int init_fd;	   /* paddock-init, O_PATH */
	int root_fd;	   /* the tree it runs on, opened in its mount ns (roots.c) */
	int host_fd;	   /* the host's "/", the same way */
	bool net_in_child; /* the child unshares its netns itself (no egress link to make) */
	bool released;	   /* the child has read the daemon's "g" */
	uid_t uid;
	gid_t gid;
	SandboxLimits limits;
	const struct sock_fprog *seccomp_prog; /* the env's filter, installed last */
	char workspace[PATH_MAX];	       /* host path of the session's workspace */
	char ws_opts[128];		       /* mount options of the workspace tmpfs */
	char tmp_opts[64];		       /* mount options of /tmp */
	char passwd[FILE_BUF_MAX];	       /* generated /etc/passwd */
	char group[FILE_BUF_MAX];	       /* generated /etc/group */
	struct etc_entry etc[ETC_ENTRIES_MAX];
	size_t n_etc;
	struct root_link links[ROOT_LINKS_MAX];
	size_t n_links;
};

/* What the child writes to the sync socket when a step fails. */
struct child_failure {
	uint32_t step;
	int32_t err; /* positive errno */
};

/* child.c: a sandbox's child, from clone to the exec of paddock-init */
_Noreturn void child_main(struct child_args *a);
/* Close every fd from 3 up but those in keep (sorted in place; -1 entries are skipped). */
void close_fds_except(int *keep, size_t n);

/* spawner.c: the process that clones sandboxes' children for the daemon */
/* Ask for a's child, cloned into new namespaces (flags: CLONE_NEWPID, and CLONE_NEWNET or
 * not) as a child of ours; the spawner is started, or restarted, as needed. 0 once it has
 * the request, or -errno. Its answer comes on a->sync_fd's other end: */
int spawner_request(SandboxEnv *env, const struct child_args *a, uint64_t flags);
/* The answer on sync_fd, within timeout_ms (0: only if it is there): 0 with the child's
 * *pid and *pidfd; -EINPROGRESS if none came yet; -ECONNABORTED if the spawner went
 * without cloning it; or why there is no child, -errno. */
int spawner_reply(int sync_fd, int timeout_ms, pid_t *pid, int *pidfd);
/* The spawner killed, if there is one, and reaped if wait (else the daemon's SIGCHLD
 * handler reaps it). */
void spawner_stop(SandboxEnv *env, bool wait);

/* roots.c: the runtimes' trees, opened at start */
int roots_env_setup(SandboxEnv *env, const PaddockConfig *cfg);
void roots_env_clear(SandboxEnv *env);
/* path opened below root_fd as if root_fd were "/" (RESOLVE_IN_ROOT, no magic links):
 * an fd, or -errno. No allocation: safe in the child. */
int root_open_in(int root_fd, const char *path, int flags);
/* a->root_fd and a->host_fd, once the child has its own mount namespace. */
int roots_open_in_child(struct child_args *a);

/* ids.c, error.c */
bool sandbox_id_valid(const char *id);
const char *sandbox_step_name(unsigned step);
void sandbox_set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* cgroup.c */
/* instance names this daemon among others on the host (a hash of its state dir): the
 * default cgroup parent includes it, so two daemons never see each other's sessions. */
int cgroup_env_setup(SandboxEnv *env, const char *cgroup_root, const char *instance);
void cgroup_env_clear(SandboxEnv *env);
/* The session's cgroup, made by the child with its limits before it joins. */
int cgroup_create_in_child(struct child_args *a);
int cgroup_attach_in_child(struct child_args *a);
int cgroup_ns_in_child(struct child_args *a);
int cgroup_list_ids(const SandboxEnv *env, char ***ids, size_t *n, size_t *cap);

/* unit_cgroup.c */
/* The cgroup path (relative to the hierarchy's root) systemd gave a running unit.
 * Asked once, at start-up: it blocks on systemd's answer. */
int systemd_unit_cgroup(const char *unit, char *buf, size_t len);

/* How cgroup_kill_dir() stops a cgroup's tasks from forking while it kills them. */
enum cg_freezer {
	CG_FREEZER_NONE, /* v1 without a freezer hierarchy: rounds of kill only */
	CG_FREEZER_V1,	 /* freezer.state FROZEN / THAWED */
	CG_FREEZER_V2,	 /* cgroup.freeze, cgroup.events; cgroup.kill when nothing is kept */
};
/* SIGKILL every task of the cgroup at dir but the kept host pids (see sandbox_cgroup_kill). */
int cgroup_kill_dir(const char *dir, enum cg_freezer how, const pid_t *keep, size_t nkeep);

/* netns.c */
int egress_pool_parse(const char *cidr, uint32_t *net, unsigned *prefix);
int netns_setup_from_parent(SandboxEnv *env, int pidfd, pid_t pid);
/* Without egress the child makes its own network namespace and brings lo up. */
int netns_in_child(struct child_args *a);

/* mount.c */
int mount_prepare_from_parent(const SandboxEnv *env, const char *id, struct child_args *a);
/* The host's /etc entries and root links the sandbox will show (a->etc, a->links). */
int host_scan_in_child(struct child_args *a);
int mount_private_in_child(struct child_args *a);
int mount_root_in_child(struct child_args *a);
int mount_usr_in_child(struct child_args *a);
int mount_root_links_in_child(struct child_args *a);
int mount_etc_in_child(struct child_args *a);
int mount_dev_in_child(struct child_args *a);
int mount_proc_in_child(struct child_args *a);
int mount_tmp_in_child(struct child_args *a);
int mount_workspace_in_child(struct child_args *a);
int mount_lib_dir_in_child(struct child_args *a);
int mount_pivot_in_child(struct child_args *a);
int mount_root_readonly_in_child(struct child_args *a);
int mount_chdir_in_child(struct child_args *a);

/* privs.c */
/* The kernel's highest capability number, read once per environment. */
int privs_cap_last(void);
int hostname_in_child(struct child_args *a);
int rlimits_in_child(struct child_args *a);
int caps_bounding_in_child(struct child_args *a);
int setgroups_in_child(struct child_args *a);
int setgid_in_child(struct child_args *a);
int setuid_in_child(struct child_args *a);
int caps_verify_in_child(struct child_args *a);
int no_new_privs_in_child(struct child_args *a);

/* seccomp.c */
/* libcopy.c: what sandboxes see at /opt/paddock, on env->lib_copy (made by env.c); the
 * daemon's state dir lock held */
int lib_copy_setup(SandboxEnv *env);
void lib_copy_clear(SandboxEnv *env);

int seccomp_env_setup(SandboxEnv *env);
void seccomp_env_clear(SandboxEnv *env);
int seccomp_in_child(struct child_args *a);

/* workspace.c */
int workspace_create_in_child(struct child_args *a);
/* wsdisk.c: with workspace_backend = disk, make the template file system (a child of the
 * daemon runs mke2fs) and check a loop device can mount it; the child's half makes the
 * session's own copy and mounts it at a->workspace. */
int ws_disk_env_setup(SandboxEnv *env, const PaddockConfig *cfg);
void ws_disk_env_clear(SandboxEnv *env);
int ws_disk_create_in_child(struct child_args *a);
/* 0 when workspaces can be made (making the template if it is missing and a retry is
 * due); else the error, with sandbox_last_error() saying why. */
int ws_disk_ready(SandboxEnv *env);
/* Drop what a workspace mounted at path has not written, before it is unmounted for good. */
void ws_disk_shut_down(const char *path);
int workspace_list_ids(const SandboxEnv *env, char ***ids, size_t *n, size_t *cap);

/* Append a copy of id to a growing array unless it is already there. */
int ids_add(char ***ids, size_t *n, size_t *cap, const char *id);
/* ids_add() every subdirectory of dir named like a session; a missing dir adds nothing. */
int ids_add_dir(const char *dir, char ***ids, size_t *n, size_t *cap);

/*
 * Join a and b with a slash into buf without allocating (safe between clone and
 * exec). Returns -ENAMETOOLONG if it does not fit.
 */
static inline int path_join(char *buf, size_t len, const char *a, const char *b)
{
	size_t la = 0, lb = 0;

	while (a[la])
		la++;
	while (b[lb])
		lb++;
	if (la + 1 + lb + 1 > len)
		return -ENAMETOOLONG;
	for (size_t i = 0; i < la; i++)
		buf[i] = a[i];
	buf[la] = '/';
	for (size_t i = 0; i < lb; i++)
		buf[la + 1 + i] = b[i];
	buf[la + 1 + lb] = '\0';
	return 0;
}
