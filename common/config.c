/* SPDX-License-Identifier: MIT */
/* Table-driven settings: defaults, bounds, file syntax and environment overrides. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cleanup.h"
#include "runtimes.h"
#include "values.h"

enum kind { K_STR, K_INT, K_SIZE, K_BOOL };

/* One setting: its key, where it lives, its default and its bounds. */
struct setting {
	const char *key;   /* file key; env is PADDOCK_ + upper(key) */
	const char *alias; /* an AIO_* variable honoured as an alias, or NULL */
	enum kind kind;
	size_t off;	  /* offset in PaddockConfig */
	const char *def;  /* default, as text */
	int64_t min, max; /* bounds for K_INT and K_SIZE */
};

#define S(k, f, d)                                                                                 \
	{                                                                                          \
		k, NULL, K_STR, offsetof(PaddockConfig, f), d, 0, 0                                \
	}
#define I(k, f, d, lo, hi)                                                                         \
	{                                                                                          \
		k, NULL, K_INT, offsetof(PaddockConfig, f), d, lo, hi                              \
	}
#define IA(k, a, f, d, lo, hi)                                                                     \
	{                                                                                          \
		k, a, K_INT, offsetof(PaddockConfig, f), d, lo, hi                                 \
	}
#define SA(k, a, f, d)                                                                             \
	{                                                                                          \
		k, a, K_STR, offsetof(PaddockConfig, f), d, 0, 0                                   \
	}
#define Z(k, f, d, lo, hi)                                                                         \
	{                                                                                          \
		k, NULL, K_SIZE, offsetof(PaddockConfig, f), d, lo, hi                             \
	}
#define B(k, f, d)                                                                                 \
	{                                                                                          \
		k, NULL, K_BOOL, offsetof(PaddockConfig, f), d, 0, 1                               \
	}

