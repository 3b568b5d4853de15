/* SPDX-License-Identifier: MIT */
/* The worker's context: the read-only app, per-thread state, and one request's context. */
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <unistd.h>

#include <fcgiapp.h>

#include "config.h"
#include "http/auth.h"
#include "http/client.h"
#include "http/http.h"
#include "http/route.h"

/* Shared by all threads; read-only once the threads start. */
typedef struct App {
	const PaddockConfig *cfg; /* the settings */
	AuthTokens *tokens;	  /* bearer tokens; none: open */
	char *tenant_param; /* FastCGI param of the tenant header, e.g. HTTP_X_PADDOCK_TENANT */
	int listen_fd;	    /* the FastCGI listener (non-blocking) */
	int stop_fd;	    /* eventfd: readable once shutdown has begun */
	size_t threads;	    /* worker threads serving (server_run) */
} App;

/* One FastCGI thread. */
typedef struct Worker {
	App *app;	       /* shared context */
	unsigned id;	       /* 0..threads-1, for logs */
	pthread_t thread;      /* the thread */
	SessiondClient sd;     /* this thread's sessiond connection */
	FCGX_Request req;      /* libfcgi's request state; keeps a kept-alive connection */
	int release_fd;	       /* closed once the request is finished (worker_release_later) */
	_Atomic int64_t *slot; /* given back once the request is finished (worker_hold_slot) */
	int listen_ep;	       /* epoll on the listener (exclusive) and stop_fd */
	pthread_mutex_t reading_lock; /* held to change reading, and to signal the thread */
	bool reading;		      /* in FCGX_Accept_r: reading a request's first records */
} Worker;

/* One request as handlers see it. */
struct ReqCtx {
	App *app;	    /* shared context */
	Worker *w;	    /* the thread serving it */
	HttpReq http;	    /* the HTTP view */
	RouteMatch match;   /* route and decoded session id */
	const char *tenant; /* the tenant header's value, NULL when none */
};

/*
 * Close fd (if >= 0) once the request is finished and its answer is out: its last close
 * may take a while, as when it is the last reference to a replaced file, whose data is
 * freed then.
 */
static inline void worker_release_later(Worker *w, int fd)
{
	if (w->release_fd >= 0)
		close(w->release_fd);
	w->release_fd = fd;
}

/* Hold one of a bounded count of slots (downloads streaming, say) until the request is
 * finished: FCGX_Finish_r writes the answer's last records, and may wait on the client. */
static inline void worker_hold_slot(Worker *w, _Atomic int64_t *slots)
{
	w->slot = slots;
}

/* After FCGX_Finish_r: give back what the request held until its answer was out. */
static inline void worker_request_done(Worker *w)
{
	worker_release_later(w, -1);
	if (w->slot) {
		atomic_fetch_sub(w->slot, 1);
		w->slot = NULL;
	}
}
