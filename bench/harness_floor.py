#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Floor latency of the interpreter harnesses, driven directly.

Drives each harness over its pipes exactly as sessiond does: send one request
on the control socket, wait (epoll) for the reply line while reading stdout and
stderr, then drain both pipes. No nginx, FastCGI, sessiond or sandbox: this is
the lowest latency an execution through the full stack can reach.

    /usr/bin/python3 bench/harness_floor.py [-n 2000] [--json]

Measures, per harness, the startup (spawn to the first reply of a no-op
request) and the round trip of `print(1)` (python) and `echo 1` (bash), and
reports the median and p99 in microseconds.
"""

import argparse
import json
import os
import select
import socket
import statistics
import sys
import time
from pathlib import Path

HARNESS_DIR = Path(__file__).resolve().parents[1] / "sessiond" / "harness"

# The command lines the sandbox's init runs (see docs/harness-protocol.md).
HARNESSES = {
    "python": {
        "argv": ["/usr/bin/python3", "-I", "-S", "-B", "-X", "utf8", str(HARNESS_DIR / "harness.py")],
        "noop": "pass",
        "code": "print(1)",
        "expect": b"1\n",
    },
    "bash": {
        "argv": ["/bin/bash", "--noprofile", "--norc", str(HARNESS_DIR / "harness.bash")],
        "noop": ":",
        "code": "echo 1",
        "expect": b"1\n",
    },
}


class Driver:
    """One harness process, spoken to the way sessiond speaks to it."""

    def __init__(self, name, argv):
        self.name = name
        self.ctl, child = socket.socketpair()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        self.pid = os.posix_spawn(argv[0], argv, dict(os.environ), setsid=True, file_actions=[
            (os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
            (os.POSIX_SPAWN_DUP2, out_w, 1),
            (os.POSIX_SPAWN_DUP2, err_w, 2),
            (os.POSIX_SPAWN_DUP2, child.fileno(), 3),
        ])
        os.close(out_w)
        os.close(err_w)
        child.close()
        self.out, self.err = out_r, err_r
        for fd in (self.ctl.fileno(), self.out, self.err):
            os.set_blocking(fd, False)
        self.epoll = select.epoll()
        for fd in (self.ctl.fileno(), self.out, self.err):
            self.epoll.register(fd, select.EPOLLIN)
        self.next_id = 0

    def encode(self, code):
        self.next_id += 1
        if self.name == "bash":
            return f"{self.next_id}\n{code}\0".encode()
        return json.dumps({"id": self.next_id, "code": code, "mode": "otari"}).encode() + b"\n"

    def execute(self, code):
        """One request: returns (reply line, stdout bytes, stderr bytes)."""
        self.ctl.sendall(self.encode(code))
        out, err, reply = bytearray(), bytearray(), bytearray()
        while not reply.endswith(b"\n"):
            for fd, _ in self.epoll.poll(30):
                if fd == self.ctl.fileno():
                    data = self.ctl.recv(65536)
                    if not data:
                        raise RuntimeError(f"{self.name} harness closed its channel")
                    reply += data
                else:
                    self._read_into(fd, out if fd == self.out else err)
        # The reply is in: whatever the run wrote is in the pipes now.
        self._read_into(self.out, out)
        self._read_into(self.err, err)
        return bytes(reply), bytes(out), bytes(err)

    @staticmethod
    def _read_into(fd, buf):
        while True:
            try:
                data = os.read(fd, 65536)
            except BlockingIOError:
                return
            if not data:
                return
            buf += data

    def close(self):
        self.ctl.close()
        os.waitpid(self.pid, 0)
        self.epoll.close()
        os.close(self.out)
        os.close(self.err)


def percentile(sorted_values, fraction):
    index = min(len(sorted_values) - 1, round(fraction * (len(sorted_values) - 1)))
    return sorted_values[index]


def measure(name, spec, iterations, warmup):
    started = time.perf_counter_ns()
    driver = Driver(name, spec["argv"])
    try:
        driver.execute(spec["noop"])
        startup_us = (time.perf_counter_ns() - started) / 1000
        samples = []
        for i in range(warmup + iterations):
            t0 = time.perf_counter_ns()
            _, out, err = driver.execute(spec["code"])
            elapsed = (time.perf_counter_ns() - t0) / 1000
            if out != spec["expect"] or err:
                raise RuntimeError(f"{name}: unexpected output {out!r} {err!r}")
            if i >= warmup:
                samples.append(elapsed)
    finally:
        driver.close()
    samples.sort()
    return {
        "code": spec["code"],
        "iterations": iterations,
        "startup_us": round(startup_us, 1),
        "median_us": round(statistics.median(samples), 1),
        "p99_us": round(percentile(samples, 0.99), 1),
        "min_us": round(samples[0], 1),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", "--iterations", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--only", choices=sorted(HARNESSES), action="append",
                        help="measure only this harness (repeatable)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    args = parser.parse_args()

    results = {name: measure(name, HARNESSES[name], args.iterations, args.warmup)
               for name in (args.only or HARNESSES)}
    if args.json:
        json.dump({"benchmark": "harness_floor", "harnesses": results}, sys.stdout, indent=2)
        print()
        return
    for name, r in results.items():
        print(f"{name:7} {r['code']!r:12} n={r['iterations']}  median {r['median_us']:8.1f} us"
              f"  p99 {r['p99_us']:8.1f} us  min {r['min_us']:8.1f} us"
              f"  startup {r['startup_us'] / 1000:6.1f} ms")


if __name__ == "__main__":
    main()
