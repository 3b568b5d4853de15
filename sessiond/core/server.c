/* SPDX-License-Identifier: MIT */
/* Worker connections: peer check, frame decoding, one request at a time, buffered replies. */
#include "server.h"

#include <errno.h>
#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "cleanup.h"
#include "listen.h"
#include "log.h"
#include "proto.h"
#include "reply.h"

#define REQUEST_MAX_DEPTH 64

struct Server {
	Loop *loop;
	int fd;		  /* the listening socket */
	LoopSource *src;  /* its watch */
	uid_t worker_uid; /* allowed peer uid besides 0 */
	gid_t group;	  /* allowed peer gid */
	server_request_cb on_req;
	server_closed_cb on_closed;
	void *data;	/* passed to the callbacks */
	Conn *conns;	/* live connections */
	size_t n_conns; /* how many */
};

struct Conn {
	Server *srv;
	int fd;
	LoopSource *src;
	uint8_t *in; /* received bytes not yet decoded */
	size_t in_len, in_cap;
	uint8_t *out; /* encoded reply bytes not yet sent */
	size_t out_len, out_off;
	size_t last_data; /* offset in out of the last frame if it is PROTO_DATA, else SIZE_MAX */
	int out_fds[PROTO_MAX_FDS]; /* fds to attach to the first byte of out */
	size_t out_nfds;
	bool busy;	  /* a request is being handled */
	bool mute_in;	  /* bytes came while busy: not watched until the reply */
	bool closing;	  /* close once out is flushed */
	bool dispatching; /* inside the request callback: defer frees */
	bool dead;	  /* freed while dispatching; free on return */
	void *data;	  /* the handler's per-connection state */
	uid_t peer_uid;	  /* who connected */
	Conn *prev, *next;
};

static void conn_free(Conn *c)
{
	Server *s = c->srv;

	if (c->dispatching) {
		c->dead = true;
		return;
	}
	if (s->on_closed)
		s->on_closed(s->data, c);
	loop_remove(s->loop, c->src);
	close(c->fd);
	for (size_t i = 0; i < c->out_nfds; i++)
		close(c->out_fds[i]);
	if (c->prev)
		c->prev->next = c->next;
	else
		s->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	s->n_conns--;
	free(c->in);
	free(c->out);
	free(c);
}

static uint32_t conn_events(const Conn *c)
{
	uint32_t ev = EPOLLRDHUP;

	/* One request at a time, but readability stays watched while one is handled, so that
	 * taking a request and answering it cost no epoll_ctl; bytes that come meanwhile mute
	 * it until the reply (on_conn_event). */
	if (!c->closing && !(c->busy && c->mute_in))
		ev |= EPOLLIN;
	if (c->out_off < c->out_len)
		ev |= EPOLLOUT;
	return ev;
}

/* Send what is pending; false when the connection had to be closed. */
static bool conn_flush(Conn *c)
{
	while (c->out_off < c->out_len) {
		union {
			char buf[CMSG_SPACE(sizeof(int) * PROTO_MAX_FDS)];
			struct cmsghdr align;
		} cbuf;
		struct iovec iov = { c->out + c->out_off, c->out_len - c->out_off };
		struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
		ssize_t n;

		if (c->out_nfds > 0) {
			struct cmsghdr *cm;

			memset(&cbuf, 0, sizeof(cbuf));
			msg.msg_control = cbuf.buf;
			msg.msg_controllen = CMSG_SPACE(sizeof(int) * c->out_nfds);
			cm = CMSG_FIRSTHDR(&msg);
			cm->cmsg_level = SOL_SOCKET;
			cm->cmsg_type = SCM_RIGHTS;
			cm->cmsg_len = CMSG_LEN(sizeof(int) * c->out_nfds);
			memcpy(CMSG_DATA(cm), c->out_fds, sizeof(int) * c->out_nfds);
		}
		n = sendmsg(c->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				break;
			conn_free(c);
			return false;
		}
		for (size_t i = 0; i < c->out_nfds; i++)
			close(c->out_fds[i]);
		c->out_nfds = 0;
		c->out_off += (size_t)n;
	}
	if (c->out_off == c->out_len) {
		c->out_off = c->out_len = 0;
		c->last_data = SIZE_MAX;
		if (c->closing) {
			conn_free(c);
			return false;
		}
	}
	loop_modify_fd(c->srv->loop, c->src, conn_events(c));
	return true;
}

/* Queue a frame whose payload is head (head_len bytes, may be 0) then payload. */
static int conn_queue_frame(Conn *c, uint8_t type, const void *head, size_t head_len,
			    const void *payload, size_t len)
{
	size_t need = c->out_len + PROTO_HEADER_SIZE + head_len + len;
	uint8_t *grown, *p;

	if (head_len + len > PROTO_MAX_PAYLOAD)
		return -EMSGSIZE;
	grown = realloc(c->out, need);
	if (!grown)
		return -ENOMEM;
	c->out = grown;
	p = c->out + c->out_len;
	proto_header_encode(p, type, (uint32_t)(head_len + len));
	if (head_len)
		memcpy(p + PROTO_HEADER_SIZE, head, head_len);
	if (len)
		memcpy(p + PROTO_HEADER_SIZE + head_len, payload, len);
	c->out_len = need;
	return 0;
}

