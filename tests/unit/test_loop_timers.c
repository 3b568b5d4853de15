/* SPDX-License-Identifier: MIT */
/* The event loop's timers, run by the real loop on short deadlines: their order, removal. */
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "core/loop.h"

#include "unit.h"

#define MAX_TIMERS 10000
#define MS 1000000ull /* nanoseconds */

/* One timer the test added, and what became of it. */
typedef struct Timer {
	size_t id;	   /* its index in timers[], in the order added */
	LoopSource *src;   /* its source, until it fires or is removed */
	uint64_t lo, hi;   /* its deadline lies between these (CLOCK_MONOTONIC ns) */
	bool removed;	   /* the test removed it */
	int fired;	   /* times its callback ran */
	uint64_t fired_ns; /* when its callback last ran */
	void (*then)(Loop *l, struct Timer *t); /* more for its callback to do */
} Timer;

static Timer timers[MAX_TIMERS];
static size_t n_timers;
static size_t fired_order[MAX_TIMERS]; /* ids, in the order their callbacks ran */
static size_t n_fired;

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void on_timer(Loop *l, void *data)
{
	Timer *t = data;

	t->fired++;
	t->fired_ns = mono_ns();
	if (n_fired < MAX_TIMERS)
		fired_order[n_fired++] = t->id;
	if (t->then)
		t->then(l, t);
	t->src = NULL; /* the loop frees a fired timer's source */
}

/* A fresh loop and no timers yet. */
static Loop *setup(void)
{
	Loop *l = NULL;

	memset(timers, 0, sizeof(timers));
	n_timers = n_fired = 0;
	CHECK_EQ_INT(loop_new(&l), 0);
	if (!l)
		exit(1);
	return l;
}

/* Add the next timer, due in ms; its deadline is taken between lo and hi. */
static Timer *add(Loop *l, uint64_t ms)
{
	Timer *t = &timers[n_timers];
	int r;

	*t = (Timer){ .id = n_timers++ };
	t->lo = mono_ns() + ms * MS;
	r = loop_add_timer(l, ms, on_timer, t, &t->src);
	t->hi = mono_ns() + ms * MS;
	CHECK_EQ_INT(r, 0);
	return t;
}

static void cancel(Loop *l, Timer *t)
{
	t->src = loop_remove(l, t->src);
	t->removed = true;
}

static void on_quit(Loop *l, void *data)
{
	(void)data;
	loop_quit(l);
}

/* Run the loop until ms after now (later than every timer the test means to see fire). */
static void run_for(Loop *l, uint64_t ms)
{
	CHECK_EQ_INT(loop_add_timer(l, ms, on_quit, NULL, NULL), 0);
	CHECK_EQ_INT(loop_run(l), 0);
}

/*
 * Pairs of timers that fired one after the other although the first one's deadline was
 * certainly later than the second's. A deadline is known only to lie in [lo, hi], so
 * this never blames the loop for the clock having moved while the test added timers.
 */
static size_t fired_out_of_deadline_order(void)
{
	size_t bad = 0;

	for (size_t k = 1; k < n_fired; k++) {
		const Timer *a = &timers[fired_order[k - 1]], *b = &timers[fired_order[k]];

		if (a->lo > b->hi) {
			if (!bad)
				fprintf(stderr, "timer %zu fired before timer %zu, due earlier\n",
					a->id, b->id);
			bad++;
		}
	}
	return bad;
}

/* Timers whose callback ran before their deadline, or more than once. */
static size_t fired_early_or_twice(void)
{
	size_t bad = 0;

	for (size_t i = 0; i < n_timers; i++)
		bad += timers[i].fired > 1 ||
		       (timers[i].fired && timers[i].fired_ns < timers[i].lo);
	return bad;
}

/* How many removed timers fired, and how many kept ones did not. */
static size_t removed_fired_or_kept_lost(void)
{
	size_t bad = 0;

	for (size_t i = 0; i < n_timers; i++)
		bad += timers[i].removed ? timers[i].fired != 0 : timers[i].fired != 1;
	return bad;
}

/* The timers that fired are the ids in want[], in that order; a failure names the first
 * one out of place. */
#define CHECK_FIRED_ORDER(want) check_fired_order(__func__, want, ARRAY_SIZE(want))

