# SPDX-License-Identifier: MIT
"""What both layouts share: the files added to the cached guest tree, the share the guest
reads its orders from and writes its results to, and the wait for a booted guest that
reboots once and powers off, timed from the host."""

import json
import os
import subprocess
import time

from images import Symlink

HERE = os.path.dirname(os.path.abspath(__file__))
GUEST = os.path.join(HERE, "guest")


def guest_files():
    """{path in the guest: bytes or Symlink}: the test's units, laid over the cached tree."""
    def read(name):
        with open(os.path.join(GUEST, name), "rb") as f:
            return f.read()
    units = "/etc/systemd/system"
    return {
        f"{units}/paddock-systest.service": read("paddock-systest.service"),
        f"{units}/multi-user.target.wants/paddock-systest.service":
            Symlink("../paddock-systest.service"),
        f"{units}/systest.mount": read("systest.mount"),
        f"{units}/local-fs.target.wants/systest.mount": Symlink("../systest.mount"),
        f"{units}/paddock-systest-cgroups.service": read("paddock-systest-cgroups.service"),
        f"{units}/multi-user.target.wants/paddock-systest-cgroups.service":
            Symlink("../paddock-systest-cgroups.service"),
        # No network here: apt's timers would only wait on it.
        f"{units}/apt-daily.timer": Symlink("/dev/null"),
        f"{units}/apt-daily-upgrade.timer": Symlink("/dev/null"),
        "/etc/fstab": b"# / comes from the kernel command line (VM) or systemd-nspawn\n",
    }


def prepare_share(share, src_copy, debs, spec_dir, config):
    """The share: config.json, the two .debs, the source tree (tests included), the API
    documents the suites check answers against (shared/spec), and an empty out/."""
    if os.path.exists(share):
        subprocess.run(["rm", "-rf", share], check=True)
    os.makedirs(os.path.join(share, "out"))
    os.makedirs(os.path.join(share, "debs"))
    subprocess.run(["cp", "-a", src_copy, os.path.join(share, "src")], check=True)
    for d in debs:
        subprocess.run(["cp", d, os.path.join(share, "debs")], check=True)
    os.makedirs(os.path.join(share, "shared"))
    subprocess.run(["cp", "-a", spec_dir, os.path.join(share, "shared", "spec")], check=True)
    with open(os.path.join(share, "config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=1)
    # The guest's apt runs the package's scripts as root and _apt reads the .debs.
    os.chmod(share, 0o755)


def stop_process(p, grace=30):
    """End a guest's process still running: SIGTERM (a shutdown, to nspawn and QEMU), then
    SIGKILL after grace seconds."""
    if p.poll() is not None:
        return
    p.terminate()
    try:
        p.wait(grace)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def steps(share):
    """The steps the guest recorded so far."""
    try:
        with open(os.path.join(share, "out", "steps.jsonl"), encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]
    except OSError:
        return []


class Watch:
    """The host's view of one guest run: markers seen (with host times), step progress
    printed as it comes, and the shutdown times measured from the markers."""

    def __init__(self, share, layout, progress):
        self.out = os.path.join(share, "out")
        self.share = share
        self.layout = layout
        self.progress = progress
        self.seen = {}
        self.times = {}
        self.printed = 0

    def poll(self):
        for name in ("reboot-requested", "poweroff-requested"):
            if name not in self.seen and os.path.exists(os.path.join(self.out, name)):
                self.seen[name] = time.monotonic()
        got = steps(self.share)
        for s in got[self.printed:]:
            self.progress(f"[{self.layout}] {'ok  ' if s['ok'] else 'FAIL'} {s['step']} "
                          f"({s['seconds']:.0f} s)")
        self.printed = len(got)

    def mark(self, what, marker, same_clock=False):
        """Record the time from marker to now as what, if the marker was seen: from when
        the host saw it (polled every 0.1 s), or with same_clock (a container: one
        kernel, one clock) from the time the guest wrote into it."""
        if marker in self.seen and what not in self.times:
            took = time.monotonic() - self.seen[marker]
            if same_clock:
                try:
                    with open(os.path.join(self.out, marker), encoding="utf-8") as f:
                        took = time.time() - float(f.read())
                except (OSError, ValueError):
                    pass
            self.times[what] = took
            self.progress(f"[{self.layout}] {what}: {took:.2f} s (host)")
