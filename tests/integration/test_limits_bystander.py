# SPDX-License-Identifier: MIT
"""Limits that hold: a fork bomb, a memory bomb, a disk filler and an output flood each end
at their limit, while a second session keeps answering print(1) about as fast as when idle.
Also: an OOM kill is reported (stderr, usage.oom_killed) and the interpreter comes back;
nofile, pids and the CPU quota are what the configuration says."""

import os
import statistics
import textwrap
import threading
import time

import pytest

import paddock_stack as ps
from proto_client import SessiondClient

MiB = 1024 * 1024
# On disk, a workspace has an inode per 4 KiB: 256 MiB makes room for the 60,000 files of
# the walk test. A tmpfs workspace (the system test's container) is held in the 256 MiB of
# memory, so it stays small there, and a tmpfs has inodes enough at any size.
WS_MIB = 64 if ps.workspace_backend() == "tmpfs" else 256
LIMITS = {
    "PADDOCK_MEMORY_MAX_BYTES": "256M",
    "PADDOCK_PIDS_MAX": "64",
    "PADDOCK_WORKSPACE_BYTES": f"{WS_MIB}M",
    "PADDOCK_TMP_BYTES": "32M",
    "PADDOCK_NOFILE_MAX": "256",
    "PADDOCK_CPU_QUOTA_PERCENT": "50",
    "PADDOCK_OUTPUT_MAX_BYTES": "64K",
}


def code(s):
    return textwrap.dedent(s).strip("\n") + "\n"


@pytest.fixture(scope="module")
def lstack(stacks):
    return stacks.get("limits", LIMITS)


@pytest.fixture(scope="module")
def lclient(lstack):
    return ps.Client(lstack)


@pytest.fixture(scope="module")
def bystander(lclient):
    """A second session and its idle print(1) latency (median of 15, after a warm-up)."""
    sid = lclient.new_session()
    for _ in range(3):
        lclient.run(sid, "print(1)")
    samples = []
    for _ in range(15):
        t0 = time.monotonic()
        assert lclient.run(sid, "print(1)").stdout == "1\n"
        samples.append(time.monotonic() - t0)
    idle = statistics.median(samples)
    print(f"bystander idle print(1): median {idle * 1000:.1f} ms")
    yield sid, idle
    lclient.destroy(sid)


@pytest.fixture
def hostile(lclient):
    sid = lclient.new_session()
    yield sid
    lclient.destroy(sid)


def beside(lclient, bystander, sid, tool, input, timeout_seconds, what):
    """Run input in sid on a thread; while it runs, time print(1) in the bystander."""
    by, idle = bystander
    result = {}
    by_client = lclient.clone()

    def go():
        result["r"] = lclient.clone().exec(sid, tool, input, timeout_seconds=timeout_seconds)

    t = threading.Thread(target=go)
    t.start()
    ps.wait_for(lambda: lclient.get_file(sid, "started").status_code == 200 or not t.is_alive(),
                30, f"{what} to start")
    during = []
    while t.is_alive() or len(during) < 5:
        t0 = time.monotonic()
        assert by_client.run(by, "print(1)").stdout == "1\n"
        during.append(time.monotonic() - t0)
    t.join()
    med = statistics.median(during)
    print(f"{what}: bystander print(1) median {med * 1000:.1f} ms, max {max(during) * 1000:.1f} ms "
          f"over {len(during)} calls (idle {idle * 1000:.1f} ms)")
    assert max(during) < 2.0, f"{what}: a bystander call took {max(during):.2f} s"
    assert med < 10 * idle, f"{what}: bystander median {med * 1000:.1f} ms vs idle {idle * 1000:.1f} ms"
    r = result["r"]
    assert r.status_code == 200, f"{r.status_code} {r.text[:300]}"
    return ps.check_exec_body(r.parsed, tool)


def recovers(lclient, sid):
    assert lclient.run(sid, "print('back')", timeout_seconds=60).stdout == "back\n"


def test_fork_bomb_ends_at_pids_max(lclient, bystander, hostile):
    res = beside(lclient, bystander, hostile, "code_execution", {"code": code("""
        import os, time
        open("started", "w").close()
        parent, refused = os.getpid(), 0
        end = time.monotonic() + 3
        while time.monotonic() < end:
            try:
                os.fork()
            except OSError as e:
                refused += e.errno == 11
        if os.getpid() != parent:
            os._exit(0)
        print("refused", refused > 0)
    """)}, 30, "fork bomb")
    assert "refused True" in res.stdout, res  # fork met EAGAIN: pids_max held
    recovers(lclient, hostile)
    r = lclient.run(hostile, code("""
        import os
        n = 0
        kids = []
        try:
            while True:
                pid = os.fork()
                if pid == 0:
                    import time; time.sleep(30); os._exit(0)
                kids.append(pid)
        except OSError as e:
            print(e.errno, len([p for p in os.listdir('/proc') if p.isdigit()]))
        for k in kids:
            os.kill(k, 9); os.waitpid(k, 0)
    """))
    err, tasks = map(int, r.stdout.split())
    assert err == 11 and tasks <= 64, r.stdout  # EAGAIN at pids_max


