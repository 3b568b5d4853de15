/* SPDX-License-Identifier: MIT */
/* The text_editor_code_execution tool (OTARI.md's table) on top of the confined wsfs calls. */

/*
 * Decisions where OTARI.md is silent:
 *
 * - Input errors (-EINVAL, the caller's 422) against editor failures (return_code 1). The
 *   table's own messages are editor failures: `create requires file_text` (file_text absent
 *   or null) and `invalid view_range` (present, not null, and not a usable pair of ints).
 *   Every other field a command needs that is absent, null or of the wrong JSON type is
 *   -EINVAL, as the Execute section says: command (also unknown), path (also empty),
 *   old_str, new_str, insert_line (must be a JSON int), and a file_text that is not a
 *   string. A string field holding a NUL byte or invalid UTF-8 is -EINVAL too: it can never
 *   be text in a file this editor can show.
 * - Everything about values and the workspace is an editor failure: an empty old_str, an
 *   out-of-range line, missing files, directories, paths outside, size, encoding.
 * - Order of checks: command, path, the command's fields, then the file system.
 * - Lines: a file has as many lines as it has '\n', plus one if it ends without one; the
 *   empty file has none. view_range [a, b]: a < 1 counts as 1, b = -1 or b > n as n;
 *   b < -1, or b < a with b != -1, is `invalid view_range`; a past the end gives "".
 *   view_range on a directory is a failure.
 * - insert: new_str is inserted as whole lines, so a '\n' is added when it lacks one (an
 *   empty new_str inserts one empty line).
 * - str_replace: old_str must occur exactly once. N counts matches left to right without
 *   overlap; one match that overlaps another ("aa" in "aaa") also counts as 2. The
 *   replaced file's permission bits are kept.
 * - A file holding a NUL byte is refused like non-UTF-8 text: results are C strings.
 * - Edits whose result would exceed max_bytes fail with `file too large: P`.
 * - Writes never follow a symlink at the last component (reads do, inside the workspace).
 * - create refuses any existing entry, a dangling symlink included, and starts a fresh undo
 *   history for the path. Between its existence check and the rename the session itself
 *   could create the file; the rename then replaces it (the session only loses its own
 *   race).
 * - undo_edit keeps EDITOR_UNDO_LEVELS levels per file within EDITOR_UNDO_BUDGET bytes per
 *   session, dropping the oldest snapshots first; a snapshot larger than the budget is not
 *   kept. Undo restores the earlier content and permission bits; it is not itself undoable.
 * - A directory view lists every entry (hidden ones too) of depth 1 and 2, symlinks
 *   unfollowed and without a trailing '/', at most EDITOR_VIEW_MAX_ENTRIES lines, then a
 *   line saying entries were left out.
 */
#include "editor.h"
#include "utf8.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <json-c/json.h>

#include "cleanup.h"
#include "io.h"
#include "json.h"
#include "wsfs.h"
#include "wsname.h"

#define EDITOR_UNDO_LEVELS 16
#define EDITOR_UNDO_BUDGET (32u << 20)
#define EDITOR_UNDO_OVERHEAD 64 /* bookkeeping charged per snapshot */
#define EDITOR_VIEW_MAX_ENTRIES 1000

/* Returned by steps that have written an editor failure into the result. */
#define EDITOR_FAILED 1

typedef struct UndoSnap {
	char *data;   /* the file's earlier content, owned */
	size_t len;   /* its length */
	mode_t mode;  /* its permission bits */
	uint64_t seq; /* push order, to evict the oldest first */
} UndoSnap;

typedef struct UndoFile {
	struct UndoFile *next;		    /* next file of the session */
	char *rel;			    /* normalized workspace-relative path, owned */
	UndoSnap snaps[EDITOR_UNDO_LEVELS]; /* oldest first */
	size_t n;			    /* snapshots in use */
} UndoFile;

struct EditorUndo {
	UndoFile *files; /* files with at least one snapshot */
	size_t bytes;	 /* cost of all snapshots, data plus overhead */
	uint64_t seq;	 /* the last push's sequence number */
};

