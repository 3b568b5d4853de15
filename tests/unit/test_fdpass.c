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

/* A sentinel in the slots a case holds already: it must come back untouched. */
#define HELD_MARK (-7)

/*
 * One case: `sent` descriptors arrive while `held` slots of an array of `max` are taken.
 * Each must be counted, the first that fit kept in the order sent (close-on-exec, as
 * asked), the held slots left alone, and every one that did not fit closed.
 */
static void take_case(int sv[2], size_t sent, size_t held, size_t max)
{
	union {
		/* Room for the sender's credentials too, which come first with SO_PASSCRED. */
		char buf[CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(sizeof(int) * MAX_SENT)];
		struct cmsghdr align;
	} in;
	struct msghdr mh;
	int fds[MAX_SENT], before = open_fds();
	size_t nfds = held, kept = sent < max - held ? sent : max - held;

	for (size_t i = 0; i < held; i++)
		fds[i] = HELD_MARK;
	CHECK(pass(sv, sent, &mh, in.buf, sizeof(in.buf)));
	CHECK_EQ_INT(cmsg_take_fds(&mh, fds, &nfds, max), sent);
	CHECK_EQ_INT(nfds, held + kept);
	for (size_t i = 0; i < held; i++)
		CHECK_EQ_INT(fds[i], HELD_MARK);
	for (size_t i = 0; i < kept; i++) {
		CHECK(same_file(fds[held + i], ends[i][0]));
		CHECK_EQ_INT(fcntl(fds[held + i], F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
	}
	CHECK_EQ_INT(open_fds(), before + (int)kept);
	for (size_t i = 0; i < kept; i++)
		close(fds[held + i]);
}

int main(void)
{
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) < 0)
		return 99;
	for (int i = 0; i < MAX_SENT; i++)
		if (pipe2(ends[i], O_CLOEXEC) < 0)
			return 99;
	take_case(sv, 3, 0, 4); /* room for all */
	take_case(sv, 6, 0, 2); /* too many: two kept, four closed, six counted */
	take_case(sv, 3, 1, 3); /* appended to what is held: two fit, one closed */
	take_case(sv, 2, 2, 2); /* already full: every one closed */
	take_case(sv, 0, 0, 4); /* a message without descriptors: nothing taken */
	/* Another control message ahead of the descriptors is passed over, not stopped at. */
	if (setsockopt(sv[1], SOL_SOCKET, SO_PASSCRED, &(int){ 1 }, sizeof(int)) < 0)
		return 99;
	take_case(sv, 3, 0, 4);
	take_case(sv, 6, 1, 3);
	return unit_summary();
}
