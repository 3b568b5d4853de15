# SPDX-License-Identifier: MIT
"""Streamed output through the real nginx: an exec asked for with Accept: text/event-stream
answers with Server-Sent Events as the program writes, ends with the body the same call
answers without the header, keeps errors found before the run as JSON, heartbeats, and is
cancelled when its client hangs up."""

import http.client
import json
import socket
import subprocess
import threading
import time
import types

import pytest
import requests

import paddock_stack as ps
from code_client import NINE_KEYS, OUTPUT_KEYS, CodeClient, check_outputs

HAS_IPYTHON = subprocess.run(["/usr/bin/python3", "-c", "import IPython"],
                                capture_output=True).returncode == 0
needs_kernel = pytest.mark.skipif(not HAS_IPYTHON, reason="IPython is not installed for "
                                  "/usr/bin/python3: no kernel tier to stream rich outputs")


class EventStream:
    """One streamed call, read as it arrives: each event with the seconds since the request
    was sent; comment lines (heartbeats) counted with theirs."""

    def __init__(self, stack, path, body, headers=None, accept="text/event-stream"):
        self.conn = http.client.HTTPConnection("127.0.0.1", stack.port, timeout=120)
        h = {"Content-Type": "application/json", "Accept": accept}
        h.update(headers or {})
        self.t0 = time.monotonic()
        self.conn.request("POST", path, body=json.dumps(body), headers=h)
        self.resp = self.conn.getresponse()
        self.status = self.resp.status
        self.headers = requests.structures.CaseInsensitiveDict(self.resp.getheaders())
        self.comments = []

    def is_stream(self):
        return self.headers.get("content-type", "").startswith("text/event-stream")

    def body(self):
        return self.resp.read()

    def events(self):
        """Yield SimpleNamespace(t, event, data) up to the end of the stream."""
        event, data = None, []
        while True:
            line = self.resp.readline()
            if not line:
                return
            line = line.decode("utf-8").rstrip("\n")
            if line.startswith(":"):
                self.comments.append(time.monotonic() - self.t0)
            elif line.startswith("event: "):
                event = line[len("event: "):]
            elif line.startswith("data: "):
                data.append(line[len("data: "):])
            elif line == "" and event is not None:
                yield types.SimpleNamespace(t=time.monotonic() - self.t0, event=event,
                                            data=ps.strict_json("\n".join(data)))
                event, data = None, []

    def all(self):
        return list(self.events())

    def hang_up(self):
        self.conn.sock.shutdown(socket.SHUT_RDWR)
        self.conn.close()


def otari_stream(client, sid, tool, input, **fields):
    body = {"tool": tool, "input": input, **fields}
    return EventStream(client.stack, f"/sessions/{sid}/exec", body, client.headers)


def texts(events, name):
    return "".join(e.data["text"] for e in events if e.event == name)


def result_of(events):
    assert events and events[-1].event == "result", [e.event for e in events]
    assert [e.event for e in events].count("result") == 1
    return events[-1]


# --- the Otari exec ---------------------------------------------------------------------

SLOW_PYTHON = """
import subprocess, sys, time
print("first")
time.sleep(1.5)
print("to stderr", file=sys.stderr)
subprocess.run(["/bin/echo", "from a child"])
print("last")
"""


def test_output_arrives_as_written_and_the_result_is_the_plain_answer(client, sid):
    s = otari_stream(client, sid, "code_execution", {"code": SLOW_PYTHON})
    assert s.status == 200 and s.is_stream(), (s.status, s.headers)
    assert s.headers.get("cache-control") == "no-cache", s.headers
    events = s.all()
    res = result_of(events)
    # The first line is read long before the run ends, through nginx (in as many events
    # as the program made writes).
    early = [e for e in events if e.t < 0.75]
    assert texts(early, "stdout") == "first\n", [(e.t, e.event, e.data) for e in events]
    assert res.t > 1.5, res
    r = ps.check_exec_body(res.data, "code_execution")
    # The events add up to what the result holds, a child's output included.
    assert texts(events, "stdout") == r.stdout == "first\nfrom a child\nlast\n", events
    assert texts(events, "stderr") == r.stderr == "to stderr\n", events
    assert r.rc == 0 and set(res.data) >= {"usage", "execution_time_ms"}, res.data
    # Every data line is one JSON object: stdout/stderr carry {"text"} and nothing else.
    for e in events[:-1]:
        assert e.event in ("stdout", "stderr") and set(e.data) == {"text"}, e
    plain = client.exec_ok(sid, "code_execution", {"code": SLOW_PYTHON})
    assert (plain.stdout, plain.stderr, plain.rc) == (r.stdout, r.stderr, r.rc)