static const struct setting settings[] = {
	S("state_dir", state_dir, "/var/lib/paddock"),
	S("runtime_dir", runtime_dir, "/run/paddock"),
	S("lib_dir", lib_dir, PADDOCK_LIB_DIR),
	S("node_name", node_name, ""),
	S("log_level", log_level, "info"),
	S("log_target", log_target, "stderr"),
	S("worker_user", worker_user, "paddock"),
	S("socket_group", socket_group, "paddock"),
	S("python_bin", python_bin, "/usr/bin/python3"),
	B("python_template", python_template, "true"),
	S("preload_modules", preload_modules, "numpy,pandas,matplotlib.pyplot"),
	B("template_direct_fork", template_direct_fork, "true"),
	S("bash_bin", bash_bin, "/bin/bash"),
	S("node_bin", node_bin, "/usr/bin/node"),
	I("threads", threads, "0", 0, 4096),
	I("downloads_max", downloads_max, "32", 1, 4096),
	Z("max_body_bytes", max_body_bytes, "4M", 4 * KiB, 64 * MiB),
	I("json_max_depth", json_max_depth, "32", 2, 1000),
	Z("code_max_bytes", code_max_bytes, "1M", 1 * KiB, 32 * MiB),
	Z("put_max_bytes", put_max_bytes, "100M", 1, 16 * GiB),
	S("auth_tokens", auth_tokens, ""),
	S("tenant_header", tenant_header, "X-Paddock-Tenant"),
	B("require_tenant", require_tenant, "false"),
	I("max_sessions", max_sessions, "64", 1, 100000),
	I("tenant_max_sessions", tenant_max_sessions, "0", 0, 100000),
	I("tenant_cpu_weight", tenant_cpu_weight, "1000", 1, 10000),
	I("pool_size", pool_size, "2", 0, 10000),
	I("pool_warm_max", pool_warm_max, "0", 0, 1024),
	I("create_wait_seconds", create_wait_seconds, "30", 1, 600),
	B("keep_sessions_on_exit", keep_sessions_on_exit, "false"),
	IA("code_max_sessions", "AIO_CODE_MAX_SESSIONS", code_max_sessions, "20", 1, 100000),
	IA("kernel_max_sessions", "AIO_KERNEL_MAX_SESSIONS", kernel_max_sessions, "5", 1, 100000),
	IA("code_idle_timeout", "AIO_CODE_SESSION_TIMEOUT_SECS", code_idle_timeout, "1800", 1,
	   31 * 86400),
	IA("kernel_idle_timeout", "AIO_KERNEL_SESSION_TIMEOUT_SECS", kernel_idle_timeout, "300", 1,
	   31 * 86400),
	SA("code_backend", "AIO_CODE_BACKEND", code_backend, "auto"),
	SA("jupyter_endpoint", "AIO_JUPYTER_ENDPOINT", jupyter_endpoint, ""),
	IA("code_prewarm", "AIO_CODE_PREWARM", code_prewarm, "0", 0, 1000),
	IA("kernel_prewarm", "AIO_KERNEL_PREWARM", kernel_prewarm, "0", 0, 1000),
	I("code_output_max_chars", code_output_max_chars, "2000000", 1000, 1000000000),
	I("retry_after_seconds", retry_after_seconds, "5", 1, 999999),
	I("stream_heartbeat_seconds", stream_heartbeat_seconds, "15", 1, 300),
	I("idle_timeout_default", idle_timeout_default, "600", 1, 31 * 86400),
	I("idle_timeout_max", idle_timeout_max, "3600", 1, 31 * 86400),
	I("lifetime_default", lifetime_default, "3600", 1, 31 * 86400),
	I("lifetime_max", lifetime_max, "86400", 1, 31 * 86400),
	I("reclaim_interval_ms", reclaim_interval_ms, "1000", 10, 3600 * 1000),
	I("wal_checkpoint_pages", wal_checkpoint_pages, "1000", 1, 1000000),
	I("exec_timeout_default", exec_timeout_default, "30", 1, 86400),
	I("exec_timeout_max", exec_timeout_max, "900", 1, 86400),
	I("interrupt_grace_ms", interrupt_grace_ms, "2000", 0, 600000),
	Z("output_max_bytes", output_max_bytes, "1M", 1 * KiB, 256 * MiB),
	Z("reply_max_bytes", reply_max_bytes, "16M", 64 * KiB, 256 * MiB),
	I("list_max_entries", list_max_entries, "10000", 1, 1000000),
	I("produced_files_max", produced_files_max, "100", 0, 100000),
	Z("editor_max_bytes", editor_max_bytes, "10M", 1 * KiB, 256 * MiB),
	I("uid_base", uid_base, "200000", 1000, 2000000000),
	I("uid_count", uid_count, "4096", 1, 1000000),
	Z("memory_max_bytes", memory_max_bytes, "1G", 16 * MiB, 1024 * GiB),
	I("pids_max", pids_max, "256", 8, 1000000),
	I("cpu_quota_percent", cpu_quota_percent, "100", 1, 100000),
	Z("workspace_bytes", workspace_bytes, "512M", 1 * MiB, 1024 * GiB),
	S("workspace_backend", workspace_backend, "disk"),
	Z("tmp_bytes", tmp_bytes, "256M", 1 * MiB, 1024 * GiB),
	Z("program_memory_min_bytes", program_memory_min_bytes, "128M", 16 * MiB, 1024 * GiB),
	I("nofile_max", nofile_max, "1024", 32, 1048576),
	S("cgroup_root", cgroup_root, ""),
	B("cgroup_favor_dynmods", cgroup_favor_dynmods, "true"),
	B("egress", egress, "false"),
	S("egress_pool", egress_pool, "10.209.0.0/16"),
	S("egress_host_iface_prefix", egress_host_iface_prefix, "pdk"),
	S("egress_host_netns", egress_host_netns, ""),
	S("runtimes_dir", runtimes_dir, "/etc/paddock/runtimes"),
	S("tool_callback_allow", tool_callback_allow, ""),
	I("tool_timeout_default", tool_timeout_default, "30", 1, 86400),
	I("tool_max_tools", tool_max_tools, "64", 1, 1000),
	Z("tool_call_max_bytes", tool_call_max_bytes, "1M", 1 * KiB, 16 * MiB),
	Z("tool_reply_max_bytes", tool_reply_max_bytes, "4M", 1 * KiB, 16 * MiB),
	I("tool_calls_per_run", tool_calls_per_run, "100", 1, 100000),
	I("tool_calls_max_concurrent", tool_calls_max_concurrent, "32", 1, 10000),
	S("mcp_allowed_origins", mcp_allowed_origins, ""),
	Z("mcp_read_max_bytes", mcp_read_max_bytes, "4M", 1 * KiB, 64 * MiB),
};

