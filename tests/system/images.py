# SPDX-License-Identifier: MIT
"""Debian 12 root filesystems for the system test, made with mmdebstrap from the host's own
apt sources and cached in CACHE_DIR under a hash of their recipe (package list, hooks,
files added), so that a warm run downloads nothing.

Two trees: the build root (build-essential and the Build-Depends of debian/control, nothing
else) and the guest image (systemd, the distribution's kernel, every package the .deb and
the guest tests need). The guest image also exists as an ext4 file system image for the VM.
"""

import hashlib
import json
import os
import re
import shutil
import subprocess

CACHE_DIR = os.environ.get("PADDOCK_SYSTEST_CACHE", "/var/cache/paddock-systest")
SUITE = "bookworm"
# Bump when the way an image is made changes in a way the recipe below does not show.
RECIPE_VERSION = "1"

# Booting with systemd as pid 1, in a container and in a VM with Debian's kernel.
BOOT_PACKAGES = ["systemd", "systemd-sysv", "dbus", "udev", "kmod", "linux-image-amd64",
                 "initramfs-tools", "e2fsprogs", "iproute2"]
# What the guest tests run: the integration suites, the lifecycle test, the HAProxy front.
TEST_PACKAGES = ["nginx-light", "python3", "nodejs", "python3-ipython", "python3-ipykernel",
                 "python3-matplotlib", "python3-pandas", "python3-pytest", "python3-requests",
                 "python3-jsonschema", "python3-yaml", "python3-websocket",
                 "python3-jupyter-server", "curl", "procps", "openssl", "adduser", "haproxy",
                 # the HTTP client of a protocol's conformance checker (PADDOCK_SYSTEST_CHECKS)
                 "python3-httpx"]


def apt_sources():
    """The host's apt sources file, which mmdebstrap copies into the tree."""
    for p in ("/etc/apt/sources.list", "/etc/apt/sources.list.d/debian.sources"):
        if os.path.isfile(p) and os.path.getsize(p) > 0:
            return p
    raise RuntimeError("no apt sources on this host (/etc/apt/sources.list)")


def relation_names(field):
    """Package names of a Depends-style field: the first of each alternative, no versions,
    no substitution variables."""
    names = []
    for rel in field.split(","):
        first = rel.split("|")[0].strip()
        name = re.split(r"[\s(\[:<]", first, maxsplit=1)[0]
        if name and not name.startswith("$"):
            names.append(name)
    return names


def control_field(control_text, field):
    """One field of the source stanza of a debian/control, continuation lines joined."""
    m = re.search(rf"^{field}:(.*(?:\n[ \t].*)*)", control_text, re.M)
    return " ".join(m.group(1).split()) if m else ""


def deb_relations(deb):
    """The Depends and Recommends of a built .deb, as package names."""
    out = subprocess.run(["dpkg-deb", "-f", deb, "Depends", "Recommends"], check=True,
                         capture_output=True, text=True).stdout
    names = []
    for line in out.splitlines():
        _, _, value = line.partition(":")
        names += relation_names(value)
    return names


def _hash(recipe):
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]


def _prune(prefix, keep):
    """Remove the cache's other entries named prefix*: made by older recipes, never used
    again (each is gigabytes)."""
    for name in os.listdir(CACHE_DIR):
        p = os.path.join(CACHE_DIR, name)
        if name.startswith(prefix) and p != keep:
            if os.path.isdir(p):
                shutil.rmtree(p, ignore_errors=True)
            else:
                os.unlink(p)


def _mmdebstrap(target, variant, include, hooks, log):
    """Make a tree at target.tmp and rename it to target when complete, so that an
    interrupted build is never taken for a cached one."""
    tmp = target + ".tmp"
    if os.path.exists(tmp):
        shutil.rmtree(tmp)
    argv = ["mmdebstrap", f"--variant={variant}", "--mode=root", "--format=directory"]
    if include:
        argv.append("--include=" + ",".join(include))
    for h in hooks:
        argv.append("--customize-hook=" + h)
    argv += [SUITE, tmp, apt_sources()]
    with open(log, "ab") as f:
        subprocess.run(argv, check=True, stdout=f, stderr=subprocess.STDOUT,
                       stdin=subprocess.DEVNULL)
    os.rename(tmp, target)
    _prune(os.path.basename(target).split("-")[0] + "-", target)


