# SPDX-License-Identifier: MIT
"""Hostile programs (a flood of output, a fork bomb, a huge allocation) end with a
non-zero return code or a capped result, and never stop another session from answering."""

import re
import textwrap
import threading
import time

import paddock_stack as ps

MiB = 1024 * 1024
TRUNC_RE = re.compile(r"\n\[output truncated: (\d+) bytes omitted\]\n$")


def code(s):
    return textwrap.dedent(s).strip("\n") + "\n"


def run_beside(client, hostile_sid, tool, input, timeout_seconds):
    """Run input in hostile_sid on a thread; once it has started (it touches
    'started'), check that another session answers print(1) promptly."""
    result = {}

    def go():
        result["r"] = client.clone().exec(hostile_sid, tool, input, timeout_seconds=timeout_seconds)

    bystander = client.new_session()
    t = threading.Thread(target=go)
    t.start()
    try:
        ps.wait_for(lambda: client.get_file(hostile_sid, "started").status_code == 200 or
                    not t.is_alive(), 30, "the hostile program to start")
        t0 = time.monotonic()
        assert client.run(bystander, "print(1)").stdout == "1\n"
        took = time.monotonic() - t0
        assert took < 10, f"a bystander session took {took:.1f} s to answer print(1)"
    finally:
        t.join(timeout_seconds + 60)
    assert not t.is_alive(), "the hostile call never returned"
    client.destroy(bystander)
    r = result["r"]
    assert r.status_code == 200, f"{r.status_code} {r.text[:300]}"
    return ps.check_exec_body(r.parsed, tool)


def recovers(client, sid):
    r = client.run(sid, "print('recovered')", timeout_seconds=60)
    assert r.stdout == "recovered\n", r


def test_printing_a_gibibyte(client, sid):
    t0 = time.monotonic()
    res = run_beside(client, sid, "code_execution", {"code": code("""
        import sys
        open("started", "w").close()
        chunk = "x" * (1 << 20)
        for _ in range(1024):
            sys.stdout.write(chunk)
    """)}, timeout_seconds=120)
    # The program itself finished; what came back is the head and a note (OTARI: keep
    # the head, say how much was dropped), not a gibibyte.
    m = TRUNC_RE.search(res.stdout)
    assert m, res.stdout[-200:]
    head = len(res.stdout[:m.start()].encode())
    assert head <= MiB and head + int(m.group(1)) == 1024 * MiB, (head, m.group(1))
    assert res.rc in (0, 124), res.rc
    assert time.monotonic() - t0 < 120
    recovers(client, sid)


def test_fork_bomb(client, sid):
    res = run_beside(client, sid, "code_execution", {"code": code("""
        import os
        open("started", "w").close()
        while True:
            try:
                os.fork()
            except OSError:
                pass
    """)}, timeout_seconds=5)
    assert res.rc != 0, res
    recovers(client, sid)
    # The bomb's processes are dead at once. Their zombies go as init reaps them, which
    # an interpreter forked from the template does not wait for: on a slow host the first
    # look may still see some.
    count = code("""
        import os
        states = []
        for p in os.listdir('/proc'):
            try:
                states.append(open(f'/proc/{p}/stat').read().rsplit(')', 1)[1].split()[0])
            except (OSError, IndexError):
                pass
        print(len(states), sum(s != 'Z' for s in states), ''.join(sorted(states)))
    """)
    seen = []

    def few():
        total, live, states = client.run(sid, count).stdout.split()
        seen.append(states)
        assert int(live) < 20, f"{live} live processes in the sandbox after the bomb: {states}"
        return int(total) < 20

    try:
        ps.wait_for(few, 10, "the bomb's zombies to be reaped", interval=0.2)
    except AssertionError as e:
        raise AssertionError(f"{e}; process states seen last: {seen[-3:]}") from None


def test_bash_fork_bomb(client, sid):
    res = run_beside(client, sid, "bash_code_execution",
                     {"command": "touch started; b() { b | b & }; b; sleep 30"}, timeout_seconds=5)
    assert res.rc != 0, res
    r = client.bash(sid, "echo alive", timeout_seconds=60)
    assert r.stdout == "alive\n", r


def test_ten_gibibyte_allocation(client, sid):
    res = run_beside(client, sid, "code_execution", {"code": code("""
        open("started", "w").close()
        block = bytearray(10 * 1024 ** 3)
        print("allocated")
    """)}, timeout_seconds=60)
    assert res.rc != 0, res
    assert "allocated" not in res.stdout
    recovers(client, sid)


def test_gradual_allocation_past_the_memory_limit(client, sid):
    res = run_beside(client, sid, "code_execution", {"code": code("""
        open("started", "w").close()
        hog = []
        for _ in range(10 * 1024):
            hog.append(b"m" * (1 << 20))   # touched, 1 MiB at a time, up to 10 GiB
        print("survived")
    """)}, timeout_seconds=60)
    assert res.rc != 0, res
    assert "survived" not in res.stdout
    recovers(client, sid)


def test_many_open_files_and_threads(client, sid):
    res = client.run(sid, code("""
        import threading, time
        fds, threads = [], []
        try:
            while True:
                fds.append(open("/dev/null"))
        except OSError as e:
            print("files stop:", e.errno)
        try:
            for _ in range(100000):
                t = threading.Thread(target=time.sleep, args=(2,))
                t.start()
                threads.append(t)
        except RuntimeError:
            print("threads stop")
    """), timeout_seconds=30)
    assert "files stop: 24" in res.stdout, res  # EMFILE: nofile_max applies
    assert "threads stop" in res.stdout, res  # pids_max applies
    recovers(client, sid)
