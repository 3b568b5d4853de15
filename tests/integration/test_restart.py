# SPDX-License-Identifier: MIT
"""Restarts without loss: kill -9 sessiond (idle and mid-run), the worker, reload nginx.

Live sessions are re-adopted with their interpreter state; a call in flight fails
for its client instead of hanging; sandboxes that died meanwhile, and remains no
row explains, are cleaned; the store stays consistent.
"""

import os
import signal
import sqlite3
import subprocess
import threading
import time

import pytest

import paddock_stack as ps



@pytest.fixture(scope="module")
def rstack(stacks):
    # A stack of its own: these tests kill its programs.
    return stacks.get("restart", {"PADDOCK_POOL_SIZE": "1"})


@pytest.fixture(scope="module")
def rclient(rstack):
    return ps.Client(rstack)


def workspaces(stack):
    d = os.path.join(stack.state_dir, "workspaces")
    return set(os.listdir(d)) if os.path.isdir(d) else set()


def integrity_ok(stack):
    db = sqlite3.connect(os.path.join(stack.state_dir, "paddock.db"))
    try:
        return db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        db.close()


def session_init_pid(stack, sid):
    db = sqlite3.connect(os.path.join(stack.state_dir, "paddock.db"))
    try:
        row = db.execute("SELECT init_pid FROM sessions WHERE id = ?", (sid,)).fetchone()
    finally:
        db.close()
    return row[0] if row else None


def wait_for(pred, what, timeout=20.0):
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_idle_sessions_survive_sessiond_kill9(rstack, rclient):
    a = rclient.new_session()
    b = rclient.new_session()
    assert rclient.run(a, "x = 41\nimport math").rc == 0
    assert rclient.bash(a, "cd /tmp && export KEEP=yes").rc == 0
    assert rclient.run(b, "y = 'b'").rc == 0

    rstack.kill9("paddock-sessiond")
    # While the daemon is down, the API says so instead of hanging.
    r = rclient.exec(a, "code_execution", {"code": "print(1)"})
    assert r.status_code == 503, r.status_code
    rstack.restart("paddock-sessiond")

    assert rclient.run(a, "print(x + 1, math.pi > 3)").stdout == "42 True\n"
    assert rclient.bash(a, "pwd; echo $KEEP").stdout == "/tmp\nyes\n"
    assert rclient.run(b, "print(y)").stdout == "b\n"
    assert integrity_ok(rstack)
    for s in (a, b):
        assert rclient.destroy(s).status_code == 204


def test_call_in_flight_fails_and_the_session_goes_on(rstack, rclient):
    sid = rclient.new_session()
    assert rclient.run(sid, "state = 'kept'").rc == 0
    result = {}

    def slow_call():
        c = rclient.clone()
        try:
            result["r"] = c.exec(sid, "code_execution",
                                 {"code": "import time\nopen('started', 'w').close()\n"
                                          "time.sleep(3)\nprint('late')"},
                                 timeout_seconds=30)
        except Exception as e:  # a broken connection is a failure too
            result["e"] = e

    t = threading.Thread(target=slow_call)
    t.start()
    # The run says it is under way by writing a file; then the daemon crashes.
    wait_for(lambda: rclient.request("GET", f"/sessions/{sid}/files", params={"path": "started"},
                                     check=False).status_code == 200, "the run to start")
    rstack.kill9("paddock-sessiond")
    t.join(20)
    assert not t.is_alive(), "the client of the interrupted call hangs"
    assert "e" in result or result["r"].status_code >= 500, result
    rstack.restart("paddock-sessiond")
    # The interrupted call's late reply must not be taken for the next call's.
    out = rclient.run(sid, "print(state)", timeout_seconds=30)
    assert out.stdout == "kept\n", out
    out = rclient.run(sid, "print(2)")
    assert out.stdout == "2\n", out
    assert rclient.destroy(sid).status_code == 204


def test_sandbox_that_died_meanwhile_is_cleaned(rstack, rclient):
    sid = rclient.new_session()
    assert rclient.run(sid, "pass").rc == 0
    pid = session_init_pid(rstack, sid)
    assert pid
    name = rstack.sandbox_name(sid)
    assert ps.cgroups_matching([name])
    rstack.kill9("paddock-sessiond")
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not os.path.exists(f"/proc/{pid}"), "init to die")
    rstack.restart("paddock-sessiond")
    r = rclient.exec(sid, "code_execution", {"code": "print(1)"})
    assert r.status_code == 404
    wait_for(lambda: not ps.cgroups_matching([name]), "its cgroup to go")
    assert session_init_pid(rstack, sid) is None
    assert integrity_ok(rstack)


