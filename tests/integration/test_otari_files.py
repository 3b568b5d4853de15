# SPDX-License-Identifier: MIT
"""ListFiles, GetFile, PutFile: shapes, caps, multipart, and confinement."""

import hashlib
import os
import secrets
import time

import pytest

import paddock_stack as ps

MiB = 1024 * 1024


def put_ok(client, sid, data, **kw):
    r = client.put_file(sid, data, **kw)
    assert r.status_code == 201, f"{r.status_code} {r.text[:300]}"
    assert r.parsed["size_bytes"] == len(data), r.parsed
    return r.parsed


def listing(client, sid, path=None):
    r = client.list_files(sid, path)
    assert r.status_code == 200, f"{r.status_code} {r.text[:300]}"
    return {f["path"]: f for f in r.parsed["files"]}


# --- PutFile / GetFile ------------------------------------------------------------

def test_put_then_get_roundtrip(client, sid):
    data = bytes(range(256)) * 64 + b"\r\n--paddock\r\n--\r\n\r\n" + b"\x00" * 10
    assert put_ok(client, sid, data, path="in/data.bin")["path"] == "in/data.bin"
    g = client.get_file(sid, "in/data.bin")
    assert g.status_code == 200 and g.content == data
    assert g.headers.get("Content-Type"), "GetFile without a Content-Type"
    r = client.run(sid, "import hashlib\nprint(hashlib.sha256(open('in/data.bin','rb').read()).hexdigest())")
    assert r.stdout == hashlib.sha256(data).hexdigest() + "\n"


@pytest.mark.parametrize("path_first", [False, True])
def test_a_large_upload_arrives_byte_for_byte(client, sid, path_first):
    """A body of a MiB or more is read from nginx in large reads (http_reader_enlarge): the
    file, with delimiter-like runs placed at many offsets, arrives whole and unchanged."""
    data = bytearray(secrets.token_bytes(5 * MiB + 4321))
    for off in range(1000, len(data) - 64, 65521):
        data[off:off + 24] = b"\r\n--\r\n\r\n--paddock\r\n--"
    data = bytes(data)
    put_ok(client, sid, data, path="big/up.bin", path_first=path_first)
    r = client.run(sid, "import hashlib\nprint(hashlib.sha256(open('big/up.bin','rb').read()).hexdigest())")
    assert r.stdout == hashlib.sha256(data).hexdigest() + "\n"
    assert client.get_file(sid, "big/up.bin").content == data


def test_put_accepts_absolute_workspace_paths(client, sid):
    assert put_ok(client, sid, b"abs", path="/workspace/abs.txt")["path"] == "abs.txt"
    assert client.get_file(sid, "/workspace/abs.txt").content == b"abs"
    assert client.get_file(sid, "./abs.txt").content == b"abs"


def test_put_default_path_is_the_upload_name(client, sid):
    assert put_ok(client, sid, b"r", filename="report.txt")["path"] == "report.txt"
    assert put_ok(client, sid, b"n", filename="some/dir/nested.txt")["path"] == "nested.txt"
    assert client.get_file(sid, "nested.txt").content == b"n"
    assert client.get_file(sid, "some/dir/nested.txt").status_code == 404


@pytest.mark.parametrize("path_first", [False, True])
def test_multipart_part_order_does_not_matter(client, sid, path_first):
    put_ok(client, sid, b"ordered", filename="ignored.txt", path="chosen.txt", path_first=path_first)
    assert client.get_file(sid, "chosen.txt").content == b"ordered"
    assert client.get_file(sid, "ignored.txt").status_code == 404


def test_put_overwrites_and_makes_parents(client, sid):
    put_ok(client, sid, b"first version, longer", path="a/b/c/f.txt")
    put_ok(client, sid, b"second", path="a/b/c/f.txt")
    assert client.get_file(sid, "a/b/c/f.txt").content == b"second"
    assert listing(client, sid)["a/b/c/f.txt"]["size_bytes"] == 6


