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

/* The next space-separated field of *p into out (NULL: skip it); -EINVAL when there is none
 * or it does not fit. */
static int next_field(const char **p, char *out, size_t len)
{
	const char *s = *p + strspn(*p, " ");
	size_t n = strcspn(s, " \n");

	if (n == 0 || (out && n >= len))
		return -EINVAL;
	if (out) {
		memcpy(out, s, n);
		out[n] = '\0';
	}
	*p = s + n;
	return 0;
}

int mountinfo_parse(const char *line, MountLine *ret)
{
	const char *p = line, *sep;

	/* id, parent, maj:min and root; then the six fields' last two, which the optional
	 * fields and the separator follow. */
	for (int i = 0; i < 4; i++)
		if (next_field(&p, NULL, 0) < 0)
			return -EINVAL;
	if (next_field(&p, ret->mnt, sizeof(ret->mnt)) < 0 ||
	    next_field(&p, ret->mount_opts, sizeof(ret->mount_opts)) < 0)
		return -EINVAL;
	sep = strstr(p, " - ");
	if (!sep)
		return -EINVAL;
	p = sep + 3;
	if (next_field(&p, ret->fstype, sizeof(ret->fstype)) < 0 || next_field(&p, NULL, 0) < 0 ||
	    next_field(&p, ret->super_opts, sizeof(ret->super_opts)) < 0)
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
