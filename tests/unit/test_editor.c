/* SPDX-License-Identifier: MIT */
/* Unit tests for the text editor tool: every row of OTARI.md's table, undo, confinement. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "cleanup.h"
#include "workspace/editor.h"

#include "unit.h"

#define UID 4242
#define GID 4243

/* <root>/ws is the workspace; <root>/secret and <root>/outside/ must stay out of reach. */
static char root[64];
static char ws[128];
static int ws_fd = -1;
static EditorUndo *undo;
static size_t max_bytes = 1 << 20;

static void path_of(char *buf, size_t len, const char *rel)
{
	snprintf(buf, len, "%s/%s", ws, rel);
}

static void put_n(const char *rel, const char *content, size_t n)
{
	char p[PATH_MAX];
	FILE *f;

	path_of(p, sizeof(p), rel);
	f = fopen(p, "w");
	if (!f) {
		perror(p);
		exit(1);
	}
	fwrite(content, 1, n, f);
	fclose(f);
}

static void put(const char *rel, const char *content)
{
	put_n(rel, content, strlen(content));
}

static void mkdir_in(const char *rel)
{
	char p[PATH_MAX];

	path_of(p, sizeof(p), rel);
	mkdir(p, 0755);
}

static void symlink_in(const char *target, const char *rel)
{
	char p[PATH_MAX];

	path_of(p, sizeof(p), rel);
	symlink(target, p);
}

static bool file_is(const char *rel, const char *want)
{
	char p[PATH_MAX], buf[4096];
	FILE *f;
	size_t n;

	path_of(p, sizeof(p), rel);
	f = fopen(p, "r");
	if (!f)
		return false;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	if (strcmp(buf, want) != 0) {
		fprintf(stderr, "  %s holds [%s], want [%s]\n", rel, buf, want);
		return false;
	}
	return true;
}

static bool exists_abs(const char *p)
{
	struct stat st;

	return lstat(p, &st) == 0;
}

static bool exists(const char *rel)
{
	char p[PATH_MAX];

	path_of(p, sizeof(p), rel);
	return exists_abs(p);
}

static void setup(void)
{
	char p[PATH_MAX];

	strcpy(root, "/tmp/paddock-editor-XXXXXX");
	unit_scratch_workspace(root, ws, sizeof(ws));

	symlink_in("/etc/shadow", "link_abs");
	symlink_in("../secret", "link_climb");
	snprintf(p, sizeof(p), "%s/outside", root);
	symlink_in(p, "link_outdir");
	symlink_in("../outside", "rel_outdir");
	put("target.txt", "inside\n");
	symlink_in("target.txt", "link_in");
	path_of(p, sizeof(p), "fifo");
	mkfifo(p, 0644);

	ws_fd = open(ws, O_PATH | O_DIRECTORY | O_CLOEXEC);
	undo = editor_undo_new();
	if (ws_fd < 0 || !undo) {
		perror("setup");
		exit(1);
	}
}

static void teardown(void)
{
	undo = editor_undo_free(undo);
	close(ws_fd);
	unit_remove_tree(root);
}

/* Run the input json (single quotes stand for double quotes, to keep the tests legible). */
static int run(const char *json, EditorResult *res, const char **detail)
{
	_cleanup_free_ char *s = strdup(json);
	struct json_object *in;
	int r;

	for (char *c = s; *c; c++)
		if (*c == '\'')
			*c = '"';
	in = json_tokener_parse(s);
	if (!in) {
		fprintf(stderr, "bad test json: %s\n", s);
		exit(1);
	}
	r = editor_run(ws_fd, UID, GID, max_bytes, undo, in, res, detail);
	json_object_put(in);
	return r;
}

static void show(const char *json, int r, const EditorResult *res, const char *detail)
{
	fprintf(stderr, "  %s -> r=%d rc=%d out=[%s] err=[%s] detail=%s\n", json, r,
		res->return_code, res->out ? res->out : "(null)", res->err ? res->err : "(null)",
		detail ? detail : "(null)");
}

