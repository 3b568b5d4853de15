/* SPDX-License-Identifier: MIT */
/* Bench driver: keep-alive HTTP latency, harnesses driven over their pipes, process start times,
 * and the bare cost of one more hop between two processes. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define IOBUF (1u << 20)
#define MAX_PROCS 256
#define MAX_HEADERS 8

/* What one measurement loop is asked to do. */
struct opts {
	const char *mode;		  /* "http", "sessiond", "harness", "spawn" or "hop" */
	int port;			  /* http: nginx's loopback port */
	const char *method;		  /* http: request method */
	const char *path;		  /* http: request target */
	const char *body_file;		  /* http: request body, or NULL */
	const char *headers[MAX_HEADERS]; /* http: extra header lines */
	int nheaders;			  /* http: how many */
	const char *expect;		  /* a substring every good reply holds, or NULL */
	const char *socket;		  /* sessiond: the daemon's unix socket */
	const char *kind;		  /* harness: "python" or "bash" */
	const char *lib;		  /* harness: dir with harness.py and harness.bash */
	const char *code;		  /* harness: the code each request runs */
	const char *workdir;		  /* harness: the interpreters' cwd */
	int size;			  /* hop: bytes each way */
	int procs;	 /* harness: interpreters driven at once, one thread each */
	long count;	 /* requests (or spawns) per thread, at most */
	double seconds;	 /* wall time per thread, at most */
	long warmup;	 /* requests per thread not recorded */
	const char *out; /* file for the samples (ns, one a line), or NULL */
	char **argv;	 /* spawn: the command */
};

/* One thread's loop and its results. */
struct worker {
	const struct opts *o; /* the shared options */
	int idx;	      /* thread number */
	uint64_t *samples;    /* latencies in ns */
	long n;		      /* samples taken */
	long errors;	      /* bad or missing replies */
	long reconnects;      /* http: connections opened after the first */
	double elapsed;	      /* seconds the recorded loop took */
	uint64_t t_start;     /* when the recorded loop began (after the warm-up) */
	uint64_t t_end;	      /* its time bound */
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Whether turn i of a loop goes on: the recorded part begins after the warm-up turns and
 * ends at the time bound. */
static bool measured_part_goes_on(struct worker *w, long i)
{
	const struct opts *o = w->o;

	if (i == o->warmup) {
		w->t_start = now_ns();
		w->t_end = w->t_start + (uint64_t)(o->seconds * 1e9);
	}
	return i < o->warmup || now_ns() <= w->t_end;
}

static _Noreturn void die(const char *what)
{
	fprintf(stderr, "pdload: %s: %s\n", what, strerror(errno));
	exit(2);
}

static char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	if (!f)
		die(path);
	if (fseek(f, 0, SEEK_END) < 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) < 0)
		die(path);
	buf = malloc((size_t)n + 1);
	if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n)
		die(path);
	fclose(f);
	buf[n] = '\0';
	*len = (size_t)n;
	return buf;
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* ---- HTTP/1.1 keep-alive client ---- */

/* One connection and what is buffered from it. */
struct http_conn {
	int fd;	    /* the socket, or -1 */
	char *buf;  /* bytes received, not yet consumed */
	size_t len; /* bytes in buf */
};

