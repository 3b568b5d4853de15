# SPDX-License-Identifier: MIT
"""The Debian package end to end: build it (make deb), check it with lintian, install it
with dpkg -i, start the installed programs with the installed configuration (directly:
there may be no systemd here), create/exec/destroy over HTTPS through nginx running the
installed site and snippet, restart the daemon around a reinstall (an upgrade) and find
the session still there, then dpkg --purge and check that nothing is left behind.

PADDOCK_DEB=/path/to/paddock_*.deb skips the build and tests that file.
"""

import glob
import grp
import os
import pwd
import re
import shutil
import signal
import subprocess
import tempfile
import time

import pytest
import requests

import package_set
import paddock_stack as ps

PKG = "paddock"
CONF = "/etc/paddock/paddock.conf"
CERT = "/etc/paddock/tls/paddock.crt"
SITE = "/etc/nginx/sites-available/paddock"
UPSTREAM = "/etc/nginx/conf.d/paddock-upstream.conf"
RUN_DIR = "/run/paddock"
STATE_DIR = "/var/lib/paddock"
BUILD_TIMEOUT = 420


def installed(pkg):
    r = subprocess.run(["dpkg-query", "-W", "-f=${Status}", pkg], capture_output=True, text=True)
    return r.returncode == 0 and r.stdout.endswith("ok installed")


def essential(pkg):
    r = subprocess.run(["dpkg-query", "-W", "-f=${Essential}", pkg], capture_output=True, text=True)
    return r.returncode == 0 and r.stdout == "yes"


def check_recommends(deb):
    """The .deb recommends packaging/package-set's Debian names (bar the Essential ones,
    which debian/rules leaves out)."""
    out = subprocess.run(["dpkg-deb", "-f", deb, "Recommends"], capture_output=True, text=True,
                         check=True).stdout
    recommended = {alt.strip() for rel in out.split(",") for alt in rel.split("|")}
    want = [e.debian for e in package_set.load() if e.debian and not essential(e.debian)]
    missing = [p for p in want if p not in recommended]
    assert not missing, f"the package set's Debian packages not recommended: {missing}\n{out}"
    assert not [p for p in recommended if essential(p)], f"Essential packages recommended: {out}"


def preconditions():
    if os.geteuid() != 0:
        return "needs root (dpkg -i)"
    for tool in ("dpkg-buildpackage", "dh", "dpkg"):
        if not shutil.which(tool):
            return f"{tool} is missing (scripts/deps.sh installs debhelper and dpkg-dev)"
    if not shutil.which("nginx"):
        return "nginx is missing"
    if installed(PKG):
        return "the paddock package is already installed on this machine; not touching it"
    for p in (STATE_DIR, "/etc/paddock", os.path.join(RUN_DIR, "sessiond.sock")):
        if os.path.exists(p):
            return f"{p} exists: another paddock installation lives here"
    return None


def snapshot():
    """What the package may change on the host, to compare after the purge."""
    def read(p):
        try:
            with open(p, encoding="utf-8") as f:
                return f.read()
        except FileNotFoundError:
            return None

    users = {u: (lambda n: (n.pw_uid, n.pw_gid))(pwd.getpwnam(u))
             for u in ("paddock", "www-data", "nginx") if _exists(pwd.getpwnam, u)}
    groups = {g: sorted(grp.getgrnam(g).gr_mem) for g in ("paddock",) if _exists(grp.getgrnam, g)}
    return {
        "users": users,
        "groups": groups,
        "subuid": read("/etc/subuid"),
        "subgid": read("/etc/subgid"),
        "nginx_files": sorted(_walk("/etc/nginx")),
        "unit_files": sorted(glob.glob("/lib/systemd/system/paddock*") +
                             glob.glob("/etc/systemd/system/*/paddock*")),
        # sessiond's cgroup parents (v1: paddock/<instance> in each hierarchy).
        "cgroup_dirs": sorted(glob.glob("/sys/fs/cgroup/*/paddock/*/") +
                              glob.glob("/sys/fs/cgroup/paddock/*/")),
    }


def _exists(fn, name):
    try:
        fn(name)
        return True
    except KeyError:
        return False


def _walk(top):
    for d, _, files in os.walk(top):
        for f in files:
            yield os.path.join(d, f)


