/* SPDX-License-Identifier: MIT */
/* Sandbox test (root): opt-in egress, only towards a "host" netns the test makes itself. */
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>

#include "test_sandbox_util.h"

#define POOL "10.209.0.0/29" /* two /30 links: the third sandbox finds the pool used up */
#define PREFIX "pdkt"
#define PORT 8907

/* A server in a network namespace of its own: our stand-in for the host. */
static pid_t start_server(void)
{
	int ready[2], status;
	pid_t pid;
	char c;

	if (pipe2(ready, O_CLOEXEC) < 0)
		tu_die("pipe", errno);
	pid = fork();
	if (pid == 0) {
		struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(PORT) };
		int one = 1, s;

		if (unshare(CLONE_NEWNET) < 0)
			_exit(1);
		s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (s < 0 || setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
		    bind(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(s, 16) < 0)
			_exit(1);
		if (write(ready[1], "r", 1) != 1)
			_exit(1);
		for (;;) {
			int c2 = accept4(s, NULL, NULL, SOCK_CLOEXEC);

			if (c2 < 0)
				continue;
			if (write(c2, "hello from the host\n", 20) < 0) {
				/* the client went away */
			}
			close(c2);
		}
	}
	close(ready[1]);
	if (pid < 0 || read(ready[0], &c, 1) != 1) {
		if (pid > 0)
			waitpid(pid, &status, 0);
		tu_die("starting the server netns", EIO);
	}
	close(ready[0]);
	return pid;
}

/* Does the link exist in the netns at path? Asked from a child that enters it. */
static bool link_in(const char *ns_path, const char *name)
{
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		int fd = open(ns_path, O_RDONLY | O_CLOEXEC);

		if (fd < 0 || setns(fd, CLONE_NEWNET) < 0)
			_exit(2);
		_exit(if_nametoindex(name) > 0 ? 0 : 1);
	}
	if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status))
		return false;
	CHECK(WEXITSTATUS(status) != 2, "entering %s", ns_path);
	return WEXITSTATUS(status) == 0;
}

static bool link_gone_soon(const char *ns_path, const char *name)
{
	double t0 = tu_now_ms();

	/* The kernel tears a dead netns (and its veth pairs) down asynchronously. */
	while (link_in(ns_path, name) && tu_now_ms() - t0 < TU_TIMEOUT_MS)
		tu_sleep_ms(10);
	return !link_in(ns_path, name);
}

int main(void)
{
	static const char probe[] =
		"echo ifaces=$(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | sort | "
		"tr '\\n' ,);"
		"exec 3<>/dev/tcp/10.209.0.1/8907 && head -c 19 <&3; echo;"
		"if timeout 1 bash -c 'exec 4<>/dev/tcp/192.0.2.1/80' 2>/dev/null; then "
		"echo far=reached; "
		"else echo far=refused; fi";
	char ns_path[64], out[4096], ws[160];
	Sandbox a, b, c;
	struct tu t;
	pid_t server;
	int st, r;

	if (geteuid() != 0)
		tu_skip("needs root (namespaces, cgroups, mounts)");
	server = start_server();
	snprintf(ns_path, sizeof(ns_path), "/proc/%d/ns/net", (int)server);
	setenv("PADDOCK_EGRESS", "true", 1);
	setenv("PADDOCK_EGRESS_POOL", POOL, 1);
	setenv("PADDOCK_EGRESS_HOST_IFACE_PREFIX", PREFIX, 1);
	setenv("PADDOCK_EGRESS_HOST_NETNS", ns_path, 1);
	tu_setup(&t, "egress");

	tu_spawn(&t, "e1", &a);
	CHECK(link_in(ns_path, PREFIX "0"), "host end " PREFIX "0 in the server's netns");
	CHECK(!link_in("/proc/self/ns/net", PREFIX "0"), "nothing in the test's own netns");
	st = tu_run_shell(&a, 1, "/bin/bash", probe, out, sizeof(out));
	printf("%s", out);
	CHECK(st == 0, "probe status %#x", st);
	CHECK(tu_has_line(out, "ifaces=eth0,lo,"), "lo and eth0 in the sandbox");
	CHECK(tu_has_line(out, "hello from the host"), "connect to the host end's server");
	/* The default route leads to the test's netns, which forwards nothing (TEST-NET-1). */
	CHECK(tu_has_line(out, "far=refused"), "no way past the host end");

	tu_spawn(&t, "e2", &b);
	CHECK(link_in(ns_path, PREFIX "1"), "second sandbox gets the second link");
	r = sandbox_spawn(t.env, "e3", t.uid, t.uid, &t.lim, &c);
	CHECK(r == -EADDRNOTAVAIL, "a third sandbox finds the pool used up: %d (%s)", r,
	      sandbox_last_error());
	if (r == 0)
		tu_destroy(&t, "e3", &c);
	snprintf(ws, sizeof(ws), "%s/workspaces/e3", t.state);
	CHECK(access(ws, F_OK) < 0 && errno == ENOENT, "the failed spawn took its workspace");

	tu_destroy(&t, "e1", &a);
	CHECK(link_gone_soon(ns_path, PREFIX "0"), "the veth goes with the sandbox");
	tu_spawn(&t, "e1", &a);
	CHECK(link_in(ns_path, PREFIX "0"), "a freed link is handed out again");
	tu_destroy(&t, "e1", &a);
	tu_destroy(&t, "e2", &b);
	CHECK(link_gone_soon(ns_path, PREFIX "0") && link_gone_soon(ns_path, PREFIX "1"),
	      "no veth left");

	tu_teardown(&t);
	kill(server, SIGKILL);
	waitpid(server, &st, 0);
	return tu_summary();
}