def test_bash_streams_and_a_tool_use_id_is_kept(client, sid):
    s = otari_stream(client, sid, "bash_code_execution",
                     {"command": "echo one; sleep 1; echo two >&2; exit 3"},
                     tool_use_id="toolu_stream_1")
    events = s.all()
    res = result_of(events)
    r = ps.check_exec_body(res.data, "bash_code_execution", "toolu_stream_1")
    assert events[0].event == "stdout" and events[0].t < 0.6 < res.t, events
    assert (texts(events, "stdout"), texts(events, "stderr"), r.rc) == ("one\n", "two\n", 3)


def test_the_editor_answers_one_result_event(client, sid):
    s = otari_stream(client, sid, "text_editor_code_execution",
                     {"command": "create", "path": "a.txt", "file_text": "hi\n"})
    events = s.all()
    assert s.status == 200 and [e.event for e in events] == ["result"], events
    ps.check_exec_body(events[0].data, "text_editor_code_execution")


def test_a_character_cut_between_two_writes_arrives_whole(client, sid):
    code = ("import sys, time\n"
            "sys.stdout.buffer.write(b'\\xc3'); sys.stdout.flush(); time.sleep(0.3)\n"
            "sys.stdout.buffer.write(b'\\xa9 and a bad byte \\xff\\n'); sys.stdout.flush()\n")
    events = otari_stream(client, sid, "code_execution", {"code": code}).all()
    r = ps.check_exec_body(result_of(events).data, "code_execution")
    assert texts(events, "stdout") == r.stdout == "\u00e9 and a bad byte \ufffd\n", events
    # The lead byte waited for the rest of its character, which came 0.3 s later.
    assert all(e.t > 0.25 for e in events), events


def test_the_stream_shows_what_the_output_cap_keeps_and_no_more(client, sid):
    # 3 MiB against the 1 MiB output_max_bytes: the stream stops where the result does.
    code = "import sys\nfor _ in range(3 * 1024):\n    sys.stdout.write('x' * 1023 + '\\n')\n"
    events = otari_stream(client, sid, "code_execution", {"code": code}).all()
    r = ps.check_exec_body(result_of(events).data, "code_execution")
    streamed = texts(events, "stdout")
    assert "[output truncated" in r.stdout, r.stdout[-200:]
    assert len(streamed) == 1 << 20 and r.stdout.startswith(streamed), len(streamed)


def test_errors_before_the_run_stay_json(client, sid):
    s = otari_stream(client, "vm-nosuchsession", "code_execution", {"code": "1"})
    assert s.status == 404 and not s.is_stream(), (s.status, s.headers)
    ps.check_response(s.status, s.headers, s.body(), "POST", "/sessions/x/exec",
                      client.stack.bearer)
    s = otari_stream(client, sid, "code_execution", {"code": ""})
    assert s.status == 422 and not s.is_stream() and b"input.code" in s.body()
    s = otari_stream(client, sid, "no_such_tool", {"code": "1"})
    assert s.status == 400 and not s.is_stream()
    # Busy: another call runs in the session.
    started = threading.Event()
    runner = threading.Thread(target=lambda: (started.set(), client.exec_ok(
        sid, "bash_code_execution", {"command": "sleep 2"})))
    runner.start()
    started.wait()
    ps.wait_for(lambda: client.request("GET", f"/sessions/{sid}", check=False).json()["running"],
                10, "the first call to run")
    s = otari_stream(client, sid, "code_execution", {"code": "print(1)"})
    assert s.status == 409 and not s.is_stream(), s.status
    runner.join()


def test_without_the_header_nothing_changes(client, sid):
    r = client.exec(sid, "code_execution", {"code": "print(2)"},
                    headers={"Accept": "application/json"})
    assert r.status_code == 200 and r.headers["Content-Type"] == "application/json"
    assert r.json()["result_block"]["content"]["stdout"] == "2\n"


# --- hang-ups ---------------------------------------------------------------------------

def running(client, sid):
    return client.request("GET", f"/sessions/{sid}", check=False).json()["running"]


