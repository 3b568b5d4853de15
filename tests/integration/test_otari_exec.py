# SPDX-License-Identifier: MIT
"""Execute: the envelope, state across calls, output, failures, timeouts, busy
sessions, the output cap, tool_use_id, and the list of produced files."""

import re
import textwrap
import threading
import time

import paddock_stack as ps

TOOLUSE_RE = re.compile(r"^srvtoolu_[0-9a-f]{24}$")
TRUNC_RE = re.compile(r"\n\[output truncated: (\d+) bytes omitted\]\n$")
CAP = 1024 * 1024  # output_max_bytes default
GRACE = 2.0  # interrupt_grace_ms default, in seconds
TIMEOUT_NOTE = "execution timed out after {}s; interpreter restarted, state was lost"


def code(s):
    return textwrap.dedent(s).strip("\n") + "\n"


# --- envelope ------------------------------------------------------------------------

def test_envelope_of_each_tool(client, sid):
    r = client.run(sid, "print('hi')")
    assert (r.stdout, r.stderr, r.rc, r.files) == ("hi\n", "", 0, [])
    b = client.bash(sid, "echo hi")
    assert (b.stdout, b.stderr, b.rc) == ("hi\n", "", 0)
    e = client.edit(sid, command="create", path="e.txt", file_text="x\n")
    assert e.rc == 0


def test_a_run_with_no_output_still_has_a_full_content_object(client, sid):
    r = client.run(sid, "x = 1")
    assert (r.stdout, r.stderr, r.rc, r.files) == ("", "", 0, [])


def test_cwd_is_the_workspace(client, sid):
    assert client.run(sid, "import os; print(os.getcwd())").stdout == "/workspace\n"
    assert client.bash(sid, "pwd").stdout == "/workspace\n"


# --- state ---------------------------------------------------------------------------

def test_python_state_persists(client, sid):
    client.run(sid, code("""
        import json, collections
        counter = collections.Counter('hello')
        def double(v):
            return 2 * v
        x = 41
    """))
    r = client.run(sid, "print(double(x) - x + 1, json.dumps(counter['l']))")
    assert r.stdout == "42 2\n", r


def test_bash_cd_export_and_functions_persist(client, sid):
    client.bash(sid, "mkdir -p sub/dir && cd sub/dir && export FOO=bar && greet() { echo hi $1; }")
    r = client.bash(sid, "pwd; echo $FOO; greet you")
    assert r.stdout == "/workspace/sub/dir\nbar\nhi you\n", r
    client.bash(sid, "cd /tmp")
    assert client.bash(sid, "pwd").stdout == "/tmp\n"


def test_python_and_bash_share_the_workspace(client, sid):
    client.bash(sid, "printf 'from bash' > shared.txt")
    assert client.run(sid, "print(open('shared.txt').read())").stdout == "from bash\n"


# --- output --------------------------------------------------------------------------

def test_stdout_and_stderr_are_verbatim(client, sid):
    r = client.run(sid, code(r"""
        import sys
        sys.stdout.write("a\n\n  b  \n\n")
        sys.stderr.write("warn: x\r\n")
        sys.stdout.write("tail without newline")
    """))
    assert r.stdout == "a\n\n  b  \n\ntail without newline", repr(r.stdout)
    assert r.stderr == "warn: x\r\n", repr(r.stderr)
    assert r.rc == 0


def test_unicode_and_nul_in_output(client, sid):
    r = client.run(sid, "print('héllo ✓ 日本'); print('a\\0b')")
    assert r.stdout == "héllo ✓ 日本\na\x00b\n", repr(r.stdout)


def test_invalid_utf8_output_still_gives_json(client, sid):
    r = client.run(sid, "import sys; sys.stdout.buffer.write(b'\\xff\\xfe ok\\n'); sys.stdout.flush()")
    assert r.rc == 0 and r.stdout.endswith(" ok\n"), repr(r.stdout)


def test_bash_stderr_and_exit_codes(client, sid):
    r = client.bash(sid, "echo out; echo err >&2; (exit 7)")
    assert (r.stdout, r.stderr, r.rc) == ("out\n", "err\n", 7), r
    assert client.bash(sid, "false").rc == 1
    assert client.bash(sid, "true").rc == 0


