# SPDX-License-Identifier: MIT
"""The container layout: the cached guest tree booted with systemd-nspawn on this host's
cgroup v1 hybrid hierarchy, through an overlay so that the cache stays as it was.

What nspawn needs here (host pid 1 is not systemd): --register=no --keep-unit (there is
no machined or systemd to ask for a scope), a cgroup of its own in every hierarchy to
build the container's below (the launcher makes them and moves nspawn in),
--system-call-filter=pidfd_getfd (nspawn's own filter refuses it; paddock re-adopts
sandboxes' fds with it). A reboot in the container makes nspawn exit with 133: it is
started again on the same root. The v1 controllers, which nspawn mounts read-only, are
remounted read-write by a unit of the test inside the guest (guest/).
"""

import os
import subprocess
import time

from images import lay_files
from guest_run import Watch, guest_files, stop_process

REBOOT_STATUS = 133
MACHINE = "paddock-guest"


def _cgroup_hierarchies():
    """Mount points of the host's cgroup hierarchies (v1 controllers, name=systemd, v2)."""
    out = []
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        for line in f:
            fields = line.split()
            fstype = fields[fields.index("-") + 1]
            if fstype in ("cgroup", "cgroup2"):
                out.append(fields[4])
    return out


def _own_cgroups(tag):
    """Make a cgroup named tag in every hierarchy; returns their paths."""
    made = []
    for h in _cgroup_hierarchies():
        p = os.path.join(h, tag)
        os.makedirs(p, exist_ok=True)
        # A new v1 cpuset has no CPUs and no memory nodes: nothing could move in.
        for knob in ("cpuset.cpus", "cpuset.mems"):
            if os.path.exists(os.path.join(p, knob)):
                with open(os.path.join(h, knob)) as f:
                    value = f.read().strip()
                with open(os.path.join(p, knob), "w") as f:
                    f.write(value)
        made.append(p)
    return made


def _enter(cgroups):
    """In the child, before exec: move into the cgroups made for it."""
    def enter():
        for p in cgroups:
            with open(os.path.join(p, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
    return enter


def _remove_cgroups(paths):
    for top in paths:
        for dirpath, _, _ in sorted(os.walk(top), key=lambda w: -w[0].count("/")):
            try:
                os.rmdir(dirpath)
            except OSError:
                pass


def run(tree, share, work, log, progress, timeout):
    """Boot the tree in a container until the guest powers off; returns the Watch."""
    upper, wd, root = (os.path.join(work, d) for d in ("upper", "wd", "root"))
    subprocess.run(["rm", "-rf", work], check=True)
    for d in (upper, wd, root):
        os.makedirs(d)
    lay_files(upper, guest_files())
    subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                    f"lowerdir={tree},upperdir={upper},workdir={wd}", root], check=True)
    cgroups = _own_cgroups(f"paddock-systest-{os.getpid()}")
    watch = Watch(share, "container", progress)
    argv = ["systemd-nspawn", "--quiet", "-D", root, "-M", MACHINE, "--boot",
            "--register=no", "--keep-unit", "--system-call-filter=pidfd_getfd",
            "--private-network", "--bind=" + share + ":/systest", "--console=pipe",
            "--resolv-conf=off", "--timezone=off", "--link-journal=no"]
    deadline = time.monotonic() + timeout
    p = None
    try:
        boots = 0
        while True:
            boots += 1
            with open(log, "ab") as f:
                f.write(f"\n===== boot {boots}: {' '.join(argv)}\n".encode())
                f.flush()
                p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=f,
                                     stderr=subprocess.STDOUT, preexec_fn=_enter(cgroups))
            while p.poll() is None:
                watch.poll()
                if time.monotonic() > deadline:
                    watch.times["timeout"] = timeout
                    return watch
                time.sleep(0.1)
            watch.poll()
            if p.returncode == REBOOT_STATUS and boots == 1:
                watch.mark("reboot shutdown", "reboot-requested", same_clock=True)
                continue
            if "poweroff-requested" in watch.seen:
                watch.mark("poweroff", "poweroff-requested", same_clock=True)
            watch.times["exit status"] = p.returncode
            return watch
    finally:
        if p is not None:
            # nspawn takes SIGTERM as a request to power the container off.
            stop_process(p)
        subprocess.run(["umount", "-l", root], check=False)
        _remove_cgroups(cgroups)
        subprocess.run(["rm", "-rf", work], check=False)
