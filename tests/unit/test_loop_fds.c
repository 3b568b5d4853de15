/* SPDX-License-Identifier: MIT */
/* The event loop's fd sources: what fires, what a removal stops, what the loop frees. */
#include <stdbool.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "cleanup.h"
#include "core/loop.h"

#include "unit.h"

static int readable_calls;

static void on_readable(Loop *l, int fd, uint32_t events, void *data)
{
	char c;

	(void)data;
	readable_calls += (events & EPOLLIN) != 0;
	if (read(fd, &c, 1) == 1 && c == 'q')
		loop_quit(l);
}

static void on_quit_timer(Loop *l, void *data)
{
	(void)data;
	loop_quit(l);
}

static void test_a_readable_fd_calls_its_callback_until_quit(void)
{
	Loop *l = NULL;
	int p[2];

	CHECK_EQ_INT(loop_new(&l), 0);
	CHECK_EQ_INT(pipe(p), 0);
	CHECK_EQ_INT(loop_add_fd(l, p[0], EPOLLIN, on_readable, NULL, NULL), 0);
	CHECK_EQ_INT(write(p[1], "aq", 2), 2);
	readable_calls = 0;
	CHECK_EQ_INT(loop_run(l), 0);
	CHECK_EQ_INT(readable_calls, 2);
	/* Freed with its fd source still registered: the loop frees it (the ASan build's
	 * leak check fails otherwise); the fd is the caller's. */
	loop_free(l);
	CHECK_EQ_INT(write(p[1], "x", 1), 1);
	close(p[0]);
	close(p[1]);
}

static void test_a_loop_that_returned_runs_again(void)
{
	Loop *l = NULL;

	CHECK_EQ_INT(loop_new(&l), 0);
	CHECK_EQ_INT(loop_add_timer(l, 1, on_quit_timer, NULL, NULL), 0);
	CHECK_EQ_INT(loop_run(l), 0);
	/* Not at once: this run waits for its own timer. */
	readable_calls = 0;
	CHECK_EQ_INT(loop_add_timer(l, 20, on_quit_timer, NULL, NULL), 0);
	{
		int p[2];

		CHECK_EQ_INT(pipe(p), 0);
		CHECK_EQ_INT(loop_add_fd(l, p[0], EPOLLIN, on_readable, NULL, NULL), 0);
		CHECK_EQ_INT(write(p[1], "a", 1), 1);
		CHECK_EQ_INT(loop_run(l), 0);
		CHECK_EQ_INT(readable_calls, 1);
		loop_free(l);
		close(p[0]);
		close(p[1]);
	}
}

static void test_a_removed_fd_is_not_called(void)
{
	Loop *l = NULL;
	LoopSource *s = NULL;
	int p[2];

	CHECK_EQ_INT(loop_new(&l), 0);
	CHECK_EQ_INT(pipe(p), 0);
	CHECK_EQ_INT(loop_add_fd(l, p[0], EPOLLIN, on_readable, NULL, &s), 0);
	s = loop_remove(l, s);
	CHECK(s == NULL);
	CHECK_EQ_INT(write(p[1], "a", 1), 1);
	CHECK_EQ_INT(loop_add_timer(l, 20, on_quit_timer, NULL, NULL), 0);
	readable_calls = 0;
	CHECK_EQ_INT(loop_run(l), 0);
	CHECK_EQ_INT(readable_calls, 0);
	loop_free(l);
	close(p[0]);
	close(p[1]);
}

int main(void)
{
	alarm(10); /* a loop that never quits fails the test instead of hanging it */
	test_a_readable_fd_calls_its_callback_until_quit();
	test_a_loop_that_returned_runs_again();
	test_a_removed_fd_is_not_called();
	return unit_summary();
}
