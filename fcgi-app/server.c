/* SPDX-License-Identifier: MIT */
/* Worker threads: wait for work or shutdown, accept with libfcgi, route, answer, log. */
#include "server.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "clock.h"
#include "code/code.h"
#include "http/metrics.h"
#include "log.h"
#include "mcp/mcp.h"
#include "otari/otari.h"

/* The APIs served, tried in order. The code-interpreter plane joins here. */
static const RouteTable *const apis[] = { &otari_routes, &otari_open_routes, &metrics_routes,
					  &code_routes, &mcp_routes };
/* What anyone may ask, before authentication: the health check. */
static const RouteTable *const open_apis[] = { &otari_open_routes };

/* Authentication and tenancy; answers and returns false when the request may not go on. */
static bool admit(ReqCtx *rq)
{
	const App *app = rq->app;
	const char *tenant;

	if (!auth_check(app->tokens, http_param(&rq->http, "HTTP_AUTHORIZATION"))) {
		http_error(&rq->http, 401, "WWW-Authenticate: Bearer\r\n",
			   "a valid bearer token is required");
		return false;
	}
	tenant = http_param(&rq->http, app->tenant_param);
	if (tenant && *tenant) {
		if (!auth_tenant_valid(tenant)) {
			http_error(&rq->http, 400, NULL,
				   "the tenant header must be 1 to %d printable ASCII characters",
				   TENANT_MAX);
			return false;
		}
		rq->tenant = tenant;
	} else if (app->cfg->require_tenant) {
		http_error(&rq->http, 401, NULL, "the %s header is required",
			   app->cfg->tenant_header);
		return false;
	}
	return true;
}

static void dispatch(ReqCtx *rq)
{
	char allow[80] = "";

	for (size_t i = 0; i < ARRAY_SIZE(open_apis); i++)
		if (route_match(open_apis[i], rq->http.method, rq->http.path, &rq->match) ==
		    ROUTE_FOUND) {
			rq->match.route->handler(rq);
			return;
		}
	if (!admit(rq))
		return;
	for (size_t i = 0; i < ARRAY_SIZE(apis); i++) {
		switch (route_match(apis[i], rq->http.method, rq->http.path, &rq->match)) {
		case ROUTE_FOUND: rq->match.route->handler(rq); return;
		case ROUTE_BAD_ID:
			/* Nothing that is not an id can name a session: no need to ask. */
			http_error(&rq->http, 404, NULL, "unknown session: not a valid session id");
			return;
		case ROUTE_BAD_METHOD:
			snprintf(allow, sizeof(allow), "Allow: %s\r\n", rq->match.allow);
			break;
		case ROUTE_NOT_FOUND: break;
		}
	}
	if (allow[0])
		http_error(&rq->http, 405, allow, "the method is not allowed on this path");
	else
		http_error(&rq->http, 404, NULL, "no such route");
}

/* Serve one request; its log line, when the level wants one, is left in *line (true). */
static bool serve(Worker *w, LogLine *line)
{
	ReqCtx rq = { .app = w->app, .w = w };
	uint64_t start = now_ms();
	int64_t took;

	if (http_init(&rq.http, &w->req) < 0) {
		http_error(&rq.http, 500, NULL, "out of memory");
	} else {
		dispatch(&rq);
		if (!rq.http.status) {
			log_err("handler sent no response REQUEST_ID=%s", rq.http.request_id);
			http_error(&rq.http, 500, NULL, "the request was not answered");
		}
	}
	http_finish(&rq.http);
	took = (int64_t)(now_ms() - start);
	metrics_observe(rq.match.route ? rq.match.route->name : NULL, rq.http.status, took);
	/* One line per request; never bodies, code or tokens. */
	bool logged = log_line_format(
		line, LOG_LVL_INFO, "%s %s %d %" PRId64 "ms%s%s REQUEST_ID=%s", rq.http.method,
		rq.match.route ? rq.match.route->name : "-", rq.http.status, took,
		rq.match.id[0] ? " SESSION_ID=" : "", rq.match.id, rq.http.request_id);

	http_done(&rq.http);
	return logged;
}

