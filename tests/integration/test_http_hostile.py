# SPDX-License-Identifier: MIT
"""Hostile HTTP through nginx: broken and oversized multipart bodies, request smuggling
attempts over a raw socket, percent-encoded traversal, NUL bytes, over-long paths and
ids. Each is refused with a 4xx and a JSON detail (nginx's own 400 and 414 too), nothing
is written, the session keeps answering, and no process of the stack is replaced."""

import os
import re
import secrets
import socket
import time

import pytest
import requests

import paddock_stack as ps

KiB = 1024
RAW_TIMEOUT = 30.0


# --- raw HTTP/1.1 over a socket ---------------------------------------------------------

class Response:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body

    def __repr__(self):
        return f"<{self.status} {self.body[:200]!r}>"


def _parse_one(buf):
    """One response off the front of buf: (Response, rest), or (None, buf) if incomplete."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        return None, buf
    head = buf[:end].decode("latin-1").split("\r\n")
    parts = head[0].split(" ", 2)
    assert parts[0].startswith("HTTP/1."), f"not an HTTP response: {head[0]!r}"
    status = int(parts[1])
    headers = requests.structures.CaseInsensitiveDict()
    for line in head[1:]:
        k, _, v = line.partition(":")
        headers[k.strip()] = v.strip()
    rest = buf[end + 4:]
    if "chunked" in headers.get("Transfer-Encoding", "").lower():
        body = b""
        while True:
            nl = rest.find(b"\r\n")
            if nl < 0:
                return None, buf
            size = int(rest[:nl].split(b";")[0], 16)
            if len(rest) < nl + 2 + size + 2:
                return None, buf
            body += rest[nl + 2:nl + 2 + size]
            rest = rest[nl + 2 + size + 2:]
            if size == 0:
                return Response(status, headers, body), rest
    n = int(headers.get("Content-Length", "0"))
    if len(rest) < n:
        return None, buf
    return Response(status, headers, rest[:n]), rest[n:]


def raw_exchange(stack, data, shut_write=False):
    """Send bytes as they are and read until the server closes: every response it sent."""
    with socket.create_connection(("127.0.0.1", stack.port), timeout=RAW_TIMEOUT) as s:
        s.sendall(data)
        if shut_write:
            s.shutdown(socket.SHUT_WR)
        buf = b""
        while True:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            buf += chunk
    out = []
    while buf:
        r, buf = _parse_one(buf)
        assert r is not None, f"a truncated response: {buf[:300]!r}"
        out.append(r)
    return out


def request_bytes(method, target, headers=(), body=b""):
    lines = [f"{method} {target} HTTP/1.1", "Host: 127.0.0.1"] + list(headers) + ["Connection: close"]
    head = "\r\n".join(lines).encode("latin-1") + b"\r\n\r\n"
    return head + body


def one_refusal(stack, data, method, path, allowed=None, shut_write=False):
    """Exactly one answer, a 4xx (or one of allowed) with a JSON detail; returns it."""
    rs = raw_exchange(stack, data, shut_write)
    assert len(rs) == 1, f"{method} {path[:80]}: {len(rs)} responses: {rs}"
    r = rs[0]
    if allowed:
        assert r.status in allowed, f"{method} {path[:80]}: {r}"
    else:
        assert 400 <= r.status < 500, f"{method} {path[:80]}: {r}"
    ps.check_response(r.status, r.headers, r.body, method, path)
    return r


# --- fixtures: one session that every test must leave as it found it ----------------------

@pytest.fixture(scope="module")
def baseline(stack):
    """The stack's pids (nginx's workers included) before any hostile request.

    nginx listens before it forks its workers: the stack counts as started once its port
    answers, so the baseline waits for every worker the configuration asks for."""
    pids = {k: p.pid for k, p in stack.procs.items()}
    with open(stack.nginx_conf, encoding="utf-8") as f:
        m = re.search(r"^\s*worker_processes\s+(\d+|auto)\s*;", f.read(), re.M)
    assert m, "the stack's nginx.conf names no number of worker processes"
    want = os.cpu_count() if m.group(1) == "auto" else int(m.group(1))
    deadline = time.monotonic() + 10
    workers = ps.descendants([pids["nginx"]])
    while len(workers) < want and time.monotonic() < deadline:
        time.sleep(0.02)
        workers = ps.descendants([pids["nginx"]])
    assert len(workers) == want, f"nginx has {len(workers)} workers, its configuration {want}"
    return pids, workers


@pytest.fixture(scope="module")
def victim(client, baseline):
    sid = client.new_session()
    client.run(sid, "counter = 1")
    r = client.put_file(sid, b"keep me\n", path="keep.txt")
    assert r.status_code == 201, r.text
    yield sid
    client.destroy(sid)


def workspace_listing(client, sid):
    r = client.list_files(sid)
    assert r.status_code == 200, r.text
    return sorted((f["path"], f["size_bytes"]) for f in r.parsed["files"])


@pytest.fixture
def live(client, victim):
    """The victim session; afterwards its files are unchanged and its interpreter answers."""
    before = workspace_listing(client, victim)
    yield victim
    assert workspace_listing(client, victim) == before, "a refused request changed the workspace"
    assert client.get_file(victim, "keep.txt").content == b"keep me\n"
    assert client.run(victim, "print(counter)").stdout == "1\n"
    client.stack.assert_alive()


def found_anywhere(stack, name):
    """Paths named name under the stack's state dir (the workspaces) and a few host dirs."""
    hits = [p for p in ("/" + name, "/tmp/" + name, "/root/" + name) if os.path.lexists(p)]
    for dirpath, dirnames, filenames in os.walk(stack.state_dir):
        hits += [os.path.join(dirpath, n) for n in dirnames + filenames if name in n]
    return hits


