/* SPDX-License-Identifier: MIT */
/* The host's nginx as paddockctl sees it: its layout, paddock's site in it, test and reload. */
#pragma once

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

/* Where a distribution keeps nginx's sites. */
enum nginx_layout {
	NGINX_LAYOUT_DEBIAN,  /* sites-available/ and sites-enabled/: a link enables a site */
	NGINX_LAYOUT_CONFD,   /* conf.d/ only (the RHEL family): a file there is active */
	NGINX_LAYOUT_UNKNOWN, /* neither */
};

/* What paddock's site is in nginx's configuration. */
enum site_state {
	SITE_NOT_INSTALLED, /* the package's site file is not there */
	SITE_DISABLED,	    /* installed, no link to it in sites-enabled */
	SITE_ENABLED,	    /* sites-enabled/paddock links to it */
	SITE_BY_PLACE,	    /* conf.d/paddock.conf: active by where it is */
	SITE_DANGLING,	    /* sites-enabled/paddock links to a file that is gone */
	SITE_FOREIGN,	    /* sites-enabled/paddock is something else: left alone */
};

/* One host's nginx: its directories, its binary, and how to reload it. */
typedef struct NginxHost {
	char dir[PATH_MAX];	  /* /etc/nginx, or $PADDOCK_NGINX_DIR */
	bool private_tree;	  /* $PADDOCK_NGINX_DIR: commands run with -c <dir>/nginx.conf */
	char conf[PATH_MAX];	  /* <dir>/nginx.conf */
	const char *bin;	  /* the nginx binary ($PADDOCK_NGINX_BIN, or found), or NULL */
	enum nginx_layout layout; /* Debian's or conf.d's */
	char site[PATH_MAX];	  /* sites-available/paddock, or conf.d/paddock.conf */
	char link[PATH_MAX];	  /* sites-enabled/paddock (Debian layout) */
	bool systemd;		  /* systemd is pid 1: nginx is asked about through systemctl */
} NginxHost;

/* Fill h for this host (no side effects). The overrides are for tests: a private tree. */
void nginx_host_init(NginxHost *h);

/* What the paddock site is, by the files alone; link gets the link that enables it. */
enum site_state nginx_site_state(const NginxHost *h, char *link, size_t len);

/* Whether nginx runs: systemctl is-active, or the pid file of a private tree. */
bool nginx_running(const NginxHost *h);

/*
 * Run nginx -t, or reload nginx (systemctl reload nginx under systemd, else nginx -s
 * reload). 0 on success; -EIO when the command failed, with its output in *out (owned by
 * the caller, may be NULL); -errno when it could not run.
 */
int nginx_test(const NginxHost *h, char **out);
int nginx_reload(const NginxHost *h, char **out);

/*
 * Run argv (argv[0] a path), its stdout and stderr together into *out (owned by the
 * caller), its exit status into *status. 0, or -errno when it could not be run.
 */
int run_capture(char *const argv[], bool with_stderr, char **out, int *status);

/*
 * paddockctl site enable / disable: make or remove the link, check nginx's configuration
 * (undoing an enable it refuses), reload nginx when it runs. Prints what it did.
 * 0 when done or nothing was to be done; -errno otherwise (the message is printed).
 */
int site_enable(const NginxHost *h);
int site_disable(const NginxHost *h);
