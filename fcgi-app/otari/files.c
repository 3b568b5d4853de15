/* SPDX-License-Identifier: MIT */
/* Otari file operations: ListFiles, GetFile (streamed from an fd), PutFile (streamed multipart). */
#include "otari.h"

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "http/multipart.h"
#include "io.h"
#include "json.h"
#include "log.h"

#define PUT_SLACK (64 * 1024) /* multipart framing allowed beyond put_max_bytes */
#define PUT_MAX_PARTS 1000
#define PUT_MAX_HEADER 8192
#define PUT_PATH_MAX 4096

/* Answer a malformed query string; returns the query_get result otherwise. */
static int query(ReqCtx *rq, const char *name, char **ret)
{
	int r = query_get(rq->http.query, name, ret);

	if (r == -ENOMEM)
		http_error(&rq->http, 500, NULL, "out of memory");
	else if (r < 0)
		http_error(&rq->http, 400, NULL, "the query parameter %s is malformed", name);
	return r;
}

void otari_list(ReqCtx *rq)
{
	_cleanup_json_ json_object *sdreq = NULL, *out = NULL;
	_cleanup_free_ char *path = NULL;
	json_object *files, *trunc;
	SessiondReply rep;

	if (query(rq, "path", &path) < 0)
		return;
	sdreq = otari_sd_request(rq, "list");
	out = json_object_new_object();
	if (!sdreq || !out ||
	    json_set(sdreq, "path", json_object_new_string(path && *path ? path : ".")) < 0)
		goto oom;
	if (otari_sd_call(rq, sdreq, SESSIOND_RETRY_ANY, &rep) < 0)
		return;
	if (json_object_object_get_ex(rep.obj, "files", &files) &&
	    json_object_is_type(files, json_type_array))
		files = json_object_get(files);
	else
		files = json_object_new_array();
	trunc = json_object_new_boolean(json_object_object_get_ex(rep.obj, "truncated", &trunc) &&
					json_object_get_boolean(trunc));
	sessiond_reply_clear(&rep);
	if (json_set(out, "files", files) < 0 || json_set(out, "truncated", trunc) < 0)
		goto oom;
	http_send_json(&rq->http, 200, out, NULL);
	return;
oom:
	http_error(&rq->http, 500, NULL, "out of memory");
}

/* A media type we can put in a header as is: type/subtype, no parameters needed. */
static bool mime_ok(const char *m)
{
	size_t n = strlen(m);

	if (n == 0 || n > 127 || !strchr(m, '/'))
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)m[i] < 0x20 || (unsigned char)m[i] > 0x7e)
			return false;
	return true;
}

