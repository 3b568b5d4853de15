/* SPDX-License-Identifier: MIT */
/* A run: one call's code through its phases, from its interpreter's start to its reply
 * (the phases are enum run_phase; the events that move them, events.c). */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "cleanup.h"
#include "log.h"
#include "proto.h"
#include "run.h"
#include "session/tenant.h"
#include "workspace/workspace.h"

#define START_TIMEOUT_MS 60000 /* an interpreter that has not started by then is killed */

static void run_free(Run *run)
{
	if (!run)
		return;
	tool_call_drop(run);
	loop_remove(run->s->m->loop, run->timer);
	loop_remove(run->s->m->loop, run->cancel);
	json_object_put(run->reply);
	free(run->code);
	free(run->cwd);
	free(run->tag);
	free(run->note);
	free(run);
}

void run_note(Run *run, const char *fmt, ...)
{
	va_list ap;
	char *n = NULL;

	va_start(ap, fmt);
	if (vasprintf(&n, fmt, ap) < 0)
		n = NULL;
	va_end(ap);
	free(run->note);
	run->note = n;
}

void run_fail(Run *run, const char *why)
{
	run_note(run, "%s", why);
	run->return_code = 1;
	run_finish(run);
}

static const char *timeout_text(const Run *run, char *buf, size_t len)
{
	if (run->timeout_ms % 1000 == 0)
		snprintf(buf, len, "%llus", (unsigned long long)(run->timeout_ms / 1000));
	else
		snprintf(buf, len, "%llums", (unsigned long long)run->timeout_ms);
	return buf;
}

/* How a run ended, as an index into the manager's counters and the log's words. */
static int run_outcome_index(const Run *run)
{
	if (run->cancelled)
		return 4;
	if (run->timed_out)
		return 2;
	if (run->lost_state)
		return 3;
	return run->return_code == 0 ? 0 : 1;
}

static const char *run_outcome(const Run *run)
{
	static const char *const names[] = { "ok", "error", "timeout", "killed", "cancelled" };

	return names[run_outcome_index(run)];
}

/* The counters a run reports, from files the session keeps open; the memory peak only at
 * the end, where it is reported. */
static void read_counters(Session *s, SandboxUsage *u, bool with_peak)
{
	*u = (SandboxUsage){ 0 };
	if (!s->counters && sandbox_counters_open(s->m->env, s->rid, &s->counters) < 0)
		return;
	sandbox_counters_read(s->counters, u, with_peak);
}

/* What the run used, as the reply's "usage" object. */
static void add_usage(JsonText *t, const Run *run, const SandboxUsage *u, bool oom)
{
	json_text_add_str(t, "{\"cpu_ms\":");
	json_text_add_int(t, (int64_t)((u->cpu_ns - run->usage0.cpu_ns) / 1000000));
	json_text_add_str(t, ",\"max_rss_bytes\":");
	json_text_add_int(t, (int64_t)u->memory_peak);
	json_text_add_str(t, ",\"oom_killed\":");
	json_text_add_bool(t, oom);
	json_text_add_str(t, "}");
}

/* Append a line to text we own (of *len bytes, NULs allowed): on a fresh line, ending in one. */
static char *append_line(char *s, size_t *len, const char *add)
{
	size_t a = s ? *len : 0, b = strlen(add);
	bool nl_before = a > 0 && s[a - 1] != '\n';
	bool nl_after = b == 0 || add[b - 1] != '\n';
	char *r = realloc(s, a + nl_before + b + nl_after + 1);

	if (!r)
		return s;
	if (nl_before)
		r[a++] = '\n';
	memcpy(r + a, add, b);
	a += b;
	if (nl_after)
		r[a++] = '\n';
	r[a] = '\0';
	*len = a;
	return r;
}

/* The harness's notebook objects pass through (a null stays null); the worker shapes them. */
static void add_cell_objects(JsonText *t, json_object *reply)
{
	static const char *const keys[] = { "result", "error", "display" };

	for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
		json_object *v;

		if (!json_object_object_get_ex(reply, keys[i], &v))
			continue;
		json_text_add_key(t, keys[i]);
		json_text_add_value(t, v);
	}
}

/*
 * The reply to a run's call, one shape for every way a run ends, as text left open: its
 * output (with the note on a line of its own at the end of stderr when note_in_stderr),
 * return code, time, how it ended, usage (none when u is NULL), and a cell's notebook
 * objects. The files it made are added by the walk that finds them. Written rather than
 * built: this is every call's reply.
 */
