/* SPDX-License-Identifier: MIT */
/* The journal target: KEY=value words of a log line arrive as journal fields of their own. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "log.h"

#define JOURNAL_DIR "/run/systemd/journal"
#define JOURNAL_SOCKET JOURNAL_DIR "/socket"

#include "unit.h"

/* Whether the native-protocol datagram holds the line "field\n". */
static bool has_field(const char *dgram, size_t len, const char *field)
{
	size_t fl = strlen(field);

	for (const char *p = dgram; p < dgram + len;) {
		const char *nl = memchr(p, '\n', (size_t)(dgram + len - p));
		size_t ll = nl ? (size_t)(nl - p) : (size_t)(dgram + len - p);

		if (ll == fl && memcmp(p, field, fl) == 0)
			return true;
		if (!nl)
			break;
		p = nl + 1;
	}
	return false;
}

/* A log line's upper-case KEY=value words arrive as fields of their own, beside MESSAGE. */
static void test_upper_case_words_become_journal_fields(int fd)
{
	char buf[8192];
	ssize_t n;

	log_info("SESSION_ID=node-abc destroyed KILL_REASON=idle x=1 Lower=no");
	n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
	CHECK_GT_INT(n, 0);
	if (n > 0) {
		CHECK(has_field(
			buf, (size_t)n,
			"MESSAGE=SESSION_ID=node-abc destroyed KILL_REASON=idle x=1 Lower=no"));
		CHECK(has_field(buf, (size_t)n, "SESSION_ID=node-abc"));
		CHECK(has_field(buf, (size_t)n, "KILL_REASON=idle"));
		CHECK(has_field(buf, (size_t)n, "PRIORITY=6"));
		CHECK(has_field(buf, (size_t)n, "SYSLOG_IDENTIFIER=paddock-test"));
		/* Only upper-case keys are fields: lower-case words are just text. */
		CHECK(!has_field(buf, (size_t)n, "x=1"));
		CHECK(!has_field(buf, (size_t)n, "Lower=no"));
	}
}

static void test_line_below_the_level_is_never_sent(int fd)
{
	char buf[8192];

	log_debug("below the level: never sent");
	CHECK_LT_INT(recv(fd, buf, sizeof(buf), MSG_DONTWAIT), 0);
	CHECK_EQ_INT(errno, EAGAIN);
}

int main(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	bool made_run, made_dir;
	int fd;

	if (geteuid() != 0) {
		printf("SKIP: needs root to stand in for the journal at %s\n", JOURNAL_SOCKET);
		return 77;
	}
	if (access(JOURNAL_SOCKET, F_OK) == 0) {
		printf("SKIP: a real journal listens at %s\n", JOURNAL_SOCKET);
		return 77;
	}
	/* Only what this test makes is removed at the end. */
	made_run = mkdir("/run/systemd", 0755) == 0;
	made_dir = mkdir(JOURNAL_DIR, 0755) == 0;
	strcpy(sa.sun_path, JOURNAL_SOCKET);
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		perror("bind " JOURNAL_SOCKET);
		return 1;
	}
	log_open("paddock-test", "journal", LOG_LVL_INFO);
	test_upper_case_words_become_journal_fields(fd);
	test_line_below_the_level_is_never_sent(fd);
	close(fd);
	unlink(JOURNAL_SOCKET);
	if (made_dir)
		rmdir(JOURNAL_DIR);
	if (made_run)
		rmdir("/run/systemd");
	return unit_summary();
}
