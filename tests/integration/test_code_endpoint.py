# SPDX-License-Identifier: MIT
"""The endpoint tier through nginx: AIO_JUPYTER_ENDPOINT names a Jupyter Server (Debian's
jupyter-server, started here on loopback with a token), and Python on the code plane runs
in kernels paddock starts there, one per session, deleted with the session.

The server's kernels inherit a marker variable the sandbox does not have, and are children
of the server process: a cell that prints both proves where it ran.
"""

import time

import pytest

import jupyter_endpoint as je
from code_client import CodeClient, check_outputs, outputs_of

_why_not = je.missing()
pytestmark = pytest.mark.skipif(_why_not is not None, reason=_why_not or "")

WHERE = f"import os\n(os.environ.get({je.MARK_VAR!r}), os.getppid())"


@pytest.fixture(scope="module")
def server():
    srv = je.JupyterServer().start()
    yield srv
    kids = srv._children()
    srv.stop()
    assert not srv.kernel_pids_alive(kids), "kernels outlived the server"


@pytest.fixture(scope="module")
def cc(stacks, server):
    return CodeClient(stacks.get("code-endpoint", {"AIO_JUPYTER_ENDPOINT": server.endpoint}))


def _where(server):
    return repr((server.mark, server.proc.pid))


def _new_kernels(server, before, timeout=15.0):
    return server.wait_kernels(lambda ids: ids - before, timeout) - before


def test_info_and_capabilities_report_the_endpoint(cc):
    for version in (1, 2):
        d = cc.request("GET", f"/v{version}/code/info").env["data"]
        assert d["backend"] == "endpoint"
        assert "python" in d["kinds"] and "jupyter" in d["kinds"]
        py = next(e for e in d["languages"] if e["language"] == "python")
        assert py["details"]["tier"] == "endpoint" and py["details"]["available"] is True
    ci = cc.request("GET", "/v1/capabilities").env["data"]["code_interpreter"]
    assert ci["backend"] == "endpoint" and ci["status"] == "ready"
    assert not any("AIO_JUPYTER_ENDPOINT" in w for w in ci["warnings"]), ci["warnings"]


def test_cells_run_on_the_server_and_keep_state(cc, server):
    sid = "ep-state"
    before = server.kernel_ids()
    d = cc.run(WHERE, session_id=sid)
    assert d["status"] == "ok", d
    assert outputs_of(d, "execute_result")[0]["data"]["text/plain"] == _where(server)
    assert len(_new_kernels(server, before)) == 1
    d = cc.run("x = 41\nprint('set')", session_id=sid)
    assert d["stdout"] == "set\n" and d["execution_count"] == 2
    d = cc.run("x + 1", session_id=sid)
    check_outputs(d)
    assert outputs_of(d, "execute_result") == [
        {"output_type": "execute_result", "data": {"text/plain": "42"}, "metadata": {},
         "execution_count": 3}]
    sessions = cc.sessions()
    assert sessions[sid]["backend"] == "endpoint"
    # JavaScript in the same session still runs in the sandbox, which has no marker.
    d = cc.run(f"process.env.{je.MARK_VAR} === undefined", language="javascript",
               session_id=sid)
    assert outputs_of(d, "execute_result")[0]["data"]["text/plain"] == "true"
    assert cc.delete(sid).env["data"]["deleted"] is True


def test_one_plus_one_and_a_one_off(cc, server):
    before = server.kernel_ids()
    d = cc.run("1+1")
    assert d["session_id"] is None and d["execution_count"] == 1
    assert outputs_of(d, "execute_result")[0]["data"] == {"text/plain": "2"}
    # The one-off's kernel went with its session.
    assert server.wait_kernels(lambda ids: ids <= before) <= before


def test_error_gives_ename_evalue_traceback(cc):
    d = cc.run("def f():\n    raise ValueError('bad value')\nf()")
    assert d["status"] == "error" and d["exit_code"] == 1
    err = outputs_of(d, "error")
    assert len(err) == 1, d["outputs"]
    assert (err[0]["ename"], err[0]["evalue"]) == ("ValueError", "bad value")
    assert any("bad value" in line for line in err[0]["traceback"])
    assert not any("\x1b[" in line for line in err[0]["traceback"])


def test_rich_display(cc):
    d = cc.run("from IPython.display import display, HTML\ndisplay(HTML('<p>rich</p>'))")
    check_outputs(d)
    shown = outputs_of(d, "display_data")
    assert shown and shown[0]["data"]["text/html"] == "<p>rich</p>"