static void exec_reply(JsonText *t, Run *run, const SandboxUsage *u, bool oom, bool note_in_stderr)
{
	Session *s = run->s;
	Interp *ip = &s->interps[run->kind];
	size_t out_len, err_len;
	char *out = outbuf_finish(&ip->out_buf, &out_len);
	char *err = outbuf_finish(&ip->err_buf, &err_len);

	if (run->note && note_in_stderr)
		err = append_line(err, &err_len, run->note);
	/* Out of memory making them valid UTF-8: the output is lost, so is the reply. */
	if (!out || !err)
		t->failed = true;
	reply_ok_text(t);
	if (run->note) {
		json_text_add_key(t, "note");
		json_text_add_quoted(t, run->note);
	}
	json_text_add_key(t, "stdout");
	json_text_add_quoted_len(t, out ?: "", out ? out_len : 0);
	json_text_add_key(t, "stderr");
	json_text_add_quoted_len(t, err ?: "", err ? err_len : 0);
	json_text_add_key(t, "return_code");
	json_text_add_int(t, run->return_code);
	json_text_add_key(t, "execution_time_ms");
	json_text_add_int(t, (int64_t)(now_ms() - run->start_ms));
	json_text_add_key(t, "timed_out");
	json_text_add_bool(t, run->timed_out);
	json_text_add_key(t, "state_lost");
	json_text_add_bool(t, run->lost_state);
	json_text_add_key(t, "cancelled");
	json_text_add_bool(t, run->cancelled);
	json_text_add_key(t, "usage");
	if (u)
		add_usage(t, run, u, oom);
	else
		json_text_add_str(t, "{}");
	json_text_add_key(t, "execution_count");
	json_text_add_int(t, (int64_t)s->execution_count);
	if (run->cell && run->reply)
		add_cell_objects(t, run->reply);
	free(out);
	free(err);
}

/* The run's reply has gone (a ScanSentFn): the session takes the next call. */
static void run_reply_sent(void *data)
{
	Run *run = data;
	Session *s = run->s;
	Interp *ip = &s->interps[run->kind];

	s->run = NULL;
	run_free(run);
	/* The promise of the timeout message: a fresh interpreter is ready for the next call. */
	if (ip->state == INTERP_DEAD && s->sb.ctl_fd >= 0 && !s->adopting)
		interp_spawn(s, ip->kind);
}

/* Reply to the worker, log, and forget the run. */
void run_finish(Run *run)
{
	Session *s = run->s;
	Manager *m = s->m;
	uint64_t ms = now_ms() - run->start_ms;
	JsonText o = { .buf = NULL };
	SandboxUsage u;
	bool oom;

	read_counters(s, &u, true);
	oom = u.oom_kills > run->usage0.oom_kills;
	if (oom && !run->timed_out)
		run_note(run, "killed: the sandbox ran out of memory (limit %lld bytes)",
			 (long long)m->cfg->memory_max_bytes);
	if (run->timed_out)
		run->return_code = RC_TIMEOUT;
	/* Otari reports what happened in stderr; the code plane words it in its own outputs. */
	exec_reply(&o, run, &u, oom, !run->cell);
	m->runs_by_outcome[run_outcome_index(run)]++;
	s->last_activity_at = now_real();
	journal_note(s, interp_kind_name(run->kind), run->start_real, (int64_t)ms, run->return_code,
		     run_outcome(run));
	/* The session stays busy until the reply, with the files the run made, has gone. */
	run->phase = RUN_SCANNING;
	run->timer = loop_remove(m->loop, run->timer);
	reply_with_produced_files(s, run->conn, &o, &run->start_ts, run_reply_sent, run);
}

/* The interpreter answered (or died): finish, or first kill what the run left behind. */
void run_complete(Run *run)
{
	if (run->timed_out || run->cancelled) {
		run->phase = RUN_REAPING;
		run->timer = loop_remove(run->s->m->loop, run->timer);
		if (kill_processes(run->s, true) == 1)
			return; /* init reports INIT_KILLED */
	}
	run_finish(run);
}

/* Every process but init is dead: collect what the run wrote, forget the interpreters. */
void interps_all_dead(Session *s)
{
	for (int k = 0; k < INTERP_KIND_COUNT; k++)
		if (s->interps[k].state != INTERP_DEAD) {
			drain_all(&s->interps[k]);
			interp_close(&s->interps[k]);
		}
}

