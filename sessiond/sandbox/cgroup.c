/* SPDX-License-Identifier: MIT */
/* Session cgroups on cgroup v2 and on v1/hybrid hierarchies: layout, limits, attach, usage. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include <linux/magic.h>

#include <systemd/sd-daemon.h>

#include "cleanup.h"
#include "clock.h"
#include "log.h"
#include "mountinfo.h"
#include "sandbox_internal.h"

static int cg_write(const char *dir, const char *file, const char *val)
{
	char path[PATH_MAX];
	_cleanup_close_ int fd = -1;
	size_t len = strlen(val);
	ssize_t n;

	if (snprintf(path, sizeof(path), "%s/%s", dir, file) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = write(fd, val, len);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EIO;
}

static int cg_write_i64(const char *dir, const char *file, int64_t v)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%" PRId64, v);
	return cg_write(dir, file, buf);
}

static int cg_read(const char *dir, const char *file, char *buf, size_t len)
{
	char path[PATH_MAX];
	_cleanup_close_ int fd = -1;
	ssize_t n;

	if (snprintf(path, sizeof(path), "%s/%s", dir, file) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	return 0;
}

/* A single-value file's number; "max" reads as UINT64_MAX. */
static uint64_t parse_u64(const char *buf)
{
	if (strncmp(buf, "max", 3) == 0)
		return UINT64_MAX;
	return strtoull(buf, NULL, 10);
}

/* The value of "key N" in a flat-keyed file such as memory.events or cpu.stat. */
static int parse_key(const char *buf, const char *key, uint64_t *ret)
{
	size_t klen = strlen(key);

	for (const char *line = buf; *line;) {
		const char *nl = strchr(line, '\n');

		if (strncmp(line, key, klen) == 0 && line[klen] == ' ') {
			*ret = strtoull(line + klen + 1, NULL, 10);
			return 0;
		}
		if (!nl)
			break;
		line = nl + 1;
	}
	return -ENODATA;
}

static int cg_read_u64(const char *dir, const char *file, uint64_t *ret)
{
	char buf[64];
	int r = cg_read(dir, file, buf, sizeof(buf));

	if (r < 0)
		return r;
	*ret = parse_u64(buf);
	return 0;
}

static int cg_read_key(const char *dir, const char *file, const char *key, uint64_t *ret)
{
	char buf[4096];
	int r = cg_read(dir, file, buf, sizeof(buf));

	if (r < 0)
		return r;
	return parse_key(buf, key, ret);
}

static int cgroup_dir(const CgroupHier *h, const char *id, char *buf, size_t len)
{
	if (!sandbox_id_valid(id))
		return -EINVAL;
	if (snprintf(buf, len, "%s/%s", h->parent, id) >= (int)len)
		return -ENAMETOOLONG;
	return 0;
}

static const CgroupHier *hier_with(const SandboxEnv *env, unsigned ctrl)
{
	for (size_t i = 0; i < env->n_hier; i++)
		if (env->hier[i].ctrls & ctrl)
			return &env->hier[i];
	return NULL;
}

static int mkdir_p(const char *path, mode_t mode)
{
	char buf[PATH_MAX];
	size_t len = strlen(path);

	if (len >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, len + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, mode) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, mode) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* Relative form of a configured cgroup_root: accepts "x/y", "/x/y" or "/sys/fs/cgroup/x/y". */
static const char *cgroup_root_relative(const char *root)
{
	if (strncmp(root, CGROUP_ROOT "/", strlen(CGROUP_ROOT "/")) == 0)
		root += strlen(CGROUP_ROOT "/");
	while (*root == '/')
		root++;
	return root;
}

static unsigned v1_ctrls_of(const char *superopts)
{
	static const struct {
		const char *name;
		unsigned bit;
	} known[] = {
		{ "memory", CG_MEMORY },   { "pids", CG_PIDS },	      { "cpu", CG_CPU },
		{ "cpuacct", CG_CPUACCT }, { "freezer", CG_FREEZER },
	};
	unsigned ctrls = 0;

	for (size_t i = 0; i < ARRAY_SIZE(known); i++)
		if (mount_options_have(superopts, known[i].name))
			ctrls |= known[i].bit;
	return ctrls;
}

/* A cgroup mount of either version: the lines v1_find_hierarchies() looks at. */
static bool cgroup_mount_line(const char *line, MountLine *m)
{
	return mountinfo_parse(line, m) == 0 &&
	       (strcmp(m->fstype, "cgroup") == 0 || strcmp(m->fstype, "cgroup2") == 0);
}

