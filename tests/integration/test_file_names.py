# SPDX-License-Identifier: MIT
"""File names made of any bytes: every route that emits a path answers valid JSON (and
valid headers), in the API form of docs/otari.md, and that form fetches the very file
back. Names with bytes that are not UTF-8, control characters, newlines, quotes,
backslashes, and a real name that looks like an escaped one."""

import json
import os
import re
import secrets
import urllib.parse

import pytest

from code_client import CodeClient

EDITOR = "text_editor_code_execution"
ESC = "\u201b"  # the escape character of the API form


def api_form(raw: bytes) -> str:
    """The API form of a name, written from the documentation, not from the C."""
    out, i = [], 0
    while i < len(raw):
        for n in (1, 2, 3, 4):
            try:
                ch = raw[i:i + n].decode("utf-8")
            except UnicodeDecodeError:
                continue
            break
        else:
            ch = None
        if ch is None:
            out.append(f"{ESC}{raw[i]:02X}")
            i += 1
        elif ch == ESC:
            out.append("".join(f"{ESC}{b:02X}" for b in ch.encode()))
            i += len(ch.encode())
        else:
            out.append(ch)
            i += len(ch.encode())
    return "".join(out)


# Each name is made by code in the session, in a directory of its own so that the tests
# below can tell what each call produced.
NAMES = [
    b"bad-\xc3\x28-\xff.txt",                 # a broken sequence and a stray byte
    b"lone-\x80\xbf\xc0\xc1\xf5\xfe.bin",      # bytes that never start or continue UTF-8
    b"overlong-\xe0\x80\xaf-surrogate-\xed\xa0\x80",
    b"cut-\xe6\x97",                           # a sequence cut by the end of the name
    b"ctl-\x01\x02\x1b[31m\x7f.txt",          # control characters and an escape sequence
    b"new\nline\r\n.txt",
    b"tab\tname.txt",
    b'quote"d \'name\'.txt',
    b"back\\slash\\\\.txt",
    b"semi;colon, equals=and%25percent%.txt",
    b"\xe2\x80\x9bFF-looks-escaped.txt",      # a real "‛FF": must not mean the byte 0xFF
    b"bad-\xff.txt",                          # ...which is this one
    "é ü 日本 \U0001f600.txt".encode(),      # plain UTF-8: its own API form
    b"dir-\xfe/inner-\xfd.txt",               # a directory component that is not UTF-8
    b"\xff" * 251 + b".bin",                  # NAME_MAX bytes, each escaped: 1259 characters
]


def make_files(client, sid, sub, names):
    """Create each name (bytes) under sub/, with its own bytes as content, from Python in the
    session; returns the Execute result."""
    code = ("import os\n"
            f"names = {names!r}\n"
            "for n in names:\n"
            f"    p = os.path.join(b'/workspace/{sub}', n)\n"
            "    os.makedirs(os.path.dirname(p), exist_ok=True)\n"
            "    with open(p, 'wb') as f:\n"
            "        f.write(n)\n")
    return client.run(sid, code)


def disposition_name(header):
    """The file name of a Content-Disposition header: its filename* (RFC 5987) value."""
    m = re.search(r"filename\*=UTF-8''([^;\s]+)", header or "")
    assert m, f"no filename* in Content-Disposition {header!r}"
    return urllib.parse.unquote(m.group(1), encoding="utf-8", errors="strict")


def test_api_form_of_the_test_itself():
    assert api_form(b"bad-\xc3\x28-\xff.txt") == f"bad-{ESC}C3(-{ESC}FF.txt"
    assert api_form(b"a\xffb") == f"a{ESC}FFb"
    assert api_form("x‛y".encode()) == f"x{ESC}E2{ESC}80{ESC}9By"
    assert api_form("é".encode()) == "é"


def test_execute_and_listfiles_emit_valid_json_for_any_name(client, sid):
    r = make_files(client, sid, "n", NAMES)
    assert r.rc == 0, r.stderr
    want = {f"n/{api_form(n)}" for n in NAMES}
    produced = {f["filename"]: f["file_id"] for f in r.files}
    assert set(produced) == want

    files = client.list_files(sid).parsed["files"]
    assert {f["path"] for f in files} == want
    inner = b"dir-\xfe/inner-\xfd.txt"
    narrowed = client.list_files(sid, "n/" + api_form(inner.split(b"/")[0])).parsed["files"]
    assert [f["path"] for f in narrowed] == ["n/" + api_form(inner)]
    # Two files, one named with the byte 0xFF, one with the characters "‛FF": two entries.
    assert f"n/bad-{ESC}FF.txt" in want
    assert f"n/{ESC}E2{ESC}80{ESC}9BFF-looks-escaped.txt" in want