static void on_grace_expired(Loop *l, void *data)
{
	Run *run = data;
	char t[32];
	int r;

	(void)l;
	run->timer = NULL;
	run->phase = RUN_KILLING;
	run->lost_state = true;
	if (run->cancelled)
		run_note(run,
			 "the call was cancelled (%s) and did not stop; interpreter restarted, "
			 "state was lost",
			 run->cancel_why);
	else
		run_note(run, "execution timed out after %s; interpreter restarted, state was lost",
			 timeout_text(run, t, sizeof(t)));
	r = kill_processes(run->s, false);
	if (r == 0) {
		interps_all_dead(run->s);
		run_finish(run);
	} else if (r < 0) {
		/* Neither the cgroup nor init could do it: the sandbox is beyond repair. */
		run->s->m->events->sandbox_lost(run->s, "cannot kill");
	}
}

/* Stop the running code: SIGINT to the interpreter's process group (the interpreter and the
 * children it waits on), then the grace; straight to the kill when nothing runs to take it. */
static void run_interrupt(Run *run)
{
	Interp *ip = &run->s->interps[run->kind];
	Loop *l = run->s->m->loop;

	if (run->phase != RUN_RUNNING || ip->host_pid <= 0) {
		on_grace_expired(l, run);
		return;
	}
	run->phase = RUN_INTERRUPTED;
	/* A call in flight is answered now, before the interrupt: bash's paddock-tool would
	 * wait on for it; nothing comes after. */
	tool_call_interrupt(run);
	kill(-ip->host_pid, SIGINT);
	if (loop_add_timer(l, (uint64_t)run->s->m->cfg->interrupt_grace_ms, on_grace_expired, run,
			   &run->timer) < 0)
		on_grace_expired(l, run);
}

static void on_deadline(Loop *l, void *data)
{
	Run *run = data;
	char t[32];

	(void)l;
	run->timer = NULL;
	run->timed_out = true;
	run_note(run, "execution timed out after %s and was interrupted; state was kept",
		 timeout_text(run, t, sizeof(t)));
	run_interrupt(run);
}

static void on_cancel(Loop *l, void *data)
{
	Run *run = data;
	char why[128];

	run->cancel = NULL;
	if (run->phase == RUN_STARTING) {
		/* None of its code ran: it ends here; the interpreter goes on starting. */
		run->cancelled = true;
		run->timer = loop_remove(l, run->timer);
		snprintf(why, sizeof(why), "the call was cancelled before it started: %s",
			 run->cancel_why);
		run_fail(run, why);
		return;
	}
	/* Past its deadline, or over: it ends on its own. */
	if (run->phase != RUN_RUNNING)
		return;
	run->cancelled = true;
	run->timer = loop_remove(l, run->timer);
	run_note(run, "the call was cancelled (%s) and was interrupted; state was kept",
		 run->cancel_why);
	run_interrupt(run);
}

void run_cancel(Run *run, const char *why)
{
	if (!run->cancel_why)
		run->cancel_why = why;
	/* On the next turn of the loop: this is called from wherever the connection closed. */
	if (!run->cancel && !run->cancelled)
		loop_add_timer(run->s->m->loop, 0, on_cancel, run, &run->cancel);
}

static int encode_request(const Run *run, const Interp *ip, char **buf, size_t *len)
{
	uint64_t id = ip->expect_id;

	if (run->kind == INTERP_BASH) {
		/* Bash reads "<id>\n<command>" ending in NUL; the other harnesses JSON lines.
		 * Bash collects its dead children itself: it needs no reap flag. */
		size_t n = strlen(run->code);
		char head[32];
		int h = snprintf(head, sizeof(head), "\001%llu%s\n", (unsigned long long)id,
				 run->s->tools ? " tools" : "");

		*buf = malloc((size_t)h + n + 1);
		if (!*buf)
			return -ENOMEM;
		memcpy(*buf, head, (size_t)h);
		memcpy(*buf + h, run->code, n + 1);
		*len = (size_t)h + n + 1;
		return 0;
	} else {
		JsonText t = { .buf = NULL };

		/* The id comes back in the reply: a reply to an older request is dropped. */
		json_text_add_str(&t, "{\"id\":");
		json_text_add_int(&t, (int64_t)id);
		json_text_add_key(&t, "code");
		json_text_add_quoted(&t, run->code);
		json_text_add_key(&t, "mode");
		json_text_add_str(&t, run->cell ? "\"cell\"" : "\"otari\"");
		if (run->cwd) {
			json_text_add_key(&t, "cwd");
			json_text_add_quoted(&t, run->cwd);
		}
		if (run->stream)
			json_text_add_str(&t, ",\"stream\":true");
		/* The Python harnesses build _platform_tools from it (docs/harness-protocol.md). */
		if (run->s->tools && (run->kind == INTERP_PYTHON || run->kind == INTERP_KERNEL)) {
			json_text_add_key(&t, "tools");
			json_text_add_value(&t, run->s->tools->stub);
		}
		if (ip->reap)
			json_text_add_str(&t, ",\"reap\":true");
		json_text_add_str(&t, "}\n");
		if (t.failed) {
			json_text_clear(&t);
			return -ENOMEM;
		}
		*buf = t.buf;
		*len = t.len;
		return 0;
	}
}

