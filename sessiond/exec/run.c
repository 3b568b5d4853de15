/* SPDX-License-Identifier: MIT */
/* Executions: start interpreters through init, feed them code, collect output, enforce time. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "init/init_steps.h"
#include "log.h"
#include "session/session.h"
#include "utf8.h"

#define READ_CHUNK 65536
#define READS_PER_EVENT 16 /* bound one stream's share of a loop iteration */
/* A reply buffer larger than this goes back to the allocator once it is consumed. */
#define LINE_KEEP_BYTES (64u << 10)
#define RC_TIMEOUT 124
#define RC_KILLED 137	       /* 128 + SIGKILL, as a shell reports a killed program */
#define START_TIMEOUT_MS 60000 /* an interpreter that has not started by then is killed */

/* ---- output buffers ---- */

void outbuf_append(OutBuf *b, const char *data, size_t len, size_t cap)
{
	size_t room = b->len < cap ? cap - b->len : 0;
	size_t take = len < room ? len : room;

	if (take > 0 && b->len + take > b->cap) {
		size_t ncap = b->cap ? b->cap : 4096;
		char *grown;

		while (ncap < b->len + take)
			ncap *= 2;
		if (ncap > cap)
			ncap = cap;
		grown = realloc(b->buf, ncap + 1);
		if (!grown) {
			b->omitted += len;
			return;
		}
		b->buf = grown;
		b->cap = ncap;
	}
	if (take > 0) {
		memcpy(b->buf + b->len, data, take);
		b->len += take;
	}
	b->omitted += len - take;
}

/* The kept bytes, made valid UTF-8 for JSON, plus the truncation note; resets b. */
char *outbuf_finish(OutBuf *b, size_t *len)
{
	char note[96] = "";
	size_t n = 0, nl;
	char *s = utf8_sanitize(b->buf ? b->buf : "", b->len, &n);

	if (b->omitted)
		snprintf(note, sizeof(note), "\n[output truncated: %llu bytes omitted]\n",
			 (unsigned long long)b->omitted);
	nl = strlen(note);
	if (s && nl) {
		char *grown = realloc(s, n + nl + 1);

		if (grown) {
			memcpy(grown + n, note, nl + 1);
			n += nl;
		}
		s = grown ? grown : s;
	}
	free(b->buf);
	*b = (OutBuf){ 0 };
	*len = s ? n : 0;
	return s;
}

static void outbuf_clear(OutBuf *b)
{
	free(b->buf);
	*b = (OutBuf){ 0 };
}

/* ---- interpreters ---- */

void interp_close(Interp *ip)
{
	Loop *l = ip->s->m->loop;

	ip->ctl_src = loop_remove(l, ip->ctl_src);
	ip->out_src = loop_remove(l, ip->out_src);
	ip->err_src = loop_remove(l, ip->err_src);
	ip->pid_src = loop_remove(l, ip->pid_src);
	ip->pidfd = safe_close(ip->pidfd);
	ip->ctl = safe_close(ip->ctl);
	ip->out = safe_close(ip->out);
	ip->err = safe_close(ip->err);
	free(ip->line);
	free(ip->wbuf);
	ip->line = ip->wbuf = NULL;
	ip->line_len = ip->line_cap = ip->wlen = ip->woff = 0;
	ip->state = INTERP_DEAD;
	ip->ns_pid = ip->host_pid = 0;
	ip->reap = false;
	ip->ctl_events = 0;
}

void interp_destroy(Interp *ip)
{
	/* The bridge ends its remote kernel on SIGTERM; sandboxed ones die with the sandbox. */
	if (interp_on_host(ip->kind) && ip->state != INTERP_DEAD)
		host_interp_stop(ip, SIGTERM);
	interp_close(ip);
	outbuf_clear(&ip->out_buf);
	outbuf_clear(&ip->err_buf);
}

static pid_t pidfd_host_pid(int pidfd)
{
	char path[64], buf[1024];
	_cleanup_close_ int fd = -1;
	ssize_t n;
	char *p;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", pidfd);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	p = strstr(buf, "\nPid:");
	return p ? (pid_t)strtol(p + 5, NULL, 10) : -1;
}

