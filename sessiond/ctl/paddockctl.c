/* SPDX-License-Identifier: MIT */
/* paddockctl: the operator's command line: sessions, kill, drain, stats, and host checks. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>
#include <linux/magic.h>
#include <linux/seccomp.h>

#include "cleanup.h"
#include "config.h"
#include "mountinfo.h"
#include "proto.h"

#define DEFAULT_CONFIG "/etc/paddock/paddock.conf"
#define REPLY_TIMEOUT_S 30

/* The program's context: options and the configuration in force. */
typedef struct Ctl {
	const char *config_path; /* --config, or the default file when readable, or NULL */
	const char *socket_path; /* --socket, or NULL: <runtime_dir>/sessiond.sock */
	bool json;		 /* --json: print the daemon's replies as JSON */
	PaddockConfig cfg;	 /* settings: defaults, file, PADDOCK_* variables */
	char sock[PATH_MAX];	 /* the daemon's socket */
} Ctl;

static inline void json_putp(json_object **o)
{
	if (*o)
		json_object_put(*o);
}
#define _cleanup_json_ _cleanup_(json_putp)

static void usage(FILE *f)
{
	fprintf(f,
		"usage: paddockctl [--config FILE] [--socket PATH] [--json] COMMAND\n"
		"commands:\n"
		"  list                  every session: id, tenant, age, idle, state, memory, cpu\n"
		"  show ID               one session, every field\n"
		"  kill ID               destroy a session now\n"
		"  drain [--off] [--wait [--timeout S]]\n"
		"                        stop (or resume) accepting new sessions; --wait: until none\n"
		"                        is left\n"
		"  stats                 counts, cgroup version, limits in force\n"
		"  doctor [--nginx-conf FILE]\n"
		"                        check this host: kernel features, cgroups, seccomp,\n"
		"                        runtimes, users, sockets, directories, nginx\n");
}

/* ---- talking to the daemon ---- */

/*
 * Send req (not consumed) and read the reply into *ret (owned by the caller).
 * Returns 0 for a reply with "ok": true; -EREMOTEIO for an error reply (printed,
 * unless quiet, and still stored in *ret); -errno when the daemon cannot be reached.
 */
static int ctl_call(const Ctl *c, json_object *req, bool quiet, json_object **ret)
{
	const char *text = json_object_to_json_string_ext(req, JSON_C_TO_STRING_PLAIN);
	_cleanup_close_ int fd = -1;
	ProtoFrame f = { 0 };
	json_object *o, *v;
	int r;

	*ret = NULL;
	fd = proto_connect(c->sock, REPLY_TIMEOUT_S);
	if (fd < 0) {
		if (!quiet)
			fprintf(stderr, "paddockctl: cannot reach paddock-sessiond at %s: %s\n",
				c->sock, strerror(-fd));
		return fd;
	}
	r = proto_write_frame(fd, PROTO_JSON, text, strlen(text), NULL, 0);
	while (r >= 0) {
		r = proto_read_frame(fd, &f);
		if (r < 0 || f.type == PROTO_JSON)
			break;
		proto_frame_clear(&f);
	}
	if (r < 0) {
		if (!quiet)
			fprintf(stderr, "paddockctl: no reply from paddock-sessiond: %s\n",
				strerror(r == -EAGAIN ? ETIMEDOUT : -r));
		return r == -EAGAIN ? -ETIMEDOUT : r;
	}
	o = json_tokener_parse(f.payload);
	proto_frame_clear(&f);
	if (!o || !json_object_is_type(o, json_type_object)) {
		json_object_put(o);
		if (!quiet)
			fprintf(stderr,
				"paddockctl: paddock-sessiond sent a reply that is not JSON\n");
		return -EBADMSG;
	}
	*ret = o;
	if (json_object_object_get_ex(o, "ok", &v) && json_object_get_boolean(v))
		return 0;
	if (!quiet) {
		const char *detail = "request refused";

		if (json_object_object_get_ex(o, "detail", &v) && json_object_get_string(v))
			detail = json_object_get_string(v);
		fprintf(stderr, "paddockctl: %s\n", detail);
	}
	return -EREMOTEIO;
}

