# SPDX-License-Identifier: MIT
"""The system test inside a guest (container or VM), run by paddock-systest.service at
every boot. It installs the package, enables it the documented way, runs the integration
suites against it and the lifecycle test, in phases: the lifecycle reboots the guest once,
and the script picks up after the boot from the phase file in the share. Each step's
result goes to /systest/out/steps.jsonl, its output to /systest/out/logs/; at the end the
guest writes the poweroff marker and powers off (the host times the shutdown from it).

/systest/config.json (written by the host):
  layout        "container" or "vm"
  old, new      file names in /systest/debs: the lower and the higher package version
  integration   test files of tests/integration to run against the installed package
  enable        "paddockctl" (paddockctl site enable) or "manual" (the link and a reload)
"""

import json
import os
import subprocess
import sys
import time

import guest_conf

SHARE = "/systest"
OUT = os.path.join(SHARE, "out")
LOGS = os.path.join(OUT, "logs")
SRC = os.path.join(SHARE, "src")
GUEST = os.path.join(SRC, "tests", "system", "guest")
PHASE = os.path.join(OUT, "phase")
PYTHON = "/usr/bin/python3"

with open(os.path.join(SHARE, "config.json"), encoding="utf-8") as f:
    CONFIG = json.load(f)


def env():
    e = dict(os.environ)
    e.update({
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "DEBIAN_FRONTEND": "noninteractive",
        "PADDOCK_TEST_INSTALLED": "1",
        "PADDOCK_SOURCE_DIR": SRC,
        "PADDOCK_OTARI_OPENAPI": os.path.join(SHARE, "shared", "spec",
                                              "otari-code-execution-openapi.yaml"),
        "PADDOCK_AIO_OPENAPI": os.path.join(SHARE, "shared", "spec", "aio-sandbox-1x-openapi.json"),
        "PADDOCK_SYSTEST_SHARE": SHARE,
        "PADDOCK_SYSTEST_DEBS": os.path.join(SHARE, "debs"),
        "PADDOCK_SYSTEST_OLD": CONFIG["old"],
        "PADDOCK_SYSTEST_NEW": CONFIG["new"],
        "PADDOCK_SYSTEST_ENABLE": CONFIG.get("enable", "paddockctl"),
        "PADDOCK_SYSTEST_LAYOUT": CONFIG["layout"],
        # What the test stacks beside the package's daemon run with (paddock_stack.py).
        "PADDOCK_SYSTEST_WORKSPACE_BACKEND": guest_conf.workspace_backend(CONFIG["layout"]),
        "PYTHONDONTWRITEBYTECODE": "1",
    })
    return e


def step_count():
    try:
        with open(os.path.join(OUT, "steps.jsonl"), encoding="utf-8") as f:
            return sum(1 for _ in f)
    except OSError:
        return 0


def record(name, ok, seconds, detail=""):
    with open(os.path.join(OUT, "steps.jsonl"), "a", encoding="utf-8") as f:
        f.write(json.dumps({"step": name, "ok": ok, "seconds": round(seconds, 1),
                            "detail": detail[-2000:]}) + "\n")
        f.flush()
        os.fsync(f.fileno())


def run_step(name, argv, timeout=1800, cwd=None, tests=False):
    """Run one step, its output to a log of its own; record and return whether it passed.
    tests: a pytest run, which passes only if some test passed (all skipped, or nothing
    collected, tests nothing)."""
    log = os.path.join(LOGS, f"{step_count():02d}-{name.replace('/', '_')}.log")
    t0 = time.monotonic()
    with open(log, "wb") as f:
        f.write(("$ " + " ".join(argv) + "\n").encode())
        f.flush()
        try:
            r = subprocess.run(argv, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                               env=env(), timeout=timeout, cwd=cwd or SHARE)
            rc = r.returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    seconds = time.monotonic() - t0
    ok = rc == 0
    detail = ""
    with open(log, "rb") as f:
        f.seek(0, os.SEEK_END)
        f.seek(max(0, f.tell() - 300))
        last = f.read().decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
    if tests and ok and " passed" not in last[0]:
        ok = False
        rc = f"0 but nothing passed ({last[0].strip('= ')})"
    if tests:
        detail = last[0].strip("= ")
    if not ok:
        with open(log, "rb") as f:
            text = f.read().decode("utf-8", "replace")
        # pytest: the assertions and the names of what failed, not the logs dumped after.
        lines = text.splitlines()
        picked = [l for l in lines if l.startswith(("E   ", "FAILED ", "ERROR "))]
        excerpt = "\n".join(picked[:60]) if tests and picked else text[-3000:]
        detail = f"exit status {rc}; log {os.path.relpath(log, SHARE)}:\n{excerpt}"
    record(name, ok, seconds, detail)
    return ok


