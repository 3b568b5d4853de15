/* SPDX-License-Identifier: MIT */
/* The sandbox's network namespace, seen from the parent: bring up lo through libnl. */
#include <errno.h>
#include <net/if.h>
#include <sched.h>
#include <string.h>

#include <netlink/errno.h>
#include <netlink/netlink.h>
#include <netlink/route/link.h>

#include "cleanup.h"
#include "sandbox_internal.h"

static inline void nl_socket_freep(struct nl_sock **p)
{
	if (*p)
		nl_socket_free(*p);
}

static inline void rtnl_link_putp(struct rtnl_link **p)
{
	if (*p)
		rtnl_link_put(*p);
}

/* libnl's NLE_* codes as -errno: the one place they are converted. */
static int errno_from_nle(int nle)
{
	switch (nle < 0 ? -nle : nle) {
	case NLE_SUCCESS: return 0;
	case NLE_NOMEM: return -ENOMEM;
	case NLE_PERM: return -EPERM;
	case NLE_NOACCESS: return -EACCES;
	case NLE_OBJ_NOTFOUND:
	case NLE_NODEV: return -ENODEV;
	case NLE_EXIST: return -EEXIST;
	case NLE_BUSY: return -EBUSY;
	case NLE_INVAL: return -EINVAL;
	case NLE_OPNOTSUPP: return -EOPNOTSUPP;
	case NLE_AGAIN: return -EAGAIN;
	case NLE_BAD_SOCK: return -EBADF;
	default: return -EIO;
	}
}

/*
 * A netlink socket belongs to the namespace it was created in: enter the
 * child's namespace just for socket(), then come straight back.
 */
static int netlink_socket_in(const SandboxEnv *env, int pidfd, struct nl_sock **ret)
{
	_cleanup_(nl_socket_freep) struct nl_sock *sk = nl_socket_alloc();
	int r, back;

	if (!sk)
		return -ENOMEM;
	if (setns(pidfd, CLONE_NEWNET) < 0)
		return -errno;
	r = errno_from_nle(nl_connect(sk, NETLINK_ROUTE));
	back = setns(env->host_netns_fd, CLONE_NEWNET) < 0 ? -errno : 0;
	if (back < 0)
		return back; /* the caller must not go on in the wrong namespace */
	if (r < 0)
		return r;
	*ret = TAKE_PTR(sk);
	return 0;
}

int netns_setup_from_parent(const SandboxEnv *env, int pidfd)
{
	_cleanup_(nl_socket_freep) struct nl_sock *sk = NULL;
	_cleanup_(rtnl_link_putp) struct rtnl_link *lo = NULL;
	_cleanup_(rtnl_link_putp) struct rtnl_link *change = NULL;
	int r;

	r = netlink_socket_in(env, pidfd, &sk);
	if (r < 0)
		return r;
	r = errno_from_nle(rtnl_link_get_kernel(sk, 0, "lo", &lo));
	if (r < 0)
		return r;
	change = rtnl_link_alloc();
	if (!change)
		return -ENOMEM;
	rtnl_link_set_flags(change, IFF_UP);
	return errno_from_nle(rtnl_link_change(sk, lo, change, 0));
}
