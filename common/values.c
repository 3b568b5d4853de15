/* SPDX-License-Identifier: MIT */
/* The syntax of setting values, shared by paddock.conf and the runtime profiles. */
#include "values.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int value_parse_int(const char *s, bool sized, int64_t *ret)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	if (sized && *end) {
		int64_t mult = 1;

		switch (toupper((unsigned char)*end)) {
		case 'K': mult = KiB; break;
		case 'M': mult = MiB; break;
		case 'G': mult = GiB; break;
		default: return -EINVAL;
		}
		end++;
		if (toupper((unsigned char)*end) == 'I')
			end++;
		if (toupper((unsigned char)*end) == 'B')
			end++;
		if (v > INT64_MAX / mult || v < INT64_MIN / mult)
			return -ERANGE;
		v *= mult;
	}
	if (*end)
		return -EINVAL;
	*ret = v;
	return 0;
}

int value_parse_bool(const char *s, bool *ret)
{
	if (!strcmp(s, "1") || !strcasecmp(s, "true") || !strcasecmp(s, "yes") ||
	    !strcasecmp(s, "on"))
		*ret = true;
	else if (!strcmp(s, "0") || !strcasecmp(s, "false") || !strcasecmp(s, "no") ||
		 !strcasecmp(s, "off"))
		*ret = false;
	else
		return -EINVAL;
	return 0;
}

char *value_trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}