static int http_connect(int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons((uint16_t)port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Read more into c->buf; 0 on progress, -1 on EOF or error. */
static int http_fill(struct http_conn *c)
{
	ssize_t n;

	if (c->len >= IOBUF)
		return -1;
	do
		n = read(c->fd, c->buf + c->len, IOBUF - c->len);
	while (n < 0 && errno == EINTR);
	if (n <= 0)
		return -1;
	c->len += (size_t)n;
	return 0;
}

static void http_consume(struct http_conn *c, size_t n)
{
	memmove(c->buf, c->buf + n, c->len - n);
	c->len -= n;
}

/* Read one response; its status, and whether expect (if any) is in the body. */
static int http_read_response(struct http_conn *c, const char *expect, bool *found,
			      bool *close_after)
{
	char *end, *p;
	size_t hlen, clen = 0;
	int status;
	bool chunked = false, have_len = false;

	while (!(end = memmem(c->buf, c->len, "\r\n\r\n", 4)))
		if (http_fill(c) < 0)
			return -1;
	hlen = (size_t)(end - c->buf) + 4;
	if (sscanf(c->buf, "HTTP/1.%*d %d", &status) != 1)
		return -1;
	*close_after = false;
	for (p = memchr(c->buf, '\n', hlen); p && p < end; p = memchr(p, '\n', (size_t)(end - p))) {
		char line[256];
		size_t n;

		p++;
		n = strcspn(p, "\r\n");
		n = n < sizeof(line) - 1 ? n : sizeof(line) - 1;
		memcpy(line, p, n);
		line[n] = '\0';
		if (!strncasecmp(line, "content-length:", 15)) {
			clen = strtoul(line + 15, NULL, 10);
			have_len = true;
		} else if (!strncasecmp(line, "transfer-encoding:", 18) &&
			   strcasestr(line, "chunked")) {
			chunked = true;
		} else if (!strncasecmp(line, "connection:", 11) && strcasestr(line, "close")) {
			*close_after = true;
		}
	}
	http_consume(c, hlen);
	*found = expect == NULL;
	if (!chunked) {
		if (!have_len)
			return -1;
		while (c->len < clen)
			if (http_fill(c) < 0)
				return -1;
		if (expect && memmem(c->buf, clen, expect, strlen(expect)))
			*found = true;
		http_consume(c, clen);
		return status;
	}
	for (;;) {
		size_t size;
		char *nl;

		while (!(nl = memmem(c->buf, c->len, "\r\n", 2)))
			if (http_fill(c) < 0)
				return -1;
		size = strtoul(c->buf, NULL, 16);
		http_consume(c, (size_t)(nl - c->buf) + 2);
		while (c->len < size + 2)
			if (http_fill(c) < 0)
				return -1;
		if (expect && memmem(c->buf, size, expect, strlen(expect)))
			*found = true;
		http_consume(c, size + 2);
		if (size == 0)
			return status;
	}
}

static char *http_request_text(const struct opts *o, size_t *len)
{
	size_t blen = 0, cap;
	char *body = o->body_file ? read_file(o->body_file, &blen) : NULL;
	char *req;
	int n;

	cap = blen + 4096;
	req = malloc(cap);
	if (!req)
		die("malloc");
	n = snprintf(req, cap, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n", o->method, o->path);
	for (int i = 0; i < o->nheaders; i++)
		n += snprintf(req + n, cap - (size_t)n, "%s\r\n", o->headers[i]);
	if (body || !strcmp(o->method, "POST"))
		n += snprintf(req + n, cap - (size_t)n, "Content-Length: %zu\r\n", blen);
	n += snprintf(req + n, cap - (size_t)n, "\r\n");
	if (blen)
		memcpy(req + n, body, blen);
	free(body);
	*len = (size_t)n + blen;
	return req;
}

static void *http_worker(void *arg)
{
	struct worker *w = arg;
	const struct opts *o = w->o;
	struct http_conn c = { .fd = -1, .buf = malloc(IOBUF) };
	size_t reqlen;
	char *req = http_request_text(o, &reqlen);
	bool opened = false;

	if (!c.buf)
		die("malloc");
	for (long i = 0; w->n < o->count; i++) {
		uint64_t t0;
		bool found = false, close_after = false;
		int status;

		if (!measured_part_goes_on(w, i))
			break;
		if (c.fd < 0) {
			c.fd = http_connect(o->port);
			c.len = 0;
			if (c.fd < 0) {
				w->errors++;
				usleep(1000);
				continue;
			}
			w->reconnects += opened;
			opened = true;
		}
		t0 = now_ns();
		status = write_all(c.fd, req, reqlen) < 0 ?
				 -1 :
				 http_read_response(&c, o->expect, &found, &close_after);
		if (i >= o->warmup) {
			w->samples[w->n++] = now_ns() - t0;
			if (status < 200 || status > 299 || !found)
				w->errors++;
		}
		if (status < 0 || close_after) {
			close(c.fd);
			c.fd = -1;
		}
	}
	w->elapsed = (double)(now_ns() - w->t_start) / 1e9;
	if (c.fd >= 0)
		close(c.fd);
	free(c.buf);
	free(req);
	return NULL;
}

/* ---- sessiond's own socket, as a worker thread talks to it ---- */

static int sessiond_connect(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0 || strlen(path) >= sizeof(a.sun_path))
		die("sessiond socket");
	memcpy(a.sun_path, path, strlen(path) + 1);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		die(path);
	return fd;
}

/* Read exactly n bytes; -1 on EOF or error. */
static int read_all(int fd, char *p, size_t n)
{
	while (n) {
		ssize_t r = read(fd, p, n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

/* One request frame out, frames in until the JSON one; 0 if it holds expect. */
static int sessiond_call(int fd, const char *req, size_t reqlen, const char *expect, char *buf)
{
	for (;;) {
		uint8_t hdr[5];
		uint32_t len;

		if (req) {
			if (write_all(fd, req, reqlen) < 0)
				return -1;
			req = NULL;
		}
		if (read_all(fd, (char *)hdr, sizeof(hdr)) < 0)
			return -1;
		len = (uint32_t)hdr[0] | (uint32_t)hdr[1] << 8 | (uint32_t)hdr[2] << 16 |
		      (uint32_t)hdr[3] << 24;
		if (len >= IOBUF || read_all(fd, buf, len) < 0)
			return -1;
		buf[len] = '\0';
		if (hdr[4] == 'J')
			return strstr(buf, "\"ok\":true") && (!expect || strstr(buf, expect)) ? 0 :
												-1;
	}
}

static void *sessiond_worker(void *arg)
{
	struct worker *w = arg;
	const struct opts *o = w->o;
	size_t blen;
	char *body = read_file(o->body_file, &blen), *buf = malloc(IOBUF);
	char *req = malloc(blen + 5);
	int fd = sessiond_connect(o->socket);

	if (!buf || !req)
		die("malloc");
	req[0] = (char)(blen & 0xff);
	req[1] = (char)(blen >> 8 & 0xff);
	req[2] = (char)(blen >> 16 & 0xff);
	req[3] = (char)(blen >> 24 & 0xff);
	req[4] = 'J';
	memcpy(req + 5, body, blen);
	for (long i = 0; w->n < o->count; i++) {
		uint64_t t0;
		int r;

		if (!measured_part_goes_on(w, i))
			break;
		t0 = now_ns();
		r = sessiond_call(fd, req, blen + 5, o->expect, buf);
		if (i >= o->warmup) {
			w->samples[w->n++] = now_ns() - t0;
			if (r < 0)
				w->errors++;
		}
		if (r < 0 && i < o->warmup)
			die("sessiond call");
	}
	w->elapsed = (double)(now_ns() - w->t_start) / 1e9;
	close(fd);
	free(body);
	free(buf);
	free(req);
	return NULL;
}

/* ---- harnesses over their pipes, as sessiond drives them ---- */

/* One interpreter: its pid and the three descriptors sessiond would hold. */
struct harness {
	pid_t pid;		    /* the interpreter */
	int ctl;		    /* control socket (our end) */
	int out;		    /* its fd 1 */
	int err;		    /* its fd 2 */
	unsigned long long next_id; /* the last request id sent */
};

static const char *const harness_env[] = {
	"PATH=/usr/local/bin:/usr/bin:/bin",
	"HOME=/workspace",
	"USER=sandbox",
	"LANG=C.UTF-8",
	"TMPDIR=/tmp",
	"PYTHONDONTWRITEBYTECODE=1",
	"MPLBACKEND=Agg",
	"TERM=dumb",
	NULL,
};

/* Start one harness with the argv sessiond uses (sessiond/manager.c), fds as init sets them. */
static int harness_start(const struct opts *o, struct harness *h)
{
	char script[4096];
	int ctl[2], out[2], err[2];
	pid_t pid;

	if (!strcmp(o->kind, "bash"))
		snprintf(script, sizeof(script), "%s/harness.bash", o->lib);
	else
		snprintf(script, sizeof(script), "%s/harness.py", o->lib);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ctl) < 0 ||
	    pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0)
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		int null_fd = open("/dev/null", O_RDONLY);

		setsid();
		if (null_fd < 0 || dup2(null_fd, 0) < 0 || dup2(out[1], 1) < 0 ||
		    dup2(err[1], 2) < 0 || dup2(ctl[1], 3) < 0 || chdir(o->workdir) < 0)
			_exit(127);
		if (!strcmp(o->kind, "bash"))
			execle("/bin/bash", "bash", "--noprofile", "--norc", script, (char *)NULL,
			       harness_env);
		else
			execle("/usr/bin/python3", "python3", "-I", "-S", "-u", script,
			       (char *)NULL, harness_env);
		_exit(127);
	}
	close(ctl[1]);
	close(out[1]);
	close(err[1]);
	fcntl(out[0], F_SETFL, O_NONBLOCK);
	fcntl(err[0], F_SETFL, O_NONBLOCK);
	*h = (struct harness){ .pid = pid, .ctl = ctl[0], .out = out[0], .err = err[0] };
	return 0;
}

static void harness_stop(struct harness *h)
{
	int status;

	close(h->ctl);
	close(h->out);
	close(h->err);
	if (waitpid(h->pid, &status, 0) < 0)
		kill(h->pid, SIGKILL);
}

/* Read what a pipe holds now into buf (capped), as sessiond's drain_pipe does. */
static void drain(int fd, char *buf, size_t *len, size_t cap)
{
	char tmp[65536];
	ssize_t n;

	while ((n = read(fd, tmp, sizeof(tmp))) > 0) {
		size_t take = (size_t)n < cap - *len ? (size_t)n : cap - *len;

		memcpy(buf + *len, tmp, take);
		*len += take;
	}
}

/* The code as it sits in a request: JSON-escaped for python, raw for bash. */
static char *harness_code(const struct opts *o)
{
	size_t n = strlen(o->code), k = 0;
	char *r = malloc(6 * n + 1);

	if (!r)
		die("malloc");
	if (!strcmp(o->kind, "bash")) {
		memcpy(r, o->code, n + 1);
		return r;
	}
	for (const char *p = o->code; *p; p++) {
		if (*p == '"' || *p == '\\')
			k += (size_t)sprintf(r + k, "\\%c", *p);
		else if (*p == '\n')
			k += (size_t)sprintf(r + k, "\\n");
		else if ((unsigned char)*p < 0x20)
			k += (size_t)sprintf(r + k, "\\u%04x", *p);
		else
			r[k++] = *p;
	}
	r[k] = '\0';
	return r;
}

/* One request with its id, as sessiond's encode_request frames it; returns its length. */
static size_t harness_frame(bool bash, unsigned long long id, const char *code, char *buf,
			    size_t cap)
{
	int n;

	if (bash) {
		n = snprintf(buf, cap, "%llu\n%s", id, code);
		return (size_t)n + 1; /* the NUL ends the request */
	}
	n = snprintf(buf, cap, "{\"id\":%llu,\"code\":\"%s\",\"mode\":\"otari\"}\n", id, code);
	return (size_t)n;
}

/* One request: send it, wait for the reply line, collect the output. 0 if it looks right. */
static int harness_call(struct harness *h, const char *code, bool bash, const char *expect,
			char *line, char *outbuf)
{
	size_t llen = 0, olen = 0, elen = 0;
	char errbuf[4096];
	struct pollfd p[3] = { { h->ctl, POLLIN, 0 },
			       { h->out, POLLIN, 0 },
			       { h->err, POLLIN, 0 } };
	unsigned long long id = ++h->next_id, got;
	size_t reqlen = harness_frame(bash, id, code, line, IOBUF);
	int status;

	if (reqlen >= IOBUF || write_all(h->ctl, line, reqlen) < 0)
		return -1;
	for (;;) {
		if (poll(p, 3, 60000) <= 0)
			return -1;
		if (p[1].revents & POLLIN)
			drain(h->out, outbuf, &olen, IOBUF - 1);
		if (p[2].revents & POLLIN)
			drain(h->err, errbuf, &elen, sizeof(errbuf));
		if (p[0].revents & (POLLIN | POLLHUP)) {
			ssize_t n = read(h->ctl, line + llen, IOBUF - 1 - llen);

			if (n <= 0)
				return -1;
			llen += (size_t)n;
			if (memchr(line, '\n', llen))
				break;
		}
	}
	drain(h->out, outbuf, &olen, IOBUF - 1);
	drain(h->err, errbuf, &elen, sizeof(errbuf));
	outbuf[olen] = '\0';
	line[llen] = '\0';
	/* bash answers "<id> <status>", python a JSON object with the id and return_code. */
	if (bash) {
		if (sscanf(line, "%llu %d", &got, &status) != 2 || got != id || status != 0)
			return -1;
	} else if (!strstr(line, "\"return_code\":0")) {
		return -1;
	}
	return expect && !strstr(outbuf, expect) ? -1 : 0;
}

/* Per thread: one interpreter, started before the clock runs. */
struct harness_worker {
	struct worker w;	  /* the common part */
	struct harness h;	  /* its interpreter */
	pthread_barrier_t *ready; /* every interpreter has answered once */
};

static void *harness_worker(void *arg)
{
	struct harness_worker *hw = arg;
	struct worker *w = &hw->w;
	const struct opts *o = w->o;
	bool bash = !strcmp(o->kind, "bash");
	char *code = harness_code(o), *line = malloc(IOBUF), *out = malloc(IOBUF);
	uint64_t t_start, t_end;

	if (!line || !out)
		die("malloc");
	for (long i = 0; i < o->warmup; i++)
		if (harness_call(&hw->h, code, bash, o->expect, line, out) < 0)
			w->errors++;
	pthread_barrier_wait(hw->ready);
	t_start = now_ns();
	t_end = t_start + (uint64_t)(o->seconds * 1e9);
	while (w->n < o->count && now_ns() < t_end) {
		uint64_t t0 = now_ns();
		int r = harness_call(&hw->h, code, bash, o->expect, line, out);

		w->samples[w->n++] = now_ns() - t0;
		if (r < 0)
			w->errors++;
	}
	w->elapsed = (double)(now_ns() - t_start) / 1e9;
	free(code);
	free(line);
	free(out);
	return NULL;
}

/* ---- process start: fork, exec, wait ---- */

static void spawn_loop(struct worker *w)
{
	const struct opts *o = w->o;
	uint64_t t_start = now_ns(), t_end = t_start + (uint64_t)(o->seconds * 1e9);

	for (long i = 0; w->n < o->count && now_ns() < t_end; i++) {
		uint64_t t0 = now_ns();
		int status;
		pid_t pid = fork();

		if (pid < 0)
			die("fork");
		if (pid == 0) {
			int null_fd = open("/dev/null", O_RDWR);

			dup2(null_fd, 0);
			dup2(null_fd, 1);
			execve(o->argv[0], o->argv, (char **)harness_env);
			_exit(127);
		}
		if (waitpid(pid, &status, 0) < 0)
			die("waitpid");
		if (i < o->warmup)
			continue;
		w->samples[w->n++] = now_ns() - t0;
		if (!WIFEXITED(status) || WEXITSTATUS(status))
			w->errors++;
	}
	w->elapsed = (double)(now_ns() - t_start) / 1e9;
}

/* Harness start: exec, first request answered. */
static void harness_start_loop(struct worker *w)
{
	const struct opts *o = w->o;
	bool bash = !strcmp(o->kind, "bash");
	char *code = harness_code(o), *line = malloc(IOBUF), *out = malloc(IOBUF);
	uint64_t t_start = now_ns(), t_end = t_start + (uint64_t)(o->seconds * 1e9);

	if (!line || !out)
		die("malloc");
	for (long i = 0; w->n < o->count && now_ns() < t_end; i++) {
		struct harness h;
		uint64_t t0 = now_ns();
		int r;

		if (harness_start(o, &h) < 0)
			die("harness start");
		r = harness_call(&h, code, bash, o->expect, line, out);
		if (i >= o->warmup) {
			w->samples[w->n++] = now_ns() - t0;
			w->errors += r < 0;
		}
		harness_stop(&h);
	}
	w->elapsed = (double)(now_ns() - t_start) / 1e9;
	free(code);
	free(line);
	free(out);
}

/* ---- one hop: a request and its reply between two processes, and nothing else ---- */

/* The far end of the hop: waits in epoll, as an event loop does, and answers each request
 * with as many bytes as it got. */
static _Noreturn void hop_echo(int fd, size_t size)
{
	char *buf = malloc(size);
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = { .events = EPOLLIN };

	if (!buf || ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
		_exit(1);
	for (;;) {
		if (epoll_wait(ep, &ev, 1, -1) < 0) {
			if (errno == EINTR)
				continue;
			_exit(1);
		}
		if (read_all(fd, buf, size) < 0)
			_exit(0);
		if (write_all(fd, buf, size) < 0)
			_exit(1);
	}
}

/* The round trip one more process on a request's path costs at least: a unix stream socket,
 * a client that waits in poll(), an epoll loop on the other end, a request and reply of
 * o->size bytes. */
static void hop_loop(struct worker *w)
{
	const struct opts *o = w->o;
	size_t size = (size_t)o->size;
	char *buf = calloc(1, size);
	int sv[2], status;
	pid_t pid;

	if (!buf || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		die("hop setup");
	pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		close(sv[0]);
		hop_echo(sv[1], size);
	}
	close(sv[1]);
	for (long i = 0; w->n < o->count && measured_part_goes_on(w, i); i++) {
		uint64_t t0 = now_ns();

		/* The reply is waited for in poll(), as the worker waits for sessiond's: a reader
		 * asleep in read() is woken for nothing when the far end reads the request. */
		struct pollfd p = { .fd = sv[0], .events = POLLIN };

		if (write_all(sv[0], buf, size) < 0 || poll(&p, 1, -1) < 0 ||
		    read_all(sv[0], buf, size) < 0)
			die("hop");
		if (i >= o->warmup)
			w->samples[w->n++] = now_ns() - t0;
	}
	w->elapsed = (double)(now_ns() - w->t_start) / 1e9;
	close(sv[0]);
	if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status))
		w->errors++;
	free(buf);
}

/* ---- main ---- */

static void usage(void)
{
	fputs("usage: pdload http --port P --method M --path PATH [--body FILE] [--header H]...\n"
	      "       pdload sessiond --socket PATH --body FILE (one JSON request)\n"
	      "       pdload harness --kind python|bash --lib DIR --code CODE [--procs K]\n"
	      "       pdload harness-start --kind python|bash --lib DIR --code CODE\n"
	      "       pdload spawn -- COMMAND...\n"
	      "       pdload hop [--size BYTES] (a request and reply to a child process)\n"
	      "common: -n COUNT -t SECONDS [--warmup W] [--expect TEXT] [--out FILE]\n"
	      "Prints one JSON line: count, errors, elapsed seconds, requests per second.\n",
	      stderr);
	exit(2);
}

static void parse(int argc, char **argv, struct opts *o)
{
	static const struct option longs[] = {
		{ "port", required_argument, NULL, 'p' },
		{ "method", required_argument, NULL, 'm' },
		{ "path", required_argument, NULL, 'P' },
		{ "body", required_argument, NULL, 'b' },
		{ "header", required_argument, NULL, 'H' },
		{ "expect", required_argument, NULL, 'x' },
		{ "socket", required_argument, NULL, 'S' },
		{ "kind", required_argument, NULL, 'k' },
		{ "lib", required_argument, NULL, 'l' },
		{ "code", required_argument, NULL, 'c' },
		{ "procs", required_argument, NULL, 'K' },
		{ "warmup", required_argument, NULL, 'w' },
		{ "out", required_argument, NULL, 'o' },
		{ "workdir", required_argument, NULL, 'd' },
		{ "size", required_argument, NULL, 's' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	if (argc < 2)
		usage();
	*o = (struct opts){ .mode = argv[1],
			    .method = "GET",
			    .path = "/",
			    .procs = 1,
			    .count = 1000,
			    .seconds = 10,
			    .kind = "python",
			    .code = "print(1)",
			    .workdir = "/tmp",
			    .size = 200 };
	optind = 2;
	while ((c = getopt_long(argc, argv, "n:t:", longs, NULL)) != -1) {
		switch (c) {
		case 'p': o->port = atoi(optarg); break;
		case 'm': o->method = optarg; break;
		case 'P': o->path = optarg; break;
		case 'b': o->body_file = optarg; break;
		case 'H':
			if (o->nheaders == MAX_HEADERS)
				usage();
			o->headers[o->nheaders++] = optarg;
			break;
		case 'x': o->expect = optarg; break;
		case 'S': o->socket = optarg; break;
		case 'k': o->kind = optarg; break;
		case 'l': o->lib = optarg; break;
		case 'c': o->code = optarg; break;
		case 'K': o->procs = atoi(optarg); break;
		case 'w': o->warmup = atol(optarg); break;
		case 'o': o->out = optarg; break;
		case 'd': o->workdir = optarg; break;
		case 's': o->size = atoi(optarg); break;
		case 'n': o->count = atol(optarg); break;
		case 't': o->seconds = atof(optarg); break;
		default: usage();
		}
	}
	o->argv = argv + optind;
	if (o->procs < 1 || o->procs > MAX_PROCS || o->count < 1 || o->size < 1 ||
	    o->size > (int)IOBUF)
		usage();
	if (!strcmp(o->mode, "spawn") && !o->argv[0])
		usage();
	if (!strcmp(o->mode, "sessiond") && (!o->socket || !o->body_file))
		usage();
	if ((!strcmp(o->mode, "harness") || !strcmp(o->mode, "harness-start")) && !o->lib)
		usage();
}

static void report(const struct opts *o, struct worker *ws, int nw)
{
	long n = 0, errors = 0, reconnects = 0;
	double elapsed = 0;
	struct rusage ru;
	FILE *f = o->out ? fopen(o->out, "w") : NULL;

	if (o->out && !f)
		die(o->out);
	for (int i = 0; i < nw; i++) {
		n += ws[i].n;
		errors += ws[i].errors;
		reconnects += ws[i].reconnects;
		if (ws[i].elapsed > elapsed)
			elapsed = ws[i].elapsed;
		for (long j = 0; f && j < ws[i].n; j++)
			fprintf(f, "%llu\n", (unsigned long long)ws[i].samples[j]);
	}
	if (f)
		fclose(f);
	/* pdload's own CPU, apart from what it started (a harness, the hop's far end): the
	 * driver's share of a floor. */
	if (getrusage(RUSAGE_SELF, &ru) < 0)
		die("getrusage");
	printf("{\"count\": %ld, \"errors\": %ld, \"reconnects\": %ld, \"elapsed\": %.6f, "
	       "\"rate\": %.3f, \"self_cpu_s\": %.6f}\n",
	       n, errors, reconnects, elapsed, elapsed > 0 ? (double)n / elapsed : 0.0,
	       (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
		       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6);
}

int main(int argc, char **argv)
{
	struct opts o;
	struct worker *ws;
	int nw;

	signal(SIGPIPE, SIG_IGN);
	parse(argc, argv, &o);
	nw = strcmp(o.mode, "harness") ? 1 : o.procs;
	ws = calloc((size_t)nw, sizeof(*ws));
	if (!ws)
		die("calloc");
	for (int i = 0; i < nw; i++) {
		ws[i] = (struct worker){ .o = &o, .idx = i };
		ws[i].samples = calloc((size_t)o.count, sizeof(uint64_t));
		if (!ws[i].samples)
			die("calloc");
	}
	if (!strcmp(o.mode, "http")) {
		http_worker(&ws[0]);
	} else if (!strcmp(o.mode, "sessiond")) {
		sessiond_worker(&ws[0]);
	} else if (!strcmp(o.mode, "spawn")) {
		spawn_loop(&ws[0]);
	} else if (!strcmp(o.mode, "hop")) {
		hop_loop(&ws[0]);
	} else if (!strcmp(o.mode, "harness-start")) {
		harness_start_loop(&ws[0]);
	} else if (!strcmp(o.mode, "harness")) {
		struct harness_worker *hw = calloc((size_t)nw, sizeof(*hw));
		pthread_t *th = calloc((size_t)nw, sizeof(*th));
		pthread_barrier_t ready;

		if (!hw || !th || pthread_barrier_init(&ready, NULL, (unsigned)nw))
			die("threads");
		for (int i = 0; i < nw; i++) {
			hw[i].w = ws[i];
			hw[i].ready = &ready;
			if (harness_start(&o, &hw[i].h) < 0)
				die("harness start");
		}
		for (int i = 0; i < nw; i++)
			if (pthread_create(&th[i], NULL, harness_worker, &hw[i]))
				die("pthread_create");
		for (int i = 0; i < nw; i++) {
			pthread_join(th[i], NULL);
			harness_stop(&hw[i].h);
			ws[i] = hw[i].w;
		}
		pthread_barrier_destroy(&ready);
		free(hw);
		free(th);
	} else {
		usage();
	}
	report(&o, ws, nw);
	for (int i = 0; i < nw; i++)
		free(ws[i].samples);
	free(ws);
	return 0;
}
