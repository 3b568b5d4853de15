/* SPDX-License-Identifier: MIT */
/* Unit tests for the confined workspace file operations: normalize, read, commit, list. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <json-c/json.h>

#include "cleanup.h"
#include "workspace/wsfs.h"
#include "workspace/wsname.h"

#include "unit.h"

#define UID 4242
#define GID 4243

/* A workspace with company: <root>/ws is the workspace, <root>/secret and <root>/outside/
 * are what must stay out of reach. */
static char root[64];
static char ws[128];
static int ws_fd = -1;

static void path_of(char *buf, size_t len, const char *rel)
{
	snprintf(buf, len, "%s/%s", ws, rel);
}

static void put(const char *rel, const char *content)
{
	char p[PATH_MAX];
	FILE *f;

	path_of(p, sizeof(p), rel);
	f = fopen(p, "w");
	if (!f) {
		perror(p);
		exit(1);
	}
	fputs(content, f);
	fclose(f);
}

static bool exists(const char *abs)
{
	struct stat st;

	return lstat(abs, &st) == 0;
}

static void setup(void)
{
	char p[PATH_MAX];

	strcpy(root, "/tmp/paddock-wsfs-XXXXXX");
	unit_scratch_workspace(root, ws, sizeof(ws));
	snprintf(p, sizeof(p), "%s/outside/secret", root);
	fclose(fopen(p, "w"));

	put("data.txt", "hello\n");
	path_of(p, sizeof(p), "sub");
	mkdir(p, 0755);
	put("sub/inner.csv", "a,b\n");
	path_of(p, sizeof(p), "fifo");
	mkfifo(p, 0644);
	path_of(p, sizeof(p), "link_abs");
	symlink("/etc/shadow", p);
	path_of(p, sizeof(p), "link_climb");
	symlink("../secret", p);
	path_of(p, sizeof(p), "link_in");
	symlink("data.txt", p);
	path_of(p, sizeof(p), "link_outdir");
	{
		char target[PATH_MAX];
		snprintf(target, sizeof(target), "%s/outside", root);
		symlink(target, p);
	}
	path_of(p, sizeof(p), "rel_outdir");
	symlink("../outside", p);
	path_of(p, sizeof(p), "link_indir");
	symlink("sub", p);

	ws_fd = open(ws, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (ws_fd < 0) {
		perror(ws);
		exit(1);
	}
}

static void teardown(void)
{
	close(ws_fd);
	unit_remove_tree(root);
}

static bool norm_is(const char *in, bool allow_root, const char *want)
{
	char out[PATH_MAX];
	int r = wsfs_normalize(in, allow_root, out, sizeof(out));

	if (r < 0 || strcmp(out, want) != 0) {
		fprintf(stderr, "  normalize(\"%s\") = %d \"%s\", want \"%s\"\n", in, r,
			r < 0 ? "" : out, want);
		return false;
	}
	return true;
}

static int norm_err(const char *in, bool allow_root)
{
	char out[PATH_MAX];

	return wsfs_normalize(in, allow_root, out, sizeof(out));
}

static void test_normalize_gives_workspace_relative_paths(void)
{
	char longname[NAME_MAX + 2], longpath[PATH_MAX + 10], small[4];

	CHECK(norm_is("a/b", false, "a/b"));
	CHECK(norm_is("./a", false, "a"));
	CHECK(norm_is("a//b/./c/", false, "a/b/c"));
	CHECK(norm_is("/workspace/a", false, "a"));
	CHECK(norm_is("/workspace//a/b", false, "a/b"));
	CHECK(norm_is("/workspace", true, "."));
	CHECK(norm_is("/workspace/", true, "."));
	CHECK(norm_is("", true, "."));
	CHECK(norm_is(".", true, "."));
	CHECK(norm_is("../x", false, "../x"));
	CHECK(norm_is("/workspace/../../etc/passwd", false, "../../etc/passwd"));
	CHECK_EQ_INT(norm_err("", false), -EINVAL);
	CHECK_EQ_INT(norm_err("/workspace", false), -EINVAL);
	CHECK_EQ_INT(norm_err("./", false), -EINVAL);
	CHECK_EQ_INT(norm_err("/etc/passwd", false), -EPERM);
	CHECK_EQ_INT(norm_err("/", true), -EPERM);
	CHECK_EQ_INT(norm_err("/workspacex/a", false), -EPERM);
	CHECK_EQ_INT(norm_err("//workspace/a", false), -EPERM);

	memset(longname, 'a', NAME_MAX + 1);
	longname[NAME_MAX + 1] = '\0';
	CHECK_EQ_INT(norm_err(longname, false), -EINVAL);
	longname[NAME_MAX] = '\0';
	CHECK(norm_is(longname, false, longname));
	for (size_t i = 0; i < sizeof(longpath) - 1; i++)
		longpath[i] = i % 2 ? '/' : 'a';
	longpath[sizeof(longpath) - 1] = '\0';
	CHECK_EQ_INT(norm_err(longpath, false), -EINVAL);
	CHECK_EQ_INT(wsfs_normalize("abcdef", false, small, sizeof(small)), -ENOBUFS);
}

static bool read_is(const char *rel, const char *want)
{
	char buf[256];
	struct stat st;
	ssize_t n;
	_cleanup_close_ int fd = wsfs_open_read(ws_fd, rel, &st);

	if (fd < 0) {
		fprintf(stderr, "  open_read(%s) = %d\n", rel, fd);
		return false;
	}
	n = read(fd, buf, sizeof(buf) - 1);
	if (n < 0)
		return false;
	buf[n] = '\0';
	return S_ISREG(st.st_mode) && strcmp(buf, want) == 0;
}

static int read_err(const char *rel)
{
	int fd = wsfs_open_read(ws_fd, rel, NULL);

	if (fd >= 0) {
		close(fd);
		return 0;
	}
	return fd;
}

static void test_open_read_stays_inside_the_workspace(void)
{
	CHECK(read_is("data.txt", "hello\n"));
	CHECK(read_is("sub/inner.csv", "a,b\n"));
	CHECK(read_is("link_in", "hello\n"));
	CHECK(read_is("link_indir/inner.csv", "a,b\n"));
	CHECK(read_is("sub/../data.txt", "hello\n"));
	CHECK_EQ_INT(read_err("sub"), -EISDIR);
	CHECK_EQ_INT(read_err("."), -EISDIR);
	CHECK_EQ_INT(read_err("nope"), -ENOENT);
	CHECK_EQ_INT(read_err("data.txt/x"), -ENOTDIR);
	/* A FIFO is refused without blocking (alarm() in main bounds a hang). */
	CHECK_EQ_INT(read_err("fifo"), -ENXIO);

	CHECK_EQ_INT(read_err("../secret"), -EXDEV);
	CHECK_EQ_INT(read_err("../../etc/passwd"), -EXDEV);
	CHECK_EQ_INT(read_err("sub/../../secret"), -EXDEV);
	CHECK_EQ_INT(read_err("link_abs"), -EXDEV);
	CHECK_EQ_INT(read_err("link_climb"), -EXDEV);
	CHECK_EQ_INT(read_err("link_outdir/secret"), -EXDEV);
	CHECK_EQ_INT(read_err("rel_outdir/secret"), -EXDEV);
}

static int tmp_with(const char *content)
{
	int fd = wsfs_open_tmp(ws_fd, UID, GID);

	if (fd >= 0 && write(fd, content, strlen(content)) != (ssize_t)strlen(content)) {
		close(fd);
		return -EIO;
	}
	return fd;
}

static int commit(const char *rel, const char *content)
{
	_cleanup_close_ int fd = tmp_with(content);

	if (fd < 0)
		return fd;
	return wsfs_commit(ws_fd, fd, rel, UID, GID, NULL);
}

static bool owned_with_mode(const char *rel, mode_t mode)
{
	char p[PATH_MAX];
	struct stat st;

	path_of(p, sizeof(p), rel);
	if (lstat(p, &st) < 0)
		return false;
	if (st.st_uid != UID || st.st_gid != GID || (st.st_mode & 07777) != mode) {
		fprintf(stderr, "  %s: %u:%u %o\n", rel, st.st_uid, st.st_gid, st.st_mode & 07777);
		return false;
	}
	return true;
}

/* No temporary names left behind in dir. */
static bool no_leftovers(const char *dir)
{
	char p[PATH_MAX];
	char cmd[PATH_MAX + 64];

	path_of(p, sizeof(p), dir);
	snprintf(cmd, sizeof(cmd), "ls -a '%s' | grep -q '^\\.paddock-'", p);
	return system(cmd) != 0;
}

static void test_commit_replaces_by_rename_and_stays_inside(void)
{
	char p[PATH_MAX];
	struct stat before, after, st;
	ino_t ino;

	CHECK_EQ_INT(commit("new.txt", "one"), 0);
	CHECK(read_is("new.txt", "one"));
	CHECK(owned_with_mode("new.txt", 0644));

	path_of(p, sizeof(p), "new.txt");
	stat(p, &st);
	ino = st.st_ino;
	CHECK_EQ_INT(commit("new.txt", "two"), 0);
	CHECK(read_is("new.txt", "two"));
	stat(p, &st);
	CHECK_NE_INT(st.st_ino, ino); /* replaced by rename, not rewritten in place */

	CHECK_EQ_INT(commit("made/deeper/f.txt", "deep"), 0);
	CHECK(read_is("made/deeper/f.txt", "deep"));
	CHECK(owned_with_mode("made", 0755));
	CHECK(owned_with_mode("made/deeper", 0755));
	CHECK(owned_with_mode("made/deeper/f.txt", 0644));
	CHECK_EQ_INT(commit("link_indir/via_link.txt", "v"), 0);
	CHECK(read_is("sub/via_link.txt", "v"));

	CHECK_EQ_INT(commit("sub", "x"), -EISDIR);
	CHECK_EQ_INT(commit(".", "x"), -EISDIR);
	CHECK_EQ_INT(commit("sub/..", "x"), -EISDIR);
	CHECK_EQ_INT(commit("..", "x"), -EXDEV);
	CHECK_EQ_INT(commit("data.txt/x", "x"), -ENOTDIR);

	CHECK_EQ_INT(commit("../escape.txt", "x"), -EXDEV);
	snprintf(p, sizeof(p), "%s/escape.txt", root);
	CHECK(!exists(p));
	CHECK_LT_INT(commit("/etc/passwd", "x"), 0);

	stat("/etc/shadow", &before);
	CHECK_EQ_INT(commit("link_abs", "x"), -ELOOP);
	stat("/etc/shadow", &after);
	CHECK_EQ_INT(before.st_ino, after.st_ino);
	CHECK_EQ_INT(before.st_size, after.st_size);
	CHECK_EQ_INT(before.st_mtim.tv_nsec, after.st_mtim.tv_nsec);
	path_of(p, sizeof(p), "link_abs");
	CHECK_EQ_INT(lstat(p, &st), 0);
	CHECK(S_ISLNK(st.st_mode));

	CHECK_EQ_INT(commit("link_in", "x"), -ELOOP);
	CHECK(read_is("data.txt", "hello\n"));
	CHECK_EQ_INT(commit("link_climb", "x"), -ELOOP);

	CHECK_EQ_INT(commit("link_outdir/new.txt", "x"), -EXDEV);
	CHECK_EQ_INT(commit("rel_outdir/new.txt", "x"), -EXDEV);
	CHECK_EQ_INT(commit("link_outdir/a/b/new.txt", "x"), -EXDEV);
	snprintf(p, sizeof(p), "%s/outside/new.txt", root);
	CHECK(!exists(p));
	snprintf(p, sizeof(p), "%s/outside/a", root);
	CHECK(!exists(p));

	CHECK_EQ_INT(wsfs_mkdirs(ws_fd, "m1/m2/file", UID, GID), 0);
	CHECK(owned_with_mode("m1/m2", 0755));
	path_of(p, sizeof(p), "m1/m2/file");
	CHECK(!exists(p));
	CHECK_EQ_INT(wsfs_mkdirs(ws_fd, "m1/m2/file", UID, GID), 0);
	CHECK_EQ_INT(wsfs_mkdirs(ws_fd, "top", UID, GID), 0);
	CHECK_EQ_INT(wsfs_mkdirs(ws_fd, "link_outdir/a/b", UID, GID), -EXDEV);
	CHECK_EQ_INT(wsfs_mkdirs(ws_fd, "rel_outdir/a/b", UID, GID), -EXDEV);
	CHECK_EQ_INT(wsfs_mkdirs(ws_fd, "../a/b", UID, GID), -EXDEV);
	CHECK(!exists(p));

	CHECK(no_leftovers("."));
	CHECK(no_leftovers("sub"));
}

/*
 * A commit over a file hands back a reference to the file it replaced, whose data is freed
 * only as that goes; over nothing, it hands back none.
 */
static void test_commit_hands_back_the_file_it_replaced(void)
{
	_cleanup_close_ int fd = tmp_with("second"), again = -1;
	char p[PATH_MAX], proc[64], back[16] = "";
	int replaced = 7;
	struct stat old, st;

	CHECK_EQ_INT(commit("kept.bin", "first version"), 0);
	path_of(p, sizeof(p), "kept.bin");
	CHECK_EQ_INT(stat(p, &old), 0);

	CHECK_EQ_INT(wsfs_commit(ws_fd, fd, "kept.bin", UID, GID, &replaced), 0);
	CHECK(read_is("kept.bin", "second"));
	CHECK_GE_INT(replaced, 0);
	CHECK_EQ_INT(fstat(replaced, &st), 0);
	CHECK_EQ_INT(st.st_ino, old.st_ino);
	CHECK_EQ_INT(st.st_nlink, 0);
	CHECK_EQ_INT(st.st_size, 13);
	/* Still whole until the reference goes. */
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", replaced);
	again = open(proc, O_RDONLY | O_CLOEXEC);
	CHECK_GE_INT(again, 0);
	CHECK_EQ_INT(read(again, back, sizeof(back) - 1), 13);
	CHECK_EQ_STR(back, "first version");
	close(replaced);

	replaced = 7;
	fd = safe_close(fd);
	fd = tmp_with("fresh");
	CHECK_EQ_INT(wsfs_commit(ws_fd, fd, "brand_new.bin", UID, GID, &replaced), 0);
	CHECK_EQ_INT(replaced, -1);
	replaced = 7;
	CHECK_EQ_INT(wsfs_commit(ws_fd, fd, "sub", UID, GID, &replaced), -EISDIR);
	CHECK_EQ_INT(replaced, -1);
	CHECK(no_leftovers("."));
	path_of(p, sizeof(p), "kept.bin");
	unlink(p);
	path_of(p, sizeof(p), "brand_new.bin");
	unlink(p);
}

/*
 * Commit must work without CAP_DAC_READ_SEARCH too: older kernels then refuse
 * linkat(AT_EMPTY_PATH) and commit goes through /proc/self/fd instead.
 */
static void test_commit_works_without_cap_dac_read_search(void)
{
	int status = -1;
	pid_t pid = fork();

	if (pid == 0) {
		struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
		struct __user_cap_data_struct data[2];

		if (syscall(SYS_capget, &hdr, data) < 0)
			_exit(2);
		data[CAP_TO_INDEX(CAP_DAC_READ_SEARCH)].effective &=
			~CAP_TO_MASK(CAP_DAC_READ_SEARCH);
		if (syscall(SYS_capset, &hdr, data) < 0)
			_exit(3);
		_exit(commit("nocap/f.txt", "nocap") == 0 ? 0 : 4);
	}
	CHECK_GT_INT(pid, 0);
	CHECK_EQ_INT(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status));
	CHECK_EQ_INT(WEXITSTATUS(status), 0);
	CHECK(read_is("nocap/f.txt", "nocap"));
	CHECK(owned_with_mode("nocap/f.txt", 0644));
	CHECK(no_leftovers("nocap"));

	/* Leave the tree as the listing tests expect it. */
	{
		char p[PATH_MAX];

		path_of(p, sizeof(p), "nocap/f.txt");
		unlink(p);
		path_of(p, sizeof(p), "nocap");
		rmdir(p);
	}
}

