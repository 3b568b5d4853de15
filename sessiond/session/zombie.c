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
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "list.h"
#include "log.h"
#include "session.h"

#define ZOMBIE_RETRY_MS 20
#define ZOMBIE_MAX_TRIES 500
/* Cleanup children started for one zombie, at most, when they do not report. */
#define ZOMBIE_CLEANUPS 3

static void zombie_free(Zombie *z)
{
	Manager *m = z->m;

	loop_remove(m->loop, z->src);
	if (z->pidfd >= 0)
		close(z->pidfd);
	if (z->done_fd >= 0)
		close(z->done_fd);
	uid_release(m, z->uid);
	LIST_UNLINK(m->zombies, z);
	free(z);
}

static void zombie_reap(Loop *l, Zombie *z);

static void on_cleanup_done(Loop *l, int fd, uint32_t events, void *data)
{
	Zombie *z = data;
	SandboxRemoval res;
	int r = sandbox_remove_finish(fd, &res);

	(void)events;
	/* The spawner died with the request queued, or the child was killed: again, with a
	 * new spawner (a few times; then the next start cleans up). */
	if (r == -ECHILD && ++z->cleanups < ZOMBIE_CLEANUPS) {
		zombie_reap(l, z);
		return;
	}
	if (r < 0)
		log_warn("SESSION_ID=%s cleanup child: %s (cleaned at next start)", z->id,
			 strerror(-r));
	else if (res.cgroup_err < 0)
		log_warn("SESSION_ID=%s cgroup not removed: %s (cleaned at next start)", z->id,
			 strerror(-res.cgroup_err));
	if (r == 0 && res.workspace_err < 0)
		log_warn("SESSION_ID=%s workspace not removed: %s", z->id,
			 strerror(-res.workspace_err));
	log_debug("SESSION_ID=%s sandbox gone", z->id);
	zombie_free(z); /* the uid is free again once nothing is left that ran as it */
}

/*
 * init is gone: a child the spawner clones removes the cgroup (retrying while tasks
 * drain), then the workspace, off the loop (they wait on kernel locks that every sandbox
 * build and teardown takes); the zombie lasts until it reports on z->done_fd.
 */
static void zombie_reap(Loop *l, Zombie *z)
{
	int r;

	z->src = loop_remove(l, z->src);
	z->pidfd = safe_close(z->pidfd);
	z->done_fd = safe_close(z->done_fd);
	r = sandbox_remove_start(z->m->env, z->id, ZOMBIE_MAX_TRIES, ZOMBIE_RETRY_MS, &z->done_fd);
	if (r == 0 && loop_add_fd(l, z->done_fd, EPOLLIN, on_cleanup_done, z, &z->src) == 0)
		return;
	if (r < 0) {
		/* No child: one attempt here; what is left is cleaned at the next start. */
		log_warn("SESSION_ID=%s cleanup child: %s", z->id, strerror(-r));
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
	*z = (Zombie){ .m = m, .uid = uid, .pidfd = pidfd, .done_fd = -1 };
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
		/* A cleanup under way: its report (or EOF) ends the wait; what it has not done
		 * in time is done below. */
		if (z->done_fd >= 0)
			(void)poll(&(struct pollfd){ .fd = z->done_fd, .events = POLLIN }, 1, 5000);
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
