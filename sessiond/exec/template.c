/* SPDX-License-Identifier: MIT */
/*
 * The Python templates: interpreters on the host that have imported a harness (the native
 * one; the kernel tier's, with IPython) and preload_modules, and fork sessions'
 * interpreters of that kind into their sandboxes (harness_template.py says how). A
 * session's Python then starts with those imports done, their pages shared with every
 * other session's. While a template is not ready (starting, down, off) and for runtime
 * profiles, init starts the interpreter as before: nothing waits for a template.
 */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "clone.h"
#include "clock.h"
#include "fdpass.h"
#include "json.h"
#include "list.h"
#include "log.h"
#include "run.h"
#include "sandbox_layout.h"

#define TEMPLATE_SCRIPT "harness_template.py"
#define TEMPLATE_MSG_MAX 65536
#define TEMPLATE_CGROUP_FDS 8 /* cgroup.procs files passed: one per v1 hierarchy */
#define TEMPLATE_RETRY_MIN_MS 1000
#define TEMPLATE_RETRY_MAX_MS 60000
#define TEMPLATE_GIVE_UP 5 /* starts in a row that died before ready: off until restart */
#define FAILED_START 127   /* the status an interpreter that could not start is given */

enum template_state {
	TEMPLATE_OFF,	   /* not configured, or given up on */
	TEMPLATE_STARTING, /* its imports under way: init starts interpreters meanwhile */
	TEMPLATE_READY,
	TEMPLATE_DOWN, /* died; starting again after a pause: requests go to init */
};

/*
 * One interpreter asked of the template. The interpreter that waits for it has the same
 * seq (Interp.tmpl_seq) until it is closed: a call whose interpreter no longer waits is
 * dropped, and what the template made for it killed.
 */
typedef struct TemplateCall {
	uint32_t seq;  /* the request's number, never 0 (for its template's kind) */
	int mine[3];   /* sessiond's ends: ctl, stdout and stderr read ends */
	int theirs[3]; /* the interpreter's: ctl, stdout and stderr write ends */
	struct TemplateCall *prev, *next;
} TemplateCall;

struct Template {
	Manager *m;
	enum interp_kind kind; /* INTERP_PYTHON (native) or INTERP_KERNEL */
	const char *name;      /* for the log */
	enum template_state state;
	pid_t pid;
	int pidfd; /* the template's */
	int sock;  /* SOCK_SEQPACKET to the template */
	LoopSource *sock_src, *retry;
	uint32_t next_seq;
	unsigned failures; /* starts in a row that did not reach ready */
	uint64_t forks[2]; /* interpreters it made: [0] in two steps, [1] in one (stats) */
	TemplateCall *calls;
};

static void call_free(TemplateCall *c)
{
	for (int i = 0; i < 3; i++) {
		safe_close(c->mine[i]);
		safe_close(c->theirs[i]);
	}
	free(c);
}

/* The interpreter of kind in s waiting for seq, or NULL. */
static Interp *waiting_in(Session *s, enum interp_kind kind, uint32_t seq)
{
	Interp *ip = &s->interps[kind];

	return ip->tmpl_seq == seq && ip->state == INTERP_STARTING ? ip : NULL;
}

/* The interpreter, in a session or a pool's sandbox, that waits for t's call seq. */
static Interp *waiting_for(const Template *t, uint32_t seq)
{
	Manager *m = t->m;
	Interp *ip = NULL;

	for (Session *s = m->sessions; s && !ip; s = s->next)
		ip = waiting_in(s, t->kind, seq);
	for (int p = 0; p < POOLS_MAX && !ip; p++)
		for (Session *s = m->pool[p]; s && !ip; s = s->next)
			ip = waiting_in(s, t->kind, seq);
	return ip;
}

/* The call is done with (answered, failed or abandoned): unlinked and freed. */
static void call_end(Template *t, TemplateCall *c)
{
	LIST_UNLINK(t->calls, c);
	call_free(c);
}