# --- multipart ------------------------------------------------------------------------

def put_raw(client, sid, body, ctype):
    return client.request("POST", f"/sessions/{sid}/files", data=body,
                          headers={"Content-Type": ctype})


def test_truncated_multipart(client, live):
    body, ctype = ps.multipart([("path", None, b"cut.txt", None),
                                ("file", "cut.txt", b"0123456789" * 100, None)])
    b = ctype.split("boundary=")[1].encode()
    cuts = [4,  # inside the first delimiter
            body.index(b"Content-Disposition") + 10,  # inside a part's headers
            body.index(b"0123") + 500,  # inside the file's data
            len(body) - len(b"--\r\n") - len(b) - 4,  # just before the close delimiter
            len(body) - len(b"-\r\n"),  # "--boundary-": one dash of two
            ]
    for cut in cuts:
        r = put_raw(client, live, body[:cut], ctype)
        assert r.status_code == 400, f"cut at {cut}: {r.status_code} {r.text[:200]}"


def test_body_shorter_than_its_content_length(stack, client, live):
    body, ctype = ps.multipart([("file", "short.txt", b"x" * 1000, None)])
    path = f"/sessions/{live}/files"
    data = request_bytes("POST", path, [f"Content-Type: {ctype}",
                                        f"Content-Length: {len(body) + 5000}"], body)
    # The client stops sending: nginx must not pass a partial body on.
    rs = raw_exchange(stack, data, shut_write=True)
    assert len(rs) <= 1, rs
    for r in rs:
        assert 400 <= r.status < 500, r
        ps.check_response(r.status, r.headers, r.body, "POST", path)


def test_delimiter_line_inside_the_data(client, live):
    # A real delimiter line in the middle of the file, followed by no part headers.
    boundary = "hostile" + secrets.token_hex(8)
    data = b"first half\r\n--" + boundary.encode() + b"\r\nnot a header line\r\n\r\nsecond half"
    body, ctype = ps.multipart([("file", "split.txt", data, None)], boundary)
    r = put_raw(client, live, body, ctype)
    assert r.status_code == 400, f"{r.status_code} {r.text[:200]}"


