# SPDX-License-Identifier: MIT
"""A session that hit one of its limits recovers by itself: processes an earlier call left
at pids.max are stopped when they keep an interpreter from starting (the live interpreter
and its variables kept), and a full workspace is ENOSPC with the interpreters still able
to start, with the shipped defaults."""

import pytest

import paddock_stack as ps

RECOVERY = {"PADDOCK_PIDS_MAX": "48"}

# Daemons (double-forked: init adopts them) until a fork fails at pids.max, then one child
# of the interpreter's own for the last free pid.
FILL_PIDS_DAEMONS = """
import os, subprocess
n = 0
while True:
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        try:
            if os.fork() == 0:
                os.setsid()
                os.execvp("sleep", ["sleep", "1000"])
            os._exit(0)
        except OSError:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    if status != 0:
        break
    n += 1
kids = []
try:
    while True:
        kids.append(subprocess.Popen(["sleep", "1000"]))
except OSError as e:
    print("stopped at", n, len(kids), type(e).__name__)
"""

# The interpreter's own children, which stay its zombies once killed, until it waits.
FILL_PIDS_CHILDREN = """
import subprocess
kids = []
try:
    while True:
        kids.append(subprocess.Popen(["sleep", "1000"]))
except OSError as e:
    print("stopped at", len(kids), type(e).__name__)
"""


@pytest.fixture(scope="module")
def rclient(stacks):
    return ps.Client(stacks.get("recovery", RECOVERY))


def test_leftovers_at_pids_max_are_stopped_for_a_new_interpreter(rclient):
    c = rclient
    sid = c.new_session()
    try:
        c.run(sid, "x = 41")
        r = c.run(sid, FILL_PIDS_DAEMONS)
        assert "stopped at" in r.stdout, r
        # The shell has not started yet in this session: its fork fails at pids.max.
        r = c.bash(sid, "echo alive")
        assert r.stdout == "alive\n", r
        assert "earlier calls left running: they held" in r.stderr, r.stderr
        # Python kept its state; the daemons are gone, so processes can be made again.
        r = c.run(sid, "print(x + 1)\nimport subprocess\n"
                       "print(subprocess.run(['true']).returncode)")
        assert r.stdout == "42\n0\n", r
        # Once stopped, a later start has nothing to stop and says nothing of it.
        r = c.bash(sid, "exit 3")
        assert r.rc == 3
        r = c.bash(sid, "echo again")
        assert r.stdout == "again\n" and "left running" not in r.stderr, r
    finally:
        c.destroy(sid)


def test_interpreters_own_leftovers_cost_its_state(rclient):
    """Leftovers that are the live interpreter's own children stay its zombies: stopping
    them frees nothing, so the interpreter goes too, and the call says its state is lost."""
    c = rclient
    sid = c.new_session()
    try:
        c.run(sid, "x = 41")
        r = c.run(sid, FILL_PIDS_CHILDREN)
        assert "stopped at" in r.stdout and "BlockingIOError" in r.stdout, r
        r = c.bash(sid, "echo alive")
        assert r.stdout == "alive\n", r
        assert "the other interpreters included (their state is lost)" in r.stderr, r.stderr
        r = c.run(sid, "print('x' in globals())")
        assert r.stdout == "False\n", r
    finally:
        c.destroy(sid)


def test_full_workspace_is_enospc_and_interpreters_start(client):
    """With the shipped defaults (workspace 512M, /tmp 256M, memory 1G), filling the
    workspace ends in ENOSPC, not an OOM kill, and a fresh interpreter starts after it."""
    sid = client.new_session()
    try:
        r = client.bash(sid, "dd if=/dev/zero of=/workspace/fill bs=1M 2>&1; echo rc=$?",
                        timeout_seconds=120)
        assert "No space left on device" in r.stdout and "rc=1" in r.stdout, r
        assert r.rc == 0, r
        r = client.run(sid, "import os\nos._exit(3)")
        assert r.rc == 3
        r = client.run(sid, "import json, os\nprint(os.path.getsize('/workspace/fill') > 0)")
        assert r.stdout == "True\n" and r.rc == 0, r
        client.bash(sid, "rm /workspace/fill")
    finally:
        client.destroy(sid)