def pytest(target, name, timeout=1800):
    return run_step(name, [PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfEs",
                           "--tb=short", target], timeout=timeout, tests=True)


def lifecycle(test):
    return pytest(os.path.join(GUEST, "test_lifecycle.py") + "::" + test, "lifecycle/" + test)


def set_phase(phase):
    with open(PHASE + ".tmp", "w", encoding="utf-8") as f:
        f.write(phase + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.rename(PHASE + ".tmp", PHASE)


def marker(name):
    """A file in the share the host watches; written just before a reboot or poweroff."""
    with open(os.path.join(OUT, name), "w", encoding="utf-8") as f:
        f.write(f"{time.time():.3f}\n")
        f.flush()
        os.fsync(f.fileno())


def site_down(timeout=30):
    """None when the installed site takes a session on 127.0.0.1:8080, else why not."""
    import urllib.request
    deadline = time.monotonic() + timeout
    why = ""
    while time.monotonic() < deadline:
        try:
            req = urllib.request.Request("http://127.0.0.1:8080/sessions", data=b"{}",
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=30) as r:
                sid = json.loads(r.read())["session_id"]
            req = urllib.request.Request(f"http://127.0.0.1:8080/sessions/{sid}", method="DELETE")
            urllib.request.urlopen(req, timeout=30).close()
            return None
        except Exception as e:  # refused, 502, 503: the site is not serving yet
            why = f"the installed site does not take a session on 127.0.0.1:8080 ({e})"
        time.sleep(1)
    return why


def external_checks():
    """Checkers of a protocol's own (PADDOCK_SYSTEST_CHECKS on the host), run against the
    installed site: python3 CHECK --base-url URL --spec OTARI-OPENAPI, passing on exit 0."""
    for name in CONFIG.get("checks", []):
        run_step("check/" + name,
                 ["/usr/bin/python3", os.path.join(SHARE, "checks", name), "--base-url",
                  "http://127.0.0.1:8080", "--spec", env()["PADDOCK_OTARI_OPENAPI"]],
                 timeout=600)


def phase_install():
    debs = os.path.join(SHARE, "debs")
    keep_conf = guest_conf.prepare_install(CONFIG["layout"], SRC)
    run_step("install " + CONFIG["old"],
             ["apt-get", "install", "-y", "-q", *keep_conf, os.path.join(debs, CONFIG["old"])])
    lifecycle("test_enable_the_site")
    lifecycle("test_units_active")
    # The suites talk to the site on 127.0.0.1:8080: without it every test of every file
    # would wait out its start-up timeout, so they are recorded as not run instead.
    down = site_down()
    for name in CONFIG.get("integration", []):
        if down:
            record("integration/" + name, False, 0, f"not run: {down}")
        else:
            pytest(os.path.join(SRC, "tests", "integration", name), "integration/" + name)
    if not down:
        external_checks()
    for test in ("test_sessions_with_state", "test_sessiond_restart_keeps_state",
                 "test_sessiond_kill9_keeps_state", "test_upgrade_keeps_state",
                 "test_nginx_restart", "test_no_left_over_process_lines",
                 "test_live_sessions_before_reboot"):
        lifecycle(test)
    set_phase("after-reboot")
    marker("reboot-requested")
    subprocess.run(["systemctl", "reboot", "--no-block"])


def phase_after_reboot():
    for test in ("test_after_reboot", "test_remove", "test_purge",
                 "test_live_sessions_before_poweroff"):
        lifecycle(test)
    set_phase("done")
    failed = 0
    with open(os.path.join(OUT, "steps.jsonl"), encoding="utf-8") as f:
        failed = sum(1 for line in f if not json.loads(line)["ok"])
    with open(os.path.join(OUT, "status"), "w", encoding="utf-8") as f:
        f.write(f"{1 if failed else 0}\n")
    marker("poweroff-requested")
    subprocess.run(["systemctl", "poweroff", "--no-block"])


def main():
    os.makedirs(LOGS, exist_ok=True)
    try:
        with open(PHASE, encoding="utf-8") as f:
            phase = f.read().strip()
    except FileNotFoundError:
        phase = "install"
    print(f"paddock system test: phase {phase}", flush=True)
    if phase == "install":
        phase_install()
    elif phase == "after-reboot":
        phase_after_reboot()
    else:
        # A boot the test did not ask for (done already, or an unknown phase): stop here.
        record(f"unexpected boot in phase {phase}", False, 0)
        marker("poweroff-requested")
        subprocess.run(["systemctl", "poweroff", "--no-block"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
