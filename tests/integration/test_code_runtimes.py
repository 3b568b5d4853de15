# SPDX-License-Identifier: MIT
"""The code plane's info, capabilities, /v1/jupyter and /v1/nodejs routes through nginx,
and how the plane answers when a runtime is missing or a tier is pinned."""

import base64
import os
import stat
import subprocess
import tempfile

import pytest

import paddock_stack as ps
from code_client import CodeClient, check_outputs, outputs_of

PYTHON = "/usr/bin/python3"
NODE = "/usr/bin/node"


def _version(argv):
    out = subprocess.run(argv, capture_output=True, text=True, check=True)
    text = (out.stdout or out.stderr).strip()
    return text.split()[-1].lstrip("v")


def _has_ipython():
    return subprocess.run([PYTHON, "-I", "-c", "import IPython"], capture_output=True).returncode == 0


HAS_IPYTHON = _has_ipython()
needs_kernel = pytest.mark.skipif(not HAS_IPYTHON, reason="IPython is not installed for "
                                  f"{PYTHON} (scripts/deps.sh installs python3-ipython)")


@pytest.fixture(scope="module")
def cc(stack):
    return CodeClient(stack)


# --- info and capabilities ---------------------------------------------------------------

def test_info_reports_what_is_installed(cc):
    for version in (1, 2):
        r = cc.request("GET", f"/v{version}/code/info")
        assert r.status_code == 200
        d = r.env["data"]
        assert d["python"] == {"available": True, "version": _version([PYTHON, "--version"])}
        assert d["node"] == {"available": True, "version": _version([NODE, "--version"])}
        assert d["backend"] == ("kernel" if HAS_IPYTHON else "native")
        assert set(d["kinds"]) == {"python", "nodejs"} | ({"jupyter"} if HAS_IPYTHON else set())
        assert (d["max_sessions"], d["default_timeout"], d["max_timeout"]) == (20, 30, 900)
        # sessiond's general pool (pool_size, 2 by default) is warm for code sessions too.
        assert 0 <= d["prewarmed"] <= 2
        langs = {entry["language"]: entry for entry in d["languages"]}
        assert set(langs) == {"python", "javascript"}
        assert langs["python"]["aliases"] == ["python3"]
        assert set(langs["javascript"]["aliases"]) == {"node", "nodejs", "js"}
        assert langs["javascript"]["runtime_version"] == d["node"]["version"]
        assert langs["python"]["details"]["max_timeout_seconds"] == 900


def test_capabilities_describe_the_plane(cc):
    r = cc.request("GET", "/v1/capabilities")
    assert r.status_code == 200
    ci = r.env["data"]["code_interpreter"]
    assert ci["status"] == "ready"
    assert ci["backend"] == ("kernel" if HAS_IPYTHON else "native")
    assert set(ci["kinds"]) == {"code", "nodejs"} | ({"jupyter"} if HAS_IPYTHON else set())
    assert (ci["default_python"], ci["default_node"]) == (PYTHON, NODE)
    assert ci["warnings"] == []
    if HAS_IPYTHON:
        assert ci["missing"] == []
    else:
        assert any("IPython" in m for m in ci["missing"])
    assert r.env["data"]["sandbox"]["cgroup"] in ("v1", "v2")


def test_missing_node_is_503_and_capabilities_say_so(stacks):
    cc = CodeClient(stacks.get("code-no-node", {"PADDOCK_NODE_BIN": "/nonexistent/node"}))
    r = cc.execute("console.log(1)", language="javascript")
    assert r.status_code == 503 and "/nonexistent/node" in r.env["message"]
    r = cc.request("POST", "/v1/nodejs/execute", {"code": "1"})
    assert r.status_code == 503 and "/nonexistent/node" in r.env["message"]
    ci = cc.request("GET", "/v1/capabilities").env["data"]["code_interpreter"]
    assert "nodejs" not in ci["kinds"] and ci["default_node"] is None
    assert any("/nonexistent/node" in m for m in ci["missing"])
    info = cc.request("GET", "/v2/code/info").env["data"]
    assert info["node"] == {"available": False, "version": None}
    assert cc.run("print(1)")["stdout"] == "1\n"