static struct json_object *entry(struct json_object *arr, size_t i, const char *key)
{
	struct json_object *e = json_object_array_get_idx(arr, i), *v = NULL;

	json_object_object_get_ex(e, key, &v);
	return v;
}

static bool list_paths_are(const char *rel, const char *const *want, size_t n)
{
	struct json_object *arr = NULL;
	bool truncated = true, ok;
	int r = wsfs_list(ws_fd, rel, 1000, &arr, &truncated);

	if (r < 0) {
		fprintf(stderr, "  list(%s) = %d\n", rel, r);
		return false;
	}
	ok = !truncated && json_object_array_length(arr) == n;
	for (size_t i = 0; ok && i < n; i++) {
		const char *got = json_object_get_string(entry(arr, i, "path"));
		if (strcmp(got, want[i]) != 0) {
			fprintf(stderr, "  list(%s)[%zu] = %s, want %s\n", rel, i, got, want[i]);
			ok = false;
		}
	}
	if (!ok)
		fprintf(stderr, "  list(%s): %s\n", rel, json_object_to_json_string(arr));
	json_object_put(arr);
	return ok;
}

static int list_err(const char *rel)
{
	struct json_object *arr = NULL;
	bool t;
	int r = wsfs_list(ws_fd, rel, 1000, &arr, &t);

	json_object_put(arr);
	return r;
}

