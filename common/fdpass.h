/* SPDX-License-Identifier: MIT */
/* The descriptors a unix socket message carries (SCM_RIGHTS), taken out of it. */
#pragma once

#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/*
 * The descriptors mh carried, appended to fds at *nfds while fewer than max are held;
 * any beyond are closed, so none leaks. Returns how many the message carried, which is
 * more than were kept when the sender sent too many. Header-only: paddock-init, which is
 * linked on its own, uses it too.
 */
static inline size_t cmsg_take_fds(struct msghdr *mh, int *fds, size_t *nfds, size_t max)
{
	size_t came = 0;

	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		const unsigned char *data = CMSG_DATA(c);
		size_t k;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++, came++) {
			int fd;

			/* CMSG_DATA need not be aligned for an int. */
			memcpy(&fd, data + i * sizeof(int), sizeof(int));
			if (*nfds < max)
				fds[(*nfds)++] = fd;
			else
				close(fd);
		}
	}
	return came;
}
