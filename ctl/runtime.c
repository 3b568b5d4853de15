/* SPDX-License-Identifier: MIT */
/*
 * paddockctl runtime: the runtime profiles. list shows them (with their pools when the
 * daemon answers); build makes a Debian tree with mmdebstrap and registers it; add
 * registers a tree that exists (an unpacked image, a directory an operator maintains);
 * remove unregisters one. A change takes effect when sessiond next starts; sessions
 * running on a removed profile keep their sandboxes until they end.
 */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "ctl.h"
#include "json.h"
#include "runtimes.h"
#include "values.h"

extern char **environ;

#define SUITE_DEFAULT "bookworm"

/* ---- list ---- */

static void list_from_config(const Ctl *c)
{
	printf("%-20s %-40s %s\n", "NAME", "ROOT", "POOL");
	printf("%-20s %-40s %lld\n", RUNTIME_DEFAULT, "/", (long long)c->cfg.pool_size);
	for (size_t i = 0; i < c->cfg.n_runtimes; i++) {
		const RuntimeProfile *p = &c->cfg.runtimes[i];

		printf("%-20s %-40s %lld\n", p->name, p->root, (long long)p->pool_size);
	}
	printf("(sessiond does not answer: pools and sessions unknown)\n");
}

static void list_entry(json_object *e)
{
	json_object *lim = NULL;
	char mem[32];

	json_object_object_get_ex(e, "limits", &lim);
	fmt_bytes(mem, sizeof(mem), field_i64(lim, "memory_bytes"));
	printf("%-20s %-32s %3lld/%-3lld %8lld %-8s %s\n", field_str(e, "name", "?"),
	       field_str(e, "root", "?"), (long long)field_i64(e, "pool_ready"),
	       (long long)field_i64(e, "pool_target"), (long long)field_i64(e, "sessions"), mem,
	       field_bool(e, "usable") ? "ok" : field_str(e, "problem", "unusable"));
}

int cmd_runtime_list(const Ctl *c)
{
	_cleanup_json_ json_object *req = request("stats", NULL), *rep = NULL;
	json_object *all;

	if (c->runtimes_error[0])
		fprintf(stderr, "paddockctl: the runtime profiles cannot be read: %s\n",
			c->runtimes_error);
	if (!req)
		return -ENOMEM;
	if (ctl_call(c, req, true, &rep) < 0 || !json_object_object_get_ex(rep, "runtimes", &all) ||
	    !json_object_is_type(all, json_type_array)) {
		list_from_config(c);
		return 0;
	}
	if (c->json) {
		print_json(all);
		return 0;
	}
	printf("%-20s %-32s %-7s %8s %-8s %s\n", "NAME", "ROOT", "POOL", "SESSIONS", "MEMORY",
	       "STATE");
	for (size_t i = 0; i < json_object_array_length(all); i++)
		list_entry(json_object_array_get_idx(all, i));
	if (field_i64(rep, "retired_runtime_sessions"))
		printf("%lld sessions run on profiles no longer configured\n",
		       (long long)field_i64(rep, "retired_runtime_sessions"));
	return 0;
}

/* ---- the profile file ---- */

static void profile_path(const Ctl *c, const char *name, char *out, size_t len)
{
	snprintf(out, len, "%s/%s.conf", c->cfg.runtimes_dir, name);
}

/* The settings given on the command line, as lines of the profile's file. */
typedef struct ProfileArgs {
	const char *root;
	const char *packages; /* build: comma-separated Debian packages */
	const char *suite;    /* build: the Debian suite */
	const char *mirror;   /* build: a mirror URL or a sources file; NULL: the host's */
	char lines[2048];     /* key = value lines for the file, besides root */
	size_t len;
} ProfileArgs;

/* Options of build and add: their own, and the profile's settings (validated when the
 * file is read back). */