/* The template cannot make this one: init starts it as before (or, failing that, it ends
 * as an interpreter that could not start). */
static void call_fall_back(Template *t, TemplateCall *c, const char *why)
{
	Interp *ip = waiting_for(t, c->seq);
	Session *s;

	call_end(t, c);
	if (!ip)
		return;
	s = ip->s;
	ip->tmpl_seq = 0;
	log_warn("SESSION_ID=%s the %s could not start its interpreter (%s): init starts it", s->id,
		 t->name, why);
	ip->state = INTERP_DEAD;
	if (interp_spawn_by_init(s, ip->kind) < 0) {
		ip->state = INTERP_STARTING;
		s->m->events->interp_exited(s, ip->kind, ip->ns_pid, W_EXITCODE(FAILED_START, 0));
	}
}

static int send_call(Template *t, TemplateCall *c, Session *s)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * (4 + TEMPLATE_CGROUP_FDS))];
		struct cmsghdr align;
	} cm;
	int fds[4 + TEMPLATE_CGROUP_FDS], n;
	_cleanup_json_ json_object *req = json_object_new_object();
	json_object *env = json_object_new_array();
	const char *txt;
	size_t len;
	struct iovec iov;
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.buf };
	struct cmsghdr *h;
	int r = 0;

	for (const char *const *e = interp_sandbox_env(); *e; e++)
		json_append(env, json_object_new_string(*e));
	json_set(req, "op", json_object_new_string("fork"));
	json_set(req, "seq", json_object_new_int64(c->seq));
	json_set(req, "env", env);
	json_set(req, "cwd", json_object_new_string(SANDBOX_WORKSPACE));
	json_set(req, "lib_dir", json_object_new_string(SANDBOX_LIB_DIR));
	txt = json_render(req, &len);
	if (!txt || json_incomplete(req))
		return -ENOMEM;
	n = sandbox_cgroup_procs_open(t->m->env, s->rid, fds + 4, TEMPLATE_CGROUP_FDS);
	if (n < 0)
		return n;
	fds[0] = s->sb.pidfd;
	memcpy(fds + 1, c->theirs, sizeof(c->theirs));
	iov = (struct iovec){ (void *)txt, len };
	memset(&cm, 0, sizeof(cm));
	mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)(4 + n));
	h = CMSG_FIRSTHDR(&mh);
	h->cmsg_level = SOL_SOCKET;
	h->cmsg_type = SCM_RIGHTS;
	h->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)(4 + n));
	memcpy(CMSG_DATA(h), fds, sizeof(int) * (size_t)(4 + n));
	if (sendmsg(t->sock, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
		r = -errno;
	for (int i = 0; i < n; i++)
		close(fds[4 + i]);
	/* Sent (the template holds copies) or not, these are no longer ours to keep. */
	for (int i = 0; i < 3; i++)
		c->theirs[i] = safe_close(c->theirs[i]);
	return r;
}

/*
 * The template answered with the interpreter's host pid, and with its pidfd when it
 * cloned it in one step (else pidfd is -1): attach it as init's would be.
 */
static void call_started(Template *t, TemplateCall *c, pid_t pid, int pidfd)
{
	Interp *ip = waiting_for(t, c->seq);
	pid_t ns_pid = -1;
	int fds[4];

	t->forks[pidfd >= 0]++;
	/* Made in two steps, it was reparented to us (we are its subreaper) and not reaped
	 * before its exit was looked at: a pidfd of it is of it. */
	if (pidfd < 0)
		pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	/* Our child from birth: one that exited before this answer was read may be reaped
	 * already (by the daemon's SIGCHLD handler, as a child nobody watched), its pidfd
	 * then of no process and its status gone. */
	if (pidfd >= 0 && pidfd_host_pid(pidfd, &ns_pid) != pid)
		ns_pid = -1;
	if (!ip) {
		pidfd_kill(pidfd); /* its session went meanwhile; the daemon reaps it */
		safe_close(pidfd);
		call_end(t, c);
		return;
	}
	if (pidfd < 0 || ns_pid <= 0) {
		pidfd_kill(pidfd);
		safe_close(pidfd);
		call_fall_back(t, c, "its interpreter exited at once");
		return;
	}
	ip->tmpl_seq = 0;
	fcntl(pidfd, F_SETFD, FD_CLOEXEC);
	fds[0] = pidfd;
	memcpy(fds + 1, c->mine, sizeof(c->mine));
	c->mine[0] = c->mine[1] = c->mine[2] = -1;
	call_end(t, c);
	interp_attach_forked(ip->s, ip->kind, ns_pid, pid, fds);
}

static TemplateCall *call_by_seq(Template *t, uint32_t seq)
{
	for (TemplateCall *c = t->calls; c; c = c->next)
		if (c->seq == seq)
			return c;
	return NULL;
}

static int template_launch(Template *t);

static void on_ready(Template *t, json_object *msg)
{
	json_object *loaded, *failed, *direct;

	t->state = TEMPLATE_READY;
	t->failures = 0;
	if (json_object_object_get_ex(msg, "loaded", &loaded))
		log_info("%s ready, preloaded: %s", t->name,
			 json_object_to_json_string_ext(loaded, JSON_C_TO_STRING_PLAIN));
	if (json_object_object_get_ex(msg, "failed", &failed) &&
	    json_object_object_length(failed) > 0)
		log_warn("%s: preload_modules not imported: %s", t->name,
			 json_object_to_json_string_ext(failed, JSON_C_TO_STRING_PLAIN));
	if (json_object_object_get_ex(msg, "direct", &direct) &&
	    json_object_is_type(direct, json_type_string))
		log_info("%s forks each interpreter in two steps: %s", t->name,
			 json_object_get_string(direct));
	t->m->events->template_ready(t->m, t->kind);
}

/* An answer to a fork; pidfd (-1 or the interpreter's) is ours to keep or close. */
static void on_answer(Template *t, json_object *msg, int pidfd)
{
	int64_t seq = 0, pid = 0;
	const char *err = NULL;
	TemplateCall *c;

	if (json_in_int(msg, "seq", &seq) <= 0 || seq <= 0 || seq > UINT32_MAX ||
	    !(c = call_by_seq(t, (uint32_t)seq))) {
		pidfd_kill(pidfd); /* an interpreter nobody asked for; the daemon reaps it */
		safe_close(pidfd);
		return;
	}
	if (json_in_int(msg, "pid", &pid) > 0 && pid > 1 && pid <= INT32_MAX) {
		call_started(t, c, (pid_t)pid, pidfd);
		return;
	}
	safe_close(pidfd);
	if (json_in_string(msg, "error", &err, NULL) <= 0)
		err = "no answer";
	call_fall_back(t, c, err);
}

static void template_down(Template *t, const char *why);

/* The template cannot serve here (its harness does not import: the kernel tier without
 * IPython): off for the daemon's life, and init starts what waited for it. */
static void template_cannot(Template *t, json_object *msg)
{
	const char *why = NULL;

	if (json_in_string(msg, "why", &why, NULL) <= 0)
		why = "no reason given";
	log_info("the %s is off: %s", t->name, why);
	t->sock_src = loop_remove(t->m->loop, t->sock_src);
	t->sock = safe_close(t->sock);
	t->pidfd = safe_close(t->pidfd); /* it exits on its own; the daemon reaps it */
	t->pid = 0;
	t->state = TEMPLATE_OFF;
	while (t->calls)
		call_fall_back(t, t->calls, "the template is off");
}

/* One datagram from the template, and the descriptor that came with it (-1 if none; any
 * more are closed): its length, 0 at its end, or -errno. */
static ssize_t template_recv(int sock, char *buf, size_t len, int *fd)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * 4)];
		struct cmsghdr align;
	} cm;
	struct iovec iov = { buf, len };
	struct msghdr mh = { .msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = cm.buf,
			     .msg_controllen = sizeof(cm.buf) };
	ssize_t n = recvmsg(sock, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	size_t kept = 0;

	*fd = -1;
	if (n < 0)
		return -errno;
	cmsg_take_fds(&mh, fd, &kept, 1);
	return n;
}