static int apply(PaddockConfig *c, const struct setting *s, const char *value, char *err,
		 size_t errlen)
{
	char *field = (char *)c + s->off;
	int64_t v;

	switch (s->kind) {
	case K_STR: {
		char *dup = strdup(value);

		if (!dup)
			return -ENOMEM;
		free(*(char **)field);
		*(char **)field = dup;
		return 0;
	}
	case K_BOOL:
		if (value_parse_bool(value, (bool *)field) < 0) {
			snprintf(err, errlen, "%s: expected true or false, got '%s'", s->key,
				 value);
			return -EINVAL;
		}
		return 0;
	case K_INT:
	case K_SIZE:
		if (value_parse_int(value, s->kind == K_SIZE, &v) < 0) {
			snprintf(err, errlen, "%s: expected %s, got '%s'", s->key,
				 s->kind == K_SIZE ? "a size such as 512M" : "an integer", value);
			return -EINVAL;
		}
		if (v < s->min || v > s->max) {
			snprintf(err, errlen, "%s: %" PRId64 " is outside %" PRId64 "..%" PRId64,
				 s->key, v, s->min, s->max);
			return -EINVAL;
		}
		*(int64_t *)field = v;
		return 0;
	}
	return -EINVAL;
}

int config_set(PaddockConfig *c, const char *key, const char *value, char *err, size_t errlen)
{
	for (size_t i = 0; i < ARRAY_SIZE(settings); i++)
		if (strcmp(settings[i].key, key) == 0)
			return apply(c, &settings[i], value, err, errlen);
	snprintf(err, errlen, "%s: unknown setting", key);
	return -EINVAL;
}

static int load_file(PaddockConfig *c, const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "re");
	char line[4096];
	unsigned lineno = 0;
	int r = 0;

	if (!f)
		return errno == ENOENT ? 0 : -errno;
	while (fgets(line, sizeof(line), f)) {
		char *eq, *key, *val;

		lineno++;
		key = value_trim(line);
		if (!*key || *key == '#')
			continue;
		eq = strchr(key, '=');
		if (!eq) {
			snprintf(err, errlen, "%s:%u: expected key = value", path, lineno);
			r = -EINVAL;
			break;
		}
		*eq = '\0';
		key = value_trim(key);
		val = value_trim(eq + 1);
		r = config_set(c, key, val, err, errlen);
		if (r < 0)
			break;
	}
	fclose(f);
	return r;
}

static void env_name(const char *prefix, const char *key, char *out, size_t outlen)
{
	size_t n = (size_t)snprintf(out, outlen, "%s", prefix);

	for (const char *k = key; *k && n + 1 < outlen; k++)
		out[n++] = (char)toupper((unsigned char)*k);
	out[n] = '\0';
}

