# SPDX-License-Identifier: MIT
"""paddockctl site enable / disable, and doctor's word on the site, against an nginx tree of
the test's own (PADDOCK_NGINX_DIR): the link, nginx -t with its undo, the reload of a
running nginx, the layouts (Debian's sites-enabled, the RHEL family's conf.d), and the
files it must leave alone. The host's /etc/nginx is never touched. Then doctor's word on
the units and the daemon's hardening, with systemd faked in a mount namespace."""

import json
import os
import signal
import subprocess
import urllib.error
import urllib.request

import pytest

import paddock_stack as ps

CTL = os.path.join(ps.BUILD_DIR, "paddockctl")
NGINX = "/usr/sbin/nginx"
LINK_TARGET = "../sites-available/paddock"


def nginx_conf(root):
    return f"""worker_processes 1;
pid {root}/nginx.pid;
error_log {root}/logs/error.log;
events {{ worker_connections 64; }}
http {{
	access_log off;
	client_body_temp_path {root}/logs/body;
	proxy_temp_path {root}/logs/proxy;
	fastcgi_temp_path {root}/logs/fastcgi;
	uwsgi_temp_path {root}/logs/uwsgi;
	scgi_temp_path {root}/logs/scgi;
	include sites-enabled/*;
	include conf.d/*.conf;
}}
"""


class Tree:
    """An nginx configuration tree in the Debian layout, with a paddock site that answers
    on a loopback port of its own."""

    def __init__(self, root, layout="debian"):
        self.root = str(root)
        self.port = ps.free_port()
        os.makedirs(os.path.join(self.root, "logs"))
        os.makedirs(os.path.join(self.root, "conf.d"))
        with open(os.path.join(self.root, "nginx.conf"), "w", encoding="utf-8") as f:
            f.write(nginx_conf(self.root))
        site = f'server {{ listen 127.0.0.1:{self.port}; location / {{ return 200 "paddock"; }} }}\n'
        if layout == "debian":
            os.makedirs(os.path.join(self.root, "sites-available"))
            os.makedirs(os.path.join(self.root, "sites-enabled"))
            self.site = os.path.join(self.root, "sites-available", "paddock")
            self.link = os.path.join(self.root, "sites-enabled", "paddock")
        else:
            self.site = os.path.join(self.root, "conf.d", "paddock.conf")
            self.link = None
        with open(self.site, "w", encoding="utf-8") as f:
            f.write(site)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("PADDOCK_")}
        self.env["PADDOCK_NGINX_DIR"] = self.root
        self.env["PADDOCK_NGINX_BIN"] = NGINX
        self.started = False

    def ctl(self, *args):
        return subprocess.run([CTL, *args], env=self.env, capture_output=True, text=True,
                              timeout=60)

    def master_pid(self):
        """The pid in nginx's pid file when it names a live nginx, else None."""
        try:
            with open(os.path.join(self.root, "nginx.pid"), encoding="utf-8") as f:
                pid = int(f.read())
            with open(f"/proc/{pid}/comm", encoding="utf-8") as f:
                return pid if f.read().startswith("nginx") else None
        except (OSError, ValueError):
            return None

    def start_nginx(self):
        subprocess.run([NGINX, "-c", os.path.join(self.root, "nginx.conf")], check=True,
                       timeout=60)
        self.started = True
        # The command returns when the master has forked; it writes its pid file after.
        ps.wait_for(self.master_pid, 30, "nginx's pid file")

    def stop_nginx(self):
        if not self.started:
            return
        pid = self.master_pid()
        assert pid, "nginx is gone before the end of the test"
        os.kill(pid, signal.SIGQUIT)
        ps.wait_for(lambda: not os.path.exists(f"/proc/{pid}"), 30, "nginx to stop")

    def serves(self):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/", timeout=5) as r:
                return r.status == 200
        except (urllib.error.URLError, OSError):
            return False