static void on_template(Loop *l, int fd, uint32_t events, void *data)
{
	Template *t = data;
	char buf[TEMPLATE_MSG_MAX + 1];
	_cleanup_json_ json_object *msg = NULL;
	json_object *ready = NULL;
	int passed;
	ssize_t n;

	(void)l;
	(void)events;
	n = template_recv(fd, buf, TEMPLATE_MSG_MAX, &passed);
	if (n == -EAGAIN || n == -EINTR)
		return;
	if (n <= 0) {
		safe_close(passed);
		template_down(t, n == 0 ? "it exited" : strerror((int)-n));
		return;
	}
	if (json_in_parse(buf, (size_t)n, 8, &msg, NULL, 0) < 0 ||
	    !json_object_is_type(msg, json_type_object)) {
		safe_close(passed);
		template_down(t, "it sent something that is not a JSON object");
		return;
	}
	if (json_object_object_get_ex(msg, "ready", &ready)) {
		safe_close(passed);
		if (json_object_get_boolean(ready))
			on_ready(t, msg);
		else
			template_cannot(t, msg);
		return;
	}
	on_answer(t, msg, passed);
}

static void on_retry(Loop *l, void *data)
{
	Template *t = data;

	(void)l;
	t->retry = NULL;
	if (template_launch(t) < 0)
		template_down(t, "it could not be started");
}

