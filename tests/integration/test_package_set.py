# SPDX-License-Identifier: MIT
"""The package set sessions' code expects (packaging/package-set), seen from inside a
session through the whole stack: every Python module of the set imports, every unix tool
runs, pandas round-trips an .xlsx through both Excel writers, and /v1/code/info lists the
set with what a session really finds.

The set is installed from Debian packages (scripts/deps.sh; the .deb recommends them), so
an entry with a Debian package that does not import here is a failure, not a skip.
"""

import json
import re

import pytest

import package_set
from code_client import CodeClient

PYTHON = package_set.python_entries()
TOOLS = package_set.tool_entries()
XLSX_MIME = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"

# Imports each module of the set, and reads its distribution's version the way
# /v1/code/info does (from its metadata); prints one JSON object on the last line.
IMPORT_ALL = r'''
import importlib, importlib.metadata, json
found = {}
for name, module in ENTRIES:
    try:
        importlib.import_module(module)
    except Exception as e:
        found[name] = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        continue
    try:
        version = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        version = None
    found[name] = {"ok": True, "version": version}
print(json.dumps(found))
'''

# A DataFrame of the column types spreadsheets carry, written with each of pandas' two
# .xlsx writers and read back with openpyxl.
XLSX_ROUND_TRIP = r'''
import pandas as pd
df = pd.DataFrame({
    "name": ["alpha", "beta", "gamma"],
    "count": [1, 20, 300],
    "ratio": [0.5, 1.25, -2.0],
    "day": pd.to_datetime(["2024-01-01", "2024-02-29", "2024-12-31"]),
})
for engine, path in (("openpyxl", "/workspace/x.xlsx"), ("xlsxwriter", "/workspace/y.xlsx")):
    df.to_excel(path, index=False, engine=engine)
    back = pd.read_excel(path, engine="openpyxl")
    pd.testing.assert_frame_equal(back, df)
    print(engine, "round trip ok")
'''


def first_version(text):
    """The first dotted number of a --version's first line, as the worker's probe takes it."""
    m = re.search(r"[0-9]+(\.[0-9]+)+", (text.splitlines() or [""])[0])
    return m.group(0) if m else None


@pytest.fixture(scope="module")
def box(client):
    """One session for the module's tests."""
    s = client.new_session()
    yield s
    assert client.destroy(s).status_code == 204


@pytest.fixture(scope="module")
def imported(client, box):
    """{name: {"ok", "version" | "error"}} for every Python entry, from inside the session."""
    entries = [(e.name, e.module) for e in PYTHON]
    r = client.run(box, f"ENTRIES = {entries!r}\n" + IMPORT_ALL, timeout_seconds=300)
    assert r.rc == 0, f"the import cell failed: {r.stderr[-3000:]}"
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def tool_versions(client, box):
    """{tool: (return code, first line of --version)} from the session's bash."""
    out = {}
    for e in TOOLS:
        r = client.bash(box, f"{e.name} --version")
        out[e.name] = (r.rc, ((r.stdout or r.stderr).splitlines() or [""])[0])
    return out


def test_every_module_imports(imported):
    failed = {f"{e.name} (import {e.module}; Debian package {e.debian})": imported[e.name]["error"]
              for e in PYTHON if e.debian and not imported[e.name]["ok"]}
    assert not failed, ("modules of the package set do not import in a session "
                        "(scripts/deps.sh installs their packages):\n  "
                        + "\n  ".join(f"{k}: {v}" for k, v in failed.items()))
    # Every distribution of the set installed from Debian carries its metadata, which is
    # where /v1/code/info takes versions from.
    unversioned = [e.name for e in PYTHON if e.debian and not imported[e.name]["version"]]
    assert not unversioned, f"no distribution metadata in the session for {unversioned}"


def test_every_tool_runs(tool_versions):
    failed = {name: f"return code {rc}: {line!r}" for name, (rc, line) in tool_versions.items()
              if rc != 0 or not first_version(line)}
    assert not failed, "unix tools of the package set do not run in a session:\n  " + \
        "\n  ".join(f"{k} --version: {v}" for k, v in failed.items())


def test_tools_work_together(client, box):
    r = client.bash(box, "printf '%s\\n' '{\"n\": 2}' '{\"n\": 40}' > nums.jsonl && "
                    "jq -r .n nums.jsonl | gawk '{ s += $1 } END { print \"sum=\" s }' | "
                    "sed 's/sum/total/' | grep -x 'total=42' && "
                    "curl -s file://$PWD/nums.jsonl | jq -s 'length'")
    assert (r.rc, r.stdout) == (0, "total=42\n2\n"), r


def test_pandas_round_trips_xlsx(client, box):
    r = client.run(box, XLSX_ROUND_TRIP, timeout_seconds=300)
    assert r.rc == 0, f"the .xlsx round trip failed:\n{r.stderr[-3000:]}"
    assert r.stdout == "openpyxl round trip ok\nxlsxwriter round trip ok\n", r.stdout
    assert {"x.xlsx", "y.xlsx"} <= {f["filename"] for f in r.files}, r.files
    got = client.get_file(box, "x.xlsx")
    assert got.status_code == 200 and got.content[:4] == b"PK\x03\x04", got.content[:16]
    r = client.bash(box, "file -b --mime-type x.xlsx y.xlsx")
    assert (r.rc, r.stdout) == (0, f"{XLSX_MIME}\n{XLSX_MIME}\n"), r


def test_info_lists_the_set(stack, imported, tool_versions):
    cc = CodeClient(stack)
    for version in (1, 2):
        r = cc.request("GET", f"/v{version}/code/info")
        assert r.status_code == 200
        listed = r.env["data"]["packages"]
        assert [p["name"] for p in listed] == [e.name for e in package_set.load()]
        by_name = {p["name"]: p for p in listed}
        for e in PYTHON:
            p = by_name[e.name]
            seen = imported[e.name]
            assert (p["kind"], p["import"], p["debian_package"]) == ("python", e.module, e.debian)
            # What info says is what a session finds: present or not, and the version.
            assert p["available"] == seen["ok"], (p, seen)
            assert p["version"] == (seen["version"] if seen["ok"] else None), (p, seen)
        for e in TOOLS:
            p = by_name[e.name]
            rc, line = tool_versions[e.name]
            assert (p["kind"], p["debian_package"]) == ("tool", e.debian) and "import" not in p
            assert p["available"] is (rc != 127), (p, rc, line)
            assert p["version"] == (first_version(line) if rc == 0 else None), (p, line)
