/* SPDX-License-Identifier: MIT */
/* Building JSON replies with json-c: ownership-taking setters, rendering. */
#pragma once

#include <stddef.h>

#include <json-c/json.h>

#include "json_in.h"

/* Set obj[key] = val, taking val (also on failure). -ENOMEM when val is NULL or on failure. */
int json_set(json_object *obj, const char *key, json_object *val);

/* Copy obj[key] from src into dst when present (a new reference); 0 when absent. */
int json_copy_field(json_object *dst, json_object *src, const char *key);

/* Render compactly; the string belongs to obj. NULL on allocation failure. */
const char *json_render(json_object *obj, size_t *len);