/* The template is gone: what waited for it goes to init, and it starts again later. */
static void template_down(Template *t, const char *why)
{
	Manager *m = t->m;
	uint64_t pause;

	t->sock_src = loop_remove(m->loop, t->sock_src);
	t->sock = safe_close(t->sock);
	pidfd_kill(t->pidfd); /* reaped by the daemon's SIGCHLD handler */
	t->pidfd = safe_close(t->pidfd);
	t->pid = 0;
	if (t->state != TEMPLATE_READY)
		t->failures++;
	t->state = TEMPLATE_DOWN;
	while (t->calls)
		call_fall_back(t, t->calls, "the template stopped");
	if (t->failures >= TEMPLATE_GIVE_UP) {
		log_err("the %s failed %u times in a row (%s): its interpreters start without it "
			"until the daemon restarts",
			t->name, t->failures, why);
		t->state = TEMPLATE_OFF;
		return;
	}
	pause = TEMPLATE_RETRY_MIN_MS << (t->failures ? t->failures - 1 : 0);
	if (pause > TEMPLATE_RETRY_MAX_MS)
		pause = TEMPLATE_RETRY_MAX_MS;
	log_warn("the %s stopped (%s): starting it again in %llu ms", t->name, why,
		 (unsigned long long)pause);
	loop_add_timer(m->loop, pause, on_retry, t, &t->retry);
}