static int profile_args_parse(int argc, char **argv, ProfileArgs *a)
{
	static const struct {
		const char *opt, *key;
	} settings[] = {
		{ "--pool-size", "pool_size" },	    { "--kernel-prewarm", "kernel_prewarm" },
		{ "--memory", "memory_max_bytes" }, { "--pids", "pids_max" },
		{ "--cpu", "cpu_quota_percent" },   { "--egress", "egress" },
		{ "--description", "description" },
	};

	for (int i = 0; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		bool known = false;

		if (!v || strchr(v, '\n'))
			return -EINVAL;
		if (strcmp(argv[i], "--root") == 0)
			a->root = v, known = true;
		else if (strcmp(argv[i], "--packages") == 0)
			a->packages = v, known = true;
		else if (strcmp(argv[i], "--suite") == 0)
			a->suite = v, known = true;
		else if (strcmp(argv[i], "--mirror") == 0)
			a->mirror = v, known = true;
		for (size_t k = 0; !known && k < ARRAY_SIZE(settings); k++) {
			int n;

			if (strcmp(argv[i], settings[k].opt) != 0)
				continue;
			n = snprintf(a->lines + a->len, sizeof(a->lines) - a->len, "%s = %s\n",
				     settings[k].key, v);
			if (n < 0 || (size_t)n >= sizeof(a->lines) - a->len)
				return -EINVAL;
			a->len += (size_t)n;
			known = true;
		}
		if (!known)
			return -EINVAL;
		i++;
	}
	return 0;
}

/* The configuration with the profiles, as sessiond will read it: 0, or err says why. */
static int profiles_check(const Ctl *c, char *err, size_t len)
{
	PaddockConfig check;
	int r = config_load(&check, c->config_path, err, len);

	if (r == 0)
		r = runtimes_load(&check, err, len);
	config_free(&check);
	return r;
}

/* Write the profile's file whole (a temporary file linked into place, never over another),
 * readable by all as the rest of /etc/paddock; then read the configuration back: a setting
 * out of bounds removes the file and says why. */
static int profile_write(const Ctl *c, const char *name, const char *root, const ProfileArgs *a)
{
	char path[PATH_MAX], tmp[PATH_MAX + 32], err[512] = "";
	_cleanup_fclose_ FILE *f = NULL;
	int r;

	profile_path(c, name, path, sizeof(path));
	snprintf(tmp, sizeof(tmp), "%s.new.%d", path, (int)getpid());
	/* Made readable by all: the umask of whoever runs this does not decide it. */
	if (mkdir(c->cfg.runtimes_dir, 0755) == 0 ? chmod(c->cfg.runtimes_dir, 0755) < 0 :
						    errno != EEXIST) {
		fprintf(stderr, "paddockctl: %s: %s\n", c->cfg.runtimes_dir, strerror(errno));
		return -errno;
	}
	f = fopen(tmp, "wxe");
	if (!f || fchmod(fileno(f), 0644) < 0) {
		r = -errno;
		fprintf(stderr, "paddockctl: %s: %s\n", tmp, strerror(-r));
		if (f)
			unlink(tmp);
		return r;
	}
	fprintf(f, "# runtime profile %s (paddockctl runtime)\nroot = %s\n%s", name, root,
		a->lines);
	if (fflush(f) != 0 || fsync(fileno(f)) < 0 || link(tmp, path) < 0) {
		r = -errno;
		fprintf(stderr, "paddockctl: %s: %s\n", path,
			r == -EEXIST ? "a profile of this name exists" : strerror(-r));
		unlink(tmp);
		return r;
	}
	unlink(tmp);
	if (profiles_check(c, err, sizeof(err)) < 0) {
		fprintf(stderr, "paddockctl: the profile is not valid: %s\n", err);
		unlink(path);
		return -EINVAL;
	}
	printf("runtime profile '%s' on %s: %s\nit serves sessions once paddock-sessiond "
	       "restarts (systemctl restart paddock-sessiond; sessions are kept)\n",
	       name, root, path);
	return 0;
}

