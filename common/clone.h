/* SPDX-License-Identifier: MIT */
/* clone3 for the daemons' children: a child and its pidfd in one call. */
#pragma once

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
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

/* SIGKILL through a pidfd: a pid alone may have been reaped and used again meanwhile.
 * 0, or -errno (-EBADF for -1). */
static inline int pidfd_kill(int pidfd)
{
	if (pidfd < 0)
		return -EBADF;
	return syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0) < 0 ? -errno : 0;
}

/*
 * Run fn(arg) in a forked child and wait for it: the child's exit status (fn's return,
 * an errno or 0 by the callers' convention), -ECHILD when it did not exit, or -errno.
 * For probes that may be refused or may change the process (a filter, a namespace).
 */
static inline int run_in_child(int (*fn)(const void *arg), const void *arg)
{
	int status;
	pid_t pid = fork();

	if (pid < 0)
		return -errno;
	if (pid == 0)
		_exit(fn(arg));
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	if (!WIFEXITED(status))
		return -ECHILD;
	return WEXITSTATUS(status);
}