/* Its files: $state_dir/template, root's alone (matplotlib keeps its font cache there). */
static int template_home(const PaddockConfig *cfg, char *buf, size_t len)
{
	if ((size_t)snprintf(buf, len, "%s/template", cfg->state_dir) >= len)
		return -ENAMETOOLONG;
	if (mkdir(buf, 0700) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

static _Noreturn void template_exec(const Template *t, const char *home, int sock, int bpf)
{
	const PaddockConfig *cfg = t->m->cfg;
	bool kernel = t->kind == INTERP_KERNEL;
	char script[4096], env_lib[4200], env_preload[4200], env_home[4200], env_mpl[4200];
	char env_ipy[4200];
	char *env_direct = cfg->template_direct_fork ? "PADDOCK_TEMPLATE_DIRECT=1" :
						       "PADDOCK_TEMPLATE_DIRECT=0";
	/* As init starts each kind: the native harness without site (-S), the kernel's with. */
	char *const argv_native[] = { cfg->python_bin, "-I", "-S", "-u", script, NULL };
	char *const argv_kernel[] = { cfg->python_bin, "-I", "-u", script, NULL };
	char *const envp[] = {
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"LANG=C.UTF-8",
		kernel ? "MPLBACKEND=module://matplotlib_inline.backend_inline" : "MPLBACKEND=Agg",
		kernel ? "PADDOCK_TEMPLATE_KIND=kernel" : "PADDOCK_TEMPLATE_KIND=native",
		"PYTHONDONTWRITEBYTECODE=1",
		env_lib,
		env_preload,
		env_home,
		env_mpl,
		env_ipy,
		env_direct,
		NULL
	};
	sigset_t none;
	int null = open("/dev/null", O_RDONLY | O_CLOEXEC);

	/* Dies with the daemon: a restarted one starts its own. Its imports yield the CPU to
	 * the sessions (it goes back to the default once ready, before it forks any). */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	setpriority(PRIO_PROCESS, 0, 10);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	snprintf(script, sizeof(script), "%s/" TEMPLATE_SCRIPT, cfg->lib_dir);
	snprintf(env_lib, sizeof(env_lib), "PADDOCK_LIB_DIR=%s", cfg->lib_dir);
	snprintf(env_preload, sizeof(env_preload), "PADDOCK_PRELOAD=%s", cfg->preload_modules);
	snprintf(env_home, sizeof(env_home), "HOME=%s", home);
	snprintf(env_mpl, sizeof(env_mpl), "MPLCONFIGDIR=%s", home);
	snprintf(env_ipy, sizeof(env_ipy), "IPYTHONDIR=%s/ipython", home);
	if (null < 0 || dup2(null, 0) < 0 || dup2(sock, 3) < 0 || dup2(bpf, 4) < 0 ||
	    chdir("/") < 0)
		_exit(127);
	syscall(SYS_close_range, 5, ~0U, 0);
	execve(cfg->python_bin, kernel ? argv_kernel : argv_native, envp);
	_exit(127);
}

static int template_launch(Template *t)
{
	const PaddockConfig *cfg = t->m->cfg;
	char home[4096];
	int sv[2], bpf, r;
	pid_t pid;

	r = template_home(cfg, home, sizeof(home));
	if (r < 0)
		return r;
	bpf = sandbox_env_seccomp_memfd(t->m->env);
	if (bpf < 0)
		return bpf;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		r = -errno;
		close(bpf);
		return r;
	}
	pid = fork();
	if (pid == 0)
		template_exec(t, home, sv[1], bpf);
	r = pid < 0 ? -errno : 0;
	close(sv[1]);
	close(bpf);
	if (r == 0)
		r = loop_add_fd(t->m->loop, sv[0], EPOLLIN, on_template, t, &t->sock_src);
	if (r < 0) {
		close(sv[0]);
		if (pid > 0)
			kill(pid, SIGKILL);
		return r;
	}
	t->sock = sv[0];
	t->pid = pid;
	/* Opened before the loop can reap it: this pidfd is of the template. */
	t->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (t->pidfd >= 0)
		fcntl(t->pidfd, F_SETFD, FD_CLOEXEC);
	t->state = TEMPLATE_STARTING;
	log_info("%s starting (pid %d), preloading %s", t->name, pid,
		 cfg->preload_modules[0] ? cfg->preload_modules : "nothing but the harness");
	return 0;
}

/* Which template serves interpreters of kind: -1 when none does. */
static int template_index(enum interp_kind kind)
{
	return kind == INTERP_PYTHON ? 0 : kind == INTERP_KERNEL ? 1 : -1;
}

int template_start(Manager *m)
{
	static const struct {
		enum interp_kind kind;
		const char *name;
	} kinds[TEMPLATE_KINDS] = {
		{ INTERP_PYTHON, "Python template" },
		{ INTERP_KERNEL, "kernel template" },
	};

	if (!m->cfg->python_template || m->cfg->end_sessions)
		return 0;
	for (size_t i = 0; i < TEMPLATE_KINDS; i++) {
		Template *t = calloc(1, sizeof(*t));
		int r;

		if (!t)
			return -ENOMEM;
		*t = (Template){ .m = m,
				 .kind = kinds[i].kind,
				 .name = kinds[i].name,
				 .sock = -1,
				 .pidfd = -1 };
		m->tmpl[i] = t;
		/* The kernel tier is the code plane's, unless it is pinned to native. */
		if (t->kind == INTERP_KERNEL && strcmp(m->cfg->code_backend, "native") == 0) {
			t->state = TEMPLATE_OFF;
			continue;
		}
		r = template_launch(t);
		if (r < 0) {
			log_warn("the %s cannot start (%s): its interpreters start without it",
				 t->name, strerror(-r));
			t->state = TEMPLATE_OFF;
		}
	}
	return 0;
}

void template_forks(const Manager *m, uint64_t *two_steps, uint64_t *direct)
{
	*two_steps = *direct = 0;
	for (size_t i = 0; i < TEMPLATE_KINDS; i++) {
		if (!m->tmpl[i])
			continue;
		*two_steps += m->tmpl[i]->forks[0];
		*direct += m->tmpl[i]->forks[1];
	}
}

const char *template_state_name(const Manager *m, enum interp_kind kind)
{
	static const char *const names[] = {
		[TEMPLATE_OFF] = "off",
		[TEMPLATE_STARTING] = "starting",
		[TEMPLATE_READY] = "ready",
		[TEMPLATE_DOWN] = "down",
	};
	int i = template_index(kind);
	const Template *t = i >= 0 ? m->tmpl[i] : NULL;

	return t ? names[t->state] : "off";
}

void template_free(Manager *m)
{
	for (size_t i = 0; i < TEMPLATE_KINDS; i++) {
		Template *t = m->tmpl[i];

		if (!t)
			continue;
		while (t->calls)
			call_end(t, t->calls);
		t->retry = loop_remove(m->loop, t->retry);
		t->sock_src = loop_remove(m->loop, t->sock_src);
		safe_close(t->sock);
		pidfd_kill(t->pidfd);
		safe_close(t->pidfd);
		free(t);
		m->tmpl[i] = NULL;
	}
}

int template_spawn(Session *s, enum interp_kind kind)
{
	int i = template_index(kind);
	Template *t = i >= 0 ? s->m->tmpl[i] : NULL;
	TemplateCall *c;
	int ctl[2], out[2], err[2], r;

	if (!t || s->runtime != 0 || t->state != TEMPLATE_READY)
		return -EOPNOTSUPP;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	*c = (TemplateCall){ .mine = { -1, -1, -1 }, .theirs = { -1, -1, -1 } };
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ctl) < 0) {
		r = -errno;
		call_free(c);
		return r;
	}
	c->mine[0] = ctl[0];
	c->theirs[0] = ctl[1];
	if (pipe2(out, O_CLOEXEC) < 0 || (c->mine[1] = out[0], c->theirs[1] = out[1], 0) ||
	    pipe2(err, O_CLOEXEC) < 0) {
		r = -errno;
		call_free(c);
		return r;
	}
	c->mine[2] = err[0];
	c->theirs[2] = err[1];
	c->seq = ++t->next_seq ?: ++t->next_seq;
	LIST_PUSH(t->calls, c);
	if ((r = send_call(t, c, s)) < 0) {
		call_end(t, c);
		return r;
	}
	s->interps[kind].tmpl_seq = c->seq;
	s->interps[kind].state = INTERP_STARTING;
	return 0;
}