/* A request {"op": op}, plus session_id when id is set. */
static json_object *request(const char *op, const char *id)
{
	json_object *o = json_object_new_object();

	if (!o)
		return NULL;
	json_object_object_add(o, "op", json_object_new_string(op));
	json_object_object_add(o, "request_id", json_object_new_string("paddockctl"));
	if (id)
		json_object_object_add(o, "session_id", json_object_new_string(id));
	return o;
}

static void print_json(json_object *o)
{
	json_object_object_del(o, "ok");
	printf("%s\n",
	       json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
							 JSON_C_TO_STRING_NOSLASHESCAPE));
}

/* ---- formatting ---- */

static int64_t field_i64(json_object *o, const char *key)
{
	json_object *v;

	return json_object_object_get_ex(o, key, &v) ? json_object_get_int64(v) : 0;
}

static double field_double(json_object *o, const char *key)
{
	json_object *v;

	return json_object_object_get_ex(o, key, &v) ? json_object_get_double(v) : 0.0;
}

static const char *field_str(json_object *o, const char *key, const char *def)
{
	json_object *v;

	if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
		return def;
	return json_object_get_string(v);
}

static bool field_bool(json_object *o, const char *key)
{
	json_object *v;

	return json_object_object_get_ex(o, key, &v) && json_object_get_boolean(v);
}

/* 42s, 5m07s, 3h12m, 2d04h */
static void fmt_duration(char *buf, size_t len, double seconds)
{
	int64_t s = seconds < 0 ? 0 : (int64_t)seconds;

	if (s < 60)
		snprintf(buf, len, "%llds", (long long)s);
	else if (s < 3600)
		snprintf(buf, len, "%lldm%02llds", (long long)(s / 60), (long long)(s % 60));
	else if (s < 86400)
		snprintf(buf, len, "%lldh%02lldm", (long long)(s / 3600),
			 (long long)(s % 3600 / 60));
	else
		snprintf(buf, len, "%lldd%02lldh", (long long)(s / 86400),
			 (long long)(s % 86400 / 3600));
}

/* 512B, 12.3M, 1.0G */
static void fmt_bytes(char *buf, size_t len, int64_t bytes)
{
	static const char units[] = "KMGT";
	double v = (double)bytes;
	int u = -1;

	if (bytes < 1024) {
		snprintf(buf, len, "%lldB", (long long)bytes);
		return;
	}
	while (v >= 1024 && u < 3) {
		v /= 1024;
		u++;
	}
	snprintf(buf, len, "%.1f%c", v, units[u]);
}

static double now_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- commands ---- */

