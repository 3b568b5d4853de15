/* SPDX-License-Identifier: MIT */
/* The FastCGI server: worker threads, their accept loops, dispatch and the request log. */
#pragma once

#include "app.h"

/*
 * Run cfg->threads workers on app->listen_fd until SIGTERM or SIGINT (which the
 * caller has blocked in every thread), then stop accepting, let requests in
 * flight finish and return 0. -errno when the threads cannot start.
 */
int server_run(App *app);
