/* SPDX-License-Identifier: MIT */
/* paddock-sessiond: the root daemon that owns every session's sandbox. */
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <malloc.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "runtimes.h"
#include "core/loop.h"
#include "core/server.h"
#include "core/store.h"
#include "kernel_features.h"
#include "log.h"
#include "manager.h"

/* The daemon's top-level context: what main() wires together. */
typedef struct Daemon {
	PaddockConfig cfg;
	Loop *loop;
	Manager *mgr;
	Server *srv;
	int sigfd; /* SIGTERM, SIGINT, SIGCHLD */
	LoopSource *sig_src;
} Daemon;

/*
 * Sandboxes' inits are our children, their exit seen through pidfds; so are interpreters
 * forked from the Python template (we are their subreaper), whose exit status the run
 * reports: each exited child is looked at before it is reaped, and one the manager
 * watches is handed to it, which reaps it with its status.
 */
static void reap_children(Daemon *d)
{
	for (;;) {
		siginfo_t si = { 0 };

		if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) < 0 || si.si_pid == 0)
			return;
		if (d->mgr)
			manager_child_exited(d->mgr, si.si_pid);
		waitpid(si.si_pid, NULL, WNOHANG);
	}
}

static void on_signal(Loop *l, int fd, uint32_t events, void *data)
{
	struct signalfd_siginfo si;
	Daemon *d = data;

	(void)events;
	while (read(fd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo == SIGCHLD) {
			reap_children(d);
			continue;
		}
		log_info("signal %u: shutting down", si.ssi_signo);
		loop_quit(l);
	}
}

static int setup_signals(Daemon *d)
{
	sigset_t mask;

	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGCHLD);
	if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
		return -errno;
	signal(SIGPIPE, SIG_IGN);
	d->sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (d->sigfd < 0)
		return -errno;
	return loop_add_fd(d->loop, d->sigfd, EPOLLIN, on_signal, d, &d->sig_src);
}

/* One finding of the start-up probes, logged as the one sentence that names cause and fix. */
static void on_feature(const FeatureCheck *c, void *data)
{
	(void)data;
	if (c->state == FEATURE_OK)
		log_debug("%s: %s", c->name, c->detail);
	else if (c->required)
		log_err("%s; %s", c->detail, c->fix);
	else
		log_warn("%s; %s", c->detail, c->fix);
}

/*
 * Every kernel feature paddock depends on, tried before anything is set up: a host or a
 * unit that refuses one is told so now, in one sentence, and not at the first request.
 */
static int probe_features(const PaddockConfig *cfg)
{
	const FeatureContext ctx = { .root = true, .favor_dynmods = cfg->cgroup_favor_dynmods };

	return kernel_features_probe(&ctx, on_feature, NULL) ? -EOPNOTSUPP : 0;
}

/*
 * The state dir's lock outlives a daemon that was just stopped or killed for as long as
 * a sandbox it was building has not yet exec'd (the clone shares the lock's open file):
 * a moment. A start right after (a restart after a crash, --end-sessions after a stop)
 * waits that out rather than fail and leave those sandboxes to no one.
 */
#define LOCK_WAIT_MS 5000

static void usage(FILE *f)
{
	fprintf(f,
		"usage: paddock-sessiond [--config FILE] [--check-config | --end-sessions]\n"
		"       [--no-kernel-probes]   start without the kernel feature probes (for\n"
		"                              tools that emulate the kernel, such as valgrind)\n");
}

