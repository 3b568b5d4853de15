/* SPDX-License-Identifier: MIT */
/* close_fds_except(): what the spawner and its children keep of the daemon's fds, with
 * close_range and, as on kernels before 5.9, without it. */
#include <errno.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <seccomp.h>

#include "sandbox/sandbox_internal.h"
#include "unit.h"

#define N_FDS 40

/* Exit status bits: 1, a kept fd was closed; 2, another was left open; 4, setup failed. */
static int close_and_look(bool refuse_close_range)
{
	int fds[N_FDS], keep[3], status = 0;

	for (int i = 0; i < N_FDS; i++) {
		fds[i] = open("/dev/null", O_RDONLY | (i % 2 ? O_CLOEXEC : 0));
		if (fds[i] < 0)
			return 4;
	}
	/* Kept: the lowest, one in the middle, the highest; given out of order. */
	keep[0] = fds[N_FDS - 1];
	keep[1] = fds[0];
	keep[2] = fds[N_FDS / 2];
	if (refuse_close_range) {
		scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);

		if (!ctx || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
		    seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(close_range), 0) < 0 ||
		    seccomp_load(ctx) < 0)
			return 4;
		seccomp_release(ctx);
	}
	close_fds_except(keep, 3);
	for (int i = 0; i < N_FDS; i++) {
		bool kept = i == 0 || i == N_FDS / 2 || i == N_FDS - 1;
		bool open_now = fcntl(fds[i], F_GETFD) >= 0;

		if (kept && !open_now)
			status |= 1;
		if (!kept && open_now)
			status |= 2;
	}
	for (int fd = 0; fd <= 2; fd++)
		if (fcntl(fd, F_GETFD) < 0)
			status |= 1; /* 0..2 are never touched */
	return status;
}

static int in_child(bool refuse_close_range)
{
	int status;
	pid_t pid = fork();

	if (pid == 0)
		_exit(close_and_look(refuse_close_range));
	if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

int main(void)
{
	CHECK_EQ_INT(in_child(false), 0);
	CHECK_EQ_INT(in_child(true), 0);
	return unit_summary();
}