def test_a_client_that_hangs_up_cancels_the_run_and_the_state_is_kept(client, sid):
    client.exec_ok(sid, "code_execution", {"code": "kept = 41"})
    code = "import time\nwhile True:\n    kept += 0\n    print('tick', flush=True)\n    time.sleep(0.2)\n"
    s = otari_stream(client, sid, "code_execution", {"code": code}, timeout_seconds=120)
    first = next(s.events())
    assert first.event == "stdout", first
    hung_up = time.monotonic()
    s.hang_up()
    ps.wait_for(lambda: not running(client, sid), 10, "the cancelled run to end")
    # Interrupted at once (not at its 120 s deadline), the namespace kept.
    assert time.monotonic() - hung_up < 5
    r = client.exec_ok(sid, "code_execution", {"code": "print(kept + 1)"})
    assert r.stdout == "42\n", r
    assert "cancelled" in client.stack.logs(), "the cancellation is logged"


def test_a_hung_up_run_that_ignores_the_interrupt_is_killed(client, sid):
    client.exec_ok(sid, "code_execution", {"code": "kept = 1"})
    code = ("import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
            "print('stubborn', flush=True)\nwhile True:\n    time.sleep(0.1)\n")
    s = otari_stream(client, sid, "code_execution", {"code": code}, timeout_seconds=120)
    assert next(s.events()).event == "stdout"
    s.hang_up()
    # interrupt_grace_ms (2 s) later every process of the run is killed.
    ps.wait_for(lambda: not running(client, sid), 15, "the run to be killed")
    # A new interpreter serves the session: the old one, and its namespace, are gone.
    r = client.exec_ok(sid, "code_execution", {"code": "print('kept' in globals())"})
    assert r.stdout == "False\n", r


def test_a_plain_call_whose_client_goes_keeps_running(client, sid):
    """Unchanged for a call that did not stream: it runs to its end."""
    conn = http.client.HTTPConnection("127.0.0.1", client.stack.port, timeout=30)
    conn.request("POST", f"/sessions/{sid}/exec", headers={**client.headers,
                 "Content-Type": "application/json"},
                 body=json.dumps({"tool": "bash_code_execution",
                                  "input": {"command": "sleep 1.5; echo done > done.txt"}}))
    ps.wait_for(lambda: running(client, sid), 10, "the call to start")
    conn.sock.shutdown(socket.SHUT_RDWR)
    conn.close()
    ps.wait_for(lambda: not running(client, sid), 10, "the call to end")
    assert client.exec_ok(sid, "bash_code_execution", {"command": "cat done.txt"}).stdout == "done\n"


# --- heartbeats -------------------------------------------------------------------------

def test_a_quiet_run_gets_heartbeats(stacks):
    st = stacks.get("stream-heartbeat", {"PADDOCK_STREAM_HEARTBEAT_SECONDS": "1"})
    c = ps.Client(st)
    sid = c.new_session()
    s = otari_stream(c, sid, "bash_code_execution", {"command": "sleep 3.5; echo end"})
    events = s.all()
    assert texts(events, "stdout") == "end\n" and events[-1].event == "result"
    assert len(s.comments) >= 2 and s.comments[0] < 2.0, s.comments
    c.destroy(sid)


# --- the code plane ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def cc(stack):
    return CodeClient(stack)


def code_stream(stack, path, body):
    return EventStream(stack, path, body)


def joined_streams(events):
    """Events with each run of one stream's events made one (as many as the program made
    writes arrive: print() makes two), the time of its first."""
    out = []
    for e in events:
        prev = out[-1] if out else None
        if (prev and e.event == prev.event == "stream"
                and e.data["name"] == prev.data["name"]):
            prev.data = {**prev.data, "text": prev.data["text"] + e.data["text"]}
        else:
            out.append(e)
    return out


def check_output_event(e, all_keys=False):
    assert e.event == e.data["output_type"], e
    if all_keys:
        assert set(e.data) == NINE_KEYS, e
    else:
        assert set(e.data) == OUTPUT_KEYS[e.event], e


