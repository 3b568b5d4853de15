# SPDX-License-Identifier: MIT
"""Malformed input of every kind gets a 4xx with a detail, changes nothing, and the
session (and the stack) keep answering afterwards."""

import json

import pytest

import paddock_stack as ps

MiB = 1024 * 1024
JSON = {"Content-Type": "application/json"}


def still_fine(client, sid):
    r = client.run(sid, "print(counter)")
    assert r.stdout == "1\n", r
    client.stack.assert_alive()


@pytest.fixture
def live(client):
    sid = client.new_session()
    client.run(sid, "counter = 1")
    yield sid
    still_fine(client, sid)
    client.destroy(sid)


def post_exec(client, sid, body, headers=JSON):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return client.request("POST", f"/sessions/{sid}/exec", data=data, headers=headers)


def refused(r, status, *words):
    """Exactly status, with the API's error body and nothing else in it: {"detail": "<a
    sentence>"}, the sentence holding each of words."""
    assert r.status_code == status, f"status {r.status_code}, wanted {status}: {r.text[:300]}"
    assert isinstance(r.parsed, dict) and set(r.parsed) == {"detail"}, r.text[:300]
    for w in words:
        assert w in r.parsed["detail"], f"{w!r} not in {r.parsed['detail']!r}"


# --- the exec body ------------------------------------------------------------------

@pytest.mark.parametrize("raw", [
    b'{"tool": "code_execution", "input": {"code": "print(1)"}',  # cut short
    b'{"tool": "code_execution", "input": {"code": "print(1)"}}}',  # trailing junk
    b"{tool: code_execution}",
    b"",
    b"\x00\x01\x02",
    b'{"tool": "code_execution", "input": {"code": "print(1)"}} {"again": 1}',
    b"[]", b'"code_execution"', b"42", b"null", b"true",
])
def test_malformed_or_non_object_json(client, live, raw):
    # An empty body, one that is not JSON and one that is not an object alike: 422.
    refused(post_exec(client, live, raw), 422)


def test_invalid_utf8_in_the_body(client, live):
    raw = b'{"tool": "code_execution", "input": {"code": "print(\'\xff\xfe\')"}}'
    refused(post_exec(client, live, raw), 422, "UTF-8")
    raw = b'{"tool": "code_execution", "input": {"code": "print(1)"}, "x": "\xc0\xaf"}'
    refused(post_exec(client, live, raw), 422, "UTF-8")


@pytest.mark.parametrize("body", [
    {"tool": 5, "input": {"code": "print(1)"}},
    {"tool": None, "input": {"code": "print(1)"}},
    {"tool": ["code_execution"], "input": {"code": "print(1)"}},
    {"tool": "code_execution", "input": "print(1)"},
    {"tool": "code_execution", "input": None},
    {"tool": "code_execution", "input": ["print(1)"]},
    {"tool": "code_execution", "input": {"code": 5}},
    {"tool": "code_execution", "input": {"code": None}},
    {"tool": "code_execution", "input": {"code": ["print(1)"]}},
    {"tool": "code_execution", "input": {"code": "print(1)"}, "timeout_seconds": "5"},
    {"tool": "code_execution", "input": {"code": "print(1)"}, "timeout_seconds": 1.5},
    {"tool": "code_execution", "input": {"code": "print(1)"}, "timeout_seconds": True},
    {"tool": "code_execution", "input": {"code": "print(1)"}, "timeout_seconds": 0},
    {"tool": "code_execution", "input": {"code": "print(1)"}, "timeout_seconds": -1},
    {"tool": "code_execution", "input": {"code": "print(1)"}, "timeout_seconds": 10**30},
    {"tool": "code_execution", "input": {"code": "print(1)"}, "tool_use_id": 5},
    {"tool": "code_execution", "input": {"code": "print(1)"}, "tool_use_id": {"a": 1}},
    {"tool": "bash_code_execution", "input": {"command": 5}},
    {"tool": "bash_code_execution", "input": {"code": "echo wrong field"}},
    {"tool": "text_editor_code_execution", "input": {"command": "view", "path": 5}},
    {"tool": "text_editor_code_execution", "input": "view"},
], ids=lambda b: json.dumps(b)[:60])
def test_wrong_types_are_422(client, live, body):
    refused(post_exec(client, live, body), 422)