/* The command succeeds with exactly want on stdout. */
static bool ok(const char *json, const char *want)
{
	EditorResult res = { 0 };
	const char *detail = NULL;
	int r = run(json, &res, &detail);
	bool good = r == 0 && res.return_code == 0 && res.out && strcmp(res.out, want) == 0 &&
		    res.err && strcmp(res.err, "") == 0;

	if (!good)
		show(json, r, &res, detail);
	editor_result_clear(&res);
	return good;
}

/* The command is an editor failure saying exactly msg. */
static bool fails(const char *json, const char *msg)
{
	EditorResult res = { 0 };
	const char *detail = NULL;
	char want[PATH_MAX];
	int r = run(json, &res, &detail);
	bool good;

	snprintf(want, sizeof(want), "text_editor: %s\n", msg);
	good = r == 0 && res.return_code == 1 && res.out && strcmp(res.out, "") == 0 && res.err &&
	       strcmp(res.err, want) == 0;
	if (!good)
		show(json, r, &res, detail);
	editor_result_clear(&res);
	return good;
}

/* The input is refused before anything runs (the caller's 422). */
static bool invalid(const char *json)
{
	EditorResult res = { 0 };
	const char *detail = NULL;
	int r = run(json, &res, &detail);
	bool good = r == -EINVAL && detail && *detail && !res.out && !res.err;

	if (!good)
		show(json, r, &res, detail);
	editor_result_clear(&res);
	return good;
}

static bool owned(const char *rel, mode_t mode)
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

static void test_malformed_input_is_refused_before_anything_runs(void)
{
	CHECK(invalid("[1]"));
	CHECK(invalid("{'path': 'a'}"));
	CHECK(invalid("{'command': 5, 'path': 'a'}"));
	CHECK(invalid("{'command': 'delete', 'path': 'a'}"));
	CHECK(invalid("{'command': 'view'}"));
	CHECK(invalid("{'command': 'view', 'path': ''}"));
	CHECK(invalid("{'command': 'view', 'path': null}"));
	CHECK(invalid("{'command': 'view', 'path': ['a']}"));
	CHECK(invalid("{'command': 'view', 'path': 'a\\u0000b'}"));
	CHECK(invalid("{'command': 'create', 'path': 'a', 'file_text': 5}"));
	CHECK(invalid("{'command': 'create', 'path': 'a', 'file_text': 'x\\u0000y'}"));
	CHECK(invalid("{'command': 'str_replace', 'path': 'a', 'new_str': 'x'}"));
	CHECK(invalid("{'command': 'str_replace', 'path': 'a', 'old_str': 'x'}"));
	CHECK(invalid("{'command': 'str_replace', 'path': 'a', 'old_str': 1, 'new_str': 'x'}"));
	CHECK(invalid("{'command': 'str_replace', 'path': 'a', 'old_str': 'x', 'new_str': null}"));
	CHECK(invalid("{'command': 'insert', 'path': 'a', 'new_str': 'x'}"));
	CHECK(invalid("{'command': 'insert', 'path': 'a', 'insert_line': '1', 'new_str': 'x'}"));
	CHECK(invalid("{'command': 'insert', 'path': 'a', 'insert_line': 1.5, 'new_str': 'x'}"));
	CHECK(invalid("{'command': 'insert', 'path': 'a', 'insert_line': 1}"));
	/* Nothing was created by any of them. */
	CHECK(!exists("a"));
}