@needs_kernel
def test_v2_streams_notebook_outputs_as_they_are_produced(cc, stack):
    code = ("import time\nprint('a')\ntime.sleep(1)\n"
            "import matplotlib.pyplot as plt\nplt.plot([1, 2]); plt.show()\n"
            "display({'x': 1})\ntime.sleep(1)\n6 * 7")
    s = code_stream(stack, "/v2/code/execute", {"language": "python", "code": code})
    assert s.status == 200 and s.is_stream()
    events = joined_streams(s.all())
    names = [e.event for e in events]
    assert names == ["stream", "display_data", "display_data", "execute_result", "result"], names
    for e in events[:-1]:
        check_output_event(e)
    assert events[0].data == {"output_type": "stream", "name": "stdout", "text": "a\n"}
    assert "image/png" in events[1].data["data"], events[1].data["data"].keys()
    # The figure is sent when it is shown, a second before the cell ends.
    assert events[1].t < events[-1].t - 0.8, [(e.t, e.event) for e in events]
    assert events[0].t < events[-1].t - 1.5
    assert events[3].data["data"] == {"text/plain": "42"}
    env = events[-1].data
    assert env["success"] is True and env["data"]["status"] == "ok", env
    check_outputs(env["data"])
    # The streamed outputs are the result's, in order.
    assert [e.data for e in events[:-1]] == env["data"]["outputs"]


# The running harness, found from the cell: what it streams, the cell may write too.
FORGE_DISPLAY = """
import os, json
h = get_ipython().display_pub.publish.__func__.__globals__
line = json.dumps({'event': 'display', 'id': h['_stream_id'],
                   'data': {'text/plain': 'FORGED'}, 'metadata': {}}).encode()
os.write(63, line.replace(b'FORGED', b'\\xff\\xfe') + b'\\n')
display({'text/plain': 'x'}, raw=True, metadata={'a': float('nan')})
"""


@needs_kernel
def test_v2_streamed_events_are_json_whatever_the_cell_writes(cc, stack):
    s = code_stream(stack, "/v2/code/execute", {"language": "python", "code": FORGE_DISPLAY})
    assert s.status == 200 and s.is_stream()
    # Every event parsed strictly (UTF-8, no NaN): the forged one is dropped, the NaN null.
    events = s.all()
    shown = [e.data for e in events if e.event == "display_data"]
    assert shown == [{"output_type": "display_data", "data": {"text/plain": "x"},
                      "metadata": {"a": None}}], events
    assert events[-1].event == "result" and events[-1].data["success"] is True, events[-1]


def test_v2_one_off_streams_and_leaves_no_session(cc, stack):
    before = set(cc.sessions())
    s = code_stream(stack, "/v2/code/execute", {
        "language": "python", "code": "import sys, time\nprint('x')\nsys.stdout.flush()\n"
        "time.sleep(1)\n1/0"})
    events = joined_streams(s.all())
    assert [e.event for e in events] == ["stream", "error", "result"], events
    assert events[0].t < events[-1].t - 0.8
    check_output_event(events[1])
    assert events[1].data["ename"] == "ZeroDivisionError"
    env = events[-1].data
    assert env["success"] is False and env["data"]["status"] == "error"
    assert set(cc.sessions()) == before


def test_javascript_streams(cc, stack):
    s = code_stream(stack, "/v2/code/execute", {
        "language": "javascript",
        "code": "console.log(1); await new Promise(r => setTimeout(r, 1000)); console.log(2)"})
    events = s.all()
    streams = [e for e in events if e.event == "stream"]
    assert "".join(e.data["text"] for e in streams) == "1\n2\n", events
    assert streams[0].t < events[-1].t - 0.8, [(e.t, e.event) for e in events]


@needs_kernel
def test_jupyter_route_streams_its_nine_key_outputs(cc, stack):
    s = code_stream(stack, "/v1/jupyter/execute", {"code": "print('j')\n'r'"})
    events = joined_streams(s.all())
    assert [e.event for e in events] == ["stream", "execute_result", "result"], events
    for e in events[:-1]:
        check_output_event(e, all_keys=True)
    check_outputs(events[-1].data["data"], all_keys=True)


def test_code_plane_errors_before_the_run_stay_json(cc, stack):
    s = code_stream(stack, "/v2/code/execute", {"language": "cobol", "code": "x"})
    assert s.status == 422 and not s.is_stream()
    s = code_stream(stack, "/v2/code/execute", {"language": "python", "code": ""})
    assert s.status == 422 and not s.is_stream()


def test_code_plane_stream_is_capped_like_the_cell(stacks):
    st = stacks.get("stream-cap", {"PADDOCK_CODE_OUTPUT_MAX_CHARS": "1000"})
    s = code_stream(st, "/v2/code/execute", {"language": "python",
                                              "code": "print('\u00e9' * 3000)"})
    events = s.all()
    streamed = "".join(e.data["text"] for e in events if e.event == "stream")
    assert streamed == "\u00e9" * 1000, len(streamed)
    assert "[output truncated at 1000 characters]" in events[-1].data["data"]["stderr"]
