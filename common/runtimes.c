/* SPDX-License-Identifier: MIT */
/* Runtime profiles: one small file each, read with the rest of the configuration. */
#include "runtimes.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "values.h"

#define PROFILE_SUFFIX ".conf"

bool runtime_name_valid(const char *name)
{
	size_t n = 0;

	for (const char *p = name; *p; p++, n++) {
		bool alnum = (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9');

		if (!alnum && (n == 0 || !strchr("._-", *p)))
			return false;
	}
	return n >= 1 && n <= RUNTIME_NAME_MAX && strcmp(name, RUNTIME_DEFAULT) != 0;
}

size_t runtime_find(const PaddockConfig *c, const char *name)
{
	for (size_t i = 0; name && i < c->n_runtimes; i++)
		if (strcmp(c->runtimes[i].name, name) == 0)
			return i + 1;
	return 0;
}

const char *runtime_name(const PaddockConfig *c, size_t i)
{
	return i >= 1 && i <= c->n_runtimes ? c->runtimes[i - 1].name : RUNTIME_DEFAULT;
}

/* A numeric key of a profile file: its field, its bounds (the global setting's). */
struct profile_int {
	const char *key;
	size_t off;
	bool sized;
	int64_t min, max;
};

static const struct profile_int profile_ints[] = {
	{ "pool_size", offsetof(RuntimeProfile, pool_size), false, 0, 10000 },
	{ "kernel_prewarm", offsetof(RuntimeProfile, kernel_prewarm), false, 0, 1000 },
	{ "memory_max_bytes", offsetof(RuntimeProfile, memory_max_bytes), true, 16 * MiB,
	  1024 * GiB },
	{ "pids_max", offsetof(RuntimeProfile, pids_max), false, 8, 1000000 },
	{ "cpu_quota_percent", offsetof(RuntimeProfile, cpu_quota_percent), false, 1, 100000 },
};

static int set_string(char **field, const char *value)
{
	char *dup = strdup(value);

	if (!dup)
		return -ENOMEM;
	free(*field);
	*field = dup;
	return 0;
}

static int profile_set(RuntimeProfile *p, const char *key, const char *value, char *err,
		       size_t errlen)
{
	int64_t v;

	if (strcmp(key, "root") == 0) {
		if (value[0] != '/') {
			snprintf(err, errlen, "root: an absolute path, got '%s'", value);
			return -EINVAL;
		}
		return set_string(&p->root, value);
	}
	if (strcmp(key, "description") == 0)
		return set_string(&p->description, value);
	if (strcmp(key, "egress") == 0) {
		if (value_parse_bool(value, &p->egress) == 0)
			return 0;
		snprintf(err, errlen, "egress: expected true or false, got '%s'", value);
		return -EINVAL;
	}
	for (size_t i = 0; i < ARRAY_SIZE(profile_ints); i++) {
		const struct profile_int *d = &profile_ints[i];

		if (strcmp(key, d->key) != 0)
			continue;
		if (value_parse_int(value, d->sized, &v) < 0 || v < d->min || v > d->max) {
			snprintf(err, errlen,
				 "%s: expected %s within %" PRId64 "..%" PRId64 ", got '%s'", key,
				 d->sized ? "a size" : "an integer", d->min, d->max, value);
			return -EINVAL;
		}
		*(int64_t *)((char *)p + d->off) = v;
		return 0;
	}
	snprintf(err, errlen, "%s: not a runtime profile setting", key);
	return -EINVAL;
}

/* What a profile's file leaves out: the global settings; one warm sandbox. */
static int profile_defaults(const PaddockConfig *c, RuntimeProfile *p, const char *name)
{
	*p = (RuntimeProfile){ .pool_size = 1,
			       .kernel_prewarm = 0,
			       .memory_max_bytes = c->memory_max_bytes,
			       .pids_max = c->pids_max,
			       .cpu_quota_percent = c->cpu_quota_percent,
			       .egress = c->egress };
	snprintf(p->name, sizeof(p->name), "%s", name);
	return set_string(&p->description, "");
}

/* Its sessions' /tmp (and a tmpfs workspace) are held in their memory, as the global
 * memory_max_bytes is checked for. */
static int profile_check(const PaddockConfig *c, const RuntimeProfile *p, char *err, size_t errlen)
{
	bool ws_in_memory = strcmp(c->workspace_backend, "tmpfs") == 0;
	int64_t held = c->tmp_bytes + (ws_in_memory ? c->workspace_bytes : 0);

	if (!p->root) {
		snprintf(err, errlen, "root: missing (the tree its sessions run on)");
		return -EINVAL;
	}
	if (held + c->program_memory_min_bytes > p->memory_max_bytes) {
		snprintf(err, errlen,
			 "memory_max_bytes (%" PRId64 ") leaves programs less than "
			 "program_memory_min_bytes once /tmp%s is full",
			 p->memory_max_bytes, ws_in_memory ? " and the workspace" : "");
		return -EINVAL;
	}
	return 0;
}

static int profile_read(const PaddockConfig *c, const char *path, const char *name,
			RuntimeProfile *p, char *err, size_t errlen)
{
	_cleanup_fclose_ FILE *f = fopen(path, "re");
	char line[4096], why[256] = "";
	unsigned lineno = 0;
	int r;

	if (!f) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -EINVAL;
	}
	r = profile_defaults(c, p, name);
	while (r == 0 && fgets(line, sizeof(line), f)) {
		char *key = value_trim(line), *eq;

		lineno++;
		if (!*key || *key == '#')
			continue;
		eq = strchr(key, '=');
		if (!eq) {
			snprintf(why, sizeof(why), "expected key = value");
			r = -EINVAL;
			break;
		}
		*eq = '\0';
		r = profile_set(p, value_trim(key), value_trim(eq + 1), why, sizeof(why));
	}
	if (r == 0 && (r = profile_check(c, p, why, sizeof(why))) < 0)
		lineno = 0;
	if (r < 0) {
		if (lineno)
			snprintf(err, errlen, "%s:%u: %s", path, lineno,
				 why[0] ? why : strerror(-r));
		else
			snprintf(err, errlen, "%s: %s", path, why[0] ? why : strerror(-r));
		return -EINVAL;
	}
	return 0;
}

