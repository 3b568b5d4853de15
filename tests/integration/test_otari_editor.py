# SPDX-License-Identifier: MIT
"""text_editor_code_execution: every command, message and failure that OTARI.md fixes."""

import os
import secrets

import pytest

import paddock_stack as ps

EDITOR = "text_editor_code_execution"


def ok(r, stdout=None):
    assert r.rc == 0 and r.stderr == "", r
    if stdout is not None:
        assert r.stdout == stdout, repr(r.stdout)
    return r.stdout


def failed(r, message=None):
    assert r.rc == 1 and r.stdout == "", r
    assert r.stderr.startswith("text_editor: ") and r.stderr.endswith("\n"), repr(r.stderr)
    if message is not None:
        assert r.stderr == f"text_editor: {message}\n", repr(r.stderr)
    return r.stderr


def refused(client, sid, message, **input):
    """A missing or malformed command field: a 422, or a text_editor error with the
    message OTARI.md gives. Never a 5xx, never a success."""
    r = client.exec(sid, EDITOR, input)
    if r.status_code == 200:
        failed(ps.check_exec_body(r.parsed, EDITOR), message)
    else:
        assert r.status_code == 422, f"{r.status_code} {r.text[:200]}"


def content(client, sid, path):
    r = client.get_file(sid, path)
    assert r.status_code == 200, f"{path}: {r.status_code}"
    return r.content


def write(client, sid, path, data):
    assert client.put_file(sid, data, path=path).status_code == 201


# --- create -------------------------------------------------------------------------

def test_create(client, sid):
    ok(client.edit(sid, command="create", path="notes.txt", file_text="one\ntwo\n"),
       "File created: notes.txt\n")
    assert content(client, sid, "notes.txt") == b"one\ntwo\n"
    r = client.edit(sid, command="create", path="notes.txt", file_text="other")
    failed(r, "already exists: notes.txt")
    assert content(client, sid, "notes.txt") == b"one\ntwo\n"


def test_create_empty_file_and_parents(client, sid):
    ok(client.edit(sid, command="create", path="empty.txt", file_text=""), "File created: empty.txt\n")
    assert content(client, sid, "empty.txt") == b""
    ok(client.edit(sid, command="create", path="a/b/c/deep.txt", file_text="d"),
       "File created: a/b/c/deep.txt\n")
    assert content(client, sid, "a/b/c/deep.txt") == b"d"
    ok(client.edit(sid, command="create", path="/workspace/abs.txt", file_text="abs"))
    assert content(client, sid, "abs.txt") == b"abs"


def test_create_requires_file_text(client, sid):
    refused(client, sid, "create requires file_text", command="create", path="x.txt")
    refused(client, sid, "create requires file_text", command="create", path="x.txt", file_text=None)
    assert client.get_file(sid, "x.txt").status_code == 404


def test_created_file_belongs_to_the_session_user(client, sid):
    client.edit(sid, command="create", path="mine.txt", file_text="m")
    r = client.run(sid, "import os\nst = os.stat('mine.txt')\nprint(st.st_uid == os.getuid())\n"
                        "open('mine.txt', 'a').write('+')")
    assert r.stdout == "True\n", r


# --- view ---------------------------------------------------------------------------

def test_view_file_is_the_text_as_is(client, sid):
    text = "line 1\n\tindented\n\nlast without newline"
    write(client, sid, "v.txt", text.encode())
    ok(client.edit(sid, command="view", path="v.txt"), text)
    ok(client.edit(sid, command="view", path="/workspace/v.txt"), text)


def test_view_missing_file(client, sid):
    failed(client.edit(sid, command="view", path="missing.txt"), "file not found: missing.txt")


@pytest.mark.parametrize("rng,expected", [
    ([2, 3], "l2\nl3"),
    ([1, 1], "l1"),
    ([2, -1], "l2\nl3\nl4"),
    ([0, 99], "l1\nl2\nl3\nl4"),
    ([-5, 2], "l1\nl2"),
    ([4, 4], "l4"),
])
def test_view_range(client, sid, rng, expected):
    write(client, sid, "r.txt", b"l1\nl2\nl3\nl4\n")
    ok(client.edit(sid, command="view", path="r.txt", view_range=rng), expected)