def test_a_session_destroyed_just_before_a_crash_stays_destroyed(rstack, rclient):
    # A destroy's row goes with the store's next batch (within 50 ms): a crash before it
    # leaves the row, naming an init that was killed, and the next daemon drops it.
    sid = rclient.new_session()
    assert rclient.run(sid, "pass").rc == 0
    name = rstack.sandbox_name(sid)
    assert rclient.destroy(sid).status_code == 204
    rstack.kill9("paddock-sessiond")
    print(f"row left by the crash: {session_init_pid(rstack, sid) is not None}")
    rstack.restart("paddock-sessiond")
    r = rclient.exec(sid, "code_execution", {"code": "print(1)"})
    assert r.status_code == 404, f"{r.status_code} {r.text[:300]}"
    wait_for(lambda: session_init_pid(rstack, sid) is None, "the row to go")
    wait_for(lambda: not ps.cgroups_matching([name]), "its cgroup to go")
    assert integrity_ok(rstack)


def test_orphans_of_a_crash_are_removed(rstack, rclient):
    # A workspace no row explains, as a crash between creating and recording leaves.
    rstack.kill9("paddock-sessiond")
    orphan = os.path.join(rstack.state_dir, "workspaces", rstack.node_name + "-orphanXYZ")
    os.makedirs(orphan)
    rstack.restart("paddock-sessiond")
    wait_for(lambda: not os.path.exists(orphan), "the orphan workspace to go")
    sid = rclient.new_session()
    assert rclient.run(sid, "print('ok')").stdout == "ok\n"
    assert rclient.destroy(sid).status_code == 204


def test_worker_kill9_and_nginx_reload(rstack, rclient):
    sid = rclient.new_session()
    assert rclient.run(sid, "v = 3").rc == 0
    rstack.kill9("paddock-fcgi")
    rstack.restart("paddock-fcgi")
    assert rclient.run(sid, "print(v)").stdout == "3\n"
    ng = rstack.procs["nginx"]
    old_workers = ps.children(ng.pid)
    assert old_workers
    conf = os.path.join(rstack.state_dir, "nginx", "nginx.conf")
    subprocess.run(["nginx", "-p", os.path.join(rstack.state_dir, "nginx") + "/", "-c", conf,
                    "-s", "reload"], check=True, capture_output=True)
    # -s reload only signals the master. Until the old workers have gone, one of them may
    # close the client's idle keep-alive connection just as a request is sent on it (an
    # HTTP race no server can close; a POST is not retried), so the reload counts as done
    # when the old workers are gone and new ones serve.
    ps.wait_for(lambda: not (ps.children(ng.pid) & old_workers) and ps.children(ng.pid),
                60, "nginx's old workers to exit after the reload")
    assert ng.poll() is None
    assert rclient.run(sid, "print(v * 2)").stdout == "6\n"
    assert rclient.destroy(sid).status_code == 204


def test_the_store_is_checkpointed_outside_the_daemon(stacks):
    # The daemon's connection never checkpoints (that syncs files in its loop): a process
    # of its own copies the WAL into the database once it passes wal_checkpoint_pages.
    st = stacks.get("checkpoint", {"PADDOCK_WAL_CHECKPOINT_PAGES": "2", "PADDOCK_POOL_SIZE": "0"})
    c = ps.Client(st)
    db = os.path.join(st.state_dir, "paddock.db")

    def logged_in_db_file():
        # immutable: the database file alone, without what is still only in the WAL.
        ro = sqlite3.connect(f"file:{db}?immutable=1", uri=True)
        try:
            return ro.execute("SELECT count(*) FROM executions WHERE session_id = ?",
                              (sid,)).fetchone()[0]
        finally:
            ro.close()

    before = st.daemon_call({"op": "stats"})["wal_checkpoints"]
    sid = c.new_session()
    for i in range(20):
        assert c.run(sid, f"print({i})").stdout == f"{i}\n"
    wait_for(lambda: st.daemon_call({"op": "stats"})["wal_checkpoints"] > before,
             "a checkpoint process")
    wait_for(lambda: logged_in_db_file() > 0, "the executions in the database file")
    assert c.destroy(sid).status_code == 204
    assert integrity_ok(st)


