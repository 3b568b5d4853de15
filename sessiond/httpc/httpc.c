/* SPDX-License-Identifier: MIT */
/*
 * libcurl's multi interface driven by the daemon's loop: curl says which sockets to watch
 * and when to wake it (the socket and timer callbacks), the loop tells curl what happened,
 * and finished transfers are handed to their callbacks from there.
 */
#include "httpc.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "log.h"

struct HttpCall {
	HttpClient *c;
	CURL *easy;
	struct curl_slist *headers;
	char *buf; /* the answer's body so far */
	size_t len, cap, max;
	bool too_large;
	char err[CURL_ERROR_SIZE];
	httpc_done_cb cb;
	void *data;
	HttpCall *prev, *next;
};

struct HttpClient {
	Loop *loop;
	CURLM *multi;
	LoopSource *timer; /* curl's next timeout */
	HttpCall *calls;   /* in flight */
	size_t n;
};

static void call_free(HttpCall *call)
{
	HttpClient *c = call->c;

	curl_multi_remove_handle(c->multi, call->easy);
	curl_easy_cleanup(call->easy);
	curl_slist_free_all(call->headers);
	if (call->prev)
		call->prev->next = call->next;
	else
		c->calls = call->next;
	if (call->next)
		call->next->prev = call->prev;
	c->n--;
	free(call->buf);
	free(call);
}

/* Transfers curl has finished: to their callbacks, then freed. */
static void collect_done(HttpClient *c)
{
	CURLMsg *msg;
	int left;

	while ((msg = curl_multi_info_read(c->multi, &left))) {
		HttpCall *call = NULL;
		HttpResult r = { 0 };
		CURLcode code = msg->data.result;

		if (msg->msg != CURLMSG_DONE)
			continue;
		curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&call);
		if (code == CURLE_OK) {
			r.ok = true;
			curl_easy_getinfo(call->easy, CURLINFO_RESPONSE_CODE, &r.status);
			r.body = call->buf ? call->buf : "";
			r.len = call->len;
		} else {
			r.timed_out = code == CURLE_OPERATION_TIMEDOUT;
			r.too_large = call->too_large;
			r.problem = r.too_large	 ? "the answer is larger than allowed" :
				    call->err[0] ? call->err :
						   curl_easy_strerror(code);
		}
		call->cb(call->data, &r);
		call_free(call);
	}
}

static void on_socket(Loop *l, int fd, uint32_t events, void *data)
{
	HttpClient *c = data;
	int flags = 0, running;

	(void)l;
	if (events & EPOLLIN)
		flags |= CURL_CSELECT_IN;
	if (events & EPOLLOUT)
		flags |= CURL_CSELECT_OUT;
	if (events & (EPOLLERR | EPOLLHUP))
		flags |= CURL_CSELECT_ERR;
	curl_multi_socket_action(c->multi, fd, flags, &running);
	collect_done(c);
}

static void on_timeout(Loop *l, void *data)
{
	HttpClient *c = data;
	int running;

	(void)l;
	c->timer = NULL;
	curl_multi_socket_action(c->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	collect_done(c);
}

/* CURLMOPT_SOCKETFUNCTION: watch s for what curl waits on; socketp is its loop source. */
static int socket_cb(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp)
{
	HttpClient *c = userp;
	LoopSource *src = socketp;
	uint32_t events =
		(what & CURL_POLL_IN ? EPOLLIN : 0) | (what & CURL_POLL_OUT ? EPOLLOUT : 0);

	(void)easy;
	if (what == CURL_POLL_REMOVE) {
		loop_remove(c->loop, src);
		curl_multi_assign(c->multi, s, NULL);
		return 0;
	}
	if (src)
		return loop_modify_fd(c->loop, src, events) < 0 ? -1 : 0;
	if (loop_add_fd(c->loop, s, events, on_socket, c, &src) < 0)
		return -1;
	curl_multi_assign(c->multi, s, src);
	return 0;
}

/* CURLMOPT_TIMERFUNCTION: one timer, moved whenever curl asks; -1 stops it. */
static int timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
	HttpClient *c = userp;

	(void)multi;
	c->timer = loop_remove(c->loop, c->timer);
	if (timeout_ms < 0)
		return 0;
	return loop_add_timer(c->loop, (uint64_t)timeout_ms, on_timeout, c, &c->timer) < 0 ? -1 : 0;
}