def test_boundary_lookalikes_are_data(client, sid):
    # The boundary text where it is not a delimiter (no CRLF before it, or more bchars
    # after it) is file content, stored byte for byte.
    boundary = "hostile" + secrets.token_hex(8)
    bb = boundary.encode()
    data = (b"--" + bb + b"\r\n" + b"x--" + bb + b"--\r\n" + b"\r\n--" + bb + b"X\r\n" +
            b"\r\n--" + bb[:-1] + b"\r\n" + b"\r\r\n--" + bb + b"-\r\nend")
    body, ctype = ps.multipart([("file", "lookalike.bin", data, None)], boundary)
    r = put_raw(client, sid, body, ctype)
    assert r.status_code == 201, f"{r.status_code} {r.text[:200]}"
    got = client.get_file(sid, "lookalike.bin")
    assert got.status_code == 200 and got.content == data


def test_ten_thousand_parts(stack, client, live):
    name = "many-" + secrets.token_hex(6)
    parts = [("file", name, b"payload", None)] + [("x", None, b"y", None)] * 10000
    body, ctype = ps.multipart(parts)
    r = put_raw(client, live, body, ctype)
    assert r.status_code == 400, f"{r.status_code} {r.text[:200]}"
    assert "parts" in r.parsed["detail"]
    assert not found_anywhere(stack, name)


# --- request smuggling and header abuse, over a raw socket ---------------------------------

