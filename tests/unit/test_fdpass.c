/* SPDX-License-Identifier: MIT */
/* cmsg_take_fds(): the descriptors a message brings are kept in order up to the room
 * given, appended to what is held, and the rest are closed rather than leaked. */
#include <dirent.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fdpass.h"
#include "unit.h"

#define MAX_SENT 6

/* One pipe's read end per slot: each sent descriptor names a file of its own. */
static int ends[MAX_SENT][2];

static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	if (!d)
		return -1;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

static bool same_file(int a, int b)
{
	struct stat x, y;

	return fstat(a, &x) == 0 && fstat(b, &y) == 0 && x.st_dev == y.st_dev &&
	       x.st_ino == y.st_ino;
}

/* Send n of the pipes' read ends (none for 0) and one byte over sv[0]; receive them. */
static bool pass(int sv[2], size_t n, struct msghdr *mh, char *cbuf, size_t cbuf_len)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * MAX_SENT)];
		struct cmsghdr align;
	} out;
	char byte = 'x', got;
	struct iovec iov = { &byte, 1 }, in_iov = { &got, 1 };
	struct msghdr send = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (n) {
		struct cmsghdr *c;

		send.msg_control = out.buf;
		send.msg_controllen = CMSG_SPACE(sizeof(int) * n);
		c = CMSG_FIRSTHDR(&send);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * n);
		for (size_t i = 0; i < n; i++)
			memcpy(CMSG_DATA(c) + i * sizeof(int), &ends[i][0], sizeof(int));
	}
	if (sendmsg(sv[0], &send, 0) != 1)
		return false;
	*mh = (struct msghdr){
		.msg_iov = &in_iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = cbuf_len
	};
	return recvmsg(sv[1], mh, MSG_CMSG_CLOEXEC) == 1;
}

int main(void)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * MAX_SENT)];
		struct cmsghdr align;
	} in;
	struct msghdr mh;
	int sv[2], fds[4], before;
	size_t nfds;

	if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) < 0)
		return 99;
	for (int i = 0; i < MAX_SENT; i++)
		if (pipe2(ends[i], O_CLOEXEC) < 0)
			return 99;

	/* Room for all: each kept in the order sent, close-on-exec as asked. */
	before = open_fds();
	nfds = 0;
	CHECK(pass(sv, 3, &mh, in.buf, sizeof(in.buf)));
	CHECK_EQ_INT(cmsg_take_fds(&mh, fds, &nfds, 4), 3);
	CHECK_EQ_INT(nfds, 3);
	for (size_t i = 0; i < nfds; i++) {
		CHECK(same_file(fds[i], ends[i][0]));
		CHECK_EQ_INT(fcntl(fds[i], F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
	}
	CHECK_EQ_INT(open_fds(), before + 3);
	for (size_t i = 0; i < nfds; i++)
		close(fds[i]);

	/* Too many: the first two kept, the other four closed, and the count says six came. */
	before = open_fds();
	nfds = 0;
	CHECK(pass(sv, 6, &mh, in.buf, sizeof(in.buf)));
	CHECK_EQ_INT(cmsg_take_fds(&mh, fds, &nfds, 2), 6);
	CHECK_EQ_INT(nfds, 2);
	CHECK(same_file(fds[0], ends[0][0]));
	CHECK(same_file(fds[1], ends[1][0]));
	CHECK_EQ_INT(open_fds(), before + 2);
	close(fds[0]);
	close(fds[1]);

	/* Appended to what is held: fds[0] untouched, two more fit, the third is closed. */
	before = open_fds();
	fds[0] = -7;
	nfds = 1;
	CHECK(pass(sv, 3, &mh, in.buf, sizeof(in.buf)));
	CHECK_EQ_INT(cmsg_take_fds(&mh, fds, &nfds, 3), 3);
	CHECK_EQ_INT(nfds, 3);
	CHECK_EQ_INT(fds[0], -7);
	CHECK(same_file(fds[1], ends[0][0]));
	CHECK(same_file(fds[2], ends[1][0]));
	CHECK_EQ_INT(open_fds(), before + 2);
	close(fds[1]);
	close(fds[2]);

	/* Already full: every one closed. */
	before = open_fds();
	nfds = 2;
	CHECK(pass(sv, 2, &mh, in.buf, sizeof(in.buf)));
	CHECK_EQ_INT(cmsg_take_fds(&mh, fds, &nfds, 2), 2);
	CHECK_EQ_INT(nfds, 2);
	CHECK_EQ_INT(open_fds(), before);

	/* A message without descriptors: nothing taken. */
	nfds = 0;
	CHECK(pass(sv, 0, &mh, in.buf, sizeof(in.buf)));
	CHECK_EQ_INT(cmsg_take_fds(&mh, fds, &nfds, 4), 0);
	CHECK_EQ_INT(nfds, 0);
	return unit_summary();
}
