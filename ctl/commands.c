/* SPDX-License-Identifier: MIT */
/* The session commands: list, show, kill, drain, stats. */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "cleanup.h"
#include "clock.h"
#include "ctl.h"
#include "json.h"

int cmd_list(const Ctl *c)
{
	_cleanup_json_ json_object *req = request("admin_sessions", NULL), *rep = NULL;
	json_object *arr;
	double now = now_real();
	size_t n;

	if (!req)
		return -ENOMEM;
	if (ctl_call(c, req, false, &rep) < 0)
		return -EIO;
	if (c->json) {
		print_json(rep);
		return 0;
	}
	if (!json_object_object_get_ex(rep, "sessions", &arr) ||
	    !json_object_is_type(arr, json_type_array))
		return -EBADMSG;
	n = json_object_array_length(arr);
	printf("%-40s %-16s %8s %8s %-8s %8s %9s\n", "ID", "TENANT", "AGE", "IDLE", "STATE",
	       "MEMORY", "CPU");
	for (size_t i = 0; i < n; i++) {
		json_object *s = json_object_array_get_idx(arr, i);
		char age[32], idle[32], mem[32], cpu[32];

		fmt_duration(age, sizeof(age), now - field_double(s, "created_at"));
		fmt_duration(idle, sizeof(idle), now - field_double(s, "last_activity_at"));
		fmt_bytes(mem, sizeof(mem), field_i64(s, "memory_bytes"));
		snprintf(cpu, sizeof(cpu), "%.2fs", (double)field_i64(s, "cpu_ms") / 1000.0);
		printf("%-40s %-16s %8s %8s %-8s %8s %9s\n", field_str(s, "session_id", "?"),
		       field_str(s, "tenant", "-"), age, idle,
		       field_bool(s, "running") ? "running" : "idle", mem, cpu);
	}
	if (n == 0)
		printf("(no sessions)\n");
	return 0;
}

int cmd_show(const Ctl *c, const char *id)
{
	_cleanup_json_ json_object *req = request("admin_sessions", NULL), *rep = NULL;
	json_object *arr;
	double now = now_real();

	if (!req)
		return -ENOMEM;
	if (ctl_call(c, req, false, &rep) < 0)
		return -EIO;
	if (!json_object_object_get_ex(rep, "sessions", &arr) ||
	    !json_object_is_type(arr, json_type_array))
		return -EBADMSG;
	for (size_t i = 0; i < json_object_array_length(arr); i++) {
		json_object *s = json_object_array_get_idx(arr, i);
		char buf[32];

		if (strcmp(field_str(s, "session_id", ""), id) != 0)
			continue;
		if (c->json) {
			printf("%s\n",
			       json_object_to_json_string_ext(
				       s, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
						  JSON_C_TO_STRING_NOSLASHESCAPE));
			return 0;
		}
		json_object_object_foreach(s, key, val) {
			printf("%-22s %s\n", key, val ? json_object_get_string(val) : "-");
		}
		fmt_duration(buf, sizeof(buf), now - field_double(s, "created_at"));
		printf("%-22s %s\n", "age", buf);
		fmt_duration(buf, sizeof(buf), now - field_double(s, "last_activity_at"));
		printf("%-22s %s\n", "idle", buf);
		return 0;
	}
	fprintf(stderr, "paddockctl: no session %s\n", id);
	return -ENOENT;
}

int cmd_kill(const Ctl *c, const char *id)
{
	_cleanup_json_ json_object *req = request("kill", id), *rep = NULL;

	if (!req)
		return -ENOMEM;
	if (ctl_call(c, req, false, &rep) < 0)
		return -EIO;
	if (c->json)
		print_json(rep);
	else if (field_bool(rep, "existed"))
		printf("killed %s\n", id);
	if (!field_bool(rep, "existed")) {
		if (!c->json)
			fprintf(stderr, "paddockctl: no session %s\n", id);
		return -ENOENT;
	}
	return 0;
}

static int stats_sessions(const Ctl *c, int64_t *ret)
{
	_cleanup_json_ json_object *req = request("stats", NULL), *rep = NULL;

	if (!req)
		return -ENOMEM;
	if (ctl_call(c, req, false, &rep) < 0)
		return -EIO;
	*ret = field_i64(rep, "sessions") + field_i64(rep, "tearing_down");
	return 0;
}

int cmd_drain(const Ctl *c, bool on, bool wait, double timeout)
{
	_cleanup_json_ json_object *req = request("drain", NULL), *rep = NULL;
	struct timespec start, t;
	int64_t left;
	int r;

	if (!req)
		return -ENOMEM;
	json_set(req, "on", json_object_new_boolean(on));
	if (ctl_call(c, req, false, &rep) < 0)
		return -EIO;
	if (c->json)
		print_json(rep);
	else
		printf("draining %s; %lld sessions left\n",
		       field_bool(rep, "draining") ? "on" : "off",
		       (long long)field_i64(rep, "sessions"));
	if (!on || !wait)
		return 0;
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		r = stats_sessions(c, &left);
		if (r < 0)
			return r;
		if (left == 0) {
			if (!c->json)
				printf("drained: no session left\n");
			return 0;
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (timeout > 0 &&
		    (double)(t.tv_sec - start.tv_sec) + (double)(t.tv_nsec - start.tv_nsec) / 1e9 >=
			    timeout) {
			fprintf(stderr, "paddockctl: %lld sessions still live after %.0f s\n",
				(long long)left, timeout);
			return -ETIMEDOUT;
		}
		poll(NULL, 0, 500);
	}
}

int cmd_stats(const Ctl *c)
{
	_cleanup_json_ json_object *req = request("stats", NULL), *rep = NULL;
	json_object *lim;

	if (!req)
		return -ENOMEM;
	if (ctl_call(c, req, false, &rep) < 0)
		return -EIO;
	if (c->json) {
		print_json(rep);
		return 0;
	}
	printf("node           %s\n", field_str(rep, "node", "?"));
	printf("sessions       %lld of %lld (%lld running a call, %lld being torn down)\n",
	       (long long)field_i64(rep, "sessions"), (long long)field_i64(rep, "max_sessions"),
	       (long long)field_i64(rep, "running"), (long long)field_i64(rep, "tearing_down"));
	printf("draining       %s\n", field_bool(rep, "draining") ? "yes" : "no");
	printf("cgroup         %s\n", field_str(rep, "cgroup", "?"));
	if (json_object_object_get_ex(rep, "pool", &lim) && lim)
		printf("pool           %s\n", json_object_get_string(lim));
	if (json_object_object_get_ex(rep, "limits", &lim) &&
	    json_object_is_type(lim, json_type_object)) {
		printf("limits per session:\n");
		json_object_object_foreach(lim, key, val) {
			printf("  %-20s %s\n", key, val ? json_object_get_string(val) : "-");
		}
	}
	return 0;
}
