# SPDX-License-Identifier: MIT
"""The escape battery, through the files API and the editor: symlinks planted in a workspace
(to /etc/shadow, to another session's workspace, to a canary on the host) are never
followed by GetFile, PutFile, ListFiles or the text editor."""

import os
import secrets
import shutil
import tempfile

import pytest

import paddock_stack as ps

EDITOR = "text_editor_code_execution"


@pytest.fixture
def canary():
    """A host directory with one file, that no request may read, change or add to."""
    d = tempfile.mkdtemp(prefix="paddock-canary-")
    os.chmod(d, 0o755)
    with open(os.path.join(d, "file"), "w") as f:
        f.write("canary " + secrets.token_hex(8) + "\n")
    os.chmod(os.path.join(d, "file"), 0o666)
    yield d
    shutil.rmtree(d)


def snapshot(d):
    out = {}
    for name in sorted(os.listdir(d)):
        with open(os.path.join(d, name), "rb") as f:
            out[name] = f.read()
    return out


def test_planted_symlinks_are_never_followed(client, stack, canary):
    a = client.new_session()
    b = client.new_session()
    try:
        tok = secrets.token_hex(8)
        client.run(b, f"open('secret', 'w').write('b-secret-{tok}')\nopen('mark-{tok}', 'w')")
        b_ws = ps.host_workspace(stack, f"mark-{tok}")
        with open("/etc/shadow", "rb") as f:
            shadow_line = f.readline().strip()
        links = {
            "shadow": "/etc/shadow",
            "bfile": os.path.join(b_ws, "secret"),
            "bdir": b_ws,
            "cfile": os.path.join(canary, "file"),
            "cdir": canary,
            "deep/up": "../..",
        }
        client.run(a, "import os\nos.makedirs('deep')\n" + "".join(
            f"os.symlink({t!r}, {n!r})\n" for n, t in links.items()))
        before = snapshot(canary)

        def no_leak(text, what):
            assert shadow_line.decode() not in text, f"{what}: /etc/shadow leaked"
            assert f"b-secret-{tok}" not in text, f"{what}: session b's file leaked"
            assert "canary " not in text, f"{what}: the host canary leaked"

        # GetFile
        for path in ("shadow", "bfile", "bdir/secret", "cfile", "cdir/file", "deep/up/etc/shadow"):
            r = client.get_file(a, path)
            assert r.status_code == 403, f"GetFile {path}: {r.status_code}"
            no_leak(r.content.decode("utf-8", "replace"), f"GetFile {path}")
        # ListFiles
        for path in (None, "bdir", "cdir", "deep/up", "deep"):
            r = client.list_files(a, path)
            no_leak(r.text, f"ListFiles {path}")
            if r.status_code == 200:
                names = [f["path"] for f in r.parsed["files"]]
                assert not any(n.startswith(("bdir/", "cdir/", "deep/up/")) for n in names), names
        # PutFile: through a directory link, and onto a file link
        for path in ("cdir/new", "bdir/new", "cfile", "bfile"):
            r = client.put_file(a, b"pwned", path=path)
            assert r.status_code == 403, f"PutFile {path}: {r.status_code}"
        # The text editor
        for path in ("shadow", "bfile", "cfile", "cdir/file"):
            r = client.exec(a, EDITOR, {"command": "view", "path": path})
            no_leak(r.text, f"editor view {path}")
            client.exec(a, EDITOR, {"command": "str_replace", "path": path,
                                    "old_str": "canary", "new_str": "pwned"})
            client.exec(a, EDITOR, {"command": "insert", "path": path, "insert_line": 0,
                                    "insert_text": "pwned\n"})
        for path in ("cdir/new2", "bdir/new2"):
            client.exec(a, EDITOR, {"command": "create", "path": path, "file_text": "pwned"})

        assert snapshot(canary) == before, "the host canary was changed through a symlink"
        assert sorted(os.listdir(b_ws)) == [f"mark-{tok}", "secret"], os.listdir(b_ws)
        r = client.run(b, "print(open('secret').read())")
        assert r.stdout == f"b-secret-{tok}\n", "session b's file was changed"
    finally:
        client.destroy(a)
        client.destroy(b)