class Procs:
    """The programs this test starts, stopped in reverse order."""

    def __init__(self, logdir):
        self.logdir = logdir
        self.procs = []

    def start(self, name, argv, env=None):
        log = open(os.path.join(self.logdir, name + ".log"), "ab")
        try:
            p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                 env=env, start_new_session=True)
        finally:
            log.close()
        self.procs.append((name, p))
        return p

    def logs(self):
        out = []
        for name in sorted(os.listdir(self.logdir)):
            with open(os.path.join(self.logdir, name), errors="replace") as f:
                out.append(f"----- {name}\n{f.read()[-6000:]}")
        return "\n".join(out)

    def stop(self):
        problems = []
        for name, p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    problems.append(f"{name} ignored SIGTERM")
                    p.kill()
                    p.wait()
            if p.returncode not in (0, -signal.SIGTERM):
                problems.append(f"{name} exited with {p.returncode}")
        self.procs = []
        return problems


def render_nginx(tmp, port):
    """A throwaway nginx.conf that runs the installed site (its listen lines moved to a
    loopback port) and the installed upstream, as the distribution's nginx user."""
    with open(SITE, encoding="utf-8") as f:
        site = f.read()
    site, n = re.subn(r"^\s*listen\s+\[::\]:443[^;]*;\n", "", site, flags=re.M)
    assert n == 1, "the site should listen on [::]:443"
    site, n = re.subn(r"listen 443 ssl http2;", f"listen 127.0.0.1:{port} ssl http2;", site)
    assert n == 1, "the site should listen on 443 with TLS and HTTP/2"
    site_path = os.path.join(tmp, "site.conf")
    with open(site_path, "w", encoding="utf-8") as f:
        f.write(site)
    conf = f"""
user www-data;
worker_processes 1;
daemon off;
pid {tmp}/nginx.pid;
error_log {tmp}/log/nginx-error.log info;
events {{ worker_connections 256; }}
http {{
	access_log {tmp}/log/nginx-access.log;
	client_body_temp_path {tmp}/body;
	fastcgi_temp_path {tmp}/fastcgi;
	proxy_temp_path {tmp}/proxy;
	scgi_temp_path {tmp}/scgi;
	uwsgi_temp_path {tmp}/uwsgi;
	include {UPSTREAM};
	include {site_path};
}}
"""
    path = os.path.join(tmp, "nginx.conf")
    with open(path, "w", encoding="utf-8") as f:
        f.write(conf)
    return path


def build_deb(out):
    given = os.environ.get("PADDOCK_DEB")
    if given:
        return given
    r = subprocess.run(["make", "-C", ps.SOURCE_DIR, "deb", f"DEB_OUT={out}"], capture_output=True,
                       text=True, timeout=BUILD_TIMEOUT)
    assert r.returncode == 0, f"make deb failed:\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    debs = glob.glob(os.path.join(out, "paddock_*.deb"))
    assert len(debs) == 1, debs
    return debs[0]


