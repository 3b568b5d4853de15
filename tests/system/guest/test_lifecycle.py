# SPDX-License-Identifier: MIT
"""The installed package's life on a systemd host, as a user lives it: enable the site,
keep live sessions' state through a daemon restart, a kill -9, an upgrade and an nginx
restart, reboot with live sessions, remove, purge, and power off with live sessions.

entry.py runs these one at a time, in file order, across a reboot: what one test leaves
for a later one (session ids, the sandbox uid range) is kept in /systest/out/lifecycle.json.
"""

import grp
import json
import os
import pwd
import sqlite3
import subprocess
import sys
import time

import pytest
import requests
import urllib3

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "integration"))
sys.path.insert(0, HERE)

import guest_conf  # noqa: E402
import paddock_stack as ps  # noqa: E402

SHARE = os.environ.get("PADDOCK_SYSTEST_SHARE", "/systest")
DEBS = os.environ.get("PADDOCK_SYSTEST_DEBS", os.path.join(SHARE, "debs"))
STATE = os.path.join(SHARE, "out", "lifecycle.json")
# The one documented enabling step, or (until it exists) its manual equivalent.
ENABLE = os.environ.get("PADDOCK_SYSTEST_ENABLE", "paddockctl")
CERT = "/etc/paddock/tls/paddock.crt"
UNITS = ("paddock-sandboxes.service", "paddock-sessiond.service", "paddock-fcgi.socket")
SHUTDOWN_MAX = 10.0  # seconds, from `systemctl reboot` to the last entry of that boot


def load():
    try:
        with open(STATE, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return {}


def need(key):
    """What an earlier step left for this one; if it left nothing, that step failed."""
    st = load()
    if key not in st:
        pytest.fail(f"nothing to test: the step that makes '{key}' failed earlier")
    return st[key]


def save(**kw):
    st = load()
    st.update(kw)
    with open(STATE, "w", encoding="utf-8") as f:
        json.dump(st, f, indent=1)


def sh(*argv, check=True, timeout=300):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                       env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
    if check:
        assert r.returncode == 0, f"{' '.join(argv)}: exit status {r.returncode}\n{r.stdout}{r.stderr}"
    return r


def active(unit):
    return sh("systemctl", "is-active", unit, check=False).stdout.strip()


def main_pid(unit):
    return int(sh("systemctl", "show", "-P", "MainPID", unit).stdout.strip() or 0)


def unit_status(*units):
    """The units' state and their last journal lines (of every invocation, not only the
    current one as systemctl status shows)."""
    status = sh("systemctl", "status", "--no-pager", "-l", "-n", "0", *units, check=False).stdout
    argv = ["journalctl", "-b", "--no-pager", "-q", "-n", "25"]
    for u in units:
        argv += ["-u", u]
    return status + "\njournal:\n" + sh(*argv, check=False).stdout


def client():
    return ps.Client(ps.InstalledStack().start())


def sessions_with_state(c, n=2):
    """n sessions holding a Python variable, a shell's directory and export, and a file."""
    sids = []
    for i in range(n):
        sid = c.new_session()
        assert c.run(sid, f"kept = {40 + i}").rc == 0
        assert c.bash(sid, "cd /tmp && export KEEP=yes").rc == 0
        r = c.put_file(sid, f"file {i}\n".encode(), path="state/kept.txt")
        assert r.status_code == 201, f"PutFile: {r.status_code} {r.text[:300]}"
        sids.append(sid)
    return sids


def assert_state(c, sids):
    for i, sid in enumerate(sids):
        out = c.run(sid, "print(kept)")
        assert out.stdout == f"{40 + i}\n", f"{sid}: the Python variable is lost: {out}"
        out = c.bash(sid, "pwd; echo $KEEP")
        assert out.stdout == "/tmp\nyes\n", f"{sid}: the shell's state is lost: {out}"
        r = c.get_file(sid, "state/kept.txt")
        assert r.status_code == 200 and r.content == f"file {i}\n".encode(), \
            f"{sid}: the workspace file is lost: {r.status_code} {r.content[:200]!r}"


def wait_active(unit, old_pid=None, timeout=60):
    """Wait until unit is active (with a main process other than old_pid)."""
    def ok():
        return active(unit) == "active" and (old_pid is None or main_pid(unit) not in (0, old_pid))
    try:
        ps.wait_for(ok, timeout, f"{unit} to be active again")
    except AssertionError as e:
        raise AssertionError(f"{e}\n{unit_status(unit)}") from None


def sandbox_processes(st):
    """Processes of sandboxes: paddock-init, or any process in the sandbox uid range."""
    base, count = st.get("uid_base", 200000), st.get("uid_count", 4096)
    found = []
    for pid in ps._all_pids():
        try:
            with open(f"/proc/{pid}/status", encoding="utf-8") as f:
                status = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:
            continue
        uid = int(status.get("Uid", "0").split()[0])
        if status.get("Name", "").strip() == "paddock-init" or base <= uid < base + count:
            found.append(ps._describe(pid))
    return found


def paddock_cgroups():
    """cgroup directories named paddock (the test's own unit aside)."""
    return [p for p in ps.cgroups_matching(["paddock"]) if "paddock-systest" not in p]


def https_get_ok(url, verify):
    r = requests.post(url + "/sessions", json={}, timeout=60, verify=verify)
    assert r.status_code == 201, f"POST {url}/sessions: {r.status_code} {r.text[:300]}\n" + \
        unit_status("paddock-sessiond.service", "paddock-fcgi.service")
    sid = r.json()["session_id"]
    r = requests.delete(f"{url}/sessions/{sid}", timeout=60, verify=verify)
    assert r.status_code == 204, f"DELETE: {r.status_code} {r.text[:300]}"


def mcp_ok(url, verify):
    """An MCP session through the installed site: initialize, a call, DELETE."""
    h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "systest", "version": "1"}}}
    r = requests.post(url + "/mcp", json=init, headers=h, timeout=60, verify=verify)
    assert r.status_code == 200 and "Mcp-Session-Id" in r.headers, \
        f"MCP initialize at {url}: {r.status_code} {r.text[:300]}"
    h["Mcp-Session-Id"] = r.headers["Mcp-Session-Id"]
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "code_execution", "arguments": {"code": "print(6 * 7)"}}}
    r = requests.post(url + "/mcp", json=call, headers=h, timeout=120, verify=verify)
    assert r.status_code == 200, f"MCP tools/call: {r.status_code} {r.text[:300]}"
    result = r.json()["result"]
    assert result["isError"] is False and result["content"][0]["text"] == "42\n", result
    r = requests.delete(url + "/mcp", headers=h, timeout=60, verify=verify)
    assert r.status_code == 204, f"MCP DELETE: {r.status_code} {r.text[:300]}"