/* Grow the last queued frame, a PROTO_DATA one of stream not yet begun to be sent, by
 * data; false when there is no such frame. */
static bool conn_join_data(Conn *c, uint8_t stream, const void *data, size_t len)
{
	size_t at = c->last_data, plen;
	uint8_t *grown, type;

	if (at == SIZE_MAX || at < c->out_off || c->out[at + PROTO_HEADER_SIZE] != stream ||
	    proto_frame_parse(c->out + at, c->out_len - at, &type, &plen) <= 0 ||
	    plen + len > PROTO_MAX_PAYLOAD)
		return false;
	grown = realloc(c->out, c->out_len + len);
	if (!grown)
		return false;
	c->out = grown;
	memcpy(c->out + c->out_len, data, len);
	c->out_len += len;
	proto_header_encode(c->out + at, PROTO_DATA, (uint32_t)(plen + len));
	return true;
}

int conn_send_data(Conn *c, uint8_t stream, const void *data, size_t len, size_t backlog)
{
	size_t at = c->out_len;
	int r;

	if (c->closing)
		return -EPIPE;
	if (c->out_len - c->out_off > backlog)
		return -ENOBUFS;
	if (!conn_join_data(c, stream, data, len)) {
		r = conn_queue_frame(c, PROTO_DATA, &stream, 1, data, len);
		if (r < 0)
			return r;
		c->last_data = at;
	}
	return conn_flush(c) ? 0 : -EPIPE;
}

/* What a reply that could not be built whole is answered with: made without allocating. */
static const char incomplete_reply[] =
	"{\"ok\":false,\"error\":\"unavailable\",\"detail\":\"the session daemon is out of memory\"}";

/* What a reply too large for one frame is answered with: a call's output and notebook
 * objects are each bounded, but what they grow to once escaped may still not fit. */
static const char oversized_reply[] =
	"{\"ok\":false,\"error\":\"too_large\",\"detail\":\"the reply would be larger than "
	"the 32 MiB one reply may carry: the call's output or display data is too large\"}";
_Static_assert(PROTO_MAX_PAYLOAD == 32u << 20, "oversized_reply names the frame's limit");

/* Queue the reply's text (NULL: the error above) with its fds, and send what it can. */
static void queue_reply(Conn *c, const char *txt, size_t len, int *fds, size_t nfds)
{
	int r;

	if (!txt) {
		txt = incomplete_reply;
		len = sizeof(incomplete_reply) - 1;
	}
	c->busy = false;
	c->mute_in = false;
	r = conn_queue_frame(c, PROTO_JSON, NULL, 0, txt, len);
	if (r == -EMSGSIZE) {
		log_warn("a reply of %zu bytes is larger than a frame: answered with an error",
			 len);
		/* What came with the reply goes with it. */
		for (size_t i = 0; i < nfds; i++)
			close(fds[i]);
		nfds = 0;
		r = conn_queue_frame(c, PROTO_JSON, NULL, 0, oversized_reply,
				     sizeof(oversized_reply) - 1);
	}
	c->last_data = SIZE_MAX;
	if (r < 0) {
		log_err("cannot queue a reply: %s", strerror(-r));
		for (size_t i = 0; i < nfds; i++)
			close(fds[i]);
		c->closing = true;
	} else {
		for (size_t i = 0; i < nfds && c->out_nfds < PROTO_MAX_FDS; i++)
			c->out_fds[c->out_nfds++] = fds[i];
	}
	conn_flush(c);
}

void conn_reply(Conn *c, struct json_object *reply, int *fds, size_t nfds)
{
	_cleanup_(json_text_clear) JsonText t = { .buf = NULL };

	if (!json_incomplete(reply))
		json_text_add_value(&t, reply);
	else
		log_err("a reply could not be built (out of memory): answered with an error");
	json_object_put(reply);
	queue_reply(c, t.failed ? NULL : t.buf, t.len, fds, nfds);
}

void conn_reply_text(Conn *c, const char *txt, size_t len)
{
	if (!txt)
		log_err("a reply could not be built (out of memory): answered with an error");
	queue_reply(c, txt, len, NULL, 0);
}

uid_t conn_peer_uid(const Conn *c)
{
	return c->peer_uid;
}

size_t conn_server_connections(const Conn *c)
{
	return c->srv->n_conns;
}

void *conn_get_data(Conn *c)
{
	return c->data;
}

void conn_set_data(Conn *c, void *data)
{
	c->data = data;
}