/* One request being served. */
typedef struct EditorReq {
	int ws_fd;	    /* the workspace, O_PATH */
	uid_t uid;	    /* the session's owner, for files written */
	gid_t gid;	    /* ditto */
	size_t max_bytes;   /* largest file the editor reads or writes */
	EditorUndo *undo;   /* the session's history */
	const char *path;   /* the path as the client gave it, for messages */
	char rel[PATH_MAX]; /* the normalized path */
	EditorResult *res;  /* the outcome */
} EditorReq;

/* A file's text as loaded. */
typedef struct Text {
	char *data;  /* NUL-terminated, owned */
	size_t len;  /* without the NUL */
	mode_t mode; /* permission bits */
} Text;

static void dirp_close(DIR **d)
{
	if (*d)
		closedir(*d);
}

static void text_clear(Text *t)
{
	free(t->data);
	t->data = NULL;
	t->len = 0;
}

/* ---- undo history ---- */

static size_t snap_cost(const UndoSnap *s)
{
	return s->len + EDITOR_UNDO_OVERHEAD;
}

static UndoFile *undo_find(EditorUndo *u, const char *rel)
{
	for (UndoFile *f = u->files; f; f = f->next)
		if (strcmp(f->rel, rel) == 0)
			return f;
	return NULL;
}

static void undo_drop_file(EditorUndo *u, UndoFile *f)
{
	for (UndoFile **p = &u->files; *p; p = &(*p)->next) {
		if (*p == f) {
			*p = f->next;
			break;
		}
	}
	for (size_t i = 0; i < f->n; i++) {
		u->bytes -= snap_cost(&f->snaps[i]);
		free(f->snaps[i].data);
	}
	free(f->rel);
	free(f);
}

/* Forget the oldest snapshot of f. */
static void undo_drop_oldest_of(EditorUndo *u, UndoFile *f)
{
	u->bytes -= snap_cost(&f->snaps[0]);
	free(f->snaps[0].data);
	memmove(&f->snaps[0], &f->snaps[1], (f->n - 1) * sizeof(f->snaps[0]));
	f->n--;
	if (f->n == 0)
		undo_drop_file(u, f);
}

/* Forget the oldest snapshot of the whole session. */
static void undo_evict_oldest(EditorUndo *u)
{
	UndoFile *oldest = NULL;

	for (UndoFile *f = u->files; f; f = f->next)
		if (!oldest || f->snaps[0].seq < oldest->snaps[0].seq)
			oldest = f;
	if (oldest)
		undo_drop_oldest_of(u, oldest);
}

/* Remember data (ownership taken, also on failure) as rel's content before an edit. */
static int undo_push(EditorUndo *u, const char *rel, char *data, size_t len, mode_t mode)
{
	UndoSnap s = { .data = data, .len = len, .mode = mode };
	UndoFile *f;

	if (snap_cost(&s) > EDITOR_UNDO_BUDGET) {
		free(data);
		return 0;
	}
	while (u->files && u->bytes + snap_cost(&s) > EDITOR_UNDO_BUDGET)
		undo_evict_oldest(u);

	f = undo_find(u, rel);
	if (!f) {
		f = calloc(1, sizeof(*f));
		if (!f || !(f->rel = strdup(rel))) {
			free(f);
			free(data);
			return -ENOMEM;
		}
		f->next = u->files;
		u->files = f;
	} else if (f->n == EDITOR_UNDO_LEVELS) {
		undo_drop_oldest_of(u, f);
	}
	s.seq = ++u->seq;
	f->snaps[f->n++] = s;
	u->bytes += snap_cost(&s);
	return 0;
}

EditorUndo *editor_undo_new(void)
{
	return calloc(1, sizeof(EditorUndo));
}

EditorUndo *editor_undo_free(EditorUndo *u)
{
	if (!u)
		return NULL;
	while (u->files)
		undo_drop_file(u, u->files);
	free(u);
	return NULL;
}

/* ---- results ---- */

