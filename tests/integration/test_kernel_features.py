# SPDX-License-Identifier: MIT
"""The start-up probes for real: paddock-sessiond under a seccomp filter that refuses one
call (as a unit's hardening does: systemd's RestrictSUIDSGID= answers openat2 with ENOSYS)
exits 1 with one sentence naming the cause and the fix, and starts without the filter; a
cgroup hierarchy mounted read-only stops it too, and paddockctl doctor reports it. The
read-only mount is made in a private mount namespace: the host's stays as it is."""

import json
import os
import secrets
import selectors
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

import paddock_stack as ps

SESSIOND = os.path.join(ps.BUILD_DIR, "paddock-sessiond")
CTL = os.path.join(ps.BUILD_DIR, "paddockctl")
REFUSE = os.path.join(ps.BUILD_DIR, "tests", "with_syscall_refused")
TIMEOUT = 60.0


@pytest.fixture
def env(tmp_path):
    for p in (SESSIOND, CTL, REFUSE):
        if not os.access(p, os.X_OK):
            pytest.skip(f"{p} is not built")
    e = {k: v for k, v in os.environ.items()
         if not k.startswith("PADDOCK_") and k != "INVOCATION_ID"}
    e.update({
        "PADDOCK_STATE_DIR": str(tmp_path / "state"),
        "PADDOCK_RUNTIME_DIR": str(tmp_path / "run"),
        "PADDOCK_LIB_DIR": ps.LIB_DIR,
        "PADDOCK_NODE_NAME": "tf" + secrets.token_hex(4),
        "PADDOCK_UID_BASE": str(300000 + secrets.randbelow(4000) * 4096),
        "PADDOCK_POOL_SIZE": "0",
        "PADDOCK_LOG_TARGET": "stderr",
        "PADDOCK_LOG_LEVEL": "info",
    })
    return e


def run_daemon(argv, env):
    """Run sessiond until it says it is ready (then stop it) or exits on its own.
    Returns (ready, exit status, its log)."""
    p = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, start_new_session=True)
    fd, log, ready = p.stderr.fileno(), b"", False
    sel = selectors.DefaultSelector()
    sel.register(fd, selectors.EVENT_READ)
    deadline = time.monotonic() + TIMEOUT
    try:
        while not ready:
            left = deadline - time.monotonic()
            assert left > 0, "sessiond neither started nor exited:\n" + log.decode()
            if not sel.select(left):
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            log += chunk
            ready = b"]: ready: node " in log
        if ready:
            p.send_signal(signal.SIGTERM)
            while chunk := os.read(fd, 65536):
                log += chunk
        rc = p.wait(timeout=TIMEOUT)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        sel.close()
        p.stderr.close()
    return ready, rc, log.decode()


def levelled(log, level):
    """The text of the log lines at one level ("error", "warn")."""
    tag = f"paddock-sessiond[{level}]: "
    return [line.split(tag, 1)[1].rstrip("\n") for line in log.splitlines() if tag in line]


def test_file_systems_past_the_memory_refused(env):
    """A tmpfs workspace and /tmp are held in the session's memory: sizes that leave its
    programs less than program_memory_min_bytes are refused at start, with the figures."""
    env["PADDOCK_WORKSPACE_BYTES"] = "1G"
    env["PADDOCK_WORKSPACE_BACKEND"] = "tmpfs"
    ready, rc, log = run_daemon([SESSIOND], env)
    assert not ready and rc != 0, log
    assert "workspace_bytes (1073741824)" in log and "memory_max_bytes" in log, log


def test_disk_workspaces_need_a_disk_but_ending_sessions_does_not(env):
    """With workspace_backend = disk a state dir on tmpfs is refused at start, naming the
    way out; --end-sessions (what removing the package runs) makes no workspace, so it
    works there all the same."""
    state = tempfile.mkdtemp(prefix="paddock-tf-", dir="/dev/shm")
    try:
        env["PADDOCK_STATE_DIR"] = state
        env["PADDOCK_WORKSPACE_BACKEND"] = "disk"
        ready, rc, log = run_daemon([SESSIOND], env)
        assert not ready and rc != 0, log
        assert "workspace_backend = tmpfs" in log and "not a disk" in log, log
        r = subprocess.run([SESSIOND, "--end-sessions"], env=env, capture_output=True,
                           text=True, timeout=TIMEOUT)
        assert r.returncode == 0, r.stderr
        assert "no workspace can be made" not in r.stderr, r.stderr
    finally:
        shutil.rmtree(state, ignore_errors=True)


def test_starts_without_a_filter(env):
    ready, rc, log = run_daemon([SESSIOND], env)
    assert ready and rc == 0, log
    assert levelled(log, "error") == [], log
    assert not [w for w in levelled(log, "warn") if "refused" in w or "missing" in w], log