static void test_list_skips_symlinks_and_fifos_and_truncates_at_max(void)
{
	static const char *const sub_want[] = { "sub/inner.csv", "sub/via_link.txt" };
	struct json_object *arr = NULL;
	bool truncated = false;
	char p[PATH_MAX];
	struct stat st;

	CHECK(list_paths_are("sub", sub_want, ARRAY_SIZE(sub_want)));
	/* The workspace root: symlinks and the FIFO are skipped. */
	CHECK_EQ_INT(wsfs_list(ws_fd, ".", 1000, &arr, &truncated), 0);
	CHECK(!truncated);
	CHECK_EQ_INT(json_object_array_length(arr), 5);
	if (json_object_array_length(arr) == 5) {
		CHECK_EQ_STR(json_object_get_string(entry(arr, 0, "path")), "data.txt");
		CHECK_EQ_INT(json_object_get_int64(entry(arr, 0, "size_bytes")), 6);
		CHECK_EQ_STR(json_object_get_string(entry(arr, 0, "mime_type")), "text/plain");
		CHECK(json_object_is_type(entry(arr, 0, "modified_at"), json_type_double));
		path_of(p, sizeof(p), "data.txt");
		stat(p, &st);
		CHECK_EQ_INT((long long)json_object_get_double(entry(arr, 0, "modified_at")),
			     (long long)st.st_mtim.tv_sec);
		CHECK_EQ_STR(json_object_get_string(entry(arr, 1, "path")), "made/deeper/f.txt");
		CHECK_EQ_STR(json_object_get_string(entry(arr, 2, "path")), "new.txt");
	}
	json_object_put(arr);
	arr = NULL;

	CHECK_EQ_INT(wsfs_list(ws_fd, "", 1000, &arr, &truncated), 0);
	CHECK_EQ_INT(json_object_array_length(arr), 5);
	json_object_put(arr);

	CHECK_EQ_INT(list_err("nope"), -ENOENT);
	CHECK_EQ_INT(list_err("data.txt"), -ENOTDIR);
	CHECK_EQ_INT(list_err("link_outdir"), -EXDEV);
	CHECK_EQ_INT(list_err("rel_outdir"), -EXDEV);
	CHECK_EQ_INT(list_err(".."), -EXDEV);
	CHECK_EQ_INT(list_err("../outside"), -EXDEV);
	CHECK_EQ_INT(list_err("link_abs"), -EXDEV);

	/* Truncation at max. */
	for (int i = 0; i < 10; i++) {
		char rel[32];
		snprintf(rel, sizeof(rel), "many/f%d.json", i);
		CHECK_EQ_INT(commit(rel, "{}"), 0);
	}
	arr = NULL;
	CHECK_EQ_INT(wsfs_list(ws_fd, "many", 5, &arr, &truncated), 0);
	CHECK(truncated);
	CHECK_EQ_INT(json_object_array_length(arr), 5);
	json_object_put(arr);
	arr = NULL;
	CHECK_EQ_INT(wsfs_list(ws_fd, "many", 10, &arr, &truncated), 0);
	CHECK(!truncated);
	CHECK_EQ_INT(json_object_array_length(arr), 10);
	CHECK_EQ_STR(json_object_get_string(entry(arr, 0, "mime_type")), "application/json");
	json_object_put(arr);
}