static void check_fired_order(const char *test, const size_t *want, size_t n)
{
	CHECK_EQ_INT(n_fired, n);
	for (size_t k = 0; k < n && k < n_fired; k++)
		if (fired_order[k] != want[k]) {
			CHECK_EQ_INT(fired_order[k], want[k]);
			fprintf(stderr, "  in %s, at position %zu of the firing order\n", test, k);
			return;
		}
}

static uint32_t rnd_state = 20240601;

static uint32_t rnd(void)
{
	rnd_state = rnd_state * 1103515245u + 12345u;
	return rnd_state >> 8;
}

static void test_timers_fire_in_deadline_order(void)
{
	static const uint64_t delays[] = { 50, 10, 40, 20, 30 };
	static const size_t want[] = { 1, 3, 4, 2, 0 };
	Loop *l = setup();

	for (size_t i = 0; i < ARRAY_SIZE(delays); i++)
		add(l, delays[i]);
	run_for(l, 60);
	CHECK_FIRED_ORDER(want);
	CHECK_EQ_INT(fired_early_or_twice(), 0);
	loop_free(l);
}

/* Timers due at the same moment fire in the order they were added: here they are added
 * with the same delay; the heap breaks a tie to the nanosecond (a coarse clock) the same
 * way. */
static void test_equal_deadlines_fire_in_the_order_added(void)
{
	size_t want[200];
	Loop *l = setup();

	for (size_t i = 0; i < ARRAY_SIZE(want); i++) {
		add(l, 5);
		want[i] = i;
	}
	run_for(l, 10);
	CHECK_FIRED_ORDER(want);
	loop_free(l);
}

static void quit_from_callback(Loop *l, Timer *t)
{
	(void)t;
	loop_quit(l);
}

/* A timer due before the one the loop waits for moves the wait earlier. */
static void test_timer_added_with_an_earlier_deadline_fires_first(void)
{
	Loop *l = setup();
	Timer *late = add(l, 5000);
	Timer *soon = add(l, 1);

	soon->then = quit_from_callback;
	CHECK_EQ_INT(loop_run(l), 0);
	CHECK_EQ_INT(soon->fired, 1);
	CHECK_EQ_INT(late->fired, 0);
	CHECK(soon->fired_ns < late->lo);
	loop_free(l);
}

static void test_removing_timers_from_the_middle_keeps_the_others_in_order(void)
{
	static const uint64_t delays[] = { 10, 70, 30, 50, 20, 60, 40 };
	static const size_t want[] = { 0, 4, 5, 1 };
	Loop *l = setup();

	for (size_t i = 0; i < ARRAY_SIZE(delays); i++)
		add(l, delays[i]);
	cancel(l, &timers[2]);
	cancel(l, &timers[3]);
	cancel(l, &timers[6]);
	run_for(l, 80);
	CHECK_FIRED_ORDER(want);
	CHECK_EQ_INT(removed_fired_or_kept_lost(), 0);
	loop_free(l);
}

/* The earliest timer, the one the loop's wait is set for, removed: the next one still
 * fires; and a timer removed twice, or every timer removed, is no trouble. */
static void test_removed_timer_never_fires(void)
{
	Loop *l = setup();
	Timer *first = add(l, 1), *second = add(l, 5), *third = add(l, 10);
	LoopSource *third_src = third->src;

	cancel(l, first);
	cancel(l, third);
	/* Its source is freed once the loop next runs: until then, removing it is a no-op. */
	CHECK(loop_remove(l, third_src) == NULL);
	run_for(l, 20);
	CHECK_EQ_INT(first->fired, 0);
	CHECK_EQ_INT(second->fired, 1);
	CHECK_EQ_INT(third->fired, 0);
	loop_free(l);

	l = setup();
	for (int i = 0; i < 10; i++)
		add(l, (uint64_t)i);
	for (int i = 9; i >= 0; i--)
		cancel(l, &timers[i]);
	run_for(l, 15);
	CHECK_EQ_INT(n_fired, 0);
	loop_free(l);
}

/* Timer 0's callback removes timer 1 (due in the same round), adds two and removes itself
 * (too late: it is already gone); timer 2's removes itself too. */
static void first_callback(Loop *l, Timer *t)
{
	cancel(l, &timers[1]);
	add(l, 0);
	add(l, 5);
	CHECK(loop_remove(l, t->src) == NULL);
}

static void third_callback(Loop *l, Timer *t)
{
	CHECK(loop_remove(l, t->src) == NULL);
}

