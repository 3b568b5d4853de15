/* SPDX-License-Identifier: MIT */
/* Confined file operations on a session workspace: every path is resolved by openat2(). */
#include "wsfs.h"

#include <dirent.h>
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <json-c/json.h>

#include "cleanup.h"
#include "json.h"
#include "kernel_features.h"
#include "sandbox_layout.h"
#include "wsname.h"
#include "random.h"

/* openat2() answers -EAGAIN when a rename raced with a ".." lookup; it is safe to retry. */
#define WS_OPEN_TRIES 8

/* Deepest directory level a walk descends to (each level holds one fd). */
#define WS_WALK_MAX_DEPTH 64

/* Directory entries one walk may look at, so a huge tree cannot stall the daemon. */
#define WS_WALK_BUDGET 200000

/* Bytes of directory entries a walk reads at once: about a hundred names. */
#define WS_WALK_DENTS 8192

/* Attempts at a fresh random name for the temporary link of a commit. */
#define WS_TMPNAME_TRIES 16

int wsfs_openat2(int dfd, const char *path, uint64_t flags, uint64_t mode)
{
	struct open_how how = {
		.flags = flags | O_CLOEXEC,
		.mode = mode,
		.resolve = WORKSPACE_RESOLVE, /* kernel_features.h says what each refuses */
	};

	for (int i = 0; i < WS_OPEN_TRIES; i++) {
		long fd = syscall(SYS_openat2, dfd, path, &how, sizeof(how));
		if (fd >= 0)
			return (int)fd;
		if (errno != EAGAIN)
			return -errno;
	}
	return -EAGAIN;
}

static bool is_dot_or_dotdot(const char *name)
{
	return strcmp(name, ".") == 0 || strcmp(name, "..") == 0;
}

int wsfs_normalize(const char *api_path, bool allow_root, char *out, size_t outlen)
{
	static const char prefix[] = SANDBOX_WORKSPACE;
	char raw[PATH_MAX];
	const char *p = raw;
	size_t n = 0;

	if (!api_path || !out || outlen == 0)
		return -EINVAL;
	if (strnlen(api_path, WSFS_API_PATH_MAX) >= WSFS_API_PATH_MAX)
		return -EINVAL;
	/* The API form stands for the name's bytes (wsname.h); the rest works on those. */
	if (wsname_decode(api_path, raw, sizeof(raw)) < 0)
		return -EINVAL;

	if (*p == '/') {
		/* The only absolute paths that name the workspace are /workspace and below. */
		if (strncmp(p, prefix, sizeof(prefix) - 1) != 0)
			return -EPERM;
		p += sizeof(prefix) - 1;
		if (*p != '\0' && *p != '/')
			return -EPERM;
	}

	while (*p) {
		size_t len;

		while (*p == '/')
			p++;
		if (!*p)
			break;
		len = strcspn(p, "/");
		if (len > NAME_MAX)
			return -EINVAL;
		/* "." adds nothing; ".." is kept for the kernel to judge. */
		if (!(len == 1 && p[0] == '.')) {
			if (n + (n ? 1 : 0) + len + 1 > outlen)
				return -ENOBUFS;
			if (n)
				out[n++] = '/';
			memcpy(out + n, p, len);
			n += len;
		}
		p += len;
	}

	if (n == 0) {
		if (!allow_root)
			return -EINVAL;
		if (outlen < 2)
			return -ENOBUFS;
		out[n++] = '.';
	}
	out[n] = '\0';
	return 0;
}

/* Split rel into its directory ("." when none) and last component (pointing into rel). */
static int split_parent(const char *rel, char *dir, size_t dirlen, const char **base)
{
	const char *slash;
	size_t len;

	if (!rel || !*rel)
		return -EINVAL;
	slash = strrchr(rel, '/');
	if (!slash) {
		if (dirlen < 2)
			return -ENAMETOOLONG;
		strcpy(dir, ".");
		*base = rel;
		return 0;
	}
	if (slash[1] == '\0')
		return -EINVAL;
	len = (size_t)(slash - rel);
	if (len == 0)
		return -EINVAL; /* absolute: normalized paths never are */
	if (len + 1 > dirlen)
		return -ENAMETOOLONG;
	memcpy(dir, rel, len);
	dir[len] = '\0';
	*base = slash + 1;
	return 0;
}