/* Set every file's mtime far in the past. */
static int age_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	struct timespec old[2] = { { 1000, 0 }, { 1000, 0 } };

	(void)st;
	(void)ftw;
	if (flag == FTW_F)
		utimensat(AT_FDCWD, p, old, AT_SYMLINK_NOFOLLOW);
	return 0;
}

static void test_changed_since_reports_each_new_version(void)
{
	struct timespec since;
	WsfsChange *changes = NULL;
	size_t n = 99;

	nftw(ws, age_one, 16, FTW_PHYS);
	clock_gettime(CLOCK_REALTIME, &since);
	since.tv_sec -= 1; /* file systems may round timestamps down to a tick */

	CHECK_EQ_INT(wsfs_changed_since(ws_fd, &since, 100, &changes, &n), 0);
	CHECK_EQ_INT(n, 0);
	wsfs_changes_free(changes, n);

	CHECK_EQ_INT(commit("sub/changed.txt", "c"), 0);
	put("made/deeper/f.txt", "rewritten");
	CHECK_EQ_INT(wsfs_changed_since(ws_fd, &since, 100, &changes, &n), 0);
	CHECK_EQ_INT(n, 2);
	if (n == 2) {
		CHECK_EQ_STR(changes[0].path, "made/deeper/f.txt");
		CHECK_EQ_STR(changes[1].path, "sub/changed.txt");
		CHECK_EQ_INT(changes[0].size, (off_t)strlen("rewritten"));
		CHECK(wsfs_change_same(&changes[0], &changes[0]));
		CHECK(!wsfs_change_same(&changes[0], &changes[1]));
	}
	/* Rewritten: a new version, whatever the clock says. */
	if (n == 2) {
		WsfsChange *again = NULL;
		size_t m = 0;

		put("made/deeper/f.txt", "rewritten, longer");
		CHECK_EQ_INT(wsfs_changed_since(ws_fd, &since, 100, &again, &m), 0);
		CHECK_EQ_INT(m, 2);
		if (m == 2) {
			CHECK(!wsfs_change_same(&changes[0], &again[0]));
			CHECK(wsfs_change_same(&changes[1], &again[1]));
		}
		wsfs_changes_free(again, m);
	}
	wsfs_changes_free(changes, n);

	CHECK_EQ_INT(wsfs_changed_since(ws_fd, &since, 1, &changes, &n), 0);
	CHECK_EQ_INT(n, 1);
	wsfs_changes_free(changes, n);
}