int session_send_init(Session *s, struct init_msg *msg, const char *blob, size_t bloblen)
{
	char buf[INIT_MSG_MAX];

	if (sizeof(*msg) + bloblen > sizeof(buf))
		return -EMSGSIZE;
	msg->seq = ++s->seq;
	memcpy(buf, msg, sizeof(*msg));
	if (bloblen)
		memcpy(buf + sizeof(*msg), blob, bloblen);
	if (send(s->sb.ctl_fd, buf, sizeof(*msg) + bloblen, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
		return -errno;
	return 0;
}

static size_t blob_add(char *blob, size_t off, size_t cap, const char *str)
{
	size_t n = strlen(str) + 1;

	if (off + n > cap)
		return cap + 1;
	memcpy(blob + off, str, n);
	return off + n;
}

static int interp_spawn(Session *s, enum interp_kind kind)
{
	static const char *const env[] = {
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"HOME=/workspace",
		"USER=sandbox",
		"LANG=C.UTF-8",
		"TMPDIR=/tmp",
		"PYTHONDONTWRITEBYTECODE=1",
		"MPLBACKEND=Agg",
		"TERM=dumb",
		NULL,
	};
	char *const *argv = s->m->argv[kind];
	struct init_msg msg = { .op = INIT_SPAWN, .tag = (uint32_t)kind };

	if (interp_on_host(kind))
		return host_interp_spawn(s, kind);
	char blob[4096];
	size_t off = 0;
	int r;

	for (int i = 0; argv[i]; i++)
		off = blob_add(blob, off, sizeof(blob), argv[i]);
	off = blob_add(blob, off, sizeof(blob), "");
	for (int i = 0; env[i]; i++)
		off = blob_add(blob, off, sizeof(blob), env[i]);
	off = blob_add(blob, off, sizeof(blob), "");
	if (off > sizeof(blob))
		return -E2BIG;
	r = session_send_init(s, &msg, blob, off);
	if (r < 0)
		return r;
	s->interps[kind].state = INTERP_STARTING;
	return 0;
}

/* The host pids a kill of the session's processes spares: init, and with keep_interps the
 * live interpreters, which are asked to collect their killed children at their next
 * request (zombies hold pids of the limit). How many. */
static size_t kill_keep_list(Session *s, bool keep_interps, pid_t keep[1 + INTERP_KIND_COUNT])
{
	size_t n = 0;

	keep[n++] = s->sb.pid;
	for (int k = 0; keep_interps && k < INTERP_KIND_COUNT; k++)
		if (s->interps[k].state == INTERP_READY && s->interps[k].host_pid > 0) {
			keep[n++] = s->interps[k].host_pid;
			s->interps[k].reap = true;
		}
	return n;
}

/* Kill every process of the session except pid 1 and (when asked) the live interpreters.
 * The cgroup way first: it freezes the tasks, so nothing forks past it; if that fails,
 * ask init, whose INIT_KILLED then ends the wait (returns 1). */
static int kill_processes(Session *s, bool keep_interps)
{
	pid_t keep[1 + INTERP_KIND_COUNT];
	struct init_msg msg = { .op = INIT_KILL };
	size_t n;
	int k, r;

	/* Interpreters on the host are outside the cgroup: they are signalled themselves. */
	for (k = 0; !keep_interps && k < INTERP_KIND_COUNT; k++)
		if (interp_on_host(k) && s->interps[k].state == INTERP_READY)
			host_interp_stop(&s->interps[k], SIGKILL);
	n = kill_keep_list(s, keep_interps, keep);
	r = sandbox_cgroup_kill(s->m->env, s->rid, keep, n);
	if (r == 0)
		return 0;
	log_warn("SESSION_ID=%s cgroup kill failed (%s): asking init", s->id, strerror(-r));
	n = 0;
	for (k = 0; keep_interps && k < INTERP_KIND_COUNT && n < INIT_KEEP_MAX; k++)
		if (s->interps[k].state == INTERP_READY)
			msg.keep[n++] = s->interps[k].ns_pid;
	r = session_send_init(s, &msg, NULL, 0);
	return r < 0 ? r : 1;
}

/* ---- the run ---- */

static void run_free(Run *run)
{
	if (!run)
		return;
	loop_remove(run->s->m->loop, run->timer);
	json_object_put(run->reply);
	free(run->code);
	free(run->cwd);
	free(run->note);
	free(run);
}

static void run_note(Run *run, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void run_note(Run *run, const char *fmt, ...)
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

static const char *timeout_text(const Run *run, char *buf, size_t len)
{
	if (run->timeout_ms % 1000 == 0)
		snprintf(buf, len, "%llus", (unsigned long long)(run->timeout_ms / 1000));
	else
		snprintf(buf, len, "%llums", (unsigned long long)run->timeout_ms);
	return buf;
}

const char *interp_kind_name(enum interp_kind k)
{
	static const char *const names[] = { "python", "bash", "node", "kernel", "endpoint" };

	return k < INTERP_KIND_COUNT ? names[k] : "?";
}

/* How a run ended, as an index into the manager's counters and the log's words. */
static int run_outcome_index(const Run *run)
{
	if (run->timed_out)
		return 2;
	if (run->lost_state)
		return 3;
	return run->return_code == 0 ? 0 : 1;
}

static const char *run_outcome(const Run *run)
{
	static const char *const names[] = { "ok", "error", "timeout", "killed" };

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

static json_object *usage_json(Session *s, const Run *run, bool *oom)
{
	SandboxUsage u = { 0 };
	json_object *o = json_object_new_object();

	read_counters(s, &u, true);
	*oom = u.oom_kills > run->usage0.oom_kills;
	json_object_object_add(
		o, "cpu_ms",
		json_object_new_int64((int64_t)((u.cpu_ns - run->usage0.cpu_ns) / 1000000)));
	json_object_object_add(o, "max_rss_bytes", json_object_new_int64((int64_t)u.memory_peak));
	json_object_object_add(o, "oom_killed", json_object_new_boolean(*oom));
	return o;
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

/* Reply to the worker, log, and forget the run. */
static void run_finish(Run *run)
{
	Session *s = run->s;
	Manager *m = s->m;
	Interp *ip = &s->interps[run->kind];
	uint64_t ms = now_ms() - run->start_ms;
	bool oom = false;
	json_object *o = reply_ok(), *usage = usage_json(s, run, &oom);
	size_t out_len, err_len;
	char *out = outbuf_finish(&ip->out_buf, &out_len);
	char *err = outbuf_finish(&ip->err_buf, &err_len);

	if (oom && !run->timed_out)
		run_note(run, "killed: the sandbox ran out of memory (limit %lld bytes)",
			 (long long)m->cfg->memory_max_bytes);
	/* Otari reports what happened in stderr; the code plane words it in its own outputs. */
	if (run->note && !run->cell)
		err = append_line(err, &err_len, run->note);
	if (run->note)
		json_object_object_add(o, "note", json_object_new_string(run->note));
	if (run->timed_out)
		run->return_code = RC_TIMEOUT;
	json_object_object_add(o, "stdout", json_object_new_string_len(out ?: "", (int)out_len));
	json_object_object_add(o, "stderr", json_object_new_string_len(err ?: "", (int)err_len));
	json_object_object_add(o, "return_code", json_object_new_int(run->return_code));
	json_object_object_add(o, "execution_time_ms", json_object_new_int64((int64_t)ms));
	json_object_object_add(o, "timed_out", json_object_new_boolean(run->timed_out));
	json_object_object_add(o, "state_lost", json_object_new_boolean(run->lost_state));
	json_object_object_add(o, "usage", usage);
	json_object_object_add(o, "execution_count",
			       json_object_new_int64((int64_t)s->execution_count));
	if (run->cell && run->reply) {
		static const char *const keys[] = { "result", "error", "display" };
		json_object *v;

		/* The harness's notebook objects pass through; the worker shapes them. */
		for (size_t i = 0; i < ARRAY_SIZE(keys); i++)
			if (json_object_object_get_ex(run->reply, keys[i], &v))
				json_object_object_add(o, keys[i], json_object_get(v));
	}
	m->runs_by_outcome[run_outcome_index(run)]++;
	free(out);
	free(err);
	s->last_activity_at = now_real();
	journal_note(s, interp_kind_name(run->kind), run->start_real, (int64_t)ms, run->return_code,
		     run_outcome(run));
	/* The session stays busy until the reply, with the files the run made, has gone. */
	run->phase = RUN_SCANNING;
	run->timer = loop_remove(m->loop, run->timer);
	reply_with_produced_files(s, run->conn, o, &run->start_ts, run);
}

void run_ended(Run *run)
{
	Session *s = run->s;
	Interp *ip = &s->interps[run->kind];

	s->run = NULL;
	run_free(run);
	/* The promise of the timeout message: a fresh interpreter is ready for the next call. */
	if (ip->state == INTERP_DEAD && s->sb.ctl_fd >= 0)
		interp_spawn(s, ip->kind);
}

/* Read whatever a pipe holds now, into the run's buffer (or nowhere when idle). */
static void drain_pipe(Interp *ip, int fd, OutBuf *b, unsigned max_reads)
{
	char buf[READ_CHUNK];
	size_t cap = (size_t)ip->s->m->cfg->output_max_bytes;

	for (unsigned i = 0; fd >= 0 && i < max_reads; i++) {
		ssize_t n = read(fd, buf, sizeof(buf));

		if (n <= 0)
			break;
		/* Output between runs belongs to no call: it is dropped. */
		if (ip->s->run && ip->s->run->kind == ip->kind && ip->s->run->phase != RUN_SCANNING)
			outbuf_append(b, buf, (size_t)n, cap);
		/* A short read emptied the pipe: no need for a read to say EAGAIN. */
		if ((size_t)n < sizeof(buf))
			break;
	}
}

static void drain_all(Interp *ip)
{
	drain_pipe(ip, ip->out, &ip->out_buf, UINT32_MAX);
	drain_pipe(ip, ip->err, &ip->err_buf, UINT32_MAX);
}

/* The interpreter answered (or died): finish, or first kill what the run left behind. */
static void run_complete(Run *run)
{
	if (run->timed_out) {
		run->phase = RUN_REAPING;
		run->timer = loop_remove(run->s->m->loop, run->timer);
		if (kill_processes(run->s, true) == 1)
			return; /* init reports INIT_KILLED */
	}
	run_finish(run);
}

/* Every process but init is dead: collect what the run wrote, forget the interpreters. */
static void interps_all_dead(Session *s)
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
	run_note(run, "execution timed out after %s; interpreter restarted, state was lost",
		 timeout_text(run, t, sizeof(t)));
	r = kill_processes(run->s, false);
	if (r == 0) {
		interps_all_dead(run->s);
		run_finish(run);
	} else if (r < 0) {
		/* Neither the cgroup nor init could do it: the sandbox is beyond repair. */
		session_destroy(run->s, "cannot kill");
	}
}

static void on_deadline(Loop *l, void *data)
{
	Run *run = data;
	Interp *ip = &run->s->interps[run->kind];
	char t[32];

	run->timer = NULL;
	run->timed_out = true;
	if (run->phase != RUN_RUNNING || ip->host_pid <= 0) {
		on_grace_expired(l, run);
		return;
	}
	run->phase = RUN_INTERRUPTED;
	run_note(run, "execution timed out after %s and was interrupted; state was kept",
		 timeout_text(run, t, sizeof(t)));
	/* The interpreter's process group: the interpreter and the children it waits on. */
	kill(-ip->host_pid, SIGINT);
	if (loop_add_timer(l, (uint64_t)run->s->m->cfg->interrupt_grace_ms, on_grace_expired, run,
			   &run->timer) < 0)
		on_grace_expired(l, run);
}

/*
 * What the loop watches the control socket for: a reply only while a request waits for
 * one (what user code writes on the socket meanwhile stays in the socket, costing the
 * daemon nothing), writability only while a request is still being sent. Hang-ups are
 * reported whatever the mask.
 */
static void ctl_watch(Interp *ip)
{
	uint32_t want = (ip->expect_id ? EPOLLIN : 0) | (ip->wbuf ? EPOLLOUT : 0);

	if (want != ip->ctl_events && ip->ctl_src &&
	    loop_modify_fd(ip->s->m->loop, ip->ctl_src, want) == 0)
		ip->ctl_events = want;
}

static void interp_flush_request(Interp *ip)
{
	while (ip->woff < ip->wlen) {
		ssize_t n = write(ip->ctl, ip->wbuf + ip->woff, ip->wlen - ip->woff);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				ctl_watch(ip);
				return;
			}
			break; /* the interpreter is gone; its EXITED event finishes the run */
		}
		ip->woff += (size_t)n;
	}
	free(ip->wbuf);
	ip->wbuf = NULL;
	ip->wlen = ip->woff = 0;
	ctl_watch(ip);
}

static int encode_request(const Run *run, const Interp *ip, char **buf, size_t *len)
{
	uint64_t id = ip->expect_id;

	if (run->kind == INTERP_BASH) {
		/* Bash reads "<id>\n<command>" ending in NUL; the other harnesses JSON lines.
		 * Bash collects its dead children itself: it needs no reap flag. */
		size_t n = strlen(run->code);
		char head[24];
		int h = snprintf(head, sizeof(head), "%llu\n", (unsigned long long)id);

		*buf = malloc((size_t)h + n + 1);
		if (!*buf)
			return -ENOMEM;
		memcpy(*buf, head, (size_t)h);
		memcpy(*buf + h, run->code, n + 1);
		*len = (size_t)h + n + 1;
		return 0;
	} else {
		json_object *o = json_object_new_object();
		const char *txt;
		size_t n;

		/* The id comes back in the reply: a reply to an older request is dropped. */
		json_object_object_add(o, "id", json_object_new_int64((int64_t)id));
		json_object_object_add(o, "code", json_object_new_string(run->code));
		json_object_object_add(o, "mode",
				       json_object_new_string(run->cell ? "cell" : "otari"));
		if (run->cwd)
			json_object_object_add(o, "cwd", json_object_new_string(run->cwd));
		if (ip->reap)
			json_object_object_add(o, "reap", json_object_new_boolean(1));
		txt = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN, &n);
		*buf = malloc(n + 1);
		if (*buf) {
			memcpy(*buf, txt, n);
			(*buf)[n] = '\n';
			*len = n + 1;
		}
		json_object_put(o);
		return *buf ? 0 : -ENOMEM;
	}
}

static void run_send(Run *run)
{
	Interp *ip = &run->s->interps[run->kind];
	Loop *l = run->s->m->loop;

	/* Output left from between runs is not this run's. */
	outbuf_clear(&ip->out_buf);
	outbuf_clear(&ip->err_buf);
	ip->expect_id = ++run->s->m->request_seq;
	if (encode_request(run, ip, &ip->wbuf, &ip->wlen) < 0) {
		run_note(run, "internal error: out of memory");
		run->return_code = 1;
		run_finish(run);
		return;
	}
	ip->woff = 0;
	ip->reap = false;
	run->phase = RUN_RUNNING;
	run->timer = loop_remove(l, run->timer);
	if (loop_add_timer(l, run->timeout_ms, on_deadline, run, &run->timer) < 0) {
		run_note(run, "internal error: no timer");
		run->return_code = 1;
		run_finish(run);
		return;
	}
	interp_flush_request(ip);
}

/* ---- interpreter events ---- */

static int reply_return_code(Run *run, const char *line)
{
	if (run->kind == INTERP_BASH) {
		const char *sp = strchr(line, ' ');

		return (int)strtol(sp ? sp + 1 : line, NULL, 10);
	}
	run->reply = json_tokener_parse(line);
	if (run->reply) {
		json_object *rc;

		if (json_object_object_get_ex(run->reply, "return_code", &rc))
			return json_object_get_int(rc);
	}
	return 1;
}

/* The request id a reply names, or 0 when it names none. */
static uint64_t reply_id(const Interp *ip, const char *line)
{
	if (ip->kind == INTERP_BASH) {
		const char *sp = strchr(line, ' ');

		return sp ? strtoull(line, NULL, 10) : 0;
	}
	{
		const char *p = strstr(line, "\"id\":");

		return p ? strtoull(p + 5, NULL, 10) : 0;
	}
}

/* A no-op request: its reply proves the interpreter is up and idle (after a start, it has
 * finished its imports; after a re-adoption, no older request is still running). */
static void interp_probe(Interp *ip)
{
	char buf[64];
	int n;

	ip->expect_id = ++ip->s->m->request_seq;
	if (ip->kind == INTERP_BASH)
		n = snprintf(buf, sizeof(buf), "%llu\n:", (unsigned long long)ip->expect_id) + 1;
	else
		n = snprintf(buf, sizeof(buf), "{\"id\":%llu,\"code\":\"\",\"mode\":\"cell\"}\n",
			     (unsigned long long)ip->expect_id);
	ip->wbuf = malloc((size_t)n);
	if (!ip->wbuf)
		return;
	memcpy(ip->wbuf, buf, (size_t)n);
	ip->wlen = (size_t)n;
	ip->woff = 0;
	ip->probing = true;
	interp_flush_request(ip);
}

static void probe_done(Interp *ip)
{
	Run *run = ip->s->run;

	ip->probing = false;
	ip->expect_id = 0;
	ctl_watch(ip);
	pool_interp_settled(ip->s);
	if (run && run->kind == ip->kind && run->phase == RUN_STARTING && !ip->s->adopting)
		run_send(run);
}

static void interp_on_reply(Interp *ip, char *line)
{
	Run *run = ip->s->run;
	uint64_t id = reply_id(ip, line);

	/* Replies to requests of a daemon that died, or forged by user code, are dropped. */
	if (id && id != ip->expect_id)
		return;
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

static void line_release(Interp *ip)
{
	free(ip->line);
	ip->line = NULL;
	ip->line_len = ip->line_cap = 0;
}

/* Room in the reply buffer for n more bytes and a NUL. */
static bool line_reserve(Interp *ip, size_t n)
{
	size_t cap = ip->line_cap ? ip->line_cap : 4096;
	char *grown;

	if (ip->line_len + n + 1 <= ip->line_cap)
		return true;
	while (cap < ip->line_len + n + 1)
		cap *= 2;
	grown = realloc(ip->line, cap);
	if (!grown)
		return false;
	ip->line = grown;
	ip->line_cap = cap;
	return true;
}

/* Hand every complete line to interp_on_reply; false when that closed ip. */
static bool line_consume(Interp *ip)
{
	char *nl;

	while ((nl = memchr(ip->line, '\n', ip->line_len))) {
		size_t used = (size_t)(nl - ip->line) + 1;

		*nl = '\0';
		interp_on_reply(ip, ip->line);
		/* interp_on_reply may have closed ip (a run finished and respawned). */
		if (!ip->line)
			return false;
		memmove(ip->line, ip->line + used, ip->line_len - used);
		ip->line_len -= used;
	}
	return true;
}

/*
 * The control socket is the harness's, but user code runs in the harness's process and
 * can write on it too: what it carries is untrusted. Only a call that waits for its
 * reply gets bytes kept, at most reply_max_bytes of them, and the buffer goes back to
 * the allocator once consumed. What comes while nothing waits is dropped unread.
 */
static void interp_read_ctl(Interp *ip)
{
	size_t max = (size_t)ip->s->m->cfg->reply_max_bytes;
	char buf[READ_CHUNK];

	for (;;) {
		ssize_t n = read(ip->ctl, buf, sizeof(buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return;
		if (n == 0) {
			/* The interpreter closed its end: wait for its exit status from init. */
			ip->ctl_src = loop_remove(ip->s->m->loop, ip->ctl_src);
			return;
		}
		if (!ip->expect_id)
			continue;
		if (ip->line_len + (size_t)n > max) {
			log_warn("SESSION_ID=%s interpreter reply longer than reply_max_bytes: "
				 "restarting it",
				 ip->s->id);
			kill(ip->host_pid, SIGKILL);
			line_release(ip);
			return;
		}
		if (!line_reserve(ip, (size_t)n))
			return;
		memcpy(ip->line + ip->line_len, buf, (size_t)n);
		ip->line_len += (size_t)n;
		if (!line_consume(ip))
			return;
		/* A reply came and went: what follows it belongs to no call. */
		if (!ip->expect_id)
			ip->line_len = 0;
		if (ip->line_len == 0 && ip->line_cap > LINE_KEEP_BYTES)
			line_release(ip);
	}
}

size_t interp_buffered_bytes(const Interp *ip)
{
	return ip->line_cap + ip->wlen + ip->out_buf.cap + ip->err_buf.cap;
}

static void on_interp_ctl(Loop *l, int fd, uint32_t events, void *data)
{
	Interp *ip = data;

	(void)l;
	(void)fd;
	if ((events & EPOLLOUT) && ip->wbuf)
		interp_flush_request(ip);
	if (events & (EPOLLIN | EPOLLHUP | EPOLLERR))
		interp_read_ctl(ip);
}

static void on_interp_pipe(Loop *l, int fd, uint32_t events, void *data)
{
	Interp *ip = data;
	bool is_out = fd == ip->out;

	if (events & EPOLLIN)
		drain_pipe(ip, fd, is_out ? &ip->out_buf : &ip->err_buf, READS_PER_EVENT);
	else if (events & (EPOLLHUP | EPOLLERR)) {
		/* Every writer is gone; stop watching so the loop does not spin. */
		if (is_out)
			ip->out_src = loop_remove(l, ip->out_src);
		else
			ip->err_src = loop_remove(l, ip->err_src);
	}
}

void interp_attach(Session *s, enum interp_kind kind, pid_t pid, int fds[4])
{
	Manager *m = s->m;
	Interp *ip = &s->interps[kind];

	ip->pidfd = fds[0];
	ip->ctl = fds[1];
	ip->out = fds[2];
	ip->err = fds[3];
	ip->ns_pid = pid;
	ip->host_pid = interp_on_host(kind) ? pid : pidfd_host_pid(ip->pidfd);
	for (int i = 1; i < 4; i++)
		fcntl(fds[i], F_SETFL, fcntl(fds[i], F_GETFL) | O_NONBLOCK);
	if (loop_add_fd(m->loop, ip->ctl, 0, on_interp_ctl, ip, &ip->ctl_src) < 0 ||
	    loop_add_fd(m->loop, ip->out, EPOLLIN, on_interp_pipe, ip, &ip->out_src) < 0 ||
	    loop_add_fd(m->loop, ip->err, EPOLLIN, on_interp_pipe, ip, &ip->err_src) < 0) {
		kill(ip->host_pid, SIGKILL);
		interp_close(ip);
		return;
	}
	ip->state = INTERP_READY;
	log_debug("SESSION_ID=%s %s started, pid %d", s->id, interp_kind_name(ip->kind),
		  ip->host_pid);
	/* The run waits for the probe's answer, so the deadline excludes start-up. */
	interp_probe(ip);
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
}

static int exit_code(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
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
static bool run_clear_leftovers(Run *run)
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
static bool start_oom_killed(Run *run, int status)
{
	SandboxUsage u;

	if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL)
		return false;
	read_counters(run->s, &u, false);
	return u.oom_kills > run->usage0.oom_kills;
}

/* The run's interpreter could not start (why: a sentence): the call fails saying so. */
static void run_start_failed(Run *run, const char *why)
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
	pool_interp_settled(s);
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
		pool_interp_settled(s);
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

static void take_fds(struct msghdr *mh, int *fds, size_t *nfds)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		size_t n;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < n; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (*nfds < 4)
				fds[(*nfds)++] = fd;
			else
				close(fd);
		}
	}
}

void session_on_init_event(Loop *l, int fd, uint32_t events, void *data)
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
				session_destroy(s, "sandbox init exited");
				return;
			}
			return;
		}
		take_fds(&mh, fds, &nfds);
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
				session_adopt_done(s);
			break;
		default: break;
		}
		if (msg.op != INIT_SPAWNED)
			for (size_t i = 0; i < nfds; i++)
				close(fds[i]);
	}
}