static void test_view_shows_a_file_or_a_range_of_its_lines(void)
{
	put("lines.txt", "l1\nl2\nl3\nl4\n");
	put("noeol.txt", "a\nb");
	put("empty.txt", "");

	CHECK(ok("{'command': 'view', 'path': 'lines.txt'}", "l1\nl2\nl3\nl4\n"));
	CHECK(ok("{'command': 'view', 'path': '/workspace/lines.txt'}", "l1\nl2\nl3\nl4\n"));
	CHECK(ok("{'command': 'view', 'path': './noeol.txt'}", "a\nb"));
	CHECK(ok("{'command': 'view', 'path': 'empty.txt'}", ""));
	CHECK(fails("{'command': 'view', 'path': 'nope.txt'}", "file not found: nope.txt"));
	CHECK(fails("{'command': 'view', 'path': 'lines.txt/x'}", "file not found: lines.txt/x"));

	CHECK(ok("{'command': 'view', 'path': 'lines.txt', 'view_range': [2, 3]}", "l2\nl3"));
	CHECK(ok("{'command': 'view', 'path': 'lines.txt', 'view_range': [3, -1]}", "l3\nl4"));
	CHECK(ok("{'command': 'view', 'path': 'lines.txt', 'view_range': [0, 1]}", "l1"));
	CHECK(ok("{'command': 'view', 'path': 'lines.txt', 'view_range': [2, 100]}", "l2\nl3\nl4"));
	CHECK(ok("{'command': 'view', 'path': 'lines.txt', 'view_range': [4, 4]}", "l4"));
	CHECK(ok("{'command': 'view', 'path': 'lines.txt', 'view_range': [9, -1]}", ""));
	CHECK(ok("{'command': 'view', 'path': 'noeol.txt', 'view_range': [2, 2]}", "b"));
	CHECK(ok("{'command': 'view', 'path': 'empty.txt', 'view_range': [1, -1]}", ""));
	CHECK(ok("{'command': 'view', 'path': 'lines.txt', 'view_range': null}",
		 "l1\nl2\nl3\nl4\n"));
	CHECK(fails("{'command': 'view', 'path': 'lines.txt', 'view_range': [1]}",
		    "invalid view_range"));
	CHECK(fails("{'command': 'view', 'path': 'lines.txt', 'view_range': [1, 2, 3]}",
		    "invalid view_range"));
	CHECK(fails("{'command': 'view', 'path': 'lines.txt', 'view_range': '1,2'}",
		    "invalid view_range"));
	CHECK(fails("{'command': 'view', 'path': 'lines.txt', 'view_range': [1, '2']}",
		    "invalid view_range"));
	CHECK(fails("{'command': 'view', 'path': 'lines.txt', 'view_range': [1.0, 2]}",
		    "invalid view_range"));
	CHECK(fails("{'command': 'view', 'path': 'lines.txt', 'view_range': [3, 1]}",
		    "invalid view_range"));
	CHECK(fails("{'command': 'view', 'path': 'lines.txt', 'view_range': [1, -2]}",
		    "invalid view_range"));
	/* The range is judged before the file: no file needed to be told it is invalid. */
	CHECK(fails("{'command': 'view', 'path': 'nope', 'view_range': [true, 1]}",
		    "invalid view_range"));
}

static void test_view_of_a_directory_lists_two_levels_deep(void)
{
	mkdir_in("tree");
	mkdir_in("tree/sub");
	mkdir_in("tree/sub/deep");
	mkdir_in("tree/empty");
	put("tree/a.txt", "a");
	put("tree/.hidden", "h");
	put("tree/sub/b.txt", "b");
	put("tree/sub/deep/c.txt", "c");
	symlink_in("/etc", "tree/etc_link");

	CHECK(ok("{'command': 'view', 'path': 'tree'}",
		 "tree/.hidden\ntree/a.txt\ntree/empty/\ntree/etc_link\ntree/sub/\n"
		 "tree/sub/b.txt\ntree/sub/deep/\n"));
	CHECK(ok("{'command': 'view', 'path': '/workspace/tree/sub/'}",
		 "tree/sub/b.txt\ntree/sub/deep/\ntree/sub/deep/c.txt\n"));
	CHECK(ok("{'command': 'view', 'path': 'tree/empty'}", ""));
	CHECK(fails("{'command': 'view', 'path': 'tree', 'view_range': [1, 2]}",
		    "view_range is not allowed for a directory: tree"));

	/* The workspace root, by every name it has: entries without a prefix. */
	{
		EditorResult res = { 0 };
		const char *detail;

		CHECK_EQ_INT(run("{'command': 'view', 'path': '/workspace'}", &res, &detail), 0);
		CHECK_EQ_INT(res.return_code, 0);
		CHECK_CONTAINS(res.out, "\ntree/\n");
		CHECK_CONTAINS(res.out, "\ntree/a.txt\n");
		CHECK(!strstr(res.out, "tree/sub/b.txt"));
		CHECK_CONTAINS(res.out, "lines.txt\n");
		CHECK_EQ_INT(res.out[strlen(res.out) - 1], '\n');
		editor_result_clear(&res);
		CHECK_EQ_INT(run("{'command': 'view', 'path': '.'}", &res, &detail), 0);
		CHECK_EQ_INT(res.return_code, 0);
		CHECK_CONTAINS(res.out, "\ntree/\n");
		editor_result_clear(&res);
	}
}

