/* SPDX-License-Identifier: MIT */
/*
 * The trees sandboxes run on: the host's own (runtime 0) and each runtime profile's,
 * checked once at start. The spawn child opens its tree's root in its own mount namespace
 * (a bind mount cannot take its source from another namespace's mounts) and resolves every
 * path of the tree under it with RESOLVE_IN_ROOT: a symlink in a profile's tree (an
 * unpacked image, a directory someone else maintains), absolute or climbing with "..",
 * stays inside it and never names a host file.
 */
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cleanup.h"
#include "log.h"
#include "runtimes.h"
#include "sandbox_internal.h"

int root_open_in(int root_fd, const char *path, int flags)
{
	struct open_how how = { .flags = (uint64_t)(flags | O_CLOEXEC),
				.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS };
	int fd = (int)syscall(SYS_openat2, root_fd, path, &how, sizeof(how));

	return fd < 0 ? -errno : fd;
}

/* Why the tree at fd cannot serve sessions (written to why), or 0. */
static int root_check(int fd, const PaddockConfig *cfg, char *why, size_t len)
{
	_cleanup_close_ int usr = root_open_in(fd, "usr", O_PATH | O_DIRECTORY);
	_cleanup_close_ int python = -1;

	if (usr < 0) {
		snprintf(why, len, "it has no usr directory: %s", strerror(-usr));
		return usr;
	}
	/* Every warm sandbox starts Python: a tree without it would fail each build. */
	python = root_open_in(fd, cfg->python_bin, O_PATH);
	if (python < 0) {
		snprintf(why, len, "it has no %s: %s", cfg->python_bin, strerror(-python));
		return python;
	}
	return 0;
}

/* Whether the tree's Python has IPython, which the kernel tier runs: looked for where
 * Debian's and pip's packages go. Only a hint for choosing the tier (a tree's links are
 * followed as the host sees them here, which a wrong answer cannot turn into access). */
static bool root_has_ipython(const char *root)
{
	static const char *const where[] = { "/usr/lib/python3/dist-packages/IPython",
					     "/usr/lib/python3*/site-packages/IPython",
					     "/usr/local/lib/python3*/*-packages/IPython" };
	bool found = false;

	for (size_t i = 0; !found && i < ARRAY_SIZE(where); i++) {
		char pattern[PATH_MAX];
		glob_t g;

		snprintf(pattern, sizeof(pattern), "%s%s", root, where[i]);
		found = glob(pattern, GLOB_NOSORT | GLOB_ONLYDIR, NULL, &g) == 0;
		globfree(&g);
	}
	return found;
}

/* The login shell the sandbox user gets on the tree at fd: bash where it has one. */
static const char *root_login_shell(int fd)
{
	_cleanup_close_ int bash = root_open_in(fd, "bin/bash", O_PATH);

	return bash < 0 ? "/bin/sh" : "/bin/bash";
}

/* Whether profile i's tree can serve: its root path kept when it can. */
static int root_check_profile(SandboxEnv *env, const PaddockConfig *cfg, size_t i)
{
	const RuntimeProfile *p = &cfg->runtimes[i - 1];
	char *why = env->runtime_problem[i];
	size_t len = sizeof(env->runtime_problem[i]);
	_cleanup_close_ int fd = open(p->root, O_PATH | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		snprintf(why, len, "%s: %s", p->root, strerror(errno));
	else if (root_check(fd, cfg, why, len) == 0) {
		env->runtime_kernel[i] = root_has_ipython(p->root);
		env->runtime_shell[i] = root_login_shell(fd);
		return (env->runtime_roots[i] = strdup(p->root)) ? 0 : -ENOMEM;
	}
	log_warn("runtime profile '%s' is not used: %s (its sessions run on the default)", p->name,
		 why);
	return 0;
}

int roots_env_setup(SandboxEnv *env, const PaddockConfig *cfg)
{
	int r;

	env->n_runtimes = cfg->n_runtimes;
	env->runtime_roots[0] = strdup("/");
	env->runtime_kernel[0] = true; /* the code plane probes the host's own */
	r = env->runtime_roots[0] ? 0 : -ENOMEM;
	if (r == 0) {
		_cleanup_close_ int host = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);

		env->runtime_shell[0] = host < 0 ? "/bin/sh" : root_login_shell(host);
	}
	for (size_t i = 1; r == 0 && i <= cfg->n_runtimes; i++)
		r = root_check_profile(env, cfg, i);
	if (r < 0)
		sandbox_set_error("runtime profiles: %s", strerror(-r));
	return r;
}

void roots_env_clear(SandboxEnv *env)
{
	for (size_t i = 0; i <= RUNTIMES_MAX; i++) {
		free(env->runtime_roots[i]);
		env->runtime_roots[i] = NULL;
	}
}

const char *sandbox_env_runtime_problem(const SandboxEnv *env, size_t runtime)
{
	if (runtime > env->n_runtimes)
		return "no such runtime profile";
	return env->runtime_roots[runtime] ? NULL : env->runtime_problem[runtime];
}

bool sandbox_env_runtime_has_kernel(const SandboxEnv *env, size_t runtime)
{
	return runtime <= env->n_runtimes && env->runtime_kernel[runtime];
}

int roots_open_in_child(struct child_args *a)
{
	a->host_fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (a->host_fd < 0)
		return -errno;
	a->root_fd =
		open(a->env->runtime_roots[a->limits.runtime], O_PATH | O_DIRECTORY | O_CLOEXEC);
	return a->root_fd < 0 ? -errno : 0;
}
