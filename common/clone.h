/* SPDX-License-Identifier: MIT */
/* clone3 for the daemons' children: a child and its pidfd in one call. */
#pragma once

#include <signal.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include <linux/sched.h>

/*
 * clone3 with flags plus CLONE_PIDFD, the child's exit signalled by SIGCHLD, its pidfd
 * stored in *pidfd. No stack is given: the child goes on from here on a copy of ours,
 * as after fork(). The pid (0 in the child), or -1 with errno.
 */
static inline pid_t clone_pidfd(uint64_t flags, int *pidfd)
{
	struct clone_args ca = { .flags = flags | CLONE_PIDFD,
				 .pidfd = (uint64_t)(uintptr_t)pidfd,
				 .exit_signal = SIGCHLD };

	return (pid_t)syscall(SYS_clone3, &ca, sizeof(ca));
}