static void test_create_writes_only_new_files_and_makes_their_parents(void)
{
	CHECK(ok("{'command': 'create', 'path': 'c1.txt', 'file_text': 'one\\ntwo\\n'}",
		 "File created: c1.txt\n"));
	CHECK(file_is("c1.txt", "one\ntwo\n"));
	CHECK(owned("c1.txt", 0644));

	CHECK(ok("{'command': 'create', 'path': '/workspace/made/deep/c2.py', 'file_text': ''}",
		 "File created: /workspace/made/deep/c2.py\n"));
	CHECK(file_is("made/deep/c2.py", ""));
	CHECK(owned("made", 0755));
	CHECK(owned("made/deep", 0755));

	CHECK(fails("{'command': 'create', 'path': 'c1.txt', 'file_text': 'x'}",
		    "already exists: c1.txt"));
	CHECK(file_is("c1.txt", "one\ntwo\n"));
	CHECK(fails("{'command': 'create', 'path': 'made', 'file_text': 'x'}",
		    "already exists: made"));
	CHECK(fails("{'command': 'create', 'path': '/workspace', 'file_text': 'x'}",
		    "already exists: /workspace"));
	CHECK(fails("{'command': 'create', 'path': 'link_in', 'file_text': 'x'}",
		    "already exists: link_in"));
	CHECK(fails("{'command': 'create', 'path': 'c3.txt'}", "create requires file_text"));
	CHECK(fails("{'command': 'create', 'path': 'c3.txt', 'file_text': null}",
		    "create requires file_text"));
	CHECK(!exists("c3.txt"));
	CHECK(fails("{'command': 'create', 'path': 'c1.txt/x', 'file_text': 'x'}",
		    "cannot write c1.txt/x: a parent is missing or not a directory"));
}

static void test_str_replace_needs_exactly_one_match(void)
{
	put("s.txt", "alpha beta gamma\nbeta\n");
	put("aaa.txt", "aaa");

	CHECK(ok("{'command': 'str_replace', 'path': 's.txt', 'old_str': 'gamma', "
		 "'new_str': 'delta'}",
		 "Edited s.txt\n"));
	CHECK(file_is("s.txt", "alpha beta delta\nbeta\n"));
	/* put() ran under umask 077: the replaced file keeps its 0600. */
	CHECK(owned("s.txt", 0600));
	CHECK(fails("{'command': 'str_replace', 'path': 's.txt', 'old_str': 'zeta', "
		    "'new_str': 'x'}",
		    "old_str not found in s.txt"));
	CHECK(fails("{'command': 'str_replace', 'path': 's.txt', 'old_str': 'beta', "
		    "'new_str': 'x'}",
		    "old_str matched 2 times in s.txt; must be unique"));
	CHECK(fails("{'command': 'str_replace', 'path': 'aaa.txt', 'old_str': 'aa', "
		    "'new_str': 'x'}",
		    "old_str matched 2 times in aaa.txt; must be unique"));
	CHECK(fails("{'command': 'str_replace', 'path': 's.txt', 'old_str': '', 'new_str': 'x'}",
		    "old_str must not be empty"));
	CHECK(fails("{'command': 'str_replace', 'path': 'nope', 'old_str': 'a', 'new_str': 'x'}",
		    "file not found: nope"));
	CHECK(fails("{'command': 'str_replace', 'path': 'made', 'old_str': 'a', 'new_str': 'x'}",
		    "not a file: made"));
	CHECK(file_is("s.txt", "alpha beta delta\nbeta\n"));

	/* Deleting text, multi-line matches and non-ASCII text. */
	CHECK(ok("{'command': 'str_replace', 'path': 's.txt', 'old_str': 'delta\\nbeta', "
		 "'new_str': 'h\\u00e9\\u2713'}",
		 "Edited s.txt\n"));
	CHECK(file_is("s.txt", "alpha beta h\xc3\xa9\xe2\x9c\x93\n"));
	CHECK(ok("{'command': 'str_replace', 'path': 's.txt', 'old_str': 'alpha ', 'new_str': ''}",
		 "Edited s.txt\n"));
	CHECK(file_is("s.txt", "beta h\xc3\xa9\xe2\x9c\x93\n"));

	/* An executable stays executable. */
	{
		char p[PATH_MAX];

		put("run.sh", "echo hi\n");
		path_of(p, sizeof(p), "run.sh");
		chmod(p, 0755);
		CHECK(ok("{'command': 'str_replace', 'path': 'run.sh', 'old_str': 'hi', "
			 "'new_str': 'ho'}",
			 "Edited run.sh\n"));
		CHECK(owned("run.sh", 0755));
	}
}

