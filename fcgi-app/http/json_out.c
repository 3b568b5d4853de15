/* SPDX-License-Identifier: MIT */
/* JSON output helpers: json-c allocation failures become -ENOMEM here. */
#include "json.h"

#include <errno.h>

int json_set(json_object *obj, const char *key, json_object *val)
{
	if (!val)
		return -ENOMEM;
	if (json_object_object_add(obj, key, val) < 0) {
		json_object_put(val);
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
		return json_object_object_add(dst, key, NULL) < 0 ? -ENOMEM : 0;
	return json_set(dst, key, json_object_get(v));
}

const char *json_render(json_object *obj, size_t *len)
{
	return json_object_to_json_string_length(
		obj, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, len);
}
