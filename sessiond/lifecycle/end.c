/* SPDX-License-Identifier: MIT */
/* The end of a session: destroyed (its sandbox killed, its remains a zombie), or let go
 * alive for the next daemon to re-adopt. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cleanup.h"
#include "clone.h"
#include "exec/exec.h"
#include "lifecycle.h"
#include "log.h"
#include "session/tenant.h"
#include "workspace/editor.h"
#include "workspace/workspace.h"
#include "workspace/wsfs.h"

void session_free(Session *s)
{
	editor_undo_free(s->undo);
	tools_free(s->tools);
	free(s->tenant);
	free(s);
}

/* The metrics' reasons a session ends for: released, idle, lifetime, anything else. */
static int end_reason_index(const char *why)
{
	static const char *const reasons[] = { "released", "idle", "lifetime" };

	for (int i = 0; i < (int)ARRAY_SIZE(reasons); i++)
		if (strcmp(why, reasons[i]) == 0)
			return i;
	return 3;
}

/* The parts of s the rooms above the session hold (its run aborted first): its waiting
 * replies, its interpreters, init's socket, its open files. */
static void session_close_parts(Session *s)
{
	scans_cancel(s);
	for (int k = 0; k < INTERP_KIND_COUNT; k++)
		interp_destroy(&s->interps[k]);
	loop_remove(s->m->loop, s->ctl_src);
	s->ctl_src = NULL;
	s->sb.ctl_fd = safe_close(s->sb.ctl_fd);
	s->ws_fd = safe_close(s->ws_fd);
	s->scan_root_fd = safe_close(s->scan_root_fd);
	s->counters = sandbox_counters_free(s->counters);
	wsfs_changes_free(s->reported, s->n_reported);
	s->reported = NULL;
	s->n_reported = 0;
}

/* Forget a session without touching its sandbox or its row: for a restart. */
void session_release(Session *s)
{
	/* The worker sees its connection close: the call failed, as far as it knows. */
	run_abort_unanswered(s, "daemon stopping");
	session_close_parts(s);
	s->sb.pidfd = safe_close(s->sb.pidfd);
	session_unlink(s);
	session_free(s);
}

/* Kill the sandbox and hand its remains to a zombie that waits for init to exit. */
void session_destroy(Session *s, const char *why)
{
	Manager *m = s->m;

	log_info("SESSION_ID=%s destroyed KILL_REASON=%s", s->id, why);
	m->kills_by_reason[end_reason_index(why)]++;
	run_abort(s, why);
	pidfd_kill(s->sb.pidfd);
	session_close_parts(s);
	if (!s->pooled)
		journal_note_delete(m, s->id);
	session_unlink(s);
	tenant_session_leave(s);
	zombie_add(m, s->rid, s->uid, s->sb.pidfd);
	session_free(s);
}

void op_destroy(Manager *m, Conn *c, const Request *rq)
{
	json_object *req = rq->body;
	const char *tenant = rq->tenant;
	Session *s = session_find(m, req_string(req, "session_id"), tenant);
	json_object *o = reply_ok();

	json_set(o, "existed", json_object_new_boolean(s != NULL));
	if (s)
		session_destroy(s, "released");
	conn_reply(c, o, NULL, 0);
}