static void test_insert_puts_lines_after_the_given_line(void)
{
	put("i.txt", "a\nb\n");
	CHECK(ok("{'command': 'insert', 'path': 'i.txt', 'insert_line': 0, 'new_str': 'top'}",
		 "Inserted into i.txt\n"));
	CHECK(file_is("i.txt", "top\na\nb\n"));
	CHECK(ok("{'command': 'insert', 'path': 'i.txt', 'insert_line': 2, 'new_str': 'mid\\n'}",
		 "Inserted into i.txt\n"));
	CHECK(file_is("i.txt", "top\na\nmid\nb\n"));
	CHECK(ok("{'command': 'insert', 'path': 'i.txt', 'insert_line': 4, 'new_str': 'x\\ny'}",
		 "Inserted into i.txt\n"));
	CHECK(file_is("i.txt", "top\na\nmid\nb\nx\ny\n"));
	CHECK(fails("{'command': 'insert', 'path': 'i.txt', 'insert_line': 7, 'new_str': 'z'}",
		    "insert_line 7 out of range for i.txt"));
	CHECK(fails("{'command': 'insert', 'path': 'i.txt', 'insert_line': -1, 'new_str': 'z'}",
		    "insert_line -1 out of range for i.txt"));
	CHECK(file_is("i.txt", "top\na\nmid\nb\nx\ny\n"));

	/* A last line without '\n' gets one first, wherever the insertion goes. */
	put("n.txt", "a\nb");
	CHECK(ok("{'command': 'insert', 'path': 'n.txt', 'insert_line': 2, 'new_str': 'c'}",
		 "Inserted into n.txt\n"));
	CHECK(file_is("n.txt", "a\nb\nc\n"));
	put("n2.txt", "a\nb");
	CHECK(ok("{'command': 'insert', 'path': 'n2.txt', 'insert_line': 1, 'new_str': 'c'}",
		 "Inserted into n2.txt\n"));
	CHECK(file_is("n2.txt", "a\nc\nb\n"));
	put("e.txt", "");
	CHECK(ok("{'command': 'insert', 'path': 'e.txt', 'insert_line': 0, 'new_str': 'only'}",
		 "Inserted into e.txt\n"));
	CHECK(file_is("e.txt", "only\n"));
	CHECK(fails("{'command': 'insert', 'path': 'e.txt', 'insert_line': 2, 'new_str': 'z'}",
		    "insert_line 2 out of range for e.txt"));

	CHECK(fails("{'command': 'insert', 'path': 'made', 'insert_line': 0, 'new_str': 'z'}",
		    "not a file: made"));
	CHECK(fails("{'command': 'insert', 'path': 'nope', 'insert_line': 0, 'new_str': 'z'}",
		    "file not found: nope"));
}

