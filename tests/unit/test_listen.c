/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for listen_unix_at: the socket path appears only by a rename, already
 * listening with its mode and group (a client racing a restart must never find it
 * refusing permission), a stale socket is replaced, and no temporary name stays.
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "listen.h"

#include "unit.h"

static char dir[] = "/tmp/paddock-listen-XXXXXX";
static char path[64];

static bool connects(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool ok;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	ok = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	if (fd >= 0)
		close(fd);
	return ok;
}

/* The events the directory saw for the name "sock": created in place, or moved there. */
static void events_for_sock(int in, bool *created, bool *moved_to)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	ssize_t n;

	*created = *moved_to = false;
	while ((n = read(in, buf, sizeof(buf))) > 0) {
		for (char *p = buf; p < buf + n;) {
			struct inotify_event *e = (struct inotify_event *)p;

			if (e->len && strcmp(e->name, "sock") == 0) {
				*created |= (e->mask & IN_CREATE) != 0;
				*moved_to |= (e->mask & IN_MOVED_TO) != 0;
			}
			p += sizeof(*e) + e->len;
		}
	}
}

static int entries_in(const char *d)
{
	char cmd[256];
	FILE *f;
	int n = -1;

	snprintf(cmd, sizeof(cmd), "ls -A %s | wc -l", d);
	f = popen(cmd, "r");
	if (f) {
		if (fscanf(f, "%d", &n) != 1)
			n = -1;
		pclose(f);
	}
	return n;
}

static void test_appears_ready_by_rename(gid_t gid)
{
	int in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	bool created, moved_to;
	struct stat st;
	int fd;

	CHECK_GE_INT(in, 0);
	CHECK_GE_INT(inotify_add_watch(in, dir, IN_CREATE | IN_MOVED_TO), 0);
	fd = listen_unix_at(path, 0660, gid, 16, SOCK_CLOEXEC);
	CHECK_GE_INT(fd, 0);
	events_for_sock(in, &created, &moved_to);
	CHECK(!created);
	CHECK(moved_to);
	CHECK_EQ_INT(stat(path, &st), 0);
	CHECK(S_ISSOCK(st.st_mode));
	CHECK_EQ_INT(st.st_mode & 07777, 0660);
	CHECK_EQ_INT(st.st_gid, gid);
	CHECK(connects());
	CHECK_EQ_INT(entries_in(dir), 1);
	close(fd);
	close(in);
}

static void test_replaces_a_stale_socket(void)
{
	int fd;

	/* The socket of the last test is closed: what a killed process leaves behind. */
	CHECK(!connects());
	fd = listen_unix_at(path, 0600, (gid_t)-1, 16, 0);
	CHECK_GE_INT(fd, 0);
	CHECK(connects());
	CHECK_EQ_INT(entries_in(dir), 1);
	close(fd);
}

static void test_path_too_long_is_refused(void)
{
	char longp[200];

	memset(longp, 'a', sizeof(longp) - 1);
	longp[0] = '/';
	longp[sizeof(longp) - 1] = '\0';
	CHECK_EQ_INT(listen_unix_at(longp, 0660, (gid_t)-1, 16, 0), -ENAMETOOLONG);
	/* Fits sun_path but not with the temporary suffix. */
	longp[100] = '\0';
	CHECK_EQ_INT(listen_unix_at(longp, 0660, (gid_t)-1, 16, 0), -ENAMETOOLONG);
}

static void test_failure_leaves_nothing(void)
{
	char p[160];

	snprintf(p, sizeof(p), "%s/missing/sock", dir);
	CHECK_EQ_INT(listen_unix_at(p, 0660, (gid_t)-1, 16, 0), -ENOENT);
	CHECK_EQ_INT(entries_in(dir), 1);
}

int main(void)
{
	/* A group other than ours when we may give one (root), else our own. */
	gid_t gid = geteuid() == 0 ? 1 : getegid();

	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(path, sizeof(path), "%s/sock", dir);
	test_appears_ready_by_rename(gid);
	test_replaces_a_stale_socket();
	test_path_too_long_is_refused();
	test_failure_leaves_nothing();
	unlink(path);
	rmdir(dir);
	return unit_summary();
}
