# SPDX-License-Identifier: MIT
"""The systemd units pass `systemd-analyze verify` (with ExecStart pointed at this build),
carry the settings the design relies on, and packaging/paddock.conf documents every
setting with its real default (checked against paddock-sessiond --check-config)."""

import configparser
import os
import re
import shutil
import subprocess
import tempfile

import pytest

import paddock_stack as ps

UNITS = ("paddock-sandboxes.service", "paddock-sessiond.service", "paddock-fcgi.socket",
         "paddock-fcgi.service")
UNIT_DIR = os.path.join(ps.SOURCE_DIR, "packaging", "systemd")
CONF = os.path.join(ps.SOURCE_DIR, "packaging", "paddock.conf")
SESSIOND = os.path.join(ps.BUILD_DIR, "paddock-sessiond")


def unit(name):
    cp = configparser.ConfigParser(strict=False, interpolation=None, delimiters=("=",))
    cp.optionxform = str
    cp.read(os.path.join(UNIT_DIR, name), encoding="utf-8")
    return cp


def test_units_verify():
    tool = shutil.which("systemd-analyze")
    if not tool:
        pytest.skip("systemd-analyze is missing (apt-get install systemd)")
    tmp = tempfile.mkdtemp(prefix="paddock-units-")
    try:
        for name in UNITS:
            with open(os.path.join(UNIT_DIR, name), encoding="utf-8") as f:
                text = f.read()
            # verify checks that ExecStart exists: use this build's programs.
            text = text.replace("/usr/sbin/", ps.BUILD_DIR + "/")
            with open(os.path.join(tmp, name), "w", encoding="utf-8") as f:
                f.write(text)
        r = subprocess.run([tool, "verify", "--man=no"] + [os.path.join(tmp, n) for n in UNITS],
                           capture_output=True, text=True, timeout=60)
        out = (r.stdout + r.stderr).strip()
        if r.returncode != 0 and re.search(r"Failed to (connect|initialize|setup)|"
                                           r"not booted|No such file or directory.*bus", out):
            pytest.skip(f"systemd-analyze verify cannot run here: {out[:300]}")
        assert r.returncode == 0 and not out, f"systemd-analyze verify:\n{out}"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_sessiond_unit_settings():
    u = unit("paddock-sessiond.service")
    s = u["Service"]
    # The sandboxes are not in the daemon's cgroup (systemd could not start a new daemon
    # in a v2 cgroup with children): they are in paddock-sandboxes.service's.
    assert "Delegate" not in s
    assert s["KillMode"] == "mixed"
    assert "paddock-sandboxes.service" in u["Unit"]["Requires"].split()
    assert "paddock-sandboxes.service" in u["Unit"]["PartOf"].split()
    assert "paddock-sandboxes.service" in u["Unit"]["After"].split()
    assert int(u["Unit"]["StartLimitBurst"]) > 0, "a broken configuration must not spin"
    assert s["RuntimeDirectory"] == "paddock" and s["StateDirectory"] == "paddock"
    assert s["RuntimeDirectoryPreserve"] == "yes", "a restart must not delete fcgi.sock"
    assert "User" not in s, "the daemon runs as root"
    # Nothing that takes namespaces away or gives the service its own mount namespace,
    # and nothing that refuses openat2 (RestrictSUIDSGID= answers it ENOSYS).
    for forbidden in ("RestrictNamespaces", "PrivateTmp", "ProtectSystem", "ProtectHome",
                      "PrivateDevices", "ProtectControlGroups", "ProtectKernelTunables",
                      "PrivateNetwork", "PrivateUsers", "SystemCallFilter",
                      "MemoryDenyWriteExecute", "DevicePolicy", "ProtectClock",
                      "RestrictSUIDSGID", "SystemCallArchitectures"):
        assert forbidden not in s, f"{forbidden} breaks sandbox creation or re-adoption"
    assert s["NoNewPrivileges"] == "yes"
    assert "CAP_SYS_ADMIN" not in s.get("CapabilityBoundingSet", "")


