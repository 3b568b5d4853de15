/* SPDX-License-Identifier: MIT */
/* The cgroup2 mount, as /proc/self/mountinfo shows it. */
#include "mountinfo.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "cleanup.h"

bool mount_options_have(const char *opts, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = opts; p;) {
		const char *comma = strchr(p, ',');

		if (strncmp(p, name, n) == 0 && (p[n] == ',' || p[n] == '\0'))
			return true;
		p = comma ? comma + 1 : NULL;
	}
	return false;
}

int mountinfo_parse_cgroup2(const char *line, char *mnt, size_t mnt_len, char *opts,
			    size_t opts_len, bool *read_only)
{
	char m[PATH_MAX], mopts[512], fstype[64], source[256], sopts[512];
	const char *sep = strstr(line, " - ");

	/* fields: id parent maj:min root mount-point mount-options ... - fstype source superopts */
	if (!sep || sscanf(line, "%*s %*s %*s %*s %4095s %511s", m, mopts) != 2 ||
	    sscanf(sep + 3, "%63s %255s %511s", fstype, source, sopts) != 3 ||
	    strcmp(fstype, "cgroup2") != 0)
		return -ENOENT;
	if (snprintf(mnt, mnt_len, "%s", m) >= (int)mnt_len ||
	    snprintf(opts, opts_len, "%s", sopts) >= (int)opts_len)
		return -ENAMETOOLONG;
	*read_only = mount_options_have(mopts, "ro") || mount_options_have(sopts, "ro");
	return 0;
}

int mountinfo_find_cgroup2(char *mnt, size_t mnt_len, char *opts, size_t opts_len, bool *read_only)
{
	_cleanup_fclose_ FILE *f = fopen("/proc/self/mountinfo", "re");
	_cleanup_free_ char *line = NULL;
	size_t cap = 0;

	if (!f)
		return -errno;
	while (getline(&line, &cap, f) > 0) {
		int r = mountinfo_parse_cgroup2(line, mnt, mnt_len, opts, opts_len, read_only);

		if (r != -ENOENT)
			return r;
	}
	return -ENOENT;
}