/* Block on a kept-alive connection from nginx until its next request or shutdown. */
static bool wait_on_kept(Worker *w)
{
	struct pollfd p[2] = {
		{ .fd = w->req.ipcFd, .events = POLLIN },
		{ .fd = w->app->stop_fd, .events = POLLIN },
	};

	for (;;) {
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			log_err("worker %u: poll: %m", w->id);
			return false;
		}
		if (p[1].revents)
			return false;
		if (p[0].revents)
			return true;
	}
}

/*
 * Block until a new connection waits on the listener or shutdown begins. Every idle
 * thread waits here, hundreds of them by default: each has the listener in its own
 * epoll with EPOLLEXCLUSIVE, so a connection wakes one of them, not the whole pool (a
 * poll() on the listener woke every idle thread, and all but one went back to sleep).
 */
static bool wait_on_listener(Worker *w)
{
	struct epoll_event ev[2];

	for (;;) {
		int n = epoll_wait(w->listen_ep, ev, ARRAY_SIZE(ev), -1);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			log_err("worker %u: epoll_wait: %m", w->id);
			return false;
		}
		for (int i = 0; i < n; i++)
			if (ev[i].data.fd == w->app->stop_fd)
				return false;
		if (n > 0)
			return true;
	}
}

/* Block until there is work (a new connection, or the next request on a kept one) or
 * shutdown begins. Returns true for work. */
static bool wait_for_work(Worker *w)
{
	return w->req.ipcFd >= 0 ? wait_on_kept(w) : wait_on_listener(w);
}

/* The epoll wait_on_listener() blocks in: the listener, woken one thread at a time,
 * and stop_fd, which wakes every thread. */
static int listen_ep_open(const App *app)
{
	struct epoll_event lev = { .events = EPOLLIN | EPOLLEXCLUSIVE, .data.fd = app->listen_fd };
	struct epoll_event sev = { .events = EPOLLIN, .data.fd = app->stop_fd };
	int ep = epoll_create1(EPOLL_CLOEXEC);

	if (ep < 0)
		return -errno;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, app->listen_fd, &lev) < 0 ||
	    epoll_ctl(ep, EPOLL_CTL_ADD, app->stop_fd, &sev) < 0) {
		int r = -errno;

		close(ep);
		return r;
	}
	return ep;
}

/* After an accept error that is not a lost race: do not spin, but wake for shutdown. */
static void back_off(Worker *w)
{
	struct pollfd p = { .fd = w->app->stop_fd, .events = POLLIN };

	poll(&p, 1, 100);
}

/*
 * An accept that failed (out of descriptors, most of all). The listener stays readable,
 * so every idle thread fails the same way every back_off(): one line a second says so
 * for all of them, with how many it stands for, rather than thousands a second.
 */
static void accept_failed(Worker *w, int r)
{
	static _Atomic uint64_t logged_ms;
	static _Atomic uint64_t unlogged;
	/* Read before the clock: a line another thread logs meanwhile is then never "later"
	 * than now, which would wrap the difference below. */
	uint64_t last = atomic_load(&logged_ms), now = now_ms();

	if (now - last >= 1000 && atomic_compare_exchange_strong(&logged_ms, &last, now))
		log_warn("accept: %s (%" PRIu64 " more failed since the last line)",
			 r > -4096 ? strerror(-r) : "libfcgi error", atomic_exchange(&unlogged, 0));
	else
		atomic_fetch_add(&unlogged, 1);
	back_off(w);
}

/*
 * libfcgi reads a request's first records with blocking reads and no deadline: a peer
 * that sends part of a record and stops would hold the thread, and shutdown with it.
 * At shutdown, a thread still reading is sent SIGNAL_UNBLOCK, whose handler does nothing
 * and is installed without SA_RESTART: the read fails with EINTR, libfcgi drops that
 * connection, and the thread sees stop_fd. The lock makes sure the signal only ever
 * lands while the thread reads, never in a request it is serving.
 */
#define SIGNAL_UNBLOCK SIGUSR1

static void on_unblock(int sig)
{
	(void)sig;
}