/* Whether a tree can serve: a usr directory and the Python every warm sandbox starts. */
static int tree_check(const Ctl *c, const char *root)
{
	char p[PATH_MAX];
	struct stat st;

	snprintf(p, sizeof(p), "%s/usr", root);
	if (root[0] != '/' || stat(p, &st) < 0 || !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "paddockctl: %s: not an absolute path with a usr directory\n",
			root);
		return -ENOENT;
	}
	snprintf(p, sizeof(p), "%s%s", root, c->cfg.python_bin);
	if (lstat(p, &st) < 0) {
		fprintf(stderr, "paddockctl: %s has no %s: every session starts it\n", root,
			c->cfg.python_bin);
		return -ENOENT;
	}
	return 0;
}

static int name_check(const Ctl *c, const char *name)
{
	char path[PATH_MAX];

	if (!runtime_name_valid(name)) {
		fprintf(stderr,
			"paddockctl: '%s': a profile's name is 1 to %d of a-z 0-9 . _ -, not "
			"'%s'\n",
			name, RUNTIME_NAME_MAX, RUNTIME_DEFAULT);
		return -EINVAL;
	}
	profile_path(c, name, path, sizeof(path));
	if (access(path, F_OK) == 0) {
		fprintf(stderr, "paddockctl: %s exists: remove the profile first\n", path);
		return -EEXIST;
	}
	if (c->runtimes_error[0]) {
		fprintf(stderr, "paddockctl: mend the runtime profiles first: %s\n",
			c->runtimes_error);
		return -EINVAL;
	}
	if (c->cfg.n_runtimes >= RUNTIMES_MAX) {
		fprintf(stderr, "paddockctl: %d runtime profiles are the most there may be\n",
			RUNTIMES_MAX);
		return -ENOSPC;
	}
	return 0;
}

/* ---- add, remove ---- */

int cmd_runtime_add(const Ctl *c, const char *name, int argc, char **argv)
{
	ProfileArgs a = { 0 };
	int r = profile_args_parse(argc, argv, &a);

	if (r < 0 || !a.root || a.packages || a.suite || a.mirror)
		return -EINVAL;
	r = name_check(c, name);
	if (r == 0)
		r = tree_check(c, a.root);
	return r < 0 ? r : profile_write(c, name, a.root, &a);
}

int cmd_runtime_remove(const Ctl *c, const char *name)
{
	char path[PATH_MAX];

	if (!runtime_name_valid(name))
		return -EINVAL;
	profile_path(c, name, path, sizeof(path));
	if (unlink(path) < 0) {
		fprintf(stderr, "paddockctl: %s: %s\n", path, strerror(errno));
		return -errno;
	}
	printf("runtime profile '%s' removed; its tree is left where it is. New sessions stop "
	       "getting it once paddock-sessiond restarts; those running on it keep it until "
	       "they end.\n",
	       name);
	return 0;
}

/* ---- build ---- */

/* The host's apt sources, for a tree of the host's own mirror. */
static const char *host_sources(void)
{
	static const char *const files[] = { "/etc/apt/sources.list",
					     "/etc/apt/sources.list.d/debian.sources" };
	struct stat st;

	for (size_t i = 0; i < ARRAY_SIZE(files); i++)
		if (stat(files[i], &st) == 0 && st.st_size > 0)
			return files[i];
	return NULL;
}

static int run_wait(char *const argv[])
{
	pid_t pid;
	int st, r = posix_spawnp(&pid, argv[0], NULL, NULL, argv, environ);

	if (r != 0) {
		fprintf(stderr, "paddockctl: %s: %s (install it: apt-get install %s)\n", argv[0],
			strerror(r), argv[0]);
		return -r;
	}
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -errno;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(stderr, "paddockctl: %s failed (status %#x)\n", argv[0], st);
		return -EIO;
	}
	return 0;
}

/* A value of --packages, --suite or --mirror, handed to mmdebstrap as one argument: only
 * the characters such a value has, and never a leading '-' (read as one of its options). */
static bool plain_argument(const char *what, const char *v, const char *allowed)
{
	if (v && (v[0] == '-' || !v[0] || v[strspn(v, allowed)])) {
		fprintf(stderr, "paddockctl: --%s '%s': a character such a value does not have\n",
			what, v);
		return false;
	}
	return true;
}

