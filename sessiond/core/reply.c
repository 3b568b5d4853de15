/* SPDX-License-Identifier: MIT */
/* The two sides of the daemon's protocol as sessiond handles them: replies it writes, and
 * the fields it reads of requests (json-c objects; a field of the wrong type is absent). */
#include "reply.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

/* "ok" is the first member, rendered compactly: the worker tells a successful reply by its
 * first bytes and relays its values without parsing it. */
json_object *reply_ok(void)
{
	json_object *o = json_object_new_object();

	json_set(o, "ok", json_object_new_boolean(true));
	return o;
}

void reply_ok_text(JsonText *t)
{
	json_text_add_str(t, "{\"ok\":true");
}

json_object *reply_error(const char *kind, const char *fmt, ...)
{
	json_object *o = json_object_new_object();
	char detail[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	json_set(o, "ok", json_object_new_boolean(false));
	json_set(o, "error", json_object_new_string(kind));
	json_set(o, "detail", json_object_new_string(detail));
	return o;
}

/* The protocol's getters: a field of another type is as good as absent. */

const char *req_string(json_object *req, const char *key)
{
	const char *v;

	return json_in_string(req, key, &v, NULL) == 1 ? v : NULL;
}

/* Integers only (json-c saturates one past int64, which a range check then refuses). */
bool req_int(json_object *req, const char *key, int64_t *out)
{
	json_object *v;

	if (!json_object_object_get_ex(req, key, &v) || !json_object_is_type(v, json_type_int))
		return false;
	*out = json_object_get_int64(v);
	return true;
}

/* json-c's truth of the value: true, a non-zero number, a non-empty string. */
bool req_bool(json_object *req, const char *key)
{
	json_object *v;

	return json_object_object_get_ex(req, key, &v) && json_object_get_boolean(v);
}

json_object *reply_retry_after(json_object *e, int64_t seconds)
{
	json_set(e, "retry_after", json_object_new_int64(seconds));
	return e;
}