/* Decode one request from the input buffer, if whole. false when the conn was closed. */
static bool conn_take_request(Conn *c)
{
	struct json_object *req;
	uint8_t type;
	size_t plen;
	ssize_t n = proto_frame_parse(c->in, c->in_len, &type, &plen);

	if (n == 0)
		return true;
	if (n < 0 || type != PROTO_JSON) {
		log_warn("dropping a worker connection: malformed frame");
		conn_free(c);
		return false;
	}
	req = json_in_parse_quick((const char *)c->in + PROTO_HEADER_SIZE, plen, REQUEST_MAX_DEPTH);
	memmove(c->in, c->in + n, c->in_len - (size_t)n);
	c->in_len -= (size_t)n;
	if (!req || !json_object_is_type(req, json_type_object)) {
		json_object_put(req);
		log_warn("dropping a worker connection: request is not a JSON object");
		conn_free(c);
		return false;
	}
	c->busy = true;
	loop_modify_fd(c->srv->loop, c->src, conn_events(c));
	c->dispatching = true;
	c->srv->on_req(c->srv->data, c, req);
	c->dispatching = false;
	if (c->dead) {
		conn_free(c);
		return false;
	}
	return true;
}

static void conn_read(Conn *c)
{
	for (;;) {
		ssize_t n;

		if (c->in_cap - c->in_len < 65536) {
			size_t cap = c->in_cap ? c->in_cap * 2 : 65536;
			uint8_t *grown;

			if (cap > PROTO_MAX_PAYLOAD + PROTO_HEADER_SIZE + 65536) {
				conn_free(c);
				return;
			}
			grown = realloc(c->in, cap);
			if (!grown) {
				conn_free(c);
				return;
			}
			c->in = grown;
			c->in_cap = cap;
		}
		n = read(c->fd, c->in + c->in_len, c->in_cap - c->in_len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				break;
			conn_free(c);
			return;
		}
		if (n == 0) {
			conn_free(c);
			return;
		}
		c->in_len += (size_t)n;
		if (!conn_take_request(c) || c->busy)
			return;
	}
}

static void on_conn_event(Loop *l, int fd, uint32_t events, void *data)
{
	Conn *c = data;

	(void)l;
	(void)fd;
	if (events & (EPOLLERR | EPOLLHUP)) {
		conn_free(c);
		return;
	}
	if ((events & EPOLLOUT) && !conn_flush(c))
		return;
	if (events & EPOLLIN) {
		if (!c->busy) {
			conn_read(c);
			return;
		}
		/* More while a request is in hand: it waits in the socket, unwatched. */
		c->mute_in = true;
		loop_modify_fd(c->srv->loop, c->src, conn_events(c));
	}
	/* Peer shut down its side while we still owe a reply: finish the reply, then close. */
	if (events & EPOLLRDHUP) {
		if (c->busy || c->out_len > c->out_off) {
			c->closing = true;
			if (!c->busy)
				conn_flush(c);
			else
				loop_modify_fd(c->srv->loop, c->src, conn_events(c) & ~EPOLLRDHUP);
		} else {
			conn_free(c);
		}
	}
}

static bool peer_allowed(Server *s, int fd, uid_t *uid)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
		return false;
	*uid = cred.uid;
	return cred.uid == 0 || (s->worker_uid != (uid_t)-1 && cred.uid == s->worker_uid) ||
	       (s->group != (gid_t)-1 && cred.gid == s->group);
}

static void on_accept(Loop *l, int fd, uint32_t events, void *data)
{
	Server *s = data;

	(void)events;
	for (;;) {
		int cfd = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		Conn *c;
		uid_t uid = (uid_t)-1;

		if (cfd < 0) {
			if (errno != EAGAIN && errno != EINTR)
				log_warn("accept: %m");
			return;
		}
		if (!peer_allowed(s, cfd, &uid)) {
			log_warn("refused a connection from a peer outside the worker group");
			close(cfd);
			continue;
		}
		c = calloc(1, sizeof(*c));
		if (!c) {
			close(cfd);
			continue;
		}
		c->srv = s;
		c->fd = cfd;
		c->peer_uid = uid;
		c->last_data = SIZE_MAX;
		if (loop_add_fd(l, cfd, EPOLLIN | EPOLLRDHUP, on_conn_event, c, &c->src) < 0) {
			close(cfd);
			free(c);
			continue;
		}
		c->next = s->conns;
		if (s->conns)
			s->conns->prev = c;
		s->conns = c;
		s->n_conns++;
	}
}

int server_new(Loop *l, const char *path, uid_t worker_uid, gid_t group, server_request_cb on_req,
	       server_closed_cb on_closed, void *data, Server **ret)
{
	Server *s = calloc(1, sizeof(*s));
	int r;

	if (!s)
		return -ENOMEM;
	*s = (Server){ .loop = l,
		       .worker_uid = worker_uid,
		       .group = group,
		       .on_req = on_req,
		       .on_closed = on_closed,
		       .data = data };
	s->fd = listen_unix_at(path, 0660, group, 256, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (s->fd < 0) {
		r = s->fd;
		free(s);
		return r;
	}
	r = loop_add_fd(l, s->fd, EPOLLIN, on_accept, s, &s->src);
	if (r < 0) {
		close(s->fd);
		free(s);
		return r;
	}
	*ret = s;
	return 0;
}

Server *server_free(Server *s)
{
	if (!s)
		return NULL;
	while (s->conns)
		conn_free(s->conns);
	loop_remove(s->loop, s->src);
	close(s->fd);
	free(s);
	return NULL;
}