def test_timeout_interrupts_and_keeps_state(cc):
    sid = "ep-timeout"
    cc.run("kept = 'yes'", session_id=sid)
    t0 = time.monotonic()
    d = cc.run("import time\nwhile True:\n    time.sleep(0.1)", session_id=sid, timeout=1)
    assert time.monotonic() - t0 < 8
    assert d["status"] == "timeout" and d["exit_code"] == 1
    assert "interrupted" in d["stderr"], d
    d = cc.run("kept", session_id=sid)
    assert outputs_of(d, "execute_result")[0]["data"]["text/plain"] == "'yes'"
    assert cc.delete(sid).env["data"]["deleted"] is True


def test_a_cell_deaf_to_the_interrupt_resets_the_session(cc, server):
    sid = "ep-deaf"
    before = server.kernel_ids()
    cc.run("gone = 1", session_id=sid)
    first = _new_kernels(server, before)
    d = cc.run("import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
               "time.sleep(60)", session_id=sid, timeout=1)
    assert d["status"] == "timeout", d
    assert "state was reset" in d["stderr"], d
    d = cc.run("'gone' in dir()", session_id=sid)
    assert outputs_of(d, "execute_result")[0]["data"]["text/plain"] == "False"
    # The old kernel went from the server; the session has a new one.
    assert not (server.wait_kernels(lambda ids: not (ids & first)) & first)
    assert cc.delete(sid).env["data"]["deleted"] is True


def test_delete_removes_the_kernel_on_the_server(cc, server):
    sid = "ep-delete"
    before = server.kernel_ids()
    cc.run("1", session_id=sid)
    mine = _new_kernels(server, before)
    assert len(mine) == 1
    assert cc.delete(sid).env["data"]["deleted"] is True
    assert not (server.wait_kernels(lambda ids: not (ids & mine)) & mine)
    status, _ = server.api("GET", f"api/kernels/{next(iter(mine))}")
    assert status == 404


def test_jupyter_route_runs_there_too(cc, server):
    r = cc.request("POST", "/v1/jupyter/execute", {"code": WHERE})
    assert r.status_code == 200
    d = r.env["data"]
    check_outputs(d, all_keys=True)
    assert outputs_of(d, "execute_result")[0]["data"]["text/plain"] == _where(server)
    r = cc.request("POST", "/v1/jupyter/sessions/create", {"session_id": "ep-jupyter"})
    assert r.status_code == 200, r.env
    r = cc.request("POST", "/v1/jupyter/execute", {"code": WHERE, "session_id": "ep-jupyter"})
    assert outputs_of(r.env["data"], "execute_result")[0]["data"]["text/plain"] == _where(server)
    listed = cc.request("GET", "/v1/jupyter/sessions").env["data"]
    assert "ep-jupyter" in str(listed)
    assert cc.request("DELETE", "/v1/jupyter/sessions/ep-jupyter").status_code == 200


def test_unreachable_endpoint_falls_down_the_ladder(stacks):
    port = je._free_port()
    cc = CodeClient(stacks.get("code-endpoint-down",
                               {"AIO_JUPYTER_ENDPOINT": f"http://127.0.0.1:{port}/?token=s3cret"}))
    d = cc.request("GET", "/v2/code/info").env["data"]
    assert d["backend"] in ("kernel", "native")
    ci = cc.request("GET", "/v1/capabilities").env["data"]["code_interpreter"]
    note = [w for w in ci["warnings"] if "AIO_JUPYTER_ENDPOINT" in w]
    assert note and "was tried" in note[0] and f"127.0.0.1:{port}" in note[0], ci["warnings"]
    assert "s3cret" not in str(ci)
    d = cc.run(WHERE)
    assert outputs_of(d, "execute_result")[0]["data"]["text/plain"].startswith("(None, ")


def test_a_pinned_tier_skips_the_endpoint(stacks, server):
    cc = CodeClient(stacks.get("code-endpoint-pinned", {"AIO_JUPYTER_ENDPOINT": server.endpoint,
                                                        "AIO_CODE_BACKEND": "native"}))
    assert cc.request("GET", "/v2/code/info").env["data"]["backend"] == "native"
    ci = cc.request("GET", "/v1/capabilities").env["data"]["code_interpreter"]
    assert any("pins the native tier" in w for w in ci["warnings"]), ci["warnings"]
    before = server.kernel_ids()
    d = cc.run(WHERE)
    assert outputs_of(d, "execute_result")[0]["data"]["text/plain"].startswith("(None, ")
    assert server.kernel_ids() <= before