static int load_env(PaddockConfig *c, char *err, size_t errlen)
{
	for (size_t i = 0; i < ARRAY_SIZE(settings); i++) {
		char name[128];
		const char *v = NULL;
		int r;

		env_name("PADDOCK_", settings[i].key, name, sizeof(name));
		v = getenv(name);
		if (!v && settings[i].alias)
			v = getenv(settings[i].alias);
		if (!v)
			continue;
		r = apply(c, &settings[i], v, err, errlen);
		if (r < 0)
			return r;
	}
	return 0;
}

bool config_node_name_valid(const char *name)
{
	size_t n = 0;

	for (const char *p = name; *p; p++, n++)
		if (!isalnum((unsigned char)*p))
			return false;
	return n >= 1 && n <= NODE_NAME_MAX;
}

void config_node_name_from_host(const char *host, char *out, size_t outlen)
{
	size_t n = 0;

	/* The host's own name, before its domain: "paddock-vm.example.com" -> "paddockvm". */
	for (const char *p = host; *p && *p != '.' && n + 1 < outlen && n < NODE_NAME_MAX; p++)
		if (isalnum((unsigned char)*p))
			out[n++] = *p;
	out[n] = '\0';
	if (n == 0)
		snprintf(out, outlen, "node");
}

/* /tmp is a tmpfs, and so is /workspace with workspace_backend = tmpfs: their pages count
 * against the session's memory, so full they must leave its programs room, or filling one
 * would be an OOM kill, not ENOSPC. A workspace on disk is page cache the kernel reclaims. */
static int check_memory_room(PaddockConfig *c, char *err, size_t errlen)
{
	bool ws_in_memory = strcmp(c->workspace_backend, "tmpfs") == 0;
	int64_t held = c->tmp_bytes + (ws_in_memory ? c->workspace_bytes : 0);

	if (held + c->program_memory_min_bytes <= c->memory_max_bytes)
		return 0;
	if (ws_in_memory)
		snprintf(err, errlen,
			 "workspace_bytes (%lld) + tmp_bytes (%lld) + program_memory_min_bytes "
			 "(%lld) exceed memory_max_bytes (%lld): with workspace_backend = tmpfs "
			 "the file systems are held in the session's memory",
			 (long long)c->workspace_bytes, (long long)c->tmp_bytes,
			 (long long)c->program_memory_min_bytes, (long long)c->memory_max_bytes);
	else
		snprintf(err, errlen,
			 "tmp_bytes (%lld) + program_memory_min_bytes (%lld) exceed "
			 "memory_max_bytes (%lld): /tmp is held in the session's memory",
			 (long long)c->tmp_bytes, (long long)c->program_memory_min_bytes,
			 (long long)c->memory_max_bytes);
	return -EINVAL;
}

static int check_workspace_backend(const PaddockConfig *c, char *err, size_t errlen)
{
	if (strcmp(c->workspace_backend, "disk") == 0 || strcmp(c->workspace_backend, "tmpfs") == 0)
		return 0;
	snprintf(err, errlen, "workspace_backend: expected disk or tmpfs, got '%s'",
		 c->workspace_backend);
	return -EINVAL;
}

/* preload_modules: dotted Python names, comma-separated; the template imports them. */
static int check_preload_modules(const PaddockConfig *c, char *err, size_t errlen)
{
	bool start = true;

	for (const char *p = c->preload_modules; *p; p++) {
		char ch = *p;
		bool letter = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_';
		bool digit = ch >= '0' && ch <= '9';

		if (ch == ',' || ch == '.') {
			if (start)
				goto bad;
			start = true;
		} else if (letter || (digit && !start)) {
			start = false;
		} else {
			goto bad;
		}
	}
	if (start && c->preload_modules[0])
		goto bad;
	return 0;
bad:
	snprintf(err, errlen,
		 "preload_modules: expected module names separated by commas, got '%s'",
		 c->preload_modules);
	return -EINVAL;
}