/* Make dir (workspace-relative) with n files and, among them, subdirectories sub0..subK-1,
 * each holding n_inner files; names long enough that a directory fills several reads. */
static size_t make_wide_dir(const char *dir, int n, int k, int n_inner)
{
	char p[PATH_MAX], rel[256];
	size_t made = 0;

	path_of(p, sizeof(p), dir);
	mkdir(p, 0755);
	for (int i = 0; i < n; i++) {
		snprintf(rel, sizeof(rel), "%s/file-with-a-rather-long-name-%04d.txt", dir, i);
		put(rel, "x");
		made++;
		if (i < k) {
			char sub[128];

			snprintf(sub, sizeof(sub), "%s/sub%d", dir, i);
			path_of(p, sizeof(p), sub);
			mkdir(p, 0755);
			for (int j = 0; j < n_inner; j++) {
				snprintf(rel, sizeof(rel), "%s/inner-%03d", sub, j);
				put(rel, "y");
				made++;
			}
		}
	}
	return made;
}

/* Whether changes holds n distinct paths, each under prefix. */
static bool all_distinct_under(const WsfsChange *c, size_t n, const char *prefix)
{
	for (size_t i = 0; i < n; i++) {
		if (strncmp(c[i].path, prefix, strlen(prefix)) != 0)
			return false;
		if (i > 0 && strcmp(c[i - 1].path, c[i].path) >= 0)
			return false; /* sorted, so a repeat sits next to its twin */
	}
	return true;
}