static void test_timer_callback_adds_and_removes_timers(void)
{
	/* 0, 2, then 4 (added by 0 at no delay: after every timer already due), 5, 3. */
	static const size_t want[] = { 0, 2, 4, 5, 3 };
	Loop *l = setup();

	add(l, 0)->then = first_callback;
	add(l, 0);
	add(l, 0)->then = third_callback;
	add(l, 50);
	run_for(l, 60);
	CHECK_FIRED_ORDER(want);
	CHECK_EQ_INT(n_timers, 6);
	CHECK_EQ_INT(removed_fired_or_kept_lost(), 0);
	CHECK_EQ_INT(fired_early_or_twice(), 0);
	loop_free(l);
}

static int spins;
static bool fd_seen;

/* Adds itself again at no delay, for as long as the loop runs. */
static void on_spin(Loop *l, void *data)
{
	(void)data;
	if (++spins < 100000)
		CHECK_EQ_INT(loop_add_timer(l, 0, on_spin, NULL, NULL), 0);
}

static void on_readable(Loop *l, int fd, uint32_t events, void *data)
{
	(void)fd;
	(void)events;
	(void)data;
	fd_seen = true;
	loop_quit(l);
}

/* A timer that adds itself again at no delay waits for the next round: the loop goes on
 * to the fds that are ready. */
static void test_timer_readded_from_its_callback_lets_fds_run(void)
{
	Loop *l = setup();
	LoopSource *src = NULL;
	int fds[2];

	CHECK_EQ_INT(pipe2(fds, O_CLOEXEC | O_NONBLOCK), 0);
	CHECK_EQ_INT(loop_add_timer(l, 0, on_spin, NULL, NULL), 0);
	CHECK_EQ_INT(loop_add_fd(l, fds[0], EPOLLIN, on_readable, NULL, &src), 0);
	CHECK_EQ_INT(write(fds[1], "x", 1), 1);
	CHECK_EQ_INT(loop_run(l), 0);
	CHECK(fd_seen);
	CHECK_GE_INT(spins, 1);
	CHECK_LT_INT(spins, 100);
	loop_remove(l, src);
	loop_free(l);
	close(fds[0]);
	close(fds[1]);
}

static void add_random(Loop *l, size_t n, uint32_t max_ms)
{
	for (size_t i = 0; i < n; i++)
		add(l, rnd() % max_ms);
}

static void test_ten_thousand_random_deadlines_fire_sorted(void)
{
	Loop *l = setup();

	add_random(l, MAX_TIMERS, 50);
	run_for(l, 60);
	CHECK_EQ_INT(n_fired, MAX_TIMERS);
	CHECK_EQ_INT(fired_out_of_deadline_order(), 0);
	CHECK_EQ_INT(fired_early_or_twice(), 0);
	loop_free(l);
}

/* A third of ten thousand removed, from wherever they are in the heap. */
static void test_removed_timers_among_many_never_fire(void)
{
	Loop *l = setup();
	size_t removed = 0;

	add_random(l, MAX_TIMERS, 50);
	for (size_t i = 0; i < MAX_TIMERS; i++)
		if (rnd() % 3 == 0) {
			cancel(l, &timers[i]);
			removed++;
		}
	run_for(l, 60);
	CHECK_EQ_INT(n_fired, MAX_TIMERS - removed);
	CHECK_EQ_INT(removed_fired_or_kept_lost(), 0);
	CHECK_EQ_INT(fired_out_of_deadline_order(), 0);
	CHECK_EQ_INT(fired_early_or_twice(), 0);
	loop_free(l);
}

int main(void)
{
	/* A loop that never wakes fails the test rather than hanging it. */
	alarm(10);
	test_timers_fire_in_deadline_order();
	test_equal_deadlines_fire_in_the_order_added();
	test_timer_added_with_an_earlier_deadline_fires_first();
	test_removing_timers_from_the_middle_keeps_the_others_in_order();
	test_removed_timer_never_fires();
	test_timer_callback_adds_and_removes_timers();
	test_timer_readded_from_its_callback_lets_fds_run();
	test_ten_thousand_random_deadlines_fire_sorted();
	test_removed_timers_among_many_never_fire();
	CHECK(loop_remove(NULL, NULL) == NULL);
	CHECK(loop_free(NULL) == NULL);
	return unit_summary();
}
