/* SPDX-License-Identifier: MIT */
/* The stderr target: each line is one write() with its prefix and newline, and a line
 * formatted now and written later says what it said when it was formatted. */
#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

#include "unit.h"

static int log_rd = -1, log_wr = -1, saved_stderr = -1;

/* stderr goes to the socket only while the logger writes: a failed check still shows. */
static void capture(bool on)
{
	dup2(on ? log_wr : saved_stderr, STDERR_FILENO);
}

/* One datagram of the socket stderr now writes to: what a single write() put there. */
static ssize_t read_once(char *buf, size_t size)
{
	ssize_t n = recv(log_rd, buf, size - 1, MSG_DONTWAIT);

	buf[n > 0 ? n : 0] = '\0';
	return n;
}

/* "<seconds>.<millis> ident[level]: " then the message and a newline. */
static bool line_is(const char *got, const char *level, const char *msg)
{
	char want[4096];
	const char *p = got;

	while (*p >= '0' && *p <= '9')
		p++;
	if (p == got || *p++ != '.')
		return false;
	for (int i = 0; i < 3; i++)
		if (*p < '0' || *p++ > '9')
			return false;
	snprintf(want, sizeof(want), " paddock-test[%s]: %s\n", level, msg);
	return strcmp(p, want) == 0;
}

static void test_a_line_is_one_write_with_prefix_and_newline(void)
{
	char buf[8192];

	capture(true);
	log_warn("disk %s at %d%%", "full", 97);
	capture(false);
	CHECK_GT_INT(read_once(buf, sizeof(buf)), 0);
	CHECK(line_is(buf, "warn", "disk full at 97%"));
	/* Nothing more: the line was one write, prefix, message and newline. */
	CHECK_LT_INT(read_once(buf, sizeof(buf)), 0);
}

static void test_a_line_formatted_now_is_written_as_it_was(void)
{
	char buf[8192], name[16] = "first";
	LogLine line, below;

	capture(true);
	CHECK(log_line_format(&line, LOG_LVL_INFO, "POST %s 200 REQUEST_ID=r1", name));
	CHECK(!log_line_format(&below, LOG_LVL_DEBUG, "below the level"));
	capture(false);
	strcpy(name, "changed"); /* what it named is gone by the time it is written */
	CHECK_LT_INT(read_once(buf, sizeof(buf)), 0); /* formatting writes nothing */
	capture(true);
	errno = EXDEV;
	log_line_write(&line);
	capture(false);
	CHECK_EQ_INT(errno, EXDEV); /* a caller's errno survives the write */
	CHECK_GT_INT(read_once(buf, sizeof(buf)), 0);
	CHECK(line_is(buf, "info", "POST first 200 REQUEST_ID=r1"));
}

static void test_a_long_message_is_cut_and_still_ends_its_line(void)
{
	char buf[8192], *big = malloc(LOG_LINE_MAX * 2);
	size_t n;

	if (!big)
		return;
	memset(big, 'x', LOG_LINE_MAX * 2 - 1);
	big[LOG_LINE_MAX * 2 - 1] = '\0';
	capture(true);
	log_err("%s", big);
	capture(false);
	free(big);
	CHECK_GT_INT(read_once(buf, sizeof(buf)), 0);
	n = strlen(buf);
	CHECK(n > 0 && buf[n - 1] == '\n');
	CHECK_CONTAINS(buf, "paddock-test[error]: xxx");
	/* The message keeps LOG_LINE_MAX - 1 bytes of it. */
	CHECK_EQ_INT(strspn(strstr(buf, ": x") + 2, "x"), LOG_LINE_MAX - 1);
}

int main(void)
{
	int p[2];

	saved_stderr = dup(STDERR_FILENO);
	/* Datagrams keep each write() apart, as a pipe would not. */
	if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, p) < 0 || saved_stderr < 0) {
		perror("socketpair");
		return 1;
	}
	log_rd = p[0];
	log_wr = p[1];
	log_open("paddock-test", "stderr", LOG_LVL_INFO);
	test_a_line_is_one_write_with_prefix_and_newline();
	test_a_line_formatted_now_is_written_as_it_was();
	test_a_long_message_is_cut_and_still_ends_its_line();
	return unit_summary();
}
