# SPDX-License-Identifier: MIT
"""harness_endpoint.py driven directly, the way sessiond drives it, against a real
Jupyter Server started on loopback (jupyter_endpoint.py).

The harness runs as a child with fd 1/2 pipes and fd 3 one end of a socketpair, in
its own process group, with PADDOCK_JUPYTER_ENDPOINT in its environment, as
sessiond's host-side interpreter kind starts it.
"""

import json
import os
import signal
import socket
import time

import pytest

import jupyter_endpoint as je
from test_harness import HARNESS_DIR, Harness

ENDPOINT_ARGV = ["/usr/bin/python3", "-I", "-u", str(HARNESS_DIR / "harness_endpoint.py")]

_why_not = je.missing()
pytestmark = pytest.mark.skipif(_why_not is not None, reason=_why_not or "")


@pytest.fixture(scope="module")
def server():
    srv = je.JupyterServer().start()
    yield srv
    kids = srv._children()
    srv.stop()
    assert not srv.kernel_pids_alive(kids), "kernels outlived the server"


class EndpointHarness(Harness):
    def __init__(self, endpoint, token=None, extra=None):
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/tmp",
               "PADDOCK_JUPYTER_ENDPOINT": endpoint, "PADDOCK_SESSION_ID": "t-endpoint"}
        if token:
            env["PADDOCK_JUPYTER_TOKEN"] = token
        env.update(extra or {})
        saved = dict(os.environ)
        os.environ.clear()
        os.environ.update(env)
        try:
            super().__init__(ENDPOINT_ARGV, b"\n")
        finally:
            os.environ.clear()
            os.environ.update(saved)
        self.next_id = 0

    def send_request(self, code, mode="cell"):
        self.next_id += 1
        self.send(json.dumps({"id": self.next_id, "code": code, "mode": mode}).encode())
        return self.next_id

    def run(self, code, mode="cell"):
        rid = self.send_request(code, mode)
        reply, out, err = self.finish()
        assert reply.pop("id") == rid
        return reply, out, err

    def finish(self):
        reply, out, err = self.receive()
        assert reply is not None, "harness closed the channel: " + err.decode(errors="replace")
        return json.loads(reply), out.decode(), err.decode()

    def terminate(self):
        os.kill(self.pid, signal.SIGTERM)
        return self.wait(timeout=10)


@pytest.fixture
def ep(server):
    before = server.kernel_ids()
    h = EndpointHarness(server.endpoint)
    yield h
    if h.status is None:
        h.terminate()
    h.close()
    left = server.wait_kernels(lambda ids: ids <= before)
    assert left <= before, f"kernels left on the server: {left - before}"


def test_cells_run_on_the_server_and_keep_state(ep, server):
    reply, out, err = ep.run("1+1")
    assert reply == {"status": "ok", "return_code": 0, "result": {"text/plain": "2"},
                     "error": None, "display": []}, err
    reply, out, _ = ep.run(f"import os\nprint(os.environ.get({je.MARK_VAR!r}))\n"
                           "x = 41\nos.getppid()")
    assert out == server.mark + "\n"
    assert reply["result"] == {"text/plain": str(server.proc.pid)}
    reply, _, _ = ep.run("x + 1")
    assert reply["result"] == {"text/plain": "42"}


def test_one_kernel_per_harness_deleted_on_sigterm(server):
    before = server.kernel_ids()
    h = EndpointHarness(server.endpoint)
    try:
        h.run("")   # sessiond's no-op: answered once the kernel is up
        ids = server.kernel_ids() - before
        assert len(ids) == 1, ids
        assert h.terminate() == 0
        assert not (server.wait_kernels(lambda now: not (now & ids)) & ids)
    finally:
        h.close()


def test_end_of_file_deletes_the_kernel(server):
    before = server.kernel_ids()
    h = EndpointHarness(server.endpoint)
    h.run("")
    ids = server.kernel_ids() - before
    assert len(ids) == 1
    h.ctl.shutdown(socket.SHUT_WR)
    assert h.wait() == 0
    h.close()
    assert not (server.wait_kernels(lambda now: not (now & ids)) & ids)