void run_send(Run *run)
{
	Interp *ip = &run->s->interps[run->kind];
	Loop *l = run->s->m->loop;
	char *req = NULL;
	size_t len = 0;

	/* Output left from between runs is not this run's. */
	outbuf_clear(&ip->out_buf);
	outbuf_clear(&ip->err_buf);
	ip->expect_id = interp_request_id();
	if (encode_request(run, ip, &req, &len) < 0) {
		run_fail(run, "internal error: out of memory");
		return;
	}
	ip->reap = false;
	run->phase = RUN_RUNNING;
	run->timer = loop_remove(l, run->timer);
	run->deadline_ms = now_ms() + run->timeout_ms;
	if (loop_add_timer(l, run->timeout_ms, on_deadline, run, &run->timer) < 0) {
		free(req);
		run_fail(run, "internal error: no timer");
		return;
	}
	/* After any tool answer the harness left unread: it skips those. */
	interp_queue_request(ip, req, len);
	free(req);
}

/* A harness's "return_code" read off its reply's text, 1 when it has none that fits. */
static int scanned_return_code(const char *line)
{
	static const char *const key[] = { "return_code" };
	JsonSpan rc;
	int64_t v;

	if (json_scan_object(line, strlen(line), JSON_TOKENER_DEFAULT_DEPTH, key, &rc, 1) < 0 ||
	    json_span_int(&rc, &v) <= 0 || v < INT_MIN || v > INT_MAX)
		return 1;
	return (int)v;
}

int reply_return_code(Run *run, const char *line)
{
	if (run->kind == INTERP_BASH) {
		const char *sp = strchr(line, ' ');

		return (int)strtol(sp ? sp + 1 : line, NULL, 10);
	}
	/* Only a cell's reply has more than its return code to pass on. */
	if (!run->cell)
		return scanned_return_code(line);
	run->reply = json_in_parse_sandboxed(line, strlen(line), JSON_TOKENER_DEFAULT_DEPTH);
	if (run->reply) {
		json_object *rc;

		if (json_object_object_get_ex(run->reply, "return_code", &rc))
			return json_object_get_int(rc);
	}
	return 1;
}

/*
 * What a call leaves running (background jobs, daemons, a fork bomb) may go on after it
 * returns, within the session's limits. When those leftovers keep the run's interpreter
 * from starting (init's fork refused at pids.max; the start killed by the OOM killer),
 * paddock stops them and tries the start again, saying so in the call's stderr: first
 * every process of the sandbox but init and the live interpreters; if the start still
 * fails (the leftovers are an interpreter's own children, which stay its zombies until it
 * waits for them), the other interpreters in the sandbox too, whose state is then lost.
 * Interpreters outside the sandbox (the endpoint bridge) hold none of its limits and are
 * never touched. True when the start was tried again.
 */
bool run_clear_leftovers(Run *run)
{
	Session *s = run->s;
	bool keep_interps = run->clear_rounds == 0;
	pid_t keep[1 + INTERP_KIND_COUNT];
	size_t n;

	if (run->clear_rounds >= 2)
		return false;
	run->clear_rounds++;
	n = kill_keep_list(s, keep_interps, keep);
	/* The cgroup's way only: it is synchronous, and init's answer would come too late. */
	if (sandbox_cgroup_kill(s->m->env, s->rid, keep, n) < 0)
		return false;
	for (int k = 0; !keep_interps && k < INTERP_KIND_COUNT; k++)
		if (!interp_on_host(k) && s->interps[k].state != INTERP_DEAD) {
			drain_all(&s->interps[k]);
			interp_close(&s->interps[k]);
		}
	run->cleared = true;
	log_info("SESSION_ID=%s stopped the processes earlier calls left%s to start its "
		 "interpreter",
		 s->id, keep_interps ? "" : ", interpreters included");
	run_note(run,
		 "paddock stopped the processes that earlier calls left running%s: they held the "
		 "session's limits, and the interpreter could not start",
		 keep_interps ? "" : ", the other interpreters included (their state is lost)");
	return interp_spawn(s, run->kind) == 0;
}

/* Whether the run's interpreter was killed for memory as it started. */
bool start_oom_killed(Run *run, int status)
{
	SandboxUsage u;

	if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL)
		return false;
	read_counters(run->s, &u, false);
	return u.oom_kills > run->usage0.oom_kills;
}

