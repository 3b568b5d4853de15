/* SPDX-License-Identifier: MIT */
/*
 * The remains of a killed sandbox: init has been sent SIGKILL; once it has exited, its
 * cgroup and workspace are removed off the loop, and its uid is free again.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "clone.h"
#include "list.h"
#include "log.h"
#include "session.h"

#define ZOMBIE_RETRY_MS 20
#define ZOMBIE_MAX_TRIES 500

static void zombie_free(Zombie *z)
{
	Manager *m = z->m;

	loop_remove(m->loop, z->src);
	if (z->pidfd >= 0)
		close(z->pidfd);
	uid_release(m, z->uid);
	LIST_UNLINK(m->zombies, z);
	free(z);
}

/*
 * The cleanup proper, in a child: removing cgroups and unmounting wait on kernel locks
 * that every sandbox build and teardown takes, and the loop should not wait with them.
 * The child shares the daemon's fd table (CLONE_FILES) and opens nothing, so it holds no
 * copy of a socket whose peer waits to see the daemon close it; and it dies with the
 * daemon, so that the shared table (the state dir's lock, the listening socket, the
 * workers' connections) does not outlive a crash. The next start cleans what it left.
 */
static _Noreturn void zombie_cleanup_in_child(const Zombie *z, pid_t daemon)
{
	int r;

	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != daemon)
		_exit(1);
	r = sandbox_cgroup_remove_wait(z->m->env, z->id, ZOMBIE_MAX_TRIES, ZOMBIE_RETRY_MS);

	if (r < 0)
		log_warn("SESSION_ID=%s cgroup not removed: %s (cleaned at next start)", z->id,
			 strerror(-r));
	r = workspace_destroy(z->m->env, z->id);
	if (r < 0)
		log_warn("SESSION_ID=%s workspace not removed: %s", z->id, strerror(-r));
	_exit(r < 0);
}

static void on_cleanup_done(Loop *l, int fd, uint32_t events, void *data)
{
	Zombie *z = data;

	(void)l;
	(void)fd;
	(void)events;
	log_debug("SESSION_ID=%s sandbox gone", z->id);
	zombie_free(z); /* the uid is free again once nothing is left that ran as it */
}

/* init is gone: a child removes the cgroup (retrying while tasks drain), then the
 * workspace; the zombie lasts until that child exits. */
static void zombie_reap(Loop *l, Zombie *z)
{
	pid_t pid, daemon = getpid();

	z->src = loop_remove(l, z->src);
	z->pidfd = safe_close(z->pidfd);
	pid = clone_pidfd(CLONE_FILES, &z->pidfd);
	if (pid == 0)
		zombie_cleanup_in_child(z, daemon);
	if (pid > 0 && loop_add_fd(l, z->pidfd, EPOLLIN, on_cleanup_done, z, &z->src) == 0)
		return;
	if (pid < 0) {
		/* No child: one attempt here; what is left is cleaned at the next start. */
		log_warn("SESSION_ID=%s cleanup child: %s", z->id, strerror(errno));
		sandbox_cgroup_remove(z->m->env, z->id);
		workspace_destroy(z->m->env, z->id);
	}
	/* With no watch on it, the child finishes on its own. */
	zombie_free(z);
}

static void on_zombie_exit(Loop *l, int fd, uint32_t events, void *data)
{
	(void)fd;
	(void)events;
	zombie_reap(l, data);
}

void zombie_add(Manager *m, const char *rid, uid_t uid, int pidfd)
{
	Zombie *z = calloc(1, sizeof(*z));

	if (!z) {
		/* Out of memory: leave the remains to the cleanup at next start. */
		safe_close(pidfd);
		return;
	}
	*z = (Zombie){ .m = m, .uid = uid, .pidfd = pidfd };
	snprintf(z->id, sizeof(z->id), "%s", rid);
	LIST_PUSH(m->zombies, z);
	if (z->pidfd < 0 || loop_add_fd(m->loop, z->pidfd, EPOLLIN, on_zombie_exit, z, &z->src) < 0)
		zombie_reap(m->loop, z);
}

void zombie_remains_remove(Manager *m, const char *rid)
{
	sandbox_cgroup_remove_wait(m->env, rid, ZOMBIE_MAX_TRIES, ZOMBIE_RETRY_MS);
	workspace_destroy(m->env, rid);
}

/*
 * Wait up to timeout_ms for pidfd's process to exit, reaping the daemon's exited children
 * meanwhile: an interpreter forked from the Python template is the daemon's child in the
 * sandbox's pid namespace, and the namespace's init does not finish exiting until every
 * process in it has been reaped. The loop, which reaps them otherwise, does not run here.
 */
static void wait_exit_reaping(int pidfd, int timeout_ms)
{
	for (int waited = 0; waited < timeout_ms; waited += 20) {
		struct pollfd p = { .fd = pidfd, .events = POLLIN };

		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
		if (poll(&p, 1, 20) != 0)
			return;
	}
}

void zombies_drain(Manager *m)
{
	while (m->zombies) {
		Zombie *z = m->zombies;

		if (z->pidfd >= 0) {
			wait_exit_reaping(z->pidfd, 5000);
			close(z->pidfd);
			z->pidfd = -1;
		}
		z->src = loop_remove(m->loop, z->src);
		zombie_remains_remove(m, z->id);
		zombie_free(z);
	}
}

size_t zombie_count(const Manager *m)
{
	size_t n = 0;

	for (const Zombie *z = m->zombies; z; z = z->next)
		n++;
	return n;
}