def test_overwriting_frees_what_it_replaced(client, sid):
    """The file a PutFile replaces is freed, once its answer is out, not kept by anyone."""
    used = ("import os\ns = os.statvfs('.')\n"
            "print((s.f_blocks - s.f_bfree) * s.f_frsize)")
    before = int(client.run(sid, used).stdout)
    data = os.urandom(8 * MiB)
    for _ in range(6):
        put_ok(client, sid, data, path="over.bin")
    deadline = time.monotonic() + 5
    while True:
        grown = int(client.run(sid, used).stdout) - before
        if grown < 12 * MiB or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    # One copy (8 MiB) and metadata; each replaced copy kept would add 8 MiB more.
    assert 8 * MiB <= grown < 12 * MiB, grown
    assert client.get_file(sid, "over.bin").content == data


def test_an_upload_whose_session_ends_is_told_so(stack, client):
    """A session destroyed while its upload streams in: the worker's writes fail (the
    workspace is shut down), and sessiond says why when the upload is dropped, so the
    client gets 404, not a 400 about its body."""
    from proto_client import SessiondClient
    sd = SessiondClient(os.path.join(stack.run_dir, "sessiond.sock"), timeout=30)
    try:
        kept = client.new_session()
        rep, fds = sd.call({"op": "put", "session_id": kept})
        assert rep["ok"] and len(fds) == 1, rep
        os.write(fds[0], b"x" * 4096)
        os.close(fds[0])
        rep, _ = sd.call({"op": "put_abort"})
        assert rep["ok"], rep   # its session lives: a plain drop

        gone = client.new_session()
        rep, fds = sd.call({"op": "put", "session_id": gone})
        assert rep["ok"] and len(fds) == 1, rep
        os.write(fds[0], b"x" * 4096)
        assert client.destroy(gone).status_code == 204
        os.close(fds[0])
        rep, _ = sd.call({"op": "put_abort"})
        assert not rep["ok"] and rep["error"] == "not_found", rep
        assert rep["detail"] == "the session was destroyed", rep
        client.destroy(kept)
    finally:
        sd.close()


def test_put_empty_file_and_odd_names(client, sid):
    put_ok(client, sid, b"", path="empty")
    assert client.get_file(sid, "empty").content == b""
    name = "dir with space/é ü 日本.txt"
    put_ok(client, sid, b"u", path=name)
    assert client.get_file(sid, name).content == b"u"
    assert name in listing(client, sid)


def test_put_file_belongs_to_the_session_user(client, sid):
    put_ok(client, sid, b"data", path="up/owned.txt")
    r = client.run(sid, "import os\nprint(os.stat('up/owned.txt').st_uid == os.getuid(), "
                        "os.stat('up').st_uid == os.getuid())\n"
                        "open('up/owned.txt', 'a').write('+')\nopen('up/new.txt', 'w').write('n')")
    assert r.stdout == "True True\n" and r.rc == 0, r


def test_get_file_errors(client, sid):
    client.run(sid, "import os; os.makedirs('adir/sub', exist_ok=True)")
    assert client.get_file(sid, "missing.txt").status_code == 404
    assert client.get_file(sid, "adir").status_code == 400
    assert client.get_file(sid, "adir/sub").status_code == 400
    for params in ({}, {"path": ""}):
        r = client.request("GET", f"/sessions/{sid}/files", params=params)
        assert r.status_code == 422, f"{params}: {r.status_code}"


def test_get_streams_a_large_file(client, sid):
    client.run(sid, "open('big.bin', 'wb').write(bytes(range(256)) * (64 * 1024 * 4))")  # 64 MiB
    r = client.get_file(sid, "big.bin", stream=True)
    assert r.status_code == 200
    h = hashlib.sha256()
    n = 0
    for chunk in r.iter_content(1 << 20):
        h.update(chunk)
        n += len(chunk)
    assert n == 64 * MiB
    assert h.hexdigest() == hashlib.sha256(bytes(range(256)) * (64 * 1024 * 4)).hexdigest()


# --- PutFile caps -------------------------------------------------------------------

def test_put_over_the_default_cap_is_413_and_writes_nothing(client, sid):
    r = client.put_file(sid, b"\0" * (100 * MiB + 1), path="huge.bin")
    assert r.status_code == 413, f"{r.status_code} {r.text[:200]}"
    assert client.get_file(sid, "huge.bin").status_code == 404
    assert "huge.bin" not in listing(client, sid)
    r = client.put_file(sid, b"\0" * (102 * MiB), path="huger.bin")  # past nginx's own limit
    assert r.status_code == 413
    assert client.get_file(sid, "huger.bin").status_code == 404