static int hier_add(SandboxEnv *env, const char *mnt, const char *rel, unsigned ctrls)
{
	CgroupHier *h;

	if (env->n_hier == CGROUP_HIER_MAX)
		return -E2BIG;
	h = &env->hier[env->n_hier];
	h->mount = strdup(mnt);
	if (!h->mount || asprintf(&h->parent, "%s/%s", mnt, rel) < 0)
		return -ENOMEM;
	h->ctrls = ctrls;
	env->n_hier++;
	return 0;
}

/*
 * Whether a v1 mount is one systemd tracks its units' processes in: its named
 * hierarchy, or the controller-less cgroup2 of a hybrid host.
 */
static bool v1_tracking_mount(const char *fstype, const char *superopts)
{
	return strcmp(fstype, "cgroup2") == 0 || mount_options_have(superopts, "name=systemd");
}

/*
 * Find the v1 hierarchies carrying the controllers paddock uses, from mountinfo. With
 * tracking, also those systemd tracks processes in (no controllers of ours): a sandbox
 * joins its unit's cgroup there too, so systemd counts it to that unit, not the daemon's.
 */
static int v1_find_hierarchies(SandboxEnv *env, const char *rel, bool tracking)
{
	_cleanup_fclose_ FILE *f = fopen("/proc/self/mountinfo", "re");
	_cleanup_free_ char *line = NULL;
	size_t cap = 0;
	unsigned have = 0;

	if (!f)
		return -errno;
	while (getline(&line, &cap, f) > 0) {
		MountLine m;
		unsigned ctrls;
		int r;

		if (!cgroup_mount_line(line, &m))
			continue;
		if (tracking && v1_tracking_mount(m.fstype, m.super_opts)) {
			r = hier_add(env, m.mnt, rel, 0);
			if (r < 0)
				return r;
			continue;
		}
		ctrls = strcmp(m.fstype, "cgroup") == 0 ? v1_ctrls_of(m.super_opts) & ~have : 0;
		if (!ctrls)
			continue;
		r = hier_add(env, m.mnt, rel, ctrls);
		if (r < 0)
			return r;
		have |= ctrls;
	}
	if ((have & (CG_MEMORY | CG_PIDS)) != (CG_MEMORY | CG_PIDS)) {
		sandbox_set_error("cgroup v1: memory and pids controllers must be mounted");
		return -EOPNOTSUPP;
	}
	return 0;
}

/* Our own cgroup on the unified hierarchy, from the "0::" line of /proc/self/cgroup. */
static int v2_own_cgroup(char *buf, size_t len)
{
	_cleanup_fclose_ FILE *f = fopen("/proc/self/cgroup", "re");
	char line[PATH_MAX + 16];

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "0::", 3) != 0)
			continue;
		line[strcspn(line, "\n")] = '\0';
		if (snprintf(buf, len, "%s", line + 3) >= (int)len)
			return -ENAMETOOLONG;
		return 0;
	}
	return -ENOENT;
}

/*
 * Hand dir's children the controllers we use that dir has. memory and pids are
 * required; cpu is used when present. *ctrls says what the children will have.
 */
static int v2_enable_controllers(const char *dir, unsigned *ctrls)
{
	char avail[512], req[64];
	char *save = NULL;
	unsigned have = 0;
	int r;

	r = cg_read(dir, "cgroup.controllers", avail, sizeof(avail));
	if (r < 0)
		return r;
	for (char *c = strtok_r(avail, " \n", &save); c; c = strtok_r(NULL, " \n", &save)) {
		if (strcmp(c, "memory") == 0)
			have |= CG_MEMORY;
		else if (strcmp(c, "pids") == 0)
			have |= CG_PIDS;
		else if (strcmp(c, "cpu") == 0)
			have |= CG_CPU;
	}
	if ((have & (CG_MEMORY | CG_PIDS)) != (CG_MEMORY | CG_PIDS))
		return -EOPNOTSUPP;
	snprintf(req, sizeof(req), "+memory +pids%s", (have & CG_CPU) ? " +cpu" : "");
	r = cg_write(dir, "cgroup.subtree_control", req);
	if (r < 0)
		return r;
	/* cpu.stat, read for usage, exists with or without the cpu controller */
	*ctrls = have | CG_CPUACCT;
	return 0;
}

/* Move pid into the leaf dir/name, made when missing. */
static int v2_leaf_take(const char *dir, const char *name, pid_t pid)
{
	char leaf[PATH_MAX], val[32];
	int r;

	if (snprintf(leaf, sizeof(leaf), "%s/%s", dir, name) >= (int)sizeof(leaf))
		return -ENAMETOOLONG;
	if (mkdir(leaf, 0755) < 0 && errno != EEXIST) {
		r = -errno;
		sandbox_set_error("cgroup v2: mkdir %s: %s", leaf, strerror(errno));
		return r;
	}
	snprintf(val, sizeof(val), "%d", (int)pid);
	r = cg_write(leaf, "cgroup.procs", val);
	if (r == -ESRCH)
		return 0; /* it exited meanwhile: nothing left to move */
	if (r < 0)
		sandbox_set_error("cgroup v2: moving %d into %s: %s", (int)pid, leaf, strerror(-r));
	return r;
}