@pytest.fixture
def tree(tmp_path):
    if not os.access(CTL, os.X_OK) or not os.access(NGINX, os.X_OK):
        pytest.skip("paddockctl or nginx is missing")
    t = Tree(tmp_path / "nginx")
    yield t
    t.stop_nginx()


def test_enable_and_disable_are_idempotent(tree):
    r = tree.ctl("site", "enable")
    assert r.returncode == 0, r.stderr
    assert os.readlink(tree.link) == LINK_TARGET
    assert "the paddock site is enabled" in r.stdout and "nginx is not running" in r.stdout

    r = tree.ctl("site", "enable")
    assert r.returncode == 0 and "already enabled" in r.stdout, r
    assert os.readlink(tree.link) == LINK_TARGET

    r = tree.ctl("site", "disable")
    assert r.returncode == 0 and "the paddock site is disabled" in r.stdout, r
    assert not os.path.lexists(tree.link)
    r = tree.ctl("site", "disable")
    assert r.returncode == 0 and "not enabled" in r.stdout, r
    assert os.path.exists(tree.site), "disable removes the link, never the site"


def test_enable_reloads_a_running_nginx(tree):
    tree.start_nginx()
    assert not tree.serves()
    r = tree.ctl("site", "enable")
    assert r.returncode == 0 and "nginx reloaded" in r.stdout, r
    ps.wait_for(tree.serves, 30, "nginx to serve the site after the reload")

    r = tree.ctl("site", "disable")
    assert r.returncode == 0 and "nginx reloaded" in r.stdout, r
    ps.wait_for(lambda: not tree.serves(), 30, "nginx to stop serving the site")


def test_a_site_nginx_refuses_is_not_enabled(tree):
    with open(tree.site, "w", encoding="utf-8") as f:
        f.write("server { no_such_directive on; }\n")
    tree.start_nginx()
    r = tree.ctl("site", "enable")
    assert r.returncode == 1, r
    assert "nginx -t refuses the configuration with the paddock site, so it stays disabled" \
        in r.stderr and "no_such_directive" in r.stderr, r.stderr
    assert not os.path.lexists(tree.link), "the link was not undone"
    # nginx still runs on its old configuration, which still loads.
    assert subprocess.run([NGINX, "-t", "-q", "-c", os.path.join(tree.root, "nginx.conf")],
                          capture_output=True, timeout=60).returncode == 0


def test_files_not_its_own_are_left_alone(tree):
    with open(tree.link, "w", encoding="utf-8") as f:
        f.write("# the operator's own\n")
    for verb in ("enable", "disable"):
        r = tree.ctl("site", verb)
        assert r.returncode == 1 and "left alone" in r.stderr, r
    with open(tree.link, encoding="utf-8") as f:
        assert f.read() == "# the operator's own\n"


def test_a_dangling_link_is_removed(tree):
    """What purge used to leave: a link to a site that is gone, which fails nginx -t."""
    os.symlink(LINK_TARGET, tree.link)
    os.unlink(tree.site)
    r = tree.ctl("--json", "doctor")
    by = {c["name"]: c for c in json.loads(r.stdout)["checks"]}
    site = by["nginx site"]
    assert site["status"] == "fail" and "links to a site that is gone" in site["detail"], site
    assert site["fix"] == "paddockctl site disable"
    # And nginx's own complaint, for the configuration that no longer loads.
    wiring = by["nginx wiring"]
    assert wiring["status"] == "fail" and "[emerg]" in wiring["detail"], wiring
    assert "sites-enabled/paddock" in wiring["detail"], wiring
    r = tree.ctl("site", "enable")
    assert r.returncode == 1 and "not installed" in r.stderr, r
    r = tree.ctl("site", "disable")
    assert r.returncode == 0 and not os.path.lexists(tree.link), r


