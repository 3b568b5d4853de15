/* SPDX-License-Identifier: MIT */
/* What the `step` field of an INIT_ERROR from paddock-init names. */
#pragma once

enum init_step {
	INIT_STEP_MESSAGE = 1,	  /* malformed request (short, truncated, bad blob) */
	INIT_STEP_OP = 2,	  /* unknown op */
	INIT_STEP_SLOTS = 3,	  /* too many live interpreters */
	INIT_STEP_SOCKETPAIR = 4, /* the interpreter's control socket */
	INIT_STEP_PIPE = 5,	  /* stdout/stderr pipes */
	INIT_STEP_FORK = 6,
	INIT_STEP_PIDFD = 7, /* pidfd_open of the new interpreter */
	INIT_STEP_KILL = 8,  /* processes survived INIT_KILL */
	INIT_STEP_ALLOC = 9,
};

static inline const char *init_step_name(unsigned step)
{
	static const char *const names[] = {
		[INIT_STEP_MESSAGE] = "malformed request",
		[INIT_STEP_OP] = "unknown op",
		[INIT_STEP_SLOTS] = "too many interpreters",
		[INIT_STEP_SOCKETPAIR] = "socketpair",
		[INIT_STEP_PIPE] = "pipe",
		[INIT_STEP_FORK] = "fork",
		[INIT_STEP_PIDFD] = "pidfd_open",
		[INIT_STEP_KILL] = "kill",
		[INIT_STEP_ALLOC] = "out of memory",
	};

	if (step >= sizeof(names) / sizeof(names[0]) || !names[step])
		return "unknown step";
	return names[step];
}