/*
 * A unit's cgroup handed to us holds the unit's own process (systemd starts one). A
 * cgroup with processes cannot give controllers to its children, so they move to a
 * leaf of their own first; its name has a dot, so it is never taken for a sandbox id.
 */
#define KEEPER_LEAF "keeper.leaf"

static int v2_evict_processes(const char *dir)
{
	char path[PATH_MAX];
	_cleanup_fclose_ FILE *f = NULL;
	int pid, r = 0;

	if (snprintf(path, sizeof(path), "%s/cgroup.procs", dir) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (r >= 0 && fscanf(f, "%d", &pid) == 1)
		r = v2_leaf_take(dir, KEEPER_LEAF, pid);
	return r;
}

/*
 * mkdir -p of a cgroup below the root. A cgroup has only the controllers its parent's
 * subtree_control gives it, so each level that gets a new child first hands memory, pids
 * (and cpu) on; levels that exist already (systemd's slices, say) are left as they are.
 */
static int v2_make_path(const char *path)
{
	char buf[PATH_MAX];
	size_t root_len = strlen(CGROUP_ROOT), len = strlen(path);
	unsigned ctrls;

	if (len >= sizeof(buf) || strncmp(path, CGROUP_ROOT "/", root_len + 1) != 0)
		return -EINVAL;
	memcpy(buf, path, len + 1);
	for (char *p = buf + root_len + 1;; p++) {
		char keep = *p;
		struct stat st;
		int r;

		if (keep != '/' && keep != '\0')
			continue;
		*p = '\0';
		if (stat(buf, &st) < 0) {
			char *up = strrchr(buf, '/');

			*up = '\0';
			r = v2_enable_controllers(buf, &ctrls);
			*up = '/';
			if (r < 0)
				return r;
			if (mkdir(buf, 0755) < 0 && errno != EEXIST)
				return -errno;
		}
		if (keep == '\0')
			return 0;
		*p = '/';
	}
}

static int v2_setup(SandboxEnv *env, const char *cgroup_root, const char *instance)
{
	char own[PATH_MAX], own_dir[PATH_MAX];
	CgroupHier *h = &env->hier[0];
	int r;

	h->mount = strdup(CGROUP_ROOT);
	if (!h->mount)
		return -ENOMEM;
	env->n_hier = 1;

	if (cgroup_root && *cgroup_root) {
		/* An operator-chosen (delegated) place: create it and enable what we need. */
		if (asprintf(&h->parent, "%s/%s", CGROUP_ROOT, cgroup_root_relative(cgroup_root)) <
		    0)
			return -ENOMEM;
		r = v2_make_path(h->parent);
		if (r >= 0)
			r = v2_evict_processes(h->parent);
		if (r >= 0)
			r = v2_enable_controllers(h->parent, &h->ctrls);
		if (r < 0)
			sandbox_set_error("cgroup v2: preparing %s: %s", h->parent, strerror(-r));
		return r;
	}

	r = v2_own_cgroup(own, sizeof(own));
	if (r < 0) {
		sandbox_set_error("cgroup v2: reading /proc/self/cgroup: %s", strerror(-r));
		return r;
	}
	/* Started from .../supervisor by an earlier run: our unit is the parent. */
	{
		size_t ol = strlen(own);
		const char *sup = "/supervisor";

		if (ol > strlen(sup) && strcmp(own + ol - strlen(sup), sup) == 0)
			own[ol - strlen(sup)] = '\0';
	}
	if (snprintf(own_dir, sizeof(own_dir), "%s%s", CGROUP_ROOT,
		     strcmp(own, "/") == 0 ? "" : own) >= (int)sizeof(own_dir))
		return -ENAMETOOLONG;
	if (asprintf(&h->parent, "%s/sessions-%s", own_dir, instance) < 0)
		return -ENOMEM;
	env->cgroup_parent_ours = true;

	/*
	 * A non-root cgroup with processes cannot give controllers to its children
	 * (no internal processes), so we move ourselves into a leaf beside the
	 * sessions first.
	 */
	if (strcmp(own, "/") != 0) {
		r = v2_leaf_take(own_dir, "supervisor", getpid());
		if (r < 0)
			return r;
		r = v2_enable_controllers(own_dir, &h->ctrls);
		if (r < 0) {
			sandbox_set_error("cgroup v2: enabling controllers in %s: %s", own_dir,
					  strerror(-r));
			return r;
		}
	} else {
		/* The (namespace) root may hold processes; it usually delegates already. */
		(void)v2_enable_controllers(own_dir, &h->ctrls);
	}
	if (mkdir(h->parent, 0755) < 0 && errno != EEXIST) {
		r = -errno;
		sandbox_set_error("cgroup v2: mkdir %s: %s", h->parent, strerror(errno));
		return r;
	}
	r = v2_enable_controllers(h->parent, &h->ctrls);
	if (r < 0)
		sandbox_set_error("cgroup v2: enabling controllers in %s: %s", h->parent,
				  strerror(-r));
	return r;
}

/* cgroup_root = systemd:UNIT: the cgroup systemd keeps for that (delegated) unit. */
#define SYSTEMD_UNIT_ROOT "systemd:"

/*
 * The configured root with a systemd:UNIT resolved into buf; NULL (the default place)
 * for that setting on a host systemd does not run, such as a container started
 * otherwise: there is no unit there.
 */
static int resolve_unit_root(const char **root, char *buf, size_t len, bool *from_unit)
{
	const char *unit;
	int r;

	*from_unit = false;
	if (!*root || strncmp(*root, SYSTEMD_UNIT_ROOT, strlen(SYSTEMD_UNIT_ROOT)) != 0)
		return 0;
	unit = *root + strlen(SYSTEMD_UNIT_ROOT);
	if (sd_booted() <= 0) {
		log_warn("cgroup_root = %s, but systemd does not run this host: sessions go in "
			 "the default place",
			 *root);
		*root = NULL;
		return 0;
	}
	r = systemd_unit_cgroup(unit, buf, len);
	if (r < 0)
		return r; /* it said why */
	*root = buf;
	*from_unit = true;
	return 0;
}

int cgroup_env_setup(SandboxEnv *env, const char *cgroup_root, const char *instance)
{
	char v1_default[64], unit_cgroup[PATH_MAX];
	bool from_unit;
	struct statfs sfs;
	int r;

	r = resolve_unit_root(&cgroup_root, unit_cgroup, sizeof(unit_cgroup), &from_unit);
	if (r < 0)
		return r;
	if (statfs(CGROUP_ROOT, &sfs) < 0) {
		r = -errno;
		sandbox_set_error("statfs %s: %s", CGROUP_ROOT, strerror(errno));
		return r;
	}
	env->v2 = sfs.f_type == CGROUP2_SUPER_MAGIC;
	if (env->v2)
		return v2_setup(env, cgroup_root, instance);

	snprintf(v1_default, sizeof(v1_default), "paddock/%s", instance);
	env->cgroup_parent_ours = !(cgroup_root && *cgroup_root);
	r = v1_find_hierarchies(
		env, cgroup_root && *cgroup_root ? cgroup_root_relative(cgroup_root) : v1_default,
		from_unit);
	if (r < 0)
		return r;
	for (size_t i = 0; i < env->n_hier; i++) {
		r = mkdir_p(env->hier[i].parent, 0755);
		if (r < 0) {
			sandbox_set_error("cgroup v1: mkdir %s: %s", env->hier[i].parent,
					  strerror(-r));
			return r;
		}
	}
	return 0;
}

void cgroup_env_clear(SandboxEnv *env)
{
	for (size_t i = 0; i < env->n_hier; i++) {
		/* The daemon's own directory goes with it once empty: a state dir of tests, or
		 * of a node taken down, leaves none behind (sessions kept keep it busy). The
		 * tracking hierarchies' place is the unit's, not ours. */
		if (env->cgroup_parent_ours && env->hier[i].ctrls && env->hier[i].parent)
			(void)rmdir(env->hier[i].parent);
		free(env->hier[i].mount);
		free(env->hier[i].parent);
	}
	env->n_hier = 0;
}

/* The cpu controller's file for a sandbox's weight, and its value. */
static const char *cpu_weight_file(bool v2)
{
	return v2 ? "cpu.weight" : "cpu.shares";
}

/* The least weight there is: a sandbox warming up in the pool. */
static const char *cpu_weight_least(bool v2)
{
	return v2 ? "1" : "2";
}

static int cgroup_limits_v2(const CgroupHier *h, const char *dir, const SandboxLimits *l)
{
	char cpu[64];
	int r;

	r = cg_write_i64(dir, "memory.max", l->memory_bytes);
	if (r < 0)
		return r;
	/* Absent when the kernel has no swap accounting: then there is no swap to limit. */
	r = cg_write(dir, "memory.swap.max", "0");
	if (r < 0 && r != -ENOENT)
		return r;
	r = cg_write_i64(dir, "pids.max", l->pids);
	if (r < 0)
		return r;
	if (!(h->ctrls & CG_CPU))
		return 0;
	if (l->cpu_background) {
		r = cg_write(dir, cpu_weight_file(true), cpu_weight_least(true));
		if (r < 0)
			return r;
	}
	snprintf(cpu, sizeof(cpu), "%" PRId64 " 100000", l->cpu_percent * 1000);
	return cg_write(dir, "cpu.max", cpu);
}

static int cgroup_limits_v1(const CgroupHier *h, const char *dir, const SandboxLimits *l)
{
	int r;

	if (h->ctrls & CG_MEMORY) {
		r = cg_write_i64(dir, "memory.limit_in_bytes", l->memory_bytes);
		if (r < 0)
			return r;
		/* memsw is memory+swap; equal to the memory limit means no swap. */
		r = cg_write_i64(dir, "memory.memsw.limit_in_bytes", l->memory_bytes);
		if (r < 0 && r != -ENOENT)
			return r;
	}
	if (h->ctrls & CG_PIDS) {
		r = cg_write_i64(dir, "pids.max", l->pids);
		if (r < 0)
			return r;
	}
	if (h->ctrls & CG_CPU) {
		r = cg_write(dir, "cpu.cfs_period_us", "100000");
		if (r < 0)
			return r;
		r = cg_write_i64(dir, "cpu.cfs_quota_us", l->cpu_percent * 1000);
		if (r < 0)
			return r;
		if (l->cpu_background)
			return cg_write(dir, cpu_weight_file(false), cpu_weight_least(false));
	}
	return 0;
}

/*
 * Everything from here to cgroup_ns_in_child() runs in the child, before it changes
 * namespaces: it is a copy of the single-threaded daemon, so it may format strings, but
 * it allocates nothing. The daemon's loop does not wait for these mkdirs and writes.
 */

int cgroup_create_in_child(struct child_args *a)
{
	const SandboxEnv *env = a->env;
	char dir[PATH_MAX];
	int r;

	for (size_t i = 0; i < env->n_hier; i++) {
		const CgroupHier *h = &env->hier[i];

		r = cgroup_dir(h, a->id, dir, sizeof(dir));
		if (r < 0)
			return r;
		/* A failure leaves what was made to the parent: it removes the cgroup by id. */
		if (mkdir(dir, 0755) < 0)
			return -errno;
		r = env->v2 ? cgroup_limits_v2(h, dir, &a->limits) :
			      cgroup_limits_v1(h, dir, &a->limits);
		if (r < 0)
			return r;
	}
	return 0;
}

static int attach_one(const CgroupHier *h, const char *id)
{
	char dir[PATH_MAX];
	int r = cgroup_dir(h, id, dir, sizeof(dir));

	return r < 0 ? r : cg_write(dir, "cgroup.procs", "0");
}

/*
 * The child moves itself ("0" is the writer), with its limits already set. Done here
 * rather than by the daemon: the first migration into a v1 hierarchy can wait out an
 * RCU grace period (milliseconds), and the daemon's loop must not wait with it. The v1
 * freezer comes last, whatever the order of the mounts: a freeze of the sandboxes
 * (a kill, an operator) then stops a child that is already in every other cgroup.
 */
int cgroup_attach_in_child(struct child_args *a)
{
	const SandboxEnv *env = a->env;

	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < env->n_hier; i++) {
			const CgroupHier *h = &env->hier[i];
			int r;

			if (((h->ctrls & CG_FREEZER) != 0) != (pass == 1))
				continue;
			r = attach_one(h, a->id);
			if (r < 0)
				return r;
		}
	return 0;
}