/* ---- entry points ---- */

void run_start(Session *s, Conn *c, enum interp_kind kind, const char *code, const char *cwd,
	       bool cell, uint64_t timeout_ms)
{
	Run *run = calloc(1, sizeof(*run));
	Interp *ip = &s->interps[kind];

	if (!run || !(run->code = strdup(code)) || (cwd && !(run->cwd = strdup(cwd)))) {
		if (run)
			free(run->code);
		free(run);
		conn_reply(c, reply_error("internal", "out of memory"), NULL, 0);
		return;
	}
	session_cpu_foreground(s); /* someone waits for it now */
	run->s = s;
	run->conn = c;
	run->kind = kind;
	run->cell = cell;
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
	if (ip->state == INTERP_READY && !ip->probing) {
		run_send(run);
		return;
	}
	/* While init re-sends its interpreters, a dead one may yet turn up: wait. */
	if (ip->state == INTERP_DEAD && !s->adopting && interp_spawn(s, kind) < 0) {
		run_note(run, "the interpreter could not be started");
		run->return_code = 1;
		run_finish(run);
		return;
	}
	/* Start-up has its own bound, so a slow first import does not eat the caller's time,
	 * and a stuck start cannot hang the call; the deadline starts when the code is sent. */
	if (loop_add_timer(s->m->loop,
			   timeout_ms > START_TIMEOUT_MS ? timeout_ms : START_TIMEOUT_MS,
			   on_deadline, run, &run->timer) < 0) {
		run_note(run, "internal error: no timer");
		run->return_code = 1;
		run_finish(run);
	}
}