/* Reopen the file behind an O_PATH descriptor for reading: the inode looked at, never
 * whatever the session has put at its path since. */
static int reopen_read(int path_fd)
{
	char proc[64];
	int fd;

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", path_fd);
	/*
	 * O_NONBLOCK: a file under a write lease makes an open wait for the holder for up to
	 * lease-break-time (45 s); the daemon's loop must not, so it gets -EWOULDBLOCK.
	 */
	fd = open(proc, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fcntl(fd, F_SETFL, 0) < 0) {
		int r = -errno;

		close(fd);
		return r;
	}
	return fd;
}

int wsfs_open_read(int ws_fd, const char *rel, struct stat *st)
{
	struct stat buf;
	_cleanup_close_ int path_fd = -1;

	if (!st)
		st = &buf;
	/*
	 * Look before opening: opening a FIFO wakes its writer, a socket gives -ENXIO, and a
	 * device's open runs its driver, as root. O_PATH runs none of that.
	 */
	path_fd = wsfs_openat2(ws_fd, rel, O_PATH, 0);
	if (path_fd < 0)
		return path_fd;
	if (fstat(path_fd, st) < 0)
		return -errno;
	if (S_ISDIR(st->st_mode))
		return -EISDIR;
	if (!S_ISREG(st->st_mode))
		return -ENXIO;
	return reopen_read(path_fd);
}

int wsfs_open_tmp(int ws_fd, uid_t uid, gid_t gid)
{
	_cleanup_close_ int fd = -1;

	fd = wsfs_openat2(ws_fd, ".", O_TMPFILE | O_RDWR, 0644);
	if (fd < 0)
		return fd;
	if (fchown(fd, uid, gid) < 0)
		return -errno;
	/* The daemon's umask must not decide what the session can do with its own file. */
	if (fchmod(fd, 0644) < 0)
		return -errno;
	return TAKE_FD(fd);
}

/*
 * One step of mkdirs: open the directory prefix (resolved from the workspace root, so a
 * symlink inside that stays inside is followed), or make name in parent when it is missing.
 */
