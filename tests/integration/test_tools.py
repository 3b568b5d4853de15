# SPDX-License-Identifier: MIT
"""Programmatic tool calls through the real stack: registration, calls from Python (native
and kernel tier) and bash reaching a callback server on loopback that records them, errors
as ToolError, the limits, a stuck callback that holds nothing else, deadlines, a restart;
and the claims: the token is nowhere in the sandbox, the sandbox cannot reach the callback
server itself, and only allowed URLs are called."""

import http.server
import json
import os
import re
import secrets
import statistics
import subprocess
import threading
import time

import pytest

import paddock_stack as ps

HAS_IPYTHON = subprocess.run(["/usr/bin/python3", "-c", "import IPython"],
                             capture_output=True).returncode == 0


class Callback:
    """A tool server on loopback: records every request, answers by tool name."""

    def __init__(self):
        self.calls = []
        self.lock = threading.Lock()
        cb = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length", 0))
                raw = self.rfile.read(n)
                with cb.lock:
                    cb.calls.append({"path": self.path, "headers": dict(self.headers),
                                     "body": json.loads(raw), "raw": raw})
                status, payload = cb.answer(json.loads(raw))
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                with cb.lock:
                    cb.calls.append({"path": self.path, "get": True})
                self.send_response(204)
                self.end_headers()

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def answer(self, body):
        name, inp = body["name"], body["input"]
        if name == "fail":
            return 200, {"content": "the mailbox is locked", "is_error": True}
        if name == "broken":
            return 500, {"detail": "boom"}
        if name == "garbage":
            return 200, b"not json at all"
        if name == "latin1":
            return 200, b'{"content": "caf\xe9"}'
        if name == "big":
            return 200, {"content": "x" * inp.get("n", 10)}
        if name == "slow":
            time.sleep(inp.get("s", 5))
            return 200, {"content": "late"}
        return 200, {"content": {"name": name, "input": inp}}

    def recorded(self):
        with self.lock:
            return list(self.calls)


@pytest.fixture(scope="module")
def cb():
    c = Callback()
    yield c
    c.server.shutdown()


@pytest.fixture(scope="module")
def tstack(stacks, cb):
    return stacks.get("tools", {
        "PADDOCK_TOOL_CALLBACK_ALLOW": f"http://127.0.0.1:{cb.port}/tools",
        "PADDOCK_TOOL_CALLS_PER_RUN": "5",
        "PADDOCK_TOOL_REPLY_MAX_BYTES": "64K",
    })


@pytest.fixture(scope="module")
def tc(tstack):
    return ps.Client(tstack)


@pytest.fixture
def tsid(tc):
    s = tc.new_session()
    yield s
    tc.destroy(s)


TOOLS = [{"name": n, "doc": f"The {n} tool."}
         for n in ("gmail_list_emails", "fail", "broken", "garbage", "big", "slow", "latin1",
                   "_private")]


def register(c, sid, token=None, tools=TOOLS, timeout=5, url=None, **extra):
    body = {"callback_url": url or f"http://127.0.0.1:{c.stack.tool_port}/tools/call",
            "token": token or "tok-" + secrets.token_hex(16), "tools": tools,
            "timeout_seconds": timeout, **extra}
    r = c.request("POST", f"/sessions/{sid}/programmatic-tools/register", json=body,
                  check=False)
    return r, body["token"]


@pytest.fixture(autouse=True)
def _port(tstack, cb):
    tstack.tool_port = cb.port


def registered(c, sid, **kw):
    r, token = register(c, sid, **kw)
    assert r.status_code == 200, r.text
    assert r.json() == {"stub_path": "/opt/paddock/_platform_tools.py",
                        "tool_count": len(kw.get("tools", TOOLS))}, r.json()
    return token


# --- registration -----------------------------------------------------------------------

def test_without_an_allow_list_the_route_is_403(client, sid):
    client.stack.tool_port = 1
    r, _ = register(client, sid)
    assert r.status_code == 403 and "tool_callback_allow" in r.json()["detail"], r.text


@pytest.mark.parametrize("tools,why", [
    ([{"name": "1st"}], "identifier"), ([{"name": "class"}], "keyword"),
    ([{"name": "a"}, {"name": "a"}], "twice"), ([{"name": "__init__"}], "identifier"),
    ([{"name": "ToolError"}], "identifier"), ([{"name": "a-b"}], "identifier"),
    ([], "1 to"), ([{"name": 5}], "identifier"), ([{"name": "x", "doc": 3}], "doc"),
])
def test_bad_tool_names_are_422_and_change_nothing(tc, tsid, tools, why):
    r, _ = register(tc, tsid, tools=tools)
    assert r.status_code == 422 and why in r.json()["detail"], r.text
    out = tc.bash(tsid, "paddock-tool gmail_list_emails; echo rc=$?")
    assert "no programmatic tools are registered" in out.stderr and "rc=2" in out.stdout


