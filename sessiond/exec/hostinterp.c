/* SPDX-License-Identifier: MIT */
/* Interpreters outside the sandbox: the bridge to an external Jupyter Server. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cleanup.h"
#include "log.h"
#include "run.h"
#include "sandbox_layout.h"

/*
 * The endpoint tier runs user code on the operator's Jupyter Server, so its bridge
 * has nothing to protect inside a sandbox and needs the network the sandbox lacks.
 * It runs on the host as the unprivileged worker user, dies with the daemon
 * (PR_SET_PDEATHSIG), and speaks the same control protocol as every harness.
 */
bool interp_on_host(enum interp_kind kind)
{
	return kind == INTERP_ENDPOINT;
}

/* Between fork and exec: only async-signal-safe calls, then exec or _exit. */
static void child_exec(int ctl, int out, int err, uid_t uid, gid_t gid, char *const argv[],
		       char *const envp[])
{
	int devnull = open("/dev/null", O_RDONLY);
	sigset_t none;

	/* The daemon blocks the signals it reads through signalfd, and ignores SIGPIPE:
	 * the bridge must get SIGINT (interrupt) and default behaviour back. */
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);
	setsid();
	if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0)
		_exit(127);
	if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0 ||
	    dup2(ctl, 3) < 0)
		_exit(127);
	syscall(SYS_close_range, 4, ~0U, 0);
	if (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0)
		_exit(127);
	if (chdir("/") < 0)
		_exit(127);
	execve(argv[0], argv, envp);
	_exit(127);
}

int host_interp_spawn(Session *s, enum interp_kind kind, pid_t *pid_out, int fds[4])
{
	const PaddockConfig *cfg = s->m->cfg;
	struct passwd *pw = getpwnam(cfg->worker_user);
	uid_t uid = pw ? pw->pw_uid : 65534;
	gid_t gid = pw ? pw->pw_gid : 65534;
	int sv[2] = { -1, -1 }, po[2] = { -1, -1 }, pe[2] = { -1, -1 };
	char endpoint[4200], sid[200], *envp[8];
	char *const *argv = s->m->argv[kind];
	pid_t pid;
	int pidfd, r = 0;

	snprintf(endpoint, sizeof(endpoint), "PADDOCK_JUPYTER_ENDPOINT=%s", cfg->jupyter_endpoint);
	snprintf(sid, sizeof(sid), "PADDOCK_SESSION_ID=%s", s->id);
	envp[0] = (char *)"PATH=" SANDBOX_PATH;
	envp[1] = (char *)"HOME=/tmp";
	envp[2] = (char *)"LANG=C.UTF-8";
	envp[3] = (char *)"PYTHONDONTWRITEBYTECODE=1";
	envp[4] = endpoint;
	envp[5] = sid;
	envp[6] = NULL;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0 ||
	    pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0) {
		r = -errno;
		goto fail;
	}
	pid = fork();
	if (pid < 0) {
		r = -errno;
		goto fail;
	}
	if (pid == 0)
		child_exec(sv[1], po[1], pe[1], uid, gid, argv, envp);
	close(sv[1]);
	close(po[1]);
	close(pe[1]);
	pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0) {
		r = -errno;
		kill(pid, SIGKILL);
		close(sv[0]);
		close(po[0]);
		close(pe[0]);
		return r;
	}
	fcntl(pidfd, F_SETFD, FD_CLOEXEC);
	fds[0] = pidfd;
	fds[1] = sv[0];
	fds[2] = po[0];
	fds[3] = pe[0];
	*pid_out = pid;
	return 0;
fail:
	for (int i = 0; i < 2; i++) {
		safe_close(sv[i]);
		safe_close(po[i]);
		safe_close(pe[i]);
	}
	return r;
}

void host_interp_stop(Interp *ip, int sig)
{
	if (ip->pidfd >= 0)
		syscall(SYS_pidfd_send_signal, ip->pidfd, sig, NULL, 0);
}
