/* SPDX-License-Identifier: MIT */
/* The cgroup2 mount, as /proc/self/mountinfo shows it. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Whether the comma-separated list opts holds the option name exactly. */
bool mount_options_have(const char *opts, const char *name);

/*
 * One mountinfo line: when it is a cgroup2 mount, its mount point, its superblock
 * options and whether it is read-only (either way); 0, -ENOENT for any other line,
 * -ENAMETOOLONG when a buffer is short.
 */
int mountinfo_parse_cgroup2(const char *line, char *mnt, size_t mnt_len, char *opts,
			    size_t opts_len, bool *read_only);

/* The first cgroup2 mount of our mount namespace, as above; -ENOENT when none. */
int mountinfo_find_cgroup2(char *mnt, size_t mnt_len, char *opts, size_t opts_len, bool *read_only);