def test_conf_d_layout(tmp_path):
    if not os.access(CTL, os.X_OK):
        pytest.skip("paddockctl is missing")
    t = Tree(tmp_path / "nginx", layout="conf.d")
    r = t.ctl("site", "enable")
    assert r.returncode == 0 and "active by its place" in r.stdout, r
    r = t.ctl("site", "disable")
    assert r.returncode == 1 and "active by its place" in r.stderr, r
    assert os.path.exists(t.site)


def test_doctor_names_the_missing_step(tree):
    """The package's one enabling step: doctor says it is the one missing, and then not."""
    def site_check():
        r = tree.ctl("--json", "doctor")
        return {c["name"]: c for c in json.loads(r.stdout)["checks"]}

    by = site_check()
    assert by["nginx site"]["status"] == "fail", by["nginx site"]
    assert by["nginx site"]["detail"] == \
        "the paddock site is not enabled in nginx: run paddockctl site enable"
    assert by["nginx running"]["status"] == "fail", by["nginx running"]
    assert "not running" in by["nginx running"]["detail"]

    tree.start_nginx()
    assert tree.ctl("site", "enable").returncode == 0
    by = site_check()
    assert by["nginx site"]["status"] == "ok" and tree.link in by["nginx site"]["detail"]
    assert by["nginx running"]["status"] == "ok", by["nginx running"]


def test_command_line(tree):
    assert tree.ctl("site").returncode == 2
    assert tree.ctl("site", "on").returncode == 2
    assert tree.ctl("site", "enable", "now").returncode == 2


FAKE_SYSTEMCTL = """#!/bin/sh
# What systemctl answers on a host where the daemon failed and the socket was never enabled.
case "$1" in
is-active)
	case "$2" in
	paddock-sessiond.service) echo failed; exit 3 ;;
	paddock-fcgi.socket) echo inactive; exit 3 ;;
	*) echo active; exit 0 ;;
	esac ;;
show)
	printf 'LoadState=loaded\\nSystemCallFilter=\\nRestrictSUIDSGID=yes\\n'
	printf 'ProtectControlGroups=no\\nPrivateUsers=no\\nMemoryDenyWriteExecute=no\\n'
	exit 0 ;;
esac
exit 1
"""


def test_doctor_under_systemd(tree, tmp_path):
    """With systemd as pid 1 (as far as doctor can tell: /run/systemd/system), doctor asks
    systemctl about the units and the daemon's hardening. Both are faked in a mount
    namespace of the test's own; the host's /run and systemctl stay as they are."""
    if not os.access("/usr/bin/systemctl", os.X_OK):
        pytest.skip("no /usr/bin/systemctl to stand in for")
    fake = tmp_path / "systemctl"
    fake.write_text(FAKE_SYSTEMCTL)
    fake.chmod(0o755)
    script = ('mount -t tmpfs tmpfs /run && mkdir -p /run/systemd/system && '
              'mount --bind "$0" /usr/bin/systemctl && exec "$@"')
    r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script,
                        str(fake), CTL, "--json", "doctor"],
                       env=tree.env, capture_output=True, text=True, timeout=120)
    checks = json.loads(r.stdout)["checks"]
    by = {c["name"]: c for c in checks}
    assert r.returncode == 1
    assert by["paddock-sandboxes.service"]["status"] == "ok"
    sd = by["paddock-sessiond.service"]
    assert sd["status"] == "fail" and sd["detail"] == "failed", sd
    assert sd["fix"].startswith("journalctl -u paddock-sessiond.service says why"), sd
    sock = by["paddock-fcgi.socket"]
    assert sock["status"] == "fail" and sock["fix"] == "systemctl enable --now paddock-fcgi.socket"
    hard = [c for c in checks if c["name"] == "unit hardening"]
    assert len(hard) == 1 and hard[0]["status"] == "fail", hard
    assert "RestrictSUIDSGID=yes" in hard[0]["detail"] and "openat2()" in hard[0]["detail"]
    assert hard[0]["fix"] == "systemctl edit paddock-sessiond: [Service] RestrictSUIDSGID=no"
