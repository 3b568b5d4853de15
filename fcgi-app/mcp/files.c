/* SPDX-License-Identifier: MIT */
/* The file tools: list_files, read_file (text, an image, or a base64 blob) and write_file
 * (text or base64), over the same sessiond ops as the Otari files routes. */
#include "mcp.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base64.h"
#include "cleanup.h"
#include "io.h"
#include "json.h"
#include "log.h"
#include "sandbox_layout.h"

#define PATH_MAX_BYTES 4096

/* A path argument: a non-empty string without NUL of at most PATH_MAX_BYTES. required:
 * absent is an error, else *ret is def. A failing result when it is not one. */
static json_object *take_path(json_object *args, bool required, const char *def, const char **ret)
{
	size_t len;
	int r = json_in_string(args, "path", ret, &len);

	if (r == 0 && !required) {
		*ret = def;
		return NULL;
	}
	if (r <= 0 || len == 0 || len > PATH_MAX_BYTES || strlen(*ret) != len)
		return mcp_tool_error("path is required: a file's path in the workspace (relative "
				      "to " SANDBOX_WORKSPACE ", or under it), at most %d bytes",
				      PATH_MAX_BYTES);
	return NULL;
}

/* Call sessiond: 0 with an ok reply, or -1 with *result a failing result the model reads, or
 * NULL after the call was answered as a server failure. */
static int sd_call(McpCall *c, json_object *req, enum sessiond_retry retry, SessiondReply *rep,
		   json_object **result)
{
	int r = sessiond_call(&c->rq->w->sd, req, retry, rep);

	*result = NULL;
	if (r == 0 && rep->ok)
		return 0;
	if (r == 0 && strcmp(rep->kind, "not_found") == 0 && !mcp_session_gone(rep))
		*result = mcp_tool_error("%s", rep->detail && *rep->detail ? rep->detail :
									     "no such file");
	else if (r == 0)
		*result = mcp_sd_refusal(rep);
	if (!*result)
		mcp_sd_fail(c, r, r < 0 ? NULL : rep);
	sessiond_reply_clear(rep);
	return -1;
}

json_object *mcp_list_files(McpCall *c, json_object *args)
{
	_cleanup_json_ json_object *req = NULL;
	json_object *result, *files, *listing;
	const char *path;
	SessiondReply rep;
	bool truncated = false;
	size_t len;
	const char *text;

	result = take_path(args, false, ".", &path);
	if (result)
		return result;
	req = mcp_sd_request(c, "list");
	if (json_set(req, "path", json_object_new_string(path)) < 0)
		return mcp_tool_error("out of memory");
	if (sd_call(c, req, SESSIOND_RETRY_ANY, &rep, &result) < 0)
		return result;
	json_in_bool(rep.obj, "truncated", &truncated);
	listing = json_object_new_object();
	if (json_object_object_get_ex(rep.obj, "files", &files))
		json_set(listing, "files", json_object_get(files));
	json_set(listing, "truncated", json_object_new_boolean(truncated));
	sessiond_reply_clear(&rep);
	text = json_render(listing, &len);
	result = text ? mcp_tool_result(json_object_new_array(), false) : NULL;
	if (result) {
		json_object *content;

		json_object_object_get_ex(result, "content", &content);
		json_append(content, mcp_text(text, len));
	}
	json_object_put(listing);
	return result ? result : mcp_tool_error("out of memory");
}

