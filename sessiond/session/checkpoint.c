/* SPDX-License-Identifier: MIT */
/* Keeping the store's WAL short without syncing files in the daemon's loop. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "cleanup.h"
#include "clone.h"
#include "log.h"
#include "session/session.h"

/* Past this many times the threshold, with no checkpoint getting through from the
 * child, the loop checkpoints itself rather than let the WAL grow without bound. */
#define CHECKPOINT_FALLBACK_FACTOR 16
/* A child that failed is not tried again for this long. */
#define CHECKPOINT_RETRY_MS 1000

static void on_checkpoint_exit(Loop *l, int fd, uint32_t events, void *data)
{
	Manager *m = data;

	(void)fd;
	(void)events;
	m->ckpt_src = loop_remove(l, m->ckpt_src);
	m->ckpt_pidfd = safe_close(m->ckpt_pidfd);
	m->checkpoints++;
}

/* The child execs this same program with --wal-checkpoint: a process of its own opens
 * its own connection (SQLite's locks do not survive a fork without exec). */
static _Noreturn void checkpoint_exec_in_child(const char *db)
{
	char *argv[] = { "paddock-sessiond", "--wal-checkpoint", (char *)db, NULL };
	sigset_t none;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	execv("/proc/self/exe", argv);
	_exit(127);
}

static int checkpoint_start(Manager *m)
{
	pid_t pid = clone_pidfd(0, &m->ckpt_pidfd);

	if (pid == 0)
		checkpoint_exec_in_child(m->db_path);
	if (pid < 0)
		return -errno;
	if (loop_add_fd(m->loop, m->ckpt_pidfd, EPOLLIN, on_checkpoint_exit, m, &m->ckpt_src) < 0) {
		/* It runs to its end unwatched; the next commit may start another. */
		m->ckpt_pidfd = safe_close(m->ckpt_pidfd);
		return -ENOMEM;
	}
	return 0;
}

void checkpoint_on_wal(void *data, int pages)
{
	Manager *m = data;
	int64_t threshold = m->cfg->wal_checkpoint_pages;
	uint64_t now = now_ms();
	int r;

	if (pages < threshold)
		return;
	if (pages >= threshold * CHECKPOINT_FALLBACK_FACTOR) {
		log_warn("store: WAL at %d pages, checkpointing in the daemon", pages);
		r = store_checkpoint(m->store);
		if (r < 0)
			log_err("store: checkpoint failed: %s", strerror(-r));
		return;
	}
	if (m->ckpt_pidfd >= 0 || now < m->ckpt_retry_ms)
		return;
	r = checkpoint_start(m);
	if (r < 0) {
		log_warn("store: no checkpoint process: %s", strerror(-r));
		m->ckpt_retry_ms = now + CHECKPOINT_RETRY_MS;
	}
}

void checkpoint_free(Manager *m)
{
	/* A running child finishes on its own; closing the store checkpoints anyway. */
	m->ckpt_src = loop_remove(m->loop, m->ckpt_src);
	m->ckpt_pidfd = safe_close(m->ckpt_pidfd);
}