def test_native_pin_runs_the_stdlib_harness_and_has_no_jupyter(stacks):
    cc = CodeClient(stacks.get("code-native", {"AIO_CODE_BACKEND": "native"}))
    assert cc.request("GET", "/v2/code/info").env["data"]["backend"] == "native"
    d = cc.run("import sys\n'IPython' in sys.modules")
    assert outputs_of(d, "execute_result")[0]["data"] == {"text/plain": "False"}
    r = cc.request("POST", "/v1/jupyter/execute", {"code": "1"})
    assert r.status_code == 501 and "native" in r.env["message"]
    r = cc.request("POST", "/v1/jupyter/sessions/create", {})
    assert r.status_code == 501
    ci = cc.request("GET", "/v1/capabilities").env["data"]["code_interpreter"]
    assert "jupyter" not in ci["kinds"] and ci["backend"] == "native"


@pytest.fixture(scope="module")
def python_without_ipython():
    """A python3 that cannot import IPython: Debian's, without its site directories."""
    d = tempfile.mkdtemp(prefix="paddock-noipy-")
    os.chmod(d, 0o755)
    path = os.path.join(d, "python3")
    with open(path, "w") as f:
        f.write(f"#!/bin/sh\nexec {PYTHON} -S \"$@\"\n")
    os.chmod(path, stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    yield path
    os.unlink(path)
    os.rmdir(d)


def test_kernel_pin_without_ipython_is_503_and_jupyter_501(stacks, python_without_ipython):
    env = {"PADDOCK_PYTHON_BIN": python_without_ipython, "AIO_CODE_BACKEND": "kernel"}
    cc = CodeClient(stacks.get("code-no-ipython", env))
    r = cc.execute("1")
    assert r.status_code == 503 and "IPython" in r.env["message"]
    r = cc.request("POST", "/v1/jupyter/execute", {"code": "1"})
    assert r.status_code == 501 and "IPython" in r.env["message"]
    ci = cc.request("GET", "/v1/capabilities").env["data"]["code_interpreter"]
    assert "jupyter" not in ci["kinds"] and "code" not in ci["kinds"]
    assert any("IPython" in m for m in ci["missing"])
    assert ci["status"] == "ready"  # node still answers


def test_settings_without_an_implementation_are_warned_about(stacks):
    env = {"AIO_JUPYTER_ENDPOINT": "http://127.0.0.1:9/"}
    cc = CodeClient(stacks.get("code-warnings", env))
    ci = cc.request("GET", "/v1/capabilities").env["data"]["code_interpreter"]
    assert any("AIO_JUPYTER_ENDPOINT" in w for w in ci["warnings"])


def test_prewarmed_counts_the_warm_pools(stacks):
    env = {"PADDOCK_POOL_SIZE": "0", "AIO_CODE_PREWARM": "1",
           "AIO_KERNEL_PREWARM": "1" if HAS_IPYTHON else "0"}
    cc = CodeClient(stacks.get("code-prewarm", env))
    want = 2 if HAS_IPYTHON else 1

    def prewarmed():
        return cc.request("GET", "/v2/code/info").env["data"]["prewarmed"] == want

    ps.wait_for(prewarmed, 60, f"{want} warm sandboxes")
    d = cc.run("print(3)", session_id="warm-1")
    assert d["stdout"] == "3\n" and d["execution_count"] == 1
    cc.delete("warm-1")
    none = CodeClient(stacks.get("code-no-pool", {"PADDOCK_POOL_SIZE": "0"}))
    assert none.request("GET", "/v2/code/info").env["data"]["prewarmed"] == 0


# --- /v1/nodejs ----------------------------------------------------------------------------

def test_nodejs_execute(cc):
    r = cc.request("POST", "/v1/nodejs/execute", {"code": "const xs = [1, 2, 3]\nxs.length"})
    assert r.status_code == 200
    d = r.env["data"]
    assert (d["language"], d["status"], d["stdout"], d["stderr"], d["exit_code"]) == (
        "javascript", "ok", "", "", 0)
    assert outputs_of(d, "execute_result")[0]["data"]["text/plain"] == "3"
    r = cc.request("POST", "/v1/nodejs/execute", {"code": "x = 1", "stateful": True})
    sid = r.env["data"]["session_id"]
    r = cc.request("POST", "/v1/nodejs/execute", {"code": "await Promise.resolve(x + 1)",
                                                   "session_id": sid})
    assert outputs_of(r.env["data"], "execute_result")[0]["data"]["text/plain"] == "2"
    assert r.env["data"]["execution_count"] == 2
    cc.delete(sid)
    assert cc.request("POST", "/v1/nodejs/execute", {}).status_code == 422


# --- /v1/jupyter -------------------------------------------------------------------------

@needs_kernel
def test_jupyter_outputs_carry_all_nine_keys_and_rich_data(cc):
    sid = "nb-" + os.urandom(4).hex()
    code = ("import pandas as pd\nfrom IPython.display import display\n"
            "df = pd.DataFrame({'a': [1, 2]})\ndisplay(df)\nprint('printed')\ndf.shape")
    r = cc.request("POST", "/v1/jupyter/execute", {"code": code, "session_id": sid})
    assert r.status_code == 200
    d = r.env["data"]
    cc.stack.session_ids.add(sid)
    check_outputs(d, all_keys=True)
    assert (d["kernel_name"], d["status"], d["session_id"], d["execution_count"]) == (
        "python3", "ok", sid, 1)
    [disp] = outputs_of(d, "display_data")
    assert "<table" in disp["data"]["text/html"]
    [res] = outputs_of(d, "execute_result")
    assert res["data"]["text/plain"] == "(2, 1)" and res["execution_count"] == 1
    assert outputs_of(d, "stream")[0]["text"] == "printed\n"

    fig = ("import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()")
    d = cc.request("POST", "/v1/jupyter/execute", {"code": fig, "session_id": sid}).env["data"]
    [png] = [o for o in outputs_of(d, "display_data") if "image/png" in o["data"]]
    raw = base64.b64decode(png["data"]["image/png"], validate=True)
    assert raw.startswith(b"\x89PNG\r\n\x1a\n")

    d = cc.request("POST", "/v1/jupyter/execute", {"code": "%who_ls", "session_id": sid}).env["data"]
    assert "df" in outputs_of(d, "execute_result")[0]["data"]["text/plain"]

    # The same id on the code route reaches the same namespace.
    same = cc.run("df.shape[0] * 10", session_id=sid)
    assert outputs_of(same, "execute_result")[0]["data"]["text/plain"] == "20"
    assert same["execution_count"] == 4
    cc.request("DELETE", f"/v1/jupyter/sessions/{sid}")


@needs_kernel
def test_jupyter_timeout_interrupts_and_keeps_the_kernel(cc):
    r = cc.request("POST", "/v1/jupyter/sessions/create", {"kernel_name": "python3"})
    assert r.status_code == 200
    sid = r.env["data"]["session_id"]
    cc.stack.session_ids.add(sid)
    cc.request("POST", "/v1/jupyter/execute", {"code": "value = 7", "session_id": sid})
    r = cc.request("POST", "/v1/jupyter/execute",
                   {"code": "import time\ntime.sleep(60)", "session_id": sid, "timeout": 1})
    d = r.env["data"]
    assert r.env["success"] is False and d["status"] == "timeout"
    check_outputs(d, all_keys=True)
    assert outputs_of(d, "error")[0]["evalue"] == "execution timed out after 1000ms and was interrupted"
    d = cc.request("POST", "/v1/jupyter/execute", {"code": "value", "session_id": sid}).env["data"]
    assert outputs_of(d, "execute_result")[0]["data"]["text/plain"] == "7"


@needs_kernel
def test_jupyter_sessions_list_create_delete(cc):
    a = cc.request("POST", "/v1/jupyter/sessions/create", {"session_id": "jup-a"})
    assert a.status_code == 200 and a.env["data"]["session_id"] == "jup-a"
    cc.stack.session_ids.add("jup-a")
    assert cc.request("POST", "/v1/jupyter/sessions/create", {"session_id": "jup-a"}).status_code == 409
    cc.request("POST", "/v1/jupyter/sessions/create", {"session_id": "jup-b"})
    cc.stack.session_ids.add("jup-b")
    listed = cc.request("GET", "/v1/jupyter/sessions").env["data"]["sessions"]
    assert {"jup-a", "jup-b"} <= set(listed)
    assert listed["jup-a"]["kernel_name"] == "python3"
    r = cc.request("DELETE", "/v1/jupyter/sessions/jup-a")
    assert r.env["data"] == {"deleted": True}
    r = cc.request("DELETE", "/v1/jupyter/sessions")
    assert r.status_code == 200 and r.env["data"]["deleted"] >= 1
    assert cc.request("GET", "/v1/jupyter/sessions").env["data"]["sessions"] == {}


@needs_kernel
def test_jupyter_bad_input(cc):
    r = cc.request("POST", "/v1/jupyter/execute", {"code": "1", "kernel_name": "ruby"})
    assert r.status_code == 422 and r.env["errors"][0]["location"] == ["body", "kernel_name"]
    assert cc.request("POST", "/v1/jupyter/execute", {"kernel_name": "python3"}).status_code == 422
    r = cc.request("POST", "/v1/jupyter/execute", {"code": "1", "timeout": 0})
    assert r.status_code == 422