/* Read all size bytes of fd (from its start). */
static int read_whole(int fd, char *buf, size_t size)
{
	size_t got = 0;

	while (got < size) {
		ssize_t n = pread(fd, buf + got, size - got, (off_t)got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ENODATA;
		got += (size_t)n;
	}
	return 0;
}

static bool is_image_type(const char *mime)
{
	static const char *const shown[] = { "image/png", "image/jpeg", "image/gif", "image/webp" };

	for (size_t i = 0; i < ARRAY_SIZE(shown); i++)
		if (strcmp(mime, shown[i]) == 0)
			return true;
	return false;
}

/* The file's bytes as content: an image, UTF-8 text, or an embedded blob. */
static json_object *file_content(const char *api_path, const char *mime, const char *buf,
				 size_t size)
{
	json_object *content = json_object_new_array(), *res, *block;
	_cleanup_free_ char *b64 = NULL, *uri = NULL;

	if (!is_image_type(mime) && utf8_valid(buf, size) && !memchr(buf, '\0', size)) {
		json_append(content, mcp_text(buf, size));
		return mcp_tool_result(content, false);
	}
	b64 = malloc(base64_encoded_len(size) + 1);
	if (!b64 || asprintf(&uri, "file://" SANDBOX_WORKSPACE "/%s", api_path) < 0) {
		uri = NULL;
		json_object_put(content);
		return NULL;
	}
	base64_encode(buf, size, b64);
	if (is_image_type(mime)) {
		json_append(content, mcp_image(b64, mime));
		return mcp_tool_result(content, false);
	}
	res = json_object_new_object();
	json_set(res, "uri", json_object_new_string(uri));
	json_set(res, "mimeType", json_object_new_string(mime));
	json_set(res, "blob", json_object_new_string(b64));
	block = json_object_new_object();
	json_set(block, "type", json_object_new_string("resource"));
	json_set(block, "resource", res);
	json_append(content, block);
	return mcp_tool_result(content, false);
}

json_object *mcp_read_file(McpCall *c, json_object *args)
{
	int64_t max = c->rq->app->cfg->mcp_read_max_bytes;
	_cleanup_json_ json_object *req = NULL;
	_cleanup_free_ char *buf = NULL;
	const char *path, *mime = NULL, *api_path = NULL;
	json_object *result;
	SessiondReply rep;
	struct stat st;
	int r;

	result = take_path(args, true, NULL, &path);
	if (result)
		return result;
	req = mcp_sd_request(c, "get");
	if (json_set(req, "path", json_object_new_string(path)) < 0)
		return mcp_tool_error("out of memory");
	if (sd_call(c, req, SESSIOND_RETRY_ANY, &rep, &result) < 0)
		return result;
	if (rep.fd < 0 || fstat(rep.fd, &st) < 0) {
		sessiond_reply_clear(&rep);
		return mcp_tool_error("the file could not be opened");
	}
	if (S_ISDIR(st.st_mode)) {
		sessiond_reply_clear(&rep);
		return mcp_tool_error("%s is a directory: list it with list_files", path);
	}
	if (st.st_size > max) {
		sessiond_reply_clear(&rep);
		return mcp_tool_error("%s is %" PRId64 " bytes, over read_file's limit of %" PRId64
				      " bytes: look at part of it with bash (head, tail, sed)",
				      path, (int64_t)st.st_size, max);
	}
	buf = malloc((size_t)st.st_size + 1);
	r = buf ? read_whole(rep.fd, buf, (size_t)st.st_size) : -ENOMEM;
	if (r < 0) {
		sessiond_reply_clear(&rep);
		/* A file cut short while read is the program's doing, not the server's. */
		return mcp_tool_error("the file could not be read: %s", strerror(-r));
	}
	if (json_in_string(rep.obj, "mime_type", &mime, NULL) <= 0)
		mime = "application/octet-stream";
	if (json_in_string(rep.obj, "path", &api_path, NULL) <= 0)
		api_path = path;
	result = file_content(api_path, mime, buf, (size_t)st.st_size);
	sessiond_reply_clear(&rep);
	return result ? result : mcp_tool_error("out of memory");
}

/* content decoded as encoding says into *data (owned). A failing result when it cannot be. */
static json_object *take_content(json_object *args, char **data, size_t *len)
{
	const char *text, *enc = "utf-8";
	size_t text_len;
	long n;

	if (json_in_string(args, "content", &text, &text_len) <= 0)
		return mcp_tool_error("content is required: the file's text, or its bytes in "
				      "base64 with encoding \"base64\"");
	if (json_in_string(args, "encoding", &enc, NULL) < 0 ||
	    (strcmp(enc, "utf-8") != 0 && strcmp(enc, "base64") != 0))
		return mcp_tool_error("encoding must be \"utf-8\" (the default) or \"base64\"");
	*data = malloc(text_len + 1);
	if (!*data)
		return mcp_tool_error("out of memory");
	if (strcmp(enc, "utf-8") == 0) {
		memcpy(*data, text, text_len);
		*len = text_len;
		return NULL;
	}
	n = base64_decode(text, text_len, *data);
	if (n < 0) {
		free(*data);
		*data = NULL;
		return mcp_tool_error("content is not valid base64 (the standard alphabet, padded, "
				      "without white space)");
	}
	*len = (size_t)n;
	return NULL;
}

/* Drop the pending upload; sessiond may have dropped it already. */
static void put_abort(McpCall *c)
{
	_cleanup_json_ json_object *req = mcp_sd_request(c, "put_abort");
	SessiondReply rep;

	if (req && sessiond_call(&c->rq->w->sd, req, SESSIOND_RETRY_NEVER, &rep) == 0)
		sessiond_reply_clear(&rep);
}

json_object *mcp_write_file(McpCall *c, json_object *args)
{
	const PaddockConfig *cfg = c->rq->app->cfg;
	_cleanup_json_ json_object *req = NULL, *commit = NULL;
	_cleanup_free_ char *data = NULL;
	_cleanup_close_ int fd = -1;
	const char *path, *written = NULL;
	json_object *result;
	SessiondReply rep;
	size_t len = 0;
	int64_t size = 0;
	int r;

	result = take_path(args, true, NULL, &path);
	if (!result)
		result = take_content(args, &data, &len);
	if (result)
		return result;
	if ((int64_t)len > cfg->put_max_bytes)
		return mcp_tool_error("the file is larger than the %" PRId64 "-byte limit",
				      cfg->put_max_bytes);
	req = mcp_sd_request(c, "put");
	if (!req)
		return mcp_tool_error("out of memory");
	if (sd_call(c, req, SESSIOND_RETRY_ON_SEND, &rep, &result) < 0)
		return result;
	fd = TAKE_FD(rep.fd);
	sessiond_reply_clear(&rep);
	r = fd < 0 ? -EBADF : io_write_all(fd, data, len);
	fd = safe_close(fd);
	if (r < 0) {
		put_abort(c);
		if (r == -ENOSPC || r == -EDQUOT || r == -EFBIG)
			return mcp_tool_error("the session workspace is full");
		log_err("write_file failed: %s REQUEST_ID=%s", strerror(-r),
			c->rq->http.request_id);
		return mcp_tool_error("the file could not be written: %s", strerror(-r));
	}
	commit = mcp_sd_request(c, "put_commit");
	if (json_set(commit, "path", json_object_new_string(path)) < 0 ||
	    json_set(commit, "size", json_object_new_int64((int64_t)len)) < 0) {
		put_abort(c);
		return mcp_tool_error("out of memory");
	}
	r = sessiond_call(&c->rq->w->sd, commit, SESSIOND_RETRY_NEVER, &rep);
	if (r < 0 || !rep.ok) {
		if (r == 0)
			put_abort(c);
		result = r == 0 ? mcp_sd_refusal(&rep) : NULL;
		if (!result)
			mcp_sd_fail(c, r, r < 0 ? NULL : &rep);
		sessiond_reply_clear(&rep);
		return result;
	}
	json_in_string(rep.obj, "path", &written, NULL);
	json_in_int(rep.obj, "size_bytes", &size);
	result = mcp_tool_text(false, "Wrote %" PRId64 " bytes to %s", size,
			       written ? written : path);
	sessiond_reply_clear(&rep);
	return result;
}
