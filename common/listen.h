/* SPDX-License-Identifier: MIT */
/* Listening unix sockets that appear at their path already with their final access. */
#pragma once

#include <sys/types.h>

/*
 * Listen on the unix stream socket path with the given mode and group
 * ((gid_t)-1 keeps ours). The socket is bound under a temporary name beside
 * path, given its mode and group, put in the listening state and only then
 * renamed over path, so a client never finds it there refusing it or
 * refusing permission, and a stale socket is replaced in one step.
 * flags: SOCK_NONBLOCK and SOCK_CLOEXEC as for socket(2). The process umask is
 * tightened around the bind: call it before other threads create files.
 * The descriptor, or -errno.
 */
int listen_unix_at(const char *path, mode_t mode, gid_t group, int backlog, int flags);