int sandbox_cgroup_procs_open(SandboxEnv *env, const char *id, int *fds, size_t max)
{
	size_t n = 0;

	if (!sandbox_id_valid(id))
		return -EINVAL;
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < env->n_hier; i++) {
			const CgroupHier *h = &env->hier[i];
			char dir[PATH_MAX], path[PATH_MAX];
			int r = cgroup_dir(h, id, dir, sizeof(dir));

			if (((h->ctrls & CG_FREEZER) != 0) != (pass == 1))
				continue;
			if (r == 0 && snprintf(path, sizeof(path), "%s/cgroup.procs", dir) >=
					      (int)sizeof(path))
				r = -ENAMETOOLONG;
			if (r == 0 && n == max)
				r = -E2BIG;
			if (r == 0 && (fds[n] = open(path, O_WRONLY | O_CLOEXEC)) < 0)
				r = -errno;
			if (r < 0) {
				while (n > 0)
					close(fds[--n]);
				return r;
			}
			n++;
		}
	return (int)n;
}

int cgroup_ns_in_child(struct child_args *a)
{
	(void)a;
	/* After we joined it: the session cgroup becomes the namespace's root. */
	return unshare(CLONE_NEWCGROUP) < 0 ? -errno : 0;
}

int sandbox_cgroup_remove(SandboxEnv *env, const char *id)
{
	char dir[PATH_MAX];
	int ret = 0;

	for (size_t i = 0; i < env->n_hier; i++) {
		int r = cgroup_dir(&env->hier[i], id, dir, sizeof(dir));

		if (r < 0)
			return r;
		if (rmdir(dir) < 0 && errno != ENOENT) {
			r = -errno;
			if (ret == 0 || r == -EBUSY)
				ret = r;
		}
	}
	if (ret < 0)
		sandbox_set_error("removing cgroup %s: %s", id, strerror(-ret));
	return ret;
}