def enable_site():
    if ENABLE == "paddockctl":
        sh("paddockctl", "site", "enable")
    else:
        link = "/etc/nginx/sites-enabled/paddock"
        if not os.path.lexists(link):
            os.symlink("../sites-available/paddock", link)
        sh("nginx", "-t")
        sh("systemctl", "reload", "nginx")


# --- install -------------------------------------------------------------------------------

def test_enable_the_site():
    enable_site()
    conf = ps.InstalledStack().config
    save(uid_base=int(conf.get("uid_base", 200000)), uid_count=int(conf.get("uid_count", 4096)))
    # HTTPS with the generated certificate (manual mode: not checked, as before the step).
    if ENABLE == "paddockctl":
        verify = CERT
    else:
        urllib3.disable_warnings()
        verify = False
    ps.wait_for(lambda: ps._connectable(ps.socket.AF_INET, ("127.0.0.1", 443)), 30, "port 443")
    https_get_ok("https://localhost", verify)
    mcp_ok("https://localhost", verify)
    # Plain HTTP on loopback for local use.
    ps.wait_for(lambda: ps._connectable(ps.socket.AF_INET, ("127.0.0.1", 8080)), 30,
                "plain HTTP on 127.0.0.1:8080")
    https_get_ok("http://127.0.0.1:8080", None)
    mcp_ok("http://127.0.0.1:8080", None)


def test_units_active():
    states = {u: active(u) for u in UNITS + ("nginx.service",)}
    assert all(s == "active" for s in states.values()), f"{states}\n{unit_status(*UNITS)}"
    enabled = {u: sh("systemctl", "is-enabled", u, check=False).stdout.strip() for u in UNITS}
    assert all(s == "enabled" for s in enabled.values()), enabled


# --- live sessions through restart, kill -9, upgrade, nginx restart ------------------------

def python_from_template(c):
    """Whether a new session's Python was forked from the template (its parent is outside
    the sandbox's pid namespace: 0) rather than started by init (1)."""
    sid = c.new_session()
    try:
        return c.run(sid, "import os; print(os.getppid())").stdout == "0\n"
    finally:
        c.destroy(sid)