def test_memory_bomb_is_an_oom_kill_reported_and_survived(lclient, bystander, hostile, lstack):
    res = beside(lclient, bystander, hostile, "code_execution", {"code": code("""
        open("started", "w").close()
        hog = []
        while True:
            hog.append(bytearray(8 << 20))
    """)}, 60, "memory bomb")
    assert res.rc != 0, res
    assert "out of memory" in res.stderr, res.stderr[-500:]
    recovers(lclient, hostile)
    # The daemon's own answer carries the usage block: oom_killed, and the interpreter restarts.
    c = SessiondClient(os.path.join(lstack.run_dir, "sessiond.sock"))
    try:
        reply, _ = c.call({"op": "exec", "session_id": hostile, "tool": "python",
                           "code": "x = bytearray(1 << 30)\n", "timeout_ms": 60000})
        assert reply["usage"]["oom_killed"] is True, reply
        assert reply["return_code"] != 0 and "out of memory" in reply["stderr"], reply
        reply, _ = c.call({"op": "exec", "session_id": hostile, "tool": "python",
                           "code": "print('again')\n", "timeout_ms": 60000})
        assert reply["stdout"] == "again\n" and reply["usage"]["oom_killed"] is False, reply
    finally:
        c.close()


def test_disk_filler_ends_in_enospc(lclient, bystander, hostile):
    res = beside(lclient, bystander, hostile, "code_execution", {"code": code("""
        import errno, os
        open("started", "w").close()
        out = []
        for d, name in (("/workspace", "fill"), ("/tmp", "fill"), ("/workspace", "many")):
            n = 0
            try:
                if name == "many":
                    os.unlink("/workspace/fill")
                    os.mkdir("/workspace/many")
                    while True:
                        with open(f"/workspace/many/{n}", "wb") as f:
                            f.write(b"x" * 65536)
                        n += 65536
                else:
                    with open(os.path.join(d, name), "wb") as f:
                        while True:
                            f.write(b"x" * (1 << 20))
                            f.flush()
                            n += 1 << 20
            except OSError as e:
                out.append(f"{d} {e.errno} {n}")
        print("\\n".join(out))
    """)}, 60, "disk filler")
    lines = res.stdout.split("\n")
    ws, tmp, many = (line.split() for line in lines[:3])
    # ENOSPC at the workspace's size (within what ext4 keeps), and at 32 MiB in /tmp
    assert ws[1] == "28" and (WS_MIB - 8) * MiB <= int(ws[2]) <= WS_MIB * MiB, ws
    assert tmp[1] == "28" and 28 * MiB <= int(tmp[2]) <= 32 * MiB, tmp
    assert many[1] == "28" and int(many[2]) <= WS_MIB * MiB, many
    r = lclient.run(hostile, "import shutil; shutil.rmtree('/workspace/many'); print('freed')")
    assert r.stdout == "freed\n"


def test_output_flood_is_capped(lclient, bystander, hostile):
    res = beside(lclient, bystander, hostile, "code_execution", {"code": code("""
        import sys
        open("started", "w").close()
        line = "y" * 1023 + "\\n"
        for _ in range(256 * 1024):
            sys.stdout.write(line)
    """)}, 60, "output flood")
    assert len(res.stdout.encode()) <= 64 * 1024 + 200, len(res.stdout)
    assert "truncated" in res.stdout[-200:], res.stdout[-200:]
    recovers(lclient, hostile)


def test_open_files_and_cpu_quota(lclient, hostile):
    r = lclient.run(hostile, code("""
        import os
        fds = []
        try:
            while True:
                fds.append(os.open("/dev/null", os.O_RDONLY))
        except OSError as e:
            print(e.errno, len(fds))
        for fd in fds:
            os.close(fd)
        del fds
    """))
    err, n = map(int, r.stdout.split())
    assert err == 24 and 200 < n < 256, r.stdout  # EMFILE below nofile_max
    # Two processes spinning for 1 s of wall time get about half a core in all.
    r = lclient.run(hostile, code("""
        import os, resource, time
        kids = []
        for _ in range(2):
            pid = os.fork()
            if pid == 0:
                end = time.monotonic() + 1.0
                while time.monotonic() < end:
                    pass
                os._exit(0)
            kids.append(pid)
        for k in kids:
            os.waitpid(k, 0)
        ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        print(ru.ru_utime + ru.ru_stime)
    """), timeout_seconds=30)
    cpu = float(r.stdout)
    assert cpu < 0.8, f"2 spinning processes got {cpu:.2f} CPU-s in 1 s under a 50% quota"


