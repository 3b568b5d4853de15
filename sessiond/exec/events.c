/* SPDX-License-Identifier: MIT */
/*
 * What an interpreter's replies and exits, and init's messages, mean to the run in flight:
 * the events that move a run through its phases (run.c).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fdpass.h"
#include "init/init_steps.h"
#include "log.h"
#include "run.h"

static void probe_done(Interp *ip)
{
	Run *run = ip->s->run;

	ip->probing = false;
	ip->expect_id = 0;
	ctl_watch(ip);
	ip->s->m->events->interp_settled(ip->s);
	if (run && run->kind == ip->kind && run->phase == RUN_STARTING && !ip->s->adopting)
		run_send(run);
}

/* A harness's event line, with or without a blank after the colon: a rich output published
 * while its cell runs, or a programmatic tool call. */
#define EVENT_PREFIX "{\"event\":"

/* A reply to the probe, or to the run's request, or an event (interp.c has checked its
 * id). */
void interp_replied(Interp *ip, char *line)
{
	Run *run = ip->s->run;

	if (strncmp(line, EVENT_PREFIX, sizeof(EVENT_PREFIX) - 1) == 0) {
		const char *name = line + sizeof(EVENT_PREFIX) - 1;

		name += *name == ' ';
		if (strncmp(name, "\"tool_call\"", 11) == 0)
			tool_call_start(ip, line);
		else
			interp_forward_event(ip, line);
		return;
	}

	if (ip->probing) {
		probe_done(ip);
		return;
	}
	if (!run || run->kind != ip->kind ||
	    (run->phase != RUN_RUNNING && run->phase != RUN_INTERRUPTED))
		return; /* a reply nobody waits for */
	ip->expect_id = 0;
	ctl_watch(ip);
	drain_all(ip);
	run->return_code = reply_return_code(run, line);
	run->interrupted_ok = run->phase == RUN_INTERRUPTED;
	run_complete(run);
}

static void on_spawned(Session *s, const struct init_msg *msg, int *fds, size_t nfds)
{
	if (msg->tag >= INTERP_KIND_COUNT || nfds != 4 ||
	    !(s->interps[msg->tag].state == INTERP_STARTING ||
	      (s->adopting && s->interps[msg->tag].state == INTERP_DEAD))) {
		for (size_t i = 0; i < nfds; i++)
			close(fds[i]);
		return;
	}
	interp_attach(s, msg->tag, msg->pid, fds);
	/* Not init's child: its exit is seen through its pidfd (without a status, the daemon
	 * that was its parent having gone). */
	if (msg->status == INIT_SPAWNED_ADOPTED && s->interps[msg->tag].state != INTERP_DEAD) {
		s->interps[msg->tag].forked = true;
		interp_watch_exit(&s->interps[msg->tag]);
	}
}

static int exit_code(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return 1;
}

static void on_exited(Session *s, const struct init_msg *msg)
{
	if (msg->tag < INTERP_KIND_COUNT)
		interp_exited(s, msg->tag, msg->pid, msg->status);
}

void interp_exited(Session *s, enum interp_kind kind, pid_t pid, int status)
{
	Interp *ip = &s->interps[kind];
	Run *run = s->run;

	if (ip->state == INTERP_DEAD || ip->ns_pid != pid)
		return;
	drain_all(ip);
	if (run && run->kind == ip->kind &&
	    (run->phase == RUN_RUNNING || run->phase == RUN_INTERRUPTED)) {
		run->return_code = exit_code(status);
		if (!run->timed_out && WIFSIGNALED(status))
			run_note(run,
				 "the interpreter was killed by signal %d; a new one starts "
				 "with the next call",
				 WTERMSIG(status));
		else if (!run->timed_out)
			run_note(run,
				 "the interpreter exited with status %d; a new one starts "
				 "with the next call",
				 WEXITSTATUS(status));
		run->lost_state = true;
		interp_close(ip);
		run_complete(run);
		return;
	}
	if (run && run->kind == ip->kind && run->phase == RUN_STARTING) {
		char why[64];

		interp_close(ip);
		if (start_oom_killed(run, status) && run_clear_leftovers(run))
			return;
		if (WIFSIGNALED(status))
			snprintf(why, sizeof(why), "killed by signal %d", WTERMSIG(status));
		else
			snprintf(why, sizeof(why), "exit status %d", WEXITSTATUS(status));
		run_start_failed(run, why);
		return;
	}
	/* Not the running interpreter, or killed on purpose: its output stays buffered. */
	interp_close(ip);
	s->m->events->interp_settled(s);
}