SMALL_ENV = {"PADDOCK_PUT_MAX_BYTES": "1M", "PADDOCK_LIST_MAX_ENTRIES": "5",
             "PADDOCK_WORKSPACE_BYTES": "16M", "PADDOCK_TMP_BYTES": "8M"}


def test_put_cap_boundary_and_no_truncation(stacks):
    c = ps.Client(stacks.get("small", SMALL_ENV))
    sid = c.new_session()
    put_ok(c, sid, b"a" * MiB, path="exact.bin")
    put_ok(c, sid, b"keep me", path="existing.txt")
    r = c.put_file(sid, b"b" * (MiB + 1), path="over.bin")
    assert r.status_code == 413, f"{r.status_code} {r.text[:200]}"
    assert c.get_file(sid, "over.bin").status_code == 404
    r = c.put_file(sid, b"c" * (MiB + 1), path="existing.txt")
    assert r.status_code == 413
    assert c.get_file(sid, "existing.txt").content == b"keep me", "an oversized put touched the file"
    files = listing(c, sid)
    assert set(files) == {"exact.bin", "existing.txt"}, files
    c.destroy(sid)


def test_list_is_capped_with_truncated(stacks):
    c = ps.Client(stacks.get("small", SMALL_ENV))
    sid = c.new_session()
    c.run(sid, "for i in range(8):\n    open(f'f{i}.txt', 'w').write('x')")
    r = c.list_files(sid)
    assert r.status_code == 200
    assert len(r.parsed["files"]) == 5 and r.parsed.get("truncated") is True, r.parsed
    c.destroy(sid)


def test_workspace_and_tmp_are_size_capped(stacks):
    c = ps.Client(stacks.get("small", SMALL_ENV))
    sid = c.new_session()
    r = c.bash(sid, "head -c 40M /dev/zero > fill.bin; echo rc=$?", timeout_seconds=60)
    assert "rc=0" not in r.stdout, r
    r = c.bash(sid, "head -c 40M /dev/zero > /tmp/fill.bin; echo rc=$?", timeout_seconds=60)
    assert "rc=0" not in r.stdout, r
    # Freeing space makes the session usable again.
    assert c.bash(sid, "rm -f fill.bin /tmp/fill.bin; echo ok > after.txt; cat after.txt").stdout == "ok\n"
    c.destroy(sid)


# --- ListFiles ----------------------------------------------------------------------

def test_list_is_recursive_regular_files_only(client, sid):
    t0 = time.time()
    client.run(sid, "import os\nos.makedirs('d/e', exist_ok=True)\nos.makedirs('emptydir')\n"
                    "open('a.txt', 'w').write('aaa')\nopen('d/b.json', 'w').write('{}')\n"
                    "open('d/e/c.txt', 'w').write('c' * 1000)\nos.symlink('a.txt', 'link')\n"
                    "os.mkfifo('fifo')")
    files = listing(client, sid)
    assert set(files) == {"a.txt", "d/b.json", "d/e/c.txt"}, sorted(files)
    assert files["a.txt"]["size_bytes"] == 3 and files["d/e/c.txt"]["size_bytes"] == 1000
    for f in files.values():
        assert t0 - 5 <= f["modified_at"] <= time.time() + 5, f
        assert f.get("mime_type") is None or isinstance(f["mime_type"], str)


def test_list_path_narrows_to_a_subdirectory(client, sid):
    client.run(sid, "import os\nos.makedirs('d/e', exist_ok=True)\nopen('top.txt', 'w').write('t')\n"
                    "open('d/b.txt', 'w').write('b')\nopen('d/e/c.txt', 'w').write('c')")
    for p in ("d", "d/", "/workspace/d", "./d"):
        assert set(listing(client, sid, p)) == {"d/b.txt", "d/e/c.txt"}, p
    assert set(listing(client, sid, "d/e")) == {"d/e/c.txt"}
    assert set(listing(client, sid, ".")) == {"top.txt", "d/b.txt", "d/e/c.txt"}
    assert client.list_files(sid, "nope").status_code == 404