def test_sandboxes_unit_settings():
    u = unit("paddock-sandboxes.service")
    s = u["Service"]
    assert s["Delegate"] == "yes", "the daemon makes the sandboxes' cgroups below it"
    # A stop ends every sandbox at once (their inits ignore SIGTERM from outside).
    assert s["KillMode"] == "control-group" and s["KillSignal"] == "SIGKILL"
    assert int(s["TimeoutStopSec"].rstrip("s")) <= 10
    assert s["TasksMax"] == "infinity"
    # Whatever systemd attaches to the unit's cgroup reaches every sandbox below it.
    for cgroup_wide in ("PrivateDevices", "DevicePolicy", "DeviceAllow", "IPAddressDeny",
                        "MemoryMax", "CPUQuota", "IPAddressAllow"):
        assert cgroup_wide not in s, f"{cgroup_wide} would apply to every sandbox"
    assert "paddock-sessiond.service" in u["Unit"]["Before"].split()
    env = unit("paddock-sessiond.service")["Service"]["Environment"]
    assert "PADDOCK_CGROUP_ROOT=systemd:paddock-sandboxes.service" in env


def test_fcgi_units_settings():
    sock = unit("paddock-fcgi.socket")["Socket"]
    assert sock["ListenStream"] == "/run/paddock/fcgi.sock"
    assert sock["SocketMode"] == "0660" and sock["SocketGroup"] == "paddock"
    assert sock.get("Accept", "no") == "no"
    svc = unit("paddock-fcgi.service")
    s = svc["Service"]
    assert s["User"] == "paddock" and s["Restart"] == "on-failure"
    assert "--socket" not in s["ExecStart"], "the listener must come from the socket unit"
    assert "paddock-fcgi.socket" in svc["Unit"]["Requires"]
    # The default thread count (max_sessions + 64, up to 1024) at five descriptors each.
    assert int(s["LimitNOFILE"]) >= 64 + 5 * 1024, s.get("LimitNOFILE")
    with open(os.path.join(ps.SOURCE_DIR, "nginx", "paddock-upstream.conf"), encoding="utf-8") as f:
        assert f"unix:{sock['ListenStream']};" in f.read(), "nginx's upstream is not the socket"


def dump(env_extra=None, config=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PADDOCK_", "AIO_"))}
    env.update(env_extra or {})
    argv = [SESSIOND, "--check-config"] + (["--config", config] if config else [])
    r = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=30)
    assert r.returncode == 0, r.stderr
    return dict(l.split(" = ", 1) if " = " in l else (l.rstrip(" ="), "")
                for l in r.stdout.splitlines())


SIZE = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def normalise(v):
    m = re.fullmatch(r"(\d+)([KMG])", v)
    return str(int(m.group(1)) * SIZE[m.group(2)]) if m else v


def test_config_file_documents_every_setting():
    if not os.access(SESSIOND, os.X_OK):
        pytest.skip(f"{SESSIOND} is not built")
    defaults = dump()
    with open(CONF, encoding="utf-8") as f:
        text = f.read()
    documented = {}
    for m in re.finditer(r"^# ([a-z_][a-z0-9_]*) = ?(.*)$", text, re.M):
        assert m.group(1) not in documented, f"{m.group(1)} documented twice"
        documented[m.group(1)] = m.group(2)
    missing = [k for k in defaults if k not in documented]
    assert not missing, f"packaging/paddock.conf does not document: {missing}"
    unknown = [k for k in documented if k not in defaults]
    assert not unknown, f"packaging/paddock.conf documents settings that do not exist: {unknown}"
    assert list(documented) == list(defaults), "keep the file in --check-config's order"
    for k, v in documented.items():
        if k in ("lib_dir", "node_name"):
            continue  # build prefix and host name
        assert normalise(v) == defaults[k], f"{k}: the file says {v!r}, the default is {defaults[k]!r}"
    # The shipped file changes only what it sets on lines of their own.
    active = dict(re.findall(r"^([a-z_][a-z0-9_]*) = (.*)$", text, re.M))
    assert set(active) <= {"keep_sessions_on_exit"}, f"the file sets {sorted(active)}"
    assert dump(config=CONF) == dict(defaults, **active)
    # Every documented value parses, and is the default.
    uncommented = {k: v for k, v in documented.items() if k not in ("lib_dir", "node_name")}
    with tempfile.NamedTemporaryFile("w", suffix=".conf", encoding="utf-8") as f:
        f.write("".join(f"{k} = {v}\n" for k, v in uncommented.items()))
        f.flush()
        assert dump(config=f.name) == defaults


def test_bad_value_names_the_key():
    if not os.access(SESSIOND, os.X_OK):
        pytest.skip(f"{SESSIOND} is not built")
    with tempfile.NamedTemporaryFile("w", suffix=".conf", encoding="utf-8") as f:
        f.write("max_sessions = lots\n")
        f.flush()
        r = subprocess.run([SESSIOND, "--config", f.name, "--check-config"], capture_output=True,
                           text=True, timeout=30)
    assert r.returncode != 0 and "max_sessions" in r.stderr, r.stderr
