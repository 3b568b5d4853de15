/* SPDX-License-Identifier: MIT */
/* paddockctl doctor: the host's checks (kernel, units, users, runtimes, dirs, nginx). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>
#include <linux/magic.h>
#include <systemd/sd-daemon.h>

#include "cleanup.h"
#include "clone.h"
#include "ctl.h"
#include "json.h"
#include "kernel_features.h"
#include "proto.h"
#include "site.h"

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
		json_set(o, "name", json_object_new_string(name));
		json_set(o, "status", json_object_new_string(words[st]));
		json_set(o, "detail", json_object_new_string(detail));
		json_set_string_or_null(o, "fix", st != CHECK_OK ? fix : NULL);
		json_append(d->checks, o);
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

/* One finding of the kernel feature probes (common/kernel_features.c), as sessiond sees it. */
static void on_feature(const FeatureCheck *fc, void *data)
{
	Doctor *d = data;

	switch (fc->state) {
	case FEATURE_OK: report(d, CHECK_OK, fc->name, NULL, "%s", fc->detail); break;
	case FEATURE_MISSING:
		report(d, fc->required ? CHECK_FAIL : CHECK_WARN, fc->name, fc->fix, "%s",
		       fc->detail);
		break;
	case FEATURE_UNCHECKED:
		report(d, CHECK_WARN, fc->name, "run paddockctl doctor as root", "%s", fc->detail);
		break;
	}
}

/* The probes paddock-sessiond runs at start, from here: the kernel, cgroups, seccomp. */
static void check_kernel_features(Doctor *d)
{
	const FeatureContext ctx = { .root = d->root,
				     .favor_dynmods = d->ctl->cfg.cgroup_favor_dynmods };

	(void)kernel_features_probe(&ctx, on_feature, d);
}

/* A unit setting that breaks paddock, and what to say about it. */
struct unit_hazard {
	const char *property; /* as systemctl show prints it */
	const char *value;    /* the value that breaks paddock */
	enum check_status st; /* fail, or warn when only part of paddock suffers */
	const char *what;     /* what it breaks */
	const char *fix;      /* how to undo it */
};

static const struct unit_hazard unit_hazards[] = {
	{ "RestrictSUIDSGID", "yes", CHECK_FAIL,
	  "its seccomp filter answers openat2() with ENOSYS: every file operation fails",
	  "systemctl edit paddock-sessiond: [Service] RestrictSUIDSGID=no" },
	{ "ProtectControlGroups", "yes", CHECK_FAIL,
	  "it mounts /sys/fs/cgroup read-only: no session's cgroup can be made",
	  "systemctl edit paddock-sessiond: [Service] ProtectControlGroups=no" },
	{ "PrivateUsers", "yes", CHECK_FAIL,
	  "the daemon runs in a user namespace without the sandboxes' uids",
	  "systemctl edit paddock-sessiond: [Service] PrivateUsers=no" },
	{ "MemoryDenyWriteExecute", "yes", CHECK_WARN,
	  "every sandbox inherits its filter: node (a JIT) cannot run",
	  "systemctl edit paddock-sessiond: [Service] MemoryDenyWriteExecute=no" },
};

/* The value of "key=value" among systemctl show's lines, or NULL. */
static const char *show_value(const char *dump, const char *key, char *out, size_t len)
{
	size_t klen = strlen(key);

	for (const char *line = dump; line && *line;) {
		const char *nl = strchr(line, '\n');

		if (strncmp(line, key, klen) == 0 && line[klen] == '=') {
			size_t n = nl ? (size_t)(nl - line) - klen - 1 : strlen(line + klen + 1);

			snprintf(out, len, "%.*s", (int)n, line + klen + 1);
			return out;
		}
		line = nl ? nl + 1 : NULL;
	}
	return NULL;
}

/*
 * The daemon's unit may refuse what this shell allows: its hardening settings, read from
 * systemd, for the ones known to break paddock. Its own start-up probes have the last word
 * (journalctl -u paddock-sessiond).
 */
