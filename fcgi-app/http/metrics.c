/* SPDX-License-Identifier: MIT */
/* GET /metrics: the daemon's Prometheus text plus the worker's own request counters. */
#include "metrics.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "cleanup.h"
#include "json.h"
#include "log.h"

#define SLOTS_MAX 48

/* Upper bounds of the latency buckets, milliseconds; +Inf is implicit. */
static const int64_t bucket_ms[] = { 5,	   10,	 25,   50,    100,   250,   500,
				     1000, 2500, 5000, 10000, 30000, 60000, 300000 };
#define BUCKETS ARRAY_SIZE(bucket_ms)

/* Counters of one route; updated with relaxed atomics from every thread. */
struct slot {
	const char *name;	       /* the route's name (static); "-" for no route */
	uint64_t by_class[6];	       /* requests by status class: [2] = 2xx ... [5] = 5xx */
	uint64_t buckets[BUCKETS + 1]; /* non-cumulative; the last one is above every bound */
	uint64_t sum_ms;	       /* total duration */
};

static struct slot slots[SLOTS_MAX];
static size_t n_slots; /* published with release, read with acquire */
static pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;

static struct slot *slot_find(const char *name)
{
	size_t n = __atomic_load_n(&n_slots, __ATOMIC_ACQUIRE);

	for (size_t i = 0; i < n; i++)
		if (strcmp(slots[i].name, name) == 0)
			return &slots[i];
	return NULL;
}

static struct slot *slot_get(const char *name)
{
	struct slot *s = slot_find(name);

	if (s)
		return s;
	pthread_mutex_lock(&slots_lock);
	s = slot_find(name);
	if (!s && n_slots < SLOTS_MAX) {
		s = &slots[n_slots];
		s->name = name;
		__atomic_store_n(&n_slots, n_slots + 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&slots_lock);
	return s;
}

void metrics_observe(const char *route, int status, int64_t ms)
{
	struct slot *s = slot_get(route ? route : "-");
	size_t b = 0;

	if (!s)
		return;
	if (ms < 0)
		ms = 0;
	while (b < BUCKETS && ms > bucket_ms[b])
		b++;
	__atomic_fetch_add(&s->by_class[status >= 200 && status < 600 ? status / 100 : 5], 1,
			   __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->buckets[b], 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->sum_ms, (uint64_t)ms, __ATOMIC_RELAXED);
}

/* The worker's own series. */
static void write_worker(FILE *f, const App *app)
{
	size_t n = __atomic_load_n(&n_slots, __ATOMIC_ACQUIRE);

	fprintf(f,
		"# HELP paddock_fcgi_threads FastCGI worker threads.\n"
		"# TYPE paddock_fcgi_threads gauge\npaddock_fcgi_threads %zu\n",
		app->threads);
	fprintf(f, "# HELP paddock_http_requests_total Requests answered by the worker, by route "
		   "and status class.\n# TYPE paddock_http_requests_total counter\n");
	for (size_t i = 0; i < n; i++)
		for (int c = 2; c <= 5; c++)
			fprintf(f,
				"paddock_http_requests_total{route=\"%s\",code=\"%dxx\"} %" PRIu64
				"\n",
				slots[i].name, c,
				__atomic_load_n(&slots[i].by_class[c], __ATOMIC_RELAXED));
	fprintf(f, "# HELP paddock_http_request_duration_seconds Time from the worker's accept "
		   "to the last byte, by route.\n"
		   "# TYPE paddock_http_request_duration_seconds histogram\n");
	for (size_t i = 0; i < n; i++) {
		uint64_t cum = 0;

		for (size_t b = 0; b <= BUCKETS; b++) {
			cum += __atomic_load_n(&slots[i].buckets[b], __ATOMIC_RELAXED);
			if (b < BUCKETS)
				fprintf(f,
					"paddock_http_request_duration_seconds_bucket{route=\"%s\","
					"le=\"%g\"} %" PRIu64 "\n",
					slots[i].name, (double)bucket_ms[b] / 1000.0, cum);
			else
				fprintf(f,
					"paddock_http_request_duration_seconds_bucket{route=\"%s\","
					"le=\"+Inf\"} %" PRIu64 "\n",
					slots[i].name, cum);
		}
		fprintf(f, "paddock_http_request_duration_seconds_sum{route=\"%s\"} %.3f\n",
			slots[i].name,
			(double)__atomic_load_n(&slots[i].sum_ms, __ATOMIC_RELAXED) / 1000.0);
		fprintf(f,
			"paddock_http_request_duration_seconds_count{route=\"%s\"} %" PRIu64 "\n",
			slots[i].name, cum);
	}
}

static void metrics_get(ReqCtx *rq)
{
	_cleanup_free_ char *text = NULL;
	json_object *sdreq = json_object_new_object(), *v;
	SessiondReply rep = { .fd = -1 };
	size_t len = 0;
	FILE *f;
	bool up = false;
	int r = -ENOMEM;

	if (sdreq && json_set(sdreq, "op", json_object_new_string("metrics")) == 0 &&
	    json_set(sdreq, "request_id", json_object_new_string(rq->http.request_id)) == 0)
		r = sessiond_call(&rq->w->sd, sdreq, SESSIOND_RETRY_ANY, &rep);
	json_object_put(sdreq);
	if (r < 0)
		log_warn("metrics: sessiond unreachable: %s REQUEST_ID=%s", strerror(-r),
			 rq->http.request_id);
	f = open_memstream(&text, &len);
	if (!f) {
		sessiond_reply_clear(&rep);
		http_error(&rq->http, 500, NULL, "out of memory");
		return;
	}
	if (r == 0 && rep.ok && json_object_object_get_ex(rep.obj, "text", &v) &&
	    json_object_is_type(v, json_type_string)) {
		fputs(json_object_get_string(v), f);
		up = true;
	}
	sessiond_reply_clear(&rep);
	fprintf(f,
		"# HELP paddock_sessiond_up Whether the worker reached the session daemon.\n"
		"# TYPE paddock_sessiond_up gauge\npaddock_sessiond_up %d\n",
		up);
	write_worker(f, rq->app);
	if (fclose(f) != 0 || !text) {
		http_error(&rq->http, 500, NULL, "out of memory");
		return;
	}
	if (http_send_head(&rq->http, 200, "text/plain; version=0.0.4; charset=utf-8", (int64_t)len,
			   NULL) == 0)
		http_write(&rq->http, text, len);
}

static const Route routes[] = {
	{ "metrics", "GET", "/metrics", metrics_get },
};

const RouteTable metrics_routes = { "metrics", routes, ARRAY_SIZE(routes) };