int sandbox_cgroup_remove_wait(SandboxEnv *env, const char *id, unsigned tries,
			       unsigned interval_ms)
{
	int r = -EBUSY;

	for (unsigned i = 0; i < tries && r == -EBUSY; i++) {
		struct timespec ts = { interval_ms / 1000, (long)(interval_ms % 1000) * 1000000 };

		if (i > 0)
			nanosleep(&ts, NULL);
		r = sandbox_cgroup_remove(env, id);
	}
	return r;
}

/* How long sandbox_cgroup_kill() may take in all, and the wait for one freeze. */
#define KILL_BUDGET_MS 2000
#define FREEZE_WAIT_MS 200

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

static bool pid_kept(pid_t pid, const pid_t *keep, size_t nkeep)
{
	for (size_t i = 0; i < nkeep; i++)
		if (keep[i] == pid)
			return true;
	return false;
}

/* A zombie (or a pid already gone) needs no signal: it is its parent's to reap. */
static bool pid_dead(pid_t pid)
{
	char path[64], buf[512], *p;
	_cleanup_close_ int fd = -1;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return true;
	n = read(fd, buf, sizeof(buf) - 1);
	if (n <= 0)
		return true;
	buf[n] = '\0';
	p = strrchr(buf, ')');
	return !p || p[1] == '\0' || p[2] == 'Z' || p[2] == 'X';
}

