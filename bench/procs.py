# SPDX-License-Identifier: MIT
"""The programs the bench scripts start and watch: readiness, stopping, /proc figures."""

import os
import signal
import socket
import subprocess
import time


def stat_fields(pid):
    """The fields of /proc/<pid>/stat after the command name (state first), or None
    once the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read().decode("ascii", "replace")
    except OSError:
        return None
    return data[data.rfind(")") + 2:].split()


def children_map():
    """{ppid: [pid, ...]} of every live process."""
    kids = {}
    for p in os.listdir("/proc"):
        fields = stat_fields(p) if p.isdigit() else None
        if fields:
            kids.setdefault(int(fields[1]), []).append(int(p))
    return kids


def tree(root, kids):
    """root and its descendants, from a children_map()."""
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def pid_namespaces():
    """{pid namespace: [pid, ...]} of every live process, as /proc/<pid>/ns/pid names it."""
    spaces = {}
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                spaces.setdefault(os.readlink(f"/proc/{p}/ns/pid"), []).append(int(p))
            except OSError:
                pass
    return spaces


def sandbox_members(init_pid, spaces):
    """Every process of the sandbox whose init is init_pid: its pid namespace's, which
    holds interpreters forked into it from outside (the Python template) as well."""
    try:
        return spaces.get(os.readlink(f"/proc/{init_pid}/ns/pid"), [init_pid])
    except OSError:
        return [init_pid]


def cpu_seconds(pid):
    """User + system CPU of a process (all its threads) so far; 0 once it is gone."""
    fields = stat_fields(pid)
    if not fields:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_connectable(family, addr, proc, what, timeout=30):
    """Wait until addr accepts a connection; proc exiting or the timeout raises."""
    deadline = time.monotonic() + timeout
    while True:
        s = socket.socket(family, socket.SOCK_STREAM)
        try:
            s.connect(addr)
            return
        except OSError:
            pass
        finally:
            s.close()
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode} during start-up")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} was not ready within {timeout} s")
        time.sleep(0.02)


def stop_process(proc, timeout):
    """SIGTERM, then SIGKILL when it is still there after timeout seconds."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