static void test_undo_edit_reverts_the_last_16_edits_of_that_file(void)
{
	char json[256];

	CHECK(ok("{'command': 'create', 'path': 'u.txt', 'file_text': 'v0\\n'}",
		 "File created: u.txt\n"));
	CHECK(fails("{'command': 'undo_edit', 'path': 'u.txt'}", "no edits to undo for u.txt"));
	CHECK(ok("{'command': 'str_replace', 'path': 'u.txt', 'old_str': 'v0', 'new_str': 'v1'}",
		 "Edited u.txt\n"));
	CHECK(ok("{'command': 'insert', 'path': 'u.txt', 'insert_line': 1, 'new_str': 'v2'}",
		 "Inserted into u.txt\n"));
	CHECK(ok("{'command': 'str_replace', 'path': '/workspace/u.txt', 'old_str': 'v2', "
		 "'new_str': 'v3'}",
		 "Edited /workspace/u.txt\n"));
	CHECK(file_is("u.txt", "v1\nv3\n"));

	/* Another file's history is its own. */
	put("other.txt", "o\n");
	CHECK(ok("{'command': 'str_replace', 'path': 'other.txt', 'old_str': 'o', "
		 "'new_str': 'p'}",
		 "Edited other.txt\n"));

	CHECK(ok("{'command': 'undo_edit', 'path': 'u.txt'}", "Reverted u.txt\n"));
	CHECK(file_is("u.txt", "v1\nv2\n"));
	CHECK(owned("u.txt", 0644));
	CHECK(ok("{'command': 'undo_edit', 'path': './u.txt'}", "Reverted ./u.txt\n"));
	CHECK(file_is("u.txt", "v1\n"));
	CHECK(ok("{'command': 'undo_edit', 'path': 'u.txt'}", "Reverted u.txt\n"));
	CHECK(file_is("u.txt", "v0\n"));
	CHECK(fails("{'command': 'undo_edit', 'path': 'u.txt'}", "no edits to undo for u.txt"));
	CHECK(file_is("other.txt", "p\n"));
	CHECK(ok("{'command': 'undo_edit', 'path': 'other.txt'}", "Reverted other.txt\n"));
	CHECK(file_is("other.txt", "o\n"));

	/* A failed edit leaves nothing to undo. */
	CHECK(fails("{'command': 'str_replace', 'path': 'u.txt', 'old_str': 'zz', 'new_str': 'y'}",
		    "old_str not found in u.txt"));
	CHECK(fails("{'command': 'undo_edit', 'path': 'u.txt'}", "no edits to undo for u.txt"));

	/* History is bounded: 20 edits, of which the last 16 can be undone. */
	put("h.txt", "0\n");
	for (int i = 0; i < 20; i++) {
		snprintf(json, sizeof(json),
			 "{'command': 'str_replace', 'path': 'h.txt', 'old_str': '%d\\n', "
			 "'new_str': '%d\\n'}",
			 i, i + 1);
		CHECK(ok(json, "Edited h.txt\n"));
	}
	for (int i = 0; i < 16; i++)
		CHECK(ok("{'command': 'undo_edit', 'path': 'h.txt'}", "Reverted h.txt\n"));
	CHECK(file_is("h.txt", "4\n"));
	CHECK(fails("{'command': 'undo_edit', 'path': 'h.txt'}", "no edits to undo for h.txt"));

	/* Undo brings a deleted file back; create starts a fresh history. */
	CHECK(ok("{'command': 'str_replace', 'path': 'h.txt', 'old_str': '4', 'new_str': '5'}",
		 "Edited h.txt\n"));
	{
		char p[PATH_MAX];

		path_of(p, sizeof(p), "h.txt");
		unlink(p);
	}
	CHECK(ok("{'command': 'undo_edit', 'path': 'h.txt'}", "Reverted h.txt\n"));
	CHECK(file_is("h.txt", "4\n"));
	CHECK(ok("{'command': 'str_replace', 'path': 'h.txt', 'old_str': '4', 'new_str': '6'}",
		 "Edited h.txt\n"));
	{
		char p[PATH_MAX];

		path_of(p, sizeof(p), "h.txt");
		unlink(p);
	}
	CHECK(ok("{'command': 'create', 'path': 'h.txt', 'file_text': 'new'}",
		 "File created: h.txt\n"));
	CHECK(fails("{'command': 'undo_edit', 'path': 'h.txt'}", "no edits to undo for h.txt"));
}

