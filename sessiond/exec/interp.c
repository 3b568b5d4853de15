/* SPDX-License-Identifier: MIT */
/*
 * An interpreter in a session: started through init (or on the host), its control socket
 * and output pipes on the loop, its requests written and its reply lines read, killed.
 * What its replies and its exit mean to the run is exec/events.c's, told through
 * m->events.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "clone.h"
#include "log.h"
#include "proto.h"
#include "run.h"
#include "sandbox_layout.h"
#include "random.h"

#define READ_CHUNK 65536
#define READS_PER_EVENT 16    /* bound one stream's share of a loop iteration */
#define CTL_READS_PER_EVENT 4 /* the same for the control socket, whose lines cost more */
/* A reply buffer larger than this goes back to the allocator once it is consumed. */
#define LINE_KEEP_BYTES (64u << 10)

const char *interp_kind_name(enum interp_kind k)
{
	static const char *const names[] = { "python", "bash", "node", "kernel", "endpoint" };

	return k < INTERP_KIND_COUNT ? names[k] : "?";
}

void interp_close(Interp *ip)
{
	Loop *l = ip->s->m->loop;

	ip->tmpl_seq = 0; /* an answer of the template that comes is dropped */
	ip->forked = false;
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

/* The last number of an "NSpid:" line: the innermost pid namespace's. */
static pid_t innermost_pid(const char *p)
{
	pid_t last = -1;
	char *end;

	for (;;) {
		long v = strtol(p, &end, 10);

		if (end == p)
			return last;
		last = (pid_t)v;
		p = end;
	}
}

pid_t pidfd_host_pid(int pidfd, pid_t *ns_pid)
{
	char path[64], buf[1024];
	_cleanup_close_ int fd = -1;
	ssize_t n;
	char *p;

	if (ns_pid)
		*ns_pid = -1;
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", pidfd);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	if (ns_pid && (p = strstr(buf, "\nNSpid:")))
		*ns_pid = innermost_pid(p + 7);
	p = strstr(buf, "\nPid:");
	return p ? (pid_t)strtol(p + 5, NULL, 10) : -1;
}

int init_send(Session *s, struct init_msg *msg, const char *blob, size_t bloblen)
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

/* The host pids a kill of the session's processes spares: init, and with keep_interps the
 * live interpreters, which are asked to collect their killed children at their next
 * request (zombies hold pids of the limit). How many. */
size_t kill_keep_list(Session *s, bool keep_interps, pid_t keep[1 + INTERP_KIND_COUNT])
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
int kill_processes(Session *s, bool keep_interps)
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
	r = init_send(s, &msg, NULL, 0);
	return r < 0 ? r : 1;
}

/* Read whatever a pipe holds now, into the run's buffer (or nowhere when idle). */
static void drain_pipe(Interp *ip, int fd, OutBuf *b, unsigned max_reads)
{
	char buf[READ_CHUNK];
	size_t cap = (size_t)ip->s->m->cfg->output_max_bytes;
	Run *run = ip->s->run;

	for (unsigned i = 0; fd >= 0 && i < max_reads; i++) {
		ssize_t n = read(fd, buf, sizeof(buf));

		if (n <= 0)
			break;
		/* Output between runs belongs to no call: it is dropped. */
		if (run && run->kind == ip->kind && run->phase != RUN_SCANNING) {
			size_t kept = outbuf_append(b, buf, (size_t)n, cap);

			/* What the reply will hold, and no more, is streamed (run_send drops
			 * what comes while the interpreter starts). */
			if (kept && run->phase != RUN_STARTING)
				run_stream(run,
					   b == &ip->out_buf ? PROTO_STREAM_STDOUT :
							       PROTO_STREAM_STDERR,
					   buf, kept);
		}
		/* A short read emptied the pipe: no need for a read to say EAGAIN. */
		if ((size_t)n < sizeof(buf))
			break;
	}
}

void drain_all(Interp *ip)
{
	drain_pipe(ip, ip->out, &ip->out_buf, UINT32_MAX);
	drain_pipe(ip, ip->err, &ip->err_buf, UINT32_MAX);
}