/* "<name>.conf" with a valid name: its name in out; anything else (a backup, a package
 * manager's leftover) is not a profile. */
static bool profile_file_name(const char *file, char out[RUNTIME_NAME_MAX + 1])
{
	size_t n = strlen(file), sfx = strlen(PROFILE_SUFFIX);

	if (n <= sfx || n - sfx > RUNTIME_NAME_MAX || strcmp(file + n - sfx, PROFILE_SUFFIX))
		return false;
	memcpy(out, file, n - sfx);
	out[n - sfx] = '\0';
	return runtime_name_valid(out);
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const RuntimeProfile *)a)->name, ((const RuntimeProfile *)b)->name);
}

int runtimes_load(PaddockConfig *c, char *err, size_t errlen)
{
	DIR *d = opendir(c->runtimes_dir);
	struct dirent *e;
	int r = 0;

	if (!d) {
		if (errno == ENOENT)
			return 0;
		snprintf(err, errlen, "runtimes_dir: %s: %s", c->runtimes_dir, strerror(errno));
		return -EINVAL;
	}
	c->runtimes = calloc(RUNTIMES_MAX, sizeof(*c->runtimes));
	if (!c->runtimes) {
		snprintf(err, errlen, "runtime profiles: out of memory");
		r = -ENOMEM;
	}
	while (r == 0 && (e = readdir(d))) {
		char name[RUNTIME_NAME_MAX + 1], path[4096];

		if (!profile_file_name(e->d_name, name))
			continue;
		if (c->n_runtimes == RUNTIMES_MAX) {
			snprintf(err, errlen, "%s: more than %d runtime profiles", c->runtimes_dir,
				 RUNTIMES_MAX);
			r = -EINVAL;
			break;
		}
		snprintf(path, sizeof(path), "%s/%s", c->runtimes_dir, e->d_name);
		r = profile_read(c, path, name, &c->runtimes[c->n_runtimes], err, errlen);
		c->n_runtimes++; /* freed with the rest even when it failed half-way */
	}
	closedir(d);
	if (r == 0)
		qsort(c->runtimes, c->n_runtimes, sizeof(*c->runtimes), by_name);
	return r;
}

void runtimes_free(PaddockConfig *c)
{
	for (size_t i = 0; i < c->n_runtimes; i++) {
		free(c->runtimes[i].root);
		free(c->runtimes[i].description);
	}
	free(c->runtimes);
	c->runtimes = NULL;
	c->n_runtimes = 0;
}
