# SPDX-License-Identifier: MIT
"""The code plane's execute routes through nginx: the seed's walk-through, v1 and v2
side by side, languages, sessions, outputs, timeouts, users, cwd, bad input, the output
cap and the 429 session limits."""

import secrets

import pytest

from code_client import LANG_MSG, CodeClient, check_outputs, outputs_of


@pytest.fixture(scope="module")
def cc(stack):
    return CodeClient(stack)


def new_id(prefix="s"):
    return f"{prefix}-{secrets.token_hex(6)}"


@pytest.fixture
def sid(cc):
    s = new_id()
    yield s
    cc.delete(s)


# --- the seed's walk-through -----------------------------------------------------------

def test_walk_through_keeps_variables_across_calls(cc):
    sid = "analysis-" + secrets.token_hex(4)
    first = cc.run("import statistics\nrows = [120, 135, 150, 142, 168, 180]", session_id=sid)
    assert (first["status"], first["execution_count"], first["session_id"]) == ("ok", 1, sid)
    run = cc.run("print(round(statistics.mean(rows), 1))", session_id=sid)
    assert (run["stdout"].strip(), run["execution_count"]) == ("149.2", 2)
    assert outputs_of(run, "stream") == [{"output_type": "stream", "name": "stdout", "text": "149.2\n"}]
    r = cc.delete(sid)
    assert r.status_code == 200 and r.env["data"] == {"deleted": True}
    assert cc.delete(sid).env["data"] == {"deleted": False}
    assert cc.request("GET", f"/v2/code/sessions/{sid}").status_code == 404


def test_snippet_and_javascript_reduce(cc):
    d = cc.run("print(sum([1, 2, 3]))")
    assert (d["stdout"], d["stderr"], d["language"], d["session_id"]) == ("6\n", "", "python", None)
    assert d["execution_count"] == 1 and d["code"] == "print(sum([1, 2, 3]))"
    js = cc.run("console.log([1, 2, 3].reduce((a, b) => a + b, 0));", language="javascript")
    assert (js["stdout"], js["language"], js["status"]) == ("6\n", "javascript", "ok")
    check_outputs(d)
    check_outputs(js)


# --- v1 and v2 -----------------------------------------------------------------------

def test_empty_code_is_422_on_v2_and_an_empty_cell_on_v1(cc):
    r = cc.execute("", version=2)
    assert r.status_code == 422 and r.env["errors"][0]["location"] == ["body", "code"]
    d = cc.run("", version=1)
    assert (d["status"], d["outputs"], d["stdout"], d["stderr"]) == ("ok", [], None, None)


def test_empty_streams_are_null_on_v1_and_empty_on_v2(cc):
    v1 = cc.run("x = 1", version=1)
    v2 = cc.run("x = 1", version=2)
    assert (v1["stdout"], v1["stderr"]) == (None, None)
    assert (v2["stdout"], v2["stderr"]) == ("", "")
    out = cc.run("import sys; print('o'); print('e', file=sys.stderr)", version=1)
    assert (out["stdout"], out["stderr"]) == ("o\n", "e\n")
    assert [o["name"] for o in outputs_of(out, "stream")] == ["stdout", "stderr"]


def test_unknown_language_both_versions(cc):
    for version in (1, 2):
        r = cc.execute("puts 1", language="ruby", version=version)
        assert r.status_code == 422
        assert r.env["errors"] == [{"location": ["body", "language"],
                                    "message": LANG_MSG.format("ruby"), "type": "enum"}]
        assert r.env["message"] == LANG_MSG.format("ruby")


@pytest.mark.parametrize("alias,resolved,code", [
    ("python3", "python", "print(2)"), ("PYTHON", "python", "print(2)"),
    ("node", "javascript", "console.log(2)"), ("nodejs", "javascript", "console.log(2)"),
    ("js", "javascript", "console.log(2)"),
])
def test_language_aliases(cc, alias, resolved, code):
    d = cc.run(code, language=alias)
    assert (d["language"], d["stdout"]) == (resolved, "2\n")


def test_unknown_fields_are_ignored(cc):
    d = cc.run("print(1)", whatever={"x": 1}, files=None)
    assert d["stdout"] == "1\n"


# --- bad input -------------------------------------------------------------------------