def test_bash_exit_does_not_break_the_session(client, sid):
    r = client.bash(sid, "exit 3")
    assert r.rc == 3, r
    assert client.bash(sid, "echo alive").stdout == "alive\n"


def test_subprocess_output_is_captured(client, sid):
    r = client.run(sid, code("""
        import os, subprocess
        print("py", flush=True)
        os.system("echo from-system")
        subprocess.run(["sh", "-c", "echo sub-out; echo sub-err >&2"])
        subprocess.run("echo from-shell", shell=True)
    """))
    assert r.stdout == "py\nfrom-system\nsub-out\nfrom-shell\n", repr(r.stdout)
    assert r.stderr == "sub-err\n", repr(r.stderr)


# --- failures ------------------------------------------------------------------------

def user_frames_only(stderr):
    files = re.findall(r'File "([^"]+)"', stderr)
    bad = [f for f in files if "harness" in f or f.startswith("/opt/paddock") or "paddock" in f]
    assert not bad, f"harness frames in the traceback: {bad}\n{stderr}"
    return files


def test_exception_gives_rc_1_and_a_clean_traceback(client, sid):
    r = client.run(sid, code("""
        before = 'set'
        def inner():
            raise ValueError("boom")
        def outer():
            inner()
        outer()
    """))
    assert r.rc == 1, r
    assert r.stderr.startswith("Traceback (most recent call last):\n"), r.stderr
    assert r.stderr.rstrip("\n").endswith("ValueError: boom"), r.stderr
    assert "in outer" in r.stderr and "in inner" in r.stderr
    assert len(user_frames_only(r.stderr)) == 3, r.stderr
    # The interpreter survives and kept what ran before the raise.
    assert client.run(sid, "print(before)").stdout == "set\n"


def test_syntax_error_gives_rc_1(client, sid):
    r = client.run(sid, "def broken(:\n    pass\n")
    assert r.rc == 1 and "SyntaxError" in r.stderr, r
    user_frames_only(r.stderr)
    assert client.run(sid, "print('fine')").stdout == "fine\n"


def test_sys_exit_sets_the_return_code_and_the_interpreter_survives(client, sid):
    r = client.run(sid, "kept = 'yes'\nprint('bye')\nimport sys; sys.exit(3)")
    assert (r.rc, r.stdout) == (3, "bye\n"), r
    assert "Traceback" not in r.stderr, r.stderr
    assert client.run(sid, "import sys; sys.exit(0)").rc == 0
    assert client.run(sid, "raise SystemExit").rc == 0
    r = client.run(sid, "import sys; sys.exit('fatal: reason')")
    assert r.rc == 1 and "fatal: reason" in r.stderr, r
    assert client.run(sid, "print(kept)").stdout == "yes\n"