/*
 * What the loop watches the control socket for: writability only while a request is still
 * being sent; readability while a request waits for its reply, and after it until bytes
 * come that nothing waits for (ctl_mute), so that a call costs no epoll_ctl. What user
 * code writes on the socket between calls thus costs the daemon one read, then stays in
 * the socket. Hang-ups are reported whatever the mask.
 */
void ctl_watch(Interp *ip)
{
	uint32_t keep = ip->ctl_events & EPOLLIN;
	uint32_t want = (ip->expect_id ? EPOLLIN : keep) | (ip->wbuf ? EPOLLOUT : 0);

	if (want != ip->ctl_events && ip->ctl_src &&
	    loop_modify_fd(ip->s->m->loop, ip->ctl_src, want) == 0)
		ip->ctl_events = want;
}

/* Bytes came that no request waits for: stop reading the socket until the next request. */
static void ctl_mute(Interp *ip)
{
	uint32_t want = ip->wbuf ? EPOLLOUT : 0;

	if (ip->ctl_src && loop_modify_fd(ip->s->m->loop, ip->ctl_src, want) == 0)
		ip->ctl_events = want;
}

void interp_flush_request(Interp *ip)
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

	ip->expect_id = interp_request_id();
	if (ip->kind == INTERP_BASH)
		n = snprintf(buf, sizeof(buf), "\001%llu\n:", (unsigned long long)ip->expect_id) +
		    1;
	else
		n = snprintf(buf, sizeof(buf), "{\"id\":%llu,\"code\":\"\",\"mode\":\"cell\"}\n",
			     (unsigned long long)ip->expect_id);
	ip->probing = true;
	interp_queue_request(ip, buf, (size_t)n);
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

void run_stream(Run *run, uint8_t stream, const char *data, size_t len)
{
	/* A worker that does not keep up gets the rest in the reply alone. */
	if (run->stream && run->conn)
		conn_send_data(run->conn, stream, data, len,
			       (size_t)run->s->m->cfg->output_max_bytes);
}

void interp_forward_event(Interp *ip, const char *line)
{
	Run *run = ip->s->run;
	size_t len = strlen(line);

	if (!run || !run->stream || run->kind != ip->kind || run->phase == RUN_SCANNING ||
	    run->streamed_events + len > (size_t)ip->s->m->cfg->reply_max_bytes)
		return;
	run->streamed_events += len;
	/* What the program printed before it published this goes first. */
	drain_all(ip);
	run_stream(run, PROTO_STREAM_DISPLAY, line, len);
}

/* A line for another request (a daemon's that died, or forged by user code) is dropped;
 * the others are the run's (m->events): its reply, or an event. */
static void interp_on_line(Interp *ip, char *line)
{
	uint64_t id = reply_id(ip, line);

	if (id && id != ip->expect_id)
		return;
	ip->s->m->events->interp_replied(ip, line);
}

/* Hand every complete line to interp_on_line, then move what is left to the front once
 * (a flood of short lines costs one move per read, not one per line); false when that
 * closed ip. */
static bool line_consume(Interp *ip)
{
	size_t off = 0;
	char *nl;

	while ((nl = memchr(ip->line + off, '\n', ip->line_len - off))) {
		size_t end = (size_t)(nl - ip->line) + 1;

		*nl = '\0';
		interp_on_line(ip, ip->line + off);
		/* The run may have closed ip (it finished and respawned). */
		if (!ip->line)
			return false;
		off = end;
		/* A reply came and went: what follows it belongs to no call. */
		if (!ip->expect_id)
			off = ip->line_len;
	}
	memmove(ip->line, ip->line + off, ip->line_len - off);
	ip->line_len -= off;
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

	/* Bounded: a harness that floods its channel gets a small share of a loop turn, and
	 * everyone else's timers and sockets theirs. */
	for (unsigned i = 0; i < CTL_READS_PER_EVENT; i++) {
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
		if (!ip->expect_id) {
			ctl_mute(ip);
			return;
		}
		if (ip->line_len + (size_t)n > max) {
			log_warn("SESSION_ID=%s interpreter reply longer than reply_max_bytes: "
				 "restarting it",
				 ip->s->id);
			pidfd_kill(ip->pidfd);
			line_release(ip);
			return;
		}
		if (!line_reserve(ip, (size_t)n))
			return;
		memcpy(ip->line + ip->line_len, buf, (size_t)n);
		ip->line_len += (size_t)n;
		if (!line_consume(ip))
			return;
		if (ip->line_len == 0 && ip->line_cap > LINE_KEEP_BYTES)
			line_release(ip);
		/* A short read emptied the socket: no need for a read to say EAGAIN. */
		if ((size_t)n < sizeof(buf))
			return;
	}
}

