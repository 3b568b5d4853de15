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
#include <unistd.h>

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
	char line[LOG_LINE_MAX + 16];

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

/* A stderr line in one write(): lines from several threads never interleave (a pipe takes
 * a write up to PIPE_BUF whole), and the message is not copied again by stdio. */
static void stderr_write(int level, const char *msg)
{
	static const char *names[] = { [3] = "error", [4] = "warn", [6] = "info", [7] = "debug" };
	const char *name =
		level >= 0 && level < (int)ARRAY_SIZE(names) && names[level] ? names[level] : "?";
	struct timespec ts;
	char prefix[128];
	int n;

	clock_gettime(CLOCK_REALTIME, &ts);
	n = snprintf(prefix, sizeof(prefix), "%lld.%03ld %s[%s]: ", (long long)ts.tv_sec,
		     ts.tv_nsec / 1000000, log_ident, name);
	if (n < 0)
		return;
	struct iovec iov[3] = {
		{ prefix, (size_t)n < sizeof(prefix) ? (size_t)n : sizeof(prefix) - 1 },
		{ (void *)msg, strlen(msg) },
		{ (void *)"\n", 1 },
	};
	while (writev(STDERR_FILENO, iov, 3) < 0 && errno == EINTR)
		;
}

static void log_line_vformat(LogLine *l, int level, const char *fmt, va_list ap)
{
	l->level = level;
	vsnprintf(l->msg, sizeof(l->msg), fmt, ap);
}

bool log_line_format(LogLine *l, int level, const char *fmt, ...)
{
	va_list ap;

	if (level > log_max_level)
		return false;
	va_start(ap, fmt);
	log_line_vformat(l, level, fmt, ap);
	va_end(ap);
	return true;
}

void log_line_write(const LogLine *l)
{
	int saved = errno;

	if (use_journal)
		journal_write(l->level, l->msg);
	else if (use_syslog)
		syslog(l->level, "%s", l->msg);
	else
		stderr_write(l->level, l->msg);
	errno = saved;
}

void log_write(int level, const char *fmt, ...)
{
	int saved = errno;
	LogLine l;
	va_list ap;

	va_start(ap, fmt);
	log_line_vformat(&l, level, fmt, ap);
	va_end(ap);
	log_line_write(&l);
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