static int check_relations(PaddockConfig *c, char *err, size_t errlen)
{
	int r = check_workspace_backend(c, err, errlen);

	if (r == 0)
		r = check_memory_room(c, err, errlen);
	if (r == 0)
		r = check_preload_modules(c, err, errlen);

	if (r < 0)
		return r;
	if (c->idle_timeout_default > c->idle_timeout_max) {
		snprintf(err, errlen, "idle_timeout_default: above idle_timeout_max");
		return -EINVAL;
	}
	if (c->lifetime_default > c->lifetime_max) {
		snprintf(err, errlen, "lifetime_default: above lifetime_max");
		return -EINVAL;
	}
	if (c->exec_timeout_default > c->exec_timeout_max) {
		snprintf(err, errlen, "exec_timeout_default: above exec_timeout_max");
		return -EINVAL;
	}
	if (strcmp(c->code_backend, "auto") && strcmp(c->code_backend, "native") &&
	    strcmp(c->code_backend, "kernel")) {
		snprintf(err, errlen, "code_backend: expected auto, native or kernel, got '%s'",
			 c->code_backend);
		return -EINVAL;
	}
	if (strcmp(c->log_target, "stderr") && strcmp(c->log_target, "journal") &&
	    strcmp(c->log_target, "syslog")) {
		snprintf(err, errlen, "log_target: stderr, journal or syslog, got '%s'",
			 c->log_target);
		return -EINVAL;
	}
	if (c->node_name[0] == '\0') {
		char host[HOST_NAME_MAX + 1] = "";

		(void)gethostname(host, sizeof(host) - 1);
		free(c->node_name);
		c->node_name = malloc(NODE_NAME_MAX + 1);
		if (!c->node_name)
			return -ENOMEM;
		config_node_name_from_host(host, c->node_name, NODE_NAME_MAX + 1);
		c->node_name_derived = true;
	}
	if (!config_node_name_valid(c->node_name)) {
		snprintf(err, errlen,
			 "node_name: 1 to %d letters and digits (session ids are "
			 "<node_name>-<random>, routed by that prefix), got '%s'",
			 NODE_NAME_MAX, c->node_name);
		return -EINVAL;
	}
	return 0;
}

int config_load(PaddockConfig *c, const char *path, char *err, size_t errlen)
{
	int r;

	*c = (PaddockConfig){ 0 };
	for (size_t i = 0; i < ARRAY_SIZE(settings); i++) {
		r = apply(c, &settings[i], settings[i].def, err, errlen);
		if (r < 0)
			return r;
	}
	if (path) {
		r = load_file(c, path, err, errlen);
		if (r < 0) {
			if (r != -EINVAL)
				snprintf(err, errlen, "%s: %s", path, strerror(-r));
			return r;
		}
	}
	r = load_env(c, err, errlen);
	if (r < 0)
		return r;
	return check_relations(c, err, errlen);
}

void config_dump(const PaddockConfig *c, FILE *out)
{
	for (size_t i = 0; i < ARRAY_SIZE(settings); i++) {
		const char *field = (const char *)c + settings[i].off;

		switch (settings[i].kind) {
		case K_STR:
			/* Tokens are secrets: say whether any are set, never which. */
			if (strcmp(settings[i].key, "auth_tokens") == 0)
				fprintf(out, "%s = %s\n", settings[i].key,
					**(char *const *)field ? "(set)" : "");
			else
				fprintf(out, "%s = %s\n", settings[i].key, *(char *const *)field);
			break;
		case K_BOOL:
			fprintf(out, "%s = %s\n", settings[i].key,
				*(const bool *)field ? "true" : "false");
			break;
		default:
			fprintf(out, "%s = %" PRId64 "\n", settings[i].key,
				*(const int64_t *)field);
		}
	}
}

void config_free(PaddockConfig *c)
{
	runtimes_free(c);
	for (size_t i = 0; i < ARRAY_SIZE(settings); i++)
		if (settings[i].kind == K_STR) {
			char **p = (char **)((char *)c + settings[i].off);
			free(*p);
			*p = NULL;
		}
}
