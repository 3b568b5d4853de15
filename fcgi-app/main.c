/* SPDX-License-Identifier: MIT */
/* paddock-fcgi: command line, configuration, listener, privilege drop, then the server. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fcgiapp.h>

#include "app.h"
#include "cleanup.h"
#include "config.h"
#include "listen.h"
#include "log.h"
#include "server.h"

#define BACKLOG 1024

struct options {
	const char *config; /* --config FILE, or NULL */
	const char *socket; /* --socket PATH, or NULL: fd 0 from systemd */
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: paddock-fcgi [--config FILE] [--socket PATH]\n"
		"  --config FILE  settings file (default: none; PADDOCK_* variables apply)\n"
		"  --socket PATH  listen on this unix socket (default: fd 0, socket activation)\n");
}

/* Returns 0 to go on, 1 to exit 0 (help), -EINVAL on bad usage. */
static int parse_args(int argc, char **argv, struct options *o)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "socket", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "c:s:hV", longopts, NULL)) != -1) {
		switch (c) {
		case 'c': o->config = optarg; break;
		case 's': o->socket = optarg; break;
		case 'h': usage(stdout); return 1;
		case 'V': printf("paddock-fcgi %s\n", PADDOCK_VERSION); return 1;
		default: usage(stderr); return -EINVAL;
		}
	}
	if (optind < argc) {
		usage(stderr);
		return -EINVAL;
	}
	return 0;
}

/* Our own unix socket: 0660, group socket_group when it exists, replacing a stale one. */
static int open_socket(const PaddockConfig *cfg, const char *path)
{
	struct group *g = getgrnam(cfg->socket_group);
	gid_t gid = g ? g->gr_gid : (gid_t)-1;
	struct stat st;
	int fd;

	if (lstat(path, &st) == 0 && !S_ISSOCK(st.st_mode)) {
		log_err("%s exists and is not a socket; not replacing it", path);
		return -EEXIST;
	}
	if (!g)
		log_warn("group %s does not exist; %s keeps our group", cfg->socket_group, path);
	fd = listen_unix_at(path, 0660, gid, BACKLOG, 0);
	if (fd == -EPERM && g) {
		log_warn("cannot give %s to group %s; it keeps our group", path, cfg->socket_group);
		fd = listen_unix_at(path, 0660, (gid_t)-1, BACKLOG, 0);
	}
	if (fd < 0) {
		log_err("cannot listen on %s: %s", path, strerror(-fd));
		return -EADDRNOTAVAIL;
	}
	return fd;
}

/* Socket activation: systemd's LISTEN_FDS (fd 3) or, as libfcgi expects, fd 0. */
static int inherited_socket(void)
{
	const char *pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS");
	int fd = 0;
	struct stat st;

	if (pid && fds && atol(pid) == (long)getpid() && atoi(fds) >= 1)
		fd = 3;
	if (fstat(fd, &st) < 0 || !S_ISSOCK(st.st_mode)) {
		log_err("no --socket given and fd %d is not a socket (expected socket activation)",
			fd);
		return -ENOTSOCK;
	}
	return fd;
}

static int prepare_listener(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	/* Threads poll, then accept: one that loses the race must get EAGAIN, not block. */
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
		return -errno;
	return 0;
}

/* As root: become worker_user for good. Never serve as root. */
static int drop_privileges(const PaddockConfig *cfg)
{
	struct passwd *pw;

	if (geteuid() != 0 && getuid() != 0)
		return 0;
	pw = getpwnam(cfg->worker_user);
	if (!pw) {
		log_err("started as root and worker_user '%s' does not exist; create it or set "
			"worker_user",
			cfg->worker_user);
		return -ESRCH;
	}
	if (pw->pw_uid == 0) {
		log_err("worker_user '%s' is root; refusing to serve as root", cfg->worker_user);
		return -EPERM;
	}
	if (initgroups(pw->pw_name, pw->pw_gid) < 0 || setgid(pw->pw_gid) < 0 ||
	    setuid(pw->pw_uid) < 0) {
		log_err("dropping privileges to %s: %m", cfg->worker_user);
		return -errno;
	}
	/* Verify: no way back, and every id is the worker's. */
	if (setuid(0) == 0 || getuid() != pw->pw_uid || geteuid() != pw->pw_uid ||
	    getgid() != pw->pw_gid || getegid() != pw->pw_gid) {
		log_err("privileges were not dropped completely");
		return -EPERM;
	}
	return 0;
}

static int app_init(App *app, const PaddockConfig *cfg)
{
	int r;

	*app = (App){ .cfg = cfg, .listen_fd = -1, .stop_fd = -1 };
	r = auth_tokens_new(cfg->auth_tokens, &app->tokens);
	if (r < 0)
		return r;
	return auth_header_param(cfg->tenant_header, &app->tenant_param);
}

static void app_done(App *app)
{
	app->tokens = auth_tokens_free(app->tokens);
	free(app->tenant_param);
	app->tenant_param = NULL;
	app->listen_fd = safe_close(app->listen_fd);
}

int main(int argc, char **argv)
{
	struct options opt = { 0 };
	PaddockConfig cfg;
	App app = { .listen_fd = -1, .stop_fd = -1 };
	char err[512] = "";
	sigset_t set;
	int r, level;

	r = parse_args(argc, argv, &opt);
	if (r != 0)
		return r > 0 ? 0 : 2;
	if (opt.config && access(opt.config, R_OK) < 0) {
		fprintf(stderr, "paddock-fcgi: %s: %s\n", opt.config, strerror(errno));
		return 1;
	}
	if (config_load(&cfg, opt.config, err, sizeof(err)) < 0) {
		fprintf(stderr, "paddock-fcgi: configuration: %s\n", err);
		config_free(&cfg);
		return 1;
	}
	level = log_level_from_string(cfg.log_level);
	log_open("paddock-fcgi", cfg.log_target, level < 0 ? LOG_LVL_INFO : level);
	if (level < 0)
		log_warn("log_level '%s' unknown; using info", cfg.log_level);

	r = app_init(&app, &cfg);
	if (r < 0)
		goto out;
	if (FCGX_Init() != 0) {
		log_err("libfcgi initialisation failed");
		r = -EIO;
		goto out;
	}
	app.listen_fd = opt.socket ? open_socket(&cfg, opt.socket) : inherited_socket();
	if (app.listen_fd < 0) {
		r = app.listen_fd;
		goto out;
	}
	r = prepare_listener(app.listen_fd);
	if (r < 0)
		goto out;
	r = drop_privileges(&cfg);
	if (r < 0)
		goto out;

	/* Signals: SIGPIPE ignored (nginx may go away mid-response); SIGTERM and SIGINT
	 * blocked in every thread and taken by sigwait() in this one. */
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	log_info("paddock-fcgi %s listening on %s, sessiond at %s/sessiond.sock, auth %s",
		 PADDOCK_VERSION, opt.socket ? opt.socket : "inherited socket", cfg.runtime_dir,
		 auth_open(app.tokens) ? "open" : "bearer");
	r = server_run(&app);
out:
	app_done(&app);
	config_free(&cfg);
	if (r < 0)
		log_err("exiting: %s", strerror(-r));
	return r < 0 ? 1 : 0;
}
