/* SPDX-License-Identifier: MIT */
/*
 * with_syscall_refused CALL ERRNO PROGRAM [ARG...]: run PROGRAM under a seccomp filter that
 * answers one system call with one errno, as a unit's hardening does (systemd's
 * RestrictSUIDSGID= answers openat2 with ENOSYS). For the tests of the start-up probes.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <seccomp.h>

static int errno_by_name(const char *name)
{
	static const struct {
		const char *name;
		int err;
	} known[] = { { "ENOSYS", ENOSYS }, { "EPERM", EPERM }, { "EACCES", EACCES } };

	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (strcmp(name, known[i].name) == 0)
			return known[i].err;
	return -1;
}

int main(int argc, char **argv)
{
	scmp_filter_ctx ctx;
	int nr, err, r;

	if (argc < 4) {
		fprintf(stderr, "usage: with_syscall_refused CALL ERRNO PROGRAM [ARG...]\n");
		return 2;
	}
	nr = seccomp_syscall_resolve_name(argv[1]);
	err = errno_by_name(argv[2]);
	if (nr == __NR_SCMP_ERROR || err < 0) {
		fprintf(stderr, "with_syscall_refused: unknown call %s or errno %s\n", argv[1],
			argv[2]);
		return 2;
	}
	ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx)
		return 1;
	r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(err), nr, 0);
	if (r >= 0)
		r = seccomp_load(ctx); /* sets no_new_privs, as systemd's filters need too */
	seccomp_release(ctx);
	if (r < 0) {
		fprintf(stderr, "with_syscall_refused: loading the filter: %s\n", strerror(-r));
		return 1;
	}
	execv(argv[3], argv + 3);
	fprintf(stderr, "with_syscall_refused: %s: %s\n", argv[3], strerror(errno));
	return 127;
}
