/* SPDX-License-Identifier: MIT */
/* LD_PRELOAD for the callgrind run only: older calls for the syscalls valgrind 3.19 lacks. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

/*
 * Under valgrind 3.19 clone3, openat2 and pidfd_send_signal answer ENOSYS, and
 * setrlimit on the limits valgrind reserves answers EPERM. paddock-sessiond calls
 * the first three through syscall(3), so this library replaces syscall(3):
 *   clone3            -> clone with the same flags (fork-like; CLONE_PIDFD kept) but
 *                        CLONE_FILES, which valgrind refuses: the teardown child then
 *                        gets a copy of the fd table instead of sharing it
 *   openat2           -> openat, with O_NOFOLLOW for RESOLVE_NO_SYMLINKS (weaker:
 *                        no RESOLVE_BENEATH; acceptable for a bench on its own files)
 *   pidfd_send_signal -> kill() of the pid in /proc/self/fdinfo
 *   execveat(fd, "")  -> execve("/proc/self/fd/N")
 * It is never loaded outside bench/callgrind_check.py. The instruction counts it
 * adds are tiny and the same in the baseline and every later run.
 */

static long raw6(long nr, long a, long b, long c, long d, long e, long f)
{
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	long r;

	__asm__ volatile("syscall"
			 : "=a"(r)
			 : "0"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return r;
}

static long ret(long r)
{
	if (r < 0 && r > -4096) {
		errno = (int)-r;
		return -1;
	}
	return r;
}

static long clone3_as_clone(const struct clone_args *ca)
{
	int pidfd = -1;
	unsigned long flags = (unsigned long)(ca->flags & 0xffffffffu & ~(uint64_t)CLONE_FILES) |
			      (ca->exit_signal & 0xff);
	long r = raw6(SYS_clone, (long)flags, 0, (long)&pidfd, 0, 0, 0);

	if (r > 0 && (ca->flags & CLONE_PIDFD))
		*(int *)(uintptr_t)ca->pidfd = pidfd;
	return ret(r);
}

static long openat2_as_openat(int dfd, const char *path, const struct open_how *how)
{
	int flags = (int)how->flags;

	if (how->resolve & RESOLVE_NO_SYMLINKS)
		flags |= O_NOFOLLOW;
	return ret(raw6(SYS_openat, dfd, (long)path, flags, (long)how->mode, 0, 0));
}

static long pidfd_kill(int pidfd, int sig)
{
	char path[64], buf[1024], *p;
	int fd;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", pidfd);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	p = strstr(buf, "\nPid:");
	if (!p || atoi(p + 5) <= 0) {
		errno = ESRCH;
		return -1;
	}
	return kill(atoi(p + 5), sig);
}

long syscall(long nr, ...);
long syscall(long nr, ...)
{
	va_list ap;
	long a[6];

	va_start(ap, nr);
	for (int i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	switch (nr) {
	case SYS_clone3: return clone3_as_clone((const struct clone_args *)a[0]);
	case SYS_openat2:
		return openat2_as_openat((int)a[0], (const char *)a[1],
					 (const struct open_how *)a[2]);
	case SYS_pidfd_send_signal: return pidfd_kill((int)a[0], (int)a[1]);
	case SYS_execveat:
		if (a[4] == AT_EMPTY_PATH) {
			char path[64];

			snprintf(path, sizeof(path), "/proc/self/fd/%d", (int)a[0]);
			return execve(path, (char **)a[2], (char **)a[3]);
		}
		break;
	default: break;
	}
	return ret(raw6(nr, a[0], a[1], a[2], a[3], a[4], a[5]));
}

/* The sandbox child sets rlimits valgrind keeps for itself; it still execs paddock-init. */
int setrlimit(__rlimit_resource_t res, const struct rlimit *rl)
{
	long r = raw6(SYS_prlimit64, 0, res, (long)rl, 0, 0, 0);

	return r == -EPERM ? 0 : (int)ret(r);
}
