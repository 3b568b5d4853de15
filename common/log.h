/* SPDX-License-Identifier: MIT */
/* One leveled logger for both programs: stderr in tests, syslog in production. */
#pragma once

#include <stdbool.h>

enum log_level { LOG_LVL_ERR = 3, LOG_LVL_WARN = 4, LOG_LVL_INFO = 6, LOG_LVL_DEBUG = 7 };

extern int log_max_level;

/* Set the program name and destination ("stderr" or "syslog"). */
void log_open(const char *ident, const char *target, int level);
void log_write(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A line formatted now and written later: a request's line is made while what it names is
 * at hand, and written once the answer has gone, so the client does not wait for the log. */
#define LOG_LINE_MAX 2048
typedef struct LogLine {
	int level;
	char msg[LOG_LINE_MAX];
} LogLine;

/* Format a line into *l when level is enabled (true); false, and *l untouched, when not. */
bool log_line_format(LogLine *l, int level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void log_line_write(const LogLine *l);

/* Arguments are only evaluated when the level is enabled. */
#define log_at(lvl, ...)                                                                           \
	do {                                                                                       \
		if ((lvl) <= log_max_level)                                                        \
			log_write((lvl), __VA_ARGS__);                                             \
	} while (0)
#define log_err(...) log_at(LOG_LVL_ERR, __VA_ARGS__)
#define log_warn(...) log_at(LOG_LVL_WARN, __VA_ARGS__)
#define log_info(...) log_at(LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(...) log_at(LOG_LVL_DEBUG, __VA_ARGS__)

/* Parse "err", "warn", "info", "debug"; -EINVAL otherwise. */
int log_level_from_string(const char *s);