def build_root(control_path, log):
    """The clean build root for debian/control's Build-Depends; returns its path."""
    with open(control_path, encoding="utf-8") as f:
        build_depends = control_field(f.read(), "Build-Depends")
    # apt-get satisfy takes the field as it is, versions and virtual packages included.
    hooks = ["chroot \"$1\" apt-get satisfy -y -q --no-install-recommends "
             f"'{build_depends}'",
             "chroot \"$1\" apt-get clean"]
    recipe = {"v": RECIPE_VERSION, "kind": "build", "variant": "buildd", "hooks": hooks}
    target = os.path.join(CACHE_DIR, "buildroot-" + _hash(recipe))
    if not os.path.isdir(target):
        os.makedirs(CACHE_DIR, exist_ok=True)
        _mmdebstrap(target, "buildd", [], hooks, log)
    return target, build_depends


def guest_root(deb, log):
    """The guest tree (both layouts boot it); returns (path, cold) where cold says whether
    it was made in this run."""
    packages = sorted(set(BOOT_PACKAGES + TEST_PACKAGES + deb_relations(deb)))
    hooks = [
        # A persistent journal, so that the boot before a reboot can be read afterwards.
        "mkdir -p \"$1/var/log/journal\"",
        "echo paddock-guest > \"$1/etc/hostname\"",
        "printf '127.0.0.1 localhost\\n127.0.1.1 paddock-guest\\n' > \"$1/etc/hosts\"",
        "chroot \"$1\" apt-get clean",
    ]
    recipe = {"v": RECIPE_VERSION, "kind": "guest", "packages": packages, "hooks": hooks}
    target = os.path.join(CACHE_DIR, "guest-" + _hash(recipe))
    cold = not os.path.isdir(target)
    if cold:
        os.makedirs(CACHE_DIR, exist_ok=True)
        _mmdebstrap(target, "apt", packages, hooks, log)
    return target, cold


def kernel_files(root):
    """(vmlinuz, initrd) of the tree's newest kernel."""
    boot = os.path.join(root, "boot")
    kernels = sorted(n for n in os.listdir(boot) if n.startswith("vmlinuz-"))
    if not kernels:
        raise RuntimeError(f"no kernel in {boot}")
    version = kernels[-1][len("vmlinuz-"):]
    initrd = os.path.join(boot, "initrd.img-" + version)
    if not os.path.isfile(initrd):
        raise RuntimeError(f"no initrd for {version} in {boot}")
    return os.path.join(boot, kernels[-1]), initrd


def files_digest(files):
    """A digest of {path: bytes or Symlink} for cache keys."""
    return {k: (v.target if isinstance(v, Symlink) else hashlib.sha256(v).hexdigest())
            for k, v in sorted(files.items())}


class Symlink:
    """A symbolic link among the files added to a guest tree."""

    def __init__(self, target):
        self.target = target


def lay_files(top, files):
    """Write {path in guest: bytes or Symlink} below top."""
    for path, data in files.items():
        p = os.path.join(top, path.lstrip("/"))
        os.makedirs(os.path.dirname(p), exist_ok=True)
        if isinstance(data, Symlink):
            if os.path.lexists(p):
                os.unlink(p)
            os.symlink(data.target, p)
        else:
            with open(p, "wb") as f:
                f.write(data)


def ext4_image(tree, extra_files, log, size="8G"):
    """An ext4 image of tree with extra_files {path in guest: bytes} added, cached by the
    tree's name and the files' hash; returns its path (a base for a per-run overlay)."""
    key = _hash({"tree": os.path.basename(tree), "size": size, "files": files_digest(extra_files)})
    image = os.path.join(CACHE_DIR, f"disk-{key}.ext4")
    if os.path.isfile(image):
        return image
    # mke2fs -d copies one directory: lay the extra files over the tree with overlayfs so
    # that the cached tree itself stays untouched.
    work = image + ".work"
    shutil.rmtree(work, ignore_errors=True)
    upper, wd, merged = (os.path.join(work, d) for d in ("upper", "wd", "merged"))
    for d in (upper, wd, merged):
        os.makedirs(d)
    lay_files(upper, extra_files)
    subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                    f"lowerdir={tree},upperdir={upper},workdir={wd}", merged], check=True)
    try:
        with open(log, "ab") as f:
            subprocess.run(["mke2fs", "-q", "-F", "-t", "ext4", "-L", "paddock-root", "-d", merged,
                            image + ".tmp", size], check=True, stdout=f, stderr=subprocess.STDOUT)
    finally:
        subprocess.run(["umount", merged], check=False)
        shutil.rmtree(work, ignore_errors=True)
    os.rename(image + ".tmp", image)
    _prune("disk-", image)
    return image