def test_streams_go_to_the_pipes(ep):
    # ipykernel forwards what a subprocess writes to fd 1 from a thread of its own, which
    # can publish it after the cell has ended; the pause lets it catch up, so that this
    # test checks the forwarding, not that race.
    reply, out, err = ep.run("import sys\nprint('to out')\nprint('to err', file=sys.stderr)\n"
                             "import subprocess, time\nsubprocess.run(['echo', 'child'])\n"
                             "time.sleep(0.5)\nNone")
    assert reply["status"] == "ok" and reply["result"] is None
    assert "to out\n" in out and "child\n" in out
    assert err == "to err\n"


def test_rich_output(ep):
    reply, _, _ = ep.run("from IPython.display import display, HTML\n"
                         "display(HTML('<b>hi</b>'))\n"
                         "class R:\n"
                         "    def _repr_html_(self): return '<i>r</i>'\n"
                         "    def __repr__(self): return 'R()'\n"
                         "R()")
    assert reply["status"] == "ok"
    assert reply["display"][0]["data"]["text/html"] == "<b>hi</b>"
    assert reply["display"][0]["metadata"] == {}
    assert reply["result"] == {"text/plain": "R()", "text/html": "<i>r</i>"}


def test_error_reply(ep):
    reply, out, err = ep.run("def f():\n    return 1 / 0\nf()")
    assert reply["status"] == "error" and reply["return_code"] == 1
    assert reply["result"] is None
    e = reply["error"]
    assert (e["ename"], e["evalue"]) == ("ZeroDivisionError", "division by zero")
    text = "\n".join(e["traceback"])
    assert "return 1 / 0" in text and "\x1b[" not in text
    assert err == ""
    # otari mode: the traceback goes to fd 2, nothing is echoed.
    reply, out, err = ep.run("undefined_name", mode="otari")
    assert reply["error"]["ename"] == "NameError" and "NameError" in err
    reply, out, _ = ep.run("2 * 3", mode="otari")
    assert reply["result"] is None and reply["status"] == "ok"


def test_sigint_interrupts_and_keeps_state(ep):
    ep.run("state = 'kept'")
    ep.send_request("import time\nprint('started', flush=True)\ntime.sleep(60)")
    # Wait until the cell runs: its first output is on fd 1.
    deadline = time.monotonic() + 20
    seen = b""
    while b"started" not in seen:
        assert time.monotonic() < deadline, "the cell did not start"
        try:
            seen += os.read(ep.out, 4096)
        except BlockingIOError:
            time.sleep(0.01)
    t0 = time.monotonic()
    ep.interrupt()
    reply, out, err = ep.finish()
    assert time.monotonic() - t0 < 5
    assert reply["return_code"] == 130 and reply["status"] == "error"
    assert reply["error"]["ename"] == "KeyboardInterrupt"
    reply, _, _ = ep.run("state")
    assert reply["result"] == {"text/plain": "'kept'"}


def test_idle_sigint_is_ignored(ep):
    ep.run("y = 5")
    ep.interrupt()
    reply, _, _ = ep.run("y")
    assert reply["result"] == {"text/plain": "5"}


def test_protocol_errors_and_ids(ep):
    ep.send(b"not json")
    reply, _, _ = ep.finish()
    assert reply["error"]["ename"] == "ProtocolError" and reply["return_code"] == 1
    ep.send(json.dumps({"id": "abc", "code": "3", "mode": "cell"}).encode())
    reply, _, _ = ep.finish()
    assert list(reply)[0] == "id" and reply["id"] == "abc"
    assert reply["result"] == {"text/plain": "3"}


def test_token_from_the_environment(server):
    h = EndpointHarness(server.url, token=server.token)
    try:
        assert h.run("7")[0]["result"] == {"text/plain": "7"}
    finally:
        h.terminate()
        h.close()


