# SPDX-License-Identifier: MIT
"""A client for the code-interpreter plane (/v1, /v2) of a running stack: every answer
is checked against the envelope CODE-INTERPRETER.md fixes and, where the AIO 1.x
OpenAPI document has a model for the route, against that model."""

import json
import os
import re
import urllib.parse

import jsonschema
import requests

import paddock_stack as ps

LANG_MSG = "Unsupported language '{}'. Supported: python, javascript"


def _aio_candidates():
    env = os.environ.get("PADDOCK_AIO_OPENAPI")
    if env:
        yield env
    name = os.path.join("spec", "aio-sandbox-1x-openapi.json")
    yield os.path.join(ps.SOURCE_DIR, "..", "shared", name)
    yield os.path.join(ps.SOURCE_DIR, "..", "..", "shared", name)
    yield os.path.join("/work/shared", name)


def aio_openapi_path():
    for p in _aio_candidates():
        if os.path.isfile(p):
            return os.path.abspath(p)
    return None


class AioModels:
    """The 1.x document's component schemas, $refs resolved through the components."""

    _instance = None

    def __init__(self, path):
        with open(path, encoding="utf-8") as f:
            self.doc = json.load(f)
        self.components = self.doc["components"]

    @classmethod
    def get(cls):
        if cls._instance is None:
            path = aio_openapi_path()
            assert path, "the AIO 1.x OpenAPI document was not found; set PADDOCK_AIO_OPENAPI"
            cls._instance = cls(path)
        return cls._instance

    def validate(self, instance, name, what):
        root = dict(self.components["schemas"][name])
        root["components"] = self.components
        errors = sorted(jsonschema.Draft202012Validator(root).iter_errors(instance),
                        key=lambda e: list(e.path))
        assert not errors, f"{what}: does not match the 1.x model {name}: " + "; ".join(
            f"{'/'.join(map(str, e.path)) or '<root>'}: {e.message}" for e in errors[:5])


# (method, path pattern) -> the 1.x model of a 200 answer, or None for our own routes.
MODELS = [
    ("POST", r"^/v[12]/code/execute$", "Response_CodeExecuteResponse_"),
    ("GET", r"^/v[12]/code/info$", "Response_CodeInfoResponse_"),
    ("POST", r"^/v1/jupyter/execute$", "Response_JupyterExecuteResponse_"),
    ("GET", r"^/v1/jupyter/sessions$", "Response_ActiveSessionsResult_"),
    ("DELETE", r"^/v1/jupyter/sessions(/[^/]+)?$", "Response"),
    ("POST", r"^/v1/jupyter/sessions/create$", "Response_JupyterCreateSessionResponse_"),
    ("POST", r"^/v1/nodejs/execute$", "Response_NodeJSExecuteResponse_"),
    ("GET", r"^/v1/capabilities$", None),
    ("GET", r"^/v2/code/sessions(/[^/]+)?$", None),
    ("POST", r"^/v2/code/sessions$", None),
    ("DELETE", r"^/v2/code/sessions/[^/]+$", None),
]


def model_for(method, path):
    path = urllib.parse.urlsplit(path).path
    for m, rx, model in MODELS:
        if m == method and re.match(rx, path):
            return True, model
    return False, None


def check_envelope(status, headers, body, method, path):
    what = f"{method} {path[:100]} -> {status}"
    ctype = (headers.get("Content-Type") or "").split(";")[0].strip().lower()
    assert ctype == "application/json", f"{what}: Content-Type is {ctype!r}: {body[:200]!r}"
    try:
        parsed = ps.strict_json(body)
    except ValueError as e:
        raise AssertionError(f"{what}: body is not JSON ({e}): {body[:200]!r}")
    assert isinstance(parsed, dict), what
    assert set(parsed) >= {"success", "message", "data"}, f"{what}: not the envelope: {parsed!r}"
    assert isinstance(parsed["success"], bool), what
    assert isinstance(parsed["message"], str) and parsed["message"], what
    known, model = model_for(method, path)
    assert known, f"{what}: a route the plane does not serve"
    if status >= 400:
        assert parsed["success"] is False and parsed["data"] is None, f"{what}: {parsed!r}"
        if status == 422:
            errors = parsed.get("errors")
            assert isinstance(errors, list) and errors, f"{what}: 422 without errors"
            for e in errors:
                assert set(e) == {"location", "message", "type"}, e
                assert e["location"][0] == "body", e
                assert e["message"] and e["type"], e
            assert parsed["message"] == errors[0]["message"], parsed
        return parsed
    assert status == 200, f"{what}: unexpected status"
    if model:
        AioModels.get().validate(parsed, model, what)
    else:
        assert isinstance(parsed["data"], dict), f"{what}: data is {parsed['data']!r}"
    return parsed


class CodeClient:
    """HTTP client for one stack's code plane; every answer is checked."""

    def __init__(self, stack, timeout=120):
        self.stack = stack
        self.base = stack.base_url
        self.timeout = timeout
        self.http = requests.Session()

    def request(self, method, path, body=None, raw=None, headers=None):
        kw = {"timeout": self.timeout, "headers": headers or {}}
        if raw is not None:
            kw["data"] = raw
            kw["headers"].setdefault("Content-Type", "application/json")
        elif body is not None:
            kw["json"] = body
        r = self.http.request(method, self.base + path, **kw)
        r.env = check_envelope(r.status_code, r.headers, r.content, method, path)
        return r

    def execute(self, code, language="python", version=2, **fields):
        body = {"language": language, "code": code}
        body.update(fields)
        r = self.request("POST", f"/v{version}/code/execute", body)
        sid = (r.env.get("data") or {}).get("session_id")
        if sid:
            self.stack.session_ids.add(sid)
        return r

    def run(self, code, language="python", version=2, **fields):
        """A run that must answer 200; returns data."""
        r = self.execute(code, language, version, **fields)
        assert r.status_code == 200, f"execute: {r.status_code} {r.text[:500]}"
        d = r.env["data"]
        assert r.env["success"] == (d["status"] == "ok"), r.env
        assert d["exit_code"] == (0 if d["status"] == "ok" else 1), d
        return d

    def delete(self, sid):
        return self.request("DELETE", f"/v2/code/sessions/{sid}")

    def sessions(self):
        r = self.request("GET", "/v2/code/sessions")
        assert r.status_code == 200
        return {s["session_id"]: s for s in r.env["data"]["sessions"]}


def outputs_of(data, output_type):
    return [o for o in data["outputs"] if o["output_type"] == output_type]


# The keys each output type uses on /v2 and /v1/code.
OUTPUT_KEYS = {
    "stream": {"output_type", "name", "text"},
    "execute_result": {"output_type", "data", "metadata", "execution_count"},
    "display_data": {"output_type", "data", "metadata"},
    "error": {"output_type", "ename", "evalue", "traceback"},
}
NINE_KEYS = {"data", "ename", "evalue", "execution_count", "metadata", "name", "output_type",
             "text", "traceback"}


def check_outputs(data, all_keys=False):
    for o in data["outputs"]:
        if all_keys:
            assert set(o) == NINE_KEYS, o
            used = OUTPUT_KEYS[o["output_type"]]
            assert all(o[k] is None for k in NINE_KEYS - used), o
        else:
            assert set(o) == OUTPUT_KEYS[o["output_type"]], o
        if o["output_type"] == "error":
            assert isinstance(o["traceback"], list) and all(isinstance(t, str) for t in o["traceback"])
        if o["output_type"] == "execute_result":
            assert "text/plain" in o["data"] and o["metadata"] == {}, o
