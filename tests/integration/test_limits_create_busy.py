# SPDX-License-Identifier: MIT
"""CreateSession on a busy host: a create waits for a sandbox rather than fail while the
host is merely slow (busy sessions, busy processes outside paddock), gives up with 503 and
Retry-After only after create_wait_seconds, and the node serves again once the host does."""

import os
import signal
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

import paddock_stack as ps

BUSY = {
    "PADDOCK_POOL_SIZE": "1",
    "PADDOCK_MAX_SESSIONS": "24",
    "PADDOCK_CPU_QUOTA_PERCENT": "100",
}
SPIN = "import time\nt = time.time()\nwhile time.time() - t < {secs}:\n    pass\nprint('spun')\n"


@pytest.fixture(scope="module")
def bclient(stacks):
    return ps.Client(stacks.get("busy", BUSY))


def create_many(client, n):
    """n creates at once, each on its own connection: their status codes and bodies."""
    def one(_):
        r = client.clone().create()
        return r.status_code, r.text[:300], r.headers.get("Retry-After")
    with ThreadPoolExecutor(n) as ex:
        return list(ex.map(one, range(n)))


def destroy_all(client, sids):
    for sid in sids:
        client.destroy(sid)


class Spinners:
    """n sessions each running a busy loop at full weight, in threads of their own."""

    def __init__(self, client, n, secs):
        self.client = client
        self.sids = [client.new_session() for _ in range(n)]
        self.results = []
        self.threads = [threading.Thread(target=self._spin, args=(sid, secs)) for sid in self.sids]
        for t in self.threads:
            t.start()

    def _spin(self, sid, secs):
        c = self.client.clone()
        r = c.exec(sid, "code_execution", {"code": SPIN.format(secs=secs)},
                   timeout_seconds=secs + 30)
        self.results.append(r.status_code)

    def cpu_ms(self):
        rows = self.client.stack.daemon_call({"op": "admin_sessions"})["sessions"]
        return {r["session_id"]: r["cpu_ms"] for r in rows if r["session_id"] in self.sids}

    def wait_spinning(self):
        """Until every spinner has used 300 ms of CPU more than when this was called."""
        start = self.cpu_ms()
        ps.wait_for(lambda: all(v >= start.get(k, 0) + 300 for k, v in self.cpu_ms().items())
                    and len(self.cpu_ms()) == len(self.sids), 30, "the spinners to spin")

    def stop(self):
        """Destroyed, their calls end (none hangs)."""
        destroy_all(self.client, self.sids)
        for t in self.threads:
            t.join(60)
        assert not any(t.is_alive() for t in self.threads), "a spinner's call hangs"
        assert len(self.results) == len(self.sids), self.results


def test_creates_wait_out_busy_sessions(bclient):
    """Three sessions keep both cores busy at the default weight, so the pool's refill (at
    the least weight) barely runs: creates meanwhile get sandboxes built for them at the
    default weight, and every one is created and runs code."""
    spin = Spinners(bclient, 3, 40)
    made = []
    try:
        spin.wait_spinning()  # both cores busy; the refill started behind them
        t0 = time.monotonic()
        results = create_many(bclient, 4)
        took = time.monotonic() - t0
        bad = [r for r in results if r[0] != 201]
        assert not bad, f"creates failed beside busy sessions after {took:.1f} s: {bad}"
        print(f"4 creates beside 3 busy sessions: {took:.2f} s")
        sids = [s for s in bclient.stack.session_ids if s not in spin.sids]
        for sid in sids:
            assert bclient.run(sid, "print(6*7)", timeout_seconds=60).stdout == "42\n"
        made = sids
    finally:
        spin.stop()
        destroy_all(bclient, made)


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def test_creates_wait_out_busy_host(bclient):
    """Processes outside paddock take every core (twice over): creates still succeed."""
    hogs = [subprocess.Popen(["/usr/bin/python3", "-c", "while True: pass"])
            for _ in range(2 * os.cpu_count())]
    before = set(bclient.stack.session_ids)
    try:
        ps.wait_for(lambda: all(cpu_ticks(h.pid) >= 30 for h in hogs), 30, "the hogs to spin")
        results = create_many(bclient, 6)
        bad = [r for r in results if r[0] != 201]
        assert not bad, f"creates failed on a busy host: {bad}"
        for sid in set(bclient.stack.session_ids) - before:
            assert bclient.run(sid, "print(6*7)", timeout_seconds=60).stdout == "42\n"
    finally:
        for h in hogs:
            h.kill()
            h.wait()
        destroy_all(bclient, set(bclient.stack.session_ids) - before)


# ---------------------------------------------------------------------------
# A host too slow to build within create_wait_seconds: the sandbox's child is stopped
# (SIGSTOP) while it sets itself up, as a host too busy to run it would leave it.

SLOW = {"PADDOCK_POOL_SIZE": "0", "PADDOCK_CREATE_WAIT_SECONDS": "2",
        "PADDOCK_MAX_SESSIONS": "8"}


def create_with_build_child(st, c, sig):
    """A create whose sandbox's child gets sig as it sets up (caught again if the build
    finished first): its answer and how long it took. A stopped child goes on after."""
    daemon = st.procs["paddock-sessiond"].pid
    for attempt in range(5):
        catcher = ps.ChildStopper(daemon, sig, most=1)
        catcher.start()
        try:
            t0 = time.monotonic()
            r = c.create()
            took = time.monotonic() - t0
        finally:
            catcher.finish()
        if catcher.stopped:
            return r, took
        if r.status_code == 201:
            c.destroy(r.parsed["session_id"])  # built before it was caught: again
    raise AssertionError("no build child was caught before it became init")


@pytest.mark.skipif(ps.INSTALLED, reason="kills a child of the stack's own daemon")
def test_create_outlives_a_failed_build(stacks):
    """The build a create waits for dies (its child killed as it sets up): the create does
    not inherit that build's error, it gets the next build."""
    st = stacks.get("slow", SLOW)
    c = ps.Client(st)
    failed_before = st.logs(tail=10**7).count("sandbox build failed")
    r, _ = create_with_build_child(st, c, signal.SIGKILL)
    assert r.status_code == 201, f"{r.status_code}: {r.text[:300]}"
    assert st.logs(tail=10**7).count("sandbox build failed") > failed_before, "no build failed"
    sid = r.parsed["session_id"]
    assert c.run(sid, "print(6*7)").stdout == "42\n"
    c.destroy(sid)
    st.assert_alive()


@pytest.mark.skipif(ps.INSTALLED, reason="stops the children of the stack's own daemon")
def test_create_gives_up_after_create_wait_seconds(stacks):
    st = stacks.get("slow", SLOW)
    c = ps.Client(st)
    r, took = create_with_build_child(st, c, signal.SIGSTOP)
    assert r.status_code == 503, f"{r.status_code} after {took:.2f} s: {r.text[:300]}"
    assert r.headers.get("Retry-After"), r.headers
    assert "within 2 s" in r.parsed["detail"], r.parsed
    # Not before its deadline, and not much after it.
    assert 1.9 <= took <= 6, f"answered after {took:.2f} s"
    # The build goes on (it is not given up for a create that gave up on it) and the node
    # serves again: a create succeeds and runs.
    sid = c.new_session()
    assert c.run(sid, "print(6*7)").stdout == "42\n"
    c.destroy(sid)
    st.assert_alive()