static void check_unit_hardening(Doctor *d, const char *systemctl)
{
	char *argv[] = { (char *)systemctl,
			 "show",
			 "paddock-sessiond.service",
			 "-p",
			 "LoadState",
			 "-p",
			 "SystemCallFilter",
			 NULL,
			 NULL,
			 NULL,
			 NULL,
			 NULL,
			 NULL,
			 NULL,
			 NULL,
			 NULL };
	_cleanup_free_ char *dump = NULL;
	char v[256];
	size_t n = 7;
	bool bad = false;
	int status = 0;

	for (size_t i = 0; i < ARRAY_SIZE(unit_hazards) && n + 2 < ARRAY_SIZE(argv); i++) {
		argv[n++] = "-p";
		argv[n++] = (char *)unit_hazards[i].property;
	}
	if (run_capture(argv, false, &dump, &status) < 0 || !WIFEXITED(status) ||
	    WEXITSTATUS(status) != 0 || !show_value(dump, "LoadState", v, sizeof(v)) ||
	    strcmp(v, "loaded") != 0)
		return; /* no such unit here: check_units says so */
	for (size_t i = 0; i < ARRAY_SIZE(unit_hazards); i++) {
		const struct unit_hazard *hz = &unit_hazards[i];

		if (!show_value(dump, hz->property, v, sizeof(v)) || strcmp(v, hz->value) != 0)
			continue;
		report(d, hz->st, "unit hardening", hz->fix,
		       "paddock-sessiond.service sets %s=%s: %s", hz->property, hz->value,
		       hz->what);
		bad = true;
	}
	if (show_value(dump, "SystemCallFilter", v, sizeof(v)) && v[0]) {
		report(d, CHECK_WARN, "unit hardening",
		       "journalctl -u paddock-sessiond: the daemon names at start any call its "
		       "unit refuses",
		       "paddock-sessiond.service sets SystemCallFilter=: it must let openat2, "
		       "clone3, pidfd_getfd and the mount calls through");
		bad = true;
	}
	if (!bad)
		report(d, CHECK_OK, "unit hardening", NULL,
		       "paddock-sessiond.service sets nothing known to break paddock");
}

/* The units the package installs, each active (systemd as pid 1 only). */
static void check_units(Doctor *d, const char *systemctl)
{
	static const char *const units[] = { "paddock-sandboxes.service",
					     "paddock-sessiond.service", "paddock-fcgi.socket" };

	for (size_t i = 0; i < ARRAY_SIZE(units); i++) {
		char *argv[] = { (char *)systemctl, "is-active", (char *)units[i], NULL };
		_cleanup_free_ char *out = NULL;
		char fix[256];
		int status = 0;

		if (run_capture(argv, false, &out, &status) < 0) {
			report(d, CHECK_WARN, units[i], "check systemctl", "cannot run %s",
			       systemctl);
			continue;
		}
		out[strcspn(out, "\n")] = '\0';
		if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
			report(d, CHECK_OK, units[i], NULL, "active");
			continue;
		}
		if (strcmp(out, "failed") == 0)
			snprintf(fix, sizeof(fix),
				 "journalctl -u %s says why; then systemctl restart %s", units[i],
				 units[i]);
		else
			snprintf(fix, sizeof(fix), "systemctl enable --now %s", units[i]);
		report(d, CHECK_FAIL, units[i], fix, "%s", *out ? out : "not active");
	}
}