def test_urls_outside_the_allow_list_are_refused(tc, tsid, cb):
    p = cb.port
    for url in (f"http://127.0.0.1:{p}/other", f"http://127.0.0.1:{p}/toolsx",
                f"http://127.0.0.1:{p}/tools/../admin", f"http://127.0.0.1:{p}0/tools",
                f"http://127.0.0.1:{p}@127.0.0.2:{p}/tools", f"https://127.0.0.1:{p}/tools",
                f"http://localhost:{p}/tools", f"file:///etc/passwd", "gopher://x/tools",
                f"http://127.0.0.1:{p}/tools/%2e%2e/admin", f"http://127.0.0.1:{p}/tools/..%2Fadmin",
                f"http://127.0.0.1:{p}/tools\\..\\admin"):
        r, _ = register(tc, tsid, url=url)
        assert r.status_code in (403, 422), (url, r.status_code, r.text)
    r, _ = register(tc, tsid, token="a\r\nX-Evil: 1")
    assert r.status_code == 422 and "token" in r.json()["detail"]
    r, _ = register(tc, tsid, timeout=0)
    assert r.status_code == 422
    r = tc.request("POST", "/sessions/vm-nosuch/programmatic-tools/register",
                   json={"callback_url": "x", "token": "t", "tools": []}, check=False)
    assert r.status_code == 404
    assert cb.recorded() == [] or all(c["path"].startswith("/tools") for c in cb.recorded())


# --- calls ------------------------------------------------------------------------------

CALL = """
from _platform_tools import gmail_list_emails, ToolError
r = gmail_list_emails(query="from:alice", limit=3, ratio=0.5, tags=["a", "é"])
print(repr(r))
"""


def test_a_python_call_reaches_the_callback_with_the_token(tc, tsid, cb):
    token = registered(tc, tsid)
    before = len(cb.recorded())
    r = tc.exec_ok(tsid, "code_execution", {"code": CALL})
    want = {"name": "gmail_list_emails",
            "input": {"query": "from:alice", "limit": 3, "ratio": 0.5, "tags": ["a", "é"]}}
    assert r.stdout == repr(want) + "\n", r
    got = cb.recorded()[before:]
    assert len(got) == 1, got
    call = got[0]
    assert call["path"] == "/tools/call" and call["headers"]["Authorization"] == f"Bearer {token}"
    assert re.fullmatch(r"ptc_[0-9a-f]{32}", call["body"]["call_id"]), call
    assert {k: call["body"][k] for k in ("name", "input")} == want
    assert "tool call" in tc.stack.logs() and call["body"]["call_id"] in tc.stack.logs()
    # The module documents its tools.
    r = tc.exec_ok(tsid, "code_execution", {"code": "import _platform_tools as t\n"
                                            "print(t.gmail_list_emails.__doc__)\n"
                                            "print('slow' in dir(t))"})
    assert r.stdout == "The gmail_list_emails tool.\nTrue\n"


def test_a_nan_in_a_call_s_input_reaches_the_callback_as_null(tc, tsid, cb):
    registered(tc, tsid)
    before = len(cb.recorded())
    # The harness refuses NaN in a call; code that writes the call itself need not.
    code = ("import os, time\n"
            "os.write(63, b'{\"event\":\"tool_call\",\"name\":\"gmail_list_emails\",'\n"
            "         b'\"input\":{\"query\":\"q\",\"limit\":NaN,\"ratio\":-Infinity}}\\n')\n"
            "time.sleep(1)")
    r = tc.exec_ok(tsid, "code_execution", {"code": code})
    got = cb.recorded()[before:]
    assert len(got) == 1, (got, r)
    assert ps.strict_json(got[0]["raw"])["input"] == {"query": "q", "limit": None, "ratio": None}
    assert tc.exec_ok(tsid, "code_execution", {"code": "print('next')"}).stdout == "next\n"


FAILURES = """
from _platform_tools import fail, broken, garbage, big, slow, ToolError
for f, kw in ((fail, {}), (broken, {}), (garbage, {}), (big, {"n": 200000}), (slow, {"s": 4})):
    try:
        f(**kw)
        print(f.__name__, "returned")
    except ToolError as e:
        print(f.__name__, "ToolError:", e)
try:
    fail("positional")
except TypeError as e:
    print("TypeError:", e)
"""


