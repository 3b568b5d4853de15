# SPDX-License-Identifier: MIT
"""paddockctl against a running stack: list, show, kill, drain (and --wait), stats,
--json, the root-only rule, and doctor's findings on this host and on a broken setup."""

import json
import os
import subprocess

import pytest

import paddock_stack as ps

CTL = ps.PADDOCKCTL_BIN


@pytest.fixture(scope="module")
def ctl(stack):
    if not os.access(CTL, os.X_OK):
        pytest.skip(f"{CTL} is not built")
    env = stack.env()

    def run(*args, user=None, check=True):
        argv = [CTL, *args]
        if user:
            argv = ["runuser", "-u", user, "--"] + argv
        r = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)
        if check:
            assert r.returncode == 0, f"paddockctl {' '.join(args)}: {r.returncode}\n{r.stdout}{r.stderr}"
        return r
    return run


def test_list_show_stats(ctl, client, sid):
    client.run(sid, "x = bytearray(20 * 1024 * 1024); print(len(x))")
    r = ctl("list")
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["ID", "TENANT", "AGE", "IDLE", "STATE", "MEMORY", "CPU"]
    row = [l for l in lines if l.startswith(sid)]
    assert len(row) == 1, r.stdout
    assert row[0].split()[4] == "idle"

    data = json.loads(ctl("--json", "list").stdout)
    mine = [s for s in data["sessions"] if s["session_id"] == sid]
    assert len(mine) == 1
    assert mine[0]["memory_bytes"] > 0 and mine[0]["cpu_ms"] >= 0 and mine[0]["init_pid"] > 1

    shown = ctl("show", sid).stdout
    assert f"session_id             {sid}" in shown and "memory_bytes" in shown and "\nage " in shown
    assert json.loads(ctl("--json", "show", sid).stdout)["session_id"] == sid
    r = ctl("show", "nosuchsession", check=False)
    assert r.returncode == 1 and "no session" in r.stderr

    st = json.loads(ctl("--json", "stats").stdout)
    assert st["sessions"] >= 1 and st["node"] == client.stack.node_name
    assert st["cgroup"] in ("v1", "v2") and "memory_bytes" in st["limits"]
    assert "sessions" in ctl("stats").stdout


def test_kill(ctl, client):
    sid = client.new_session()
    assert ctl("kill", sid).stdout.strip() == f"killed {sid}"
    r = client.exec(sid, "code_execution", {"code": "print(1)"})
    assert r.status_code == 404
    r = ctl("kill", sid, check=False)
    assert r.returncode == 1 and "no session" in r.stderr


def test_drain(ctl, client):
    sid = client.new_session()
    try:
        assert "draining on" in ctl("drain").stdout
        r = client.create()
        assert r.status_code == 503, r.text
        # One session is still there: --wait gives up after its timeout.
        r = ctl("drain", "--wait", "--timeout", "1", check=False)
        assert r.returncode == 1 and "still live" in r.stderr
        assert client.destroy(sid).status_code == 204
        sid = None
        ps.wait_for(lambda: ctl("drain", "--wait", "--timeout", "20", check=False).returncode == 0,
                    40, "drain --wait to see no session")
    finally:
        assert "draining off" in ctl("drain", "--off").stdout
        if sid:
            client.destroy(sid)
    client.destroy(client.new_session())


def test_operator_commands_need_root(ctl):
    r = ctl("list", user="paddock", check=False)
    assert r.returncode == 1 and "root" in r.stderr, r.stderr
    r = ctl("bogus", check=False)
    assert r.returncode == 2


def test_doctor(ctl, stack):
    conf = stack.nginx_conf
    r = ctl("--json", "doctor", "--nginx-conf", conf, check=False)
    report = json.loads(r.stdout)
    by = {c["name"]: c for c in report["checks"]}
    # What sessiond probes at start (it started here), then the stack's own wiring.
    for name in ("openat2", "clone3", "pid namespace", "network namespace", "mount namespace",
                 "pidfd", "seccomp", "cgroup memory", "cgroup pids", "cgroup writable",
                 "sessiond", "worker reaches sessiond", "fcgi socket", "nginx upstream",
                 "nginx locations", "nginx user", "nginx running", "paddock-init", "workspaces"):
        assert by[name]["status"] == "ok", by[name]
    # The rest of the host (e.g. /var/lib/paddock absent) may fail; each failure has a fix.
    for c in report["checks"]:
        if c["status"] != "ok":
            assert c["fix"], c
    assert report["ok"] == (r.returncode == 0)
    # paddock makes no user namespace: a host that switches them off is fine.
    assert "user namespace" not in by

    # A broken setup: no daemon, nginx without paddock.
    env = dict(stack.env(), PADDOCK_RUNTIME_DIR="/nonexistent/paddock")
    r = subprocess.run([CTL, "doctor", "--nginx-conf", "/etc/nginx/nginx.conf"], capture_output=True,
                       text=True, env=env, timeout=60)
    assert r.returncode == 1
    assert "FAIL  sessiond" in r.stdout and "fix: systemctl start paddock-sessiond" in r.stdout

    # Disk workspaces with the state dir on a tmpfs: named, with the two ways out.
    env = dict(stack.env(), PADDOCK_STATE_DIR="/dev/shm", PADDOCK_WORKSPACE_BACKEND="disk")
    r = subprocess.run([CTL, "--json", "doctor", "--nginx-conf", conf], capture_output=True,
                       text=True, env=env, timeout=60)
    ws = {c["name"]: c for c in json.loads(r.stdout)["checks"]}["workspaces"]
    assert ws["status"] == "fail" and "workspace_backend = tmpfs" in ws["fix"], ws


def _cgroup2_superopts():
    """The mount point and superblock options of the first cgroup2 mount, or None."""
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fstype, _source, opts = right.split()[:3]
            if fstype == "cgroup2":
                return left.split()[4], opts.split(",")
    return None


def test_sessiond_sets_favordynmods(ctl, stack):
    """cgroup_favor_dynmods (on by default) remounts cgroup2 with favordynmods when
    sessiond starts (the options already in force go along: test_mountinfo), and doctor
    reports it. On a host where it was off, only sessiond can have set it."""
    found = _cgroup2_superopts()
    if found is None:
        pytest.skip("no cgroup2 mount on this host")
    mnt, opts = found
    assert "favordynmods" in opts, (mnt, opts)
    r = ctl("--json", "doctor", check=False)
    by = {c["name"]: c for c in json.loads(r.stdout)["checks"]}
    assert by["cgroup favordynmods"]["status"] == "ok", by["cgroup favordynmods"]