/* mmdebstrap into tmp: minbase, Python and the packages asked for; from --mirror, else
 * for the host's own suite the host's apt sources, else Debian's default mirror. */
static int debootstrap_tree(const ProfileArgs *a, const char *tmp)
{
	char include[2048];
	const char *mirror = a->mirror ? a->mirror : a->suite ? NULL : host_sources();
	char *argv[12];
	size_t n = 0;

	snprintf(include, sizeof(include), "--include=python3%s%s", a->packages ? "," : "",
		 a->packages ? a->packages : "");
	argv[n++] = "mmdebstrap";
	argv[n++] = "--variant=minbase";
	argv[n++] = "--mode=root";
	argv[n++] = "--format=directory";
	argv[n++] = include;
	/* No package caches or lists in the tree: sessions cannot run apt anyway. */
	argv[n++] = "--customize-hook=chroot \"$1\" apt-get clean";
	argv[n++] = "--customize-hook=rm -rf \"$1\"/var/lib/apt/lists/*";
	argv[n++] = (char *)(a->suite ? a->suite : SUITE_DEFAULT);
	argv[n++] = (char *)tmp;
	if (mirror)
		argv[n++] = (char *)mirror;
	argv[n] = NULL;
	return run_wait(argv);
}

int cmd_runtime_build(const Ctl *c, const char *name, int argc, char **argv)
{
	ProfileArgs a = { 0 };
	char parent[PATH_MAX], root[PATH_MAX + RUNTIME_NAME_MAX + 2], tmp[sizeof(root) + 8];
	char *rm[] = { "rm", "-rf", "--one-file-system", "--", tmp, NULL };
	int r = profile_args_parse(argc, argv, &a);

	if (r < 0)
		return -EINVAL;
	if (!plain_argument("packages", a.packages, "abcdefghijklmnopqrstuvwxyz0123456789.+-,:") ||
	    !plain_argument("suite", a.suite, "abcdefghijklmnopqrstuvwxyz0123456789.-") ||
	    !plain_argument("mirror", a.mirror,
			    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
			    ".-_~:/?#[]@!&'()*+,;=%"))
		return -EINVAL;
	if (a.root && a.root[0] != '/') {
		fprintf(stderr, "paddockctl: --root %s: an absolute path\n", a.root);
		return -EINVAL;
	}
	r = name_check(c, name);
	if (r < 0)
		return r;
	if (geteuid() != 0) {
		fprintf(stderr, "paddockctl: runtime build runs mmdebstrap as root\n");
		return -EPERM;
	}
	snprintf(parent, sizeof(parent), "%s/runtimes", c->cfg.state_dir);
	snprintf(root, sizeof(root), "%s/%s", parent, name);
	if (a.root)
		snprintf(root, sizeof(root), "%s", a.root);
	else if (mkdir(parent, 0755) < 0 && errno != EEXIST)
		return -errno;
	if (access(root, F_OK) == 0) {
		fprintf(stderr, "paddockctl: %s exists: give another --root\n", root);
		return -EEXIST;
	}
	/* Made beside its place and renamed when whole: an interrupted build is never used.
	 * One left by an earlier build is not removed unasked. */
	snprintf(tmp, sizeof(tmp), "%s.tmp", root);
	if (access(tmp, F_OK) == 0) {
		fprintf(stderr, "paddockctl: %s exists (an interrupted build?): remove it first\n",
			tmp);
		return -EEXIST;
	}
	r = debootstrap_tree(&a, tmp);
	if (r == 0 && rename(tmp, root) < 0)
		r = -errno;
	if (r < 0) {
		(void)run_wait(rm);
		return r;
	}
	r = tree_check(c, root);
	if (r == 0)
		r = profile_write(c, name, root, &a);
	if (r < 0)
		fprintf(stderr, "paddockctl: the tree is kept at %s\n", root);
	return r;
}
