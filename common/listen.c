/* SPDX-License-Identifier: MIT */
/* Listening unix sockets that appear at their path already with their final access. */
#include "listen.h"

#include "cleanup.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static int bind_listening(int fd, const char *tmp, mode_t mode, gid_t group, int backlog)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	mode_t old;
	int r;

	strcpy(sa.sun_path, tmp);
	if (unlink(tmp) < 0 && errno != ENOENT)
		return -errno;
	/* Born owner-only: not even the temporary name lets anyone else connect. */
	old = umask(0177);
	r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (r < 0)
		return -errno;
	if (chmod(tmp, mode) < 0)
		return -errno;
	if (group != (gid_t)-1 && chown(tmp, (uid_t)-1, group) < 0)
		return -errno;
	if (listen(fd, backlog) < 0)
		return -errno;
	return 0;
}

int listen_unix_at(const char *path, mode_t mode, gid_t group, int backlog, int flags)
{
	_cleanup_close_ int fd = -1;
	char tmp[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int n, r;

	n = snprintf(tmp, sizeof(tmp), "%s.%ld.new", path, (long)getpid());
	if (n < 0 || (size_t)n >= sizeof(tmp))
		return -ENAMETOOLONG;
	fd = socket(AF_UNIX, SOCK_STREAM | flags, 0);
	if (fd < 0)
		return -errno;
	r = bind_listening(fd, tmp, mode, group, backlog);
	if (r == 0 && rename(tmp, path) < 0)
		r = -errno;
	if (r < 0) {
		unlink(tmp);
		return r;
	}
	return TAKE_FD(fd);
}
