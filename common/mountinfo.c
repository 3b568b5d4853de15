/* SPDX-License-Identifier: MIT */
/* Lines of /proc/self/mountinfo: the one parser of them, and the cgroup2 mount. */
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

int mountinfo_parse(const char *line, MountLine *ret)
{
	char source[256];
	const char *sep = strstr(line, " - ");
	int end = -1;

	/* The six fields come before the separator, which optional fields may precede. */
	if (!sep ||
	    sscanf(line, "%*s %*s %*s %*s %4095s %511s%n", ret->mnt, ret->mount_opts, &end) != 2 ||
	    end < 0 || line + end > sep ||
	    sscanf(sep + 3, "%63s %255s %511s", ret->fstype, source, ret->super_opts) != 3)
		return -EINVAL;
	ret->read_only = mount_options_have(ret->mount_opts, "ro") ||
			 mount_options_have(ret->super_opts, "ro");
	return 0;
}

int mountinfo_parse_cgroup2(const char *line, char *mnt, size_t mnt_len, char *opts,
			    size_t opts_len, bool *read_only)
{
	MountLine m;

	if (mountinfo_parse(line, &m) < 0 || strcmp(m.fstype, "cgroup2") != 0)
		return -ENOENT;
	if (snprintf(mnt, mnt_len, "%s", m.mnt) >= (int)mnt_len ||
	    snprintf(opts, opts_len, "%s", m.super_opts) >= (int)opts_len)
		return -ENAMETOOLONG;
	*read_only = m.read_only;
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