def test_tool_errors_and_failed_calls_raise_tool_error(tc, tsid):
    registered(tc, tsid, timeout=1)
    t0 = time.monotonic()
    out = tc.exec_ok(tsid, "code_execution", {"code": FAILURES}).stdout.splitlines()
    assert out[0] == "fail ToolError: the mailbox is locked", out
    assert out[1] == "broken ToolError: the tool callback answered HTTP 500", out
    assert out[2] == "garbage ToolError: the tool callback's answer is not a JSON object", out
    assert out[3].startswith("big ToolError: the tool call failed: the answer is larger"), out
    assert out[4] == "slow ToolError: the tool call failed: the callback did not answer in time"
    assert out[5].startswith("TypeError: fail() takes keyword arguments only"), out
    # The slow tool was given up after the registration's second, not its four.
    assert time.monotonic() - t0 < 3.5


def test_calls_per_run_are_bounded(tc, tsid):
    registered(tc, tsid)
    code = ("from _platform_tools import gmail_list_emails as g, ToolError\n"
            "n = 0\ntry:\n    for _ in range(10):\n        g(); n += 1\n"
            "except ToolError as e:\n    print(n, e)\n")
    r = tc.exec_ok(tsid, "code_execution", {"code": code})
    assert r.stdout == "5 this call has made 5 tool calls, the most one call may make\n", r
    # The count is per call: the next one may make five again.
    assert tc.exec_ok(tsid, "code_execution", {"code": code}).stdout.startswith("5 ")


def test_bash_calls_with_paddock_tool(tc, tsid):
    registered(tc, tsid)
    r = tc.bash(tsid, "paddock-tool gmail_list_emails '{\"q\": 1}'; echo rc=$?;"
                      " paddock-tool fail; echo rc=$?; bash -c 'paddock-tool gmail_list_emails';"
                      " paddock-tool 'bad name'; echo rc=$?")
    lines = r.stdout.splitlines()
    assert json.loads(lines[0]) == {"name": "gmail_list_emails", "input": {"q": 1}}, r
    assert lines[1:3] == ["rc=0", "rc=1"], r
    assert json.loads(lines[3])["input"] == {}, r
    assert lines[4] == "rc=2" and "usage: paddock-tool" in r.stderr, r
    assert 'paddock-tool: "the mailbox is locked"' in r.stderr, r
    # Its state is the shell's as before.
    assert tc.bash(tsid, "cd /tmp; x=5").rc == 0
    assert tc.bash(tsid, "echo $PWD $x").stdout == "/tmp 5\n"


@pytest.mark.skipif(not HAS_IPYTHON, reason="IPython is not installed: no kernel tier")
def test_the_kernel_tier_calls_too(tc, tstack):
    r = tc.request("POST", "/v2/code/sessions", json={}, check=False)
    sid = r.json()["data"]["session_id"]
    try:
        registered(tc, sid)
        r = tc.request("POST", "/v2/code/execute", json={
            "language": "python", "session_id": sid,
            "code": "from _platform_tools import gmail_list_emails\n"
                    "gmail_list_emails(q='k')['input']"}, check=False)
        data = r.json()["data"]
        assert data["status"] == "ok", data
        assert data["outputs"][-1]["data"]["text/plain"] == "{'q': 'k'}", data
    finally:
        tc.request("DELETE", f"/v2/code/sessions/{sid}", check=False)


# --- the claims -------------------------------------------------------------------------

def sandbox_pids(stack, sid):
    name = stack.sandbox_name(sid)
    return [int(p.split()[0]) for p in ps.processes_in_cgroups_matching([name])]


def memory_holds(pid, needle):
    """Whether needle is in any readable mapping of pid (read as root from the host)."""
    try:
        with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
            for line in maps:
                lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
                if "r" not in line.split()[1] or hi - lo > 1 << 30:
                    continue
                try:
                    mem.seek(lo)
                    if needle in mem.read(hi - lo):
                        return True
                except (OSError, ValueError, OverflowError):
                    continue
    except OSError:
        return False
    return False