/* The run's interpreter could not start (why: a sentence): the call fails saying so. */
void run_start_failed(Run *run, const char *why)
{
	if (run->cleared)
		run_note(run,
			 "the interpreter could not be started: %s (after stopping the processes "
			 "that earlier calls left running)",
			 why);
	else
		run_note(run, "the interpreter could not be started: %s", why);
	run->return_code = 1;
	run_finish(run);
}

/* ---- entry points ---- */

void run_start(Session *s, Conn *c, const ExecRequest *er)
{
	Run *run = calloc(1, sizeof(*run));
	enum interp_kind kind = er->kind;
	uint64_t timeout_ms = er->timeout_ms;
	Interp *ip = &s->interps[kind];

	if (!run || !(run->code = strdup(er->code)) || (er->cwd && !(run->cwd = strdup(er->cwd))) ||
	    (er->tag && !(run->tag = strdup(er->tag)))) {
		if (run) {
			free(run->code);
			free(run->cwd);
		}
		free(run);
		conn_reply(c, reply_error("internal", "out of memory"), NULL, 0);
		return;
	}
	session_cpu_foreground(s); /* someone waits for it now */
	run->s = s;
	run->conn = c;
	run->kind = kind;
	run->cell = er->cell;
	run->stream = er->stream;
	run->finish_on_hangup = er->finish_on_hangup;
	run->timeout_ms = timeout_ms;
	run->start_ms = now_ms();
	run->start_real = now_real();
	/* File times come from the coarse clock: compare like with like. */
	clock_gettime(CLOCK_REALTIME_COARSE, &run->start_ts);
	read_counters(s, &run->usage0, false);
	run->phase = RUN_STARTING;
	s->run = run;
	s->execution_count++;
	s->last_activity_at = now_real();
	/* Taken: the worker may now answer its client that the call runs. */
	run_stream(run, PROTO_STREAM_STARTED, NULL, 0);
	if (ip->state == INTERP_READY && !ip->probing) {
		run_send(run);
		return;
	}
	/* While init re-sends its interpreters, a dead one may yet turn up: wait. */
	if (ip->state == INTERP_DEAD && !s->adopting && interp_spawn(s, kind) < 0) {
		run_fail(run, "the interpreter could not be started");
		return;
	}
	/* Start-up has its own bound, so a slow first import does not eat the caller's time,
	 * and a stuck start cannot hang the call; the deadline starts when the code is sent. */
	if (loop_add_timer(s->m->loop,
			   timeout_ms > START_TIMEOUT_MS ? timeout_ms : START_TIMEOUT_MS,
			   on_deadline, run, &run->timer) < 0) {
		run_fail(run, "internal error: no timer");
	}
}

int interp_start(Session *s, enum interp_kind kind)
{
	if (s->interps[kind].state != INTERP_DEAD)
		return 0;
	return interp_spawn(s, kind);
}

void run_retry_start(Run *run)
{
	if (interp_spawn(run->s, run->kind) < 0) {
		run_fail(run, "the interpreter could not be started");
	}
}

void run_abort(Session *s, const char *why)
{
	Run *run = s->run;

	if (!run)
		return;
	if (run->phase == RUN_SCANNING) {
		/* It is over; its reply waits for the walk, which scans_cancel() ends. */
		s->run = NULL;
		run_free(run);
		return;
	}
	drain_all(&s->interps[run->kind]);
	run->return_code = RC_KILLED;
	run->lost_state = true;
	run_note(run, "the session was destroyed (%s) while this call ran", why);
	/* What cut the call short is the session's end, not its deadline, and it has no
	 * result; no files or usage: the sandbox is going away. */
	run->timed_out = false;
	json_object_put(run->reply);
	run->reply = NULL;
	if (run->conn) {
		_cleanup_(json_text_clear) JsonText o = { .buf = NULL };

		exec_reply(&o, run, NULL, false, true);
		json_text_add_str(&o, ",\"files\":[]}");
		conn_reply_text(run->conn, o.failed ? NULL : o.buf, o.len);
	}
	s->run = NULL;
	run_free(run);
}

void run_abort_unanswered(Session *s, const char *why)
{
	if (s->run)
		s->run->conn = NULL;
	run_abort(s, why);
}

void run_conn_closed(Manager *m, Conn *c)
{
	for (Session *s = m->sessions; s; s = s->next)
		if (s->run && s->run->conn == c) {
			s->run->conn = NULL;
			/* A streamed call belongs to its stream: its client has gone (unless
			 * the protocol says a dropped stream is no cancel: MCP's). */
			if (s->run->stream && !s->run->finish_on_hangup)
				run_cancel(s->run, "its client went away");
		}
}
