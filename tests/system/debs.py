# SPDX-License-Identifier: MIT
"""The packages the system test installs: the .deb of the checkout, a second one of the
same source one version higher (the upgrade), and the checkout's .deb built again in a
clean build root that has only build-essential and debian/control's Build-Depends."""

import glob
import os
import re
import shutil
import subprocess

UPGRADE_SUFFIX = "+upgrade1"


def _run(argv, log, **kw):
    with open(log, "ab") as f:
        f.write(("$ " + " ".join(argv) + "\n").encode())
        f.flush()
        subprocess.run(argv, check=True, stdout=f, stderr=subprocess.STDOUT,
                       stdin=subprocess.DEVNULL, **kw)


def _one_deb(out):
    debs = glob.glob(os.path.join(out, "paddock_*.deb"))
    if len(debs) != 1:
        raise RuntimeError(f"expected one paddock_*.deb in {out}, found {debs}")
    return debs[0]


def build(src, out, log):
    """packaging/deb/build.sh SRC OUT (make deb); returns the .deb's path."""
    shutil.rmtree(out, ignore_errors=True)
    _run([os.path.join(src, "packaging", "deb", "build.sh"), src, out], log)
    return _one_deb(out)


def build_upgrade(src, work, log):
    """The same source with UPGRADE_SUFFIX on its changelog version, built from a copy."""
    tree = os.path.join(work, "src")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(tree)
    _run([os.path.join(src, "packaging", "copy-source.sh"), src, tree], log)
    changelog = os.path.join(tree, "packaging", "deb", "debian", "changelog")
    with open(changelog, encoding="utf-8") as f:
        text = f.read()
    # The version of the first entry: "paddock (0.1.0) unstable; ..."
    text, n = re.subn(r"^(\S+) \(([^)]+)\)", lambda m: f"{m.group(1)} ({m.group(2)}{UPGRADE_SUFFIX})",
                      text, count=1)
    if n != 1:
        raise RuntimeError(f"no version on the first line of {changelog}")
    with open(changelog, "w", encoding="utf-8") as f:
        f.write(text)
    return build(tree, os.path.join(work, "out"), log)


def version(deb):
    return subprocess.run(["dpkg-deb", "-f", deb, "Version"], check=True, capture_output=True,
                          text=True).stdout.strip()


def contents(deb):
    """The paths a .deb installs."""
    out = subprocess.run(["dpkg-deb", "-c", deb], check=True, capture_output=True,
                         text=True).stdout
    return sorted(line.split()[5] for line in out.splitlines() if line.strip())


def build_in_root(src, root, log):
    """Build the .deb inside root (a chroot with its own mount, pid and network namespaces:
    no network, nothing of the host's). Returns the path of the copy of the .deb, outside
    the root. The root itself is left as it was (only /build is used, and removed)."""
    build = os.path.join(root, "build")
    shutil.rmtree(build, ignore_errors=True)
    os.makedirs(os.path.join(build, "src"))
    _run([os.path.join(src, "packaging", "copy-source.sh"), src, os.path.join(build, "src")], log)
    script = (f"mount -t proc proc {root}/proc && mount --rbind /dev {root}/dev && "
              f"exec chroot {root} /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/build "
              "LC_ALL=C.UTF-8 sh -c 'cd /build/src && packaging/deb/build.sh /build/src /build/out'")
    try:
        _run(["unshare", "--mount", "--pid", "--net", "--fork", "--propagation", "private",
              "sh", "-c", script], log)
        deb = _one_deb(os.path.join(build, "out"))
        keep = os.path.join(os.path.dirname(log), "clean-build-" + os.path.basename(deb))
        shutil.copy(deb, keep)
        return keep
    finally:
        shutil.rmtree(build, ignore_errors=True)
