/* SPDX-License-Identifier: MIT */
/* JSON output helpers: json-c allocation failures become -ENOMEM here. */
#include "json.h"

#include <errno.h>

/* What marks an object a set failed on: its userdata points here. */
static const char incomplete_mark;

static void mark_incomplete(json_object *o)
{
	if (o)
		json_object_set_userdata(o, (void *)&incomplete_mark, NULL);
}

bool json_incomplete(json_object *o)
{
	return !o || json_object_get_userdata(o) == &incomplete_mark;
}

int json_set(json_object *obj, const char *key, json_object *val)
{
	if (val && json_incomplete(val))
		mark_incomplete(obj);
	if (!obj || !val || json_object_object_add(obj, key, val) < 0) {
		json_object_put(val);
		mark_incomplete(obj);
		return -ENOMEM;
	}
	return 0;
}

int json_set_null(json_object *obj, const char *key)
{
	if (!obj || json_object_object_add(obj, key, NULL) < 0) {
		mark_incomplete(obj);
		return -ENOMEM;
	}
	return 0;
}

int json_set_string_or_null(json_object *obj, const char *key, const char *s)
{
	return s ? json_set(obj, key, json_object_new_string(s)) : json_set_null(obj, key);
}

int json_append(json_object *arr, json_object *val)
{
	if (val && json_incomplete(val))
		mark_incomplete(arr);
	if (!arr || !val || json_object_array_add(arr, val) < 0) {
		json_object_put(val);
		mark_incomplete(arr);
		return -ENOMEM;
	}
	return 0;
}

int json_copy_field(json_object *dst, json_object *src, const char *key)
{
	json_object *v;

	if (!json_object_object_get_ex(src, key, &v))
		return 0;
	if (!v) /* a null stays null */
		return json_set_null(dst, key);
	return json_set(dst, key, json_object_get(v));
}

const char *json_render(json_object *obj, size_t *len)
{
	return json_object_to_json_string_length(
		obj, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, len);
}
