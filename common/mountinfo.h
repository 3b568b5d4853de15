/* SPDX-License-Identifier: MIT */
/* Lines of /proc/self/mountinfo: the one parser of them, and the cgroup2 mount. */
#pragma once

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

/* Whether the comma-separated list opts holds the option name exactly. */
bool mount_options_have(const char *opts, const char *name);

/* The fields of a mountinfo line that paddock reads. */
typedef struct MountLine {
	char mnt[PATH_MAX];   /* mount point, octal escapes (\040) left as they are */
	char fstype[64];      /* file system type */
	char mount_opts[512]; /* per-mount options */
	char super_opts[512]; /* superblock options */
	bool read_only;	      /* ro in either list */
} MountLine;

/*
 * fields: id parent maj:min root mount-point mount-options [optional...] - fstype source
 * superblock-options. -EINVAL for a line that is not one (a field missing or too long).
 */
int mountinfo_parse(const char *line, MountLine *ret);

/*
 * One mountinfo line: when it is a cgroup2 mount, its mount point, its superblock
 * options and whether it is read-only (either way); 0, -ENOENT for any other line,
 * -ENAMETOOLONG when a buffer is short.
 */
int mountinfo_parse_cgroup2(const char *line, char *mnt, size_t mnt_len, char *opts,
			    size_t opts_len, bool *read_only);

/* The first cgroup2 mount of our mount namespace, as above; -ENOENT when none. */
int mountinfo_find_cgroup2(char *mnt, size_t mnt_len, char *opts, size_t opts_len, bool *read_only);
