/* SPDX-License-Identifier: MIT */
/* Whole writes on blocking or non-blocking descriptors. */
#include "io.h"

#include <errno.h>
#include <poll.h>
#include <unistd.h>

int io_wait_writable(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLOUT };

	return poll(&p, 1, -1) < 0 && errno != EINTR ? -errno : 0;
}

int io_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN && io_wait_writable(fd) == 0)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}