/* What systemd runs, when it runs the host; nothing to check otherwise. */
static void check_systemd(Doctor *d)
{
	static const char *const paths[] = { "/usr/bin/systemctl", "/bin/systemctl" };
	const char *systemctl = NULL;

	if (sd_booted() <= 0)
		return;
	for (size_t i = 0; i < ARRAY_SIZE(paths) && !systemctl; i++)
		if (access(paths[i], X_OK) == 0)
			systemctl = paths[i];
	if (!systemctl) {
		report(d, CHECK_WARN, "systemd", "install systemctl (package systemd)",
		       "systemd runs this host but systemctl is missing: units not checked");
		return;
	}
	check_units(d, systemctl);
	check_unit_hardening(d, systemctl);
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

/*
 * What workspace_backend = disk needs of the host, as far as a shell can tell without
 * making one: mke2fs, the loop devices' control node, and a state dir on a disk. (sessiond
 * itself checks by making and mounting the template when it starts.)
 */
static void check_workspaces(Doctor *d)
{
	const PaddockConfig *cfg = &d->ctl->cfg;
	const char *fix_tmpfs = "or set workspace_backend = tmpfs (workspaces in memory)";
	struct statfs sf;
	char fix[256];
	int fd;

	if (strcmp(cfg->workspace_backend, "disk") != 0) {
		report(d, CHECK_OK, "workspaces", NULL, "on tmpfs (workspace_backend = tmpfs)");
		return;
	}
	snprintf(fix, sizeof(fix), "install e2fsprogs, %s", fix_tmpfs);
	if (!executable("/usr/sbin/mke2fs") && !executable("/sbin/mke2fs")) {
		report(d, CHECK_FAIL, "workspaces", fix, "mke2fs is missing");
		return;
	}
	fd = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	if (fd < 0 && (errno != EACCES || d->root)) {
		snprintf(fix, sizeof(fix),
			 "load the loop module, pass /dev/loop-control and block-loop devices to "
			 "this container or unit, %s",
			 fix_tmpfs);
		report(d, CHECK_FAIL, "workspaces", fix, "/dev/loop-control: %s", strerror(errno));
		return;
	}
	if (fd >= 0)
		close(fd);
	if (statfs(cfg->state_dir, &sf) == 0 &&
	    (sf.f_type == TMPFS_MAGIC || sf.f_type == RAMFS_MAGIC ||
	     sf.f_type == OVERLAYFS_SUPER_MAGIC)) {
		snprintf(fix, sizeof(fix), "move state_dir to ext4, XFS or btrfs, %s", fix_tmpfs);
		report(d, CHECK_FAIL, "workspaces", fix, "%s is not on a disk file system",
		       cfg->state_dir);
		return;
	}
	report(d, CHECK_OK, "workspaces", NULL, "on disk: mke2fs, loop devices, %s on a disk",
	       cfg->state_dir);
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
		r = run_in_child(connect_as_worker, c);
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

/* The first line of nginx's complaint ("[emerg] ... in FILE:LINE"), without its time stamp. */
static void nginx_first_error(const char *said, char *out, size_t len)
{
	const char *p = said ? strstr(said, "[emerg]") : NULL;

	if (!p)
		p = said ? said : "";
	snprintf(out, len, "%.*s", (int)strcspn(p, "\n"), p);
}

/*
 * The package's one enabling step is paddockctl site enable: say whether it was taken. A
 * server block of the operator's own that includes paddock's locations does as well.
 */
static void check_nginx_site(Doctor *d, const NginxHost *h, bool locations_elsewhere)
{
	char link[PATH_MAX];

	switch (nginx_site_state(h, link, sizeof(link))) {
	case SITE_ENABLED: report(d, CHECK_OK, "nginx site", NULL, "enabled: %s", link); break;
	case SITE_BY_PLACE:
		report(d, CHECK_OK, "nginx site", NULL, "active by its place: %s", h->site);
		break;
	case SITE_DISABLED:
		if (locations_elsewhere)
			report(d, CHECK_OK, "nginx site", NULL,
			       "not enabled; paddock's locations are in a server block of your own");
		else
			report(d, CHECK_FAIL, "nginx site", "paddockctl site enable",
			       "the paddock site is not enabled in nginx: run paddockctl site "
			       "enable");
		break;
	case SITE_DANGLING:
		report(d, CHECK_FAIL, "nginx site", "paddockctl site disable",
		       "%s links to a site that is gone: nginx -t fails", h->link);
		break;
	case SITE_FOREIGN:
		report(d, CHECK_WARN, "nginx site", "remove it, then paddockctl site enable",
		       "%s is not a link to the paddock site", h->link);
		break;
	case SITE_NOT_INSTALLED:
		report(d, locations_elsewhere ? CHECK_OK : CHECK_FAIL, "nginx site",
		       "reinstall the package (it installs the site)", "%s%s",
		       h->layout == NGINX_LAYOUT_UNKNOWN ? "no sites-available/ or conf.d/ in " :
							   "not installed: no ",
		       h->layout == NGINX_LAYOUT_UNKNOWN ? h->dir : h->site);
		break;
	}
}

static void check_nginx_running(Doctor *d, const NginxHost *h)
{
	if (nginx_running(h))
		report(d, CHECK_OK, "nginx running", NULL, "%s",
		       h->systemd ? "nginx.service is active" : "its pid file names a live nginx");
	else
		report(d, CHECK_FAIL, "nginx running",
		       h->systemd ? "systemctl enable --now nginx" : "start nginx",
		       "nginx is not running: nothing serves paddock");
}

static void check_nginx(Doctor *d, const char *nginx_conf)
{
	const PaddockConfig *cfg = &d->ctl->cfg;
	_cleanup_free_ char *dump = NULL;
	const char *user;
	char sock[PATH_MAX + 16], uname[64];
	struct passwd *pw;
	struct group *gr;
	NginxHost h;
	bool locations;
	int status = 0, r;

	nginx_host_init(&h);
	/* --nginx-conf: that nginx, not the host's service, is the one asked about. */
	if (nginx_conf) {
		snprintf(h.conf, sizeof(h.conf), "%s", nginx_conf);
		h.private_tree = true;
		h.systemd = false;
	}
	if (!h.bin) {
		report(d, CHECK_FAIL, "nginx", "apt install nginx / dnf install nginx",
		       "not installed");
		return;
	}
	report(d, CHECK_OK, "nginx", NULL, "%s", h.bin);
	check_nginx_running(d, &h);
	if (!d->root) {
		check_nginx_site(d, &h, false);
		report(d, CHECK_WARN, "nginx wiring", "run paddockctl doctor as root",
		       "not checked: reading nginx's configuration needs root");
		return;
	}
	{
		char *argv[] = { (char *)h.bin, "-T", "-q", h.private_tree ? "-c" : NULL,
				 h.conf,	NULL };

		r = run_capture(argv, false, &dump, &status);
	}
	if (r < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		_cleanup_free_ char *said = NULL;
		char why[512] = "";

		check_nginx_site(d, &h, false);
		if (nginx_test(&h, &said) == -EIO)
			nginx_first_error(said, why, sizeof(why));
		report(d, CHECK_FAIL, "nginx wiring", "nginx -t shows what is wrong",
		       "nginx -T failed: its configuration does not load%s%s", why[0] ? ": " : "",
		       why);
		return;
	}
	locations = strstr(dump, "fastcgi_pass paddock_fcgi") != NULL;
	check_nginx_site(d, &h, locations);
	snprintf(sock, sizeof(sock), "unix:%s/fcgi.sock", cfg->runtime_dir);
	if (!strstr(dump, "upstream paddock_fcgi") || !strstr(dump, sock))
		report(d, CHECK_FAIL, "nginx upstream",
		       "include paddock-upstream.conf in the http block (the package puts it in "
		       "/etc/nginx/conf.d)",
		       "no upstream paddock_fcgi with server %s", sock);
	else
		report(d, CHECK_OK, "nginx upstream", NULL, "paddock_fcgi -> %s", sock + 5);
	if (!locations)
		report(d, CHECK_FAIL, "nginx locations",
		       "paddockctl site enable, or include the paddock-locations.conf snippet in a "
		       "server block of your own (docs/operations.md)",
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

int cmd_doctor(const Ctl *c, const char *nginx_conf)
{
	Doctor d = { .ctl = c, .checks = json_object_new_array(), .root = geteuid() == 0 };
	json_object *o;

	if (!d.checks)
		return -ENOMEM;
	if (!d.root && !c->json)
		printf("(not root: some checks are skipped)\n");
	check_kernel_features(&d);
	check_runtimes(&d);
	check_workspaces(&d);
	check_users(&d);
	check_systemd(&d);
	check_dirs_and_sockets(&d);
	check_nginx(&d, nginx_conf);
	if (c->json) {
		o = json_object_new_object();
		json_set(o, "ok", json_object_new_boolean(d.failed == 0));
		json_set(o, "checks", d.checks);
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