def test_the_token_is_nowhere_in_the_sandbox(tc, tsid, cb):
    token = registered(tc, tsid)
    # Calls from both tiers of the session, so every process that took part is there.
    tc.exec_ok(tsid, "code_execution", {"code": CALL})
    tc.bash(tsid, "paddock-tool gmail_list_emails >/dev/null; sleep 30 & disown")
    # Everything is searched from the host: a search from inside would carry the token in.
    pids = sandbox_pids(tc.stack, tsid)
    assert len(pids) >= 3, pids  # init, python, bash (and the sleep)
    needle = token.encode()
    # The sandbox's files, through its processes' root: the workspace, /tmp, the lib dir.
    root, seen = f"/proc/{pids[0]}/root", 0
    for top in ("workspace", "tmp", "opt/paddock"):
        for dirpath, _dirs, files in os.walk(os.path.join(root, top)):
            for f in files:
                try:
                    with open(os.path.join(dirpath, f), "rb") as fh:
                        assert needle not in fh.read(), os.path.join(dirpath, f)
                    seen += 1
                except OSError:
                    pass
    assert seen >= 5, f"only {seen} files of the sandbox were read"
    for pid in pids:
        for f in ("environ", "cmdline"):
            with open(f"/proc/{pid}/{f}", "rb") as fh:
                assert needle not in fh.read(), (pid, f)
        assert not memory_holds(pid, needle), f"the token is in the memory of {pid}"
    # The check can fail: the daemon holds it, and is found holding it.
    daemon = tc.stack.procs["paddock-sessiond"].pid
    assert memory_holds(daemon, needle)


def test_the_sandbox_cannot_reach_the_callback_itself(tc, tsid, cb):
    registered(tc, tsid)
    before = len(cb.recorded())
    code = ("import socket\ns = socket.socket()\ns.settimeout(2)\n"
            f"try:\n    s.connect(('127.0.0.1', {cb.port}))\n    print('connected')\n"
            "except OSError as e:\n    print('refused', e.errno)\n")
    assert tc.exec_ok(tsid, "code_execution", {"code": code}).stdout.startswith("refused")
    r = tc.bash(tsid, f"(exec 3<>/dev/tcp/127.0.0.1/{cb.port}) && echo connected || echo no")
    assert "connected" not in r.stdout
    assert len(cb.recorded()) == before


def test_a_stuck_callback_holds_nothing_else(tc, tsid):
    registered(tc, tsid, timeout=8)
    other = tc.new_session()
    try:
        result = {}
        t = threading.Thread(target=lambda: result.update(r=tc.exec_ok(
            tsid, "code_execution", {"code": "from _platform_tools import slow\nslow(s=6)"})))
        t.start()
        time.sleep(0.5)
        t0 = time.monotonic()
        assert tc.exec_ok(other, "code_execution", {"code": "print(7)"}).stdout == "7\n"
        assert time.monotonic() - t0 < 1.5
        t.join()
        assert result["r"].rc == 0
    finally:
        tc.destroy(other)


def test_a_deadline_during_a_call_interrupts_it_and_keeps_state(tc, tsid):
    registered(tc, tsid, timeout=30)
    tc.exec_ok(tsid, "code_execution", {"code": "kept = 'yes'"})
    r = tc.exec(tsid, "code_execution",
                {"code": "from _platform_tools import slow\nslow(s=10)"}, timeout_seconds=2)
    res = ps.check_exec_body(r.json(), "code_execution")
    assert res.rc == 124 and "interrupted; state was kept" in res.stderr, res
    # The call is answered before the interrupt: the code sees whichever comes first.
    assert ("KeyboardInterrupt" in res.stderr or
            "ToolError: the call's time is up" in res.stderr), res
    # Nothing of the dropped call is left on the channel: the next calls are whole.
    assert tc.exec_ok(tsid, "code_execution", {"code": "print(kept)"}).stdout == "yes\n"
    assert json.loads(tc.exec_ok(tsid, "code_execution", {"code": CALL.replace(
        "print(repr(r))", "import json; print(json.dumps(r))")}).stdout)["name"]
    r = tc.exec(tsid, "bash_code_execution", {"command": "paddock-tool slow '{\"s\": 10}'"},
                timeout_seconds=2)
    assert ps.check_exec_body(r.json(), "bash_code_execution").rc == 124
    assert tc.bash(tsid, "echo fine").stdout == "fine\n"


def test_a_registration_outlives_a_daemon_restart(stacks, cb):
    st = stacks.get("tools-restart", {
        "PADDOCK_TOOL_CALLBACK_ALLOW": f"http://127.0.0.1:{cb.port}/tools",
        "PADDOCK_KEEP_SESSIONS_ON_EXIT": "true"})
    st.tool_port = cb.port
    c = ps.Client(st)
    sid = c.new_session()
    token = registered(c, sid)
    st.kill9("paddock-sessiond")
    st.restart("paddock-sessiond")
    before = len(cb.recorded())
    r = c.exec_ok(sid, "code_execution", {"code": CALL})
    assert "gmail_list_emails" in r.stdout, r
    assert cb.recorded()[before]["headers"]["Authorization"] == f"Bearer {token}"
    c.destroy(sid)


