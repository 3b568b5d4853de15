/* SPDX-License-Identifier: MIT */
/* paddockctl: the operator's command line: sessions, kill, drain, stats, and host checks. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cleanup.h"
#include "config.h"
#include "runtimes.h"
#include "ctl.h"
#include "site.h"

#define DEFAULT_CONFIG "/etc/paddock/paddock.conf"

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
		"  runtime list          the runtime profiles: roots, pools, sessions\n"
		"  runtime build NAME [--packages A,B] [--suite S] [--mirror M] [--root DIR]\n"
		"                        a Debian tree made with mmdebstrap, as a profile\n"
		"  runtime add NAME --root DIR\n"
		"                        an existing tree (an unpacked image) as a profile\n"
		"      both take --pool-size N --kernel-prewarm N --memory SIZE --pids N\n"
		"      --cpu PERCENT --egress true|false --description TEXT\n"
		"  runtime remove NAME   unregister a profile (its tree is kept)\n"
		"  doctor [--nginx-conf FILE]\n"
		"                        check this host: kernel features, cgroups, seccomp,\n"
		"                        runtimes, users, units, sockets, directories, nginx\n"
		"  site enable|disable   enable (or disable) the paddock site in nginx, test\n"
		"                        nginx's configuration and reload it\n");
}

static int cmd_site(const char *what)
{
	NginxHost h;
	int r;

	nginx_host_init(&h);
	/* The host's nginx is root's; a private tree (PADDOCK_NGINX_DIR) is a test's. */
	if (geteuid() != 0 && !h.private_tree) {
		fprintf(stderr,
			"paddockctl: site %s changes nginx's configuration: run it as root\n",
			what);
		return -EPERM;
	}
	r = strcmp(what, "enable") == 0 ? site_enable(&h) : site_disable(&h);
	/* Whatever went wrong was said; -EINVAL is kept for a bad command line. */
	return r < 0 ? -EIO : 0;
}

static int run_runtime(Ctl *c, int argc, char **argv)
{
	if (argc == 1 && strcmp(argv[0], "list") == 0)
		return cmd_runtime_list(c);
	if (argc == 2 && strcmp(argv[0], "remove") == 0)
		return cmd_runtime_remove(c, argv[1]);
	if (argc >= 2 && strcmp(argv[0], "build") == 0)
		return cmd_runtime_build(c, argv[1], argc - 2, argv + 2);
	if (argc >= 2 && strcmp(argv[0], "add") == 0)
		return cmd_runtime_add(c, argv[1], argc - 2, argv + 2);
	return -EINVAL;
}

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
	if (strcmp(cmd, "runtime") == 0)
		return run_runtime(c, argc - 1, argv + 1);
	if (strcmp(cmd, "site") == 0 && argc == 2 &&
	    (strcmp(argv[1], "enable") == 0 || strcmp(argv[1], "disable") == 0))
		return cmd_site(argv[1]);
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
	/* A bad profile must not stop the commands that mend it (runtime remove) or need
	 * none: it is said, and the profiles are taken as none. */
	if (runtimes_load(&c.cfg, err, sizeof(err)) < 0) {
		runtimes_free(&c.cfg);
		snprintf(c.runtimes_error, sizeof(c.runtimes_error), "%s", err);
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
