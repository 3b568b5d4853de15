/* SPDX-License-Identifier: MIT */
/* The sandbox environment fixed for the daemon's lifetime. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "sandbox_internal.h"

/* mkdir that accepts an existing directory. */
static int mkdir_exist_ok(const char *path, mode_t mode)
{
	struct stat st;

	if (mkdir(path, mode) == 0)
		return 0;
	if (errno != EEXIST)
		return -errno;
	if (stat(path, &st) < 0)
		return -errno;
	return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

static char *path_dup(const char *a, const char *b)
{
	char *p;

	if (asprintf(&p, "%s/%s", a, b) < 0)
		return NULL;
	return p;
}

static void sandbox_env_freep(SandboxEnv **env)
{
	sandbox_env_free(*env);
}

/* 8 hex digits of FNV-1a over the state dir's real path: stable for one installation. */
static const char *instance_name(const char *state_dir, char buf[9])
{
	char real[PATH_MAX];
	const char *p = realpath(state_dir, real) ? real : state_dir;
	uint32_t h = 2166136261u;

	for (; *p; p++)
		h = (h ^ (uint8_t)*p) * 16777619u;
	snprintf(buf, 9, "%08x", h);
	return buf;
}

static bool iface_prefix_valid(const char *p)
{
	size_t n = p ? strlen(p) : 0;

	if (n == 0 || n > 8)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((p[i] >= 'a' && p[i] <= 'z') || (p[i] >= '0' && p[i] <= '9') || p[i] == '-' ||
		      p[i] == '_'))
			return false;
	return true;
}

/* Egress settings: the pool, the host-side names and namespace. Nothing when egress is off. */
static int egress_env_setup(SandboxEnv *env, const PaddockConfig *cfg)
{
	unsigned prefix;
	int r;

	/* The pool serves sessions of every runtime whose egress is on. */
	env->egress = cfg->egress;
	for (size_t i = 0; i < cfg->n_runtimes; i++)
		env->egress |= cfg->runtimes[i].egress;
	if (!env->egress)
		return 0;
	if (egress_pool_parse(cfg->egress_pool, &env->egress_net, &prefix) < 0) {
		sandbox_set_error("egress_pool: '%s' is not an IPv4 network of /8 to /30",
				  cfg->egress_pool ? cfg->egress_pool : "");
		return -EINVAL;
	}
	env->egress_slots = 1u << (30 - prefix);
	if (!iface_prefix_valid(cfg->egress_host_iface_prefix)) {
		sandbox_set_error("egress_host_iface_prefix: 1 to 8 of a-z, 0-9, '-', '_'");
		return -EINVAL;
	}
	snprintf(env->egress_prefix, sizeof(env->egress_prefix), "%s",
		 cfg->egress_host_iface_prefix);
	if (cfg->egress_host_netns && cfg->egress_host_netns[0]) {
		env->egress_netns_fd = open(cfg->egress_host_netns, O_RDONLY | O_CLOEXEC);
		if (env->egress_netns_fd < 0) {
			r = -errno;
			sandbox_set_error("egress_host_netns: opening %s: %s",
					  cfg->egress_host_netns, strerror(errno));
			return r;
		}
	}
	return 0;
}