def test_an_answer_that_is_not_utf8_is_a_tool_error(tc, tsid):
    registered(tc, tsid)
    r = tc.exec_ok(tsid, "code_execution", {"code": "from _platform_tools import latin1, ToolError\n"
                                            "try:\n    latin1()\nexcept ToolError as e:\n"
                                            "    print(e)"})
    assert r.stdout == "the tool callback's answer is not UTF-8\n", r
    r = tc.bash(tsid, "paddock-tool latin1; echo rc=$?")
    assert r.stdout == "rc=1\n" and "not UTF-8" in r.stderr, r


def test_a_name_with_an_underscore_is_a_tool_like_any_other(tc, tsid):
    registered(tc, tsid)
    r = tc.exec_ok(tsid, "code_execution", {"code": "from _platform_tools import _private\n"
                                            "print(_private(a=1)['name'])\n"
                                            "print(_private(a=2)['input'])"})
    assert r.stdout == "_private\n{'a': 2}\n", r


def sessiond_rss(stack):
    with open(f"/proc/{stack.procs['paddock-sessiond'].pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) * 1024


FLOOD = """
import os, time
line = b'{"event":"tool_call"}\\n' * 5000
end = time.monotonic() + %d
while time.monotonic() < end:
    try:
        os.write(63, line)
    except BlockingIOError:
        pass
"""


def print_latency(c, sid):
    t0 = time.monotonic()
    assert c.exec_ok(sid, "code_execution", {"code": "print(1)"}).stdout == "1\n"
    return time.monotonic() - t0


@pytest.mark.parametrize("registered_first", [False, True])
def test_a_flood_of_calls_holds_neither_the_daemon_nor_the_deadline(tc, tsid, registered_first):
    """The flooding session takes its core; another answers as beside the other hostile
    loads (test_limits_bystander.py: every call under 2 s, the median under 10x idle)."""
    if registered_first:
        registered(tc, tsid)
    by_client = tc.clone()
    other = by_client.new_session()
    rss0 = sessiond_rss(tc.stack)
    try:
        for _ in range(3):
            print_latency(by_client, other)
        idle = statistics.median(print_latency(by_client, other) for _ in range(15))
        result = {}
        t = threading.Thread(target=lambda: result.update(r=tc.clone().exec(
            tsid, "code_execution", {"code": FLOOD % 20}, timeout_seconds=2)))
        t0 = time.monotonic()
        t.start()
        time.sleep(0.5)
        during = []
        while (t.is_alive() and time.monotonic() - t0 < 6) or len(during) < 5:
            during.append(print_latency(by_client, other))
        t.join(30)
        assert not t.is_alive(), "the flood ran past its deadline"
        res = ps.check_exec_body(result["r"].json(), "code_execution")
        assert res.rc == 124, res
        assert time.monotonic() - t0 < 10
        assert max(during) < 2.0, f"another session waited {max(during):.2f} s during the flood"
        med = statistics.median(during)
        assert med < 10 * idle, f"median {med * 1000:.1f} ms during the flood, {idle * 1000:.1f} idle"
        # (ASan keeps freed memory in quarantine: there its RSS says nothing, LeakSanitizer
        # does.)
        if not ps.sanitized_build():
            assert sessiond_rss(tc.stack) - rss0 < 64 << 20
        # What the flood left unread does not swallow the next request.
        assert tc.exec_ok(tsid, "code_execution", {"code": "print(2)"}).stdout == "2\n"
    finally:
        by_client.destroy(other)


def test_a_bash_deadline_during_a_call_keeps_the_shell(tc, tsid):
    registered(tc, tsid, timeout=30)
    assert tc.bash(tsid, "export Y=9").rc == 0
    t0 = time.monotonic()
    r = tc.exec(tsid, "bash_code_execution", {"command": "paddock-tool slow '{\"s\": 10}'"},
                timeout_seconds=2)
    res = ps.check_exec_body(r.json(), "bash_code_execution")
    assert res.rc == 124 and "state was kept" in res.stderr, res
    assert time.monotonic() - t0 < 3.5
    assert tc.bash(tsid, "echo $Y").stdout == "9\n"


def test_the_store_holding_tokens_is_root_s_alone(tc, tsid):
    registered(tc, tsid)
    db = os.path.join(tc.stack.state_dir, "paddock.db")
    for f in (db, db + "-wal", db + "-shm"):
        if os.path.exists(f):
            assert os.stat(f).st_mode & 0o077 == 0, (f, oct(os.stat(f).st_mode))