static int open_server(Daemon *d)
{
	const PaddockConfig *c = &d->cfg;
	struct passwd *pw = getpwnam(c->worker_user);
	struct group *gr = getgrnam(c->socket_group);
	gid_t gid = gr ? gr->gr_gid : (gid_t)-1;
	char path[4096];

	if (mkdir(c->runtime_dir, 0750) == 0 && gid != (gid_t)-1 &&
	    chown(c->runtime_dir, 0, gid) < 0)
		log_warn("cannot give %s to group %s: %m", c->runtime_dir, c->socket_group);
	snprintf(path, sizeof(path), "%s/sessiond.sock", c->runtime_dir);
	if (!pw)
		log_warn("worker_user %s does not exist: only root may connect", c->worker_user);
	return server_new(d->loop, path, pw ? pw->pw_uid : (uid_t)-1, gid, manager_handle_request,
			  manager_conn_closed, d->mgr, &d->srv);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "check-config", no_argument, NULL, 'C' },
		{ "end-sessions", no_argument, NULL, 'E' },
		{ "wal-checkpoint", required_argument, NULL, 'W' },
		{ "no-kernel-probes", no_argument, NULL, 'K' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *config_path = getenv("PADDOCK_CONFIG");
	bool check = false, end_sessions = false, probes = true;
	Daemon d = { .sigfd = -1 };
	char err[512] = "";
	int opt, r;

	/*
	 * Large buffers (a call's output, an interpreter's reply) come and go with the calls
	 * of many sessions. A fixed threshold keeps each of them in a mapping of its own,
	 * handed back to the kernel when freed; glibc's default raises the threshold to the
	 * largest block freed, and the next ones then stay in the heap after their use.
	 */
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);

	while ((opt = getopt_long(argc, argv, "c:Ch", opts, NULL)) != -1) {
		switch (opt) {
		case 'c': config_path = optarg; break;
		case 'C': check = true; break;
		case 'E': end_sessions = true; break;
		/* Under a tool that emulates the kernel without some of its calls (valgrind, for
		 * bench/callgrind_check.py): the probes would refuse to start. */
		case 'K': probes = false; break;
		/* Started by the daemon itself: copy the store's WAL into the database. */
		case 'W': return store_checkpoint_file(optarg) < 0 ? 1 : 0;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (config_load(&d.cfg, config_path, err, sizeof(err)) < 0 ||
	    runtimes_load(&d.cfg, err, sizeof(err)) < 0) {
		fprintf(stderr, "paddock-sessiond: configuration: %s\n", err);
		config_free(&d.cfg);
		return 2;
	}
	if (check) {
		config_dump(&d.cfg, stdout);
		config_free(&d.cfg);
		return 0;
	}
	r = log_level_from_string(d.cfg.log_level);
	log_open("paddock-sessiond", d.cfg.log_target, r < 0 ? LOG_LVL_INFO : r);
	if (geteuid() != 0) {
		log_err("paddock-sessiond must run as root");
		return 1;
	}
	if (d.cfg.node_name_derived)
		log_info("node_name is not set: %s, the letters and digits of this host's name",
			 d.cfg.node_name);
	if (probes && probe_features(&d.cfg) < 0) {
		config_free(&d.cfg);
		return 1;
	}
	if (end_sessions) {
		/* Take over what an earlier daemon left (adopting it, or cleaning up after the
		 * dead), then destroy every session and exit: what removing paddock does. */
		d.cfg.keep_sessions_on_exit = false;
		d.cfg.pool_size = 0;
		d.cfg.end_sessions = true;
	}
	/* Interpreters forked from the Python template outlive the child that forked them:
	 * they become ours, so that we reap them and know how they ended. */
	if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0)
		log_warn("cannot become a child subreaper: %m");
	r = loop_new(&d.loop);
	if (r == 0)
		r = setup_signals(&d);
	if (r == 0)
		r = manager_new(&d.cfg, d.loop, LOCK_WAIT_MS, &d.mgr);
	if (r == 0 && end_sessions)
		log_info("ending every session in %s", d.cfg.state_dir);
	else if (r == 0) {
		r = open_server(&d);
		if (r < 0)
			log_err("cannot listen in %s: %s", d.cfg.runtime_dir, strerror(-r));
	}
	if (r == 0 && !end_sessions) {
		log_info("ready: node %s, state in %s", d.cfg.node_name, d.cfg.state_dir);
		r = loop_run(d.loop);
	}
	d.srv = server_free(d.srv);
	d.mgr = manager_free(d.mgr);
	loop_remove(d.loop, d.sig_src);
	if (d.sigfd >= 0)
		close(d.sigfd);
	d.loop = loop_free(d.loop);
	config_free(&d.cfg);
	log_info("stopped");
	return r < 0 ? 1 : 0;
}