def test_sessions_with_state():
    c = client()
    # The template imports for a while after the daemon starts (longer without KVM);
    # then the pool is made again from it.
    try:
        ps.wait_for(lambda: python_from_template(c), 600, "Python from the template", interval=2.0)
    except AssertionError as e:
        raise AssertionError(f"{e}\n" + sh("journalctl", "-u", "paddock-sessiond.service",
                                            "--no-pager", "-n", "60", check=False).stdout)
    sids = sessions_with_state(c)
    assert_state(c, sids)
    # Python was forked from the template (its parent is outside the sandbox's pid
    # namespace: 0), not started by init (1).
    for sid in sids:
        out = c.run(sid, "import os; print(os.getppid())")
        assert out.stdout == "0\n", f"{sid}: Python did not come from the template: {out}\n" + \
            sh("journalctl", "-u", "paddock-sessiond.service", "--no-pager", "-n", "40",
               check=False).stdout
    save(kept=sids)


def test_sessiond_restart_keeps_state():
    sids = need("kept")
    old = main_pid("paddock-sessiond.service")
    sh("systemctl", "restart", "paddock-sessiond.service")
    wait_active("paddock-sessiond.service", old)
    assert_state(client(), sids)


def test_sessiond_kill9_keeps_state():
    sids = need("kept")
    old = main_pid("paddock-sessiond.service")
    sh("systemctl", "kill", "-s", "KILL", "paddock-sessiond.service")
    ps.wait_for(lambda: not os.path.exists(f"/proc/{old}"), 30, "the killed daemon to be gone")
    # The unit's restart policy brings it back: nothing here starts it.
    wait_active("paddock-sessiond.service", old)
    assert_state(client(), sids)


def test_upgrade_keeps_state():
    sids = need("kept")
    new = os.environ["PADDOCK_SYSTEST_NEW"]
    want = sh("dpkg-deb", "-f", os.path.join(DEBS, new), "Version").stdout.strip()
    old = main_pid("paddock-sessiond.service")
    sh("apt-get", "install", "-y", "-q", os.path.join(DEBS, new), timeout=600)
    got = sh("dpkg-query", "-W", "-f", "${Version}", "paddock").stdout.strip()
    assert got == want, f"installed version {got}, expected {want}"
    wait_active("paddock-sessiond.service", old)
    # The new program runs: a daemon started from the old files would show "(deleted)".
    exe = os.readlink(f"/proc/{main_pid('paddock-sessiond.service')}/exe")
    assert exe == "/usr/sbin/paddock-sessiond", f"the daemon runs {exe!r}"
    assert_state(client(), sids)
    states = {u: active(u) for u in UNITS}
    assert all(s == "active" for s in states.values()), states


def test_nginx_restart():
    sids = need("kept")
    sh("systemctl", "restart", "nginx.service")
    assert active("nginx.service") == "active"
    assert_state(client(), sids)


def test_no_left_over_process_lines():
    r = sh("journalctl", "-b", "--no-pager", "-q", "-o", "short-monotonic")
    lines = [l for l in r.stdout.splitlines() if "Found left-over process" in l and "paddock" in l]
    assert not lines, f"{len(lines)} lines, e.g.:\n" + "\n".join(lines[:10])


def test_live_sessions_before_reboot():
    c = client()
    sids = sessions_with_state(c)
    save(before_reboot=sids, boot_id=open("/proc/sys/kernel/random/boot_id").read().strip())


# --- after the reboot ----------------------------------------------------------------------

def slowest_stretch(asked):
    """The journal of the previous boot around its longest silence after asked: where the
    shutdown waited."""
    r = sh("journalctl", "-b", "-1", "--no-pager", "-q", "-o", "json", "--since", f"@{int(asked)}")
    entries = []
    for line in r.stdout.splitlines():
        e = json.loads(line)
        msg = e.get("MESSAGE")
        if isinstance(msg, list):  # journald hands non-UTF-8 messages over as bytes
            msg = bytes(msg).decode("utf-8", "replace")
        entries.append((int(e["__REALTIME_TIMESTAMP"]) / 1e6,
                        f"{e.get('SYSLOG_IDENTIFIER', '?')}: {msg}"))
    if len(entries) < 2:
        return "(no journal of the shutdown)"
    gap, i = max((entries[k + 1][0] - entries[k][0], k) for k in range(len(entries) - 1))
    around = entries[max(0, i - 12):i + 4]
    return (f"the longest wait, {gap:.1f} s, after line {i - max(0, i - 12) + 1} of these:\n"
            + "\n".join(f"  +{t - asked:6.2f} s  {m}" for t, m in around))


