/* SPDX-License-Identifier: MIT */
/* Request bodies as JSON objects: size cap, empty bodies, parse errors, the object check. */
#include "http.h"

#include <errno.h>
#include <string.h>

#include "cleanup.h"
#include "json.h"

static int fail(BodyError *e, enum body_problem kind)
{
	e->kind = kind;
	return -1;
}

int body_read_json(HttpReq *h, size_t max_bytes, int max_depth, json_object **ret, BodyError *e)
{
	_cleanup_free_ char *body = NULL;
	size_t len = 0, i;
	int r;

	*ret = NULL;
	e->detail[0] = '\0';
	r = http_read_all(h, max_bytes, &body, &len);
	if (r == -EFBIG)
		return fail(e, BODY_TOO_LARGE);
	if (r < 0)
		return fail(e, BODY_UNREADABLE);
	for (i = 0; i < len && body[i] && strchr(" \t\r\n", body[i]); i++)
		;
	if (i == len)
		return fail(e, BODY_EMPTY);
	r = json_in_parse(body, len, max_depth, ret, e->detail, sizeof(e->detail));
	if (r == -ENOMEM)
		return fail(e, BODY_NO_MEMORY);
	if (r < 0)
		return fail(e, BODY_NOT_JSON);
	if (!json_object_is_type(*ret, json_type_object)) {
		json_putp(ret);
		return fail(e, BODY_NOT_OBJECT);
	}
	return 0;
}