uint64_t interp_request_id(void)
{
	uint64_t id = 0;

	/* Random, not counted: a session's code sees its own ids, and must learn nothing of
	 * how busy the node is from them, nor guess the next. */
	while (id == 0)
		if (random_bytes(&id, sizeof(id)) < 0)
			id = (uint64_t)now_ms();
	return id & ((UINT64_C(1) << 53) - 1);
}

/* Drop queued lines not yet begun (answers a harness did not read), keeping the rest of
 * one being written, so that what follows starts on a line of its own. */
static void interp_trim_queue(Interp *ip)
{
	char *nl;

	if (!ip->wbuf)
		return;
	nl = ip->woff ? memchr(ip->wbuf + ip->woff - 1, '\n', ip->wlen - ip->woff + 1) : NULL;
	ip->wlen = nl ? (size_t)(nl - ip->wbuf) + 1 : ip->woff;
}

void interp_queue_request(Interp *ip, const char *buf, size_t len)
{
	interp_trim_queue(ip);
	interp_send_line(ip, buf, len);
}

void interp_send_line(Interp *ip, const char *line, size_t len)
{
	char *grown = realloc(ip->wbuf, ip->wlen + len);

	if (!grown)
		return;
	memcpy(grown + ip->wlen, line, len);
	ip->wbuf = grown;
	ip->wlen += len;
	interp_flush_request(ip);
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

/* interp_attach() with both pids known. */
static void attach_pids(Session *s, enum interp_kind kind, pid_t ns_pid, pid_t host_pid, int fds[4])
{
	Manager *m = s->m;
	Interp *ip = &s->interps[kind];

	ip->pidfd = fds[0];
	ip->ctl = fds[1];
	ip->out = fds[2];
	ip->err = fds[3];
	ip->ns_pid = ns_pid;
	ip->host_pid = host_pid;
	for (int i = 1; i < 4; i++)
		fcntl(fds[i], F_SETFL, fcntl(fds[i], F_GETFL) | O_NONBLOCK);
	if (loop_add_fd(m->loop, ip->ctl, 0, on_interp_ctl, ip, &ip->ctl_src) < 0 ||
	    loop_add_fd(m->loop, ip->out, EPOLLIN, on_interp_pipe, ip, &ip->out_src) < 0 ||
	    loop_add_fd(m->loop, ip->err, EPOLLIN, on_interp_pipe, ip, &ip->err_src) < 0) {
		pidfd_kill(ip->pidfd);
		interp_close(ip);
		return;
	}
	ip->state = INTERP_READY;
	log_debug("SESSION_ID=%s %s started, pid %d", s->id, interp_kind_name(ip->kind),
		  ip->host_pid);
	/* The run waits for the probe's answer, so the deadline excludes start-up. */
	interp_probe(ip);
}

void interp_attach(Session *s, enum interp_kind kind, pid_t pid, int fds[4])
{
	attach_pids(s, kind, pid, interp_on_host(kind) ? pid : pidfd_host_pid(fds[0], NULL), fds);
}

static void on_host_exit(Loop *l, int fd, uint32_t events, void *data)
{
	Interp *ip = data;
	siginfo_t si = { 0 };
	int status = 0;

	(void)l;
	(void)events;
	ip->pid_src = loop_remove(ip->s->m->loop, ip->pid_src);
	/* The daemon's SIGCHLD reaper may have taken the status first: then it is unknown. */
	if (waitid(P_PIDFD, (id_t)fd, &si, WEXITED | WNOHANG) == 0 && si.si_pid > 0)
		status = si.si_code == CLD_EXITED ? W_EXITCODE(si.si_status, 0) : si.si_status;
	ip->s->m->events->interp_exited(ip->s, ip->kind, ip->ns_pid, status);
}

const char *const *interp_sandbox_env(void)
{
	static const char *const env[] = {
		"PATH=" SANDBOX_PATH,
		"HOME=" SANDBOX_WORKSPACE,
		"USER=" SANDBOX_USER,
		"LANG=C.UTF-8",
		"TMPDIR=/tmp",
		"PYTHONDONTWRITEBYTECODE=1",
		"MPLBACKEND=Agg",
		"TERM=dumb",
		NULL,
	};

	return env;
}

/* Ask init to start it: INIT_SPAWNED attaches it. */
int interp_spawn_by_init(Session *s, enum interp_kind kind)
{
	const char *const *env = interp_sandbox_env();
	char *const *argv = s->m->argv[kind];
	struct init_msg msg = { .op = INIT_SPAWN, .tag = (uint32_t)kind };
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
	r = init_send(s, &msg, blob, off);
	if (r < 0)
		return r;
	s->interps[kind].state = INTERP_STARTING;
	return 0;
}

void interp_watch_exit(Interp *ip)
{
	int r = loop_add_fd(ip->s->m->loop, ip->pidfd, EPOLLIN, on_host_exit, ip, &ip->pid_src);

	if (r < 0)
		log_warn("SESSION_ID=%s cannot watch the %s interpreter's exit: %s", ip->s->id,
			 interp_kind_name(ip->kind), strerror(-r));
}

/* Tell init about an interpreter it did not start, with copies of our ends, so that a
 * restarted daemon gets it back from init like the others. */
static void init_adopt(Session *s, enum interp_kind kind, pid_t ns_pid, const int fds[4])
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * 3)];
		struct cmsghdr align;
	} cm;
	struct init_msg msg = { .op = INIT_ADOPT, .pid = ns_pid, .tag = (uint32_t)kind };
	struct iovec iov = { &msg, sizeof(msg) };
	struct msghdr mh = { .msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = cm.buf,
			     .msg_controllen = sizeof(cm.buf) };
	struct cmsghdr *h;

	msg.seq = ++s->seq;
	memset(&cm, 0, sizeof(cm));
	h = CMSG_FIRSTHDR(&mh);
	h->cmsg_level = SOL_SOCKET;
	h->cmsg_type = SCM_RIGHTS;
	h->cmsg_len = CMSG_LEN(sizeof(int) * 3);
	memcpy(CMSG_DATA(h), fds + 1, sizeof(int) * 3);
	if (sendmsg(s->sb.ctl_fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
		log_warn("SESSION_ID=%s init does not keep the %s interpreter (%m): it would not "
			 "survive a restart of the daemon",
			 s->id, interp_kind_name(kind));
}

void interp_attach_forked(Session *s, enum interp_kind kind, pid_t ns_pid, pid_t host_pid,
			  int fds[4])
{
	Interp *ip = &s->interps[kind];

	init_adopt(s, kind, ns_pid, fds);
	attach_pids(s, kind, ns_pid, host_pid, fds);
	if (ip->state != INTERP_DEAD) {
		ip->forked = true;
		interp_watch_exit(ip);
	}
}

/* The interpreter of s whose host pid is pid and whose exit its pidfd reports, or NULL. */
static Interp *watched_interp(Session *s, pid_t pid)
{
	for (int k = 0; k < INTERP_KIND_COUNT; k++)
		if (s->interps[k].pid_src && s->interps[k].host_pid == pid)
			return &s->interps[k];
	return NULL;
}

void interp_child_exited(Manager *m, pid_t host_pid)
{
	Interp *ip = NULL;

	for (Session *s = m->sessions; s && !ip; s = s->next)
		ip = watched_interp(s, host_pid);
	for (int p = 0; p < POOLS_MAX && !ip; p++)
		for (Session *s = m->pool[p]; s && !ip; s = s->next)
			ip = watched_interp(s, host_pid);
	if (ip)
		on_host_exit(m->loop, ip->pidfd, EPOLLIN, ip);
}
