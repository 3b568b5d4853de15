/* SPDX-License-Identifier: MIT */
/* The two sides of the daemon's protocol as sessiond handles them: replies it writes, and
 * the fields it reads of requests (json-c objects; a field of the wrong type is absent). */
#include "reply.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

/* What marks a reply a set failed on: its userdata points here. */
static const char incomplete_mark;

static void mark_incomplete(json_object *o)
{
	if (o)
		json_object_set_userdata(o, (void *)&incomplete_mark, NULL);
}

bool reply_incomplete(json_object *o)
{
	return !o || json_object_get_userdata(o) == &incomplete_mark;
}

int reply_set(json_object *o, const char *key, json_object *val)
{
	if (val && reply_incomplete(val))
		mark_incomplete(o);
	if (!o || !val || json_object_object_add(o, key, val) < 0) {
		json_object_put(val);
		mark_incomplete(o);
		return -ENOMEM;
	}
	return 0;
}

int reply_append(json_object *arr, json_object *val)
{
	if (val && reply_incomplete(val))
		mark_incomplete(arr);
	if (!arr || !val || json_object_array_add(arr, val) < 0) {
		json_object_put(val);
		mark_incomplete(arr);
		return -ENOMEM;
	}
	return 0;
}

json_object *reply_ok(void)
{
	json_object *o = json_object_new_object();

	reply_set(o, "ok", json_object_new_boolean(true));
	return o;
}

json_object *reply_error(const char *kind, const char *fmt, ...)
{
	json_object *o = json_object_new_object();
	char detail[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	reply_set(o, "ok", json_object_new_boolean(false));
	reply_set(o, "error", json_object_new_string(kind));
	reply_set(o, "detail", json_object_new_string(detail));
	return o;
}

const char *req_string(json_object *req, const char *key)
{
	json_object *v;

	if (!json_object_object_get_ex(req, key, &v) || !json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}

bool req_int(json_object *req, const char *key, int64_t *out)
{
	json_object *v;

	if (!json_object_object_get_ex(req, key, &v) || !json_object_is_type(v, json_type_int))
		return false;
	*out = json_object_get_int64(v);
	return true;
}

bool req_bool(json_object *req, const char *key)
{
	json_object *v;

	return json_object_object_get_ex(req, key, &v) && json_object_get_boolean(v);
}

json_object *reply_retry_after(json_object *e, int64_t seconds)
{
	reply_set(e, "retry_after", json_object_new_int64(seconds));
	return e;
}