def test_wrong_token_is_an_error_reply(server):
    h = EndpointHarness(server.url + "?token=wrong")
    try:
        reply, _, _ = h.run("1")
        assert reply["status"] == "error" and reply["error"]["ename"] == "EndpointError"
        assert "403" in reply["error"]["evalue"] or "401" in reply["error"]["evalue"]
        assert "wrong" not in json.dumps(reply)
    finally:
        h.terminate()
        h.close()


def test_unreachable_server_is_an_error_reply_not_a_hang():
    port = je._free_port()
    t0 = time.monotonic()
    h = EndpointHarness(f"http://127.0.0.1:{port}/?token=x")
    try:
        reply, _, _ = h.run("1")
        assert reply["error"]["ename"] == "EndpointError"
        assert "connection refused" in reply["error"]["evalue"]
        assert time.monotonic() - t0 < 10
    finally:
        h.terminate()
        h.close()


def test_server_dying_mid_cell_is_an_error_reply():
    srv = je.JupyterServer().start()
    h = EndpointHarness(srv.endpoint)
    kids = []
    try:
        h.run("")
        kids = srv._children()
        h.send_request("import time\ntime.sleep(60)")
        srv.proc.kill()
        srv.proc.wait(timeout=10)
        t0 = time.monotonic()
        reply, _, _ = h.finish()
        assert time.monotonic() - t0 < 10
        assert reply["status"] == "error" and reply["error"]["ename"] == "EndpointError"
        # The next request tries again and fails the same way, promptly.
        reply, _, _ = h.run("1")
        assert reply["error"]["ename"] == "EndpointError"
    finally:
        h.terminate()
        h.close()
        srv.stop()
        for pid in srv.kernel_pids_alive(kids):
            os.kill(pid, signal.SIGKILL)


def test_a_cell_deaf_to_the_interrupt_ends_the_harness_and_its_kernel(server):
    before = server.kernel_ids()
    h = EndpointHarness(server.endpoint)
    try:
        h.run("")
        mine = server.kernel_ids() - before
        assert len(mine) == 1
        h.send_request("import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                       "print('deaf', flush=True)\ntime.sleep(60)")
        deadline = time.monotonic() + 20
        seen = b""
        while b"deaf" not in seen:
            assert time.monotonic() < deadline, "the cell did not start"
            try:
                seen += os.read(h.out, 4096)
            except BlockingIOError:
                time.sleep(0.01)
        t0 = time.monotonic()
        h.interrupt()
        # No reply: the harness gives up before sessiond's 2 s grace would kill it.
        reply, _, _ = h.receive()
        assert reply is None
        assert h.wait(timeout=10) == 1
        assert time.monotonic() - t0 < 2.0
        assert not (server.wait_kernels(lambda now: not (now & mine)) & mine)
    finally:
        h.close()


def test_sigint_while_waiting_for_a_silent_server_answers_130():
    # A "server" that takes connections and never answers.
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    silent.settimeout(15)
    port = silent.getsockname()[1]
    h = EndpointHarness(f"http://127.0.0.1:{port}/",
                        extra={"PADDOCK_JUPYTER_REST_TIMEOUT": "3",
                               "PADDOCK_JUPYTER_START_TIMEOUT": "3"})
    held = []
    try:
        held.append(silent.accept()[0])     # the start at launch; it gives up after 3 s
        rid = h.send_request("1")
        held.append(silent.accept()[0])     # the request's own attempt
        t0 = time.monotonic()
        h.interrupt()
        reply, _, _ = h.finish()
        assert time.monotonic() - t0 < 2
        assert reply["id"] == rid and reply["return_code"] == 130
        assert reply["error"]["ename"] == "KeyboardInterrupt"
    finally:
        h.terminate()
        h.close()
        for c in held:
            c.close()
        silent.close()


def test_a_kernel_that_dies_under_a_cell_is_an_error_and_the_next_cell_runs(ep):
    ep.run("lost = 1")
    reply, _, _ = ep.run("import os\nos._exit(3)")
    assert reply["status"] == "error" and reply["error"]["ename"] == "DeadKernel", reply
    reply, _, err = ep.run("'lost' in dir()")
    assert reply["result"] == {"text/plain": "False"}, (reply, err)
