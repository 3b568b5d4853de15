/* SPDX-License-Identifier: MIT */
/* The daemon's event loop: epoll over fds and one-shot timers. */
#pragma once

#include "clock.h" /* now_ms(), now_real(): the loop's users keep time with it */

#include <stdbool.h>
#include <stdint.h>

typedef struct Loop Loop;
typedef struct LoopSource LoopSource;

/* Called with the epoll events that fired; data as given at registration. */
typedef void (*loop_fd_cb)(Loop *l, int fd, uint32_t events, void *data);
/* Called once when a timer expires. */
typedef void (*loop_timer_cb)(Loop *l, void *data);

int loop_new(Loop **ret);
/* Free the loop and every source still registered (their fds stay open: not owned). */
Loop *loop_free(Loop *l);

/* Watch fd (not owned) for events. The returned source is owned by the loop until
 * loop_remove(). */
int loop_add_fd(Loop *l, int fd, uint32_t events, loop_fd_cb cb, void *data, LoopSource **ret);
int loop_modify_fd(Loop *l, LoopSource *s, uint32_t events);

/* Fire cb once after ms milliseconds (monotonic); timers due at the same moment fire in the
 * order they were added. The source is freed after cb has run: cb clears any pointer to it
 * that its owner keeps. */
int loop_add_timer(Loop *l, uint64_t ms, loop_timer_cb cb, void *data, LoopSource **ret);

/* Stop watching and free the source; safe to call from inside its own callback.
 * Accepts NULL; returns NULL for `s = loop_remove(l, s);`. */
LoopSource *loop_remove(Loop *l, LoopSource *s);

/* Run until loop_quit(); a loop that returned may run again. */
int loop_run(Loop *l);
void loop_quit(Loop *l);