def test_view_range_on_a_file_without_final_newline(client, sid):
    write(client, sid, "nn.txt", b"a\nb\nc")
    ok(client.edit(sid, command="view", path="nn.txt", view_range=[2, -1]), "b\nc")


@pytest.mark.parametrize("rng", [[1], [1, 2, 3], ["1", "2"], [1.5, 2], "1,2", {"a": 1}, [True, 2]])
def test_invalid_view_range(client, sid, rng):
    write(client, sid, "r.txt", b"l1\nl2\n")
    refused(client, sid, "invalid view_range", command="view", path="r.txt", view_range=rng)


def test_view_directory_lists_two_levels_sorted(client, sid):
    client.run(sid, "import os\nos.makedirs('d/sub/deeper', exist_ok=True)\n"
                    "for p in ['d/b.txt', 'd/a.txt', 'd/sub/y.txt', 'd/sub/deeper/z.txt']:\n"
                    "    open(p, 'w').write('x')")
    out = ok(client.edit(sid, command="view", path="d"))
    assert out.endswith("\n"), repr(out)
    lines = out.rstrip("\n").split("\n")
    assert lines == sorted(lines), lines
    joined = "\n".join(lines)
    for want in ("a.txt", "b.txt", "sub", "y.txt"):
        assert want in joined, (want, lines)
    assert "z.txt" not in joined, f"depth 3 listed: {lines}"
    assert "deeper" in joined  # the directory at depth 2 itself is listed


# --- str_replace --------------------------------------------------------------------

def test_str_replace(client, sid):
    write(client, sid, "s.py", b"x = 1\ny = 2\n")
    ok(client.edit(sid, command="str_replace", path="s.py", old_str="y = 2", new_str="y = 3"),
       "Edited s.py\n")
    assert content(client, sid, "s.py") == b"x = 1\ny = 3\n"
    ok(client.edit(sid, command="str_replace", path="s.py", old_str="x = 1\n", new_str=""))
    assert content(client, sid, "s.py") == b"y = 3\n"


def test_str_replace_not_found_and_not_unique(client, sid):
    write(client, sid, "s.txt", b"ab ab ab\n")
    failed(client.edit(sid, command="str_replace", path="s.txt", old_str="zz", new_str="q"),
           "old_str not found in s.txt")
    failed(client.edit(sid, command="str_replace", path="s.txt", old_str="ab", new_str="q"),
           "old_str matched 3 times in s.txt; must be unique")
    assert content(client, sid, "s.txt") == b"ab ab ab\n"
    failed(client.edit(sid, command="str_replace", path="nope.txt", old_str="a", new_str="b"),
           "file not found: nope.txt")


def test_str_replace_needs_old_and_new_str(client, sid):
    write(client, sid, "s.txt", b"abc\n")
    for fields in ({"new_str": "x"}, {"old_str": "abc"}, {"old_str": "", "new_str": "x"},
                   {"old_str": 5, "new_str": "x"}):
        refused(client, sid, None, command="str_replace", path="s.txt", **fields)
    assert content(client, sid, "s.txt") == b"abc\n"


# --- insert -------------------------------------------------------------------------

def test_insert(client, sid):
    write(client, sid, "i.txt", b"a\nb\n")
    ok(client.edit(sid, command="insert", path="i.txt", insert_line=0, new_str="top\n"),
       "Inserted into i.txt\n")
    assert content(client, sid, "i.txt") == b"top\na\nb\n"
    ok(client.edit(sid, command="insert", path="i.txt", insert_line=2, new_str="mid\n"))
    assert content(client, sid, "i.txt") == b"top\na\nmid\nb\n"
    ok(client.edit(sid, command="insert", path="i.txt", insert_line=4, new_str="end\n"))
    assert content(client, sid, "i.txt") == b"top\na\nmid\nb\nend\n"


