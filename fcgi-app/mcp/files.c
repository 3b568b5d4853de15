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
	if (r == 0)
		*result = mcp_sd_refusal(rep);
	if (!*result)
		mcp_sd_fail(c, r, r < 0 ? NULL : rep);
	sessiond_reply_clear(rep);
	return -1;
}

json_object *mcp_list_files(McpCall *c, json_object *args)
{
	_cleanup_json_ json_object *req = NULL, *listing = NULL;
	json_object *result, *files, *content;
	const char *path, *text;
	SessiondReply rep;
	bool truncated = false;
	size_t len;

	result = take_path(args, false, ".", &path);
	if (result)
		return result;
	req = mcp_sd_request(c, "list");
	if (json_set(req, "path", json_object_new_string(path)) < 0)
		return mcp_tool_error("out of memory");
	if (sd_call(c, req, SESSIOND_RETRY_ANY, &rep, &result) < 0)
		return result;
	/* The listing as the Otari route answers it, as text the model reads. */
	json_in_bool(rep.obj, "truncated", &truncated);
	listing = json_object_new_object();
	if (json_object_object_get_ex(rep.obj, "files", &files))
		json_set(listing, "files", json_object_get(files));
	json_set(listing, "truncated", json_object_new_boolean(truncated));
	sessiond_reply_clear(&rep);
	text = json_incomplete(listing) ? NULL : json_render(listing, &len);
	if (!text)
		return mcp_tool_error("out of memory");
	content = json_object_new_array();
	json_append(content, mcp_text(text, len));
	return mcp_tool_result(content, false);
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

/* file:///workspace/<path>, each byte of the path outside RFC 3986's unreserved set and
 * "/" percent-encoded. Owned; NULL when out of memory. */
static char *file_uri(const char *api_path)
{
	static const char prefix[] = "file://" SANDBOX_WORKSPACE "/";
	size_t n = strlen(api_path), o = sizeof(prefix) - 1;
	char *uri = malloc(o + 3 * n + 1);

	if (!uri)
		return NULL;
	memcpy(uri, prefix, o);
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)api_path[i];

		if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		    (ch >= '0' && ch <= '9') || (ch && strchr("-._~/", ch))) {
			uri[o++] = (char)ch;
		} else {
			snprintf(uri + o, 4, "%%%02X", ch);
			o += 3;
		}
	}
	uri[o] = '\0';
	return uri;
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
	uri = file_uri(api_path);
	if (!b64 || !uri) {
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
	if (!S_ISREG(st.st_mode)) {
		sessiond_reply_clear(&rep);
		return mcp_tool_error("%s is not a regular file%s", path,
				      S_ISDIR(st.st_mode) ? ": list it with list_files" : "");
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

/* Drop the pending upload (sessiond may have dropped it already). True when sessiond says
 * the upload's session has ended. */
static bool put_abort(McpCall *c)
{
	_cleanup_json_ json_object *req = mcp_sd_request(c, "put_abort");
	SessiondReply rep;
	bool ended = false;

	if (req && sessiond_call(&c->rq->w->sd, req, SESSIOND_RETRY_NEVER, &rep) == 0) {
		ended = sessiond_session_gone(&rep);
		sessiond_reply_clear(&rep);
	}
	return ended;
}

/* Commit the upload the connection holds to path: the result, or NULL after answering a
 * server failure. */
static json_object *put_commit(McpCall *c, const char *path, size_t len)
{
	_cleanup_json_ json_object *req = mcp_sd_request(c, "put_commit");
	const char *written = NULL;
	json_object *result;
	SessiondReply rep;
	int64_t size = 0;
	int r;

	if (json_set(req, "path", json_object_new_string(path)) < 0 ||
	    json_set(req, "size", json_object_new_int64((int64_t)len)) < 0) {
		put_abort(c);
		return mcp_tool_error("out of memory");
	}
	r = sessiond_call(&c->rq->w->sd, req, SESSIOND_RETRY_NEVER, &rep);
	if (r < 0 || !rep.ok) {
		if (r == 0)
			put_abort(c);
		/* A path whose directory is a file, or outside: the model's to fix. */
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

/* Write len bytes of data into a new unnamed file of the session's workspace, which the
 * connection then holds: 0, or -1 with *result set (NULL: a server failure, answered). */
static int put_upload(McpCall *c, const char *data, size_t len, json_object **result)
{
	_cleanup_json_ json_object *req = mcp_sd_request(c, "put");
	_cleanup_close_ int fd = -1;
	SessiondReply rep;
	int r;

	*result = NULL;
	if (!req) {
		*result = mcp_tool_error("out of memory");
		return -1;
	}
	if (sd_call(c, req, SESSIOND_RETRY_ON_SEND, &rep, result) < 0)
		return -1;
	fd = TAKE_FD(rep.fd);
	sessiond_reply_clear(&rep);
	r = fd < 0 ? -EBADF : io_write_all(fd, data, len);
	if (r == 0)
		return 0;
	if (put_abort(c)) {
		/* Its workspace, shut down as the session ended, failed the write. */
		mcp_session_ended(c);
		return -1;
	}
	if (r == -ENOSPC || r == -EDQUOT || r == -EFBIG) {
		*result = mcp_tool_error("the session workspace is full");
	} else {
		log_err("write_file failed: %s REQUEST_ID=%s", strerror(-r),
			c->rq->http.request_id);
		*result = mcp_tool_error("the file could not be written: %s", strerror(-r));
	}
	return -1;
}

json_object *mcp_write_file(McpCall *c, json_object *args)
{
	const PaddockConfig *cfg = c->rq->app->cfg;
	_cleanup_free_ char *data = NULL;
	json_object *result;
	const char *path;
	size_t len = 0;

	result = take_path(args, true, NULL, &path);
	if (!result)
		result = take_content(args, &data, &len);
	if (result)
		return result;
	if ((int64_t)len > cfg->put_max_bytes)
		return mcp_tool_error("the file is larger than the %" PRId64 "-byte limit",
				      cfg->put_max_bytes);
	if (put_upload(c, data, len, &result) < 0)
		return result;
	return put_commit(c, path, len);
}
