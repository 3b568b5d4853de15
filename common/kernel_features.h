/* SPDX-License-Identifier: MIT */
/* Probes of every kernel feature paddock depends on: sessiond runs them at start, doctor too. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include <linux/openat2.h>

/*
 * How every path below a workspace is resolved (sessiond/wsfs.c), and so exactly what the
 * openat2 probe asks for: a kernel or a filter that refuses one flag is found at start, not
 * at the first file request. BENEATH refuses "..", absolute paths and absolute symlinks
 * that leave the starting directory (-EXDEV); NO_MAGICLINKS refuses /proc-style links
 * (-ELOOP); NO_XDEV refuses crossing into another mount, since the workspace is a mount of
 * its own and anything mounted inside it is not the session's.
 */
#define WORKSPACE_RESOLVE (RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)

/* The oldest kernel whose calls paddock uses (openat2 and pidfd_getfd came in 5.6). */
#define FEATURES_MIN_KERNEL_MAJOR 5
#define FEATURES_MIN_KERNEL_MINOR 6

enum feature_state {
	FEATURE_OK,	   /* there, and it works */
	FEATURE_MISSING,   /* absent or refused: detail names the cause, fix the remedy */
	FEATURE_UNCHECKED, /* cannot be probed from here (needs root): detail says so */
};

/* What one probe found. */
typedef struct FeatureCheck {
	const char *name;	  /* short and stable: "openat2", "pid namespace", ... */
	bool required;		  /* paddock-sessiond refuses to start without it */
	enum feature_state state; /* the finding */
	char detail[384];	  /* what was found, naming the cause when it is missing */
	char fix[384];		  /* what to do about it; empty when there is nothing to do */
} FeatureCheck;

/* What the probes need to know about their caller. */
typedef struct FeatureContext {
	bool root;	    /* probes that need CAP_SYS_ADMIN run only as root */
	bool favor_dynmods; /* cgroup_favor_dynmods: sessiond sets favordynmods when it starts */
} FeatureContext;

/* Called once per finding; c is valid only during the call. */
typedef void (*feature_report_fn)(const FeatureCheck *c, void *userdata);

/*
 * Run every probe in its fixed order and hand each finding to report. Probes that must
 * not change the caller (namespaces, seccomp) run in a child process, reaped before the
 * probe returns; nothing else is left behind. Does not log. Returns how many required
 * features are missing.
 */
unsigned kernel_features_probe(const FeatureContext *ctx, feature_report_fn report, void *userdata);

/* Whether a uname release ("6.1.0-13-amd64") is at least major.minor; false if unreadable. */
bool kernel_features_release_at_least(const char *release, unsigned major, unsigned minor);

/*
 * One /proc/self/mountinfo line: when it is a cgroup v1 hierarchy, its mount point, the
 * controllers it carries as FEATURE_CG_* bits (0 when none paddock uses) and whether it is
 * mounted read-only; 0, or -ENOENT for any other line, -ENAMETOOLONG when mnt is short.
 */
int kernel_features_parse_cgroup1(const char *line, char *mnt, size_t mnt_len, unsigned *ctrls,
				  bool *read_only);

/* The cgroup controllers paddock uses. */
enum {
	FEATURE_CG_MEMORY = 1u << 0,
	FEATURE_CG_PIDS = 1u << 1,
	FEATURE_CG_CPU = 1u << 2,
};
