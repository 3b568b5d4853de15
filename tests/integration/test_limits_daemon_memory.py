# SPDX-License-Identifier: MIT
"""Sandboxed code cannot make the root daemon hold memory. Each session floods what it
can reach of the daemon: the harness's control socket (fd 63 in the Python harness,
where user code runs in the harness's own process) during a call and between calls,
and stdout and stderr far past the output cap. sessiond's resident memory stays within
a few MiB of what it was before, stats' session_buffer_bytes, every byte it keeps
for sessions' interpreters, goes back to nearly nothing, and floods between calls cost
it next to no CPU."""

import os
import threading
import time

import pytest

import paddock_stack as ps

SESSIONS = 6
RSS_SLACK_KIB = 8 * 1024

# Writes on the harness's control socket from a thread that outlives the call.
FLOOD_BETWEEN_CALLS = """
import os, threading
def flood():
    junk = b'x' * 65536
    while True:
        try:
            os.write(63, junk)
        except OSError:
            return
threading.Thread(target=flood, daemon=True).start()
print('flooding')
"""

# Within the call: 200 MiB with no newline, as one reply that never ends.
FLOOD_IN_CALL = """
import os
junk = b'y' * (1 << 20)
for _ in range(200):
    os.write(63, junk)
"""

FLOOD_OUTPUT = """
import os
chunk = b'z' * (1 << 20)
for _ in range(64):
    os.write(1, chunk)
    os.write(2, chunk)
"""


def rss_kib(pid):
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.fixture(scope="module")
def mstack(stacks):
    return stacks.get("daemon-memory", {"PADDOCK_POOL_SIZE": "0"})


def buffered(stack):
    return stack.daemon_call({"op": "stats"})["session_buffer_bytes"]


def test_floods_leave_the_daemon_as_it_was(mstack):
    client = ps.Client(mstack)
    pid = mstack.procs["paddock-sessiond"].pid
    sids = [client.new_session() for _ in range(SESSIONS)]
    for sid in sids:
        assert client.run(sid, "print('warm')").stdout == "warm\n"
    idle = rss_kib(pid)

    # Between calls: the thread keeps writing after its call returned.
    for sid in sids:
        assert client.run(sid, FLOOD_BETWEEN_CALLS).stdout == "flooding\n"
    during = max(rss_kib(pid) for _ in range(20))
    # Nor its CPU: what comes on a control socket while nothing waits costs one read, then
    # the socket is no longer watched until the next call.
    cpu0 = cpu_seconds(pid)
    time.sleep(2)
    flood_cpu = cpu_seconds(pid) - cpu0
    assert flood_cpu < 0.2, f"sessiond spent {flood_cpu:.2f} s of CPU in 2 s of floods between calls"
    # Under ASan every allocation and free of the calls themselves sits in quarantine, so
    # resident memory says nothing there: the buffers' own count does (and LeakSanitizer).
    if not ps.sanitized_build():
        assert during - idle < RSS_SLACK_KIB, f"idle {idle} KiB, flooded between calls {during} KiB"
    assert buffered(mstack) < 1 << 20

    # Within a call, on fresh interpreters (the flooding threads go with a restart).
    fresh = [client.new_session() for _ in range(SESSIONS)]
    results = {}

    def flood_in_call(sid):
        results[sid] = ps.Client(mstack).run(sid, FLOOD_IN_CALL, timeout_seconds=60)

    threads = [threading.Thread(target=flood_in_call, args=(s,)) for s in fresh]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    for sid in fresh:
        r = results[sid]
        assert r.rc != 0, f"a 200 MiB reply passed: {r.body}"
        # The session goes on: its interpreter was restarted, the next call works.
        assert client.run(sid, "print('again')").stdout == "again\n"
        out = client.run(sid, FLOOD_OUTPUT)
        assert len(out.stdout) < 2 << 20 and len(out.stderr) < 2 << 20

    after = rss_kib(pid)
    if not ps.sanitized_build():
        assert after - idle < RSS_SLACK_KIB, f"idle {idle} KiB, after the floods {after} KiB"
    assert buffered(mstack) < 1 << 20, buffered(mstack)
    for sid in sids + fresh:
        assert client.destroy(sid).status_code == 204
