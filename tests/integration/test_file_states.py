# SPDX-License-Identifier: MIT
"""What the session can put in its own workspace must never make the files API answer 5xx,
block the daemon or crash anything: sockets, FIFOs, device nodes, directories, symlinks,
files under a lease or a lock, files deleted while they are read."""

import os
import secrets
import stat
import threading
import time

import pytest

import paddock_stack as ps

EDITOR = "text_editor_code_execution"


def assert_daemon_answers(client):
    """Another session still gets an answer at once: nothing above blocked the loop."""
    other = client.new_session()
    try:
        t0 = time.monotonic()
        assert client.list_files(other).status_code == 200
        assert time.monotonic() - t0 < 5
    finally:
        client.destroy(other)


def not_a_file(client, sid, path):
    """GetFile, the editor and ListFiles on path, which is no regular file: clear 4xx."""
    g = client.get_file(sid, path, timeout=20)
    assert g.status_code == 400, (path, g.status_code, g.text)
    assert "not a regular file" in g.parsed["detail"], g.parsed
    v = client.edit(sid, command="view", path=path)
    assert v.rc == 1 and v.stderr.startswith("text_editor: "), v
    for cmd in ({"command": "str_replace", "old_str": "a", "new_str": "b"},
                {"command": "insert", "insert_line": 0, "new_str": "x"}):
        e = client.edit(sid, path=path, **cmd)
        assert e.rc == 1 and "not a file" in e.stderr, (cmd, e)
    lst = client.list_files(sid)
    assert lst.status_code == 200
    assert path not in {f["path"] for f in lst.parsed["files"]}
    n = client.list_files(sid, path)
    assert n.status_code == 404, (n.status_code, n.text)


def test_unix_socket(client, sid):
    client.run(sid, "import socket\ns = socket.socket(socket.AF_UNIX)\ns.bind('sock')\ns.listen()")
    not_a_file(client, sid, "sock")
    # PutFile replaces it with a file; the socket's owner carries on.
    assert client.put_file(sid, b"now a file", path="sock").status_code == 201
    assert client.get_file(sid, "sock").content == b"now a file"


def test_fifo_never_blocks(client, sid):
    client.run(sid, "import os\nos.mkfifo('fifo')\nos.makedirs('d')\nos.mkfifo('d/f2')")
    t0 = time.monotonic()
    not_a_file(client, sid, "fifo")
    not_a_file(client, sid, "d/f2")
    assert time.monotonic() - t0 < 15
    p = client.put_file(sid, b"x", path="fifo/under")
    assert p.status_code == 404, (p.status_code, p.text)
    assert_daemon_answers(client)


def test_fifo_with_a_writer_waiting(client, sid):
    # A writer blocked in open() wakes up if the daemon opens the FIFO for reading: it must
    # not, so the writer is still waiting afterwards.
    client.run(sid, "import os, subprocess\nos.mkfifo('wfifo')\n"
                    "w = subprocess.Popen(['sh', '-c', 'echo hi > wfifo'])")
    not_a_file(client, sid, "wfifo")
    r = client.run(sid, "print(w.poll())")
    assert r.stdout == "None\n"
    client.run(sid, "open('wfifo').read(); w.wait()")


def test_device_node_made_from_the_host(client, stack, sid):
    tok = secrets.token_hex(6)
    client.run(sid, f"open('mark-{tok}', 'w')")
    ws = ps.host_workspace(stack, f"mark-{tok}")
    try:
        os.mknod(os.path.join(ws, "nulldev"), stat.S_IFCHR | 0o666, os.makedev(1, 3))
        os.mknod(os.path.join(ws, "blockdev"), stat.S_IFBLK | 0o600, os.makedev(7, 0))
    except PermissionError as e:
        pytest.skip(f"mknod refused here: {e}")
    for name in ("nulldev", "blockdev"):
        not_a_file(client, sid, name)
    # From inside, mknod is refused (EPERM): the session cannot make one itself.
    r = client.run(sid, "import os, stat\ntry:\n    os.mknod('d2', stat.S_IFCHR | 0o666, "
                        "os.makedev(1, 3))\nexcept OSError as e:\n    print(e.errno)")
    assert r.stdout.strip() in ("1", "13"), r.stdout


def test_directory_and_symlinks(client, sid):
    client.run(sid, "import os\nos.makedirs('dir/sub')\nopen('dir/f', 'w').write('f')\n"
                    "os.symlink('dir/f', 'inner-link')\nos.symlink('dir', 'dir-link')\n"
                    "os.symlink('missing', 'dangling')\nos.symlink('/etc/passwd', 'out-link')\n"
                    "os.symlink('sock', 'sock-link')\n"
                    "import socket\ns = socket.socket(socket.AF_UNIX)\ns.bind('sock')")
    g = client.get_file(sid, "dir")
    assert g.status_code == 400 and "directory" in g.parsed["detail"]
    assert client.get_file(sid, "dir-link").status_code == 400
    assert client.get_file(sid, "inner-link").content == b"f"
    assert client.get_file(sid, "dangling").status_code == 404
    assert client.get_file(sid, "out-link").status_code == 403
    s = client.get_file(sid, "sock-link")
    assert s.status_code == 400 and "not a regular file" in s.parsed["detail"]
    lst = {f["path"] for f in client.list_files(sid).parsed["files"]}
    assert lst == {"dir/f"}
    p = client.put_file(sid, b"x", path="dir")
    assert p.status_code == 400, p.text


