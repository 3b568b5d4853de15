/* SPDX-License-Identifier: MIT */
/* Whole writes on blocking or non-blocking descriptors. */
#pragma once

#include <stddef.h>

/*
 * Write all len bytes of buf to fd: retried on EINTR and short writes, and on a
 * non-blocking fd waited for with poll when it is full. 0, or -errno.
 */
int io_write_all(int fd, const void *buf, size_t len);

/* Wait until fd can take a write (poll). 0, or -errno. */
int io_wait_writable(int fd);