static void test_files_not_utf8_or_over_the_size_cap_are_refused(void)
{
	put("latin1.txt", "caf\xe9\n");
	put("overlong.txt", "\xc0\xaf");
	put("surrogate.txt", "\xed\xa0\x80");
	put("trunc.txt", "ok \xe2\x9c");
	put_n("nul.txt", "a\0b", 3);
	put("utf8.txt", "h\xc3\xa9llo \xe2\x9c\x93 \xf0\x9f\x98\x80\n");

	CHECK(fails("{'command': 'view', 'path': 'latin1.txt'}",
		    "file is not valid UTF-8: latin1.txt"));
	CHECK(fails("{'command': 'view', 'path': 'overlong.txt'}",
		    "file is not valid UTF-8: overlong.txt"));
	CHECK(fails("{'command': 'view', 'path': 'surrogate.txt'}",
		    "file is not valid UTF-8: surrogate.txt"));
	CHECK(fails("{'command': 'view', 'path': 'trunc.txt'}",
		    "file is not valid UTF-8: trunc.txt"));
	CHECK(fails("{'command': 'view', 'path': 'nul.txt'}", "file is not valid UTF-8: nul.txt"));
	CHECK(fails("{'command': 'str_replace', 'path': 'latin1.txt', 'old_str': 'caf', "
		    "'new_str': 'x'}",
		    "file is not valid UTF-8: latin1.txt"));
	CHECK(fails("{'command': 'insert', 'path': 'latin1.txt', 'insert_line': 0, "
		    "'new_str': 'x'}",
		    "file is not valid UTF-8: latin1.txt"));
	CHECK(file_is("latin1.txt", "caf\xe9\n"));
	CHECK(ok("{'command': 'view', 'path': 'utf8.txt'}",
		 "h\xc3\xa9llo \xe2\x9c\x93 \xf0\x9f\x98\x80\n"));

	/* The size cap, on reads, on create and on an edit that would grow past it. */
	max_bytes = 16;
	put("big.txt", "0123456789abcdefX");
	put("fits.txt", "0123456789abcdef");
	CHECK(fails("{'command': 'view', 'path': 'big.txt'}", "file too large: big.txt"));
	CHECK(fails("{'command': 'str_replace', 'path': 'big.txt', 'old_str': 'X', "
		    "'new_str': ''}",
		    "file too large: big.txt"));
	CHECK(ok("{'command': 'view', 'path': 'fits.txt'}", "0123456789abcdef"));
	CHECK(fails("{'command': 'str_replace', 'path': 'fits.txt', 'old_str': 'f', "
		    "'new_str': 'fg'}",
		    "file too large: fits.txt"));
	CHECK(fails("{'command': 'insert', 'path': 'fits.txt', 'insert_line': 0, "
		    "'new_str': 'x'}",
		    "file too large: fits.txt"));
	CHECK(file_is("fits.txt", "0123456789abcdef"));
	CHECK(fails("{'command': 'create', 'path': 'big2.txt', 'file_text': '0123456789abcdefX'}",
		    "file too large: big2.txt"));
	CHECK(!exists("big2.txt"));
	max_bytes = 1 << 20;
}

static void test_fifo_is_not_a_file(void)
{
	CHECK(fails("{'command': 'view', 'path': 'fifo'}", "not a file: fifo"));
	CHECK(fails("{'command': 'str_replace', 'path': 'fifo', 'old_str': 'a', 'new_str': 'b'}",
		    "not a file: fifo"));
	CHECK(fails("{'command': 'create', 'path': 'fifo', 'file_text': 'x'}",
		    "already exists: fifo"));
}