/*
 * Walk dir's cgroup.procs: with sig, send it to every live task that is not
 * kept. Returns how many such tasks there were.
 */
static int procs_walk(const char *dir, const pid_t *keep, size_t nkeep, int sig)
{
	char path[PATH_MAX];
	_cleanup_fclose_ FILE *f = NULL;
	long pid;
	int live = 0;

	if (snprintf(path, sizeof(path), "%s/cgroup.procs", dir) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fscanf(f, "%ld", &pid) == 1) {
		if (pid <= 0 || pid_kept((pid_t)pid, keep, nkeep) || pid_dead((pid_t)pid))
			continue;
		live++;
		if (sig)
			kill((pid_t)pid, sig);
	}
	return live;
}

static int freeze_set(const char *dir, enum cg_freezer how, bool frozen)
{
	if (how == CG_FREEZER_V2)
		return cg_write(dir, "cgroup.freeze", frozen ? "1" : "0");
	if (how == CG_FREEZER_V1)
		return cg_write(dir, "freezer.state", frozen ? "FROZEN" : "THAWED");
	return 0;
}

/* Wait (bounded) until every task of dir is frozen; a timeout is not an error. */
static void freeze_wait(const char *dir, enum cg_freezer how, uint64_t deadline)
{
	char buf[256];
	uint64_t key;

	for (;;) {
		if (how == CG_FREEZER_V2) {
			if (cg_read_key(dir, "cgroup.events", "frozen", &key) < 0 || key == 1)
				return;
		} else if (how == CG_FREEZER_V1) {
			if (cg_read(dir, "freezer.state", buf, sizeof(buf)) < 0 ||
			    strncmp(buf, "FROZEN", 6) == 0)
				return;
		} else {
			return;
		}
		if (now_ms() >= deadline)
			return;
		sleep_ms(1);
	}
}

/* Wait (bounded) until no task but the kept ones is alive; true if that happened. */
static bool only_kept_left(const char *dir, const pid_t *keep, size_t nkeep, uint64_t deadline)
{
	for (;;) {
		int live = procs_walk(dir, keep, nkeep, 0);

		if (live <= 0)
			return live == 0 || live == -ENOENT;
		if (now_ms() >= deadline)
			return false;
		sleep_ms(1);
	}
}

