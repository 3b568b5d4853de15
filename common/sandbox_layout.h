/* SPDX-License-Identifier: MIT */
/*
 * The sandbox as the programs in it see it: where the workspace and paddock's files are,
 * the user, the host name, the PATH. The sandbox's build makes it so (sessiond/sandbox/),
 * init and the interpreters' environments rely on it, and the worker reports it.
 */
#pragma once

#define SANDBOX_WORKSPACE "/workspace" /* the session's files, the working directory, HOME */
#define SANDBOX_LIB_DIR "/opt/paddock" /* paddock-init's lib dir, read-only: the harnesses */
#define SANDBOX_USER "sandbox"	       /* the name of every session's own uid */
#define SANDBOX_HOSTNAME "sandbox"
#define SANDBOX_PATH "/usr/local/bin:/usr/bin:/bin"