@pytest.mark.parametrize("body", [
    {"input": {"code": "print(1)"}},
    {"tool": "code_execution"},
    {"tool": "code_execution", "input": {}},
    {"tool": "bash_code_execution", "input": {}},
    {"tool": "text_editor_code_execution", "input": {}},
    {"tool": "text_editor_code_execution", "input": {"path": "x"}},
    {},
], ids=lambda b: json.dumps(b)[:60])
def test_missing_fields(client, live, body):
    # A missing field is a 422 like a wrong-typed one, `tool` too (400 is for a tool that is
    # not one of the three); the detail names the field.
    tool = body.get("tool")
    field = ("tool" if not tool else "input" if "input" not in body else
             None if tool == "text_editor_code_execution" else "input.")
    refused(post_exec(client, live, body), 422, *([field] if field else []))


@pytest.mark.parametrize("tool", ["rm_rf", "python", "bash", "", "CODE_EXECUTION",
                                  "code_execution ", "code_execution_20250825"])
def test_unknown_tool_is_400(client, live, tool):
    refused(post_exec(client, live, {"tool": tool, "input": {"code": "print(1)", "command": "ls"}}), 400)


def test_empty_code_and_command(client, live):
    refused(post_exec(client, live, {"tool": "code_execution", "input": {"code": ""}}), 422)
    refused(post_exec(client, live, {"tool": "bash_code_execution", "input": {"command": ""}}), 422)