static void test_paths_outside_the_workspace_are_refused(void)
{
	char p[PATH_MAX];
	struct stat before, after;

	CHECK(fails("{'command': 'view', 'path': '../x'}", "path is outside the workspace: ../x"));
	CHECK(fails("{'command': 'view', 'path': '../secret'}",
		    "path is outside the workspace: ../secret"));
	CHECK(fails("{'command': 'view', 'path': '/etc/passwd'}",
		    "path is outside the workspace: /etc/passwd"));
	CHECK(fails("{'command': 'view', 'path': '/workspace/../../etc/passwd'}",
		    "path is outside the workspace: /workspace/../../etc/passwd"));
	CHECK(fails("{'command': 'view', 'path': '..'}", "path is outside the workspace: .."));
	CHECK(fails("{'command': 'view', 'path': 'link_abs'}",
		    "path is outside the workspace: link_abs"));
	CHECK(fails("{'command': 'view', 'path': 'link_climb'}",
		    "path is outside the workspace: link_climb"));
	CHECK(fails("{'command': 'view', 'path': 'link_outdir'}",
		    "path is outside the workspace: link_outdir"));
	CHECK(fails("{'command': 'view', 'path': 'rel_outdir/'}",
		    "path is outside the workspace: rel_outdir/"));

	stat("/etc/shadow", &before);
	CHECK(fails("{'command': 'str_replace', 'path': 'link_abs', 'old_str': 'root', "
		    "'new_str': 'x'}",
		    "path is outside the workspace: link_abs"));
	CHECK(fails("{'command': 'insert', 'path': 'link_abs', 'insert_line': 0, "
		    "'new_str': 'x'}",
		    "path is outside the workspace: link_abs"));
	stat("/etc/shadow", &after);
	CHECK_EQ_INT(before.st_ino, after.st_ino);
	CHECK_EQ_INT(before.st_size, after.st_size);
	CHECK_EQ_INT(before.st_mtim.tv_nsec, after.st_mtim.tv_nsec);

	CHECK(fails("{'command': 'create', 'path': '../escape.txt', 'file_text': 'x'}",
		    "path is outside the workspace: ../escape.txt"));
	CHECK(fails("{'command': 'create', 'path': '/tmp/escape.txt', 'file_text': 'x'}",
		    "path is outside the workspace: /tmp/escape.txt"));
	CHECK(fails("{'command': 'create', 'path': 'link_outdir/new.txt', 'file_text': 'x'}",
		    "path is outside the workspace: link_outdir/new.txt"));
	CHECK(fails("{'command': 'create', 'path': 'rel_outdir/a/new.txt', 'file_text': 'x'}",
		    "path is outside the workspace: rel_outdir/a/new.txt"));
	CHECK(fails("{'command': 'insert', 'path': '../secret', 'insert_line': 0, "
		    "'new_str': 'x'}",
		    "path is outside the workspace: ../secret"));
	snprintf(p, sizeof(p), "%s/escape.txt", root);
	CHECK(!exists_abs(p));
	snprintf(p, sizeof(p), "%s/outside/new.txt", root);
	CHECK(!exists_abs(p));
	snprintf(p, sizeof(p), "%s/outside/a", root);
	CHECK(!exists_abs(p));
	CHECK(!exists_abs("/tmp/escape.txt"));

	/* A symlink inside that points inside: read through it, never written through. */
	CHECK(ok("{'command': 'view', 'path': 'link_in'}", "inside\n"));
	CHECK(fails("{'command': 'str_replace', 'path': 'link_in', 'old_str': 'inside', "
		    "'new_str': 'x'}",
		    "path is a symlink, not followed for writes: link_in"));
	CHECK(file_is("target.txt", "inside\n"));
	path_of(p, sizeof(p), "link_in");
	CHECK_EQ_INT(lstat(p, &after), 0);
	CHECK(S_ISLNK(after.st_mode));
	CHECK(fails("{'command': 'undo_edit', 'path': 'link_in'}", "no edits to undo for link_in"));
}

int main(void)
{
	if (geteuid() != 0) {
		fprintf(stderr, "test_editor: needs root (chown to the session uid); skipped\n");
		return 77;
	}
	alarm(60);
	umask(077);
	setup();

	test_malformed_input_is_refused_before_anything_runs();
	test_view_shows_a_file_or_a_range_of_its_lines();
	test_view_of_a_directory_lists_two_levels_deep();
	test_create_writes_only_new_files_and_makes_their_parents();
	test_str_replace_needs_exactly_one_match();
	test_insert_puts_lines_after_the_given_line();
	test_undo_edit_reverts_the_last_16_edits_of_that_file();
	test_files_not_utf8_or_over_the_size_cap_are_refused();
	test_fifo_is_not_a_file();
	test_paths_outside_the_workspace_are_refused();

	teardown();
	return unit_summary();
}