int sandbox_env_new(const PaddockConfig *cfg, SandboxEnv **ret)
{
	_cleanup_free_ char *init_path = NULL;
	_cleanup_(sandbox_env_freep) SandboxEnv *env = NULL;
	char instance[9];
	struct stat st;
	int r;

	if (!cfg || !cfg->state_dir || !cfg->lib_dir || cfg->state_dir[0] != '/' ||
	    cfg->lib_dir[0] != '/') {
		sandbox_set_error("state_dir and lib_dir must be absolute paths");
		return -EINVAL;
	}
	env = calloc(1, sizeof(*env));
	if (!env)
		return -ENOMEM;
	env->init_fd = -1;
	env->keep_in_child_fd = -1;
	env->host_netns_fd = -1;
	env->egress_netns_fd = -1;
	env->ws_template_fd = -1;
	env->spawner.fd = env->spawner.pidfd = -1;

	env->state_dir = strdup(cfg->state_dir);
	env->lib_dir = strdup(cfg->lib_dir);
	env->root_dir = path_dup(cfg->state_dir, "root");
	env->workspaces_dir = path_dup(cfg->state_dir, "workspaces");
	env->lib_copy = path_dup(cfg->state_dir, "lib");
	init_path = path_dup(cfg->lib_dir, "paddock-init");
	if (!env->state_dir || !env->lib_dir || !env->root_dir || !env->workspaces_dir ||
	    !env->lib_copy || !init_path)
		return -ENOMEM;

	/* The state dir holds workspaces of every session: only root may look in. */
	r = mkdir_exist_ok(env->state_dir, 0700);
	if (r == 0)
		r = mkdir_exist_ok(env->workspaces_dir, 0700);
	if (r == 0)
		r = mkdir_exist_ok(env->root_dir, 0755);
	if (r == 0)
		r = mkdir_exist_ok(env->lib_copy, 0755);
	if (r < 0) {
		sandbox_set_error("creating directories under %s: %s", env->state_dir,
				  strerror(-r));
		return r;
	}

	env->init_fd = open(init_path, O_PATH | O_CLOEXEC);
	if (env->init_fd < 0 || fstat(env->init_fd, &st) < 0) {
		r = -errno;
		sandbox_set_error("opening %s: %s", init_path, strerror(errno));
		return r;
	}
	if (!S_ISREG(st.st_mode) || !(st.st_mode & S_IXOTH)) {
		sandbox_set_error("%s is not a world-executable file", init_path);
		return -ENOEXEC;
	}

	env->cap_last = privs_cap_last();
	env->host_netns_fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (env->host_netns_fd < 0) {
		r = -errno;
		sandbox_set_error("opening /proc/self/ns/net: %s", strerror(errno));
		return r;
	}

	r = egress_env_setup(env, cfg);
	if (r < 0)
		return r; /* it said why */
	r = roots_env_setup(env, cfg);
	if (r < 0)
		return r; /* it said why */

	r = cgroup_env_setup(env, cfg->cgroup_root, instance_name(cfg->state_dir, instance));
	if (r < 0)
		return r; /* cgroup_env_setup said why */
	r = seccomp_env_setup(env);
	if (r < 0)
		return r; /* it said why */
	r = lib_copy_setup(env);
	if (r < 0)
		return r; /* it said why */
	r = ws_disk_env_setup(env, cfg);
	if (r < 0)
		return r; /* it said why */

	*ret = TAKE_PTR(env);
	return 0;
}

void sandbox_env_keep_in_child(SandboxEnv *env, int fd)
{
	env->keep_in_child_fd = fd;
}

SandboxEnv *sandbox_env_free(SandboxEnv *env)
{
	if (!env)
		return NULL;
	spawner_stop(env, true);
	lib_copy_clear(env);
	ws_disk_env_clear(env);
	cgroup_env_clear(env);
	seccomp_env_clear(env);
	roots_env_clear(env);
	safe_close(env->init_fd);
	safe_close(env->host_netns_fd);
	safe_close(env->egress_netns_fd);
	free(env->state_dir);
	free(env->lib_dir);
	free(env->root_dir);
	free(env->workspaces_dir);
	free(env->lib_copy);
	free(env);
	return NULL;
}

const char *sandbox_env_cgroup_version(const SandboxEnv *env)
{
	return env->v2 ? "v2" : "v1";
}

const char *sandbox_env_workspace_backend(const SandboxEnv *env)
{
	return env->ws_disk ? "disk" : "tmpfs";
}

int sandbox_list_leftovers(SandboxEnv *env, char ***ids_ret, size_t *n_ret)
{
	char **ids = NULL;
	size_t n = 0, cap = 0;
	int r;

	r = cgroup_list_ids(env, &ids, &n, &cap);
	if (r >= 0)
		r = workspace_list_ids(env, &ids, &n, &cap);
	if (r < 0) {
		for (size_t i = 0; i < n; i++)
			free(ids[i]);
		free(ids);
		return r;
	}
	*ids_ret = ids;
	*n_ret = n;
	return 0;
}