/* RFC 8187 attr-char: what a filename* value carries as itself, all else %-encoded. */
static bool attr_char(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$&+-.^_`|~", c));
}

/* Bytes of the plain filename= fallback: a hint for old clients, filename* is the name. */
#define DISPOSITION_FALLBACK_MAX 64

/*
 * The Content-Disposition of a download (RFC 6266): the last segment of the file's API
 * path (docs/otari.md: UTF-8 text whatever the bytes of the name) as filename*=UTF-8''
 * with every byte outside attr-char %-encoded, so no name can break the header, and a
 * filename="..." fallback of printable ASCII only, other bytes, quotes, backslashes and
 * "%" written as "_". buf must hold DISPOSITION_MAX bytes.
 */
#define DISPOSITION_MAX (3 * PUT_PATH_MAX + DISPOSITION_FALLBACK_MAX + 64)
static void content_disposition(const char *api_path, char *buf)
{
	const char *name = strrchr(api_path, '/');
	size_t o, n;

	name = name ? name + 1 : api_path;
	o = (size_t)snprintf(buf, DISPOSITION_MAX, "Content-Disposition: attachment; filename=\"");
	for (n = 0; name[n] && n < DISPOSITION_FALLBACK_MAX; n++) {
		unsigned char c = (unsigned char)name[n];

		buf[o++] =
			(c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '%') ? '_' : (char)c;
	}
	o += (size_t)snprintf(buf + o, DISPOSITION_MAX - o, "\"; filename*=UTF-8''");
	for (n = 0; name[n] && o + 3 + 3 < DISPOSITION_MAX; n++) {
		unsigned char c = (unsigned char)name[n];

		if (attr_char(c)) {
			buf[o++] = (char)c;
		} else {
			snprintf(buf + o, 4, "%%%02X", c);
			o += 3;
		}
	}
	snprintf(buf + o, DISPOSITION_MAX - o, "\r\n");
}

/* GetFile answers streaming now: each holds its thread until the client has read it. */
static _Atomic int64_t downloads;

/*
 * Take a download slot for the answer about to stream, or answer 503: a slow reader
 * holds its thread as long as nginx's send_timeout allows, and enough of them would
 * leave no thread for anything else. The slot goes back once the request is finished,
 * its last records written (worker_request_done()).
 */
static bool download_take(ReqCtx *rq)
{
	int64_t max = rq->app->cfg->downloads_max;

	if (atomic_fetch_add(&downloads, 1) >= max) {
		atomic_fetch_sub(&downloads, 1);
		http_error(&rq->http, 503, "Retry-After: 1\r\n",
			   "%" PRId64 " downloads are streaming already (downloads_max); retry "
			   "shortly",
			   max);
		return false;
	}
	worker_hold_slot(rq->w, &downloads);
	return true;
}

void otari_get(ReqCtx *rq)
{
	_cleanup_json_ json_object *sdreq = NULL;
	_cleanup_free_ char *path = NULL, *file_id = NULL;
	const char *mime = NULL, *api_path = NULL;
	char disposition[DISPOSITION_MAX], extra[DISPOSITION_MAX + 128];
	struct stat st;
	SessiondReply rep;
	int r;

	if (query(rq, "path", &path) < 0 || query(rq, "file_id", &file_id) < 0)
		return;
	if (path && file_id) {
		http_error(&rq->http, 422, NULL, "give either path or file_id, not both");
		return;
	}
	if ((!path || !*path) && (!file_id || !*file_id)) {
		http_error(&rq->http, 422, NULL, "the query parameter path or file_id is required");
		return;
	}
	sdreq = otari_sd_request(rq, "get");
	if (!sdreq || json_set(sdreq, path ? "path" : "file_id",
			       json_object_new_string(path ? path : file_id)) < 0) {
		http_error(&rq->http, 500, NULL, "out of memory");
		return;
	}
	if (otari_sd_call(rq, sdreq, SESSIOND_RETRY_ANY, &rep) < 0)
		return;
	if (rep.fd < 0 || fstat(rep.fd, &st) < 0) {
		log_err("sessiond get reply without a usable descriptor REQUEST_ID=%s",
			rq->http.request_id);
		sessiond_reply_clear(&rep);
		http_error(&rq->http, 500, NULL, "the session daemon sent no file");
		return;
	}
	if (S_ISDIR(st.st_mode)) {
		sessiond_reply_clear(&rep);
		http_error(&rq->http, 400, NULL, "the path is a directory, not a file");
		return;
	}
	if (json_in_string(rep.obj, "mime_type", &mime, NULL) <= 0 || !mime_ok(mime))
		mime = "application/octet-stream";
	disposition[0] = '\0';
	if (json_in_string(rep.obj, "path", &api_path, NULL) > 0)
		content_disposition(api_path, disposition);
	/* Workspace files are written by untrusted code: never let a browser run them. */
	snprintf(extra, sizeof(extra),
		 "X-Content-Type-Options: nosniff\r\n"
		 "Content-Security-Policy: default-src 'none'; sandbox\r\n%s",
		 disposition);
	if (!download_take(rq)) {
		sessiond_reply_clear(&rep);
		return;
	}
	r = http_send_head(&rq->http, 200, mime, st.st_size, extra);
	if (r >= 0)
		r = http_send_fd(&rq->http, rep.fd, st.st_size);
	if (r < 0) {
		/* The head is out: all we can do is cut the connection short. */
		log_warn("GetFile stream ended early: %s REQUEST_ID=%s", strerror(-r),
			 rq->http.request_id);
		rq->http.fcgi->keepConnection = 0;
	}
	sessiond_reply_clear(&rep);
}

/* The state of one PutFile while the multipart body streams through. */
struct upload {
	int fd;			     /* sessiond's unnamed file, open for writing */
	int64_t max;		     /* put_max_bytes */
	int64_t size;		     /* file bytes written so far */
	bool in_file;		     /* inside the "file" part */
	bool in_path;		     /* inside the "path" part */
	bool have_file;		     /* a "file" part began */
	bool have_path;		     /* a "path" part began */
	char path[PUT_PATH_MAX + 1]; /* the path field's value */
	size_t path_len;	     /* its length */
	char *name;		     /* the default path: the upload's file name, last segment */
	char *wbuf;		     /* file bytes not yet written: small pieces go out together */
	size_t wlen;		     /* bytes in wbuf */
};

/* Pieces of a file part smaller than this are gathered before a write(): the parser ends
 * a piece at each CR that could begin a delimiter, and at each read's end. Larger pieces
 * (a body read PUT_READ_CHUNK at a time is mostly one piece per read) are written from
 * the read buffer as they are, without a copy. */
#define PUT_WRITE_BUFFER (64 * 1024)
/* The body is read this much at a time (libfcgi fills it from its records). */
#define PUT_READ_CHUNK (256 * 1024)

static int up_begin(void *ud, const char *name, const char *filename)
{
	struct upload *u = ud;

	if (strcmp(name, "file") == 0) {
		const char *base;

		if (u->have_file)
			return -EEXIST;
		u->have_file = u->in_file = true;
		if (filename) {
			/* Only the last segment: a client's directories are not our paths. */
			base = filename + strlen(filename);
			while (base > filename && base[-1] != '/' && base[-1] != '\\')
				base--;
			u->name = strdup(base);
			if (!u->name)
				return -ENOMEM;
		}
	} else if (strcmp(name, "path") == 0) {
		if (u->have_path)
			return -EEXIST;
		u->have_path = u->in_path = true;
	}
	return 0;
}

static int up_flush(struct upload *u)
{
	int r = u->wlen ? io_write_all(u->fd, u->wbuf, u->wlen) : 0;

	u->wlen = 0;
	return r;
}

static int up_data(void *ud, const char *buf, size_t len)
{
	struct upload *u = ud;

	if (u->in_file) {
		if ((int64_t)len > u->max - u->size)
			return -EFBIG;
		u->size += (int64_t)len;
		if (!u->wbuf || len >= PUT_WRITE_BUFFER) {
			int r = up_flush(u);

			return r < 0 ? r : io_write_all(u->fd, buf, len);
		}
		if (u->wlen + len > PUT_WRITE_BUFFER) {
			int r = up_flush(u);

			if (r < 0)
				return r;
		}
		memcpy(u->wbuf + u->wlen, buf, len);
		u->wlen += len;
		return 0;
	}
	if (u->in_path) {
		if (len > PUT_PATH_MAX - u->path_len)
			return -ENAMETOOLONG;
		memcpy(u->path + u->path_len, buf, len);
		u->path_len += len;
		u->path[u->path_len] = '\0';
	}
	return 0;
}

static int up_end(void *ud)
{
	struct upload *u = ud;
	int r = u->in_file ? up_flush(u) : 0;

	u->in_file = u->in_path = false;
	return r;
}

/* Send a body error as the client should see it. */
static void put_error(ReqCtx *rq, int r)
{
	HttpReq *h = &rq->http;
	const PaddockConfig *cfg = rq->app->cfg;

	switch (r) {
	case -EFBIG:
		http_error(h, 413, NULL, "the file is larger than the %" PRId64 "-byte limit",
			   cfg->put_max_bytes);
		break;
	case -ENOSPC:
	case -EDQUOT: http_error(h, 413, NULL, "the session workspace is full"); break;
	case -ENAMETOOLONG:
		http_error(h, 422, NULL, "the path field is longer than %d bytes", PUT_PATH_MAX);
		break;
	case -EEXIST:
		http_error(h, 422, NULL, "the form has more than one file part or path field");
		break;
	case -E2BIG:
		http_error(h, 400, NULL, "the form has more than %d parts", PUT_MAX_PARTS);
		break;
	case -EMSGSIZE:
		http_error(h, 400, NULL, "a part's headers are larger than %d bytes",
			   PUT_MAX_HEADER);
		break;
	case -EPIPE:
		http_error(h, 400, NULL, "the multipart body ends before its closing boundary");
		break;
	case -EBADMSG: http_error(h, 400, NULL, "the multipart body is malformed"); break;
	case -EIO: http_error(h, 400, NULL, "the request body could not be read"); break;
	default:
		log_err("PutFile failed: %s REQUEST_ID=%s", strerror(-r), h->request_id);
		http_error(h, 500, NULL, "the file could not be written");
	}
}

/* Feed the whole body through the parser into u. */
static int put_stream(ReqCtx *rq, const char *boundary, struct upload *u)
{
	MultipartCallbacks cb = { up_begin, up_data, up_end, u };
	_cleanup_free_ char *buf = malloc(PUT_READ_CHUNK);
	MultipartParser *p = NULL;
	int r;

	if (!buf)
		return -ENOMEM;
	r = multipart_parser_new(boundary, &cb, PUT_MAX_PARTS, PUT_MAX_HEADER, &p);
	if (r < 0)
		return r;
	for (;;) {
		ssize_t n = http_read(&rq->http, buf, PUT_READ_CHUNK);

		if (n < 0) {
			r = (int)n;
			break;
		}
		if (n == 0) {
			r = multipart_finish(p);
			break;
		}
		r = multipart_feed(p, buf, (size_t)n);
		if (r < 0)
			break;
	}
	multipart_parser_free(p);
	return r;
}

/* The path to commit to: the field, else the file name; NULL (and answered) when neither. */
static const char *put_path(ReqCtx *rq, struct upload *u)
{
	const char *path = u->have_path ? u->path : u->name;

	if (u->have_path && (strlen(u->path) != u->path_len || !utf8_valid(u->path, u->path_len))) {
		http_error(&rq->http, 422, NULL, "the path field must be UTF-8 text without NUL");
		return NULL;
	}
	if (!path || !*path || strcmp(path, ".") == 0 || strcmp(path, "..") == 0) {
		http_error(&rq->http, 422, NULL,
			   "no path field was given and the upload has no usable file name");
		return NULL;
	}
	if (!utf8_valid(path, strlen(path))) {
		http_error(&rq->http, 422, NULL, "the upload's file name is not valid UTF-8");
		return NULL;
	}
	return path;
}

/* Drop the pending upload (sessiond may have dropped it already). True when sessiond says
 * the upload's session has ended: then that, not the write that failed, is the answer. */
static bool put_abort(ReqCtx *rq)
{
	_cleanup_json_ json_object *req = otari_sd_request(rq, "put_abort");
	SessiondReply rep;
	bool ended = false;

	if (req && sessiond_call(&rq->w->sd, req, SESSIOND_RETRY_NEVER, &rep) == 0) {
		ended = sessiond_session_gone(&rep);
		sessiond_reply_clear(&rep);
	}
	return ended;
}

static void put_commit(ReqCtx *rq, const char *path, int64_t size)
{
	_cleanup_json_ json_object *req = otari_sd_request(rq, "put_commit"), *out = NULL;
	SessiondReply rep;
	int r;

	if (!req || json_set(req, "path", json_object_new_string(path)) < 0 ||
	    json_set(req, "size", json_object_new_int64(size)) < 0) {
		put_abort(rq);
		http_error(&rq->http, 500, NULL, "out of memory");
		return;
	}
	r = sessiond_call(&rq->w->sd, req, SESSIOND_RETRY_NEVER, &rep);
	if (r < 0 || !rep.ok) {
		otari_sd_fail(rq, r, r < 0 ? NULL : &rep);
		sessiond_reply_clear(&rep);
		if (r == 0)
			put_abort(rq);
		return;
	}
	/* The file this one replaced, if any: its data is freed as this reference goes. */
	worker_release_later(rq->w, TAKE_FD(rep.fd));
	out = json_object_new_object();
	if (!out || json_copy_field(out, rep.obj, "path") < 0 ||
	    json_copy_field(out, rep.obj, "size_bytes") < 0) {
		sessiond_reply_clear(&rep);
		http_error(&rq->http, 500, NULL, "out of memory");
		return;
	}
	sessiond_reply_clear(&rep);
	http_send_json(&rq->http, 201, out, NULL);
}

void otari_put(ReqCtx *rq)
{
	const PaddockConfig *cfg = rq->app->cfg;
	_cleanup_json_ json_object *sdreq = NULL;
	char boundary[MULTIPART_BOUNDARY_MAX + 1];
	struct upload u = { .fd = -1, .max = cfg->put_max_bytes };
	const char *path;
	SessiondReply rep;
	int r;

	r = multipart_boundary_from_content_type(rq->http.content_type, boundary, sizeof(boundary));
	if (r == -EMEDIUMTYPE) {
		http_error(&rq->http, 422, NULL, "the body must be multipart/form-data");
		return;
	}
	if (r < 0) {
		http_error(&rq->http, 400, NULL,
			   "the Content-Type has no valid multipart boundary parameter");
		return;
	}
	/* Refuse what cannot fit before anything is created. */
	if (rq->http.content_length > cfg->put_max_bytes + PUT_SLACK) {
		http_error(&rq->http, 413, NULL,
			   "the file is larger than the %" PRId64 "-byte limit",
			   cfg->put_max_bytes);
		return;
	}
	sdreq = otari_sd_request(rq, "put");
	if (!sdreq) {
		http_error(&rq->http, 500, NULL, "out of memory");
		return;
	}
	if (otari_sd_call(rq, sdreq, SESSIOND_RETRY_ON_SEND, &rep) < 0)
		return;
	u.fd = TAKE_FD(rep.fd);
	sessiond_reply_clear(&rep);
	if (u.fd < 0) {
		log_err("sessiond put reply without a descriptor REQUEST_ID=%s",
			rq->http.request_id);
		put_abort(rq);
		http_error(&rq->http, 500, NULL, "the session daemon gave no file to write");
		return;
	}
	/* Without the buffer the upload still works, one write() per piece. */
	u.wbuf = malloc(PUT_WRITE_BUFFER);
	r = put_stream(rq, boundary, &u);
	if (r >= 0)
		r = up_flush(&u);
	free(u.wbuf);
	u.fd = safe_close(u.fd);
	if (r < 0) {
		if (put_abort(rq))
			http_error(&rq->http, 404, NULL, "the session was destroyed");
		else
			put_error(rq, r);
	} else if (!u.have_file) {
		put_abort(rq);
		http_error(&rq->http, 422, NULL, "the form has no file part");
	} else if (!(path = put_path(rq, &u))) {
		put_abort(rq);
	} else {
		put_commit(rq, path, u.size);
	}
	free(u.name);
}
