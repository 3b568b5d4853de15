# SPDX-License-Identifier: MIT
"""The RPM: build it with `make rpm` (rpmbuild; on Debian with stand-in macros and
--nodeps) and check what it holds and requires with rpm -qpl / -qpR, its config files,
its scriptlets, and that the site it installs includes the snippet where it puts it."""

import glob
import os
import re
import shutil
import subprocess
import tempfile

import pytest

import package_set
import paddock_stack as ps

BUILD_TIMEOUT = 420


@pytest.fixture(scope="module")
def rpm_file():
    if not shutil.which("rpmbuild"):
        pytest.skip("rpmbuild is missing (the `rpm` package; scripts/deps.sh installs it)")
    tmp = tempfile.mkdtemp(prefix="paddock-rpm-")
    try:
        r = subprocess.run(["make", "-C", ps.SOURCE_DIR, "rpm", f"RPM_OUT={tmp}"],
                           capture_output=True, text=True, timeout=BUILD_TIMEOUT)
        assert r.returncode == 0, f"make rpm failed:\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
        rpms = glob.glob(os.path.join(tmp, "RPMS", "*", "paddock-*.rpm"))
        assert len(rpms) == 1, rpms
        yield rpms[0]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def rpmq(path, *args):
    return subprocess.run(["rpm", "-qp", *args, path], capture_output=True, text=True,
                          check=True).stdout


def test_files(rpm_file):
    files = set(rpmq(rpm_file, "-l").split())
    want = {
        "/usr/sbin/paddock-sessiond", "/usr/sbin/paddock-fcgi", "/usr/sbin/paddockctl",
        "/usr/libexec/paddock/paddock-init", "/usr/libexec/paddock/harness.py",
        "/usr/lib/systemd/system/paddock-sandboxes.service",
        "/usr/lib/systemd/system/paddock-sessiond.service",
        "/usr/lib/systemd/system/paddock-fcgi.service",
        "/usr/lib/systemd/system/paddock-fcgi.socket",
        "/usr/lib/sysusers.d/paddock.conf",
        "/etc/paddock/paddock.conf",
        "/etc/nginx/conf.d/paddock.conf", "/etc/nginx/conf.d/paddock-upstream.conf",
        "/etc/nginx/paddock/paddock-locations.conf",
        "/var/lib/paddock", "/run/paddock",
    }
    assert not want - files, f"missing from the rpm: {sorted(want - files)}"
    assert any(f.startswith("/usr/share/man/man8/paddockctl.8") for f in files)
    # The native harness's bytecode, made at build (the entry point loads it).
    for module in ("harness_native", "harness_channel"):
        assert [f for f in files if re.fullmatch(
            rf"/usr/libexec/paddock/__pycache__/{module}\.cpython-\d+\.pyc", f)], sorted(files)
    # RHEL places only: no Debian layout.
    assert not [f for f in files if f.startswith(("/lib/", "/etc/nginx/sites-", "/etc/nginx/snippets"))]
    config = set(rpmq(rpm_file, "--configfiles").split())
    assert {"/etc/paddock/paddock.conf", "/etc/nginx/conf.d/paddock.conf",
            "/etc/nginx/paddock/paddock-locations.conf"} <= config, config


def test_requires(rpm_file):
    req = rpmq(rpm_file, "-R")
    for r in ("python3", "openssl", "bash", "libjson-c.so.5()(64bit)", "libseccomp.so.2()(64bit)",
              "libfcgi.so.0()(64bit)", "libnl-route-3.so.200()(64bit)", "libsqlite3.so.0()(64bit)"):
        assert re.search(rf"^{re.escape(r)}( .*)?$", req, re.M), f"{r} not required:\n{req}"
    rec = rpmq(rpm_file, "--recommends")
    assert "nginx" in rec.split()
    # The spec lists packaging/package-set's Fedora column by hand: the two must agree.
    want = [e.fedora for e in package_set.load() if e.fedora]
    missing = [name for name in want if name not in rec.split()]
    assert not missing, f"the package set's Fedora names not recommended: {missing}\n{rec}"


def test_scripts(rpm_file):
    s = rpmq(rpm_file, "--scripts")
    assert "u paddock" in s, "the sysusers user is not created in %pre"
    assert "paddock-sessiond.service" in s and "paddock-fcgi.socket" in s
    assert "openssl req -x509" in s, "no certificate generation"
    # An erase ends every session; every unit, the sandboxes' one included, is handled.
    assert "--end-sessions" in s and "paddock-sandboxes.service" in s
    # Every macro was expanded (a stand-in missing on this host would leave one).
    assert not re.search(r"^\s*%[a-z_]+", s, re.M), s


# Errors rpmlint raises for any local build: it is not signed, and the packager is whoever
# builds it.
RPMLINT_EXPECTED = {"no-signature", "no-packager-tag"}
# paddock-init is static by design (it runs on runtime profiles' trees, whatever their C
# library): that one file, no other.
RPMLINT_EXPECTED_FOR = {("statically-linked-binary", " /usr/libexec/paddock/paddock-init")}


def test_rpmlint(rpm_file):
    if not shutil.which("rpmlint"):
        pytest.fail("rpmlint is missing: scripts/deps.sh installs it")
    r = subprocess.run(["rpmlint", rpm_file], capture_output=True, text=True, timeout=120)
    errors = re.findall(r"^\S+: E: (\S+)(.*)$", r.stdout, re.M)
    unexpected = [f"{e}{rest}" for e, rest in errors
                  if e not in RPMLINT_EXPECTED and (e, rest.rstrip()) not in RPMLINT_EXPECTED_FOR]
    assert not unexpected, r.stdout
    # Unexpanded macros in a scriptlet would run as shell words on the target host.
    assert "percent-in-" not in r.stdout, r.stdout


def test_payload_site_includes_snippet(rpm_file):
    tmp = tempfile.mkdtemp(prefix="paddock-rpm-x-")
    try:
        subprocess.run(f"rpm2cpio '{rpm_file}' | cpio -idm --quiet", shell=True, cwd=tmp,
                       check=True)
        with open(os.path.join(tmp, "etc/nginx/conf.d/paddock.conf"), encoding="utf-8") as f:
            site = f.read()
        assert "include /etc/nginx/paddock/paddock-locations.conf;" in site
        with open(os.path.join(tmp, "etc/paddock/paddock.conf"), encoding="utf-8") as f:
            assert "# lib_dir = /usr/libexec/paddock\n" in f.read()
        mode = os.stat(os.path.join(tmp, "usr/libexec/paddock/harness.py")).st_mode
        assert mode & 0o111 == 0, "harnesses are data, not programs"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