@pytest.mark.parametrize("raw", NAMES, ids=lambda n: repr(n)[2:30])
def test_each_name_round_trips_through_getfile(client, sid, raw):
    make_files(client, sid, "g", [raw])
    path = f"g/{api_form(raw)}"
    (entry,) = [f for f in client.list_files(sid, "g").parsed["files"]]
    assert entry["path"] == path

    by_path = client.get_file(sid, path)
    assert by_path.status_code == 200 and by_path.content == raw
    assert disposition_name(by_path.headers.get("Content-Disposition")) == api_form(raw).rsplit("/", 1)[-1]
    cd = by_path.headers["Content-Disposition"]
    assert cd.isascii() and "\n" not in cd and "\r" not in cd
    assert by_path.headers["Content-Disposition"].startswith("attachment;")

    by_abs = client.get_file(sid, f"/workspace/{path}")
    assert by_abs.status_code == 200 and by_abs.content == raw

    # The file_id of the same file, from an Execute that rewrites it.
    r = client.run(sid, f"open(b'/workspace/g/' + {raw!r}, 'ab').write(b'+')")
    (out,) = r.files
    assert out["filename"] == path
    by_id = client.get_file(sid, file_id=out["file_id"])
    assert by_id.status_code == 200 and by_id.content == raw + b"+"


@pytest.mark.parametrize("raw", NAMES, ids=lambda n: repr(n)[2:30])
def test_putfile_and_the_editor_take_the_api_form(client, sid, raw):
    path = f"p/{api_form(raw)}"
    r = client.put_file(sid, b"uploaded", path=path)
    assert r.status_code == 201, r.text
    assert r.parsed["path"] == path
    check = client.run(sid, f"import os\nprint(open(b'/workspace/p/' + {raw!r}, 'rb').read())")
    assert check.stdout == "b'uploaded'\n", check.stderr

    e = client.edit(sid, command="create", path=f"e/{api_form(raw)}", file_text="text\n")
    assert e.rc == 0, e.stderr
    assert e.stdout == f"File created: e/{api_form(raw)}\n"
    assert [f["filename"] for f in e.files] == [f"e/{api_form(raw)}"]
    check = client.run(sid, f"print(open(b'/workspace/e/' + {raw!r}, 'rb').read())")
    assert check.stdout == "b'text\\n'\n", check.stderr
    v = client.edit(sid, command="view", path=f"e/{api_form(raw)}")
    assert v.rc == 0 and v.stdout == "text\n"


def test_editor_directory_view_names_in_api_form(client, sid):
    make_files(client, sid, "v", NAMES)
    v = client.edit(sid, command="view", path="v")
    assert v.rc == 0, v.stderr
    # The view is one entry per line: names holding a newline are the exception, so compare
    # the whole text rather than lines.
    for raw in NAMES:
        top = raw.split(b"/")[0]
        assert f"v/{api_form(top)}" in v.stdout


def test_escape_that_names_no_byte_is_refused(client, sid):
    for bad in (f"x{ESC}", f"x{ESC}F", f"x{ESC}GG", f"x{ESC}2F..", f"x{ESC}00", f"x{ESC}41"):
        g = client.get_file(sid, bad)
        assert g.status_code == 422, (bad, g.status_code, g.text)
        assert "‛" in g.parsed["detail"] or "escape" in g.parsed["detail"]
        p = client.put_file(sid, b"z", path=bad)
        assert p.status_code == 422, (bad, p.status_code, p.text)
        e = client.edit(sid, command="create", path=bad, file_text="")
        assert e.rc == 1


def test_error_details_stay_valid_utf8_when_cut(client, sid):
    # The detail quotes at most about 200 bytes of the path: the cut must not split "é".
    for path in ("a" + "é" * 300, "é" * 300, "ab" + "日" * 200):
        r = client.request("GET", f"/sessions/{sid}/files", params={"path": path})
        assert r.status_code == 422, r.status_code
        json.loads(r.content.decode("utf-8", errors="strict"))
        r = client.request("GET", f"/sessions/{sid}/files/list", params={"path": path})
        assert r.status_code == 422, r.status_code
        json.loads(r.content.decode("utf-8", errors="strict"))


def test_code_plane_cwd_errors_stay_valid_utf8(stack):
    cc = CodeClient(stack)
    sid = "names-" + secrets.token_hex(6)
    try:
        d = cc.run("import os\nos.makedirs(b'ok-\\xff', exist_ok=True)\nprint(1)", session_id=sid)
        assert d["status"] == "ok", d
        r = cc.execute("1", session_id=sid, cwd="a" + "é" * 300)
        assert r.status_code == 422
        r.content.decode("utf-8", errors="strict")
        assert cc.run("1", session_id=sid, cwd=f"ok-{ESC}FF")["status"] == "ok"
        assert cc.execute("1", session_id=sid, cwd=f"ok-{ESC}FE").status_code == 422
    finally:
        cc.delete(sid)