def test_code_over_the_code_cap(client, live):
    code = "x = 1\n" * (1536 * 1024 // 6)  # 1.5 MiB, over code_max_bytes (1M), under the body cap
    r = post_exec(client, live, {"tool": "code_execution", "input": {"code": code}})
    refused(r, 422, "input.code", str(1024 * 1024))
    r = post_exec(client, live, {"tool": "bash_code_execution", "input": {"command": code}})
    refused(r, 422, "input.command", str(1024 * 1024))


def test_code_of_10_mib(client, live):
    # Over nginx's client_max_body_size for JSON routes (5m): nginx's own 413, in the API's shape.
    code = "#" * (10 * MiB)
    refused(post_exec(client, live, {"tool": "code_execution", "input": {"code": code}}), 413)


def test_body_over_the_cap_is_413(client, live):
    body = {"tool": "code_execution", "input": {"code": "print(1)"}, "pad": "p" * (4 * MiB + 100)}
    refused(post_exec(client, live, body), 413)


def test_deeply_nested_json(client, live):
    raw = b'{"tool": "code_execution", "input": {"code": "print(1)"}, "deep": ' + b"[" * 100000 + \
        b"]" * 100000 + b"}"
    refused(post_exec(client, live, raw), 422, "nested deeper than")


def test_nul_in_code_is_not_silently_cut(client, live):
    # A decoded NUL is refused before anything runs, in code and in a command alike.
    r = post_exec(client, live, {"tool": "code_execution", "input": {"code": "print('a')\u0000print('b')"}})
    refused(r, 422, "input.code", "NUL")
    r = post_exec(client, live, {"tool": "bash_code_execution", "input": {"command": "echo a\u0000echo b"}})
    refused(r, 422, "input.command", "NUL")


def test_a_key_holding_nul_cannot_stand_for_another(client, live):
    # json-c would cut "code\u0000" to "code", the later of two equal keys winning: a reader
    # of the body would see one program and paddock run another. Refused before anything runs.
    raw = (b'{"tool": "code_execution", "input": {"code": "print(\'shown\')", '
           b'"code\\u0000": "print(\'run\')"}}')
    refused(post_exec(client, live, raw), 422, "NUL")
    # A string read whole (the tool_use_id) with a NUL inside is not the string it looks like.
    r = post_exec(client, live, {"tool": "code_execution", "input": {"code": "print(1)"},
                                 "tool_use_id": "toolu_a\u0000b"})
    refused(r, 422, "tool_use_id")


def test_lone_surrogate_escape_is_not_a_5xx(client, live):
    # json-c decodes an escaped lone surrogate to U+FFFD: the cell runs with that character.
    r = post_exec(client, live, b'{"tool": "code_execution", "input": {"code": "print(\'\\ud800\')"}}')
    assert r.status_code == 200, f"{r.status_code}: {r.text[:300]}"
    res = ps.check_exec_body(r.parsed, "code_execution")
    assert (res.rc, res.stdout, res.stderr) == (0, "\ufffd\n", ""), res


def test_wrong_content_type_is_not_a_5xx(client, live):
    # The JSON routes read the body as JSON whatever Content-Type says: the cell runs.
    body = json.dumps({"tool": "code_execution", "input": {"code": "print(1)"}}).encode()
    for ctype in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data"):
        r = post_exec(client, live, body, headers={"Content-Type": ctype})
        assert r.status_code == 200, (ctype, r.status_code, r.text[:300])
        res = ps.check_exec_body(r.parsed, "code_execution")
        assert (res.rc, res.stdout) == (0, "1\n"), (ctype, res)


# --- CreateSession bodies ---------------------------------------------------------

@pytest.mark.parametrize("raw", [b"{", b"[]", b'"x"', b"42", b"\xff\xfe",
                                 b'{"idle_timeout_seconds": "60"}',
                                 b'{"idle_timeout_seconds": 0}',
                                 b'{"idle_timeout_seconds": -5}',
                                 b'{"idle_timeout_seconds": 1.5}',
                                 b'{"max_lifetime_seconds": "long"}',
                                 b'{"max_lifetime_seconds": 0}',
                                 b'{"max_lifetime_seconds": 100000000000000000000000}'])
def test_bad_create_bodies(client, live, raw):
    r = client.request("POST", "/sessions", data=raw, headers=JSON)
    if r.status_code == 201:
        client.destroy(r.parsed["session_id"])
    refused(r, 422)


# --- session ids and routes ---------------------------------------------------------

BAD_IDS = ["a" * 10240, "a%2Fb", "%2F", "a%00b", "%00", "..", "..%2F..%2Fetc", "a%2Fb%2F..%2F..",
           "%C3%A9t%C3%A9", "a b".replace(" ", "%20"), "%FF%FE", "a%5Cb"]


@pytest.mark.parametrize("bad", BAD_IDS, ids=lambda s: s[:20])
def test_malformed_session_ids(client, live, bad):
    body = json.dumps({"tool": "code_execution", "input": {"code": "print(1)"}}).encode()
    for method, suffix, data, hdrs in (("POST", "/exec", body, JSON),
                                       ("GET", "/files/list", b"", {}),
                                       ("GET", "/files?path=x", b"", {}),
                                       ("DELETE", "", b"", {})):
        r = client.raw(method, f"/sessions/{bad}{suffix}", body=data, headers=hdrs)
        if method == "DELETE" and r.status == 204:
            continue
        assert 400 <= r.status < 500, f"{method} {bad[:30]}{suffix}: {r.status} {r.body[:200]!r}"


def test_unknown_routes_and_methods(client, live):
    for method, path in (("GET", "/sessions"), ("PUT", "/sessions"), ("PATCH", f"/sessions/{live}"),
                         ("GET", f"/sessions/{live}/exec"), ("PUT", f"/sessions/{live}/files"),
                         ("POST", f"/sessions/{live}/bogus"), ("GET", f"/sessions/{live}/files/list/x"),
                         ("GET", "/nothing-here"), ("POST", "/sessions/"), ("GET", "/sessionsX")):
        r = client.raw(method, path, body=b"{}" if method != "GET" else b"", headers=JSON)
        assert 400 <= r.status < 500, f"{method} {path}: {r.status} {r.body[:200]!r}"


# --- multipart ------------------------------------------------------------------------

def test_malformed_uploads(client, live):
    url = f"/sessions/{live}/files"
    good, ctype = ps.multipart([("file", "a.txt", b"data", None)])
    boundary = ctype.split("boundary=")[1]
    cases = [
        (b"not multipart at all", "multipart/form-data"),  # no boundary
        (good, "multipart/form-data; boundary=other"),  # wrong boundary
        (good[:len(good) // 2], ctype),  # cut short
        (good.replace(b"--" + boundary.encode() + b"--", b""), ctype),  # no closing boundary
        (ps.multipart([("path", None, b"only-path.txt", None)], boundary)[0], ctype),  # no file
        (ps.multipart([("notfile", "a.txt", b"x", None)], boundary)[0], ctype),
        (good, "text/plain"),
        (good, "application/json"),
        (b"", ctype),
        (ps.multipart([("file", "", b"x", None)], boundary)[0], ctype),  # no name, no path
        (ps.multipart([("file", "a.txt", b"x", None), ("path", None, b"\xff\xfe", None)], boundary)[0],
         ctype),
        (ps.multipart([("file", "a.txt", b"x", None), ("path", None, b"a\x00b", None)], boundary)[0],
         ctype),
    ]
    for data, ct in cases:
        r = client.request("POST", url, data=data, headers={"Content-Type": ct})
        assert 400 <= r.status_code < 500, f"{ct} {data[:60]!r}: {r.status_code} {r.text[:200]}"
    files = {f["path"] for f in client.list_files(live).parsed["files"]}
    assert not files, f"malformed uploads wrote {files}"


def test_stack_still_serves_new_sessions(client, live):
    sid = client.new_session()
    assert client.run(sid, "print('new')").stdout == "new\n"
    client.destroy(sid)