int cgroup_kill_dir(const char *dir, enum cg_freezer how, const pid_t *keep, size_t nkeep)
{
	uint64_t deadline = now_ms() + KILL_BUDGET_MS;
	int r;

	/* Nothing to spare: the kernel kills the whole cgroup in one go (v2, Linux 5.14+). */
	if (how == CG_FREEZER_V2 && nkeep == 0 && cg_write(dir, "cgroup.kill", "1") == 0)
		return only_kept_left(dir, keep, nkeep, deadline) ? 0 : -ETIMEDOUT;

	/*
	 * Frozen, no task can fork, so the list we read is complete; after
	 * SIGKILL and the thaw, the victims die without forking again. A task
	 * mid-fork when the freeze began may still show up: hence the rounds.
	 */
	for (;;) {
		uint64_t now = now_ms();
		int victims;

		if (now >= deadline)
			return -ETIMEDOUT;
		r = freeze_set(dir, how, true);
		if (r < 0 && r != -ENOENT)
			return r;
		freeze_wait(dir, how,
			    now + FREEZE_WAIT_MS < deadline ? now + FREEZE_WAIT_MS : deadline);
		victims = procs_walk(dir, keep, nkeep, SIGKILL);
		r = freeze_set(dir, how, false);
		if (victims == -ENOENT)
			return 0; /* the cgroup is gone, and its tasks with it */
		if (victims < 0)
			return victims;
		if (r < 0 && r != -ENOENT)
			return r;
		if (victims == 0)
			return 0;
		if (only_kept_left(dir, keep, nkeep,
				   now_ms() + 50 < deadline ? now_ms() + 50 : deadline))
			return 0;
	}
}

int sandbox_cgroup_kill(SandboxEnv *env, const char *id, const pid_t *keep_host_pids, size_t nkeep)
{
	const CgroupHier *h = env->v2 ? &env->hier[0] : hier_with(env, CG_FREEZER);
	enum cg_freezer how = env->v2 ? CG_FREEZER_V2 : CG_FREEZER_V1;
	char dir[PATH_MAX];
	int r;

	if (!h) {
		/* v1 without a freezer hierarchy: kill in rounds, pids.max bounds the race. */
		h = hier_with(env, CG_PIDS);
		how = CG_FREEZER_NONE;
	}
	if (!h || (nkeep && !keep_host_pids))
		return -EINVAL;
	r = cgroup_dir(h, id, dir, sizeof(dir));
	if (r < 0)
		return r;
	r = cgroup_kill_dir(dir, how, keep_host_pids, nkeep);
	if (r < 0)
		sandbox_set_error("killing the tasks of cgroup %s: %s", id, strerror(-r));
	return r;
}

int sandbox_usage(SandboxEnv *env, const char *id, SandboxUsage *ret)
{
	const CgroupHier *mem = hier_with(env, CG_MEMORY), *pids = hier_with(env, CG_PIDS);
	const CgroupHier *acct = hier_with(env, CG_CPUACCT);
	char dir[PATH_MAX];
	uint64_t v;
	int r;

	*ret = (SandboxUsage){ 0 };
	if (!sandbox_id_valid(id))
		return -EINVAL;

	if (acct) {
		r = cgroup_dir(acct, id, dir, sizeof(dir));
		if (r < 0)
			return r;
		if (env->v2) {
			r = cg_read_key(dir, "cpu.stat", "usage_usec", &v);
			if (r >= 0)
				ret->cpu_ns = v * 1000;
		} else {
			r = cg_read_u64(dir, "cpuacct.usage", &ret->cpu_ns);
		}
		if (r < 0)
			return r;
	}

	r = cgroup_dir(mem, id, dir, sizeof(dir));
	if (r < 0)
		return r;
	r = cg_read_u64(dir, env->v2 ? "memory.current" : "memory.usage_in_bytes",
			&ret->memory_current);
	if (r < 0)
		return r;
	/* The peak is missing before Linux 5.19 on v2: report 0 then. */
	r = cg_read_u64(dir, env->v2 ? "memory.peak" : "memory.max_usage_in_bytes",
			&ret->memory_peak);
	if (r < 0 && r != -ENOENT)
		return r;
	r = cg_read_key(dir, env->v2 ? "memory.events" : "memory.oom_control", "oom_kill",
			&ret->oom_kills);
	if (r < 0 && r != -ENODATA)
		return r;

	r = cgroup_dir(pids, id, dir, sizeof(dir));
	if (r < 0)
		return r;
	return cg_read_u64(dir, "pids.current", &ret->pids_current);
}

int cgroup_list_ids(const SandboxEnv *env, char ***ids, size_t *n, size_t *cap)
{
	for (size_t i = 0; i < env->n_hier; i++) {
		int r = ids_add_dir(env->hier[i].parent, ids, n, cap);

		if (r < 0)
			return r;
	}
	return 0;
}

/* Open counter files, read again with pread() at offset 0 (the kernel regenerates them). */
struct SandboxCounters {
	bool v2;     /* flat-keyed cpu.stat and memory.events */
	int cpu_fd;  /* cpuacct.usage or cpu.stat; -1 when not available */
	int peak_fd; /* memory.max_usage_in_bytes or memory.peak; -1 when not available */
	int oom_fd;  /* memory.oom_control or memory.events */
};