def test_insert_never_glues_lines(client, sid):
    write(client, sid, "g.txt", b"a\nb")  # no final newline
    ok(client.edit(sid, command="insert", path="g.txt", insert_line=2, new_str="c"))
    assert content(client, sid, "g.txt").split(b"\n")[:3] == [b"a", b"b", b"c"]
    write(client, sid, "h.txt", b"a\nb\n")
    ok(client.edit(sid, command="insert", path="h.txt", insert_line=1, new_str="X"))
    assert content(client, sid, "h.txt").splitlines() == [b"a", b"X", b"b"]


def test_insert_line_out_of_range(client, sid):
    write(client, sid, "o.txt", b"1\n2\n3\n")
    failed(client.edit(sid, command="insert", path="o.txt", insert_line=4, new_str="x\n"),
           "insert_line 4 out of range for o.txt")
    failed(client.edit(sid, command="insert", path="o.txt", insert_line=-1, new_str="x\n"),
           "insert_line -1 out of range for o.txt")
    assert content(client, sid, "o.txt") == b"1\n2\n3\n"


def test_insert_needs_its_fields(client, sid):
    write(client, sid, "o.txt", b"1\n")
    refused(client, sid, None, command="insert", path="o.txt", new_str="x")
    refused(client, sid, None, command="insert", path="o.txt", insert_line=0)
    refused(client, sid, None, command="insert", path="o.txt", insert_line="0", new_str="x")
    assert content(client, sid, "o.txt") == b"1\n"


# --- undo_edit ----------------------------------------------------------------------

def test_undo_is_multi_level(client, sid):
    write(client, sid, "u.txt", b"v0\n")
    client.edit(sid, command="str_replace", path="u.txt", old_str="v0", new_str="v1")
    client.edit(sid, command="insert", path="u.txt", insert_line=1, new_str="added\n")
    client.edit(sid, command="str_replace", path="u.txt", old_str="v1", new_str="v2")
    assert content(client, sid, "u.txt") == b"v2\nadded\n"
    ok(client.edit(sid, command="undo_edit", path="u.txt"), "Reverted u.txt\n")
    assert content(client, sid, "u.txt") == b"v1\nadded\n"
    ok(client.edit(sid, command="undo_edit", path="u.txt"))
    assert content(client, sid, "u.txt") == b"v1\n"
    ok(client.edit(sid, command="undo_edit", path="u.txt"))
    assert content(client, sid, "u.txt") == b"v0\n"
    failed(client.edit(sid, command="undo_edit", path="u.txt"), "no edits to undo for u.txt")


def test_undo_is_per_file(client, sid):
    write(client, sid, "p.txt", b"p\n")
    write(client, sid, "q.txt", b"q\n")
    failed(client.edit(sid, command="undo_edit", path="p.txt"), "no edits to undo for p.txt")
    client.edit(sid, command="str_replace", path="p.txt", old_str="p", new_str="P")
    client.edit(sid, command="str_replace", path="q.txt", old_str="q", new_str="Q")
    ok(client.edit(sid, command="undo_edit", path="q.txt"), "Reverted q.txt\n")
    assert content(client, sid, "p.txt") == b"P\n" and content(client, sid, "q.txt") == b"q\n"


def test_undo_history_is_per_session(client):
    a, b = client.new_session(), client.new_session()
    for s in (a, b):
        write(client, s, "f.txt", b"x\n")
    client.edit(a, command="str_replace", path="f.txt", old_str="x", new_str="y")
    failed(client.edit(b, command="undo_edit", path="f.txt"), "no edits to undo for f.txt")
    ok(client.edit(a, command="undo_edit", path="f.txt"))
    for s in (a, b):
        client.destroy(s)


# --- what the editor refuses cleanly --------------------------------------------------

def test_directory_given_to_edit_commands(client, sid):
    client.run(sid, "import os; os.makedirs('adir', exist_ok=True)")
    failed(client.edit(sid, command="str_replace", path="adir", old_str="a", new_str="b"))
    failed(client.edit(sid, command="insert", path="adir", insert_line=0, new_str="b"))
    failed(client.edit(sid, command="create", path="adir", file_text="x"))