def test_file_under_a_write_lease(client, sid):
    # A write lease makes every other open wait for the holder, up to lease-break-time: the
    # daemon must not wait, and must not call it an internal error.
    r = client.run(sid, "import fcntl, os, signal\nopen('leased.txt', 'w').write('data')\n"
                        "signal.signal(signal.SIGIO, signal.SIG_IGN)\n"
                        "lfd = os.open('leased.txt', os.O_WRONLY)\n"
                        "fcntl.fcntl(lfd, fcntl.F_SETLEASE, fcntl.F_WRLCK)\n"
                        "print(fcntl.fcntl(lfd, fcntl.F_GETLEASE) == fcntl.F_WRLCK)")
    assert r.stdout == "True\n", r.stderr
    t0 = time.monotonic()
    g = client.get_file(sid, "leased.txt")
    assert g.status_code == 409, (g.status_code, g.text)
    assert "lease" in g.parsed["detail"], g.parsed
    assert time.monotonic() - t0 < 10
    v = client.edit(sid, command="view", path="leased.txt")
    assert v.rc == 1 and "lease" in v.stderr, v
    e = client.edit(sid, command="str_replace", path="leased.txt", old_str="data", new_str="x")
    assert e.rc == 1 and "lease" in e.stderr, e
    assert client.list_files(sid).status_code == 200
    assert_daemon_answers(client)
    # Once the holder lets go, the file is served.
    client.run(sid, "fcntl.fcntl(lfd, fcntl.F_SETLEASE, fcntl.F_UNLCK)\nos.close(lfd)")
    g = client.get_file(sid, "leased.txt")
    assert g.status_code == 200 and g.content == b"data"


def test_file_under_a_read_lease_is_served(client, sid):
    r = client.run(sid, "import fcntl, os, signal\nopen('rl.txt', 'w').write('rl')\n"
                        "signal.signal(signal.SIGIO, signal.SIG_IGN)\n"
                        "rfd = os.open('rl.txt', os.O_RDONLY)\n"
                        "fcntl.fcntl(rfd, fcntl.F_SETLEASE, fcntl.F_RDLCK)\nprint('ok')")
    assert r.stdout == "ok\n", r.stderr
    assert client.get_file(sid, "rl.txt").content == b"rl"
    # Writes replace the file (a new inode): the lease does not hold them up.
    assert client.put_file(sid, b"new", path="rl.txt").status_code == 201
    assert client.get_file(sid, "rl.txt").content == b"new"


def test_locked_files_are_served(client, sid):
    r = client.run(sid, "import fcntl\nf1 = open('flocked', 'w+'); f1.write('one'); f1.flush()\n"
                        "fcntl.flock(f1, fcntl.LOCK_EX)\n"
                        "f2 = open('posixlocked', 'w+'); f2.write('two'); f2.flush()\n"
                        "fcntl.lockf(f2, fcntl.LOCK_EX)\nprint('locked')")
    assert r.stdout == "locked\n", r.stderr
    # Advisory locks bind only those who ask for them.
    assert client.get_file(sid, "flocked").content == b"one"
    assert client.get_file(sid, "posixlocked").content == b"two"
    e = client.edit(sid, command="str_replace", path="flocked", old_str="one", new_str="uno")
    assert e.rc == 0, e.stderr
    assert client.put_file(sid, b"2", path="posixlocked").status_code == 201


def test_deleted_while_being_read(client, sid):
    size = 24 * 1024 * 1024
    client.run(sid, f"import os\nopen('big', 'wb').write(os.urandom({size}))\n"
                    "import hashlib\nh = hashlib.sha256(open('big', 'rb').read()).hexdigest()")
    want = client.run(sid, "print(h)").stdout.strip()
    g = client.get_file(sid, "big", stream=True)
    assert g.status_code == 200
    it = g.iter_content(64 * 1024)
    first = next(it)
    # The file goes away, and another takes its name, while the download is under way.
    client.run(sid, "os.remove('big')\nopen('big', 'wb').write(b'other')")
    import hashlib
    got = hashlib.sha256(first + b"".join(it)).hexdigest()
    assert got == want
    assert client.get_file(sid, "big").content == b"other"
    # Deleted between two requests: a 404, not an error.
    client.run(sid, "os.remove('big')")
    assert client.get_file(sid, "big").status_code == 404


def test_many_states_at_once_then_stress_the_daemon(client, sid):
    client.run(sid, "import os, socket\nfor i in range(50):\n    os.mkfifo(f'f{i}')\n"
                    "    s = socket.socket(socket.AF_UNIX); s.bind(f's{i}')\n")
    errors = []

    def hammer(kind):
        for i in range(50):
            g = client.get_file(sid, f"{kind}{i}", timeout=20)
            if g.status_code >= 500 or g.status_code != 400:
                errors.append((kind, i, g.status_code))
    ts = [threading.Thread(target=hammer, args=(k,)) for k in ("f", "s")]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors
    assert_daemon_answers(client)