def test_openat2_refused_in_a_unit(env):
    """What RestrictSUIDSGID=yes does to the packaged unit: refuse, in one sentence."""
    env["INVOCATION_ID"] = secrets.token_hex(16)  # what systemd gives a unit's processes
    ready, rc, log = run_daemon([REFUSE, "openat2", "ENOSYS", SESSIOND], env)
    assert not ready and rc == 1, log
    assert levelled(log, "error") == [
        "openat2() is refused (ENOSYS): a seccomp filter on this service blocks it, such as "
        "systemd's RestrictSUIDSGID=; remove that setting (RestrictSUIDSGID=no in a drop-in: "
        "systemctl edit paddock-sessiond), or let openat2() through whatever filter refuses it"
    ], log
    assert not os.path.exists(env["PADDOCK_STATE_DIR"]), "it set things up before refusing"


def test_openat2_refused_outside_a_unit(env):
    ready, rc, log = run_daemon([REFUSE, "openat2", "EPERM", SESSIOND], env)
    assert not ready and rc == 1, log
    errors = levelled(log, "error")
    assert len(errors) == 1 and errors[0].startswith(
        "openat2() is refused (EPERM): a seccomp filter this process runs under blocks it"), log


def test_clone3_refused(env):
    """Docker's default profile answers clone3 with ENOSYS; sandboxes are born from it."""
    ready, rc, log = run_daemon([REFUSE, "clone3", "ENOSYS", SESSIOND], env)
    assert not ready and rc == 1, log
    errors = levelled(log, "error")
    assert errors and all(e.startswith("clone3() is refused (ENOSYS)") for e in errors), log


def test_pidfd_getfd_refused_is_a_warning(env):
    """systemd-nspawn's filter refuses pidfd_getfd: sessions then do not outlive a restart,
    which is worth a warning, not a refusal."""
    ready, rc, log = run_daemon([REFUSE, "pidfd_getfd", "EPERM", SESSIOND], env)
    assert ready and rc == 0, log
    assert levelled(log, "error") == [], log
    warned = [w for w in levelled(log, "warn") if w.startswith("pidfd_getfd() is refused")]
    assert len(warned) == 1 and "sessions do not survive a restart" in warned[0], log
    assert "--system-call-filter=pidfd_getfd" in warned[0], log


def _hierarchy_paddock_writes():
    """The cgroup mount whose being read-only stops paddock: the unified hierarchy on
    cgroup v2, the memory hierarchy on v1."""
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        mounts = [line.split(" - ") for line in f]
    for left, right in mounts:
        if left.split()[4] == "/sys/fs/cgroup" and right.split()[0] == "cgroup2":
            return "/sys/fs/cgroup"
    for left, right in mounts:
        fstype, _source, opts = right.split()[:3]
        if fstype == "cgroup" and "memory" in opts.split(","):
            return left.split()[4]
    return None


def in_read_only_cgroup(argv):
    """argv run in a mount namespace of its own where that hierarchy is read-only."""
    mnt = _hierarchy_paddock_writes()
    if mnt is None:
        pytest.skip("no cgroup hierarchy with the memory controller here")
    return mnt, ["unshare", "-m", "--propagation", "private", "sh", "-c",
                 'mount -o remount,bind,ro "$0" && exec "$@"', mnt, *argv]


def test_read_only_cgroup_stops_sessiond(env):
    mnt, argv = in_read_only_cgroup([SESSIOND])
    ready, rc, log = run_daemon(argv, env)
    assert not ready and rc == 1, log
    errors = levelled(log, "error")
    assert len(errors) == 1, log
    assert errors[0].startswith(f"{mnt} is mounted read-only: no session's cgroup can be created"
                                f"; mount it read-write"), log


def test_doctor_reports_read_only_cgroup(env):
    """doctor said cgroups were fine when they were mounted read-only."""
    def doctor(argv):
        r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=TIMEOUT)
        by = {c["name"]: c for c in json.loads(r.stdout)["checks"]}
        return r.returncode, by

    rc, by = doctor([CTL, "--json", "doctor"])
    assert by["cgroup writable"]["status"] == "ok", by["cgroup writable"]

    mnt, argv = in_read_only_cgroup([CTL, "--json", "doctor"])
    rc, by = doctor(argv)
    assert rc == 1
    c = by["cgroup writable"]
    assert c["status"] == "fail" and mnt in c["detail"] and "read-only" in c["detail"], c
    assert f"mount -o remount,bind,rw {mnt}" in c["fix"], c
    # The rest of the cgroup findings stand: the controllers are there.
    assert by["cgroup memory"]["status"] == "ok" and by["cgroup pids"]["status"] == "ok"
