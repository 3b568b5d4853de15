/* SPDX-License-Identifier: MIT */
/* The logger: one line per event, level-filtered before formatting. */
#include "log.h"

#include "cleanup.h"

#include <errno.h>
#include <sys/uio.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <time.h>

#define SD_JOURNAL_SUPPRESS_LOCATION
#include <systemd/sd-journal.h>

int log_max_level = LOG_LVL_INFO;
static bool use_syslog;
static bool use_journal;
static const char *log_ident = "paddock";

void log_open(const char *ident, const char *target, int level)
{
	log_ident = ident;
	log_max_level = level;
	use_syslog = target && strcmp(target, "syslog") == 0;
	use_journal = target && strcmp(target, "journal") == 0;
	if (use_syslog)
		openlog(ident, LOG_PID | LOG_NDELAY, LOG_DAEMON);
}

/*
 * To the journal, the message's KEY=value words (SESSION_ID=, REQUEST_ID=,
 * KILL_REASON=, ...) become fields of their own, so `journalctl SESSION_ID=...`
 * finds every line about one session.
 */
static void journal_write(int level, const char *msg)
{
	struct iovec iov[16];
	char fields[8][256], prio[16], ident[64];
	size_t n = 0, nf = 0;
	char line[2048 + 16];

	snprintf(line, sizeof(line), "MESSAGE=%s", msg);
	snprintf(prio, sizeof(prio), "PRIORITY=%d", level);
	snprintf(ident, sizeof(ident), "SYSLOG_IDENTIFIER=%s", log_ident);
	iov[n++] = (struct iovec){ line, strlen(line) };
	iov[n++] = (struct iovec){ prio, strlen(prio) };
	iov[n++] = (struct iovec){ ident, strlen(ident) };
	for (const char *p = msg; *p && nf < ARRAY_SIZE(fields);) {
		const char *w = p, *eq;
		size_t len = strcspn(p, " ");

		p += len;
		while (*p == ' ')
			p++;
		eq = memchr(w, '=', len);
		if (!eq || eq == w || len >= sizeof(fields[0]))
			continue;
		bool key = true;
		for (const char *k = w; k < eq; k++)
			key = key && ((*k >= 'A' && *k <= 'Z') || *k == '_');
		if (!key)
			continue;
		memcpy(fields[nf], w, len);
		fields[nf][len] = '\0';
		iov[n++] = (struct iovec){ fields[nf], len };
		nf++;
	}
	sd_journal_sendv(iov, (int)n);
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
	if (use_journal) {
		journal_write(level, msg);
	} else if (use_syslog) {
		syslog(level, "%s", msg);
	} else {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		fprintf(stderr, "%lld.%03ld %s[%s]: %s\n", (long long)ts.tv_sec,
			ts.tv_nsec / 1000000, log_ident, names[level] ? names[level] : "?", msg);
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