static void reading_set(Worker *w, bool reading)
{
	pthread_mutex_lock(&w->reading_lock);
	w->reading = reading;
	pthread_mutex_unlock(&w->reading_lock);
}

/* Interrupt w's read of a request, if it is in one. */
static void reading_interrupt(Worker *w)
{
	pthread_mutex_lock(&w->reading_lock);
	if (w->reading)
		pthread_kill(w->thread, SIGNAL_UNBLOCK);
	pthread_mutex_unlock(&w->reading_lock);
}

static int unblock_signal_install(void)
{
	struct sigaction sa = { .sa_handler = on_unblock }; /* no SA_RESTART */

	sigemptyset(&sa.sa_mask);
	return sigaction(SIGNAL_UNBLOCK, &sa, NULL) < 0 ? -errno : 0;
}

/* Join w's thread, interrupting its read of a request every 100 ms until it ends (a
 * request it is serving is left to finish). */
static void worker_join(Worker *w)
{
	for (;;) {
		struct timespec t;

		clock_gettime(CLOCK_REALTIME, &t);
		t.tv_nsec += 100 * 1000000L;
		if (t.tv_nsec >= 1000000000L) {
			t.tv_sec++;
			t.tv_nsec -= 1000000000L;
		}
		if (pthread_timedjoin_np(w->thread, NULL, &t) != ETIMEDOUT)
			return;
		reading_interrupt(w);
	}
}

static void *worker_main(void *arg)
{
	Worker *w = arg;

	while (wait_for_work(w)) {
		/* The listener is non-blocking: a connection another thread took is -EAGAIN. */
		reading_set(w, true);
		int r = FCGX_Accept_r(&w->req);

		reading_set(w, false);

		if (r < 0) {
			if (r != -EAGAIN && r != -EWOULDBLOCK && r != -EINTR)
				accept_failed(w, r);
			continue;
		}
		/* libfcgi accepts without SOCK_CLOEXEC: the one program the worker starts
		 * (probe.c) closes every descriptor above stderr as it starts instead. */
		LogLine line;
		bool logged = serve(w, &line);

		/* The answer's last bytes go to nginx here; the line describing it after. */
		FCGX_Finish_r(&w->req);
		worker_request_done(w);
		if (logged)
			log_line_write(&line);
	}
	if (w->req.ipcFd >= 0)
		FCGX_Free(&w->req, 1);
	return NULL;
}

/* Wait for SIGTERM or SIGINT (blocked by the caller in every thread). */
static void wait_for_stop(void)
{
	sigset_t set;
	int sig;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	while (sigwait(&set, &sig) != 0)
		;
	log_info("signal %d: finishing requests in flight, then exiting", sig);
}

/*
 * A thread serves one request at a time, and a call holds it until sessiond answers: a
 * sleeping call holds it for as long as the code sleeps. A kept-alive connection from
 * nginx holds one too while idle (the thread waits on it for the next request). Unless
 * told otherwise, every session may have a call in flight and THREADS_SPARE threads
 * remain for nginx's idle connections and everything else (creates, file transfers,
 * other sessions' short calls). Fewer, and calls in as many sessions as there are
 * threads keep every other request waiting in the socket's backlog.
 */
#define THREADS_SPARE 64
#define THREADS_AUTO_MAX 1024

static size_t worker_threads(const PaddockConfig *cfg)
{
	int64_t n = cfg->max_sessions + THREADS_SPARE;

	if (cfg->threads > 0) {
		if (cfg->threads <= cfg->max_sessions)
			log_warn("threads = %" PRId64 " and max_sessions = %" PRId64
				 ": calls in flight in %" PRId64
				 " sessions will keep every other request waiting",
				 cfg->threads, cfg->max_sessions, cfg->threads);
		return (size_t)cfg->threads;
	}
	return (size_t)(n < THREADS_AUTO_MAX ? n : THREADS_AUTO_MAX);
}

/*
 * What a thread may hold at once: its epoll, its connection from nginx, its socket to
 * sessiond, and two files for PutFile (the one sessiond passes to write into, and the
 * file it replaced, closed once the answer is out). FDS_SHARED is the rest of the
 * process: the listener, stop_fd, the log, the libraries'.
 */