@pytest.mark.parametrize("raw,field", [
    (b"{not json", None), (b"[1, 2]", None), (b"", None),
    (b'{"language": "python"}', "code"), (b'{"code": "1"}', "language"),
    (b'{"language": "python", "code": 5}', "code"),
    (b'{"language": "python", "code": "1", "timeout": 0}', "timeout"),
    (b'{"language": "python", "code": "1", "timeout": 901}', "timeout"),
    (b'{"language": "python", "code": "1", "timeout": "5"}', "timeout"),
    (b'{"language": "python", "code": "1", "timeout": 1.5}', "timeout"),
    (b'{"language": "python", "code": "1", "stateful": "yes"}', "stateful"),
    (b'{"language": "python", "code": "1", "session_id": "has space"}', "session_id"),
    (b'{"language": "python", "code": "1", "session_id": "' + b"a" * 129 + b'"}', "session_id"),
    (b'{"language": "python", "code": "1", "session_id": ""}', "session_id"),
    (b'{"language": "python", "code": "1", "cwd": 7}', "cwd"),
    (b'{"language": "python", "code": "a\\u0000b"}', "code"),
])
def test_bad_input_is_422_with_errors_and_changes_nothing(cc, raw, field):
    before = cc.sessions()
    for version in (1, 2):
        r = cc.request("POST", f"/v{version}/code/execute", raw=raw)
        assert r.status_code == 422, r.text
        loc = r.env["errors"][0]["location"]
        assert loc == (["body", field] if field else ["body"]), loc
    assert cc.sessions() == before


def test_session_ids_in_paths_are_checked(cc):
    r = cc.http.get(cc.base + "/v2/code/sessions/" + "a" * 129)
    assert r.status_code == 404
    assert cc.request("GET", "/v2/code/sessions/never-made").status_code == 404


# --- sessions ------------------------------------------------------------------------

def test_one_off_runs_leave_no_session(cc):
    before = set(cc.sessions())
    d = cc.run("x = 5\nx")
    assert (d["session_id"], d["execution_count"]) == (None, 1)
    assert set(cc.sessions()) == before


def test_stateful_without_id_generates_one(cc):
    d = cc.run("counter = 10", stateful=True)
    sid = d["session_id"]
    assert isinstance(sid, str) and sid
    again = cc.run("counter + 1", session_id=sid)
    assert outputs_of(again, "execute_result")[0]["data"]["text/plain"] == "11"
    assert again["execution_count"] == 2
    cc.delete(sid)


def test_session_routes(cc):
    sid = new_id("made")
    r = cc.request("POST", "/v2/code/sessions", {"session_id": sid})
    assert r.status_code == 200 and r.env["data"]["session_id"] == sid
    cc.stack.session_ids.add(sid)
    assert r.env["data"]["execution_count"] == 0
    assert cc.request("POST", "/v2/code/sessions", {"session_id": sid}).status_code == 409
    assert sid in cc.sessions()
    d = cc.run("v = 3", session_id=sid)
    assert d["execution_count"] == 1
    g = cc.request("GET", f"/v2/code/sessions/{sid}")
    assert g.status_code == 200 and g.env["data"]["execution_count"] == 1
    assert cc.delete(sid).env["data"] == {"deleted": True}
    assert sid not in cc.sessions()
    gen = cc.request("POST", "/v2/code/sessions")
    assert gen.status_code == 200
    assert cc.delete(gen.env["data"]["session_id"]).env["data"]["deleted"] is True


def test_python_and_javascript_share_a_session(cc, sid):
    cc.run("a = 1", session_id=sid)
    cc.run("let b = 2", language="javascript", session_id=sid)
    py = cc.run("a + 1", session_id=sid)
    js = cc.run("b + 1", language="javascript", session_id=sid)
    assert outputs_of(py, "execute_result")[0]["data"]["text/plain"] == "2"
    assert outputs_of(js, "execute_result")[0]["data"]["text/plain"] == "3"
    assert (py["execution_count"], js["execution_count"]) == (3, 4)


# --- outputs ---------------------------------------------------------------------------

def test_last_expression_is_an_execute_result(cc, sid):
    d = cc.run("x = 20\nx * 2 + 2", session_id=sid)
    [res] = outputs_of(d, "execute_result")
    assert res == {"output_type": "execute_result", "data": {"text/plain": "42"}, "metadata": {},
                   "execution_count": 1}
    js = cc.run("const o = {a: [1, 2]}; o", language="javascript", session_id=sid)
    [res] = outputs_of(js, "execute_result")
    assert res["data"]["text/plain"] == "{ a: [ 1, 2 ] }" and res["execution_count"] == 2
    check_outputs(d)