def smuggled_list(sid):
    return (f"GET /sessions/{sid}/files/list HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            "Connection: close\r\n\r\n").encode()


EXEC_BODY = b'{"tool": "code_execution", "input": {"code": "counter = 99"}}'


def test_transfer_encoding_and_content_length(stack, live):
    path = f"/sessions/{live}/exec"
    # CL covers a "second request"; a proxy that trusted TE would see it separately.
    body = b"0\r\n\r\n" + smuggled_list(live)
    data = request_bytes("POST", path, ["Content-Type: application/json",
                                        "Transfer-Encoding: chunked",
                                        f"Content-Length: {len(body)}"], body)
    one_refusal(stack, data, "POST", path, allowed=(400,))
    # The other way round: a chunked exec body hidden behind a short Content-Length.
    chunked = b"%x\r\n" % len(EXEC_BODY) + EXEC_BODY + b"\r\n0\r\n\r\n"
    data = request_bytes("POST", path, ["Content-Type: application/json",
                                        "Content-Length: 3",
                                        "Transfer-Encoding: chunked"], chunked)
    one_refusal(stack, data, "POST", path, allowed=(400,))


@pytest.mark.parametrize("lengths", [(None, 5), (5, None), (None, None)],
                         ids=["second-differs", "first-differs", "same-twice"])
def test_duplicate_content_length(stack, live, lengths):
    path = f"/sessions/{live}/exec"
    n = len(EXEC_BODY)
    first, second = (v if v is not None else n for v in lengths)
    data = request_bytes("POST", path, ["Content-Type: application/json",
                                        f"Content-Length: {first}",
                                        f"Content-Length: {second}"], EXEC_BODY)
    one_refusal(stack, data, "POST", path, allowed=(400,))


@pytest.mark.parametrize("headers", [
    ["X-Folded: a", " b"],  # obs-fold of an ordinary header
    ["Content-Length:", " {n}"],  # the length folded onto a continuation line
    ["Content-Type: application/json;", "\tcharset=utf-8", "Content-Length: {n}"],
    ["Content-Length : {n}"],  # white space before the colon
    ["Content-Length: +{n}"],
    ["Content-Length: -1"],
], ids=["fold", "fold-length", "fold-tab", "space-colon", "plus-length", "negative-length"])
def test_malformed_header_lines(stack, live, headers):
    path = f"/sessions/{live}/exec"
    hs = [h.replace("{n}", str(len(EXEC_BODY))) for h in headers]
    if not any(h.lower().startswith("content-type") for h in hs):
        hs.insert(0, "Content-Type: application/json")
    data = request_bytes("POST", path, hs, EXEC_BODY)
    one_refusal(stack, data, "POST", path, allowed=(400,))


def test_unknown_transfer_coding_is_refused(stack, live):
    # nginx answers these itself with 501, before any route; the body never reaches paddock.
    path = f"/sessions/{live}/exec"
    for te in ("xchunked", "chunked, identity", "gzip, chunked"):
        data = request_bytes("POST", path, ["Content-Type: application/json",
                                            f"Transfer-Encoding: {te}"],
                             b"%x\r\n" % len(EXEC_BODY) + EXEC_BODY + b"\r\n0\r\n\r\n")
        rs = raw_exchange(stack, data)
        assert len(rs) == 1 and rs[0].status == 501, (te, rs)


def test_nginx_501_is_json(stack, live):
    path = f"/sessions/{live}/exec"
    data = request_bytes("POST", path, ["Content-Type: application/json",
                                        "Transfer-Encoding: xchunked"], b"0\r\n\r\n")
    rs = raw_exchange(stack, data)
    assert len(rs) == 1
    ps.check_response(rs[0].status, rs[0].headers, rs[0].body, "POST", path)


# --- traversal, NUL bytes, sizes -----------------------------------------------------

def raw_get(stack, target, allowed=None):
    return one_refusal(stack, request_bytes("GET", target), "GET", target, allowed)


@pytest.mark.parametrize("query,status", [
    ("%2e%2e%2f%2e%2e%2fetc%2fshadow", 403),
    ("..%2f..%2f..%2fetc%2fpasswd", 403),
    ("%2E%2E/%2E%2E/%2E%2E/etc/hostname", 403),
    ("%2fetc%2fshadow", 403),
    ("%2fworkspace%2f..%2f..%2fetc%2fshadow", 403),
    ("keep.txt%2f..%2f..%2f..%2fetc%2fshadow", 404),  # the walk stops at a file: not a directory
    ("%252e%252e%252f%252e%252e%252fetc%252fshadow", 404),  # double encoding: a literal name
    ("..%252f..%252fetc%252fshadow", 404),
    ("%c0%ae%c0%ae%2fetc%2fshadow", 400),  # overlong UTF-8 dots: not UTF-8, a malformed query
])
def test_percent_encoded_traversal_in_the_query(stack, live, query, status):
    for route in ("files", "files/list"):
        raw_get(stack, f"/sessions/{live}/{route}?path={query}", allowed=(status,))


@pytest.mark.parametrize("suffix", [
    "/files/%2e%2e/%2e%2e/etc/shadow",
    "/files/..%2f..%2f..%2fetc%2fshadow",
    "/%2e%2e/%2e%2e/sessions",
    "/files/list/%2e%2e",
    "%2f..%2f..%2fexec",
    "/%2565xec",  # double-encoded "exec"
])
def test_percent_encoded_traversal_in_the_path(stack, live, suffix):
    # The worker routes on the raw path: no route has it, or its {id} is no valid id; 404.
    raw_get(stack, f"/sessions/{live}{suffix}", allowed=(404,))


@pytest.mark.parametrize("target", [
    "/sessions/%2e%2e/files/list",
    "/sessions/..%2f{sid}/files/list",
    "/sessions/%252e%252e/files/list",
    "/sessions/{sid}%2f..%2f{sid}/files/list",
])
def test_traversal_as_the_session_id(stack, live, target):
    # Not a valid session id, so no session: 404.
    raw_get(stack, target.replace("{sid}", live), allowed=(404,))


def test_nul_in_paths(stack, client, live):
    for target in (f"/sessions/{live}/files?path=keep.txt%00.png",
                   f"/sessions/{live}/files?path=%00",
                   f"/sessions/{live}/files/list?path=.%00/..",
                   f"/sessions/{live}%00/files/list",
                   f"/sessions/{live}/files%00/list"):
        # An escaped NUL: nginx refuses it in the path, the worker in a query value.
        raw_get(stack, target, allowed=(400,))
    # A raw NUL byte in the request line is nginx's to refuse.
    target = f"/sessions/{live}/files?path=keep.txt\x00x"
    one_refusal(stack, request_bytes("GET", target), "GET", target.replace("\x00", ""), (400,))
    # And in the path field of an upload.
    name = "nul-" + secrets.token_hex(6)
    body, ctype = ps.multipart([("path", None, name.encode() + b"\x00.txt", None),
                                ("file", "a.txt", b"x", None)])
    r = put_raw(client, live, body, ctype)
    assert 400 <= r.status_code < 500, r.text
    assert not found_anywhere(client.stack, name)


def test_upload_path_traversal_writes_nothing(stack, client, live):
    name = "escape-" + secrets.token_hex(6)
    for path in (f"../{name}", f"../../../../tmp/{name}", f"/tmp/{name}", f"/{name}",
                 f"/workspace/../{name}", f"keep.txt/../../{name}", f"a/../../{name}"):
        r = client.put_file(live, b"owned", path=path)
        assert 400 <= r.status_code < 500, f"{path}: {r.status_code} {r.text[:200]}"
    assert not found_anywhere(stack, name)


def test_path_of_64_kib(stack, client, live):
    long = "a/" * (32 * KiB)
    # In the URL: over nginx's request-line buffers; its 414 is JSON.
    r = raw_get(stack, f"/sessions/{live}/files?path={long}", allowed=(414,))
    assert r.status == 414
    r = raw_get(stack, f"/sessions/{live}/files/{'x' * 64 * KiB}", allowed=(414,))
    # Just under nginx's buffers, so the worker and sessiond see it.
    r = raw_get(stack, f"/sessions/{live}/files?path={'d/' * (15 * KiB)}f", allowed=(422,))
    # As an upload's path field, and as an upload's file name (a part header over its cap).
    r = client.put_file(live, b"x", path=long)
    assert r.status_code == 422 and "path" in r.parsed["detail"], r.text
    r = client.put_file(live, b"x", filename="f" * 64 * KiB)
    assert r.status_code == 400 and "headers" in r.parsed["detail"], r.text
    # As the editor's path.
    r = client.exec(live, "text_editor_code_execution",
                    {"command": "create", "path": long, "file_text": "x"})
    if r.status_code == 200:
        content = r.parsed["result_block"]["content"]
        assert content.get("type") != "code_execution_result" or content.get("return_code"), r.text
    else:
        assert 400 <= r.status_code < 500, r.text


def test_session_id_of_10_kib(stack, live):
    bad = "a" * 10 * KiB
    body = b'{"tool": "code_execution", "input": {"code": "print(1)"}}'
    for method, suffix, data, hs in (("POST", "/exec", body, ["Content-Type: application/json",
                                                              f"Content-Length: {len(body)}"]),
                                     ("GET", "/files/list", b"", []),
                                     ("GET", "/files?path=keep.txt", b"", []),
                                     ("DELETE", "", b"", [])):
        path = f"/sessions/{bad}{suffix}"
        one_refusal(stack, request_bytes(method, path, hs, data), method, path, (404,))


def test_request_line_and_header_too_long(stack, live):
    target = f"/sessions/{live}/files/list"
    data = request_bytes("GET", target, ["X-Big: " + "b" * 40 * KiB])
    # nginx's 494 (a header over large_client_header_buffers) reaches the client as 400.
    one_refusal(stack, data, "GET", target, allowed=(400,))
    target = "/sessions?" + "q" * 64 * KiB
    one_refusal(stack, request_bytes("GET", target), "GET", target, allowed=(414,))


# --- the end: the same processes are still serving -------------------------------------

def test_processes_unchanged(stack, client, baseline):
    pids, nginx_workers = baseline
    stack.assert_alive()
    now = {k: p.pid for k, p in stack.procs.items()}
    assert now == pids, f"processes replaced: {pids} -> {now}"
    assert ps.descendants([pids["nginx"]]) == nginx_workers, "an nginx worker was replaced"
    sid = client.new_session()
    assert client.run(sid, "print('still here')").stdout == "still here\n"
    client.destroy(sid)
