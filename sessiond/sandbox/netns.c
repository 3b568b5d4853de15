/* SPDX-License-Identifier: MIT */
/* The sandbox's network namespace, seen from the parent: lo up, and the opt-in egress veth. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <netlink/errno.h>
#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/link/veth.h>
#include <netlink/route/route.h>

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

static inline void rtnl_addr_putp(struct rtnl_addr **p)
{
	if (*p)
		rtnl_addr_put(*p);
}

static inline void rtnl_route_putp(struct rtnl_route **p)
{
	if (*p)
		rtnl_route_put(*p);
}

static inline void nl_addr_putp(struct nl_addr **p)
{
	if (*p)
		nl_addr_put(*p);
}

static inline void nl_cache_freep(struct nl_cache **p)
{
	if (*p)
		nl_cache_free(*p);
}

/*
 * A netlink socket belongs to the namespace it was created in: enter the
 * namespace (of a pidfd or an nsfs fd) just for socket(), then come straight back.
 */
static int netlink_socket_in(const SandboxEnv *env, int ns_fd, struct nl_sock **ret)
{
	_cleanup_(nl_socket_freep) struct nl_sock *sk = nl_socket_alloc();
	int r, back;

	if (!sk)
		return -ENOMEM;
	if (ns_fd < 0) {
		/* our own namespace */
		r = errno_from_nle(nl_connect(sk, NETLINK_ROUTE));
		if (r < 0)
			return r;
		*ret = TAKE_PTR(sk);
		return 0;
	}
	if (setns(ns_fd, CLONE_NEWNET) < 0)
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

/* Parse "a.b.c.d/len" into a network address (host order) and prefix length. */
int egress_pool_parse(const char *cidr, uint32_t *net, unsigned *prefix)
{
	char buf[32], *slash, *end;
	struct in_addr a;
	unsigned long len;

	if (!cidr || strlen(cidr) >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, cidr, strlen(cidr) + 1);
	slash = strchr(buf, '/');
	if (!slash)
		return -EINVAL;
	*slash = '\0';
	errno = 0;
	len = strtoul(slash + 1, &end, 10);
	if (errno || *end || end == slash + 1 || len < 8 || len > 30)
		return -EINVAL;
	if (inet_pton(AF_INET, buf, &a) != 1)
		return -EINVAL;
	*prefix = (unsigned)len;
	*net = ntohl(a.s_addr) & (0xffffffffu << (32 - len));
	return 0;
}

/* One of the four addresses of link number n: 1 is the host side, 2 the sandbox. */
static struct nl_addr *link_addr(const SandboxEnv *env, uint32_t n, unsigned which, bool with_len)
{
	uint32_t a = htonl(env->egress_net + n * 4 + which);
	struct nl_addr *addr = nl_addr_build(AF_INET, &a, sizeof(a));

	if (addr && with_len)
		nl_addr_set_prefixlen(addr, 30);
	return addr;
}

static int addr_add(struct nl_sock *sk, int ifindex, struct nl_addr *local)
{
	_cleanup_(rtnl_addr_putp) struct rtnl_addr *a = rtnl_addr_alloc();
	int r;

	if (!a)
		return -ENOMEM;
	rtnl_addr_set_ifindex(a, ifindex);
	r = errno_from_nle(rtnl_addr_set_local(a, local));
	if (r < 0)
		return r;
	return errno_from_nle(rtnl_addr_add(sk, a, 0));
}

static int link_up(struct nl_sock *sk, const char *name, int *ifindex)
{
	_cleanup_(rtnl_link_putp) struct rtnl_link *l = NULL;
	_cleanup_(rtnl_link_putp) struct rtnl_link *change = rtnl_link_alloc();
	int r;

	if (!change)
		return -ENOMEM;
	r = errno_from_nle(rtnl_link_get_kernel(sk, 0, name, &l));
	if (r < 0)
		return r;
	rtnl_link_set_flags(change, IFF_UP);
	r = errno_from_nle(rtnl_link_change(sk, l, change, 0));
	if (r < 0)
		return r;
	*ifindex = rtnl_link_get_ifindex(l);
	return 0;
}

static int default_route_add(struct nl_sock *sk, int ifindex, struct nl_addr *gw)
{
	_cleanup_(rtnl_route_putp) struct rtnl_route *rt = rtnl_route_alloc();
	_cleanup_(nl_addr_putp) struct nl_addr *dst = NULL;
	struct rtnl_nexthop *nh;
	uint32_t any = 0;
	int r;

	dst = nl_addr_build(AF_INET, &any, sizeof(any));
	if (!rt || !dst)
		return -ENOMEM;
	nl_addr_set_prefixlen(dst, 0);
	rtnl_route_set_family(rt, AF_INET);
	rtnl_route_set_table(rt, RT_TABLE_MAIN);
	rtnl_route_set_scope(rt, RT_SCOPE_UNIVERSE);
	rtnl_route_set_protocol(rt, RTPROT_STATIC);
	rtnl_route_set_type(rt, RTN_UNICAST);
	r = errno_from_nle(rtnl_route_set_dst(rt, dst));
	if (r < 0)
		return r;
	nh = rtnl_route_nh_alloc();
	if (!nh)
		return -ENOMEM;
	rtnl_route_nh_set_ifindex(nh, ifindex);
	rtnl_route_nh_set_gateway(nh, gw);
	rtnl_route_add_nexthop(rt, nh); /* the route owns nh now */
	return errno_from_nle(rtnl_route_add(sk, rt, NLM_F_CREATE | NLM_F_EXCL));
}

/*
 * Create the veth: its host end named prefix+n in the host netns, its other
 * end eth0 in the sandbox (by pid: the child is ours and unreaped). The first
 * free link number from a rotating start; a name that exists is a link in use
 * (also one whose namespace the kernel is still tearing down), so the kernel's
 * own list of links is the allocation table: nothing to free, nothing to leak.
 */
static int veth_create(SandboxEnv *env, struct nl_sock *host, pid_t pid, uint32_t *n_ret,
		       char *name, size_t len)
{
	_cleanup_(nl_cache_freep) struct nl_cache *links = NULL;
	uint32_t slots = env->egress_slots;
	int r;

	r = errno_from_nle(rtnl_link_alloc_cache(host, AF_UNSPEC, &links));
	if (r < 0)
		return r;
	for (uint32_t tried = 0; tried < slots; tried++) {
		uint32_t n = (env->egress_next + tried) % slots;
		struct rtnl_link *l;

		if (snprintf(name, len, "%s%u", env->egress_prefix, (unsigned)n) >= IFNAMSIZ)
			return -ENAMETOOLONG;
		l = rtnl_link_get_by_name(links, name);
		if (l) {
			rtnl_link_put(l);
			continue;
		}
		r = errno_from_nle(rtnl_link_veth_add(host, name, "eth0", pid));
		if (r == -EEXIST)
			continue; /* made by someone else since we looked */
		if (r < 0)
			return r;
		env->egress_next = (n + 1) % slots;
		*n_ret = n;
		return 0;
	}
	return -EADDRNOTAVAIL; /* the pool is used up */
}

static int veth_delete(struct nl_sock *host, const char *name)
{
	_cleanup_(rtnl_link_putp) struct rtnl_link *l = rtnl_link_alloc();

	if (!l)
		return -ENOMEM;
	rtnl_link_set_name(l, name);
	return errno_from_nle(rtnl_link_delete(host, l));
}

/* The egress link: veth, addresses, both ends up, a default route in the sandbox. */
static int egress_setup(SandboxEnv *env, struct nl_sock *sandbox, pid_t pid)
{
	_cleanup_(nl_socket_freep) struct nl_sock *host = NULL;
	_cleanup_(nl_addr_putp) struct nl_addr *host_addr = NULL;
	_cleanup_(nl_addr_putp) struct nl_addr *sb_addr = NULL;
	_cleanup_(nl_addr_putp) struct nl_addr *gw = NULL;
	char name[32];
	int host_if, sb_if, r;
	uint32_t n;

	r = netlink_socket_in(env, env->egress_netns_fd, &host);
	if (r < 0)
		return r;
	r = veth_create(env, host, pid, &n, name, sizeof(name));
	if (r < 0)
		return r;
	host_addr = link_addr(env, n, 1, true);
	sb_addr = link_addr(env, n, 2, true);
	gw = link_addr(env, n, 1, false);
	if (!host_addr || !sb_addr || !gw) {
		r = -ENOMEM;
		goto undo_veth;
	}
	r = link_up(host, name, &host_if);
	if (r >= 0)
		r = addr_add(host, host_if, host_addr);
	if (r >= 0)
		r = link_up(sandbox, "eth0", &sb_if);
	if (r >= 0)
		r = addr_add(sandbox, sb_if, sb_addr);
	if (r >= 0)
		r = default_route_add(sandbox, sb_if, gw);
	if (r >= 0)
		return 0;
undo_veth:
	/* The sandbox's netns dies with the failed child and takes the pair; this is sooner. */
	veth_delete(host, name);
	return r;
}

/* Bring lo up in the namespace sk talks to. */
static int lo_up(struct nl_sock *sk)
{
	_cleanup_(rtnl_link_putp) struct rtnl_link *lo = NULL;
	_cleanup_(rtnl_link_putp) struct rtnl_link *change = NULL;
	int r;

	r = errno_from_nle(rtnl_link_get_kernel(sk, 0, "lo", &lo));
	if (r < 0)
		return r;
	change = rtnl_link_alloc();
	if (!change)
		return -ENOMEM;
	rtnl_link_set_flags(change, IFF_UP);
	return errno_from_nle(rtnl_link_change(sk, lo, change, 0));
}

int netns_setup_from_parent(SandboxEnv *env, int pidfd, pid_t pid)
{
	_cleanup_(nl_socket_freep) struct nl_sock *sk = NULL;
	int r;

	r = netlink_socket_in(env, pidfd, &sk);
	if (r < 0)
		return r;
	/* Called only for a sandbox with an egress link (the others make their own netns). */
	r = lo_up(sk);
	if (r < 0)
		return r;
	return egress_setup(env, sk, pid);
}

int netns_in_child(struct child_args *a)
{
	_cleanup_(nl_socket_freep) struct nl_sock *sk = NULL;
	int r;

	if (!a->net_in_child)
		return 0; /* cloned into it; the daemon sets it up (the egress link needs both ends) */
	/*
	 * Creating a network namespace and changing a link take the rtnl lock, which the
	 * teardown of other sessions' namespaces holds for milliseconds at a time: here the
	 * child waits for it, not the daemon's loop. The daemon is single-threaded, so
	 * libnl's allocations are safe between clone and exec.
	 */
	if (unshare(CLONE_NEWNET) < 0)
		return -errno;
	sk = nl_socket_alloc();
	if (!sk)
		return -ENOMEM;
	r = errno_from_nle(nl_connect(sk, NETLINK_ROUTE));
	return r < 0 ? r : lo_up(sk);
}