def test_end_sessions_destroys_what_a_stopped_daemon_left(rstack, rclient):
    # What removing the package does: the daemon is gone and its sandboxes live on (a
    # crash here; a stop with keep_sessions_on_exit leaves the same); --end-sessions
    # takes them over, destroys every one with all it holds, and exits.
    sids = [rclient.new_session() for _ in range(2)]
    for sid in sids:
        assert rclient.run(sid, "open('/workspace/kept', 'w').write('x')").rc == 0
    names = [rstack.sandbox_name(sid) for sid in sids]
    pids = [session_init_pid(rstack, sid) for sid in sids]
    rstack.kill9("paddock-sessiond")
    assert all(os.path.exists(f"/proc/{p}") for p in pids)

    r = subprocess.run([ps.SESSIOND_BIN, "--end-sessions"],
                       env=rstack.env(), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    wait_for(lambda: not any(os.path.exists(f"/proc/{p}") for p in pids), "the inits to exit")
    assert not rstack.store_rows("SELECT id FROM sessions WHERE id IN (?, ?)", *sids)
    left = ps.mounts_under(os.path.join(rstack.state_dir, "workspaces"))
    assert not [m for m in left if any(n in m for n in names)], left
    assert not ps.cgroups_matching(names)
    assert not set(names) & workspaces(rstack)

    rstack.restart("paddock-sessiond")
    for sid in sids:
        assert rclient.exec(sid, "code_execution", {"code": "1"}).status_code == 404


def listening_socket_inode(path):
    """The inode of the unix socket listening on path, from /proc/net/unix (which shows
    the name it was bound to: sessiond binds a temporary name and renames it)."""
    with open("/proc/net/unix") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            if len(fields) >= 8 and fields[7].startswith(path) and fields[3] == "00010000":
                return fields[6]
    raise AssertionError(f"nothing listens on {path}")


def sandbox_cgroup_of(pid):
    """The sandbox name of the cgroup pid is in (w + 16 hex digits), or None."""
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            for line in f:
                leaf = line.rstrip("\n").rsplit("/", 1)[-1]
                if len(leaf) == 17 and leaf.startswith("w"):
                    return leaf
    except OSError:
        pass
    return None


@pytest.mark.skipif(ps.INSTALLED, reason="stops a child of the stack's own daemon")
def test_crash_mid_build(rstack, rclient):
    """A daemon killed while a sandbox's child sets itself up (here stopped there, in its
    cgroup, as a host too busy to run it would leave it): the child holds none of the
    daemon's sockets (a call meanwhile fails at once instead of waiting on a connection no
    one serves) and dies with the daemon, so a daemon started at once gets the state dir's
    lock, cleans up what the child made, and serves."""
    listener = f"socket:[{listening_socket_inode(os.path.join(rstack.run_dir, 'sessiond.sock'))}]"
    daemon = rstack.procs["paddock-sessiond"].pid

    def set_up_in_its_cgroup(pid):
        return listener not in ps.open_files(pid) and sandbox_cgroup_of(pid) is not None

    stopper = None
    try:
        for attempt in range(5):
            stopper = ps.ChildStopper(daemon, most=1, until=set_up_in_its_cgroup)
            stopper.start()
            sid = rclient.new_session()  # takes the pool's sandbox: a refill starts
            try:
                ps.wait_for(lambda: stopper.stopped, 5, "a build child", interval=0.01)
                break
            except AssertionError:
                stopper.finish()
                rclient.destroy(sid)
        assert stopper.stopped, "no build child was caught before it became init"
        child = stopper.stopped[0]
        rid = sandbox_cgroup_of(child)
        rstack.kill9("paddock-sessiond")
        ps.wait_for(lambda: not ps.cmdline(child), 5, "the build child to die with the daemon")
        t0 = time.monotonic()
        assert rclient.exec(sid, "code_execution", {"code": "1"}).status_code == 503
        assert time.monotonic() - t0 < 10, "the call waited on the dead daemon"
        rstack.restart("paddock-sessiond")
        rstack.assert_alive()
        assert rclient.run(sid, "print(6*7)").stdout == "42\n"
        assert not ps.cgroups_matching([rid]), f"the dead build's cgroup {rid} is left"
        left = ps.mounts_under(os.path.join(rstack.state_dir, "workspaces"))
        assert not [m for m in left if rid in m], left
    finally:
        if stopper:
            stopper.finish(signal.SIGKILL)
    rclient.destroy(sid)