int httpc_new(Loop *l, HttpClient **ret)
{
	HttpClient *c;

	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		return -EIO;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->loop = l;
	c->multi = curl_multi_init();
	if (!c->multi) {
		free(c);
		return -ENOMEM;
	}
	curl_multi_setopt(c->multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
	curl_multi_setopt(c->multi, CURLMOPT_SOCKETDATA, c);
	curl_multi_setopt(c->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
	curl_multi_setopt(c->multi, CURLMOPT_TIMERDATA, c);
	*ret = c;
	return 0;
}

HttpClient *httpc_free(HttpClient *c)
{
	if (!c)
		return NULL;
	while (c->calls)
		call_free(c->calls);
	curl_multi_cleanup(c->multi);
	loop_remove(c->loop, c->timer);
	free(c);
	return NULL;
}

/* CURLOPT_WRITEFUNCTION: keep the body up to max; past it, end the transfer. */
static size_t on_body(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	HttpCall *call = userdata;
	size_t n = size * nmemb;

	if (call->len + n > call->max) {
		call->too_large = true;
		return 0;
	}
	if (call->len + n + 1 > call->cap) {
		size_t cap = call->cap ? call->cap : 4096;
		char *grown;

		while (cap < call->len + n + 1)
			cap *= 2;
		grown = realloc(call->buf, cap);
		if (!grown)
			return 0;
		call->buf = grown;
		call->cap = cap;
	}
	memcpy(call->buf + call->len, ptr, n);
	call->len += n;
	call->buf[call->len] = '\0';
	return n;
}

static int call_setup(HttpCall *call, const HttpPost *p)
{
	CURL *e = call->easy;
	char *auth = NULL;
	int r = 0;

	call->headers = curl_slist_append(NULL, "Content-Type: application/json");
	if (!call->headers)
		return -ENOMEM;
	if (p->bearer) {
		struct curl_slist *h = NULL;

		if (asprintf(&auth, "Authorization: Bearer %s", p->bearer) >= 0)
			h = curl_slist_append(call->headers, auth);
		free(auth);
		if (!h)
			return -ENOMEM;
		call->headers = h;
	}
	/* No signals (the loop owns them), no redirects, http(s) only, the body copied. */
	if (curl_easy_setopt(e, CURLOPT_URL, p->url) != CURLE_OK ||
	    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https") != CURLE_OK ||
	    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L) != CURLE_OK ||
	    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L) != CURLE_OK ||
	    curl_easy_setopt(e, CURLOPT_HTTPHEADER, call->headers) != CURLE_OK ||
	    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)p->len) != CURLE_OK ||
	    curl_easy_setopt(e, CURLOPT_COPYPOSTFIELDS, p->body) != CURLE_OK ||
	    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)p->timeout_ms) != CURLE_OK ||
	    curl_easy_setopt(e, CURLOPT_USERAGENT, "paddock") != CURLE_OK ||
	    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body) != CURLE_OK ||
	    curl_easy_setopt(e, CURLOPT_WRITEDATA, call) != CURLE_OK ||
	    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, call->err) != CURLE_OK ||
	    curl_easy_setopt(e, CURLOPT_PRIVATE, call) != CURLE_OK)
		r = -EINVAL;
	return r;
}

HttpCall *httpc_post_json(HttpClient *c, const HttpPost *p, httpc_done_cb cb, void *data)
{
	HttpCall *call = calloc(1, sizeof(*call));

	if (!call)
		return NULL;
	call->c = c;
	call->cb = cb;
	call->data = data;
	call->max = p->max_reply;
	call->easy = curl_easy_init();
	if (!call->easy || call_setup(call, p) < 0 ||
	    curl_multi_add_handle(c->multi, call->easy) != CURLM_OK) {
		curl_slist_free_all(call->headers);
		if (call->easy)
			curl_easy_cleanup(call->easy);
		free(call);
		return NULL;
	}
	call->next = c->calls;
	if (c->calls)
		c->calls->prev = call;
	c->calls = call;
	c->n++;
	return call;
}

void httpc_cancel(HttpCall *call)
{
	if (call)
		call_free(call);
}

size_t httpc_in_flight(const HttpClient *c)
{
	return c ? c->n : 0;
}

char *httpc_canonical_url(const char *url, const char **why)
{
	CURLU *u = curl_url();
	char *scheme = NULL, *part = NULL, *out = NULL;

	*why = NULL;
	if (!u) {
		*why = "out of memory";
		return NULL;
	}
	if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK)
		*why = "callback_url is not a URL";
	else if (curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
		 (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0))
		*why = "callback_url must be an http or https URL";
	else if (curl_url_get(u, CURLUPART_USER, &part, 0) == CURLUE_OK ||
		 curl_url_get(u, CURLUPART_PASSWORD, &part, 0) == CURLUE_OK)
		*why = "callback_url must not hold a user name or password";
	else if (curl_url_set(u, CURLUPART_FRAGMENT, NULL, 0) != CURLUE_OK ||
		 curl_url_get(u, CURLUPART_URL, &out, 0) != CURLUE_OK)
		*why = "callback_url is not a URL";
	curl_free(scheme);
	curl_free(part);
	curl_url_cleanup(u);
	if (*why) {
		curl_free(out);
		return NULL;
	}
	/* Ours to free with free(): curl's allocator is the C library's, but say so once. */
	{
		char *copy = strdup(out);

		curl_free(out);
		if (!copy)
			*why = "out of memory";
		return copy;
	}
}