def test_a_workspace_of_many_files_holds_up_only_its_own_session(lclient, bystander, hostile):
    # After every call sessiond walks the workspace for the files it made: here 60,000
    # entries, about a hundred milliseconds of work, which must not stop the daemon.
    n = 60000
    r = lclient.run(hostile, code(f"""
        import os
        for d in range(60):
            os.makedirs(f"many/{{d}}", exist_ok=True)
            for k in range({n} // 60):
                open(f"many/{{d}}/f{{k}}", "w").close()
        print(sum(len(fs) for _, _, fs in os.walk("many")))
    """), timeout_seconds=120)
    assert r.stdout == f"{n}\n", r
    by, idle = bystander
    by_client = lclient.clone()
    calls = []

    def noisy():
        c = lclient.clone()
        for _ in range(6):
            t0 = time.monotonic()
            assert c.run(hostile, "pass").rc == 0
            calls.append(time.monotonic() - t0)

    t = threading.Thread(target=noisy)
    t.start()
    during = []
    while t.is_alive():
        t0 = time.monotonic()
        assert by_client.run(by, "print(1)").stdout == "1\n"
        during.append(time.monotonic() - t0)
    t.join()
    assert len(calls) == 6, calls
    med = statistics.median(during)
    print(f"many files: the session's own calls {statistics.median(calls) * 1000:.1f} ms; bystander "
          f"print(1) median {med * 1000:.1f} ms, max {max(during) * 1000:.1f} ms over "
          f"{len(during)} calls (idle {idle * 1000:.1f} ms)")
    assert len(during) >= 6, during
    assert med < 10 * idle, f"bystander median {med * 1000:.1f} ms vs idle {idle * 1000:.1f} ms"
    # Walked a slice at a time, the walk still finds what a call made, and only that.
    r = lclient.run(hostile, "open('many/30/new.txt', 'w').write('x')")
    assert [f["filename"] for f in r.files] == ["many/30/new.txt"], r.files
    listed = lclient.list_files(hostile)
    assert listed.status_code == 200 and listed.parsed["truncated"] is True, listed.text[:300]
    assert len(listed.parsed["files"]) == 10000  # list_max_entries
    # Destroyed while a call's walk is under way: the call is still answered, and the
    # daemon goes on (under the sanitizers, a use after free would end the run here).
    res = {}

    def last_call():
        res["r"] = lclient.clone().exec(hostile, "code_execution", {"code": "pass"})

    t = threading.Thread(target=last_call)
    t.start()
    time.sleep(0.03)
    assert lclient.destroy(hostile).status_code == 204
    t.join(30)
    assert res["r"].status_code == 200, f"{res['r'].status_code} {res['r'].text[:300]}"
    assert ps.check_exec_body(res["r"].parsed, "code_execution").files == []
    assert lclient.run(by, "print(1)").stdout == "1\n"


def test_long_calls_in_many_sessions_hold_up_no_other_session(lclient, lstack, bystander):
    # A call holds one of the worker's threads until sessiond answers it. A dozen sessions
    # each sleeping in a call must leave threads for everyone else: for another session's
    # print(1), and for a create.
    n = 12
    sids = [lclient.new_session() for _ in range(n)]
    woke = []

    def sleeper(sid):
        r = lclient.clone().run(sid, "import time; time.sleep(8); print('woke')", timeout_seconds=60)
        woke.append(r.stdout)

    threads = [threading.Thread(target=sleeper, args=(sid,)) for sid in sids]
    for t in threads:
        t.start()
    try:
        ps.wait_for(lambda: lstack.daemon_call({"op": "stats"})["running"] >= n, 6,
                    f"{n} calls running at once")
        by, idle = bystander
        t0 = time.monotonic()
        assert lclient.run(by, "print(1)").stdout == "1\n"
        took = time.monotonic() - t0
        t0 = time.monotonic()
        extra = lclient.new_session()
        took_create = time.monotonic() - t0
        print(f"with {n} calls asleep: print(1) {took * 1000:.1f} ms (idle {idle * 1000:.1f} ms), "
              f"create {took_create * 1000:.1f} ms")
        assert took < 2.0, f"print(1) beside {n} sleeping calls took {took:.2f} s"
        assert took_create < 5.0, f"a create beside {n} sleeping calls took {took_create:.2f} s"
        assert lclient.destroy(extra).status_code == 204
    finally:
        for t in threads:
            t.join(60)
    assert woke == ["woke\n"] * n, woke
    for sid in sids:
        assert lclient.destroy(sid).status_code == 204
