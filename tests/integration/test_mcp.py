# SPDX-License-Identifier: MIT
"""The MCP endpoint through the real nginx, worker and sessiond: the official TypeScript SDK
client (tests/mcp/scenarios.mjs) connects, lists the tools, runs Python with state kept,
bash, the editor, files up and down, images, progress notifications, cancellation and two
isolated sessions; raw HTTP checks the transport's rules and JSON-RPC's answers to bad
messages; MCP Inspector's CLI drives it headless."""

import base64
import json
import os
import re
import subprocess
import time

import pytest
import requests

import paddock_stack as ps

TOKEN = "mcp-test-token"
ALLOWED_ORIGIN = "https://agent.example"
MCP_DIR = os.path.join(ps.SOURCE_DIR, "tests", "mcp")
NODE_MODULES = os.path.join(MCP_DIR, "node_modules")
LATEST = "2025-11-25"
JSON_ACCEPT = "application/json, text/event-stream"

HAS_IPYTHON = subprocess.run(["/usr/bin/python3", "-c", "import IPython, matplotlib"],
                             capture_output=True).returncode == 0
needs_kernel = pytest.mark.skipif(not HAS_IPYTHON, reason="IPython and matplotlib are not "
                                  "installed for /usr/bin/python3: no kernel tier for figures")


@pytest.fixture(scope="module")
def mcp_stack(stacks):
    if not os.path.isdir(os.path.join(NODE_MODULES, "@modelcontextprotocol", "sdk")):
        pytest.fail("the MCP test clients are not installed: run scripts/deps.sh (make deps)")
    return stacks.get("mcp", {"PADDOCK_AUTH_TOKENS": TOKEN,
                              "PADDOCK_MCP_ALLOWED_ORIGINS": ALLOWED_ORIGIN})


@pytest.fixture
def mcp(mcp_stack):
    """A raw client with an MCP session of its own (raw.sid), ended after the test."""
    raw = Raw(mcp_stack)
    raw.sid, raw.init = raw.initialize()
    yield raw
    raw.delete(raw.sid)


def mcp_url(stack):
    return stack.base_url + "/mcp"


def scenario(stack, name, token=TOKEN):
    """Run one SDK scenario against the stack; what it saw."""
    p = subprocess.run(["node", os.path.join(MCP_DIR, "scenarios.mjs"), name, mcp_url(stack),
                        token], capture_output=True, text=True, timeout=300, cwd=MCP_DIR)
    assert p.returncode == 0, f"scenario {name} failed ({p.returncode}):\n{p.stderr[-3000:]}"
    return json.loads(p.stdout)


def texts(result):
    return [c["text"] for c in result.get("content", []) if c["type"] == "text"]


def joined(result):
    return "".join(texts(result))


class Raw:
    """JSON-RPC over plain HTTP: every header and body as the test gives it."""

    def __init__(self, stack, token=TOKEN):
        self.url = mcp_url(stack)
        self.http = requests.Session()
        self.headers = {"Content-Type": "application/json", "Accept": JSON_ACCEPT}
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        self.next_id = 0

    def post(self, body, session=None, headers=None, raw=False):
        h = dict(self.headers)
        if session:
            h["Mcp-Session-Id"] = session
        h.update(headers or {})
        data = body if raw else json.dumps(body)
        return self.http.post(self.url, data=data, headers=h, timeout=120)

    def request(self, method, params=None, session=None, headers=None):
        self.next_id += 1
        body = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            body["params"] = params
        return self.post(body, session, headers)

    def initialize(self, version=LATEST):
        r = self.request("initialize", {"protocolVersion": version, "capabilities": {},
                                        "clientInfo": {"name": "raw", "version": "1"}})
        assert r.status_code == 200, (r.status_code, r.text)
        return r.headers["Mcp-Session-Id"], r.json()

    def delete(self, session, headers=None):
        h = dict(self.headers)
        h["Mcp-Session-Id"] = session
        h.update(headers or {})
        return self.http.delete(self.url, headers=h, timeout=60)


