/* SPDX-License-Identifier: MIT */
/* Which way an interpreter starts: on the host (the endpoint bridge), forked from the
 * Python template, or by the sandbox's init. */
#include <errno.h>
#include <string.h>

#include "log.h"
#include "run.h"

/* The endpoint bridge: forked here, attached at once, its exit watched through its pidfd. */
static int interp_spawn_on_host(Session *s, enum interp_kind kind)
{
	Interp *ip = &s->interps[kind];
	pid_t pid;
	int fds[4], r;

	r = host_interp_spawn(s, kind, &pid, fds);
	if (r < 0)
		return r;
	ip->state = INTERP_STARTING;
	interp_attach(s, kind, pid, fds);
	if (ip->state == INTERP_DEAD)
		return -EIO;
	interp_watch_exit(ip);
	return 0;
}

/* Python from the template when it serves (template.c), anything else from init. */
static int interp_spawn_in_sandbox(Session *s, enum interp_kind kind)
{
	int r = template_spawn(s, kind);

	if (r == 0)
		return 0;
	if (r != -EOPNOTSUPP)
		log_warn("SESSION_ID=%s the Python template: %s; init starts the interpreter",
			 s->id, strerror(-r));
	return interp_spawn_by_init(s, kind);
}

int interp_spawn(Session *s, enum interp_kind kind)
{
	return interp_on_host(kind) ? interp_spawn_on_host(s, kind) :
				      interp_spawn_in_sandbox(s, kind);
}
