# SPDX-License-Identifier: MIT
"""The spawner: the small process sessiond forks to clone sandboxes' children and their
cleanup children, so that its loop never forks. What it holds, that builds and cleanups go
through it while the loop goes on without waiting for it, and that one killed is
replaced."""

import os
import signal
import time

import paddock_stack as ps


def _comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return None


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def _started(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except OSError:
        return 0


def _spawner(stack):
    """The daemon's spawner: the oldest of its live children named so in the daemon's own
    pid namespace. A sandbox's child carries the name until it execs, in a pid namespace
    of its own; a cleanup child carries it for the moment before it renames itself."""
    daemon = stack.procs["paddock-sessiond"].pid
    found = [p for p in ps.children(daemon)
             if _comm(p) == "paddock-spawner" and not ps.in_own_pid_namespace(p) and _alive(p)]
    return min(found, key=_started) if found else None


def _wait_for(what, cond, timeout=20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _fd_targets(pid):
    out = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            out[int(fd)] = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            pass
    return out


def test_spawner_holds_only_what_a_sandbox_child_inherits(stack, client):
    client.destroy(client.new_session())  # a build has run: the spawner exists
    pid = _wait_for("the spawner", lambda: _spawner(stack))
    with open(f"/proc/{pid}/status") as f:
        status = dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)
    assert int(status["PPid"]) == stack.procs["paddock-sessiond"].pid
    # Between requests: while it serves one it also holds that request's fds (a sandbox's
    # sockets, a cleanup's pipe) and the pidfd of the child it cloned, for a moment.
    high = None
    for _ in range(50):
        fds = {fd: t for fd, t in _fd_targets(pid).items() if fd > 2}
        if high is None or len(fds) < len(high):
            high = fds
        time.sleep(0.02)
    sockets = [t for t in high.values() if t.startswith("socket:")]
    # Its own socket to the daemon; not the daemon's listening socket, its workers'
    # connections, its epoll or signalfd, nor the store.
    assert len(sockets) == 1, high
    assert not any(t.startswith("anon_inode:") for t in high.values()), high
    assert not any(t.endswith((".db", ".db-wal", ".db-shm")) for t in high.values()), high
    # paddock-init (what a child execs), the state dir's lock, and with disk workspaces
    # the template image: nothing else.
    assert any(t.endswith("/paddock-init") for t in high.values()), high
    assert len(high) <= 4, high


def test_the_loop_does_not_wait_for_the_spawner(stack, client):
    """Stopped, the spawner holds up only what it does: a destroyed session's cleanup
    (its workspace stays until the spawner runs again). Calls to other sessions, creates
    from the pool and destroys are answered meanwhile."""
    busy = client.new_session()
    doomed = client.new_session()
    try:
        client.run(doomed, "open('spawner-marker', 'w').write('x')")
        ws = ps.host_workspace(stack, "spawner-marker")
        pid = _wait_for("the spawner", lambda: _spawner(stack))
        os.kill(pid, signal.SIGSTOP)
        try:
            client.destroy(doomed)
            t0 = time.monotonic()
            r = client.run(busy, "print(6 * 7)")
            assert r.stdout == "42\n", r
            assert time.monotonic() - t0 < 5
            time.sleep(1)
            assert os.path.isdir(ws), "the cleanup did not wait for the spawner"
        finally:
            os.kill(pid, signal.SIGCONT)
        _wait_for("the workspace's removal", lambda: not os.path.exists(ws))
    finally:
        client.destroy(busy)


def test_a_killed_spawner_is_replaced(stack, client):
    client.destroy(client.new_session())
    old = _wait_for("the spawner", lambda: _spawner(stack))
    os.kill(old, signal.SIGKILL)
    _wait_for("the old spawner to die", lambda: not _alive(old))
    # More creates than the pool holds: builds run, through a new spawner.
    sids = [client.new_session() for _ in range(6)]
    try:
        for sid in sids:
            r = client.run(sid, "print('ok')")
            assert r.stdout == "ok\n", r
        new = _wait_for("a new spawner", lambda: _spawner(stack))
        assert new != old
    finally:
        for sid in sids:
            client.destroy(sid)
    stack.assert_alive()