/* Walk sc to its end `slice` entries a step, as the daemon's loop may, and check that it
 * found the paths of want[0..n_want): the number of steps it took. */
static size_t walk_sliced_finds(WsfsScan *sc, size_t slice, const WsfsChange *want, size_t n_want)
{
	WsfsChange *changes = NULL;
	size_t n = 0, steps = 0;
	int r = 0;

	while (sc && (r = wsfs_scan_step(sc, slice)) == 0 && steps < 1000000)
		steps++;
	CHECK_EQ_INT(r, 1);
	if (sc)
		wsfs_scan_take_changes(sc, &changes, &n);
	CHECK_EQ_INT(n, n_want);
	for (size_t i = 0; i < n && i < n_want; i++)
		CHECK_EQ_STR(changes[i].path, want[i].path);
	wsfs_changes_free(changes, n);
	return steps;
}

/* A walk reads a directory in several pieces and reads on after each subdirectory from
 * where it left: walked at once or one entry a step, every file is seen exactly once. */
static void test_walk_reads_on_after_subdirectories_and_across_reads(void)
{
	struct timespec since = { 0, 0 };
	size_t made = make_wide_dir("wide", 400, 12, 150);
	WsfsChange *changes = NULL, *all = NULL;
	size_t n = 0, n_all = 0;
	WsfsScan *sc = NULL;

	/* All the workspace's files, walked at once. */
	CHECK_EQ_INT(wsfs_changed_since(ws_fd, &since, 100000, &all, &n_all), 0);
	CHECK(n_all > made);

	/* The same walk one entry a step, as the daemon's loop may slice it. */
	CHECK_EQ_INT(wsfs_scan_changes(ws_fd, &since, 100000, &sc), 0);
	CHECK(walk_sliced_finds(sc, 1, all, n_all) > made);

	/* Only the wide tree, each file once. */
	sc = NULL;
	CHECK_EQ_INT(wsfs_scan_changes(ws_fd, &since, 100000, &sc), 0);
	CHECK_EQ_INT(wsfs_scan_step(sc, SIZE_MAX), 1);
	wsfs_scan_take_changes(sc, &changes, &n);
	{
		size_t wide = 0;

		for (size_t i = 0; i < n; i++)
			wide += strncmp(changes[i].path, "wide/", 5) == 0;
		CHECK_EQ_INT(wide, made);
	}
	CHECK(all_distinct_under(changes, n, ""));
	wsfs_changes_free(changes, n);
	wsfs_changes_free(all, n_all);
}

/* Walks one after another through the same lent root descriptor: each reads the root from
 * its start, sees what a walk that opens its own root sees, and leaves the descriptor open. */