def test_exceptions_are_error_outputs_with_success_false(cc):
    r = cc.execute("def f():\n    raise ValueError('bad value')\nf()")
    assert r.status_code == 200 and r.env["success"] is False
    d = r.env["data"]
    assert (d["status"], d["exit_code"]) == ("error", 1)
    [err] = outputs_of(d, "error")
    assert (err["ename"], err["evalue"]) == ("ValueError", "bad value")
    assert any("bad value" in line for line in err["traceback"])
    js = cc.run("null.x", language="javascript")
    [err] = outputs_of(js, "error")
    assert err["ename"] == "TypeError" and "null" in err["evalue"]
    v1 = cc.run("1/0", version=1)
    assert v1["traceback"] and "ZeroDivisionError" in v1["traceback"][-1]
    check_outputs(d)


# --- timeouts --------------------------------------------------------------------------

def test_timeout_interrupts_and_keeps_state(cc, sid):
    cc.run("kept = 41", session_id=sid)
    d = cc.run("import time\nprint('started', flush=True)\ntime.sleep(30)", session_id=sid,
               timeout=1)
    msg = "execution timed out after 1000ms and was interrupted"
    assert (d["status"], d["exit_code"], d["stdout"]) == ("timeout", 1, "started\n")
    assert d["stderr"].endswith(msg + "\n")
    [err] = outputs_of(d, "error")
    assert err["evalue"] == msg
    after = cc.run("kept + 1", session_id=sid)
    assert outputs_of(after, "execute_result")[0]["data"]["text/plain"] == "42"
    assert after["execution_count"] == 3


def test_timeout_that_ignores_the_interrupt_resets_the_session(cc, sid):
    cc.run("lost = 1", session_id=sid)
    d = cc.run("import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass",
               session_id=sid, timeout=1)
    msg = "execution timed out after 1000ms; session state was reset"
    assert d["status"] == "timeout" and d["stderr"].endswith(msg + "\n")
    assert outputs_of(d, "error")[0]["evalue"] == msg
    after = cc.run("'lost' in globals()", session_id=sid)
    assert outputs_of(after, "execute_result")[0]["data"]["text/plain"] == "False"
    assert after["execution_count"] == 3


def test_javascript_timeout_keeps_the_context(cc, sid):
    cc.run("let total = 5", language="javascript", session_id=sid)
    d = cc.run("while (true) {}", language="javascript", session_id=sid, timeout=1)
    assert d["status"] == "timeout"
    assert outputs_of(d, "error")[0]["evalue"] == "execution timed out after 1000ms and was interrupted"
    after = cc.run("total * 2", language="javascript", session_id=sid)
    assert outputs_of(after, "execute_result")[0]["data"]["text/plain"] == "10"


# --- user and cwd --------------------------------------------------------------------

@pytest.mark.parametrize("user", ["root", "no-such-user-here"])
def test_a_user_paddock_cannot_become_is_a_process_error(cc, user):
    sid = new_id("user")
    r = cc.execute("print(1)", session_id=sid, user=user)
    assert r.status_code == 200 and r.env["success"] is False
    d = r.env["data"]
    assert (d["status"], d["exit_code"], d["stdout"]) == ("error", 1, "")
    [err] = d["outputs"]
    assert err["ename"] == "ProcessError" and user in err["evalue"]
    assert sid not in cc.sessions()


def test_the_user_of_a_session_cannot_change(cc, sid):
    assert cc.run("1", session_id=sid, user="sandbox")["status"] == "ok"
    r = cc.execute("1", session_id=sid, user="root")
    assert r.status_code == 400 and "cannot change" in r.env["message"]
    assert cc.run("import os; os.getuid() != 0", session_id=sid)["status"] == "ok"


def test_cwd_must_be_a_directory_under_the_workspace(cc, sid):
    cc.run("import os\nos.makedirs('sub', exist_ok=True)\nopen('file.txt', 'w').close()",
           session_id=sid)
    for bad in ("file.txt", "/etc", "missing-dir", "../.."):
        r = cc.execute("1", session_id=sid, cwd=bad)
        assert r.status_code == 422 and r.env["errors"][0]["location"] == ["body", "cwd"], bad
    for good in ("sub", "/workspace/sub", "/workspace"):
        assert cc.run("1", session_id=sid, cwd=good)["status"] == "ok"
    # A bad cwd for a session that does not exist yet leaves no session behind.
    fresh = new_id("cwd")
    assert cc.execute("1", session_id=fresh, cwd="nope").status_code == 422
    assert fresh not in cc.sessions()


# --- output cap and limits -------------------------------------------------------------