def test_deb_install_serve_purge():
    reason = preconditions()
    if reason:
        pytest.skip(reason)
    before = snapshot()
    tmp = tempfile.mkdtemp(prefix="paddock-deb-")
    os.chmod(tmp, 0o755)
    for d in ("log", "build"):
        os.makedirs(os.path.join(tmp, d))
    procs = Procs(os.path.join(tmp, "log"))
    try:
        deb = build_deb(os.path.join(tmp, "build"))
        size = os.path.getsize(deb)
        assert 20_000 < size < 5_000_000, f"{deb}: {size} bytes"

        if shutil.which("lintian"):
            r = subprocess.run(["lintian", "--tag-display-limit", "0", deb], capture_output=True,
                               text=True, timeout=180)
            errors = [l for l in r.stdout.splitlines() if l.startswith("E:")]
            assert not errors, "lintian errors:\n" + "\n".join(errors)
        check_recommends(deb)

        contents = subprocess.run(["dpkg-deb", "-c", deb], capture_output=True, text=True,
                                  check=True).stdout
        for path in ("./usr/sbin/paddock-sessiond", "./usr/sbin/paddock-fcgi",
                     "./usr/sbin/paddockctl", "./usr/libexec/paddock/paddock-init",
                     "./usr/libexec/paddock/harness.py", "./etc/paddock/paddock.conf",
                     "./lib/systemd/system/paddock-sessiond.service",
                     "./lib/systemd/system/paddock-fcgi.socket",
                     "./lib/systemd/system/paddock-fcgi.service",
                     "./etc/nginx/snippets/paddock-locations.conf",
                     "./etc/nginx/conf.d/paddock-upstream.conf",
                     "./etc/nginx/sites-available/paddock",
                     "./usr/share/man/man8/paddockctl.8.gz"):
            assert path in contents, f"{path} is not in the package"

        t0 = time.monotonic()
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        r = subprocess.run(["dpkg", "-i", deb], capture_output=True, text=True, env=env, timeout=120)
        assert r.returncode == 0, f"dpkg -i failed:\n{r.stdout}\n{r.stderr}"
        assert installed(PKG)
        files = subprocess.run(["dpkg", "-L", PKG], capture_output=True, text=True,
                               check=True).stdout.split("\n")

        # What the postinst set up.
        assert grp.getgrnam("paddock") and pwd.getpwnam("paddock")
        assert "www-data" in grp.getgrnam("paddock").gr_mem or pwd.getpwnam("www-data").pw_gid == \
            grp.getgrnam("paddock").gr_gid, "nginx's user cannot reach the worker's socket"
        with open("/etc/subuid", encoding="utf-8") as f:
            assert re.search(r"^paddock:\d+:\d+$", f.read(), re.M), "no uid range for paddock"
        st = os.stat("/etc/paddock/tls/paddock.key")
        assert st.st_mode & 0o077 == 0, "the generated key is readable by others"
        san = subprocess.run(["openssl", "x509", "-in", CERT, "-noout", "-ext", "subjectAltName"],
                             capture_output=True, text=True, check=True).stdout
        assert "127.0.0.1" in san, san

        # The native harness's bytecode, for the python3 installed (the prerm removes it).
        for module in ("harness_native", "harness_channel"):
            pycs = glob.glob(f"/usr/libexec/paddock/__pycache__/{module}.*.pyc")
            assert pycs, f"the postinst made no bytecode for {module}"

        r = subprocess.run(["/usr/sbin/paddock-sessiond", "--config", CONF, "--check-config"],
                           capture_output=True, text=True, check=True)
        assert "lib_dir = /usr/libexec/paddock\n" in r.stdout

        # The installed programs, with the installed configuration.
        clean = {k: v for k, v in os.environ.items() if not k.startswith("PADDOCK_")}
        sd = procs.start("paddock-sessiond", ["/usr/sbin/paddock-sessiond", "--config", CONF], clean)
        sock = os.path.join(RUN_DIR, "sessiond.sock")
        ps.wait_for(lambda: sd.poll() is not None or ps._connectable(ps.socket.AF_UNIX, sock), 60,
                    "sessiond's socket")
        assert sd.poll() is None, procs.logs()
        fsock = os.path.join(RUN_DIR, "fcgi.sock")
        fc = procs.start("paddock-fcgi", ["/usr/sbin/paddock-fcgi", "--config", CONF, "--socket",
                                          fsock], clean)
        ps.wait_for(lambda: fc.poll() is not None or ps._connectable(ps.socket.AF_UNIX, fsock), 60,
                    "the worker's socket")
        assert fc.poll() is None, procs.logs()
        for attempt in range(5):
            port = ps.free_port()
            ng = procs.start("nginx", ["nginx", "-c", render_nginx(tmp, port), "-e",
                                       os.path.join(tmp, "log", "nginx-error.log")])
            ps.wait_for(lambda: ng.poll() is not None or
                        ps._connectable(ps.socket.AF_INET, ("127.0.0.1", port)), 30, "nginx")
            if ng.poll() is None:
                break
            procs.procs.pop()
        else:
            raise AssertionError("nginx did not start:\n" + procs.logs())

        base = f"https://127.0.0.1:{port}"
        http = requests.Session()
        http.verify = CERT
        http.trust_env = False  # REQUESTS_CA_BUNDLE would replace the certificate
        r = http.post(base + "/sessions", json={}, timeout=60)
        assert r.status_code == 201, r.text + procs.logs()
        sid = r.json()["session_id"]
        r = http.post(f"{base}/sessions/{sid}/exec", timeout=60,
                      json={"tool": "code_execution", "input": {"code": "print(6 * 7)"}})
        assert r.status_code == 200, r.text + procs.logs()
        first_exec = time.monotonic() - t0
        out = ps.check_exec_body(r.json(), "code_execution")
        assert out.stdout == "42\n" and out.rc == 0, out.body
        print(f"\ninstall-to-first-exec: {first_exec:.2f} s; package {size} bytes")

        # HTTP/2 on the TLS site; /metrics from this host.
        if shutil.which("curl"):
            r2 = subprocess.run(["curl", "-s", "--http2", "--cacert", CERT, "-o", "/dev/null", "-w",
                                 "%{http_version}", base + "/metrics"], capture_output=True,
                                text=True, timeout=30)
            assert r2.stdout == "2", f"HTTP version {r2.stdout!r}"
        m = http.get(base + "/metrics", timeout=30)
        assert m.status_code == 200 and "paddock_sessions 1\n" in m.text, m.text[:2000]
        assert 'paddock_http_requests_total{route="exec",code="2xx"} 1' in m.text

        ctl = subprocess.run(["/usr/sbin/paddockctl", "list"], capture_output=True, text=True,
                             timeout=30)
        assert ctl.returncode == 0 and sid in ctl.stdout, ctl.stdout + ctl.stderr

        # An upgrade: the daemon is stopped (as systemd's restart does, signalling only it),
        # the package is installed again over itself, the daemon starts again. The
        # installed configuration keeps sessions across it: same session, same state.
        r = http.post(f"{base}/sessions/{sid}/exec", timeout=60,
                      json={"tool": "bash_code_execution",
                            "input": {"command": "echo kept > kept.txt"}})
        assert r.status_code == 200, r.text
        sd.send_signal(signal.SIGTERM)
        sd.wait(30)
        assert sd.returncode in (0, -signal.SIGTERM), procs.logs()
        procs.procs = [(n, p) for n, p in procs.procs if p is not sd]
        r = subprocess.run(["dpkg", "-i", deb], capture_output=True, text=True, env=env, timeout=120)
        assert r.returncode == 0, f"dpkg -i (upgrade) failed:\n{r.stdout}\n{r.stderr}"
        sd = procs.start("paddock-sessiond", ["/usr/sbin/paddock-sessiond", "--config", CONF], clean)
        ps.wait_for(lambda: sd.poll() is not None or ps._connectable(ps.socket.AF_UNIX, sock), 60,
                    "sessiond's socket after the upgrade")
        assert sd.poll() is None, procs.logs()
        r = ps.wait_for(lambda: (lambda x: x if x.status_code != 503 else None)(http.post(
            f"{base}/sessions/{sid}/exec", timeout=60,
            json={"tool": "bash_code_execution", "input": {"command": "cat kept.txt"}})), 30,
            "the session to answer after the restart")
        assert r.status_code == 200, r.text + procs.logs()
        assert ps.check_exec_body(r.json(), "bash_code_execution").stdout == "kept\n"

        r = http.delete(f"{base}/sessions/{sid}", timeout=60)
        assert r.status_code == 204
        problems = procs.stop()
        assert not problems, "; ".join(problems) + "\n" + procs.logs()

        r = subprocess.run(["dpkg", "--purge", PKG], capture_output=True, text=True, env=env,
                           timeout=120)
        assert r.returncode == 0, f"dpkg --purge failed:\n{r.stdout}\n{r.stderr}"
        assert not installed(PKG)

        left = [f for f in files if f and os.path.isfile(f)]
        assert not left, f"files left after purge: {left}"
        for p in ("/etc/paddock", STATE_DIR, RUN_DIR, "/usr/libexec/paddock"):
            assert not os.path.exists(p), f"{p} left after purge"
        after = snapshot()
        for k in before:
            assert after[k] == before[k], f"{k} changed: {before[k]!r} -> {after[k]!r}"
        def exe(pid):
            try:
                return os.readlink(f"/proc/{pid}/exe")
            except OSError:
                return ""
        # Sandboxes included: their init is /usr/libexec/paddock/paddock-init.
        left = [pid for pid in ps._all_pids()
                if exe(pid).startswith(("/usr/sbin/paddock", "/usr/libexec/paddock"))]
        assert not left, f"processes left: {[ps._describe(p) for p in left]}"
    finally:
        procs.stop()
        if installed(PKG) or os.path.exists("/var/lib/dpkg/info/paddock.list"):
            subprocess.run(["dpkg", "--purge", PKG], capture_output=True,
                           env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
        shutil.rmtree(tmp, ignore_errors=True)
