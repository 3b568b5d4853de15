# SPDX-License-Identifier: MIT
"""paddock's system test: the .deb as users get it, on Debian 12 booted with systemd.

  /usr/bin/python3 tests/system/systest.py [--layout container|vm|both] [--work DIR]

1. builds the .deb of the checkout and one of the same source a version higher;
2. builds the .deb again in a clean build root (build-essential and Build-Depends only);
3. boots a cached Debian 12 image in a systemd-nspawn container (this host's cgroup v1
   hybrid) and in a QEMU VM (Debian's kernel, cgroup v2), where guest/entry.py installs
   the lower version, enables the site, runs the integration suites against it and the
   lifecycle test (restart, kill -9, upgrade, nginx restart, reboot, remove, purge,
   poweroff with live sessions);
4. prints a summary per layout and exits non-zero on any failure (77: not root).

Images are cached in /var/cache/paddock-systest (images.py); everything of one run is
under --work (default /var/tmp/paddock-systest), kept for a look after the run.
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)

import container  # noqa: E402
import debs  # noqa: E402
import guest_run  # noqa: E402
import images  # noqa: E402
import vm  # noqa: E402

# The documented enabling step, "paddockctl" (paddockctl site enable), or "manual" (the
# sites-enabled link and a reload; HTTPS then checked without the certificate).
ENABLE = os.environ.get("PADDOCK_SYSTEST_ENABLE", "paddockctl")

# Under TCG the VM runs several times slower than the host: the Otari suites and the
# restart tests and the recovery from limits there; in the container every integration file that can run installed.
VM_SUITES = ["test_otari_badinput.py", "test_otari_editor.py", "test_otari_exec.py",
             "test_otari_files.py", "test_otari_limits.py", "test_otari_sessions.py",
             "test_restart.py", "test_limits_recovery.py", "test_workspace_disk.py"]
# Workspaces on loop devices, where there are loop devices: the VM. The container has none
# (nspawn passes no block devices in), so it runs paddock with workspace_backend = tmpfs,
# the documented way for such hosts, and every other suite there on tmpfs workspaces.
VM_ONLY_SUITES = ["test_workspace_disk.py"]
# Not run installed: test_package_deb.py and test_package_rpm.py build packages from a
# source tree (the host side of this test does that); test_systemd_units.py checks the
# source tree's units against a build's binary (the installed units are what this test
# runs); test_harness.py drives the source tree's harnesses directly, with no stack;
# test_kernel_features.py needs a helper program of the build tree
# (tests/with_syscall_refused); test_paddockctl_site.py runs paddockctl against nginx
# trees and a faked systemd of its own (the lifecycle runs the installed paddockctl site
# enable against the guest's real nginx).
CONTAINER_SUITES = [s for s in VM_SUITES if s not in VM_ONLY_SUITES] + [
    "test_code_endpoint.py", "test_code_execute.py", "test_code_runtimes.py",
    "test_escape_files.py", "test_escape_sandbox.py", "test_harness_endpoint.py",
    "test_http_hostile.py", "test_limits_bystander.py", "test_limits_daemon_memory.py",
    "test_multinode.py", "test_paddockctl.py", "test_stress.py", "test_file_names.py",
    "test_file_states.py", "test_limits_create_busy.py", "test_otari_lookup_health.py",
    # the set the .deb recommends, as the guest image installed it from the package
    "test_package_set.py"]

TIMEOUTS = {"container": 900, "vm": 1500}  # seconds of one guest run, reboot included
SHUTDOWN_MAX = 10.0


def openapi():
    candidates = [os.environ.get("PADDOCK_OTARI_OPENAPI"),
                  os.path.join(SOURCE_DIR, "..", "shared", "spec", "otari-code-execution-openapi.yaml"),
                  "/work/shared/spec/otari-code-execution-openapi.yaml"]
    for p in candidates:
        if p and os.path.isfile(p):
            return os.path.abspath(p)
    raise RuntimeError("the Otari OpenAPI document was not found (PADDOCK_OTARI_OPENAPI)")


def say(line):
    print(time.strftime("%H:%M:%S ") + line, flush=True)


class Report:
    """Host steps and guest steps, for the summary."""

    def __init__(self):
        self.sections = {}

    def add(self, section, step, ok, seconds=None, detail="", quiet=False):
        self.sections.setdefault(section, []).append((step, ok, seconds, detail))
        if quiet:  # already shown as it happened
            return
        t = f" ({seconds:.0f} s)" if seconds is not None else ""
        say(f"[{section}] {'ok  ' if ok else 'FAIL'} {step}{t}")

    def timed(self, section, step, fn):
        t0 = time.monotonic()
        try:
            value = fn()
        except Exception as e:  # the step fails, the summary says why, the run goes on
            detail = str(e)
            if isinstance(e, subprocess.CalledProcessError):
                detail = f"{' '.join(map(str, e.cmd))[:300]}: exit status {e.returncode}"
            self.add(section, step, False, time.monotonic() - t0, detail)
            return None
        self.add(section, step, True, time.monotonic() - t0)
        return value

    def failed(self):
        return [(sec, s) for sec, rows in self.sections.items() for s in rows if not s[1]]

    def summary(self):
        out = ["", "=" * 78, "paddock system test: summary", "=" * 78]
        for sec, rows in self.sections.items():
            out.append(f"\n{sec}:")
            for step, ok, seconds, _ in rows:
                t = f"{seconds:7.1f} s" if seconds is not None else " " * 9
                out.append(f"  {'pass' if ok else 'FAIL'}  {t}  {step}")
        fails = self.failed()
        if fails:
            out.append(f"\n{len(fails)} failed:")
            for sec, (step, _, _, detail) in fails:
                lines = detail.rstrip().splitlines()
                if len(lines) > 40:
                    lines = lines[:3] + ["    [...]"] + lines[-36:]
                out.append(f"\n--- {sec}: {step}\n" + "\n".join(lines))
        out.append("")
        return "\n".join(out)


def guest_layout(report, layout, tree, shared_src, old_deb, new_deb, work, logs):
    share = os.path.join(work, layout, "share")
    suites = VM_SUITES if layout == "vm" else CONTAINER_SUITES
    # PADDOCK_SYSTEST_SUITES=a.py,b.py: only these (a look at one suite, not the test).
    if os.environ.get("PADDOCK_SYSTEST_SUITES") is not None:
        suites = [s for s in os.environ["PADDOCK_SYSTEST_SUITES"].split(",") if s]
    # PADDOCK_SYSTEST_CHECKS=/path/a.py,...: a protocol's own conformance checkers, run in
    # the guest against the installed site (entry.py's external_checks).
    checks = [c for c in os.environ.get("PADDOCK_SYSTEST_CHECKS", "").split(",") if c]
    config = {"layout": layout, "old": os.path.basename(old_deb), "new": os.path.basename(new_deb),
              "integration": suites, "enable": ENABLE,
              "checks": [os.path.basename(c) for c in checks]}
    guest_run.prepare_share(share, shared_src, [old_deb, new_deb], os.path.dirname(openapi()),
                            config)
    if checks:
        os.makedirs(os.path.join(share, "checks"))
        for c in checks:
            shutil.copy(c, os.path.join(share, "checks"))
    log = os.path.join(logs, f"{layout}.log")
    t0 = time.monotonic()
    if layout == "container":
        watch = container.run(tree, share, os.path.join(work, layout, "run"), log, say,
                              TIMEOUTS[layout])
    else:
        watch = vm.run(tree, share, os.path.join(work, layout, "run"), log, say, TIMEOUTS[layout],
                       os.path.join(logs, "image.log"))
    total = time.monotonic() - t0
    for s in guest_run.steps(share):
        report.add(layout, s["step"], s["ok"], s["seconds"], s["detail"], quiet=True)
    finished = os.path.exists(os.path.join(share, "out", "status"))
    if not finished:
        report.add(layout, "the guest finished its run", False, total,
                   f"no status from the guest (see {log} and {share}/out/logs); host: {watch.times}")
    for what, marker in (("reboot shutdown", "reboot-requested"), ("poweroff", "poweroff-requested")):
        if marker not in watch.seen:
            continue
        took = watch.times.get(what)
        if took is None:
            report.add(layout, f"{what} under {SHUTDOWN_MAX:.0f} s (host)", False, None,
                       f"the guest asked for it and did not finish it; host: {watch.times}")
        else:
            report.add(layout, f"{what} under {SHUTDOWN_MAX:.0f} s (host)", took < SHUTDOWN_MAX, took,
                       f"took {took:.1f} s")
    try:
        with open(os.path.join(share, "out", "lifecycle.json"), encoding="utf-8") as f:
            took = json.load(f).get("reboot_shutdown_journal")
    except (OSError, ValueError):
        took = None
    if took is not None:
        report.add(layout, f"reboot shutdown under {SHUTDOWN_MAX:.0f} s (guest journal)",
                   took < SHUTDOWN_MAX, took, f"took {took:.1f} s")
    report.add(layout, "whole guest run", finished, total)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layout", choices=("container", "vm", "both"), default="both")
    ap.add_argument("--work", default=os.environ.get("PADDOCK_SYSTEST_WORK", "/var/tmp/paddock-systest"))
    ap.add_argument("--no-clean-build", action="store_true", help="skip the Build-Depends check")
    ap.add_argument("--src", default=SOURCE_DIR, help="the source tree to package (the checkout)")
    args = ap.parse_args()
    src_dir = os.path.abspath(args.src)
    # ctest's timeout and Ctrl-C: unwind, so that the guest is stopped and its mounts go.
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda n, _f: sys.exit(128 + n))
    if os.geteuid() != 0:
        print("SKIP: the system test needs root (chroots, overlay mounts, containers, a VM)")
        return 77

    t_start = time.monotonic()
    work = args.work
    # A run that was killed outright may have left its container's overlay mounted: never
    # delete through it (the lower layer is the cached image).
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        stale = [line.split()[4] for line in f if line.split()[4].startswith(work + "/")]
    for mnt in reversed(stale):
        subprocess.run(["umount", "-l", mnt], check=False)
    shutil.rmtree(work, ignore_errors=True)
    logs = os.path.join(work, "logs")
    os.makedirs(logs)
    say(f"system test: work dir {work}, logs in {logs}, image cache {images.CACHE_DIR}")
    report = Report()
    host = "host"

    old_deb = report.timed(host, "build the .deb (packaging/deb/build.sh)",
                           lambda: debs.build(src_dir, os.path.join(work, "deb-old"),
                                              os.path.join(logs, "deb-old.log")))
    new_deb = report.timed(host, f"build the upgrade .deb (version{debs.UPGRADE_SUFFIX})",
                           lambda: debs.build_upgrade(src_dir, os.path.join(work, "deb-new"),
                                                      os.path.join(logs, "deb-new.log")))
    if not args.no_clean_build:
        control = os.path.join(src_dir, "packaging", "deb", "debian", "control")

        def clean_build():
            root, _ = images.build_root(control, os.path.join(logs, "buildroot.log"))
            try:
                deb = debs.build_in_root(src_dir, root, os.path.join(logs, "clean-build.log"))
            except subprocess.CalledProcessError:
                with open(os.path.join(logs, "clean-build.log"), encoding="utf-8",
                          errors="replace") as f:
                    lines = [l.rstrip() for l in f
                             if re.search(r"error:|Error [0-9]|not found|No such file", l)]
                raise RuntimeError("the build in a root with only build-essential and the "
                                   "Build-Depends failed:\n  " + "\n  ".join(lines[:12]))
            if old_deb and debs.contents(deb) != debs.contents(old_deb):
                a, b = set(debs.contents(deb)), set(debs.contents(old_deb))
                raise RuntimeError(f"the clean build's files differ: only there {sorted(a - b)}, "
                                   f"only in the checkout's {sorted(b - a)}")
            return deb
        report.timed(host, "build the .deb in a clean root with only Build-Depends", clean_build)

    if old_deb and new_deb:
        got = report.timed(host, "the guest image (Debian 12, systemd, kernel, test packages)",
                           lambda: images.guest_root(old_deb, os.path.join(logs, "image.log")))
        if got:
            tree, cold = got
            say(f"guest image {tree} ({'made now' if cold else 'cached'})")
            src = os.path.join(work, "src")
            os.makedirs(src)
            subprocess.run([os.path.join(src_dir, "packaging", "copy-source.sh"), src_dir, src],
                           check=True)
            layouts = ["container", "vm"] if args.layout == "both" else [args.layout]
            for layout in layouts:
                try:
                    guest_layout(report, layout, tree, src, old_deb, new_deb, work, logs)
                except Exception as e:
                    report.add(layout, "run the guest", False, None, repr(e))
    report.add("total", "system test", not report.failed(), time.monotonic() - t_start)
    print(report.summary(), flush=True)
    return 1 if report.failed() else 0


if __name__ == "__main__":
    sys.exit(main())
