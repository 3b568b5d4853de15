/* SPDX-License-Identifier: MIT */
/* paddock's site in the host's nginx: where it is, whether it is enabled, enable, disable. */
#include "site.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "cleanup.h"

/* The site's file names in each layout, and the link Debian's tools would make. */
#define SITE_NAME "paddock"
#define SITE_CONFD_NAME "paddock.conf"
#define SITE_LINK_TARGET "../sites-available/" SITE_NAME
#define DEFAULT_PID_FILE "/run/nginx.pid"

static bool is_dir(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool executable(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

static const char *find_executable(const char *const *paths, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (executable(paths[i]))
			return paths[i];
	return NULL;
}

static const char *systemctl_bin(void)
{
	static const char *const paths[] = { "/usr/bin/systemctl", "/bin/systemctl" };

	return find_executable(paths, ARRAY_SIZE(paths));
}

void nginx_host_init(NginxHost *h)
{
	static const char *const bins[] = { "/usr/sbin/nginx", "/usr/bin/nginx",
					    "/usr/local/sbin/nginx",
					    "/usr/local/nginx/sbin/nginx" };
	const char *dir = getenv("PADDOCK_NGINX_DIR"), *bin = getenv("PADDOCK_NGINX_BIN");
	char sub[PATH_MAX + 16];

	*h = (NginxHost){ .layout = NGINX_LAYOUT_UNKNOWN };
	h->private_tree = dir && *dir;
	snprintf(h->dir, sizeof(h->dir), "%s", h->private_tree ? dir : "/etc/nginx");
	snprintf(h->conf, sizeof(h->conf), "%.*s/nginx.conf", PATH_MAX - 16, h->dir);
	h->bin = bin && *bin ? bin : find_executable(bins, ARRAY_SIZE(bins));
	/* A private tree belongs to a test's own nginx, never to the host's service. */
	h->systemd = !h->private_tree && sd_booted() > 0 && systemctl_bin();
	snprintf(sub, sizeof(sub), "%s/sites-available", h->dir);
	if (is_dir(sub)) {
		h->layout = NGINX_LAYOUT_DEBIAN;
		snprintf(h->site, sizeof(h->site), "%.*s/sites-available/" SITE_NAME, PATH_MAX - 32,
			 h->dir);
		snprintf(h->link, sizeof(h->link), "%.*s/sites-enabled/" SITE_NAME, PATH_MAX - 32,
			 h->dir);
		return;
	}
	snprintf(sub, sizeof(sub), "%s/conf.d", h->dir);
	if (is_dir(sub)) {
		h->layout = NGINX_LAYOUT_CONFD;
		snprintf(h->site, sizeof(h->site), "%.*s/conf.d/" SITE_CONFD_NAME, PATH_MAX - 32,
			 h->dir);
	}
}

/* Whether the link at path resolves to the same file as site. */
static bool links_to(const char *path, const char *site)
{
	struct stat a, b;

	return stat(path, &a) == 0 && stat(site, &b) == 0 && a.st_dev == b.st_dev &&
	       a.st_ino == b.st_ino;
}

/* Whether a link's text names the site, so a dangling one is ours to remove. */
static bool names_site(const char *path)
{
	char target[PATH_MAX];
	ssize_t n = readlink(path, target, sizeof(target) - 1);
	size_t tail = strlen("sites-available/" SITE_NAME);

	if (n < 0)
		return false;
	target[n] = '\0';
	return (size_t)n >= tail && strcmp(target + n - tail, "sites-available/" SITE_NAME) == 0;
}

static void closedirp(DIR **d)
{
	if (*d)
		closedir(*d);
}

/* Any other link in sites-enabled to the site (an operator's own name for it). */
static bool other_link(const NginxHost *h, char *found, size_t len)
{
	char enabled[PATH_MAX];
	_cleanup_(closedirp) DIR *d = NULL;
	struct dirent *de;

	snprintf(enabled, sizeof(enabled), "%.*s/sites-enabled", PATH_MAX - 16, h->dir);
	d = opendir(enabled);
	while (d && (de = readdir(d))) {
		char p[PATH_MAX + 256];

		if (de->d_type != DT_LNK && de->d_type != DT_UNKNOWN)
			continue;
		snprintf(p, sizeof(p), "%s/%s", enabled, de->d_name);
		if (links_to(p, h->site)) {
			snprintf(found, len, "%s", p);
			return true;
		}
	}
	return false;
}

enum site_state nginx_site_state(const NginxHost *h, char *link, size_t len)
{
	struct stat st;

	snprintf(link, len, "%s", h->link);
	if (h->layout == NGINX_LAYOUT_CONFD)
		return access(h->site, F_OK) == 0 ? SITE_BY_PLACE : SITE_NOT_INSTALLED;
	if (h->layout != NGINX_LAYOUT_DEBIAN)
		return SITE_NOT_INSTALLED;
	if (lstat(h->link, &st) < 0) {
		if (access(h->site, F_OK) < 0)
			return SITE_NOT_INSTALLED;
		return other_link(h, link, len) ? SITE_ENABLED : SITE_DISABLED;
	}
	if (!S_ISLNK(st.st_mode))
		return SITE_FOREIGN;
	if (links_to(h->link, h->site))
		return SITE_ENABLED;
	if (stat(h->link, &st) < 0 && names_site(h->link))
		return SITE_DANGLING;
	return SITE_FOREIGN;
}

int run_capture(char *const argv[], bool with_stderr, char **out, int *status)
{
	_cleanup_free_ char *buf = NULL;
	size_t len = 0, cap = 0;
	int pipefd[2];
	pid_t pid;

	*out = NULL;
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

		if (null < 0 || dup2(null, 0) < 0 || dup2(pipefd[1], 1) < 0 ||
		    dup2(with_stderr ? pipefd[1] : null, 2) < 0)
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

/* Run argv; 0 when it exits 0, -EIO otherwise (its output in *out), -errno if it cannot. */
static int run_ok(char *const argv[], char **out)
{
	int status = 0, r = run_capture(argv, true, out, &status);

	if (r < 0)
		return r;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EIO;
}

/* The "pid FILE;" directive of nginx.conf's main context, or nginx's default. */
static void nginx_pid_file(const NginxHost *h, char *out, size_t len)
{
	_cleanup_fclose_ FILE *f = fopen(h->conf, "re");
	char line[PATH_MAX + 16];

	snprintf(out, len, "%s", DEFAULT_PID_FILE);
	while (f && fgets(line, sizeof(line), f)) {
		char *p = line + strspn(line, " \t");

		if (strncmp(p, "pid", 3) != 0 || (p[3] != ' ' && p[3] != '\t'))
			continue;
		p += 3 + strspn(p + 3, " \t");
		p[strcspn(p, " \t;\n")] = '\0';
		if (*p)
			snprintf(out, len, "%s", p);
		return;
	}
}

/* Whether the process named in nginx's pid file is an nginx. */
static bool nginx_pid_alive(const NginxHost *h)
{
	char pidfile[PATH_MAX], comm[64] = "", path[64];
	_cleanup_fclose_ FILE *f = NULL, *c = NULL;
	long pid = 0;

	nginx_pid_file(h, pidfile, sizeof(pidfile));
	f = fopen(pidfile, "re");
	if (!f || fscanf(f, "%ld", &pid) != 1 || pid <= 0 || pid > INT32_MAX)
		return false;
	snprintf(path, sizeof(path), "/proc/%ld/comm", pid);
	c = fopen(path, "re");
	return c && fgets(comm, sizeof(comm), c) && strncmp(comm, "nginx", 5) == 0;
}

bool nginx_running(const NginxHost *h)
{
	if (h->systemd) {
		char *argv[] = { (char *)systemctl_bin(), "is-active", "--quiet", "nginx.service",
				 NULL };
		_cleanup_free_ char *out = NULL;

		return run_ok(argv, &out) == 0;
	}
	return nginx_pid_alive(h);
}

int nginx_test(const NginxHost *h, char **out)
{
	char *argv[] = { (char *)h->bin, "-t", "-q", NULL, NULL, NULL };

	*out = NULL;
	if (!h->bin)
		return -ENOENT;
	if (h->private_tree) {
		argv[3] = "-c";
		argv[4] = (char *)h->conf;
	}
	return run_ok(argv, out);
}

int nginx_reload(const NginxHost *h, char **out)
{
	char *sd[] = { (char *)systemctl_bin(), "reload", "nginx.service", NULL };
	char *sig[] = { (char *)h->bin, "-s", "reload", NULL, NULL, NULL };

	*out = NULL;
	if (h->systemd)
		return run_ok(sd, out);
	if (!h->bin)
		return -ENOENT;
	if (h->private_tree) {
		sig[3] = "-c";
		sig[4] = (char *)h->conf;
	}
	return run_ok(sig, out);
}

static const char *reload_command(const NginxHost *h)
{
	return h->systemd ? "systemctl reload nginx" : "nginx -s reload";
}

static const char *start_command(const NginxHost *h)
{
	return h->systemd ? "systemctl start nginx" : "nginx";
}

/* nginx's own words, without the trailing newline, or a placeholder. */
static const char *said(const char *out)
{
	return out && *out ? out : "(nginx said nothing)\n";
}

/* "paddockctl: <what>: " and what nginx said (-EIO: it ran and refused), or the error. */
static void say_failed(const char *what, int r, const char *out)
{
	fprintf(stderr, "paddockctl: %s: %s", what, r == -EIO ? said(out) : strerror(-r));
	if (r != -EIO)
		fputc('\n', stderr);
}

/* After the link changed: check the configuration and reload a running nginx. */
static int reload_if_running(const NginxHost *h, const char *done)
{
	_cleanup_free_ char *out = NULL;
	int r;

	if (!nginx_running(h)) {
		printf("%s; nginx is not running: it reads the change when it starts (%s)\n", done,
		       start_command(h));
		return 0;
	}
	r = nginx_reload(h, &out);
	if (r < 0) {
		char what[PATH_MAX + 192];

		snprintf(what, sizeof(what), "%s, but %s failed", done, reload_command(h));
		say_failed(what, r, out);
		return r;
	}
	printf("%s, and nginx reloaded\n", done);
	return 0;
}

int site_enable(const NginxHost *h)
{
	_cleanup_free_ char *out = NULL;
	char link[PATH_MAX], done[PATH_MAX + 64];
	enum site_state st = nginx_site_state(h, link, sizeof(link));
	int r;

	switch (st) {
	case SITE_BY_PLACE:
		printf("the paddock site is active by its place: %s (nginx reads conf.d/*.conf); "
		       "nothing to enable\n",
		       h->site);
		return 0;
	case SITE_ENABLED: printf("the paddock site is already enabled: %s\n", link); return 0;
	case SITE_FOREIGN:
		fprintf(stderr, "paddockctl: %s exists and is not a link to %s: left alone\n",
			h->link, SITE_LINK_TARGET);
		return -EEXIST;
	case SITE_NOT_INSTALLED:
	case SITE_DANGLING:
		if (h->layout == NGINX_LAYOUT_UNKNOWN)
			fprintf(stderr,
				"paddockctl: %s has neither sites-available/ nor conf.d/: is nginx "
				"installed?\n",
				h->dir);
		else
			fprintf(stderr,
				"paddockctl: the paddock site is not installed: %s is missing "
				"(reinstall the package)\n",
				h->site);
		return -ENOENT;
	case SITE_DISABLED: break;
	}
	if (!h->bin) {
		fprintf(stderr, "paddockctl: nginx is not installed (apt install nginx)\n");
		return -ENOENT;
	}
	if (symlink(SITE_LINK_TARGET, h->link) < 0) {
		r = -errno;
		fprintf(stderr, "paddockctl: cannot make %s: %s\n", h->link, strerror(-r));
		return r;
	}
	/* Never leave nginx with a configuration it would not start with. */
	r = nginx_test(h, &out);
	if (r < 0) {
		(void)unlink(h->link);
		say_failed("nginx -t refuses the configuration with the paddock site, so it stays "
			   "disabled",
			   r, out);
		return r;
	}
	snprintf(done, sizeof(done), "the paddock site is enabled: %s -> %s", h->link,
		 SITE_LINK_TARGET);
	return reload_if_running(h, done);
}

int site_disable(const NginxHost *h)
{
	_cleanup_free_ char *out = NULL;
	char link[PATH_MAX], done[PATH_MAX + 64];
	enum site_state st = nginx_site_state(h, link, sizeof(link));
	int r;

	switch (st) {
	case SITE_BY_PLACE:
		fprintf(stderr,
			"paddockctl: the paddock site is active by its place, %s: move it out of "
			"conf.d (or rename it paddock.conf.disabled) and reload nginx\n",
			h->site);
		return -EOPNOTSUPP;
	case SITE_NOT_INSTALLED:
	case SITE_DISABLED: printf("the paddock site is not enabled\n"); return 0;
	case SITE_FOREIGN:
		fprintf(stderr, "paddockctl: %s is not a link to %s: left alone\n", h->link,
			SITE_LINK_TARGET);
		return -EEXIST;
	case SITE_ENABLED:
	case SITE_DANGLING: break;
	}
	if (unlink(link) < 0) {
		r = -errno;
		fprintf(stderr, "paddockctl: cannot remove %s: %s\n", link, strerror(-r));
		return r;
	}
	snprintf(done, sizeof(done), "the paddock site is disabled: %s removed", link);
	if (!h->bin || !nginx_running(h)) {
		printf("%s\n", done);
		return 0;
	}
	r = nginx_test(h, &out);
	if (r < 0) {
		char what[PATH_MAX + 192];

		snprintf(what, sizeof(what),
			 "%s, but nginx -t refuses the configuration without it too, so nginx was "
			 "not reloaded",
			 done);
		say_failed(what, r, out);
		return r;
	}
	return reload_if_running(h, done);
}