int session_start_interp(Session *s, enum interp_kind kind)
{
	if (s->interps[kind].state != INTERP_DEAD)
		return 0;
	return interp_spawn(s, kind);
}

void run_retry_start(Run *run)
{
	if (interp_spawn(run->s, run->kind) < 0) {
		run_note(run, "the interpreter could not be started");
		run->return_code = 1;
		run_finish(run);
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
	/* No files or usage: the sandbox is going away. */
	if (run->conn) {
		Interp *ip = &s->interps[run->kind];
		json_object *o = reply_ok();
		size_t out_len, err_len;
		char *out = outbuf_finish(&ip->out_buf, &out_len);
		char *err = outbuf_finish(&ip->err_buf, &err_len);

		err = append_line(err, &err_len, run->note);
		json_object_object_add(o, "stdout",
				       json_object_new_string_len(out ?: "", (int)out_len));
		json_object_object_add(o, "stderr",
				       json_object_new_string_len(err ?: "", (int)err_len));
		json_object_object_add(o, "return_code", json_object_new_int(run->return_code));
		json_object_object_add(o, "execution_time_ms",
				       json_object_new_int64((int64_t)(now_ms() - run->start_ms)));
		json_object_object_add(o, "timed_out", json_object_new_boolean(false));
		json_object_object_add(o, "state_lost", json_object_new_boolean(true));
		json_object_object_add(o, "usage", json_object_new_object());
		json_object_object_add(o, "files", json_object_new_array());
		free(out);
		free(err);
		conn_reply(run->conn, o, NULL, 0);
	}
	s->run = NULL;
	run_free(run);
}

void run_conn_closed(Manager *m, Conn *c)
{
	for (Session *s = m->sessions; s; s = s->next)
		if (s->run && s->run->conn == c)
			s->run->conn = NULL;
}