def test_non_utf8_file(client, sid):
    write(client, sid, "bin.dat", b"\xff\xfe\x00\x01abc\n")
    failed(client.edit(sid, command="view", path="bin.dat"))
    failed(client.edit(sid, command="str_replace", path="bin.dat", old_str="abc", new_str="x"))
    assert content(client, sid, "bin.dat") == b"\xff\xfe\x00\x01abc\n"


def test_file_over_the_editor_cap(client, sid):
    big = b"0123456789abcde\n" * (11 * 1024 * 1024 // 16)  # 11 MiB > editor_max_bytes 10M
    write(client, sid, "big.txt", big)
    failed(client.edit(sid, command="view", path="big.txt"))
    failed(client.edit(sid, command="str_replace", path="big.txt", old_str="0123", new_str="x"))
    assert client.list_files(sid).parsed["files"][0]["size_bytes"] == len(big)


def test_unknown_command_and_missing_path(client, sid):
    for input in ({"command": "delete", "path": "x"}, {"command": "view"},
                  {"command": "view", "path": ""}, {"path": "x"}, {"command": 5, "path": "x"}):
        # sessiond checks the editor's fields before anything runs: its "invalid" is a 422.
        r = client.exec(sid, EDITOR, input)
        assert r.status_code == 422, f"{input}: {r.status_code} {r.text[:200]}"


# --- confinement --------------------------------------------------------------------

ESCAPES = ["../x.txt", "../../etc/passwd", "/etc/passwd", "/workspace/../etc/passwd",
           "/workspace/../x.txt", "d/../../x.txt", "/workspacefoo/x.txt", "/tmp/x.txt", "/"]


@pytest.mark.parametrize("path", ESCAPES)
def test_paths_outside_the_workspace_are_refused(client, sid, path):
    client.run(sid, "import os; os.makedirs('d', exist_ok=True)")  # so d/../.. resolves
    for cmd in ({"command": "view"}, {"command": "str_replace", "old_str": "root", "new_str": "x"},
                {"command": "insert", "insert_line": 0, "new_str": "x"}, {"command": "undo_edit"}):
        r = client.edit(sid, path=path, **cmd)
        failed(r)
        assert "root:" not in r.stderr


def test_create_outside_the_workspace_writes_nothing(client, sid, stack):
    name = "escape-" + secrets.token_hex(6)
    for path in (f"../{name}", f"/workspace/../{name}", f"/etc/{name}", f"/tmp/{name}",
                 f"../../../../../../tmp/{name}"):
        failed(client.edit(sid, command="create", path=path, file_text="pwned"))
    r = client.run(sid, f"import os\nprint([p for p in ('/{name}', '/tmp/{name}', '/etc/{name}') "
                        f"if os.path.exists(p)])")
    assert r.stdout == "[]\n", r
    hits = [os.path.join(d, name) for d in ("/", "/tmp", "/etc")
            if os.path.lexists(os.path.join(d, name))]
    for dirpath, dirnames, filenames in os.walk(stack.state_dir):
        hits += [os.path.join(dirpath, f) for f in filenames if f == name]
    assert not hits, f"the editor wrote outside the workspace: {hits}"


def test_symlinks_planted_by_code_do_not_lead_out(client, sid):
    with open("/etc/shadow", "rb") as f:
        shadow = f.read()
    client.run(sid, "import os\nos.symlink('/etc/shadow', 'shadow')\nos.symlink('..', 'up')\n"
                    "os.symlink('/etc', 'etc')\nos.symlink('/', 'root')")
    for path in ("shadow", "up/etc/passwd", "etc/passwd", "root/etc/shadow", "up"):
        r = client.edit(sid, command="view", path=path)
        failed(r)
    failed(client.edit(sid, command="str_replace", path="shadow", old_str="root", new_str="x"))
    failed(client.edit(sid, command="insert", path="etc/passwd", insert_line=0, new_str="x\n"))
    failed(client.edit(sid, command="create", path="up/planted.txt", file_text="x"))
    failed(client.edit(sid, command="create", path="etc/planted.txt", file_text="x"))
    assert not os.path.exists("/etc/planted.txt")
    with open("/etc/shadow", "rb") as f:
        assert f.read() == shadow