void editor_result_clear(EditorResult *res)
{
	if (!res)
		return;
	free(res->out);
	free(res->err);
	res->out = NULL;
	res->err = NULL;
	res->return_code = 0;
}

/* Success with out (ownership taken). */
static int succeed_with(EditorReq *q, char *out)
{
	if (!out)
		return -ENOMEM;
	q->res->out = out;
	q->res->err = strdup("");
	if (!q->res->err)
		return -ENOMEM;
	q->res->return_code = 0;
	return 0;
}

static int succeed(EditorReq *q, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int succeed(EditorReq *q, const char *fmt, ...)
{
	char *out = NULL;
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vasprintf(&out, fmt, ap);
	va_end(ap);
	return succeed_with(q, r < 0 ? NULL : out);
}

/* Record an editor failure; returns EDITOR_FAILED, or -ENOMEM. */
static int fail(EditorReq *q, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(EditorReq *q, const char *fmt, ...)
{
	_cleanup_free_ char *msg = NULL;
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vasprintf(&msg, fmt, ap);
	va_end(ap);
	if (r < 0) {
		msg = NULL;
		return -ENOMEM;
	}
	if (asprintf(&q->res->err, "text_editor: %s\n", msg) < 0) {
		q->res->err = NULL;
		return -ENOMEM;
	}
	q->res->out = strdup("");
	if (!q->res->out)
		return -ENOMEM;
	q->res->return_code = 1;
	return EDITOR_FAILED;
}

/* Turn a file system error on q->path into an editor failure (ENOMEM stays fatal). */
static int fail_errno(EditorReq *q, int r, bool writing)
{
	const char *p = q->path;

	if (r == -ENOMEM)
		return r;
	if (r == -EXDEV || r == -EPERM)
		return fail(q, "path is outside the workspace: %s", p);
	if ((r == -ENOENT || r == -ENOTDIR) && !writing)
		return fail(q, "file not found: %s", p);
	if (r == -ENOENT || r == -ENOTDIR)
		return fail(q, "cannot write %s: a parent is missing or not a directory", p);
	if (r == -ELOOP && writing)
		return fail(q, "path is a symlink, not followed for writes: %s", p);
	if (r == -ELOOP)
		return fail(q, "too many levels of symlinks: %s", p);
	if (r == -EISDIR || r == -EINVAL || r == -ENXIO)
		return fail(q, "not a file: %s", p);
	if (r == -EWOULDBLOCK)
		return fail(q,
			    "a program in the session holds a lease on %s; try again once it "
			    "lets go",
			    p);
	if (r == -EBUSY || r == -ETXTBSY)
		return fail(q, "%s is in use in the session; try again", p);
	if (r == -ENOSPC || r == -EDQUOT)
		return fail(q, "no space left in the workspace for %s", p);
	if (r == -EFBIG)
		return fail(q, "file too large: %s", p);
	return fail(q, "cannot %s %s: %s", writing ? "write" : "read", p, strerror(-r));
}

/* ---- text ---- */

static bool is_text(const char *s, size_t len)
{
	return !memchr(s, '\0', len) && utf8_valid(s, len);
}

static int read_all(int fd, size_t max, char **ret, size_t *len_ret)
{
	_cleanup_free_ char *buf = NULL;
	size_t len = 0, cap = 0;

	/* Room for the extra byte below and the NUL. */
	if (max > SIZE_MAX / 2)
		max = SIZE_MAX / 2;
	for (;;) {
		ssize_t n;

		if (len == cap) {
			/* Read one byte past max to notice a file that grew over it. */
			size_t want = cap ? cap * 2 : 64 * 1024;
			char *p;

			if (want > max + 1)
				want = max + 1;
			if (want <= cap)
				return -EFBIG;
			p = realloc(buf, want + 1);
			if (!p)
				return -ENOMEM;
			buf = p;
			cap = want;
		}
		n = read(fd, buf + len, cap - len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	if (len > max)
		return -EFBIG;
	if (!buf && !(buf = malloc(1)))
		return -ENOMEM;
	buf[len] = '\0';
	*len_ret = len;
	*ret = TAKE_PTR(buf);
	return 0;
}

/*
 * Load q->rel as text: 0, EDITOR_FAILED (result written) or -errno. With dir_ok, a directory
 * is -EISDIR and no result is written, so the caller can view it instead.
 */
static int load_text(EditorReq *q, bool dir_ok, Text *t)
{
	_cleanup_close_ int fd = -1;
	struct stat st;
	int r;

	fd = wsfs_open_read(q->ws_fd, q->rel, &st);
	if (fd == -EISDIR && dir_ok)
		return fd;
	if (fd < 0)
		return fail_errno(q, fd, false);
	if ((uint64_t)st.st_size > q->max_bytes)
		return fail(q, "file too large: %s", q->path);
	r = read_all(fd, q->max_bytes, &t->data, &t->len);
	if (r == -EFBIG)
		return fail(q, "file too large: %s", q->path);
	if (r < 0)
		return fail_errno(q, r, false);
	t->mode = st.st_mode & 0777;
	if (!is_text(t->data, t->len)) {
		text_clear(t);
		return fail(q, "file is not valid UTF-8: %s", q->path);
	}
	return 0;
}

/* Replace (or create) q->rel with data atomically, as the session's owner. */
static int write_text(EditorReq *q, const char *data, size_t len, mode_t mode)
{
	_cleanup_close_ int fd = -1;
	int r;

	fd = wsfs_open_tmp(q->ws_fd, q->uid, q->gid);
	if (fd < 0)
		return fd;
	r = io_write_all(fd, data, len);
	if (r < 0)
		return r;
	if (mode != 0644 && fchmod(fd, mode & 0777) < 0)
		return -errno;
	return wsfs_commit(q->ws_fd, fd, q->rel, q->uid, q->gid, NULL);
}

/* Lines of a text: as many as '\n', plus one for an unterminated last line. */
static size_t count_lines(const char *s, size_t len)
{
	size_t n = 0;

	for (const char *p = s; (p = memchr(p, '\n', len - (size_t)(p - s))); p++)
		n++;
	if (len > 0 && s[len - 1] != '\n')
		n++;
	return n;
}

/* Offset where 1-based line k starts (k may be n + 1: the end). */
static size_t line_start(const char *s, size_t len, size_t k)
{
	const char *p = s;

	for (size_t i = 1; i < k; i++) {
		const char *nl = memchr(p, '\n', len - (size_t)(p - s));
		if (!nl)
			return len;
		p = nl + 1;
	}
	return (size_t)(p - s);
}

/* ---- input ---- */

/* Look up key; absent and JSON null are both "absent" (json-c stores null as NULL). */
static struct json_object *field(struct json_object *input, const char *key)
{
	struct json_object *o = NULL;

	if (!json_object_object_get_ex(input, key, &o))
		return NULL;
	return o;
}

/* A string field that must be text: 0, or -EINVAL with *detail. Absent gives *s = NULL. */
static int text_field(struct json_object *input, const char *key, const char **s, size_t *len,
		      const char *bad_detail, const char **detail)
{
	struct json_object *o = field(input, key);

	*s = NULL;
	*len = 0;
	if (!o)
		return 0;
	if (!json_object_is_type(o, json_type_string)) {
		*detail = bad_detail;
		return -EINVAL;
	}
	*s = json_object_get_string(o);
	*len = (size_t)json_object_get_string_len(o);
	if (!is_text(*s, *len)) {
		*detail = bad_detail;
		return -EINVAL;
	}
	return 0;
}

/* The parsed fields of one command. */
typedef struct EditorArgs {
	const char *command;		/* view, create, str_replace, insert, undo_edit */
	const char *file_text;		/* create; NULL when absent */
	size_t file_text_len;		/* its length */
	const char *old_str;		/* str_replace */
	size_t old_len;			/* its length */
	const char *new_str;		/* str_replace, insert */
	size_t new_len;			/* its length */
	int64_t insert_line;		/* insert */
	struct json_object *view_range; /* view; NULL when absent, checked when used */
} EditorArgs;

static int parse_args(struct json_object *input, EditorArgs *a, const char **path,
		      const char **detail)
{
	struct json_object *o;
	int r;

	if (!input || !json_object_is_type(input, json_type_object)) {
		*detail = "input must be an object";
		return -EINVAL;
	}
	/* Read as a C string: "create\u0000x" is no command, however strcmp would read it. */
	if (json_in_string(input, "command", &a->command, NULL) <= 0) {
		*detail = "input.command must be one of view, create, str_replace, insert, "
			  "undo_edit";
		return -EINVAL;
	}
	if (strcmp(a->command, "view") != 0 && strcmp(a->command, "create") != 0 &&
	    strcmp(a->command, "str_replace") != 0 && strcmp(a->command, "insert") != 0 &&
	    strcmp(a->command, "undo_edit") != 0) {
		*detail = "input.command must be one of view, create, str_replace, insert, "
			  "undo_edit";
		return -EINVAL;
	}

	o = field(input, "path");
	if (!o || !json_object_is_type(o, json_type_string) || json_object_get_string_len(o) == 0 ||
	    (size_t)json_object_get_string_len(o) != strlen(json_object_get_string(o))) {
		*detail = "input.path must be a non-empty string";
		return -EINVAL;
	}
	*path = json_object_get_string(o);

	if (strcmp(a->command, "view") == 0) {
		a->view_range = field(input, "view_range");
	} else if (strcmp(a->command, "create") == 0) {
		r = text_field(input, "file_text", &a->file_text, &a->file_text_len,
			       "input.file_text must be a UTF-8 string without NUL bytes", detail);
		if (r < 0)
			return r;
	} else if (strcmp(a->command, "str_replace") == 0) {
		r = text_field(input, "old_str", &a->old_str, &a->old_len,
			       "input.old_str must be a UTF-8 string without NUL bytes", detail);
		if (r < 0)
			return r;
		if (!a->old_str) {
			*detail = "str_replace requires input.old_str";
			return -EINVAL;
		}
	}
	if (strcmp(a->command, "str_replace") == 0 || strcmp(a->command, "insert") == 0) {
		r = text_field(input, "new_str", &a->new_str, &a->new_len,
			       "input.new_str must be a UTF-8 string without NUL bytes", detail);
		if (r < 0)
			return r;
		if (!a->new_str) {
			*detail = "str_replace and insert require input.new_str";
			return -EINVAL;
		}
	}
	if (strcmp(a->command, "insert") == 0) {
		o = field(input, "insert_line");
		if (!o || !json_object_is_type(o, json_type_int)) {
			*detail = "insert requires input.insert_line, an integer";
			return -EINVAL;
		}
		a->insert_line = json_object_get_int64(o);
	}
	return 0;
}

/* ---- view ---- */

/* Entries of a directory view, collected then sorted. */
typedef struct Listing {
	char **lines;	/* owned strings */
	size_t n;	/* used */
	size_t cap;	/* allocated */
	bool truncated; /* entries were left out */
} Listing;

static void listing_free(Listing *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->lines[i]);
	free(l->lines);
}

/* prefix and name are bytes as on disk; the line names them in API form (wsname.h). */
static int listing_add(Listing *l, const char *prefix, const char *name, bool dir)
{
	_cleanup_free_ char *api_prefix = NULL, *api_name = NULL;
	char *line;

	if (l->n == EDITOR_VIEW_MAX_ENTRIES) {
		l->truncated = true;
		return 0;
	}
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 32;
		char **p = reallocarray(l->lines, cap, sizeof(*p));
		if (!p)
			return -ENOMEM;
		l->lines = p;
		l->cap = cap;
	}
	api_prefix = wsname_encode_dup(prefix);
	api_name = wsname_encode_dup(name);
	if (!api_prefix || !api_name)
		return -ENOMEM;
	if (asprintf(&line, "%s%s%s%s", api_prefix, *prefix ? "/" : "", api_name, dir ? "/" : "") <
	    0)
		return -ENOMEM;
	l->lines[l->n++] = line;
	return 0;
}

/* List dfd (ownership taken), whose workspace-relative name is prefix, depth levels deep. */
static int list_dir(Listing *l, int dfd, const char *prefix, unsigned depth)
{
	_cleanup_(dirp_close) DIR *d = fdopendir(dfd);
	struct dirent *de;

	if (!d) {
		int r = -errno;
		close(dfd);
		return r;
	}
	while (!l->truncated) {
		struct stat st;
		bool dir;
		int r;

		errno = 0;
		de = readdir(d);
		if (!de)
			return errno ? -errno : 0;
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue; /* gone meanwhile */
		dir = S_ISDIR(st.st_mode);
		r = listing_add(l, prefix, de->d_name, dir);
		if (r < 0)
			return r;
		if (dir && depth > 1) {
			_cleanup_free_ char *sub = NULL;
			int fd;

			if (asprintf(&sub, "%s%s%s", prefix, *prefix ? "/" : "", de->d_name) < 0) {
				sub = NULL;
				return -ENOMEM;
			}
			fd = wsfs_openat2(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW,
					  0);
			if (fd == -ENOMEM || fd == -EMFILE || fd == -ENFILE)
				return fd;
			if (fd >= 0) {
				r = list_dir(l, fd, sub, depth - 1);
				if (r < 0)
					return r;
			}
		}
	}
	return 0;
}

static int cmp_line(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int view_dir(EditorReq *q)
{
	_cleanup_(listing_free) Listing l = { 0 };
	_cleanup_free_ char *out = NULL;
	size_t len = 0, pos = 0;
	int fd, r;

	fd = wsfs_openat2(q->ws_fd, q->rel, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0)
		return fail_errno(q, fd, false);
	r = list_dir(&l, fd, strcmp(q->rel, ".") == 0 ? "" : q->rel, 2);
	if (r < 0)
		return r == -ENOMEM ? r : fail_errno(q, r, false);
	if (l.n)
		qsort(l.lines, l.n, sizeof(*l.lines), cmp_line);

	for (size_t i = 0; i < l.n; i++)
		len += strlen(l.lines[i]) + 1;
	out = malloc(len + 64);
	if (!out)
		return -ENOMEM;
	for (size_t i = 0; i < l.n; i++) {
		size_t n = strlen(l.lines[i]);
		memcpy(out + pos, l.lines[i], n);
		pos += n;
		out[pos++] = '\n';
	}
	out[pos] = '\0';
	if (l.truncated)
		snprintf(out + pos, 64, "[more entries not shown]\n");
	return succeed_with(q, TAKE_PTR(out));
}

/* Parse view_range into [*a, *b] (b = -1: the last line); false when unusable. */
static bool parse_view_range(struct json_object *vr, int64_t *a, int64_t *b)
{
	struct json_object *x, *y;

	if (!json_object_is_type(vr, json_type_array) || json_object_array_length(vr) != 2)
		return false;
	x = json_object_array_get_idx(vr, 0);
	y = json_object_array_get_idx(vr, 1);
	if (!x || !y || !json_object_is_type(x, json_type_int) ||
	    !json_object_is_type(y, json_type_int))
		return false;
	*a = json_object_get_int64(x);
	*b = json_object_get_int64(y);
	if (*b < -1 || (*b != -1 && *b < *a))
		return false;
	return true;
}

static int cmd_view(EditorReq *q, const EditorArgs *args)
{
	_cleanup_(text_clear) Text t = { 0 };
	int64_t a = 1, b = -1;
	size_t n, from, to;
	int r;

	if (args->view_range && !parse_view_range(args->view_range, &a, &b))
		return fail(q, "invalid view_range");

	r = load_text(q, true, &t);
	if (r == -EISDIR) {
		if (args->view_range)
			return fail(q, "view_range is not allowed for a directory: %s", q->path);
		return view_dir(q);
	}
	if (r != 0)
		return r;
	if (!args->view_range)
		return succeed_with(q, TAKE_PTR(t.data));

	n = count_lines(t.data, t.len);
	if (a < 1)
		a = 1;
	if (b == -1 || (uint64_t)b > n)
		b = (int64_t)n;
	if ((uint64_t)a > n || a > b)
		return succeed_with(q, strdup(""));
	from = line_start(t.data, t.len, (size_t)a);
	to = line_start(t.data, t.len, (size_t)b + 1);
	/* Lines are joined with '\n': the last one shown keeps no newline of its own. */
	if (to > from && t.data[to - 1] == '\n')
		to--;
	return succeed_with(q, strndup(t.data + from, to - from));
}

/* ---- create ---- */

static void undo_forget(EditorUndo *u, const char *rel)
{
	UndoFile *f = undo_find(u, rel);

	if (f)
		undo_drop_file(u, f);
}

static int cmd_create(EditorReq *q, const EditorArgs *args)
{
	_cleanup_close_ int fd = -1;
	int r;

	if (!args->file_text)
		return fail(q, "create requires file_text");
	if (args->file_text_len > q->max_bytes)
		return fail(q, "file too large: %s", q->path);

	/* Anything there counts, a symlink (unfollowed) included. */
	fd = wsfs_openat2(q->ws_fd, q->rel, O_PATH | O_NOFOLLOW, 0);
	if (fd >= 0)
		return fail(q, "already exists: %s", q->path);
	if (fd != -ENOENT)
		return fail_errno(q, fd, true);

	r = write_text(q, args->file_text, args->file_text_len, 0644);
	if (r < 0)
		return fail_errno(q, r, true);
	undo_forget(q->undo, q->rel);
	return succeed(q, "File created: %s\n", q->path);
}

/* ---- str_replace, insert ---- */

/* Write the edited text and keep the previous one for undo_edit. */
static int commit_edit(EditorReq *q, Text *old, const char *data, size_t len)
{
	int r;

	r = write_text(q, data, len, old->mode);
	if (r < 0)
		return fail_errno(q, r, true);
	/* Without memory for the snapshot the edit still happened; it just cannot be undone. */
	(void)undo_push(q->undo, q->rel, TAKE_PTR(old->data), old->len, old->mode);
	old->len = 0;
	return 0;
}

/* Matches of needle in hay, left to right without overlap; *first is the first one. */
static size_t count_matches(const char *hay, size_t hlen, const char *needle, size_t nlen,
			    size_t *first)
{
	size_t count = 0, off = 0;
	const char *p;

	while (off + nlen <= hlen && (p = memmem(hay + off, hlen - off, needle, nlen))) {
		if (count == 0)
			*first = (size_t)(p - hay);
		count++;
		off = (size_t)(p - hay) + nlen;
	}
	/* A lone match that overlaps a second one is just as ambiguous. */
	if (count == 1 && memmem(hay + *first + 1, hlen - *first - 1, needle, nlen))
		count = 2;
	return count;
}

static int cmd_str_replace(EditorReq *q, const EditorArgs *args)
{
	_cleanup_(text_clear) Text t = { 0 };
	_cleanup_free_ char *out = NULL;
	size_t first = 0, count, len;
	int r;

	if (args->old_len == 0)
		return fail(q, "old_str must not be empty");
	r = load_text(q, false, &t);
	if (r != 0)
		return r;

	count = count_matches(t.data, t.len, args->old_str, args->old_len, &first);
	if (count == 0)
		return fail(q, "old_str not found in %s", q->path);
	if (count > 1)
		return fail(q, "old_str matched %zu times in %s; must be unique", count, q->path);

	len = t.len - args->old_len + args->new_len;
	if (len > q->max_bytes)
		return fail(q, "file too large: %s", q->path);
	out = malloc(len + 1);
	if (!out)
		return -ENOMEM;
	memcpy(out, t.data, first);
	memcpy(out + first, args->new_str, args->new_len);
	memcpy(out + first + args->new_len, t.data + first + args->old_len,
	       t.len - first - args->old_len);
	out[len] = '\0';

	r = commit_edit(q, &t, out, len);
	if (r != 0)
		return r;
	return succeed(q, "Edited %s\n", q->path);
}

static int cmd_insert(EditorReq *q, const EditorArgs *args)
{
	_cleanup_(text_clear) Text t = { 0 };
	_cleanup_free_ char *out = NULL;
	bool nl_before, nl_after;
	size_t n, at, len, pos = 0;
	int r;

	r = load_text(q, false, &t);
	if (r != 0)
		return r;
	n = count_lines(t.data, t.len);
	if (args->insert_line < 0 || (uint64_t)args->insert_line > n)
		return fail(q, "insert_line %" PRId64 " out of range for %s", args->insert_line,
			    q->path);

	/* A last line without '\n' gets one first, and new_str goes in as whole lines. */
	nl_before = t.len > 0 && t.data[t.len - 1] != '\n';
	nl_after = args->new_len == 0 || args->new_str[args->new_len - 1] != '\n';
	at = line_start(t.data, t.len, (size_t)args->insert_line + 1);
	len = t.len + nl_before + args->new_len + nl_after;
	if (len > q->max_bytes)
		return fail(q, "file too large: %s", q->path);
	out = malloc(len + 1);
	if (!out)
		return -ENOMEM;

	memcpy(out, t.data, at);
	pos = at;
	if (nl_before && at == t.len)
		out[pos++] = '\n';
	memcpy(out + pos, args->new_str, args->new_len);
	pos += args->new_len;
	if (nl_after)
		out[pos++] = '\n';
	memcpy(out + pos, t.data + at, t.len - at);
	pos += t.len - at;
	/* When inserting before the last, unterminated line, that line still needs its '\n'. */
	if (nl_before && at != t.len)
		out[pos++] = '\n';
	out[pos] = '\0';

	r = commit_edit(q, &t, out, pos);
	if (r != 0)
		return r;
	return succeed(q, "Inserted into %s\n", q->path);
}

/* ---- undo_edit ---- */

static int cmd_undo_edit(EditorReq *q)
{
	UndoFile *f = undo_find(q->undo, q->rel);
	UndoSnap *s;
	int r;

	if (!f || f->n == 0)
		return fail(q, "no edits to undo for %s", q->path);
	s = &f->snaps[f->n - 1];
	r = write_text(q, s->data, s->len, s->mode);
	if (r < 0)
		return fail_errno(q, r, true);

	q->undo->bytes -= snap_cost(s);
	free(s->data);
	if (--f->n == 0)
		undo_drop_file(q->undo, f);
	return succeed(q, "Reverted %s\n", q->path);
}

/* ---- entry ---- */

int editor_run(int ws_fd, uid_t uid, gid_t gid, size_t max_bytes, EditorUndo *undo,
	       struct json_object *input, EditorResult *res, const char **detail)
{
	_cleanup_free_ EditorReq *q = NULL;
	EditorArgs args = { 0 };
	const char *path = NULL, *dummy;
	int r;

	if (!detail)
		detail = &dummy;
	*detail = NULL;
	*res = (EditorResult){ 0 };
	r = parse_args(input, &args, &path, detail);
	if (r < 0)
		return r;

	q = calloc(1, sizeof(*q));
	if (!q)
		return -ENOMEM;
	*q = (EditorReq){
		.ws_fd = ws_fd,
		.uid = uid,
		.gid = gid,
		.max_bytes = max_bytes,
		.undo = undo,
		.path = path,
		.res = res,
	};

	r = wsfs_normalize(path, true, q->rel, sizeof(q->rel));
	if (r == -EPERM)
		r = fail(q, "path is outside the workspace: %s", path);
	else if (r < 0)
		r = fail(q, "invalid path: %s", path);
	else if (strcmp(args.command, "view") == 0)
		r = cmd_view(q, &args);
	else if (strcmp(args.command, "create") == 0)
		r = cmd_create(q, &args);
	else if (strcmp(args.command, "str_replace") == 0)
		r = cmd_str_replace(q, &args);
	else if (strcmp(args.command, "insert") == 0)
		r = cmd_insert(q, &args);
	else
		r = cmd_undo_edit(q);

	if (r < 0) {
		editor_result_clear(res);
		return r;
	}
	return 0;
}
