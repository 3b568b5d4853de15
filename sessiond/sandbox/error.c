/* SPDX-License-Identifier: MIT */
/* Why the last sandbox call failed, and the names of the spawn's steps. */
#include <stdarg.h>
#include <stdio.h>

#include "sandbox_internal.h"
#include "sandbox_layout.h"

static _Thread_local char last_error[256];

const char *sandbox_last_error(void)
{
	return last_error;
}

void sandbox_set_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(last_error, sizeof(last_error), fmt, ap);
	va_end(ap);
}

static const char *const step_names[STEP_MAX] = {
	[STEP_NONE] = "none",
	[STEP_PREPARE] = "prepare",
	[STEP_SOCKETS] = "sockets",
	[STEP_CLONE] = "clone3",
	[STEP_CGROUP_CREATE] = "cgroup create",
	[STEP_CGROUP_ATTACH] = "cgroup attach",
	[STEP_WORKSPACE] = "create the workspace",
	[STEP_UNSHARE] = "unshare mount, ipc and uts namespaces",
	[STEP_HOST_SCAN] = "read the host's /etc and root links",
	[STEP_NETNS] = "network (lo, egress link)",
	[STEP_RELEASE_CHILD] = "release child",
	[STEP_CHILD_DIED] = "child died before exec",
	[STEP_NETNS_CHILD] = "network namespace (lo)",
	[STEP_WAIT_PARENT] = "wait for parent",
	[STEP_CGROUP_NS] = "cgroup namespace",
	[STEP_MOUNT_PRIVATE] = "mount propagation private",
	[STEP_MOUNT_ROOT] = "mount root tmpfs",
	[STEP_MOUNT_USR] = "bind /usr",
	[STEP_MOUNT_ROOT_LINKS] = "root symlinks",
	[STEP_MOUNT_ETC] = "populate /etc",
	[STEP_MOUNT_DEV] = "populate /dev",
	[STEP_MOUNT_PROC] = "mount /proc",
	[STEP_MOUNT_TMP] = "mount /tmp",
	[STEP_MOUNT_WORKSPACE] = "bind " SANDBOX_WORKSPACE,
	[STEP_MOUNT_LIB_DIR] = "bind " SANDBOX_LIB_DIR,
	[STEP_PIVOT_ROOT] = "pivot_root",
	[STEP_ROOT_READONLY] = "root read-only",
	[STEP_CHDIR] = "chdir " SANDBOX_WORKSPACE,
	[STEP_HOSTNAME] = "sethostname",
	[STEP_FDS] = "arrange fds",
	[STEP_RLIMITS] = "rlimits",
	[STEP_CAPS_BOUNDING] = "drop bounding set",
	[STEP_SETGROUPS] = "setgroups",
	[STEP_SETGID] = "setresgid",
	[STEP_SETUID] = "setresuid",
	[STEP_CAPS_VERIFY] = "verify no capabilities",
	[STEP_NO_NEW_PRIVS] = "no_new_privs",
	[STEP_SECCOMP] = "seccomp",
	[STEP_EXEC] = "exec paddock-init",
};

const char *sandbox_step_name(unsigned step)
{
	if (step >= STEP_MAX || !step_names[step])
		return "unknown step";
	return step_names[step];
}