static void on_killed(Session *s)
{
	Run *run = s->run;

	if (!run || (run->phase != RUN_KILLING && run->phase != RUN_REAPING))
		return;
	/* Everything but init is dead now, whatever init reported on the way. */
	if (run->phase == RUN_KILLING)
		interps_all_dead(s);
	run_finish(run);
}

static void on_init_error(Session *s, const struct init_msg *msg)
{
	Run *run = s->run;

	log_warn("SESSION_ID=%s init: %s failed: %s", s->id, init_step_name(msg->step),
		 strerror(msg->status));
	if (msg->tag < INTERP_KIND_COUNT && s->interps[msg->tag].state == INTERP_STARTING) {
		s->interps[msg->tag].state = INTERP_DEAD;
		s->m->events->interp_settled(s);
	}
	/* init could not kill everything in time: the run ends anyway, the leftovers are
	 * in the session's cgroup and die with it at the latest. */
	if (run && (run->phase == RUN_REAPING || run->phase == RUN_KILLING)) {
		on_killed(s);
		return;
	}
	if (run && run->phase == RUN_STARTING && s->interps[run->kind].state == INTERP_DEAD &&
	    !(msg->step == INIT_STEP_FORK && msg->status == EAGAIN && run_clear_leftovers(run)))
		run_start_failed(run, strerror(msg->status));
}

/* init has re-sent every interpreter that survived a restart (its PONG). */
static void adoption_done(Session *s)
{
	Run *run = s->run;

	s->adopting = false;
	/* A call that arrived meanwhile for an interpreter that did not survive starts one. */
	if (run && run->phase == RUN_STARTING && s->interps[run->kind].state == INTERP_DEAD)
		run_retry_start(run);
}

void init_on_event(Loop *l, int fd, uint32_t events, void *data)
{
	Session *s = data;

	(void)l;
	for (;;) {
		union {
			char buf[CMSG_SPACE(sizeof(int) * 8)];
			struct cmsghdr align;
		} cbuf;
		struct init_msg msg;
		struct iovec iov = { &msg, sizeof(msg) };
		struct msghdr mh = { .msg_iov = &iov,
				     .msg_iovlen = 1,
				     .msg_control = cbuf.buf,
				     .msg_controllen = sizeof(cbuf.buf) };
		int fds[4];
		size_t nfds = 0;
		ssize_t n = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0) {
			if (events & (EPOLLHUP | EPOLLERR) || n == 0) {
				s->m->events->sandbox_lost(s, "sandbox init exited");
				return;
			}
			return;
		}
		cmsg_take_fds(&mh, fds, &nfds, ARRAY_SIZE(fds));
		if ((size_t)n < sizeof(msg)) {
			for (size_t i = 0; i < nfds; i++)
				close(fds[i]);
			continue;
		}
		switch (msg.op) {
		case INIT_SPAWNED: on_spawned(s, &msg, fds, nfds); break;
		case INIT_EXITED: on_exited(s, &msg); break;
		case INIT_KILLED: on_killed(s); break;
		case INIT_ERROR: on_init_error(s, &msg); break;
		case INIT_PONG:
			if (s->adopting)
				adoption_done(s);
			break;
		default: break;
		}
		if (msg.op != INIT_SPAWNED)
			for (size_t i = 0; i < nfds; i++)
				close(fds[i]);
	}
}
