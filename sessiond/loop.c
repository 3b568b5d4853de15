/* SPDX-License-Identifier: MIT */
/* epoll-based event loop; timers are timerfds so they share the one wait. */
#include "loop.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"

/* One watched fd or timer. Freed lazily so a callback may remove its own source. */
struct LoopSource {
	int fd;		    /* watched fd, or our timerfd */
	bool is_timer;	    /* fd is a timerfd we own */
	bool dead;	    /* removed; free after this iteration */
	loop_fd_cb fd_cb;   /* for fds */
	loop_timer_cb t_cb; /* for timers */
	void *data;
	LoopSource *next_dead; /* list of sources to free */
};

struct Loop {
	int epfd;	     /* the epoll instance */
	bool quit;	     /* set by loop_quit */
	LoopSource *dead;    /* removed sources awaiting free */
};

int loop_new(Loop **ret)
{
	Loop *l = calloc(1, sizeof(*l));

	if (!l)
		return -ENOMEM;
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (l->epfd < 0) {
		int r = -errno;
		free(l);
		return r;
	}
	*ret = l;
	return 0;
}

static void free_dead(Loop *l)
{
	while (l->dead) {
		LoopSource *s = l->dead;

		l->dead = s->next_dead;
		free(s);
	}
}

Loop *loop_free(Loop *l)
{
	if (!l)
		return NULL;
	free_dead(l);
	close(l->epfd);
	free(l);
	return NULL;
}

static int add_source(Loop *l, LoopSource *s, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = s };

	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, s->fd, &ev) < 0)
		return -errno;
	return 0;
}

int loop_add_fd(Loop *l, int fd, uint32_t events, loop_fd_cb cb, void *data, LoopSource **ret)
{
	LoopSource *s = calloc(1, sizeof(*s));
	int r;

	if (!s)
		return -ENOMEM;
	*s = (LoopSource){ .fd = fd, .fd_cb = cb, .data = data };
	r = add_source(l, s, events);
	if (r < 0) {
		free(s);
		return r;
	}
	if (ret)
		*ret = s;
	return 0;
}

int loop_modify_fd(Loop *l, LoopSource *s, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = s };

	if (epoll_ctl(l->epfd, EPOLL_CTL_MOD, s->fd, &ev) < 0)
		return -errno;
	return 0;
}

int loop_add_timer(Loop *l, uint64_t ms, loop_timer_cb cb, void *data, LoopSource **ret)
{
	struct itimerspec its = { .it_value = { .tv_sec = ms / 1000,
						.tv_nsec = (long)(ms % 1000) * 1000000L } };
	LoopSource *s;
	int r;

	/* A zero it_value disarms a timerfd: round up to 1 ns so 0 ms fires at once. */
	if (ms == 0)
		its.it_value.tv_nsec = 1;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (s->fd < 0) {
		r = -errno;
		free(s);
		return r;
	}
	s->is_timer = true;
	s->t_cb = cb;
	s->data = data;
	if (timerfd_settime(s->fd, 0, &its, NULL) < 0 || (r = add_source(l, s, EPOLLIN)) < 0) {
		r = -errno;
		close(s->fd);
		free(s);
		return r;
	}
	if (ret)
		*ret = s;
	return 0;
}

LoopSource *loop_remove(Loop *l, LoopSource *s)
{
	if (!s || s->dead)
		return NULL;
	epoll_ctl(l->epfd, EPOLL_CTL_DEL, s->fd, NULL);
	if (s->is_timer)
		close(s->fd);
	s->fd = -1;
	s->dead = true;
	s->next_dead = l->dead;
	l->dead = s;
	return NULL;
}

static void dispatch(Loop *l, LoopSource *s, uint32_t events)
{
	if (s->dead)
		return;
	if (s->is_timer) {
		uint64_t n;

		if (read(s->fd, &n, sizeof(n)) < 0 && errno == EAGAIN)
			return;
		/* One-shot: the source is gone before the callback runs. */
		loop_remove(l, s);
		s->t_cb(l, s->data);
		return;
	}
	s->fd_cb(l, s->fd, events, s->data);
}

int loop_run(Loop *l)
{
	struct epoll_event evs[64];

	while (!l->quit) {
		int n = epoll_wait(l->epfd, evs, (int)ARRAY_SIZE(evs), -1);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		for (int i = 0; i < n; i++)
			dispatch(l, evs[i].data.ptr, evs[i].events);
		free_dead(l);
	}
	return 0;
}

void loop_quit(Loop *l)
{
	l->quit = true;
}

uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

double now_real(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}