def test_list_of_an_empty_workspace(client, sid):
    assert client.list_files(sid).parsed["files"] == []


# --- confinement --------------------------------------------------------------------

ESCAPES = ["../x", "../../etc/passwd", "/etc/passwd", "/workspace/../etc/passwd",
           "/workspace/../x", "d/../../x", "/workspacefoo/x", "/tmp/x", "/"]


def test_get_file_on_the_workspace_root_is_400(client, sid):
    for p in (".", "/workspace", "/workspace/", "./"):
        r = client.get_file(sid, p)
        assert r.status_code == 400, f"GetFile {p!r}: {r.status_code} {r.text[:200]}"


@pytest.mark.parametrize("path", ESCAPES)
def test_paths_outside_the_workspace_are_403(client, sid, path):
    client.run(sid, "import os; os.makedirs('d', exist_ok=True)")  # so d/../.. resolves
    r = client.get_file(sid, path)
    assert r.status_code == 403, f"GetFile {path}: {r.status_code} {r.content[:100]!r}"
    r = client.list_files(sid, path)
    assert r.status_code == 403, f"ListFiles {path}: {r.status_code}"
    r = client.put_file(sid, b"pwned", path=path + ("" if path.endswith("/") else "-planted"))
    assert r.status_code == 403, f"PutFile {path}: {r.status_code}"


def test_encoded_traversal_is_403(client, sid):
    for q in ("%2e%2e%2fetc%2fpasswd", "%2E%2E/%2E%2E/etc/passwd", "..%2f..%2fetc%2fshadow",
              "%2fworkspace%2f..%2fetc%2fpasswd"):
        r = client.raw("GET", f"/sessions/{sid}/files?path={q}")
        assert r.status == 403, f"{q}: {r.status} {r.body[:100]!r}"
        r = client.raw("GET", f"/sessions/{sid}/files/list?path={q}")
        assert r.status == 403, f"list {q}: {r.status}"
    # Double encoding names a file called "%2e%2e%2fetc%2fpasswd", which is not there.
    r = client.raw("GET", f"/sessions/{sid}/files?path=%252e%252e%252fetc%252fpasswd")
    assert r.status == 404, r.status


def test_symlinks_planted_by_code_are_403(client, sid):
    with open("/etc/shadow", "rb") as f:
        shadow = f.read()
    client.run(sid, "import os\nos.symlink('/etc/shadow', 'shadow')\nos.symlink('..', 'up')\n"
                    "os.symlink('/etc', 'etc')\nos.symlink('/', 'root')\nos.makedirs('real')")
    for path in ("shadow", "up/etc/passwd", "etc/passwd", "root/etc/shadow", "up", "etc"):
        r = client.get_file(sid, path)
        assert r.status_code == 403, f"GetFile {path}: {r.status_code} {r.content[:80]!r}"
        assert b"root:" not in r.content
    for path in ("up", "etc", "root", "root/etc"):
        r = client.list_files(sid, path)
        assert r.status_code == 403, f"ListFiles {path}: {r.status_code} {r.text[:200]}"
    name = "planted-" + secrets.token_hex(6)
    for path in (f"up/{name}", f"etc/{name}", f"root/tmp/{name}"):
        r = client.put_file(sid, b"pwned", path=path)
        assert r.status_code == 403, f"PutFile {path}: {r.status_code}"
    assert not os.path.lexists(f"/etc/{name}") and not os.path.lexists(f"/tmp/{name}")
    # Writing onto the symlink itself must not write through it.
    r = client.put_file(sid, b"pwned", path="shadow")
    assert r.status_code == 403, r.status_code
    with open("/etc/shadow", "rb") as f:
        assert f.read() == shadow, "/etc/shadow was written through a planted symlink"
    # The whole listing does not follow them either.
    paths = set(listing(client, sid))
    assert not any(p.startswith(("up/", "etc/", "root/")) for p in paths), paths


def test_files_api_on_a_path_with_nul_or_bad_encoding(client, sid):
    for q in ("a%00b", "%ZZ", "%", "a%0"):
        r = client.raw("GET", f"/sessions/{sid}/files?path={q}")
        assert 400 <= r.status < 500, f"{q}: {r.status}"
    assert client.run(sid, "print(1)").stdout == "1\n"
