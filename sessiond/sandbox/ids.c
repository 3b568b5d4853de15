/* SPDX-License-Identifier: MIT */
/* Sandbox ids: what they may be made of, and the lists of those found on disk. */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox_internal.h"

bool sandbox_id_valid(const char *id)
{
	size_t n;

	if (!id)
		return false;
	for (n = 0; id[n]; n++) {
		char c = id[n];

		if (n >= SANDBOX_ID_MAX)
			return false;
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '-'))
			return false;
	}
	return n > 0;
}

int ids_add_dir(const char *dir, char ***ids, size_t *n, size_t *cap)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int r = 0;

	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((de = readdir(d))) {
		if (de->d_type != DT_DIR || !sandbox_id_valid(de->d_name))
			continue;
		r = ids_add(ids, n, cap, de->d_name);
		if (r < 0)
			break;
	}
	closedir(d);
	return r;
}

int ids_add(char ***ids, size_t *n, size_t *cap, const char *id)
{
	char *copy;

	for (size_t i = 0; i < *n; i++)
		if (strcmp((*ids)[i], id) == 0)
			return 0;
	if (*n == *cap) {
		size_t ncap = *cap ? *cap * 2 : 16;
		char **grown = realloc(*ids, ncap * sizeof(char *));

		if (!grown)
			return -ENOMEM;
		*ids = grown;
		*cap = ncap;
	}
	copy = strdup(id);
	if (!copy)
		return -ENOMEM;
	(*ids)[(*n)++] = copy;
	return 0;
}