def test_output_cap_keeps_the_head_and_says_so(stacks):
    cc = CodeClient(stacks.get("code-cap", {"PADDOCK_CODE_OUTPUT_MAX_CHARS": "1000"}))
    d = cc.run("print('é' * 1500)")
    note = "[output truncated at 1000 characters]\n"
    assert d["stdout"] == "é" * 1000
    assert d["stderr"] == note
    assert d["outputs"][-1] == {"output_type": "stream", "name": "stderr", "text": note}
    small = cc.run("print('ok')")
    assert (small["stdout"], small["stderr"]) == ("ok\n", "")


def test_session_limits_answer_429_and_never_evict(stacks):
    env = {"AIO_CODE_MAX_SESSIONS": "2", "AIO_KERNEL_MAX_SESSIONS": "1"}
    cc = CodeClient(stacks.get("code-limits", env))
    kernel = cc.run("x = 1", session_id="k1")
    assert kernel["status"] == "ok"
    tier = cc.request("GET", "/v2/code/info").env["data"]["backend"]
    if tier == "kernel":
        r = cc.execute("1", session_id="k2")
        assert r.status_code == 429
        assert r.env["message"] == "Maximum number of kernel sessions (1) reached"
    assert cc.run("1", language="javascript", session_id="j1")["status"] == "ok"
    r = cc.execute("1", language="javascript", session_id="j2")
    assert r.status_code == 429 and r.env["message"] == "Maximum number of sessions (2) reached"
    # The sessions that exist keep working.
    assert outputs_of(cc.run("x + 1", session_id="k1"), "execute_result")[0]["data"]["text/plain"] == "2"
    for sid in ("k1", "j1"):
        cc.delete(sid)
    assert cc.run("1", session_id="k2")["status"] == "ok"
    cc.delete("k2")


# --- what a run writes that JSON cannot carry ------------------------------------------

def kernel_tier(cc):
    return cc.request("GET", "/v2/code/info").env["data"]["backend"] == "kernel"


NAN_DISPLAY = """
from IPython.display import display
display({'text/plain': 'x'}, raw=True, metadata={'a': float('nan'), 'b': float('-inf')})
"""


@pytest.mark.parametrize("version", [1, 2])
def test_nan_and_infinity_in_outputs_are_null(cc, version):
    if not kernel_tier(cc):
        pytest.skip("display metadata needs the kernel tier")
    # Python's json.dumps writes NaN and -Infinity; the answer (checked strictly by the
    # client) carries null in their place.
    d = cc.run(NAN_DISPLAY, version=version)
    assert [o["metadata"] for o in outputs_of(d, "display_data")] == [{"a": None, "b": None}], d


def forged_reply(payload):
    """Code that writes its own cell reply on the harness's channel, then lets the real
    one come too; payload is a Python expression of bytes, the result's text."""
    return ("import os, time\n"
            "os.write(63, b'{\"return_code\":0,\"status\":\"ok\",\"result\":{\"text/plain\":\"' + "
            f"{payload}" " + b'\"},\"display\":[]}\\n')\n"
            "time.sleep(0.3)")


@pytest.mark.parametrize("version", [1, 2])
def test_a_forged_reply_that_is_not_utf8_never_reaches_the_client(cc, version):
    if not kernel_tier(cc):
        pytest.skip("the forged line is the kernel tier's")
    r = cc.execute(forged_reply(r"b'\xff\xfe'"), version=version)
    # Strictly parsed by the client: UTF-8 and JSON, whatever the run is said to be.
    assert r.status_code == 200, r.text[:300]
    assert "\ufffd" not in r.text and "\\xff" not in str(r.env["data"]["outputs"]), r.env
    assert cc.run("print('next')")["stdout"] == "next\n"


def test_a_reply_too_large_for_a_frame_is_413_and_harms_nothing(cc):
    if not kernel_tier(cc):
        pytest.skip("the forged line is the kernel tier's")
    sid = new_id()
    assert cc.run("x = 41", session_id=sid)["status"] == "ok"
    # 15 MiB of control characters grows six-fold once escaped: past the 32 MiB a reply
    # between sessiond and the worker may carry.
    r = cc.execute(forged_reply(r"b'\x01' * (15 << 20)"), session_id=sid)
    assert r.status_code == 413, r.text[:300]
    assert "32 MiB" in r.env["message"], r.env
    # Not the daemon's failure: the session and its state are still there.
    assert outputs_of(cc.run("x + 1", session_id=sid), "execute_result")[0]["data"]["text/plain"] == "42"
    cc.delete(sid)