static void test_walks_from_a_lent_root_read_it_from_the_start_each_time(void)
{
	struct timespec since = { 0, 0 };
	int root_fd = wsfs_root_open(ws_fd);
	WsfsChange *all = NULL;
	size_t n_all = 0;

	CHECK_GE_INT(root_fd, 0);
	if (root_fd < 0)
		return;
	make_wide_dir("lent", 300, 3, 20);
	CHECK_EQ_INT(wsfs_changed_since(ws_fd, &since, 100000, &all, &n_all), 0);
	for (int round = 0; round < 3; round++) {
		WsfsScan *sc = NULL;

		/* Small slices: the walk leaves the root for subdirectories and seeks back. */
		CHECK_EQ_INT(wsfs_scan_changes_from(root_fd, &since, 100000, &sc), 0);
		walk_sliced_finds(sc, round == 0 ? 1 : 64, all, n_all);
		CHECK_GE_INT(fcntl(root_fd, F_GETFD), 0); /* still open: the caller's */
	}
	/* A walk given up half way leaves it open too, and the next still reads it all. */
	{
		WsfsScan *sc = NULL;

		CHECK_EQ_INT(wsfs_scan_changes_from(root_fd, &since, 100000, &sc), 0);
		CHECK_EQ_INT(wsfs_scan_step(sc, 5), 0);
		wsfs_scan_free(sc);
		CHECK_GE_INT(fcntl(root_fd, F_GETFD), 0);
		CHECK_EQ_INT(wsfs_scan_changes_from(root_fd, &since, 100000, &sc), 0);
		walk_sliced_finds(sc, SIZE_MAX, all, n_all);
	}
	wsfs_changes_free(all, n_all);
	close(root_fd);
}

static void test_mime_type_comes_from_the_extension(void)
{
	CHECK_EQ_STR(wsfs_guess_mime("a.txt"), "text/plain");
	CHECK_EQ_STR(wsfs_guess_mime("dir.d/a.CSV"), "text/csv");
	CHECK_EQ_STR(wsfs_guess_mime("x.py"), "text/x-python");
	CHECK_EQ_STR(wsfs_guess_mime("p.png"), "image/png");
	CHECK_EQ_STR(wsfs_guess_mime("p.jpeg"), "image/jpeg");
	CHECK_EQ_STR(wsfs_guess_mime("p.jpg"), "image/jpeg");
	CHECK_EQ_STR(wsfs_guess_mime("a.tar.gz"), "application/gzip");
	CHECK_EQ_STR(wsfs_guess_mime("c.yml"), "application/yaml");
	CHECK_EQ_STR(wsfs_guess_mime("doc.pdf"), "application/pdf");
	CHECK_EQ_STR(wsfs_guess_mime(".bashrc"), "application/octet-stream");
	CHECK_EQ_STR(wsfs_guess_mime("noext"), "application/octet-stream");
	CHECK_EQ_STR(wsfs_guess_mime("trail."), "application/octet-stream");
	CHECK_EQ_STR(wsfs_guess_mime("a.json/bin"), "application/octet-stream");
}

/* The API form of names (wsname.h): text for any bytes, and back to the same bytes. */
static bool encodes_to(const char *raw, const char *want)
{
	char out[256], back[256];
	ssize_t n = wsname_encode(raw, strlen(raw), out, sizeof(out));

	if (n < 0 || strcmp(out, want) != 0) {
		fprintf(stderr, "  encode(%s) = %zd \"%s\", want \"%s\"\n", raw, n, out, want);
		return false;
	}
	return wsname_decode(out, back, sizeof(back)) == (ssize_t)strlen(raw) &&
	       strcmp(back, raw) == 0;
}

static void test_names_encode_any_bytes_and_decode_back(void)
{
	char out[16];

	CHECK(encodes_to("plain.txt", "plain.txt"));
	CHECK(encodes_to("é ü 日本", "é ü 日本"));
	CHECK(encodes_to("bad-\xc3\x28-\xff.txt", "bad-‛C3(-‛FF.txt"));
	CHECK(encodes_to("\x80\xbf\xc0\xc1\xf5", "‛80‛BF‛C0‛C1‛F5"));
	CHECK(encodes_to("cut-\xe6\x97", "cut-‛E6‛97"));
	CHECK(encodes_to("sur-\xed\xa0\x80", "sur-‛ED‛A0‛80"));
	/* The escape character itself, spelt out: "‛FF" and the byte 0xFF stay two names. */
	CHECK(encodes_to("‛FF", "‛E2‛80‛9BFF"));
	CHECK(encodes_to("\xff", "‛FF"));
	CHECK(encodes_to("ctl\x01\n\"\\%", "ctl\x01\n\"\\%"));

	CHECK_EQ_INT(wsname_decode("‛ff", out, sizeof(out)), 1);
	CHECK_EQ_INT(out[0], '\xff');
	/* Escapes that name no byte the encoder would write, or are cut short. */
	CHECK_EQ_INT(wsname_decode("‛", out, sizeof(out)), -EINVAL);
	CHECK_EQ_INT(wsname_decode("a‛F", out, sizeof(out)), -EINVAL);
	CHECK_EQ_INT(wsname_decode("‛GG", out, sizeof(out)), -EINVAL);
	CHECK_EQ_INT(wsname_decode("‛2F", out, sizeof(out)), -EINVAL);
	CHECK_EQ_INT(wsname_decode("‛00", out, sizeof(out)), -EINVAL);
	CHECK_EQ_INT(wsname_decode("‛7F", out, sizeof(out)), -EINVAL);
	CHECK_EQ_INT(wsname_decode("raw\xff", out, sizeof(out)), -EINVAL);
	CHECK_EQ_INT(wsname_decode("0123456789abcdef", out, sizeof(out)), -ENOBUFS);
	CHECK_EQ_INT(wsname_encode("\xff\xff\xff\xff", 4, out, sizeof(out)), -ENOBUFS);
	CHECK_EQ_INT(out[0], '\0');

	/* normalize takes the API form. */
	CHECK(norm_is("d‛FE/‛FF.txt", false, "d\xfe/\xff.txt"));
	CHECK(norm_is("/workspace/‛E2‛80‛9B", false, "‛"));
	CHECK_EQ_INT(norm_err("x‛zz", false), -EINVAL);
	CHECK_EQ_INT(norm_err("‛2E‛2E/x", false), -EINVAL);
}