def rpc_error(r, status, code, rid=None):
    """The answer is a JSON-RPC error with code, sent with HTTP status."""
    assert r.status_code == status, (r.status_code, r.text[:300])
    assert r.headers["Content-Type"].startswith("application/json"), r.headers
    body = r.json()
    assert body["jsonrpc"] == "2.0" and body["id"] == rid, body
    assert body["error"]["code"] == code and body["error"]["message"], body
    return body["error"]


def session_exists(stack, sid):
    r = requests.get(f"{stack.base_url}/sessions/{sid}", timeout=30,
                     headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code in (200, 404), (r.status_code, r.text)
    return r.status_code == 200


def cancelled_count(stack):
    r = requests.get(stack.base_url + "/metrics", timeout=30,
                     headers={"Authorization": f"Bearer {TOKEN}"})
    m = re.search(r'^paddock_executions_total\{outcome="cancelled"\} (\d+)$', r.text, re.M)
    assert m, r.text[:2000]
    return int(m.group(1))


# --- the SDK client -----------------------------------------------------------------------

def test_a_session_end_to_end_with_the_sdk(mcp_stack):
    o = scenario(mcp_stack, "basic")
    assert o["protocolVersion"] == LATEST
    assert o["server"]["name"] == "paddock" and o["capabilities"] == {"tools": {"listChanged": False}}
    assert "sandbox" in o["instructions"]
    tools = {t["name"]: t for t in o["tools"]}
    assert set(tools) == {"code_execution", "bash_code_execution", "text_editor_code_execution",
                          "list_files", "read_file", "write_file"}
    for t in tools.values():
        assert t["inputSchema"]["type"] == "object" and t["description"], t
    assert tools["code_execution"]["inputSchema"]["required"] == ["code"]
    assert set(tools["text_editor_code_execution"]["inputSchema"]["properties"]["command"]["enum"]) == \
        {"view", "create", "str_replace", "insert", "undo_edit"}
    assert o["ping"] == {}
    # Python keeps its state between calls; the last expression is the result.
    assert o["set"]["isError"] is False and texts(o["set"]) == ["set\n"]
    assert texts(o["get"]) == ["42"] and o["get"]["isError"] is False
    # bash is one shell: its directory and exports stay.
    assert texts(o["bash2"]) == ["/tmp kept\n"]
    # A failing program is a result with isError and its stderr, not a JSON-RPC error.
    assert o["bashFail"]["isError"] is True and texts(o["bashFail"]) == ["to-stdout\n", "to-stderr\n"]
    assert o["pyFail"]["isError"] is True
    assert texts(o["pyFail"])[0] == "before\n"
    assert "ValueError: bad value" in joined(o["pyFail"]) and "\x1b[" not in joined(o["pyFail"])
    assert o["missingArg"]["isError"] is True and "code is required" in joined(o["missingArg"])
    # The editor, with the Otari tool's fields and messages.
    assert texts(o["create"])[0] == "File created: notes/a.txt\n"
    assert texts(o["replace"])[0] == "Edited notes/a.txt\n"
    assert texts(o["view"]) == ["one\nthree\n"]
    assert texts(o["undo"])[0] == "Reverted notes/a.txt\n"
    assert texts(o["viewAfterUndo"]) == ["one\ntwo\n"]
    assert o["editorBad"]["isError"] is True and "old_str not found" in joined(o["editorBad"])
    # Files up and down: text as text, bytes as a base64 blob, the same bytes Python reads.
    assert o["writeText"]["isError"] is False and "Wrote 7 bytes to up/hello.txt" in joined(o["writeText"])
    assert texts(o["readText"]) == ["héllo\n"]
    assert o["writeBlob"]["isError"] is False
    blob = o["readBlob"]["content"][0]
    assert blob["type"] == "resource" and blob["resource"]["blob"] == o["sentBlob"], blob
    assert blob["resource"]["uri"] == "file:///workspace/up/data.bin"
    assert texts(o["pyReadsBlob"]) == ["[0, 1, 2, 253, 254, 255, 10, 13]\n"]
    assert o["badBase64"]["isError"] is True and "base64" in joined(o["badBase64"])
    listing = json.loads(joined(o["list"]))
    assert sorted(f["path"] for f in listing["files"]) == ["up/data.bin", "up/hello.txt"]
    assert o["readMissing"]["isError"] is True and "up/missing.txt" in joined(o["readMissing"])
    assert o["readOutside"]["isError"] is True and "outside" in joined(o["readOutside"])
    # An unknown tool is a protocol error: invalid params.
    assert o["unknownTool"]["code"] == -32602 and "no_such_tool" in o["unknownTool"]["thrown"]
    # The client ended the session: its sandbox is gone.
    assert not session_exists(mcp_stack, o["sessionId"])


def test_an_mcp_session_is_a_paddock_session_ended_by_delete(mcp_stack):
    sid = scenario(mcp_stack, "open")["sessionId"]
    raw = Raw(mcp_stack)
    assert session_exists(mcp_stack, sid)
    assert raw.request("ping", session=sid).json()["result"] == {}
    r = raw.delete(sid)
    assert r.status_code == 204 and not r.content, (r.status_code, r.text)
    assert not session_exists(mcp_stack, sid)
    # An ended session is 404 for every message and for DELETE, so the client starts anew.
    rpc_error(raw.request("ping", session=sid), 404, -32600, raw.next_id)
    rpc_error(raw.request("tools/call", {"name": "code_execution", "arguments": {"code": "1"}},
                          session=sid), 404, -32600, raw.next_id)
    for note in ({"jsonrpc": "2.0", "method": "notifications/initialized"},
                 {"jsonrpc": "2.0", "method": "notifications/cancelled",
                  "params": {"requestId": 1}}):
        rpc_error(raw.post(note, session=sid), 404, -32600)
    rpc_error(raw.delete(sid), 404, -32600)


@needs_kernel
def test_figures_come_back_as_images(mcp_stack):
    o = scenario(mcp_stack, "image")
    plot = o["plot"]
    assert plot["isError"] is False, plot
    # What it printed, then the figure (stderr may follow: matplotlib's note that it builds
    # its font cache in a new home).
    kinds = [c["type"] for c in plot["content"]]
    assert kinds[:2] == ["text", "image"] and kinds.count("image") == 1, plot
    assert plot["content"][0]["text"] == "drawn\n"
    image = plot["content"][1]
    assert image["mimeType"] == "image/png"
    png = base64.b64decode(image["data"], validate=True)
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 1000
    # A PNG the code saved is an image when read.
    assert "fig.png" in joined(o["save"])
    img = o["readPng"]["content"][0]
    assert img["type"] == "image" and img["mimeType"] == "image/png"
    assert base64.b64decode(img["data"], validate=True).startswith(b"\x89PNG")


def test_output_streams_as_progress_notifications(mcp_stack):
    o = scenario(mcp_stack, "progress")
    ev, res = o["events"], o["result"]
    assert res["isError"] is False and texts(res) == ["first\nlast\n", "err\n"], res
    # The first line arrives while the code still sleeps, long before the result (in as
    # many notifications as the program made writes).
    early = [e for e in ev if e["t"] < res["ms"] - 1000]
    assert "".join(e["message"] for e in early) == "first\n", (ev, res["ms"])
    assert "".join(e["message"] for e in ev) == "first\nerr\nlast\n", ev
    # progress grows with every notification, as the specification requires.
    values = [e["progress"] for e in ev]
    assert values == sorted(set(values)), values
    b = o["bashEvents"]
    assert "".join(e["message"] for e in b) == "one\ntwo\n", b
    early = [e for e in b if e["t"] < o["bashResult"]["ms"] - 500]
    assert "".join(e["message"] for e in early) == "one\n", (b, o["bashResult"])


def test_cancellation_interrupts_the_run_and_keeps_the_session(mcp_stack):
    before = cancelled_count(mcp_stack)
    o = scenario(mcp_stack, "cancel")
    assert o["before"]["isError"] is False
    # The SDK rejects the call it cancelled at once.
    assert "changed my mind" in o["cancelled"]["thrown"], o["cancelled"]
    # The sandbox was interrupted (the code slept 60 s), the session's state is kept, and
    # the next call runs.
    assert o["after"]["isError"] is False and texts(o["after"]) == ["yes\n"], o
    assert o["sinceCancelMs"] < 20000, o
    assert cancelled_count(mcp_stack) == before + 1


def test_two_mcp_sessions_are_isolated(mcp_stack):
    o = scenario(mcp_stack, "isolation")
    assert o["a"] != o["b"]
    assert o["aSet"]["isError"] is False
    assert texts(o["bVar"]) == ["False\n"]
    assert o["bRead"]["isError"] is True
    assert o["bFind"]["isError"] is False
    seen = joined(o["bFind"]).split("\n")
    assert "a-secret.txt" not in seen, seen
    # ps in B sees no process of A: A's sleeper counts 1 there, 0 here.
    assert seen[-2] == "0", seen
    a_seen = joined(o["aFind"]).split("\n")
    assert "a-secret.txt" in a_seen and a_seen[-2] == "1", a_seen
    assert json.loads(joined(o["bList"]))["files"] == []


def test_without_the_token_the_connection_is_refused(mcp_stack):
    o = scenario(mcp_stack, "noauth", token="")
    assert o["connected"] is False and o["code"] == 401, o
    r = Raw(mcp_stack, token="wrong").request("initialize", {"protocolVersion": LATEST})
    assert r.status_code == 401 and r.headers["WWW-Authenticate"].lower().startswith("bearer")


def test_mcp_inspector_cli_lists_and_calls_the_tools(mcp_stack):
    cli = os.path.join(NODE_MODULES, "@modelcontextprotocol", "inspector", "clients",
                       "launcher", "build", "index.js")
    home = os.path.join(mcp_stack.state_dir, "inspector-home")
    os.makedirs(home, exist_ok=True)
    env = dict(os.environ, HOME=home)
    base = ["node", cli, "--cli", mcp_url(mcp_stack), "--transport", "http",
            "--header", f"Authorization: Bearer {TOKEN}"]
    p = subprocess.run(base + ["--method", "tools/list", "--strict"], capture_output=True,
                       text=True, timeout=180, env=env)
    # --strict fails on schemas that do not port across clients.
    assert p.returncode == 0, (p.returncode, p.stdout[-2000:], p.stderr[-2000:])
    assert {t["name"] for t in json.loads(p.stdout)["tools"]} >= {"code_execution", "read_file"}
    p = subprocess.run(base + ["--method", "tools/call", "--tool-name", "bash_code_execution",
                               "--tool-arg", "command=echo $((6*7))"],
                       capture_output=True, text=True, timeout=180, env=env)
    assert p.returncode == 0, (p.returncode, p.stdout[-2000:], p.stderr[-2000:])
    out = json.loads(p.stdout)
    assert out["isError"] is False and texts(out) == ["42\n"], out


def call_raw(raw, sid, name, args, **kw):
    r = raw.request("tools/call", {"name": name, "arguments": args}, session=sid, **kw)
    assert r.status_code == 200, (r.status_code, r.text[:500])
    return r.json()["result"]


@needs_kernel
def test_rich_outputs_the_program_forges_stay_well_formed(mcp):
    raw, sid = mcp, mcp.sid
    res = call_raw(raw, sid, "code_execution", {"code": (
        "from IPython.display import display\n"
        "display({'image/png': 'not base64 \" </script> !!!', 'text/plain': 'the text'},"
        " raw=True)\n"
        "display({'image/png': 12, 'text/plain': 'fallback'}, raw=True)\n")})
    # An image that is not base64 would make clients refuse the whole result: its text.
    assert res["isError"] is False, res
    assert [c["type"] for c in res["content"]] == ["text", "text"], res
    assert texts(res) == ["the text", "fallback"], res


def test_terminal_sequences_go_and_the_text_stays(mcp):
    raw, sid = mcp, mcp.sid
    res = call_raw(raw, sid, "bash_code_execution", {"command": (
        "printf '\\033[1;31mred\\033[0m plain\\n'; "
        "printf 'before \\033[ 123 456\\n789 secret 000\\n'; "
        "printf '\\033]0;title\\007osc gone\\n'; printf '\\033cafter reset\\n'")})
    assert texts(res) == ["red plain\nbefore [ 123 456\n789 secret 000\nosc gone\n"
                          "after reset\n"], res


def test_a_dropped_stream_is_no_cancel(mcp, mcp_stack):
    """The transport's rule: a disconnect is not a cancel. The call runs to its end (its
    state changes kept); the session takes the next call once it has."""
    raw, sid = mcp, mcp.sid
    before = cancelled_count(mcp_stack)
    body = {"jsonrpc": "2.0", "id": 99, "method": "tools/call",
            "params": {"name": "code_execution", "_meta": {"progressToken": 1},
                       "arguments": {"code": "import time\nprint('going', flush=True)\n"
                                             "time.sleep(1.5)\nfinished = True\n"
                                             "open('/workspace/done.txt', 'w').write('yes')"}}}
    h = dict(raw.headers, **{"Mcp-Session-Id": sid})
    with requests.post(raw.url, data=json.dumps(body), headers=h, stream=True,
                       timeout=60) as r:
        assert r.headers["Content-Type"].startswith("text/event-stream")
        for line in r.iter_lines():
            if line.startswith(b"data: ") and b"going" in line:
                break
    # The connection is closed here, with the code still sleeping.
    deadline = time.monotonic() + 20
    while True:
        res = call_raw(raw, sid, "code_execution", {"code": "print(finished)"})
        if not res["isError"] or time.monotonic() > deadline:
            break
        assert "busy" in joined(res) or "running another call" in joined(res), res
        time.sleep(0.1)
    assert texts(res) == ["True\n"], res
    assert texts(call_raw(raw, sid, "read_file", {"path": "done.txt"})) == ["yes"]
    assert cancelled_count(mcp_stack) == before


# --- the transport and JSON-RPC, raw -------------------------------------------------------

def test_malformed_messages_are_answered_per_json_rpc(mcp):
    raw, sid = mcp, mcp.sid
    rpc_error(raw.post("{not json", sid, raw=True), 400, -32700)
    rpc_error(raw.post(b"\xff\xfe{}", sid, raw=True), 400, -32700)
    rpc_error(raw.post([{"jsonrpc": "2.0", "id": 1, "method": "ping"}], sid), 400, -32600)
    rpc_error(raw.post("", sid, raw=True), 400, -32600)
    rpc_error(raw.post({"id": 1, "method": "ping"}, sid), 400, -32600)
    rpc_error(raw.post({"jsonrpc": "1.0", "id": 1, "method": "ping"}, sid), 400, -32600)
    rpc_error(raw.post({"jsonrpc": "2.0", "id": None, "method": "ping"}, sid), 400, -32600)
    rpc_error(raw.post({"jsonrpc": "2.0", "id": 1.5, "method": "ping"}, sid), 400, -32600)
    # Integers past 2^53 are not exact in every peer (the parser saturates larger ones).
    rpc_error(raw.post('{"jsonrpc":"2.0","id":99999999999999999999,"method":"ping"}', sid,
                       raw=True), 400, -32600)
    r = raw.post({"jsonrpc": "2.0", "id": 2**53 - 1, "method": "ping"}, sid)
    assert r.json() == {"jsonrpc": "2.0", "id": 2**53 - 1, "result": {}}
    rpc_error(raw.post({"jsonrpc": "2.0", "id": 1, "method": 5}, sid), 400, -32600)
    rpc_error(raw.post({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": [1]}, sid),
              400, -32600)
    rpc_error(raw.post({"jsonrpc": "2.0", "id": 1}, sid), 400, -32600)
    # A key or a name holding a NUL would say one thing to a reader of the body and
    # another to paddock: refused, never read as a shorter one.
    smuggle = ('{"jsonrpc":"2.0","id":1,"method":"ping","method\\u0000":"tools/call",'
               '"params":{"name":"bash_code_execution","arguments":{"command":"echo ran"}}}')
    rpc_error(raw.post(smuggle, sid, raw=True), 400, -32700)
    rpc_error(raw.post({"jsonrpc": "2.0", "id": 1, "method": "tools/call\u0000x"}, sid),
              400, -32600)
    rpc_error(raw.post({"jsonrpc": "2.0\u0000junk", "id": 1, "method": "ping"}, sid), 400,
              -32600)
    rpc_error(raw.request("tools/call", {"name": "code_execution\u0000x",
                                         "arguments": {"code": "1"}}, session=sid),
              200, -32602, raw.next_id)
    r = raw.request("tools/call", {"name": "text_editor_code_execution",
                                   "arguments": {"command": "create\u0000x", "path": "n.txt",
                                                 "file_text": "x"}}, session=sid)
    assert r.json()["result"]["isError"] is True, r.text
    # Well-formed requests that the server cannot serve are answered, with their id.
    rpc_error(raw.request("resources/list", session=sid), 200, -32601, raw.next_id)
    rpc_error(raw.request("tools/call", {"arguments": {}}, session=sid), 200, -32602,
              raw.next_id)
    rpc_error(raw.request("tools/call", {"name": "code_execution", "arguments": [1]},
                          session=sid), 200, -32602, raw.next_id)
    rpc_error(raw.request("tools/call", {"name": "nope"}, session=sid), 200, -32602,
              raw.next_id)
    rpc_error(raw.request("initialize", {}), 200, -32602, raw.next_id)
    # A string id comes back as it was sent.
    r = raw.post({"jsonrpc": "2.0", "id": "req-é", "method": "ping"}, sid)
    assert r.json() == {"jsonrpc": "2.0", "id": "req-é", "result": {}}
    # Notifications and the client's responses are accepted with 202 and no body.
    for msg in ({"jsonrpc": "2.0", "method": "notifications/initialized"},
                {"jsonrpc": "2.0", "method": "notifications/whatever", "params": {}},
                {"jsonrpc": "2.0", "id": 7, "result": {}},
                {"jsonrpc": "2.0", "id": 8, "error": {"code": 1, "message": "x"}},
                {"jsonrpc": "2.0", "method": "notifications/cancelled",
                 "params": {"requestId": 12345}}):
        r = raw.post(msg, sid)
        assert r.status_code == 202 and not r.content, (msg, r.status_code, r.text)
    # Bad arguments to a tool are a failing result the model can read.
    r = raw.request("tools/call", {"name": "bash_code_execution",
                                   "arguments": {"command": "x", "timeout_seconds": 0}},
                    session=sid)
    res = r.json()["result"]
    assert res["isError"] is True and "timeout_seconds" in joined(res), res
    # A path the model got wrong is its to fix, never "the session has ended".
    r = raw.request("tools/call", {"name": "write_file",
                                   "arguments": {"path": "f.txt", "content": "x"}}, session=sid)
    assert r.json()["result"]["isError"] is False
    for path in ("f.txt/under-a-file.txt", "/etc/passwd", "../x", "."):
        r = raw.request("tools/call", {"name": "write_file",
                                       "arguments": {"path": path, "content": "x"}},
                        session=sid)
        assert r.status_code == 200 and r.json()["result"]["isError"] is True, (path, r.text)
    # A long string id names a call too (it cannot be cancelled, but it runs).
    long_id = "x/" * 400
    r = raw.post({"jsonrpc": "2.0", "id": long_id, "method": "tools/call",
                  "params": {"name": "code_execution", "arguments": {"code": "print(5)"}}},
                 sid)
    assert r.json()["id"] == long_id and texts(r.json()["result"]) == ["5\n"], r.text
    # And after all of that the session works.
    r = raw.request("tools/call", {"name": "code_execution", "arguments": {"code": "6*7"}},
                    session=sid)
    assert texts(r.json()["result"]) == ["42"]


def test_transport_rules(mcp, mcp_stack):
    raw, sid, init = mcp, mcp.sid, mcp.init
    assert init["result"]["protocolVersion"] == LATEST
    assert re.fullmatch(r"[\x21-\x7e]+", sid), sid
    # A message after initialize needs the session; an unknown one has ended.
    rpc_error(raw.request("ping"), 400, -32600, raw.next_id)
    rpc_error(raw.request("ping", session=mcp_stack.node_name + "-" + "A" * 22), 404,
              -32600, raw.next_id)
    rpc_error(raw.request("ping", session="no such/thing"), 404, -32600, raw.next_id)
    # The protocol revision header, when sent, must be one served.
    r = raw.request("ping", session=sid, headers={"MCP-Protocol-Version": "2025-06-18"})
    assert r.json()["result"] == {}
    rpc_error(raw.request("ping", session=sid, headers={"MCP-Protocol-Version": "1999-01-01"}),
              400, -32600, raw.next_id)
    # Media types.
    rpc_error(raw.request("ping", session=sid, headers={"Content-Type": "text/plain"}), 415,
              -32600)
    rpc_error(raw.request("ping", session=sid, headers={"Accept": "text/html"}), 406, -32600)
    r = raw.request("ping", session=sid,
                    headers={"Content-Type": "application/json; charset=utf-8",
                             "Accept": "application/json"})
    assert r.status_code == 200 and r.json()["result"] == {}
    # No stream opened by GET: 405 with the methods there are.
    r = requests.get(raw.url, headers=raw.headers, timeout=30)
    assert r.status_code == 405 and set(r.headers["Allow"].split(", ")) == {"POST", "DELETE"}
    # A browser page on another origin is refused, with or without a session; an allowed
    # one is served.
    for origin in ("https://evil.example", "null", "https://agent.example.evil"):
        rpc_error(raw.request("ping", session=sid, headers={"Origin": origin}), 403, -32600)
        rpc_error(raw.request("initialize", {"protocolVersion": LATEST},
                              headers={"Origin": origin}), 403, -32600)
    rpc_error(raw.delete(sid, headers={"Origin": "https://evil.example"}), 403, -32600)
    r = raw.request("ping", session=sid, headers={"Origin": ALLOWED_ORIGIN})
    assert r.status_code == 200 and r.json()["result"] == {}
    # A call answered as a stream when the client asks for progress; the same result.
    r = raw.request("tools/call", {"name": "code_execution", "arguments": {"code": "print(1)"},
                                   "_meta": {"progressToken": "tok"}}, session=sid)
    assert r.headers["Content-Type"].startswith("text/event-stream"), r.headers
    msgs = [json.loads(line[6:]) for line in r.text.splitlines() if line.startswith("data: ")]
    notes = msgs[:-1]
    assert notes and all(m["method"] == "notifications/progress" and
                         m["params"]["progressToken"] == "tok" for m in notes), msgs
    assert "".join(m["params"]["message"] for m in notes) == "1\n", msgs
    assert notes[-1]["params"]["progress"] == 2, msgs
    assert msgs[-1]["id"] == raw.next_id and texts(msgs[-1]["result"]) == ["1\n"], msgs
    # Without a stream in Accept the same call is plain JSON.
    r = raw.request("tools/call", {"name": "code_execution", "arguments": {"code": "print(1)"},
                                   "_meta": {"progressToken": "tok"}}, session=sid,
                    headers={"Accept": "application/json"})
    assert r.headers["Content-Type"] == "application/json", r.headers
    assert texts(r.json()["result"]) == ["1\n"]
    assert raw.delete(sid).status_code == 204


def test_protocol_revisions_are_negotiated(mcp_stack):
    raw = Raw(mcp_stack)
    for asked, answered in (("2025-06-18", "2025-06-18"), (LATEST, LATEST),
                            ("2024-11-05", LATEST), ("9999-12-31", LATEST)):
        sid, init = raw.initialize(asked)
        assert init["result"]["protocolVersion"] == answered, (asked, init)
        assert raw.delete(sid).status_code == 204


def test_capacity_and_idle_reclaim_the_mcp_way(stacks):
    st = stacks.get("mcp-small", {"PADDOCK_AUTH_TOKENS": TOKEN, "PADDOCK_MAX_SESSIONS": "2",
                                  "PADDOCK_RETRY_AFTER_SECONDS": "7",
                                  "PADDOCK_IDLE_TIMEOUT_DEFAULT": "3"})
    raw = Raw(st)
    a, _ = raw.initialize()
    b, _ = raw.initialize()
    r = raw.request("initialize", {"protocolVersion": LATEST, "capabilities": {},
                                   "clientInfo": {"name": "c", "version": "1"}})
    err = rpc_error(r, 200, -32010, raw.next_id)
    assert err["data"] == {"retry_after": 7} and r.headers["Retry-After"] == "7", (err, r.headers)
    assert "Mcp-Session-Id" not in r.headers
    # Idle sessions are reclaimed; their clients then get 404 and start anew.
    deadline = time.monotonic() + 30
    while raw.request("ping", session=a).status_code != 404:
        assert time.monotonic() < deadline, "the idle MCP session was not reclaimed"
        time.sleep(0.2)
    c, _ = raw.initialize()
    assert raw.delete(c).status_code == 204
    raw.delete(b)