static int cmd_list(const Ctl *c)
{
	_cleanup_json_ json_object *req = request("admin_sessions", NULL), *rep = NULL;
	json_object *arr;
	double now = now_seconds();
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

static int cmd_show(const Ctl *c, const char *id)
{
	_cleanup_json_ json_object *req = request("admin_sessions", NULL), *rep = NULL;
	json_object *arr;
	double now = now_seconds();

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

static int cmd_kill(const Ctl *c, const char *id)
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

static int cmd_drain(const Ctl *c, bool on, bool wait, double timeout)
{
	_cleanup_json_ json_object *req = request("drain", NULL), *rep = NULL;
	struct timespec start, t;
	int64_t left;
	int r;

	if (!req)
		return -ENOMEM;
	json_object_object_add(req, "on", json_object_new_boolean(on));
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

static int cmd_stats(const Ctl *c)
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

/* ---- doctor ---- */

enum check_status { CHECK_OK, CHECK_WARN, CHECK_FAIL };

/* The findings so far. */
typedef struct Doctor {
	const Ctl *ctl;	     /* the configuration checked */
	json_object *checks; /* [{name, status, detail, fix}] */
	unsigned failed;     /* checks that failed */
	bool root;	     /* running as root: every check can run */
} Doctor;

static void report(Doctor *d, enum check_status st, const char *name, const char *fix,
		   const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void report(Doctor *d, enum check_status st, const char *name, const char *fix,
		   const char *fmt, ...)
{
	static const char *const words[] = { "ok", "warn", "fail" };
	json_object *o = json_object_new_object();
	char detail[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	if (st == CHECK_FAIL)
		d->failed++;
	if (o) {
		json_object_object_add(o, "name", json_object_new_string(name));
		json_object_object_add(o, "status", json_object_new_string(words[st]));
		json_object_object_add(o, "detail", json_object_new_string(detail));
		json_object_object_add(o, "fix",
				       st != CHECK_OK && fix ? json_object_new_string(fix) : NULL);
		json_object_array_add(d->checks, o);
	}
	if (d->ctl->json)
		return;
	printf("%-5s %-22s %s\n",
	       st == CHECK_OK	? "ok" :
	       st == CHECK_WARN ? "warn" :
				  "FAIL",
	       name, detail);
	if (st != CHECK_OK && fix)
		printf("      %-22s fix: %s\n", "", fix);
}

/* Run fn(arg) in a child process; returns its exit status, or -errno. */
static int in_child(int (*fn)(const void *arg), const void *arg)
{
	int status;
	pid_t pid = fork();

	if (pid < 0)
		return -errno;
	if (pid == 0)
		_exit(fn(arg));
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	if (!WIFEXITED(status))
		return -ECHILD;
	return WEXITSTATUS(status);
}

/* Child side: unshare the namespaces in *arg; exit with the errno (0: it worked). */
static int try_unshare(const void *arg)
{
	return unshare(*(const int *)arg) < 0 ? errno : 0;
}

static void check_namespaces(Doctor *d)
{
	static const struct {
		const char *name;
		int flag;
		const char *fix;
	} ns[] = {
		{ "user namespace", CLONE_NEWUSER,
		  "set user.max_user_namespaces above 0 (sysctl -w user.max_user_namespaces=15000); "
		  "on a kernel without CONFIG_USER_NS, install one with it" },
		{ "network namespace", CLONE_NEWNET, "a kernel built with CONFIG_NET_NS" },
		{ "mount namespace", CLONE_NEWNS, "a kernel with mount namespaces" },
		{ "pid namespace", CLONE_NEWPID, "a kernel built with CONFIG_PID_NS" },
		{ "ipc namespace", CLONE_NEWIPC, "a kernel built with CONFIG_IPC_NS" },
		{ "uts namespace", CLONE_NEWUTS, "a kernel built with CONFIG_UTS_NS" },
		{ "cgroup namespace", CLONE_NEWCGROUP,
		  "a kernel built with CONFIG_CGROUPS (4.6+)" },
	};
	_cleanup_fclose_ FILE *f = fopen("/proc/sys/user/max_user_namespaces", "re");
	long max = -1;

	if (f && fscanf(f, "%ld", &max) == 1 && max == 0)
		report(d, CHECK_FAIL, "user namespace", ns[0].fix,
		       "user.max_user_namespaces is 0: user namespaces are switched off");
	for (size_t i = 0; i < ARRAY_SIZE(ns); i++) {
		int r;

		if (i == 0 && max == 0)
			continue;
		if (!d->root && ns[i].flag != CLONE_NEWUSER) {
			report(d, CHECK_WARN, ns[i].name, "run paddockctl doctor as root",
			       "not checked: needs root");
			continue;
		}
		r = in_child(try_unshare, &ns[i].flag);
		if (r == 0)
			report(d, CHECK_OK, ns[i].name, NULL, "can be created");
		else
			report(d, CHECK_FAIL, ns[i].name, ns[i].fix, "cannot be created: %s",
			       strerror(r < 0 ? -r : r));
	}
}

static bool word_in(const char *list, const char *word)
{
	size_t n = strlen(word);

	for (const char *p = list; (p = strstr(p, word)); p += n)
		if ((p == list || p[-1] == ' ' || p[-1] == '\t') &&
		    (p[n] == '\0' || p[n] == ' ' || p[n] == '\n' || p[n] == '\t'))
			return true;
	return false;
}

static void check_cgroups(Doctor *d)
{
	struct statfs sfs;
	char line[512];

	if (statfs("/sys/fs/cgroup", &sfs) < 0) {
		report(d, CHECK_FAIL, "cgroups", "mount cgroup2 on /sys/fs/cgroup",
		       "/sys/fs/cgroup: %s", strerror(errno));
		return;
	}
	if (sfs.f_type == CGROUP2_SUPER_MAGIC) {
		_cleanup_fclose_ FILE *f = fopen("/sys/fs/cgroup/cgroup.controllers", "re");
		const char *fix = "enable the controller on the kernel command line "
				  "(cgroup_enable=memory) and make sure nothing disables it "
				  "(cgroup_disable=, systemd.unified_cgroup_hierarchy)";

		if (!f || !fgets(line, sizeof(line), f)) {
			report(d, CHECK_FAIL, "cgroup v2", fix, "cannot read cgroup.controllers");
			return;
		}
		report(d, CHECK_OK, "cgroup version", NULL, "v2 (unified)");
		report(d, word_in(line, "memory") ? CHECK_OK : CHECK_FAIL, "cgroup memory", fix,
		       "%s", word_in(line, "memory") ? "available" : "memory controller missing");
		report(d, word_in(line, "pids") ? CHECK_OK : CHECK_FAIL, "cgroup pids", fix, "%s",
		       word_in(line, "pids") ? "available" : "pids controller missing");
		report(d, word_in(line, "cpu") ? CHECK_OK : CHECK_WARN, "cgroup cpu", fix, "%s",
		       word_in(line, "cpu") ? "available" :
					      "cpu controller missing: cpu_quota_percent is not "
					      "enforced");
		return;
	} else {
		_cleanup_fclose_ FILE *f = fopen("/proc/cgroups", "re");
		bool mem = false, pids = false, cpu = false;
		const char *fix = "mount the memory and pids hierarchies under /sys/fs/cgroup "
				  "(cgroup_enable=memory on the kernel command line), or boot "
				  "with systemd.unified_cgroup_hierarchy=1 for cgroup v2";

		while (f && fgets(line, sizeof(line), f)) {
			char name[64];
			int hier, num, enabled;

			if (sscanf(line, "%63s %d %d %d", name, &hier, &num, &enabled) != 4 ||
			    !enabled)
				continue;
			mem |= strcmp(name, "memory") == 0;
			pids |= strcmp(name, "pids") == 0;
			cpu |= strcmp(name, "cpu") == 0;
		}
		report(d, CHECK_OK, "cgroup version", NULL, "v1 (legacy or hybrid hierarchy)");
		report(d, mem ? CHECK_OK : CHECK_FAIL, "cgroup memory", fix, "%s",
		       mem ? "available" : "memory controller missing");
		report(d, pids ? CHECK_OK : CHECK_FAIL, "cgroup pids", fix, "%s",
		       pids ? "available" : "pids controller missing");
		report(d, cpu ? CHECK_OK : CHECK_WARN, "cgroup cpu", fix, "%s",
		       cpu ? "available" : "cpu controller missing: quota not enforced");
	}
}

/* Without favordynmods every sandbox build waits ~10 ms in its cgroup migration. */
static void check_favordynmods(Doctor *d)
{
	char mnt[PATH_MAX], opts[512];
	bool ro;

	if (mountinfo_find_cgroup2(mnt, sizeof(mnt), opts, sizeof(opts), &ro) < 0) {
		report(d, CHECK_WARN, "cgroup favordynmods",
		       "mount cgroup2 (the hybrid layout's /sys/fs/cgroup/unified will do)",
		       "no cgroup2 mount: each sandbox build waits for an RCU grace period");
		return;
	}
	if (mount_options_have(opts, "favordynmods")) {
		report(d, CHECK_OK, "cgroup favordynmods", NULL, "set on %s", mnt);
		return;
	}
	report(d, CHECK_WARN, "cgroup favordynmods",
	       "cgroup_favor_dynmods = true (the default) sets it when paddock-sessiond starts",
	       "not set on %s: each sandbox build waits about 10 ms to join its cgroup", mnt);
}

static void check_seccomp(Doctor *d)
{
	const char *fix = "a kernel built with CONFIG_SECCOMP and CONFIG_SECCOMP_FILTER";
	_cleanup_fclose_ FILE *f = NULL;
	char line[512] = "";

	if (prctl(PR_GET_SECCOMP, 0, 0, 0, 0) < 0) {
		report(d, CHECK_FAIL, "seccomp", fix, "not supported by the kernel: %s",
		       strerror(errno));
		return;
	}
	/* A NULL filter: EFAULT when filters are supported, EINVAL when not. */
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, NULL, 0, 0) == 0 || errno != EFAULT) {
		report(d, CHECK_FAIL, "seccomp", fix, "filter mode is not available");
		return;
	}
	f = fopen("/proc/sys/kernel/seccomp/actions_avail", "re");
	if (f && fgets(line, sizeof(line), f) &&
	    (!word_in(line, "errno") || !word_in(line, "kill_process"))) {
		report(d, CHECK_FAIL, "seccomp", "a kernel of 4.14 or later",
		       "the kernel lacks the errno or kill_process action");
		return;
	}
	report(d, CHECK_OK, "seccomp", NULL, "filters available");
}

static bool executable(const char *path)
{
	struct stat st;

	return path && *path && stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
	       access(path, X_OK) == 0;
}

static void check_runtimes(Doctor *d)
{
	const PaddockConfig *cfg = &d->ctl->cfg;
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/paddock-init", cfg->lib_dir);
	report(d, executable(path) ? CHECK_OK : CHECK_FAIL, "paddock-init",
	       "reinstall the package, or set lib_dir to where paddock-init is", "%s%s", path,
	       executable(path) ? "" : " is missing");
	report(d, executable(cfg->python_bin) ? CHECK_OK : CHECK_FAIL, "python",
	       "install python3 (apt install python3 / dnf install python3) or set python_bin",
	       "%s%s", cfg->python_bin, executable(cfg->python_bin) ? "" : " is missing");
	report(d, executable(cfg->bash_bin) ? CHECK_OK : CHECK_FAIL, "bash",
	       "install bash or set bash_bin", "%s%s", cfg->bash_bin,
	       executable(cfg->bash_bin) ? "" : " is missing");
	report(d, executable(cfg->node_bin) ? CHECK_OK : CHECK_WARN, "node",
	       "install nodejs (apt install nodejs / dnf install nodejs) for JavaScript sessions",
	       "%s%s", cfg->node_bin,
	       executable(cfg->node_bin) ? "" : " is missing: JavaScript is unavailable");
}

/* Whether user pw is a member of group gid (primary or supplementary). */
static bool user_in_group(const struct passwd *pw, gid_t gid)
{
	gid_t groups[256];
	int n = (int)ARRAY_SIZE(groups);

	if (pw->pw_gid == gid)
		return true;
	if (getgrouplist(pw->pw_name, pw->pw_gid, groups, &n) < 0)
		return false;
	for (int i = 0; i < n; i++)
		if (groups[i] == gid)
			return true;
	return false;
}

static void check_users(Doctor *d)
{
	const PaddockConfig *cfg = &d->ctl->cfg;
	struct passwd *pw = getpwnam(cfg->worker_user);
	struct group *gr = getgrnam(cfg->socket_group);
	int64_t lo = cfg->uid_base, hi = cfg->uid_base + cfg->uid_count;
	char clash[256] = "";

	report(d, pw ? CHECK_OK : CHECK_FAIL, "worker user",
	       "adduser --system --group --no-create-home paddock (the package does this)", "%s%s",
	       cfg->worker_user, pw ? " exists" : " does not exist");
	report(d, gr ? CHECK_OK : CHECK_FAIL, "socket group", "addgroup --system paddock", "%s%s",
	       cfg->socket_group, gr ? " exists" : " does not exist");
	setpwent();
	while ((pw = getpwent()))
		if ((int64_t)pw->pw_uid >= lo && (int64_t)pw->pw_uid < hi) {
			snprintf(clash, sizeof(clash), "%s (uid %u)", pw->pw_name,
				 (unsigned)pw->pw_uid);
			break;
		}
	endpwent();
	if (clash[0])
		report(d, CHECK_FAIL, "sandbox uids",
		       "move uid_base/uid_count to a range no account uses",
		       "user %s is inside %lld..%lld", clash, (long long)lo, (long long)hi - 1);
	else
		report(d, CHECK_OK, "sandbox uids", NULL, "%lld..%lld used by no account",
		       (long long)lo, (long long)hi - 1);
}

/* Child side: become the worker user and connect to the socket in arg. */
static int connect_as_worker(const void *arg)
{
	const Ctl *c = arg;
	struct passwd *pw = getpwnam(c->cfg.worker_user);
	int fd;

	if (!pw || initgroups(pw->pw_name, pw->pw_gid) < 0 || setgid(pw->pw_gid) < 0 ||
	    setuid(pw->pw_uid) < 0)
		return 100;
	fd = proto_connect(c->sock, REPLY_TIMEOUT_S);
	if (fd < 0)
		return -fd;
	close(fd);
	return 0;
}

static void check_dirs_and_sockets(Doctor *d)
{
	const Ctl *c = d->ctl;
	const PaddockConfig *cfg = &c->cfg;
	_cleanup_json_ json_object *req = request("stats", NULL), *rep = NULL;
	struct group *gr = getgrnam(cfg->socket_group);
	char fsock[PATH_MAX];
	struct stat st;
	int r, fd;

	if (stat(cfg->state_dir, &st) < 0)
		report(d, CHECK_FAIL, "state dir",
		       "create it: install -d -m 0755 -o root -g root <state_dir>", "%s: %s",
		       cfg->state_dir, strerror(errno));
	else if (st.st_uid != 0 || (st.st_mode & 0022))
		report(d, CHECK_FAIL, "state dir", "chown root:root <state_dir> && chmod go-w",
		       "%s must be owned by root and writable by root only (mode %04o, uid %u)",
		       cfg->state_dir, st.st_mode & 07777, (unsigned)st.st_uid);
	else
		report(d, CHECK_OK, "state dir", NULL, "%s", cfg->state_dir);

	if (stat(cfg->runtime_dir, &st) < 0)
		report(d, CHECK_FAIL, "runtime dir", "start paddock-sessiond (it creates it)",
		       "%s: %s", cfg->runtime_dir, strerror(errno));
	else if (st.st_mode & 0002)
		report(d, CHECK_FAIL, "runtime dir", "chmod o-w <runtime_dir>",
		       "%s is world-writable", cfg->runtime_dir);
	else
		report(d, CHECK_OK, "runtime dir", NULL, "%s", cfg->runtime_dir);

	if (lstat(c->sock, &st) == 0 && S_ISSOCK(st.st_mode) &&
	    ((st.st_mode & 0007) || (gr && st.st_gid != gr->gr_gid)))
		report(d, CHECK_FAIL, "sessiond socket permissions",
		       "restart paddock-sessiond; check socket_group",
		       "%s is mode %04o group %u; expected 0660 and group %s", c->sock,
		       st.st_mode & 07777, (unsigned)st.st_gid, cfg->socket_group);
	r = ctl_call(c, req, true, &rep);
	if (r == 0 || r == -EREMOTEIO)
		report(d, CHECK_OK, "sessiond", NULL, "answers on %s (node %s, %lld sessions%s)",
		       c->sock, field_str(rep, "node", "?"), (long long)field_i64(rep, "sessions"),
		       field_bool(rep, "draining") ? ", draining" : "");
	else
		report(d, CHECK_FAIL, "sessiond",
		       "systemctl start paddock-sessiond; journalctl -u paddock-sessiond", "%s: %s",
		       c->sock, strerror(-r));
	if ((r == 0 || r == -EREMOTEIO) && d->root && getpwnam(cfg->worker_user)) {
		r = in_child(connect_as_worker, c);
		if (r == 0)
			report(d, CHECK_OK, "worker reaches sessiond", NULL, "%s can connect",
			       cfg->worker_user);
		else
			report(d, CHECK_FAIL, "worker reaches sessiond",
			       "every directory above the socket must be searchable by the "
			       "worker user, and the socket in group socket_group",
			       "%s cannot connect to %s: %s", cfg->worker_user, c->sock,
			       r == 100 ? "cannot become that user" : strerror(r));
	}

	snprintf(fsock, sizeof(fsock), "%s/fcgi.sock", cfg->runtime_dir);
	fd = proto_connect(fsock, REPLY_TIMEOUT_S);
	if (fd >= 0) {
		close(fd);
		report(d, CHECK_OK, "fcgi socket", NULL, "%s accepts connections", fsock);
	} else {
		report(d, CHECK_FAIL, "fcgi socket",
		       "systemctl enable --now paddock-fcgi.socket (or run paddock-fcgi --socket)",
		       "%s: %s", fsock, strerror(-fd));
	}
}

/* Run argv, returning its standard output (owned) and exit status. */
static int capture(char *const argv[], char **out, int *status)
{
	_cleanup_free_ char *buf = NULL;
	size_t len = 0, cap = 0;
	int pipefd[2];
	pid_t pid;

	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return -errno;
	pid = fork();
	if (pid < 0) {
		close(pipefd[0]);
		close(pipefd[1]);
		return -errno;
	}
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);

		if (dup2(pipefd[1], 1) < 0 ||
		    (null >= 0 && (dup2(null, 0) < 0 || dup2(null, 2) < 0)))
			_exit(127);
		execv(argv[0], argv);
		_exit(127);
	}
	close(pipefd[1]);
	for (;;) {
		ssize_t n;

		if (len + 4096 + 1 > cap) {
			char *nb = realloc(buf, cap ? cap * 2 : 65536);

			if (!nb)
				break;
			buf = nb;
			cap = cap ? cap * 2 : 65536;
		}
		n = read(pipefd[0], buf + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(pipefd[0]);
	while (waitpid(pid, status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	if (!buf)
		return -ENOMEM;
	buf[len] = '\0';
	*out = TAKE_PTR(buf);
	return 0;
}

/* The first top-level "user NAME" directive of an nginx -T dump, or NULL. */
static const char *nginx_user(char *dump, char *name, size_t len)
{
	for (char *line = strtok(dump, "\n"); line; line = strtok(NULL, "\n")) {
		char *p = line;

		if (strncmp(p, "user", 4) != 0 || (p[4] != ' ' && p[4] != '\t'))
			continue;
		p += 4;
		p += strspn(p, " \t");
		p[strcspn(p, " \t;")] = '\0';
		snprintf(name, len, "%s", p);
		return name;
	}
	return NULL;
}

static void check_nginx(Doctor *d, const char *nginx_conf)
{
	static const char *const bins[] = { "/usr/sbin/nginx", "/usr/bin/nginx",
					    "/usr/local/sbin/nginx",
					    "/usr/local/nginx/sbin/nginx" };
	const PaddockConfig *cfg = &d->ctl->cfg;
	_cleanup_free_ char *dump = NULL;
	const char *bin = NULL, *user;
	char sock[PATH_MAX + 16], uname[64];
	struct passwd *pw;
	struct group *gr;
	int status = 0, r;

	for (size_t i = 0; i < ARRAY_SIZE(bins) && !bin; i++)
		if (executable(bins[i]))
			bin = bins[i];
	if (!bin) {
		report(d, CHECK_FAIL, "nginx", "apt install nginx / dnf install nginx",
		       "not installed");
		return;
	}
	report(d, CHECK_OK, "nginx", NULL, "%s", bin);
	if (!d->root) {
		report(d, CHECK_WARN, "nginx wiring", "run paddockctl doctor as root",
		       "not checked: reading nginx's configuration needs root");
		return;
	}
	{
		char *argv[] = { (char *)bin,	     "-T", "-q", nginx_conf ? "-c" : NULL,
				 (char *)nginx_conf, NULL };

		r = capture(argv, &dump, &status);
	}
	if (r < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		report(d, CHECK_FAIL, "nginx wiring", "nginx -t shows what is wrong",
		       "nginx -T failed: its configuration does not load");
		return;
	}
	snprintf(sock, sizeof(sock), "unix:%s/fcgi.sock", cfg->runtime_dir);
	if (!strstr(dump, "upstream paddock_fcgi") || !strstr(dump, sock))
		report(d, CHECK_FAIL, "nginx upstream",
		       "include paddock-upstream.conf in the http block (the package puts it in "
		       "/etc/nginx/conf.d)",
		       "no upstream paddock_fcgi with server %s", sock);
	else
		report(d, CHECK_OK, "nginx upstream", NULL, "paddock_fcgi -> %s", sock + 5);
	if (!strstr(dump, "fastcgi_pass paddock_fcgi"))
		report(d, CHECK_FAIL, "nginx locations",
		       "include the paddock-locations.conf snippet in a server block, or enable "
		       "the shipped site (docs/operations.md)",
		       "no location passes to paddock_fcgi");
	else
		report(d, CHECK_OK, "nginx locations", NULL, "paddock's locations are included");

	user = nginx_user(dump, uname, sizeof(uname));
	if (!user)
		user = "nobody"; /* nginx's built-in default */
	pw = getpwnam(user);
	gr = getgrnam(cfg->socket_group);
	if (!pw || !gr)
		report(d, CHECK_FAIL, "nginx user", "create the user or fix nginx's user directive",
		       "nginx runs as %s, which %s", user,
		       !pw ? "does not exist" : "cannot be checked: no socket group");
	else if (!user_in_group(pw, gr->gr_gid))
		report(d, CHECK_FAIL, "nginx user",
		       "usermod -aG paddock <nginx user>, then restart nginx",
		       "nginx runs as %s, which is not in group %s: it cannot reach fcgi.sock",
		       user, cfg->socket_group);
	else
		report(d, CHECK_OK, "nginx user", NULL, "%s is in group %s", user,
		       cfg->socket_group);
}

static int cmd_doctor(const Ctl *c, const char *nginx_conf)
{
	Doctor d = { .ctl = c, .checks = json_object_new_array(), .root = geteuid() == 0 };
	json_object *o;

	if (!d.checks)
		return -ENOMEM;
	if (!d.root && !c->json)
		printf("(not root: some checks are skipped)\n");
	check_namespaces(&d);
	check_cgroups(&d);
	check_favordynmods(&d);
	check_seccomp(&d);
	check_runtimes(&d);
	check_users(&d);
	check_dirs_and_sockets(&d);
	check_nginx(&d, nginx_conf);
	if (c->json) {
		o = json_object_new_object();
		json_object_object_add(o, "ok", json_object_new_boolean(d.failed == 0));
		json_object_object_add(o, "checks", d.checks);
		printf("%s\n", json_object_to_json_string_ext(
				       o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
						  JSON_C_TO_STRING_NOSLASHESCAPE));
		json_object_put(o);
	} else {
		json_object_put(d.checks);
		printf("%s\n", d.failed ? "some checks failed: see the fixes above" :
					  "all required checks passed");
	}
	return d.failed ? -EPROTO : 0;
}

/* ---- main ---- */

static int run(Ctl *c, int argc, char **argv)
{
	const char *cmd = argv[0];

	if (strcmp(cmd, "list") == 0 && argc == 1)
		return cmd_list(c);
	if (strcmp(cmd, "show") == 0 && argc == 2)
		return cmd_show(c, argv[1]);
	if (strcmp(cmd, "kill") == 0 && argc == 2)
		return cmd_kill(c, argv[1]);
	if (strcmp(cmd, "stats") == 0 && argc == 1)
		return cmd_stats(c);
	if (strcmp(cmd, "drain") == 0) {
		bool on = true, wait = false;
		double timeout = 0;

		for (int i = 1; i < argc; i++) {
			char *end;

			if (strcmp(argv[i], "--off") == 0) {
				on = false;
			} else if (strcmp(argv[i], "--wait") == 0) {
				wait = true;
			} else if (strcmp(argv[i], "--timeout") == 0 && i + 1 < argc) {
				timeout = strtod(argv[++i], &end);
				if (*end || timeout <= 0 || !isfinite(timeout))
					return -EINVAL;
			} else {
				return -EINVAL;
			}
		}
		return cmd_drain(c, on, wait, timeout);
	}
	if (strcmp(cmd, "doctor") == 0) {
		if (argc == 1)
			return cmd_doctor(c, NULL);
		if (argc == 3 && strcmp(argv[1], "--nginx-conf") == 0)
			return cmd_doctor(c, argv[2]);
	}
	return -EINVAL;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "socket", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 },
	};
	Ctl c = { 0 };
	char err[512] = "";
	int opt, r;

	/* Options stop at the command, so "drain --off" reaches the command. */
	while ((opt = getopt_long(argc, argv, "+c:s:jhV", opts, NULL)) != -1) {
		switch (opt) {
		case 'c': c.config_path = optarg; break;
		case 's': c.socket_path = optarg; break;
		case 'j': c.json = true; break;
		case 'h': usage(stdout); return 0;
		case 'V': printf("paddockctl %s\n", PADDOCK_VERSION); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return 2;
	}
	if (!c.config_path && access(DEFAULT_CONFIG, R_OK) == 0)
		c.config_path = DEFAULT_CONFIG;
	if (c.config_path && access(c.config_path, R_OK) < 0) {
		fprintf(stderr, "paddockctl: %s: %s\n", c.config_path, strerror(errno));
		return 2;
	}
	if (config_load(&c.cfg, c.config_path, err, sizeof(err)) < 0) {
		fprintf(stderr, "paddockctl: configuration: %s\n", err);
		config_free(&c.cfg);
		return 2;
	}
	if (c.socket_path)
		snprintf(c.sock, sizeof(c.sock), "%s", c.socket_path);
	else
		snprintf(c.sock, sizeof(c.sock), "%s/sessiond.sock", c.cfg.runtime_dir);
	signal(SIGPIPE, SIG_IGN);
	r = run(&c, argc - optind, argv + optind);
	config_free(&c.cfg);
	if (r == -EINVAL) {
		usage(stderr);
		return 2;
	}
	return r < 0 ? 1 : 0;
}