static void test_sockets_and_devices_are_not_opened(void)
{
	char p[PATH_MAX];
	int s;
	struct sockaddr_un a = { .sun_family = AF_UNIX };

	path_of(p, sizeof(p), "sock");
	CHECK_LT_INT(strlen(p), sizeof(a.sun_path));
	memcpy(a.sun_path, p, strnlen(p, sizeof(a.sun_path) - 1));
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK_GE_INT(s, 0);
	CHECK_EQ_INT(bind(s, (struct sockaddr *)&a, sizeof(a)), 0);
	CHECK_EQ_INT(read_err("sock"), -ENXIO);
	path_of(p, sizeof(p), "nulldev");
	if (mknod(p, S_IFCHR | 0666, makedev(1, 3)) == 0) {
		CHECK_EQ_INT(read_err("nulldev"), -ENXIO);
		unlink(p);
	}
	close(s);
	path_of(p, sizeof(p), "sock");
	unlink(p);
}

static void test_list_gives_names_in_their_api_form(void)
{
	struct json_object *arr = NULL;
	bool truncated;
	char p[PATH_MAX];

	path_of(p, sizeof(p), "names");
	CHECK_EQ_INT(mkdir(p, 0755), 0);
	put("names/bad-\xff.txt", "x");
	put("names/‛FF.txt", "y");
	CHECK_EQ_INT(wsfs_list(ws_fd, "names", 10, &arr, &truncated), 0);
	CHECK_EQ_INT(json_object_array_length(arr), 2);
	if (json_object_array_length(arr) == 2) {
		CHECK_EQ_STR(json_object_get_string(entry(arr, 0, "path")), "names/bad-‛FF.txt");
		CHECK_EQ_STR(json_object_get_string(entry(arr, 1, "path")),
			     "names/‛E2‛80‛9BFF.txt");
	}
	json_object_put(arr);
	/* Each API form, normalized, opens its own file. */
	CHECK_EQ_INT(wsfs_normalize("names/bad-‛FF.txt", false, p, sizeof(p)), 0);
	CHECK(read_is(p, "x"));
	CHECK_EQ_INT(wsfs_normalize("names/‛E2‛80‛9BFF.txt", false, p, sizeof(p)), 0);
	CHECK(read_is(p, "y"));
	path_of(p, sizeof(p), "names/bad-\xff.txt");
	unlink(p);
	path_of(p, sizeof(p), "names/‛FF.txt");
	unlink(p);
	path_of(p, sizeof(p), "names");
	rmdir(p);
}

int main(void)
{
	if (geteuid() != 0) {
		fprintf(stderr, "test_wsfs: needs root (chown to the session uid); skipped\n");
		return 77;
	}
	/* A FIFO open that blocked would hang here forever: fail loudly instead. */
	alarm(60);
	/* The daemon's umask must not show in what it creates. */
	umask(077);
	setup();

	test_normalize_gives_workspace_relative_paths();
	test_open_read_stays_inside_the_workspace();
	test_commit_replaces_by_rename_and_stays_inside();
	test_commit_works_without_cap_dac_read_search();
	test_commit_hands_back_the_file_it_replaced();
	test_list_skips_symlinks_and_fifos_and_truncates_at_max();
	test_changed_since_reports_each_new_version();
	test_walks_from_a_lent_root_read_it_from_the_start_each_time();
	test_walk_reads_on_after_subdirectories_and_across_reads();
	test_mime_type_comes_from_the_extension();
	test_names_encode_any_bytes_and_decode_back();
	test_sockets_and_devices_are_not_opened();
	test_list_gives_names_in_their_api_form();

	teardown();
	return unit_summary();
}