static int open_in(const CgroupHier *h, const char *id, const char *file)
{
	char dir[PATH_MAX], path[PATH_MAX];

	if (!h || cgroup_dir(h, id, dir, sizeof(dir)) < 0 ||
	    snprintf(path, sizeof(path), "%s/%s", dir, file) >= (int)sizeof(path))
		return -1;
	return open(path, O_RDONLY | O_CLOEXEC);
}

int sandbox_counters_open(SandboxEnv *env, const char *id, SandboxCounters **ret)
{
	const CgroupHier *mem = hier_with(env, CG_MEMORY), *acct = hier_with(env, CG_CPUACCT);
	SandboxCounters *c;

	if (!sandbox_id_valid(id))
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->v2 = env->v2;
	c->cpu_fd = open_in(acct, id, env->v2 ? "cpu.stat" : "cpuacct.usage");
	c->peak_fd = open_in(mem, id, env->v2 ? "memory.peak" : "memory.max_usage_in_bytes");
	c->oom_fd = open_in(mem, id, env->v2 ? "memory.events" : "memory.oom_control");
	if (c->oom_fd < 0) {
		int r = -errno;

		sandbox_counters_free(c);
		return r;
	}
	*ret = c;
	return 0;
}

static int pread_text(int fd, char *buf, size_t len)
{
	ssize_t n = pread(fd, buf, len - 1, 0);

	if (n < 0)
		return -errno;
	buf[n] = '\0';
	return 0;
}

int sandbox_counters_read(SandboxCounters *c, SandboxUsage *u, bool with_peak)
{
	char buf[1024];
	uint64_t v;

	*u = (SandboxUsage){ 0 };
	if (c->cpu_fd >= 0 && pread_text(c->cpu_fd, buf, sizeof(buf)) == 0) {
		if (!c->v2)
			u->cpu_ns = parse_u64(buf);
		else if (parse_key(buf, "usage_usec", &v) == 0)
			u->cpu_ns = v * 1000;
	}
	if (with_peak && c->peak_fd >= 0 && pread_text(c->peak_fd, buf, sizeof(buf)) == 0)
		u->memory_peak = parse_u64(buf);
	if (pread_text(c->oom_fd, buf, sizeof(buf)) < 0)
		return -errno;
	if (parse_key(buf, "oom_kill", &v) == 0)
		u->oom_kills = v;
	return 0;
}

SandboxCounters *sandbox_counters_free(SandboxCounters *c)
{
	if (!c)
		return NULL;
	if (c->cpu_fd >= 0)
		close(c->cpu_fd);
	if (c->peak_fd >= 0)
		close(c->peak_fd);
	if (c->oom_fd >= 0)
		close(c->oom_fd);
	free(c);
	return NULL;
}

int sandbox_cpu_foreground(SandboxEnv *env, const char *id)
{
	return sandbox_cpu_weight(env, id, 100); /* the default of cpu.weight; cpu.shares 1024 */
}

int sandbox_cpu_weight(SandboxEnv *env, const char *id, int64_t weight)
{
	const CgroupHier *h = hier_with(env, CG_CPU);
	char dir[PATH_MAX];
	int64_t v = weight;
	int r;

	if (weight < 1 || weight > 10000)
		return -EINVAL;
	if (!h || !(h->ctrls & CG_CPU))
		return 0; /* no cpu controller: nothing to weigh */
	r = cgroup_dir(h, id, dir, sizeof(dir));
	if (r < 0)
		return r;
	if (!env->v2) {
		v = weight * 1024 / 100;
		v = v < 2 ? 2 : v > 262144 ? 262144 : v;
	}
	return cg_write_i64(dir, cpu_weight_file(env->v2), v);
}

void sandbox_env_remove_cgroup_parent(SandboxEnv *env)
{
	for (size_t i = 0; i < env->n_hier; i++) {
		char up[PATH_MAX];
		char *slash;

		/* Busy (sessions left running for a restart) or gone: either way, nothing to do. */
		if (!env->hier[i].parent || rmdir(env->hier[i].parent) < 0)
			continue;
		/* On v1 the default parent is paddock/<instance>: the shared level goes too once
		 * the last installation on the host has left it empty. */
		if (env->v2 ||
		    snprintf(up, sizeof(up), "%s", env->hier[i].parent) >= (int)sizeof(up))
			continue;
		slash = strrchr(up, '/');
		if (slash && strcmp(slash, "/paddock") != 0) {
			*slash = '\0';
			if (strcmp(strrchr(up, '/') ?: "", "/paddock") == 0)
				rmdir(up);
		}
	}
}