#define FDS_PER_THREAD 5
#define FDS_SHARED 64

/*
 * Raise the soft descriptor limit as far as the threads need, up to the hard one, then fit
 * the threads under it. systemd's default soft limit, 1024, is what the default thread
 * count needs once max_sessions passes about 130; a worker short of descriptors fails
 * accepts, or fails to start. Past the hard limit, fewer threads serve, and the warning
 * says what to raise. Descriptors above 1023 are safe: nothing here uses select(), and
 * libfcgi waits with poll() (since 2.4.1; distributions patched 2.4.0 the same way for
 * CVE-2012-6687).
 */
static size_t threads_within_nofile(size_t n)
{
	rlim_t need = FDS_SHARED + (rlim_t)n * FDS_PER_THREAD;
	struct rlimit rl;
	size_t fit;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return n;
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need) {
		rlim_t soft = rl.rlim_cur;

		rl.rlim_cur =
			rl.rlim_max == RLIM_INFINITY || rl.rlim_max > need ? need : rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
			rl.rlim_cur = soft;
	}
	if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need)
		return n;
	fit = rl.rlim_cur > FDS_SHARED + FDS_PER_THREAD ?
		      (size_t)(rl.rlim_cur - FDS_SHARED) / FDS_PER_THREAD :
		      1;
	log_warn("%zu threads need %llu descriptors and the limit is %llu: serving with %zu "
		 "threads (raise LimitNOFILE, or set threads)",
		 n, (unsigned long long)need, (unsigned long long)rl.rlim_cur, fit);
	return fit;
}

int server_run(App *app)
{
	const PaddockConfig *cfg = app->cfg;
	size_t n = threads_within_nofile(worker_threads(cfg)), started = 0;
	_cleanup_free_ Worker *workers = calloc(n, sizeof(*workers));
	uint64_t one = 1;
	int r = 0;

	if (!workers)
		return -ENOMEM;
	app->threads = n;
	if ((size_t)cfg->downloads_max >= n)
		log_warn("downloads_max = %" PRId64 " and %zu threads: slow downloads could hold "
			 "every thread",
			 cfg->downloads_max, n);
	app->stop_fd = eventfd(0, EFD_CLOEXEC);
	if (app->stop_fd < 0)
		return -errno;
	r = unblock_signal_install();
	if (r < 0)
		return r;
	/* The code plane probes its interpreters once, before the first request needs them. */
	code_probe_start(cfg);
	for (; started < n; started++) {
		Worker *w = &workers[started];

		w->app = app;
		w->id = (unsigned)started;
		w->release_fd = -1;
		pthread_mutex_init(&w->reading_lock, NULL);
		w->listen_ep = listen_ep_open(app);
		if (w->listen_ep < 0) {
			r = w->listen_ep;
			break;
		}
		r = sessiond_client_init(&w->sd, cfg->runtime_dir, cfg->exec_timeout_max + 120);
		if (r < 0) {
			w->listen_ep = safe_close(w->listen_ep);
			break;
		}
		FCGX_InitRequest(&w->req, app->listen_fd, 0);
		r = -pthread_create(&w->thread, NULL, worker_main, w);
		if (r < 0) {
			sessiond_client_done(&w->sd);
			w->listen_ep = safe_close(w->listen_ep);
			break;
		}
	}
	if (r < 0)
		log_err("starting worker threads: %s", strerror(-r));
	else
		log_info("serving with %zu threads", n);
	if (r == 0)
		wait_for_stop();
	/* Level-triggered and never read: every thread sees it, now and later. */
	if (write(app->stop_fd, &one, sizeof(one)) < 0)
		log_err("eventfd: %m");
	for (size_t i = 0; i < started; i++) {
		worker_join(&workers[i]);
		sessiond_client_done(&workers[i].sd);
		safe_close(workers[i].listen_ep);
	}
	code_probe_wait();
	app->stop_fd = safe_close(app->stop_fd);
	return r;
}
