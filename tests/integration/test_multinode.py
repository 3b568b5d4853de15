# SPDX-License-Identifier: MIT
"""Two complete paddock nodes on one machine (own node_name, sockets, state dirs and
ports, loopback only) behind a front that routes /sessions/<node>-... to the owning node
and sends new sessions to the least loaded one, in both shapes docs/operations.md
describes: nginx with a `map`, and HAProxy with `path_beg` ACLs. Sessions created
through the front land on both nodes and stay reachable."""

import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import types

import pytest
import requests


import paddock_stack as ps


def front_conf(tmp, port, nodes):
    """nodes: [(node_name, port)]."""
    lines = "\n".join(f"\t\t~^/sessions/{n}-\tnode_{n};" for n, _ in nodes)
    ups = "\n".join(f"\tupstream node_{n} {{\n\t\tserver 127.0.0.1:{p};\n\t\tkeepalive 8;\n\t}}"
                    for n, p in nodes)
    pool = "\n".join(f"\t\tserver 127.0.0.1:{p};" for _, p in nodes)
    return f"""
user paddock paddock;
worker_processes 1;
daemon off;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log info;
events {{ worker_connections 256; }}
http {{
	access_log {tmp}/access.log;
	client_body_temp_path {tmp}/body;
	proxy_temp_path {tmp}/proxy;
	fastcgi_temp_path {tmp}/fastcgi;
	scgi_temp_path {tmp}/scgi;
	uwsgi_temp_path {tmp}/uwsgi;

	# The owning node from the session id's prefix; anything else (CreateSession,
	# unknown prefixes) goes to the pool.
	map $request_uri $paddock_upstream {{
{lines}
		default	paddock_new;
	}}
{ups}
	upstream paddock_new {{
		least_conn;
{pool}
	}}
	server {{
		listen 127.0.0.1:{port};
		client_max_body_size 101m;
		location / {{
			proxy_pass http://$paddock_upstream;
			proxy_http_version 1.1;
			proxy_set_header Connection "";
			proxy_set_header Host $host;
			proxy_buffering off;
			proxy_request_buffering off;
			proxy_read_timeout 960s;
		}}
	}}
}}
"""


def haproxy_conf(tmp, port, nodes):
    """The HAProxy front of docs/operations.md, over plain HTTP on loopback."""
    acls = "\n".join(f"    acl to_{n} path_beg /sessions/{n}-\n    use_backend {n} if to_{n}"
                     for n, _ in nodes)
    pool = "\n".join(f"    server {n} 127.0.0.1:{p} check" for n, p in nodes)
    backends = "\n".join(f"backend {n}\n    server {n} 127.0.0.1:{p}\n" for n, p in nodes)
    return f"""
global
    maxconn 2000
    pidfile {tmp}/haproxy.pid

defaults
    mode http
    timeout connect 5s
    timeout client  1000s
    timeout server  1000s
    option httplog

frontend paddock
    bind 127.0.0.1:{port}
    http-request del-header X-Paddock-Tenant
{acls}
    default_backend new_sessions

backend new_sessions
    balance leastconn
    option httpchk GET /metrics
{pool}

{backends}"""


def start_nginx_front(tmp, port, nodes):
    conf = os.path.join(tmp, "nginx.conf")
    with open(conf, "w", encoding="utf-8") as f:
        f.write(front_conf(tmp, port, nodes))
    return subprocess.Popen([ps.NGINX, "-c", conf, "-e", os.path.join(tmp, "error.log")],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)


def start_haproxy_front(tmp, port, nodes):
    conf = os.path.join(tmp, "haproxy.cfg")
    with open(conf, "w", encoding="utf-8") as f:
        f.write(haproxy_conf(tmp, port, nodes))
    log = open(os.path.join(tmp, "error.log"), "wb")
    try:
        # -db: in the foreground, so that the test owns the process.
        return subprocess.Popen([shutil.which("haproxy"), "-db", "-f", conf],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
    finally:
        log.close()


FRONTS = {"nginx": start_nginx_front, "haproxy": start_haproxy_front}


@pytest.mark.parametrize("kind", sorted(FRONTS))
def test_two_nodes_behind_a_front(kind):
    if kind == "haproxy" and not shutil.which("haproxy"):
        pytest.fail("haproxy is missing: scripts/deps.sh installs it")
    tag = secrets.token_hex(3)
    a = ps.Stack("node-a", node_name=f"nodea{tag}")
    b = ps.Stack("node-b", node_name=f"nodeb{tag}")
    tmp = tempfile.mkdtemp(prefix="paddock-front-")
    os.chmod(tmp, 0o755)
    front = None
    problems = []
    try:
        a.start()
        b.start()
        nodes = [(a.node_name, a.port), (b.node_name, b.port)]
        for _ in range(5):
            port = ps.free_port()
            front = FRONTS[kind](tmp, port, nodes)
            ps.wait_for(lambda: front.poll() is not None or
                        ps._connectable(ps.socket.AF_INET, ("127.0.0.1", port)), 30, f"front {kind}")
            if front.poll() is None:
                break
        else:
            raise AssertionError(f"the front {kind} did not start: " + open(
                os.path.join(tmp, "error.log")).read()[-2000:])
        if kind == "haproxy":
            # New sessions go to servers its health checks have seen up.
            ps.wait_for(lambda: front.poll() is not None or requests.get(
                f"http://127.0.0.1:{port}/metrics", timeout=5).status_code != 503,
                30, "haproxy's first health checks")
            assert front.poll() is None, open(os.path.join(tmp, "error.log")).read()[-2000:]

        fake = types.SimpleNamespace(base_url=f"http://127.0.0.1:{port}", port=port,
                                     session_ids=set(), bearer=False)
        via_front = ps.Client(fake)
        direct = {a.node_name: ps.Client(a), b.node_name: ps.Client(b)}

        sids = [via_front.new_session() for _ in range(6)]
        owners = {s: s.split("-", 1)[0] for s in sids}
        assert set(owners.values()) == {a.node_name, b.node_name}, owners
        for s in sids:
            (a if owners[s] == a.node_name else b).session_ids.add(s)

        for i, s in enumerate(sids):
            out = via_front.run(s, f"print({i} * 7)")
            assert out.stdout == f"{i * 7}\n", out.body
            r = via_front.put_file(s, b"hello", path="in/x.txt")
            assert r.status_code == 201, r.text
            r = via_front.get_file(s, path="in/x.txt")
            assert r.status_code == 200 and r.content == b"hello"
            # The session lives on its node only.
            other = b.node_name if owners[s] == a.node_name else a.node_name
            assert direct[owners[s]].list_files(s).status_code == 200
            assert direct[other].list_files(s).status_code == 404

        # A prefix no node owns reaches the pool, whose node does not know it.
        r = via_front.list_files(f"nodez{tag}-doesnotexist")
        assert r.status_code == 404

        for s in sids:
            assert via_front.destroy(s).status_code == 204
        for s in sids:
            assert direct[owners[s]].list_files(s).status_code == 404
    finally:
        if front is not None and front.poll() is None:
            front.send_signal(signal.SIGTERM)
            front.wait(30)
        for st in (a, b):
            problems += [f"{st.name}: {p}" for p in st.stop()]
        ps.remove_tree_one_fs(tmp)
    assert not problems, "; ".join(problems)
