#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Write the hand-made seed inputs (seed-*) of each fuzz target's corpus.

Realistic requests and nasty ones. Run from anywhere; files the fuzzers found
(other names) are left alone. Re-running rewrites the same seeds.
"""

import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")


def write(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


# --- request JSON --------------------------------------------------------------------
JSON = {
    "exec": '{"tool": "code_execution", "input": {"code": "print(1)"}}',
    "exec-fields": '{"tool":"code_execution","input":{"code":"x = 1\\nprint(x)"},'
                   '"timeout_seconds":30,"tool_use_id":"toolu_01"}',
    "bash": '{"tool": "bash_code_execution", "input": {"command": "ls -la /workspace"}}',
    "editor": '{"tool":"text_editor_code_execution","input":{"command":"create","path":"a.py",'
              '"file_text":"print(\\"\\u00e9\\")\\n"}}',
    "editor-range": '{"tool":"text_editor_code_execution","input":{"command":"view","path":"a.py",'
                    '"view_range":[1,-1]}}',
    "create": '{"idle_timeout_seconds": 600, "max_lifetime_seconds": 3600}',
    "empty-object": "{}",
    "null": "null",
    "numbers": '{"timeout_seconds": 1.0, "idle_timeout_seconds": -0, "max_lifetime_seconds": 1e3,'
               ' "a": 9223372036854775807, "b": -9223372036854775808, "c": 9223372036854775808,'
               ' "d": 1e400, "e": -1.5e-400, "f": 18446744073709551616}',
    "number-at-end": "12345",
    "surrogates": '{"code": "\\ud83d\\ude00", "path": "\\ud800", "x": "\\udc00\\ud800"}',
    "escapes": '{"code": "\\u0000\\b\\f\\n\\r\\t\\/\\\\\\"", "\\u00e9": 1}',
    "utf8-raw": '{"code": "h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80"}',
    "single-quote": "{'tool': 'code_execution'}",
    "trailing": '{"a": 1} {"b": 2}',
    "trailing-space": '{"a": 1}  \r\n\t ',
    "cut": '{"tool": "code_execution", "input": {"code": "pri',
    "deep-ok": "[" * 31 + "]" * 31,
    "deep-over": '{"a":' * 40 + "1" + "}" * 40,
    "dup-keys": '{"tool": "a", "tool": "code_execution", "input": {}, "input": {"code": "1"}}',
    "types": '{"tool": 5, "input": [1, 2], "code": true, "command": null, "path": {"x": 1}}',
    "comment": '{"a": 1 /* c */}',
    "literals": "[true, false, null, NaN, Infinity, -Infinity, nan]",
    "bad-utf8": b'{"code": "\xff\xfe\xc0\xaf\xed\xa0\x80"}',
    "nul": b'{"code": "a\x00b"}',
}
for k, v in JSON.items():
    write("json_in", k, v.encode("latin-1") if isinstance(v, str) else v)

# --- multipart: 4 chunking-seed bytes, a Content-Type line, the body -------------------


def mp(seed, ctype, body):
    return struct.pack("<I", seed) + ctype.encode() + b"\n" + body


B = "paddockb0undary"
CT = f"multipart/form-data; boundary={B}"


def part(name, data, filename=None, boundary=B, extra=b""):
    disp = f'form-data; name="{name}"'
    if filename is not None:
        disp += f'; filename="{filename}"'
    return (f"--{boundary}\r\nContent-Disposition: {disp}\r\n".encode() + extra + b"\r\n" + data
            + b"\r\n")


def close(boundary=B):
    return f"--{boundary}--\r\n".encode()


put = part("file", b"hello\r\nworld\n", "a.txt", extra=b"Content-Type: text/plain\r\n") + \
    part("path", b"dir/a.txt") + close()
MP = {
    "put": (0x12345678, CT, put),
    "put-whole": (0, CT, put),
    "path-first": (7, CT, part("path", b"x/y") + part("file", b"\x00\x01\xff" * 50, "b.bin") + close()),
    "quoted-boundary": (99, 'multipart/form-data; charset=utf-8; boundary="a b:c"',
                        part("file", b"x", "f", boundary="a b:c") + close("a b:c")),
    "preamble-epilogue": (3, CT, b"preamble text\r\n" + put + b"epilogue\r\n--" + B.encode()),
    "boundary-in-data": (5, CT, part("file", b"--" + B.encode() + b"x\r\n--" + B.encode() + b"-x\r\n\r--"
                                     + B[:5].encode(), "d") + close()),
    "padding": (11, CT, f"--{B} \t \r\n".encode() + b'Content-Disposition: form-data; name="a"\r\n\r\n'
                + b"v\r\n" + f"--{B}--  \r\n".encode()),
    "truncated": (13, CT, put[:len(put) // 2]),
    "no-close": (17, CT, put[:-len(close())]),
    "lf-only": (19, CT, put.replace(b"\r\n", b"\n")),
    "no-disposition": (23, CT, f"--{B}\r\nContent-Type: text/plain\r\n\r\nx\r\n".encode() + close()),
    "escaped-name": (29, CT, f'--{B}\r\nContent-Disposition: form-data; name="a\\"b"; '
                     f'filename*=UTF-8\'\'%C3%A9; filename="c\\\\d"\r\n\r\nx\r\n'.encode() + close()),
    "empty-part": (31, CT, part("file", b"", "") + close()),
    "many-parts": (37, CT, b"".join(part(f"p{i}", b"x") for i in range(60)) + close()),
    "huge-header": (41, CT, f"--{B}\r\nX-Pad: ".encode() + b"a" * 9000 + b"\r\n\r\n" + close()),
    "folded-header": (43, CT, f"--{B}\r\nContent-Disposition: form-data;\r\n name=\"a\"\r\n\r\nx\r\n".encode()
                      + close()),
    "nul-in-header": (47, CT, f"--{B}\r\nContent-Disposition: form-data; name=\"a\0b\"\r\n\r\nx\r\n".encode()
                      + close()),
    "callback-fails": (0xf0000001, CT, put),
    # seed 0xe.......: small caps (parts 1 + (seed & 3), header bytes 1 + ((seed >> 4) & 0xff))
    "small-caps-parts": (0xe0000ff1, CT, b"".join(part(f"p{i}", b"x") for i in range(5)) + close()),
    "small-caps-header": (0xe0000103, CT, put),
    "ct-no-boundary": (1, "multipart/form-data", b""),
    "ct-wrong-type": (1, "text/plain; boundary=x", b""),
    "ct-long-boundary": (1, "multipart/form-data; boundary=" + "b" * 201, b""),
    "ct-empty-quoted": (1, 'multipart/form-data; boundary=""', b""),
    "ct-unclosed-quote": (1, 'multipart/form-data; boundary="abc', b""),
    "ct-upper": (53, "MULTIPART/FORM-DATA;BOUNDARY=Q", part("a", b"1", boundary="Q") + close("Q")),
    "one-char-boundary": (59, "multipart/form-data; boundary=-",
                          part("a", b"---\r\n--\r\n---", boundary="-") + close("-")),
}
for k, (seed, ct, body) in MP.items():
    write("multipart", k, mp(seed, ct, body))

# --- route: a method byte (0 GET, 1 POST, 2 DELETE, 3 PUT), then the REQUEST_URI --------
ROUTE = {
    "create": (1, "/sessions"),
    "exec": (1, "/sessions/abc_DEF-123/exec"),
    "destroy": (2, "/sessions/abc"),
    "list": (0, "/sessions/abc/files/list?path=dir%2Fsub"),
    "get": (0, "/sessions/abc/files?path=a+b%20c.txt&file_id=f1"),
    "get-id": (0, "/sessions/abc/files?file_id=%66%31&path"),
    "bad-method": (3, "/sessions/abc/exec"),
    "traversal": (0, "/sessions/%2e%2e%2f%2e%2e/files?path=..%2f..%2fetc%2fshadow"),
    "double-encoding": (0, "/sessions/%252e%252e/files?path=%252e%252e%252f"),
    "nul": (0, "/sessions/a%00b/files?path=a%00b"),
    "bad-escape": (0, "/sessions/abc%/files?path=%zz&%"),
    "escaped-literal": (1, "/%73essions/abc/%65xec"),
    "long-id": (0, "/sessions/" + "a" * 200 + "/files/list"),
    "empty-id": (1, "/sessions//exec"),
    "slashes": (0, "//sessions///abc//files"),
    "no-slash": (0, "sessions"),
    "trailing-slash": (1, "/sessions/"),
    "query-only": (0, "?path=x"),
    "extra-routes": (1, "/v1/abc/x%20y"),
    "percent-literal": (0, "/v2/%25/id"),
    "dup-query": (0, "/sessions/a/files?path=1&path=2&&=&path"),
    "utf8-id": (0, "/sessions/%C3%A9t%C3%A9/files/list"),
}
for k, (m, uri) in ROUTE.items():
    write("route", k, bytes([m]) + uri.encode())

# --- proto: frames as a peer sends them --------------------------------------------------


def frame(payload, t=b"J"):
    if isinstance(payload, str):
        payload = payload.encode()
    return struct.pack("<I", len(payload)) + t + payload


PROTO = {
    "request": frame('{"op":"exec","session_id":"abc","request_id":"r1","code":"print(1)"}'),
    "two-requests": frame('{"op":"list","path":"."}') + frame('{"op":"destroy"}'),
    "data-frame": frame(b"\x00\x01raw", b"D") + frame("{}"),
    "short-header": b"\x05\x00\x00",
    "short-payload": struct.pack("<I", 100) + b"J{}",
    "unknown-type": frame("{}", b"X"),
    "too-large": struct.pack("<I", (32 << 20) + 1) + b"J",
    "max-size-header": struct.pack("<I", 32 << 20) + b"J{",
    "empty": frame(""),
    "not-object": frame("[1,2,3]") + frame("{}"),
    "deep": frame("[" * 70 + "]" * 70),
    "trailing": frame('{"op":"x"} junk'),
    "number": frame("12"),
    "nul-inside": frame(b'{"op":"a\x00b"}'),
}
for k, v in PROTO.items():
    write("proto", k, v)

# --- wsfs_normalize: a flags byte (bit 0 allow_root, then size class), then the path -----
# size classes (flags >> 1) % 7: 1, 2, 3, 16, 255, 256, PATH_MAX
BIG = 6 << 1
WS = {
    "simple": (BIG, "a/b.txt"),
    "workspace": (BIG | 1, "/workspace/dir/./f"),
    "workspace-root": (BIG | 1, "/workspace"),
    "root-refused": (BIG, "/workspace/"),
    "dot": (BIG | 1, "."),
    "dots": (BIG, "./../a/../../b"),
    "outside": (BIG, "/etc/passwd"),
    "workspacex": (BIG, "/workspacex/a"),
    "slashes": (BIG, "a//b///c/"),
    "name-max": (BIG, "a/" + "n" * 255),
    "name-over": (BIG, "a/" + "n" * 256),
    "tight": (3 << 1, "abcdefghijklmno"),
    "too-tight": (3 << 1, "abcdefghijklmnop"),
    "one-byte": (0 | 1, ""),
    "two-bytes-root": (1 << 1 | 1, "./"),
    "path-max": (BIG, "d/" * 2047 + "f"),
    "utf8": (BIG, "\u00e9t\u00e9/\U0001f600"),
    "nul": (BIG, "a\0/etc/shadow"),
    "escaped": (BIG, "d\u201bFE/bad-\u201bC3(-\u201bFF.txt"),
    "escaped-escape": (BIG, "/workspace/\u201bE2\u201b80\u201b9BFF"),
    "escape-cut": (BIG, "a/\u201bF"),
    "escape-slash": (BIG, "a\u201b2F..\u201b2F"),
    "escape-nul": (BIG, "a\u201b00b"),
    "escape-outside": (BIG, "/etc/\u201bFF"),
    "escape-long": (BIG, "\u201bFF" * 300),
}
for k, (flags, path) in WS.items():
    write("wsfs_normalize", k, bytes([flags]) + path.encode())
WS_RAW = {
    "raw-bytes": (BIG, b"a/\xff\xfe"),
}
for k, (flags, path) in WS_RAW.items():
    write("wsfs_normalize", k, bytes([flags]) + path)

# --- wsname: any bytes, as a name and as a client's API form ---------------------------
NAMES = {
    "plain": "report.txt".encode(),
    "utf8": "\u00e9t\u00e9 \U0001f600".encode(),
    "broken-sequence": b"bad-\xc3\x28-\xff.txt",
    "stray": b"\x80\xbf\xc0\xc1\xf5\xfe\xff",
    "escape-char": "\u201bFF".encode(),
    "escaped": "bad-\u201bFF \u201bE2\u201b80\u201b9B".encode(),
    "bad-escapes": "\u201b \u201bF \u201bGG \u201b2F \u201b00 \u201b7f".encode(),
    "control": b"ctl-\x01\n\r\t\"\\%;=",
    "cut-escape": "x\u201b".encode()[:-1],
    "long": b"\xff" * 255,
}
for k, v in NAMES.items():
    write("wsname", k, v)

# --- utf8 ----------------------------------------------------------------------------
U = {
    "ascii": b"hello, world\n\0",
    "mixed": "h\u00e9llo \u20ac \U0001f600 \u0800 \uffff \U00010000 \U0010ffff".encode(),
    "overlong": b"\xc0\xaf \xc1\xbf \xe0\x80\xaf \xe0\x9f\xbf \xf0\x80\x80\xaf \xf0\x8f\xbf\xbf",
    "surrogates": b"\xed\xa0\x80 \xed\xbf\xbf \xed\x9f\xbf",
    "above-max": b"\xf4\x90\x80\x80 \xf5\x80\x80\x80 \xf8\x88\x80\x80\x80 \xfe \xff",
    "truncated": b"\xe2\x82 \xf0\x9f\x98 \xc3",
    "lone-continuation": b"\x80\xbf\x80a",
    "end-truncated": b"ok\xf0\x9f",
}
for k, v in U.items():
    write("utf8", k, v)