def test_interpreter_killed_by_its_own_code_comes_back(client, sid):
    r = client.run(sid, "import os; os._exit(5)")
    assert r.rc != 0, r
    assert client.run(sid, "print('back')").stdout == "back\n"
    r = client.run(sid, "import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    assert r.rc != 0, r
    assert client.run(sid, "print('back again')").stdout == "back again\n"


# --- tool_use_id and timing ----------------------------------------------------------

def test_tool_use_id_is_echoed(client, sid):
    for tool, inp in (("code_execution", {"code": "1"}), ("bash_code_execution", {"command": "true"}),
                      ("text_editor_code_execution", {"command": "view", "path": "."})):
        r = client.exec_ok(sid, tool, inp, tool_use_id="toolu_01ABCdef-xyz")
        assert r.tool_use_id == "toolu_01ABCdef-xyz"
        assert r.body["result_block"]["tool_use_id"] == "toolu_01ABCdef-xyz"


def test_tool_use_id_is_generated_when_absent_or_null(client, sid):
    seen = set()
    for fields in ({}, {"tool_use_id": None}, {}):
        r = client.run(sid, "1", **fields)
        assert TOOLUSE_RE.match(r.tool_use_id), r.tool_use_id
        seen.add(r.tool_use_id)
    assert len(seen) == 3


def test_execution_time_ms(client, sid):
    r = client.run(sid, "import time; time.sleep(0.3)")
    assert 300 <= r.time_ms < 10000, r.time_ms
    assert client.run(sid, "1").time_ms < 5000


# --- timeouts ------------------------------------------------------------------------

def test_timeout_interrupts_keeps_partial_output_and_state(client, sid):
    t0 = time.monotonic()
    r = client.run(sid, code("""
        import sys, time
        x = 5
        print("partial")
        sys.stderr.write("err-partial\\n")
        time.sleep(60)
        x = 6
    """), timeout_seconds=1)
    elapsed = time.monotonic() - t0
    assert r.rc == 124, r
    assert r.stdout.startswith("partial\n"), repr(r.stdout)
    assert "err-partial\n" in r.stderr, repr(r.stderr)
    assert elapsed < 1 + GRACE + 5, elapsed
    # Interrupted, not restarted: the state is still there.
    assert client.run(sid, "print(x)").stdout == "5\n"


def test_busy_loop_is_interrupted(client, sid):
    client.run(sid, "keep = 'me'")
    r = client.run(sid, "while True:\n    pass\n", timeout_seconds=1)
    assert r.rc == 124, r
    assert client.run(sid, "print(keep)").stdout == "me\n"


def test_code_ignoring_sigint_is_killed_and_the_interpreter_restarted(client, sid):
    client.run(sid, "lost = 'soon'")
    t0 = time.monotonic()
    r = client.run(sid, code("""
        import signal
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        print("stubborn", flush=True)
        while True:
            pass
    """), timeout_seconds=1)
    elapsed = time.monotonic() - t0
    assert r.rc == 124, r
    assert TIMEOUT_NOTE.format(1) in r.stderr, repr(r.stderr)
    assert r.stdout.startswith("stubborn\n"), repr(r.stdout)
    assert elapsed < 1 + GRACE + 5, elapsed
    after = client.run(sid, "print(lost)")
    assert after.rc == 1 and "NameError" in after.stderr, after
    assert client.run(sid, "print('fresh')").stdout == "fresh\n"


def test_bash_timeout(client, sid):
    client.bash(sid, "export KEEP=1")
    r = client.bash(sid, "echo started; sleep 60; echo never", timeout_seconds=1)
    assert r.rc == 124, r
    assert r.stdout.startswith("started\n") and "never" not in r.stdout, r
    assert client.bash(sid, "echo ok").stdout == "ok\n"


def test_timeout_kills_detached_grandchildren(client, sid):
    r = client.run(sid, code("""
        import subprocess, time
        # setsid, then a second fork: the grandchild has its own session and no parent
        # but init; it keeps the run's stdout open.
        subprocess.run(["setsid", "sh", "-c",
                        "sh -c 'echo $$ > gc.pid; sleep 3; echo late > late.txt' &"])
        for _ in range(500):
            try:
                if open("gc.pid").read().strip():
                    break
            except FileNotFoundError:
                pass
            time.sleep(0.01)
        time.sleep(60)
    """), timeout_seconds=1)
    assert r.rc == 124, r
    r = client.run(sid, code("""
        import os, time
        pid = int(open("gc.pid").read())
        try:
            os.kill(pid, 0)
            print("alive", pid)
        except ProcessLookupError:
            print("gone")
        time.sleep(3.5)  # past the moment the grandchild would have written late.txt
        print(os.path.exists("late.txt"))
    """), timeout_seconds=30)
    assert r.stdout == "gone\nFalse\n", r


def test_children_killed_after_an_interrupt_do_not_stay_zombies(client, sid):
    # The interrupt keeps the interpreter; the children ignore SIGINT, so sessiond kills
    # them after the reply. They are the interpreter's children: unless it waits for
    # them, each stays a zombie holding a pid of the session's limit.
    r = client.run(sid, code("""
        import os, signal, time
        kept = "state"
        for _ in range(8):
            if os.fork() == 0:
                signal.signal(signal.SIGINT, signal.SIG_IGN)
                time.sleep(600)
                os._exit(0)
        time.sleep(600)
    """), timeout_seconds=1)
    assert r.rc == 124 and "state was kept" in r.stderr, r
    r = client.run(sid, code("""
        import os
        print(kept)
        states = [open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[0]
                  for p in os.listdir("/proc") if p.isdigit()]
        print(states.count("Z"), len(states))
    """))
    assert r.rc == 0, r
    kept, counts = r.stdout.split("\n")[:2]
    zombies, total = map(int, counts.split())
    assert kept == "state" and zombies == 0, r.stdout
    assert total <= 3, f"{total} processes left: init, the interpreter and no more expected"


def test_background_child_holding_stdout_does_not_block_the_call(client, sid):
    t0 = time.monotonic()
    r = client.run(sid, "import subprocess\nsubprocess.Popen(['sleep', '30'])\nprint('done')",
                   timeout_seconds=20)
    assert r.rc == 0 and r.stdout == "done\n", r
    assert time.monotonic() - t0 < 10, "the call waited for a background child's stdout"
    t0 = time.monotonic()
    b = client.bash(sid, "sleep 30 & echo bg", timeout_seconds=20)
    assert b.rc == 0 and b.stdout == "bg\n", b
    assert time.monotonic() - t0 < 10, "the bash call waited for a background job"


def test_timeout_above_the_maximum_is_422_naming_it(client, sid):
    r = client.exec(sid, "code_execution", {"code": "print(1)"}, timeout_seconds=901)
    assert r.status_code == 422, r.text
    assert "900" in r.parsed["detail"], r.parsed
    r = client.exec(sid, "code_execution", {"code": "print(1)"}, timeout_seconds=900)
    assert r.status_code == 200


# --- one call at a time per session ---------------------------------------------------

def test_concurrent_exec_on_one_session_is_409(client, sid):
    results = {}

    def slow():
        results["a"] = client.clone().exec(sid, "code_execution", {
            "code": "import time\nopen('started', 'w').close()\ntime.sleep(3)\nprint('slow done')"},
            timeout_seconds=30)

    t = threading.Thread(target=slow)
    t.start()
    try:
        ps.wait_for(lambda: client.get_file(sid, "started").status_code == 200, 20,
                    "the first call to start")
        for tool, inp in (("code_execution", {"code": "print('second')"}),
                          ("bash_code_execution", {"command": "echo second"}),
                          ("text_editor_code_execution", {"command": "view", "path": "started"})):
            r = client.exec(sid, tool, inp)
            if tool == "text_editor_code_execution" and r.status_code == 200:
                continue  # the editor does not run in the interpreter; allowed either way
            assert r.status_code == 409, f"{tool}: {r.status_code} {r.text[:200]}"
            detail = r.parsed["detail"].lower()
            assert "busy" in detail or "another call" in detail or "running" in detail, r.parsed
    finally:
        t.join(60)
    a = results["a"]
    assert a.status_code == 200
    assert ps.check_exec_body(a.parsed, "code_execution").stdout == "slow done\n"
    assert client.run(sid, "print('after')").stdout == "after\n"


def test_other_sessions_are_served_while_one_is_busy(client):
    a, b = client.new_session(), client.new_session()
    results = {}
    t = threading.Thread(target=lambda: results.setdefault("a", client.clone().run(
        a, "import time\nopen('started', 'w').close()\ntime.sleep(4)")))
    t.start()
    try:
        ps.wait_for(lambda: client.get_file(a, "started").status_code == 200, 20, "the slow call")
        t0 = time.monotonic()
        assert client.run(b, "print(1)").stdout == "1\n"
        assert time.monotonic() - t0 < 3, "a busy session held up another one"
    finally:
        t.join(60)
    assert results["a"].rc == 0
    for s in (a, b):
        client.destroy(s)


# --- output cap ------------------------------------------------------------------------

def check_truncated(text, produced):
    m = TRUNC_RE.search(text)
    assert m, f"no truncation note at the end of {text[-200:]!r}"
    head = text[:m.start()]
    omitted = int(m.group(1))
    assert len(head.encode()) <= CAP, len(head.encode())
    assert len(head.encode()) + omitted == produced, (len(head.encode()), omitted, produced)
    return head


def test_output_cap_keeps_the_head_and_says_how_much_was_dropped(client, sid):
    r = client.run(sid, code("""
        import sys
        sys.stdout.write("S" + "x" * (3 * 1024 * 1024 - 1))
        sys.stderr.write("E" + "y" * (2 * 1024 * 1024 - 1))
    """))
    assert r.rc == 0
    head = check_truncated(r.stdout, 3 * 1024 * 1024)
    assert head.startswith("Sxxx") and set(head[1:]) == {"x"} and len(head) >= CAP // 2
    head = check_truncated(r.stderr, 2 * 1024 * 1024)
    assert head.startswith("Eyyy") and set(head[1:]) == {"y"}


def test_output_under_the_cap_is_not_truncated(client, sid):
    r = client.run(sid, "print('z' * (1024 * 1024 - 1), end='')\nprint()")
    assert r.stdout == "z" * (CAP - 1) + "\n", len(r.stdout)


def test_output_cap_never_splits_utf8_into_invalid_json(client, sid):
    r = client.run(sid, "print('é' * 1_000_000)")  # 2 MB of 2-byte characters
    m = TRUNC_RE.search(r.stdout)
    assert m, r.stdout[-200:]
    assert set(r.stdout[:m.start()]) <= {"é", "\ufffd"}, "unexpected characters in the head"


# --- produced files ---------------------------------------------------------------------

def files_by_name(result):
    out = {f["filename"]: f["file_id"] for f in result.files}
    assert len(out) == len(result.files), f"a file listed twice: {result.files}"
    return out


def test_produced_files_are_listed_and_fetchable_by_file_id(client, sid):
    r = client.run(sid, code("""
        import os
        os.makedirs("out/deep", exist_ok=True)
        open("out/deep/chart.csv", "w").write("a,b\\n1,2\\n")
        open("top.bin", "wb").write(bytes(range(256)))
        open("/tmp/not-in-workspace.txt", "w").write("x")
    """))
    names = files_by_name(r)
    assert set(names) == {"out/deep/chart.csv", "top.bin"}, r.files
    g = client.get_file(sid, file_id=names["out/deep/chart.csv"])
    assert g.status_code == 200 and g.content == b"a,b\n1,2\n"
    assert client.get_file(sid, file_id=names["top.bin"]).content == bytes(range(256))

    # A later call lists only what it changed, and a changed file keeps its id.
    r2 = client.run(sid, "open('top.bin', 'ab').write(b'more')\nopen('new.txt', 'w').write('n')")
    names2 = files_by_name(r2)
    assert set(names2) == {"top.bin", "new.txt"}, r2.files
    assert names2["top.bin"] == names["top.bin"], "file_id of top.bin changed"
    assert client.get_file(sid, file_id=names2["top.bin"]).content == bytes(range(256)) + b"more"
    assert client.run(sid, "x = 1").files == []


def test_files_written_by_bash_and_the_editor_are_listed(client, sid):
    b = client.bash(sid, "echo hi > from_bash.txt")
    assert [f["filename"] for f in b.files] == ["from_bash.txt"], b.files
    assert client.get_file(sid, file_id=b.files[0]["file_id"]).content == b"hi\n"


def test_produced_file_list_is_capped(client, sid):
    r = client.run(sid, "for i in range(150):\n    open(f'f{i:03}.txt', 'w').write(str(i))")
    assert 1 <= len(r.files) <= 100, len(r.files)
    f = r.files[0]
    got = client.get_file(sid, file_id=f["file_id"])
    assert got.status_code == 200 and got.content == str(int(f["filename"][1:4])).encode()


def test_calls_at_once_in_a_large_workspace_list_every_file_they_made(client, sid):
    """Editor calls on one session may walk the workspace at the same time (a walk of many
    files takes several turns of the daemon's loop): each walk reads the directories for
    itself, and every file the calls made is listed, and nothing else. (Which reply lists
    it is a race: a walk that runs after another call's write sees that file too, and the
    session reports a version of a file once.) The files are in the root, whose descriptor
    the walks of a session's calls would otherwise share."""
    client.run(sid, "for i in range(3000):\n    open(f'bulk-{i:04}.txt', 'w').write('x')")
    names = [f"made-{k}.txt" for k in range(6)]
    results = {}

    def create(name):
        results[name] = client.clone().edit(sid, command="create", path=name, file_text=name)

    for _ in range(3):
        threads = [threading.Thread(target=create, args=(n,)) for n in names]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        listed = set()
        for n in names:
            got = files_by_name(results[n])
            assert set(got) <= set(names), (n, results[n].files)
            listed |= set(got)
        assert listed == set(names), {n: results[n].files for n in names}
        names = [n.replace(".txt", "x.txt") for n in names]


def test_unknown_file_id_is_404(client, sid):
    assert client.get_file(sid, file_id="no-such-file-id").status_code == 404