def test_after_reboot():
    st = load()
    need("boot_id")
    assert open("/proc/sys/kernel/random/boot_id").read().strip() != st["boot_id"], \
        "this is still the boot before the reboot"
    problems = []
    with open(os.path.join(SHARE, "out", "reboot-requested"), encoding="utf-8") as f:
        asked = float(f.read())
    r = sh("journalctl", "-b", "-1", "-n", "1", "-o", "json", "--no-pager")
    last = int(json.loads(r.stdout.splitlines()[-1])["__REALTIME_TIMESTAMP"]) / 1e6
    took = last - asked
    print(f"shutdown for the reboot: {took:.1f} s (from systemctl reboot to the last journal entry)")
    save(reboot_shutdown_journal=round(took, 2))
    if took >= SHUTDOWN_MAX:
        problems.append(f"the shutdown took {took:.1f} s (at most {SHUTDOWN_MAX:.0f}); "
                        + slowest_stretch(asked))
    wait_active("paddock-sessiond.service")
    c = client()
    # The sessions could not outlive the machine: they are gone, and so is what they held.
    for sid in st["before_reboot"]:
        r = c.exec(sid, "code_execution", {"code": "print(1)"})
        if r.status_code != 404:
            problems.append(f"{sid} after the reboot: {r.status_code} {r.text[:300]}")
    sid = c.new_session()
    out = c.run(sid, "print('after the reboot')")
    if out.stdout != "after the reboot\n":
        problems.append(f"a new session after the reboot: {out}")
    save(after_reboot=[sid])
    assert not problems, "after the reboot:\n  " + "\n  ".join(problems)


# --- remove and purge ----------------------------------------------------------------------

def loops_left():
    """The workspaces' loop devices, which detach themselves a moment after their mounts."""
    deadline = time.monotonic() + 10
    while (loops := ps.loops_backed_under("/var/lib/paddock")) and time.monotonic() < deadline:
        time.sleep(0.1)
    return [f"loop devices left: {loops[:10]}"] if loops else []


def test_remove():
    st = load()
    live = st.get("after_reboot", [])
    sh("apt-get", "remove", "-y", "-q", "paddock", timeout=600)
    problems = []
    states = {u: active(u) for u in UNITS + ("paddock-fcgi.service",)}
    if not all(s in ("inactive", "unknown") for s in states.values()):
        problems.append(f"units after remove: {states}\n{unit_status(*UNITS)}")
    left = sandbox_processes(st)
    if left:
        problems.append("sandbox processes left:\n    " + "\n    ".join(left[:20]))
    mounts = ps.mounts_under("/var/lib/paddock")
    if mounts:
        problems.append(f"mounts left under /var/lib/paddock: {mounts[:20]}")
    problems += loops_left()
    db = "/var/lib/paddock/paddock.db"
    if os.path.exists(db) and live:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            rows = con.execute("SELECT id FROM sessions WHERE id IN (%s)" % ",".join("?" * len(live)),
                               live).fetchall()
        finally:
            con.close()
        if rows:
            problems.append(f"sessions still recorded as live: {rows}")
    assert not problems, "after apt remove:\n  " + "\n  ".join(problems)


def test_purge():
    st = load()
    sh("apt-get", "purge", "-y", "-q", "paddock", timeout=600)
    problems = []
    left = sandbox_processes(st)
    if left:
        problems.append("sandbox processes: " + "; ".join(left[:10]))
    mounts = ps.mounts_under("/var/lib/paddock")
    if mounts:
        problems.append(f"mounts: {mounts[:10]}")
    problems += loops_left()
    for p in ("/var/lib/paddock", "/run/paddock", "/etc/paddock", "/etc/nginx/sites-enabled/paddock"):
        if os.path.lexists(p):
            problems.append(f"{p} is still there")
    cgs = paddock_cgroups()
    if cgs:
        problems.append(f"cgroups: {cgs[:10]}")
    try:
        pwd.getpwnam("paddock")
        problems.append("the user paddock is still there")
    except KeyError:
        pass
    try:
        grp.getgrnam("paddock")
        problems.append("the group paddock is still there")
    except KeyError:
        pass
    r = sh("nginx", "-t", check=False)
    if r.returncode != 0:
        problems.append(f"nginx -t fails: {r.stderr.strip()[-500:]}")
    r = sh("systemctl", "restart", "nginx.service", check=False)
    if r.returncode != 0:
        problems.append(f"systemctl restart nginx fails: {r.stderr.strip()}\n"
                        + unit_status("nginx.service"))
    assert not problems, "after purge:\n  " + "\n  ".join(problems)


# --- power off with live sessions (the host times it) ------------------------------------

def test_live_sessions_before_poweroff():
    new = os.environ["PADDOCK_SYSTEST_NEW"]
    # purged: the container's setting goes in again before the package
    keep_conf = guest_conf.prepare_install(os.environ["PADDOCK_SYSTEST_LAYOUT"],
                                           os.environ["PADDOCK_SOURCE_DIR"])
    sh("apt-get", "install", "-y", "-q", *keep_conf, os.path.join(DEBS, new), timeout=600)
    enable_site()
    c = client()
    sids = sessions_with_state(c)
    assert_state(c, sids)