static int mkdir_step(int ws_fd, int parent, const char *prefix, const char *name, uid_t uid,
		      gid_t gid)
{
	_cleanup_close_ int fd = -1;
	bool made = false;

	fd = wsfs_openat2(ws_fd, prefix, O_PATH | O_DIRECTORY, 0);
	if (fd != -ENOENT)
		return TAKE_FD(fd);

	if (mkdirat(parent, name, 0755) == 0)
		made = true;
	else if (errno != EEXIST)
		return -errno;

	/* Open what is now there by name in parent, never through a symlink swapped in. */
	fd = wsfs_openat2(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
	if (fd < 0)
		return fd;
	if (made && (fchown(fd, uid, gid) < 0 || fchmod(fd, 0755) < 0))
		return -errno;
	return TAKE_FD(fd);
}

/* Open the directory dir below the workspace, making missing levels as uid:gid. */
static int mkdirs_open(int ws_fd, const char *dir, uid_t uid, gid_t gid)
{
	char prefix[PATH_MAX];
	_cleanup_close_ int cur = -1;
	size_t len = strlen(dir), i = 0;

	cur = wsfs_openat2(ws_fd, ".", O_PATH | O_DIRECTORY, 0);
	if (cur < 0)
		return cur;
	if (strcmp(dir, ".") == 0)
		return TAKE_FD(cur);
	if (len >= sizeof(prefix))
		return -ENAMETOOLONG;
	memcpy(prefix, dir, len + 1);

	while (i < len) {
		size_t start = i;
		char saved;
		int fd;

		while (i < len && prefix[i] != '/')
			i++;
		if (i == start) {
			i++;
			continue;
		}
		saved = prefix[i];
		prefix[i] = '\0';
		fd = mkdir_step(ws_fd, cur, prefix, prefix + start, uid, gid);
		prefix[i] = saved;
		if (fd < 0)
			return fd;
		safe_close(cur);
		cur = fd;
		i++;
	}
	return TAKE_FD(cur);
}

int wsfs_mkdirs(int ws_fd, const char *rel, uid_t uid, gid_t gid)
{
	char dir[PATH_MAX];
	const char *base;
	_cleanup_close_ int fd = -1;
	int r;

	r = split_parent(rel, dir, sizeof(dir), &base);
	if (r < 0)
		return r;
	fd = mkdirs_open(ws_fd, dir, uid, gid);
	return fd < 0 ? fd : 0;
}

static int random_name(char *name, size_t len)
{
	unsigned long long v;

	if (random_bytes(&v, sizeof(v)) < 0)
		return -EIO;
	if ((size_t)snprintf(name, len, ".paddock-%016llx", v) >= len)
		return -ENAMETOOLONG;
	return 0;
}

/* Give the unnamed tmp_fd a fresh random name in dfd. */
static int link_tmpfile(int tmp_fd, int dfd, char *name, size_t len)
{
	char proc[64];
	int r;

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", tmp_fd);
	for (int i = 0; i < WS_TMPNAME_TRIES; i++) {
		r = random_name(name, len);
		if (r < 0)
			return r;
		if (linkat(tmp_fd, "", dfd, name, AT_EMPTY_PATH) == 0)
			return 0;
		/* AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH; without it, go through /proc. */
		if (errno == ENOENT && linkat(AT_FDCWD, proc, dfd, name, AT_SYMLINK_FOLLOW) == 0)
			return 0;
		if (errno != EEXIST)
			return -errno;
	}
	return -EEXIST;
}

int wsfs_commit(int ws_fd, int tmp_fd, const char *rel, uid_t uid, gid_t gid, int *replaced)
{
	char dir[PATH_MAX], tmpname[32];
	const char *base;
	_cleanup_close_ int dfd = -1, old = -1;
	struct stat st;
	int r;

	if (replaced)
		*replaced = -1;
	r = split_parent(rel, dir, sizeof(dir), &base);
	if (r < 0)
		return r;
	if (is_dot_or_dotdot(base)) {
		/* Names a directory; first let the kernel say whether it is even inside. */
		_cleanup_close_ int fd = wsfs_openat2(ws_fd, rel, O_PATH | O_DIRECTORY, 0);
		return fd < 0 ? fd : -EISDIR;
	}

	dfd = mkdirs_open(ws_fd, dir, uid, gid);
	if (dfd < 0)
		return dfd;

	/*
	 * Writes never go through a symlink at the last component. Should one be swapped in
	 * after this check, renameat() replaces the link itself, never what it points to.
	 */
	if (fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if (S_ISDIR(st.st_mode))
			return -EISDIR;
		if (S_ISLNK(st.st_mode))
			return -ELOOP;
		/* Whatever the name holds when renameat() runs is what goes; should it have
		 * been swapped meanwhile, this only holds some other file a little longer. */
		if (replaced)
			old = openat(dfd, base, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	} else if (errno != ENOENT) {
		return -errno;
	}

	r = link_tmpfile(tmp_fd, dfd, tmpname, sizeof(tmpname));
	if (r < 0)
		return r;
	if (renameat(dfd, tmpname, dfd, base) < 0) {
		r = -errno;
		(void)unlinkat(dfd, tmpname, 0);
		return r;
	}
	if (replaced)
		*replaced = TAKE_FD(old);
	return 0;
}

static bool timespec_ge(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec > b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec >= b->tv_nsec);
}

/* A directory the walk has open. Entries are read with getdents64() into the walk's one
 * buffer, which always holds the deepest directory's; a directory left for a subdirectory
 * reads on from the offset after that subdirectory's entry, as seekdir() would. */
typedef struct WalkDir {
	int fd;
	size_t len;   /* the length of path naming it */
	off_t resume; /* where to read on once back from a subdirectory */
	bool seek;    /* resume is to be sought first */
	bool lent;    /* the caller's descriptor: read from its start, never closed */
} WalkDir;

/*
 * A bounded, symlink-free walk over regular files; visit() sees workspace-relative paths.
 * It keeps its open directories on a stack of its own rather than recursing, so that it
 * can stop after any number of entries and go on later (the daemon's loop walks a large
 * workspace a slice per turn). It reads directories itself rather than with opendir(),
 * which costs a stat, two fcntl() calls and a 32 KiB allocation per directory: the walk
 * after every call opens at least the workspace's root.
 */
typedef struct Walk Walk;
struct Walk {
	size_t max;		      /* regular files to accept at most */
	size_t n;		      /* regular files accepted so far */
	size_t budget;		      /* directory entries still allowed to be examined */
	const struct timespec *since; /* if set, only files modified at or after it count */
	bool truncated;		      /* left something out: max, budget, depth, length */
	void *userdata;		      /* for visit() */
	/* Called for each regular file accepted; < 0 aborts the walk. */
	int (*visit)(Walk *w, const char *path, const struct stat *st);
	WalkDir dirs[WS_WALK_MAX_DEPTH]; /* the directories open, the one being read last */
	unsigned depth;			 /* how many are open */
	size_t pos, end;		 /* the deepest one's unread entries: dents[pos, end) */
	/* Last, and not zeroed (scan_new): 28 KiB a call would clear for nothing. */
	char path[WSFS_API_PATH_MAX]; /* the current path, workspace-relative, in API form */
	char dents[WS_WALK_DENTS] __attribute__((aligned(8)));
};

/* Open the directory dfd below the others; path[0..len) names it. The walk closes it when
 * done with it, unless the caller marks it lent (wsfs_scan_changes_from()). */
static void walk_push(Walk *w, int dfd, size_t len)
{
	w->dirs[w->depth++] = (WalkDir){ .fd = dfd, .len = len };
	w->pos = w->end = 0;
}

static void walk_pop(Walk *w)
{
	const WalkDir *d = &w->dirs[--w->depth];

	if (!d->lent)
		close(d->fd);
	w->path[w->depth ? w->dirs[w->depth - 1].len : 0] = '\0';
	w->pos = w->end = 0;
}

static void walk_close(Walk *w)
{
	while (w->depth)
		walk_pop(w);
}

/* The deepest directory's next entry: 1 with *ret set, 0 at its end, -errno. */
static int walk_next(Walk *w, const struct dirent64 **ret)
{
	WalkDir *d = &w->dirs[w->depth - 1];
	const struct dirent64 *de;

	if (w->pos >= w->end) {
		ssize_t n;

		if (d->seek) {
			if (lseek(d->fd, d->resume, SEEK_SET) < 0)
				return -errno;
			d->seek = false;
		}
		n = getdents64(d->fd, w->dents, sizeof(w->dents));
		if (n <= 0)
			return n < 0 ? -errno : 0;
		w->pos = 0;
		w->end = (size_t)n;
	}
	de = (const struct dirent64 *)(w->dents + w->pos);
	w->pos += de->d_reclen;
	*ret = de;
	return 1;
}

/* What the walk does with an entry by its type: directories are opened without a look
 * (the open refuses anything else), regular files and unknown types are looked at. */
static bool entry_needs_stat(unsigned char type)
{
	return type == DT_REG || type == DT_UNKNOWN;
}

/* Go down into the directory entry name of the deepest directory, which path[0..plen)
 * now names: 1 when it is open and being read, 0 to go on past it, -errno to fail. */
static int walk_descend(Walk *w, const char *name, off_t after, size_t plen)
{
	WalkDir *d = &w->dirs[w->depth - 1];
	int child;

	if (w->depth >= WS_WALK_MAX_DEPTH) {
		w->truncated = true;
		return 0;
	}
	child = wsfs_openat2(d->fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
	if (child >= 0) {
		/* The buffer goes to the child: this one reads on from after the entry. */
		d->resume = after;
		d->seek = true;
		walk_push(w, child, plen);
		return 1;
	}
	if (child != -ENOENT && child != -ELOOP && child != -ENOTDIR && child != -EXDEV)
		return child; /* anything but a race with the session or a mount */
	return 0;
}

/* Look at up to `entries` more directory entries: 1 when the walk is over (all seen, or a
 * limit reached), 0 when there is more to see, -errno on failure. */
static int walk_step(Walk *w, size_t entries)
{
	while (w->depth > 0) {
		const WalkDir *d = &w->dirs[w->depth - 1];
		size_t len = d->len, plen;
		const struct dirent64 *de = NULL;
		struct stat st;
		bool is_dir;
		int r;

		if (entries == 0)
			return 0;
		r = walk_next(w, &de);
		if (r < 0)
			return r;
		if (r == 0) {
			walk_pop(w);
			continue;
		}
		if (is_dot_or_dotdot(de->d_name))
			continue;
		entries--;
		if (w->budget == 0) {
			w->truncated = true;
			return 1;
		}
		w->budget--;

		/* Never follows a symlink: the entry itself is looked at. */
		is_dir = de->d_type == DT_DIR;
		if (entry_needs_stat(de->d_type)) {
			if (fstatat(d->fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
				continue; /* gone meanwhile */
			is_dir = S_ISDIR(st.st_mode);
			if (!S_ISREG(st.st_mode) && !is_dir)
				continue;
		} else if (!is_dir) {
			continue;
		}

		/* Paths go out in API form: whatever bytes the name holds, they are text. */
		plen = len + (len ? 1 : 0);
		r = (int)wsname_encode(de->d_name, strlen(de->d_name), w->path + plen,
				       sizeof(w->path) - plen);
		if (r < 0) {
			w->path[len] = '\0';
			w->truncated = true;
			continue;
		}
		if (len)
			w->path[len] = '/';
		plen += (size_t)r;

		if (is_dir) {
			r = walk_descend(w, de->d_name, de->d_off, plen);
			if (r < 0)
				return r;
			if (r > 0)
				continue; /* path names the directory now read */
		} else if (w->since && !timespec_ge(&st.st_mtim, w->since)) {
			/* not changed since */
		} else if (w->n >= w->max) {
			w->truncated = true;
			w->path[len] = '\0';
			return 1;
		} else {
			r = w->visit(w, w->path, &st);
			if (r < 0)
				return r;
			w->n++;
		}
		w->path[len] = '\0';
	}
	return 1;
}

/* Open the directory rel ("." for the workspace root) below ws_fd, for walk_step(). */
static int walk_start(Walk *w, int ws_fd, const char *rel)
{
	const char *start = (!rel || !*rel) ? "." : rel;
	size_t len = 0;
	int fd;

	fd = wsfs_openat2(ws_fd, start, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0)
		return fd;
	if (strcmp(start, ".") != 0) {
		ssize_t n = wsname_encode(start, strlen(start), w->path, sizeof(w->path));

		if (n < 0) {
			close(fd);
			return -ENAMETOOLONG;
		}
		len = (size_t)n;
	} else {
		w->path[0] = '\0';
	}
	if (w->budget == 0)
		w->budget = WS_WALK_BUDGET;
	walk_push(w, fd, len);
	return 0;
}

static int list_visit(Walk *w, const char *path, const struct stat *st)
{
	struct json_object *arr = w->userdata;
	_cleanup_(json_putp) struct json_object *o = json_object_new_object();
	double mtime = (double)st->st_mtim.tv_sec + (double)st->st_mtim.tv_nsec / 1e9;

	if (!o)
		return -ENOMEM;
	if (json_set(o, "path", json_object_new_string(path)) < 0 ||
	    json_set(o, "size_bytes", json_object_new_int64(st->st_size)) < 0 ||
	    json_set(o, "modified_at", json_object_new_double(mtime)) < 0 ||
	    json_set(o, "mime_type", json_object_new_string(wsfs_guess_mime(path))) < 0)
		return -ENOMEM;
	return json_append(arr, TAKE_PTR(o));
}

static int cmp_entry_path(const void *a, const void *b)
{
	struct json_object *const *x = a, *const *y = b;
	struct json_object *px, *py;

	json_object_object_get_ex(*x, "path", &px);
	json_object_object_get_ex(*y, "path", &py);
	return strcmp(json_object_get_string(px), json_object_get_string(py));
}

/* Files collected by wsfs_changed_since(). */
typedef struct Changed {
	WsfsChange *items; /* owned, with their paths */
	size_t n;	   /* used entries */
	size_t cap;	   /* allocated entries */
} Changed;

static int changed_visit(Walk *w, const char *path, const struct stat *st)
{
	Changed *c = w->userdata;
	char *dup;

	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 16;
		WsfsChange *p = reallocarray(c->items, cap, sizeof(*p));

		if (!p)
			return -ENOMEM;
		c->items = p;
		c->cap = cap;
	}
	dup = strdup(path);
	if (!dup)
		return -ENOMEM;
	c->items[c->n++] = (WsfsChange){
		.path = dup, .mtime = st->st_mtim, .size = st->st_size, .ino = st->st_ino
	};
	return 0;
}

static int cmp_change(const void *a, const void *b)
{
	return strcmp(((const WsfsChange *)a)->path, ((const WsfsChange *)b)->path);
}

void wsfs_changes_free(WsfsChange *c, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(c[i].path);
	free(c);
}

bool wsfs_change_same(const WsfsChange *a, const WsfsChange *b)
{
	return strcmp(a->path, b->path) == 0 && a->mtime.tv_sec == b->mtime.tv_sec &&
	       a->mtime.tv_nsec == b->mtime.tv_nsec && a->size == b->size && a->ino == b->ino;
}

/* A walk for wsfs_scan_list() or wsfs_scan_changes(), and what it has found so far. */
struct WsfsScan {
	bool list;		 /* a listing (arr) rather than changes (changed) */
	struct json_object *arr; /* list: {path, size_bytes, modified_at, mime_type} */
	Changed changed;	 /* changes: the files modified since */
	struct timespec since;	 /* changes: from when */
	Walk w;			 /* last: its path and entry buffers end the struct */
};

/* One scan's memory kept for the next: a call's walk would otherwise take and give back
 * 28 KiB, and malloc consolidates its free lists at every allocation that large. */
static WsfsScan *spare_scan;

/* A scan with every field zero but the walk's buffers, which walk_start() and walk_next()
 * set before they are read. */
static WsfsScan *scan_new(void)
{
	WsfsScan *sc = spare_scan ? spare_scan : malloc(sizeof(*sc));

	spare_scan = NULL;
	if (sc)
		memset(sc, 0, offsetof(WsfsScan, w.path));
	return sc;
}

WsfsScan *wsfs_scan_free(WsfsScan *sc)
{
	if (!sc)
		return NULL;
	walk_close(&sc->w);
	json_object_put(sc->arr);
	wsfs_changes_free(sc->changed.items, sc->changed.n);
	if (!spare_scan)
		spare_scan = sc;
	else
		free(sc);
	return NULL;
}

int wsfs_scan_list(int ws_fd, const char *rel, size_t max, WsfsScan **ret)
{
	WsfsScan *sc = scan_new();
	int r;

	if (!sc || !(sc->arr = json_object_new_array())) {
		wsfs_scan_free(sc);
		return -ENOMEM;
	}
	sc->list = true;
	sc->w.max = max;
	sc->w.visit = list_visit;
	sc->w.userdata = sc->arr;
	r = walk_start(&sc->w, ws_fd, rel);
	if (r < 0) {
		wsfs_scan_free(sc);
		return r;
	}
	*ret = sc;
	return 0;
}

/* A scan for wsfs_scan_changes() or wsfs_scan_changes_from(), its root not yet open. */
static WsfsScan *changes_new(const struct timespec *since, size_t max)
{
	WsfsScan *sc = scan_new();

	if (!sc)
		return NULL;
	sc->since = *since;
	sc->w.max = max;
	sc->w.since = &sc->since;
	sc->w.visit = changed_visit;
	sc->w.userdata = &sc->changed;
	return sc;
}

int wsfs_scan_changes(int ws_fd, const struct timespec *since, size_t max, WsfsScan **ret)
{
	WsfsScan *sc = changes_new(since, max);
	int r;

	if (!sc)
		return -ENOMEM;
	r = walk_start(&sc->w, ws_fd, ".");
	if (r < 0) {
		wsfs_scan_free(sc);
		return r;
	}
	*ret = sc;
	return 0;
}

int wsfs_scan_changes_from(int root_fd, const struct timespec *since, size_t max, WsfsScan **ret)
{
	WsfsScan *sc = changes_new(since, max);

	if (!sc)
		return -ENOMEM;
	sc->w.path[0] = '\0';
	sc->w.budget = WS_WALK_BUDGET;
	walk_push(&sc->w, root_fd, 0);
	/* Read from the start: the last walk left the offset at the end. */
	sc->w.dirs[0].lent = sc->w.dirs[0].seek = true;
	sc->w.dirs[0].resume = 0;
	*ret = sc;
	return 0;
}

int wsfs_root_open(int ws_fd)
{
	return wsfs_openat2(ws_fd, ".", O_RDONLY | O_DIRECTORY, 0);
}

int wsfs_scan_step(WsfsScan *sc, size_t entries)
{
	int r = walk_step(&sc->w, entries);

	/* Done: let go of the directories now rather than when the results are taken. */
	if (r != 0)
		walk_close(&sc->w);
	return r;
}

struct json_object *wsfs_scan_take_list(WsfsScan *sc, bool *truncated)
{
	struct json_object *arr = sc->arr;

	sc->arr = NULL;
	json_object_array_sort(arr, cmp_entry_path);
	if (truncated)
		*truncated = sc->w.truncated;
	wsfs_scan_free(sc);
	return arr;
}

void wsfs_scan_take_changes(WsfsScan *sc, WsfsChange **ret, size_t *n_ret)
{
	if (sc->changed.n)
		qsort(sc->changed.items, sc->changed.n, sizeof(*sc->changed.items), cmp_change);
	*ret = sc->changed.items;
	*n_ret = sc->changed.n;
	sc->changed = (Changed){ 0 };
	wsfs_scan_free(sc);
}

int wsfs_list(int ws_fd, const char *rel, size_t max, struct json_object **ret, bool *truncated)
{
	WsfsScan *sc;
	int r = wsfs_scan_list(ws_fd, rel, max, &sc);

	if (r == 0 && (r = wsfs_scan_step(sc, SIZE_MAX)) < 0)
		wsfs_scan_free(sc);
	if (r < 0)
		return r;
	*ret = wsfs_scan_take_list(sc, truncated);
	return 0;
}

int wsfs_changed_since(int ws_fd, const struct timespec *since, size_t max, WsfsChange **ret,
		       size_t *n_ret)
{
	WsfsScan *sc;
	int r = wsfs_scan_changes(ws_fd, since, max, &sc);

	if (r == 0 && (r = wsfs_scan_step(sc, SIZE_MAX)) < 0)
		wsfs_scan_free(sc);
	if (r < 0)
		return r;
	wsfs_scan_take_changes(sc, ret, n_ret);
	return 0;
}

static const struct {
	const char *ext;  /* lower-case extension, without the dot */
	const char *mime; /* its type */
} mime_table[] = {
	{ "txt", "text/plain" },
	{ "log", "text/plain" },
	{ "csv", "text/csv" },
	{ "tsv", "text/tab-separated-values" },
	{ "json", "application/json" },
	{ "jsonl", "application/x-ndjson" },
	{ "ipynb", "application/x-ipynb+json" },
	{ "py", "text/x-python" },
	{ "js", "text/javascript" },
	{ "mjs", "text/javascript" },
	{ "ts", "text/x-typescript" },
	{ "html", "text/html" },
	{ "htm", "text/html" },
	{ "css", "text/css" },
	{ "md", "text/markdown" },
	{ "c", "text/x-c" },
	{ "h", "text/x-c" },
	{ "sh", "application/x-sh" },
	{ "xml", "application/xml" },
	{ "yaml", "application/yaml" },
	{ "yml", "application/yaml" },
	{ "toml", "application/toml" },
	{ "sql", "application/sql" },
	{ "png", "image/png" },
	{ "jpg", "image/jpeg" },
	{ "jpeg", "image/jpeg" },
	{ "gif", "image/gif" },
	{ "webp", "image/webp" },
	{ "bmp", "image/bmp" },
	{ "svg", "image/svg+xml" },
	{ "ico", "image/vnd.microsoft.icon" },
	{ "pdf", "application/pdf" },
	{ "zip", "application/zip" },
	{ "gz", "application/gzip" },
	{ "tgz", "application/gzip" },
	{ "bz2", "application/x-bzip2" },
	{ "xz", "application/x-xz" },
	{ "tar", "application/x-tar" },
	{ "parquet", "application/vnd.apache.parquet" },
	{ "xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet" },
	{ "docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document" },
	{ "pptx", "application/vnd.openxmlformats-officedocument.presentationml.presentation" },
	{ "mp3", "audio/mpeg" },
	{ "wav", "audio/wav" },
	{ "mp4", "video/mp4" },
	{ "webm", "video/webm" },
};

const char *wsfs_guess_mime(const char *path)
{
	const char *name, *dot;

	if (!path)
		return "application/octet-stream";
	name = strrchr(path, '/');
	name = name ? name + 1 : path;
	dot = strrchr(name, '.');
	/* A leading dot (".bashrc") marks a hidden file, not an extension. */
	if (!dot || dot == name || dot[1] == '\0')
		return "application/octet-stream";
	for (size_t i = 0; i < ARRAY_SIZE(mime_table); i++)
		if (strcasecmp(dot + 1, mime_table[i].ext) == 0)
			return mime_table[i].mime;
	return "application/octet-stream";
}
