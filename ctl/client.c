/* SPDX-License-Identifier: MIT */
/* paddockctl's side of the daemon's socket: a request, its reply, and the fields and
 * numbers it prints. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "ctl.h"
#include "json.h"
#include "proto.h"

/*
 * Send req (not consumed) and read the reply into *ret (owned by the caller).
 * Returns 0 for a reply with "ok": true; -EREMOTEIO for an error reply (printed,
 * unless quiet, and still stored in *ret); -errno when the daemon cannot be reached.
 */
int ctl_call(const Ctl *c, json_object *req, bool quiet, json_object **ret)
{
	const char *text = json_object_to_json_string_ext(req, JSON_C_TO_STRING_PLAIN);
	_cleanup_close_ int fd = -1;
	ProtoFrame f = { 0 };
	json_object *o, *v;
	int r;

	*ret = NULL;
	if (json_incomplete(req)) {
		fprintf(stderr, "paddockctl: out of memory\n");
		return -ENOMEM;
	}
	fd = proto_connect(c->sock, REPLY_TIMEOUT_S);
	if (fd < 0) {
		if (!quiet)
			fprintf(stderr, "paddockctl: cannot reach paddock-sessiond at %s: %s\n",
				c->sock, strerror(-fd));
		return fd;
	}
	r = proto_write_frame(fd, PROTO_JSON, text, strlen(text), NULL, 0);
	while (r >= 0) {
		r = proto_read_frame(fd, &f);
		if (r < 0 || f.type == PROTO_JSON)
			break;
		proto_frame_clear(&f);
	}
	if (r < 0) {
		if (!quiet)
			fprintf(stderr, "paddockctl: no reply from paddock-sessiond: %s\n",
				strerror(r == -EAGAIN ? ETIMEDOUT : -r));
		return r == -EAGAIN ? -ETIMEDOUT : r;
	}
	o = json_tokener_parse(f.payload);
	proto_frame_clear(&f);
	if (!o || !json_object_is_type(o, json_type_object)) {
		json_object_put(o);
		if (!quiet)
			fprintf(stderr,
				"paddockctl: paddock-sessiond sent a reply that is not JSON\n");
		return -EBADMSG;
	}
	*ret = o;
	if (json_object_object_get_ex(o, "ok", &v) && json_object_get_boolean(v))
		return 0;
	if (!quiet) {
		const char *detail = "request refused";

		if (json_object_object_get_ex(o, "detail", &v) && json_object_get_string(v))
			detail = json_object_get_string(v);
		fprintf(stderr, "paddockctl: %s\n", detail);
	}
	return -EREMOTEIO;
}

/* A request {"op": op}, plus session_id when id is set. */
json_object *request(const char *op, const char *id)
{
	json_object *o = json_object_new_object();

	if (!o)
		return NULL;
	json_set(o, "op", json_object_new_string(op));
	json_set(o, "request_id", json_object_new_string("paddockctl"));
	if (id)
		json_set(o, "session_id", json_object_new_string(id));
	return o;
}

void print_json(json_object *o)
{
	json_object_object_del(o, "ok");
	printf("%s\n",
	       json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
							 JSON_C_TO_STRING_NOSLASHESCAPE));
}

/* Fields of the daemon's replies, or a default when absent or of another type. */
int64_t field_i64(json_object *o, const char *key)
{
	int64_t v = 0;

	return json_in_int(o, key, &v) == 1 ? v : 0;
}

double field_double(json_object *o, const char *key)
{
	double v = 0.0;

	return json_in_number(o, key, &v) == 1 ? v : 0.0;
}

const char *field_str(json_object *o, const char *key, const char *def)
{
	const char *v;

	return json_in_string(o, key, &v, NULL) == 1 ? v : def;
}

bool field_bool(json_object *o, const char *key)
{
	bool v = false;

	return json_in_bool(o, key, &v) == 1 && v;
}

/* 42s, 5m07s, 3h12m, 2d04h */
void fmt_duration(char *buf, size_t len, double seconds)
{
	int64_t s = seconds < 0 ? 0 : (int64_t)seconds;

	if (s < 60)
		snprintf(buf, len, "%llds", (long long)s);
	else if (s < 3600)
		snprintf(buf, len, "%lldm%02llds", (long long)(s / 60), (long long)(s % 60));
	else if (s < 86400)
		snprintf(buf, len, "%lldh%02lldm", (long long)(s / 3600),
			 (long long)(s % 3600 / 60));
	else
		snprintf(buf, len, "%lldd%02lldh", (long long)(s / 86400),
			 (long long)(s % 86400 / 3600));
}

/* 512B, 12.3M, 1.0G */
void fmt_bytes(char *buf, size_t len, int64_t bytes)
{
	static const char units[] = "KMGT";
	double v = (double)bytes;
	int u = -1;

	if (bytes < 1024) {
		snprintf(buf, len, "%lldB", (long long)bytes);
		return;
	}
	while (v >= 1024 && u < 3) {
		v /= 1024;
		u++;
	}
	snprintf(buf, len, "%.1f%c", v, units[u]);
}
