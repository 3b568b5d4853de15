/* SPDX-License-Identifier: MIT */
/* epoll-based event loop; timers live in a min-heap behind one timerfd. */
#include "loop.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "list.h"

/* One watched fd or timer. Freed lazily so a callback may remove its own source. */
struct LoopSource {
	int fd;		    /* watched fd; -1 for timers */
	uint32_t events;    /* fds: the mask epoll has now */
	bool is_timer;	    /* a timer in the heap */
	uint64_t deadline;  /* timers: CLOCK_MONOTONIC nanoseconds */
	uint64_t seq;	    /* timers: order added, first among equal deadlines */
	size_t heap_idx;    /* timers: position in the heap */
	bool dead;	    /* removed; free after this iteration */
	loop_fd_cb fd_cb;   /* for fds */
	loop_timer_cb t_cb; /* for timers */
	void *data;
	LoopSource *next_dead;	 /* list of sources to free */
	LoopSource *prev, *next; /* fds: the loop's list of them, freed with it */
};

struct Loop {
	int epfd;	   /* the epoll instance */
	bool quit;	   /* set by loop_quit */
	LoopSource *dead;  /* removed sources awaiting free */
	LoopSource *fds;   /* watched fds, not removed */
	int tfd;	   /* one timerfd, armed for the earliest timer */
	LoopSource **heap; /* pending timers, earliest first (a binary min-heap) */
	size_t n_heap, cap_heap;
	uint64_t timer_seq; /* the next timer's seq */
};

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Whether timer a is due before b: by deadline, then in the order they were added. */
static bool timer_before(const LoopSource *a, const LoopSource *b)
{
	return a->deadline != b->deadline ? a->deadline < b->deadline : a->seq < b->seq;
}

static void heap_swap(Loop *l, size_t a, size_t b)
{
	LoopSource *t = l->heap[a];

	l->heap[a] = l->heap[b];
	l->heap[b] = t;
	l->heap[a]->heap_idx = a;
	l->heap[b]->heap_idx = b;
}

static void heap_up(Loop *l, size_t i)
{
	while (i > 0 && timer_before(l->heap[i], l->heap[(i - 1) / 2])) {
		heap_swap(l, i, (i - 1) / 2);
		i = (i - 1) / 2;
	}
}

static void heap_down(Loop *l, size_t i)
{
	for (;;) {
		size_t m = i, a = 2 * i + 1, b = 2 * i + 2;

		if (a < l->n_heap && timer_before(l->heap[a], l->heap[m]))
			m = a;
		if (b < l->n_heap && timer_before(l->heap[b], l->heap[m]))
			m = b;
		if (m == i)
			return;
		heap_swap(l, i, m);
		i = m;
	}
}

static void heap_remove(Loop *l, LoopSource *s)
{
	size_t i = s->heap_idx;

	l->n_heap--;
	if (i != l->n_heap) {
		l->heap[i] = l->heap[l->n_heap];
		l->heap[i]->heap_idx = i;
		heap_down(l, i);
		heap_up(l, i);
	}
}

/* Point the timerfd at the earliest deadline, or disarm it. */
static void timer_rearm(Loop *l)
{
	struct itimerspec its = { 0 };

	if (l->n_heap > 0) {
		uint64_t d = l->heap[0]->deadline;

		its.it_value.tv_sec = (time_t)(d / 1000000000ull);
		its.it_value.tv_nsec = (long)(d % 1000000000ull);
	}
	timerfd_settime(l->tfd, TFD_TIMER_ABSTIME, &its, NULL);
}

int loop_new(Loop **ret)
{
	Loop *l = calloc(1, sizeof(*l));
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };
	int r;

	if (!l)
		return -ENOMEM;
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	l->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (l->epfd < 0 || l->tfd < 0 || epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->tfd, &ev) < 0) {
		r = -errno;
		if (l->epfd >= 0)
			close(l->epfd);
		if (l->tfd >= 0)
			close(l->tfd);
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
	/* What its owners never removed goes with the loop, as loop.h promises. */
	while (l->fds) {
		LoopSource *s = l->fds;

		LIST_UNLINK(l->fds, s);
		free(s);
	}
	for (size_t i = 0; i < l->n_heap; i++)
		free(l->heap[i]);
	free(l->heap);
	close(l->tfd);
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
	*s = (LoopSource){ .fd = fd, .events = events, .fd_cb = cb, .data = data };
	r = add_source(l, s, events);
	if (r < 0) {
		free(s);
		return r;
	}
	LIST_PUSH(l->fds, s);
	if (ret)
		*ret = s;
	return 0;
}

int loop_modify_fd(Loop *l, LoopSource *s, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = s };

	/* Callers say what they want after each step; only a change costs a syscall. */
	if (events == s->events)
		return 0;
	if (epoll_ctl(l->epfd, EPOLL_CTL_MOD, s->fd, &ev) < 0)
		return -errno;
	s->events = events;
	return 0;
}

int loop_add_timer(Loop *l, uint64_t ms, loop_timer_cb cb, void *data, LoopSource **ret)
{
	LoopSource *s;

	if (l->n_heap == l->cap_heap) {
		size_t cap = l->cap_heap ? l->cap_heap * 2 : 64;
		LoopSource **grown = realloc(l->heap, cap * sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		l->heap = grown;
		l->cap_heap = cap;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	*s = (LoopSource){ .fd = -1,
			   .is_timer = true,
			   .t_cb = cb,
			   .data = data,
			   .seq = l->timer_seq++,
			   .deadline = mono_ns() + ms * 1000000ull };
	s->heap_idx = l->n_heap;
	l->heap[l->n_heap++] = s;
	heap_up(l, s->heap_idx);
	if (s->heap_idx == 0)
		timer_rearm(l);
	if (ret)
		*ret = s;
	return 0;
}

LoopSource *loop_remove(Loop *l, LoopSource *s)
{
	if (!s || s->dead)
		return NULL;
	if (s->is_timer) {
		bool was_first = s->heap_idx == 0;

		heap_remove(l, s);
		if (was_first)
			timer_rearm(l);
	} else {
		epoll_ctl(l->epfd, EPOLL_CTL_DEL, s->fd, NULL);
		LIST_UNLINK(l->fds, s);
	}
	s->fd = -1;
	s->dead = true;
	s->next_dead = l->dead;
	l->dead = s;
	return NULL;
}

/* Fire every timer that is due; each is gone before its callback runs. */
static void run_timers(Loop *l)
{
	uint64_t n, now = mono_ns();

	if (read(l->tfd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		return;
	while (l->n_heap > 0 && l->heap[0]->deadline <= now) {
		LoopSource *s = l->heap[0];

		loop_remove(l, s);
		s->t_cb(l, s->data);
	}
	timer_rearm(l);
}

static void dispatch(Loop *l, LoopSource *s, uint32_t events)
{
	if (!s) {
		run_timers(l);
		return;
	}
	if (s->dead)
		return;
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
	l->quit = false; /* the next loop_run runs */
	return 0;
}

void loop_quit(Loop *l)
{
	l->quit = true;
}
