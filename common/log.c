/* SPDX-License-Identifier: MIT */
/* The logger: one line per event, level-filtered before formatting. */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <time.h>

int log_max_level = LOG_LVL_INFO;
static bool use_syslog;
static const char *log_ident = "paddock";

void log_open(const char *ident, const char *target, int level)
{
	log_ident = ident;
	log_max_level = level;
	use_syslog = target && strcmp(target, "syslog") == 0;
	if (use_syslog)
		openlog(ident, LOG_PID | LOG_NDELAY, LOG_DAEMON);
}

void log_write(int level, const char *fmt, ...)
{
	static const char *names[] = { [3] = "error", [4] = "warn", [6] = "info", [7] = "debug" };
	int saved = errno;
	char msg[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (use_syslog) {
		syslog(level, "%s", msg);
	} else {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		fprintf(stderr, "%lld.%03ld %s[%s]: %s\n", (long long)ts.tv_sec, ts.tv_nsec / 1000000,
			log_ident, names[level] ? names[level] : "?", msg);
	}
	errno = saved;
}

int log_level_from_string(const char *s)
{
	if (strcmp(s, "err") == 0 || strcmp(s, "error") == 0)
		return LOG_LVL_ERR;
	if (strcmp(s, "warn") == 0 || strcmp(s, "warning") == 0)
		return LOG_LVL_WARN;
	if (strcmp(s, "info") == 0)
		return LOG_LVL_INFO;
	if (strcmp(s, "debug") == 0)
		return LOG_LVL_DEBUG;
	return -EINVAL;
}
