#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""make bench: paddock's benchmark suite, every row next to its floor or peer measured in
the same run.

Starts the real stack (release build) with tests/integration/paddock_stack.py, and beside
it a peer nginx rendered from the same template and locations, relaying to bench's
fcgi_fixed (a FastCGI program answering one fixed reply at once) and answering
`return 200` and a static file itself. Drivers: bench/pdload (C; keep-alive HTTP latency,
harnesses over their pipes, start times), wrk with bench/wrk_sessions.lua (throughput),
curl (files), callgrind (bench/callgrind_check.py). Loopback only; every loop is bounded
in count and time.

Writes <build>/bench-results/<date>_<time>_<kernel>.{md,json,png} (every run, out of the
source tree) and prints the table; a run of every row also replaces
bench/results/latest.{md,json,png}, the one run the tree keeps.
"""

import argparse
import contextlib
import datetime
import http.client
import json
import os
import platform
import re
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

from procs import (children_map, cpu_seconds, pid_namespaces, sandbox_members, stop_process,
                   tree, wait_connectable)

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.path.dirname(HERE)
# The tree keeps the latest run of every row, as latest.{md,json,png}.
LATEST_DIR = os.path.join(HERE, "results")
ALL_ROWS = "1,2,2i,2r,3,4,5,6,7,8"
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"


# ---------------------------------------------------------------------------
# Machine, statistics, small helpers.

def machine():
    model = "?"
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    mem = meminfo()
    # A tree exported with `git archive` has no .git: PADDOCK_BENCH_SOURCE names its commit.
    rev = os.environ.get("PADDOCK_BENCH_SOURCE") or subprocess.run(
        ["git", "-C", SOURCE_DIR, "describe", "--always", "--dirty"],
        capture_output=True, text=True).stdout.strip() or "unknown"
    return {"nproc": os.cpu_count(), "model": model, "kernel": platform.release(), "source": rev,
            "mem_total_mib": mem.get("MemTotal", 0) // 1024,
            "python": sys.version.split()[0]}


def machine_line(m):
    return f"{m['nproc']} x {m['model']}, kernel {m['kernel']}, {m['mem_total_mib']} MiB"


def meminfo():
    out = {}
    with open("/proc/meminfo", encoding="utf-8") as f:
        for line in f:
            k, v = line.split(":", 1)
            out[k] = int(v.split()[0])
    return out


def load():
    return round(os.getloadavg()[0], 2)


def pct(sorted_vals, p):
    """Nearest-rank percentile of an ascending list."""
    if not sorted_vals:
        return float("nan")
    k = max(0, min(len(sorted_vals) - 1, int(round(p / 100.0 * len(sorted_vals) + 0.5)) - 1))
    return sorted_vals[k]


def stats_us(samples_ns):
    s = sorted(x / 1000.0 for x in samples_ns)
    return {"n": len(s), "median": pct(s, 50), "p99": pct(s, 99), "mean": sum(s) / len(s) if s else 0}


def proc_status(pid, keys=("VmRSS", "VmHWM")):
    out = {}
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in keys:
                    out[k] = int(v.split()[0])
    except OSError:
        pass
    return out


def drop_caches():
    """The host's clean page cache dropped, so that the next read comes from the disk."""
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w", encoding="ascii") as f:
        f.write("3\n")


def pss_kib(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="utf-8") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class CpuMeter:
    """CPU spent per request by named groups of processes over some pdload runs.

    Groups are lists of pids read from /proc/<pid>/stat before and after each run; the
    "client" group is pdload itself (and what it spawned and reaped), from this process's
    RUSAGE_CHILDREN. The clock tick is 10 ms, so a run must be long enough: the sums over
    every round are what is reported."""

    def __init__(self, warmup):
        self.warmup = warmup   # requests pdload sends before it records
        self.cpu = {}
        self.requests = 0

    def run(self, groups, fn):
        """fn runs pdload and returns its (summary, samples); the summary is returned."""
        before = {k: sum(cpu_seconds(p) for p in pids) for k, pids in groups.items()}
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        summary, _ = fn()
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        for k, pids in groups.items():
            self.cpu[k] = self.cpu.get(k, 0.0) + sum(cpu_seconds(p) for p in pids) - before[k]
        self.cpu["client"] = self.cpu.get("client", 0.0) + (
            r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)
        # pdload's own share of "client", without what it started (a harness, a hop's end).
        self.cpu["client_self"] = self.cpu.get("client_self", 0.0) + summary.get("self_cpu_s", 0.0)
        self.requests += summary["count"] + self.warmup
        return summary

    def per_request_us(self, key):
        return self.cpu.get(key, 0.0) / max(1, self.requests) * 1e6


class Http:
    """A keep-alive HTTP/1.1 client for set-up calls (timed loops use pdload)."""

    def __init__(self, port, timeout=120):
        self.port = port
        self.timeout = timeout
        self.conn = None

    def call(self, method, path, body=None, headers=None):
        for attempt in (0, 1):
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
            try:
                h = {"Content-Type": "application/json"} if body is not None else {}
                h.update(headers or {})
                data = json.dumps(body).encode() if isinstance(body, dict) else body
                if data is None and method == "POST":
                    data = b""
                self.conn.request(method, path, body=data, headers=h)
                r = self.conn.getresponse()
                return r.status, r.read()
            except (http.client.HTTPException, OSError):
                self.conn.close()
                self.conn = None
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def create(self):
        st, body = self.call("POST", "/sessions")
        assert st == 201, (st, body[:300])
        return json.loads(body)["session_id"]

    def exec(self, sid, req):
        st, body = self.call("POST", f"/sessions/{sid}/exec", req)
        assert st == 200, (st, body[:300])
        return body

    def destroy(self, sid):
        st, body = self.call("DELETE", f"/sessions/{sid}")
        assert st == 204, (st, body[:300])

    def close(self):
        if self.conn:
            self.conn.close()


# ---------------------------------------------------------------------------
# The peer: the same nginx configuration, relaying to fcgi_fixed.

class Peer:
    def __init__(self, bench_bin, threads, reply, static_bytes):
        self.bench_bin = bench_bin
        self.threads = threads
        self.reply = reply
        self.static_bytes = static_bytes
        self.procs = {}
        self.state_dir = None
        self.port = None

    @property
    def static_path(self):
        return os.path.join(self.state_dir, "static", "big.bin")

    def start(self):
        import paddock_stack as ps
        self.state_dir = tempfile.mkdtemp(prefix="paddock-bench-peer-")
        os.chmod(self.state_dir, 0o755)
        for d in ("log", "nginx", "run", "static"):
            os.makedirs(os.path.join(self.state_dir, d), exist_ok=True)
            os.chmod(os.path.join(self.state_dir, d), 0o755)
        with open(self.static_path, "wb") as f:
            chunk = os.urandom(1 << 20)
            for _ in range(self.static_bytes >> 20):
                f.write(chunk)
        os.chmod(self.static_path, 0o644)
        reply_file = os.path.join(self.state_dir, "reply.json")
        with open(reply_file, "wb") as f:
            f.write(self.reply)
        sock = os.path.join(self.state_dir, "run", "fcgi.sock")
        log = open(os.path.join(self.state_dir, "log", "fcgi_fixed.log"), "ab")
        p = subprocess.Popen([os.path.join(self.bench_bin, "fcgi_fixed"), sock, str(self.threads),
                              reply_file], stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                             start_new_session=True)
        log.close()
        self.procs["fcgi_fixed"] = p
        wait_connectable(socket.AF_UNIX, sock, p, "fcgi_fixed")

        text = self.reply.decode()
        assert "$" not in text, "the fixed reply would be read as nginx variables"
        quoted = text.replace("\\", "\\\\").replace("'", "\\'")
        locations = os.path.join(self.state_dir, "nginx", "locations.conf")
        with open(locations, "w", encoding="utf-8") as f:
            f.write(f"include {SOURCE_DIR}/nginx/paddock-locations.conf;\n"
                    "location = /bench/return200 {\n"
                    "\tdefault_type application/json;\n"
                    f"\treturn 200 '{quoted}';\n}}\n"
                    "location = /bench/static {\n"
                    "\tdefault_type application/octet-stream;\n"
                    f"\talias {self.static_path};\n}}\n")
        with open(os.path.join(SOURCE_DIR, "nginx", "paddock-dev.conf.in"), encoding="utf-8") as f:
            template = f.read()
        for _ in range(5):
            self.port = ps.free_port()
            conf = template
            for k, v in {"@USER@": "paddock", "@GROUP@": "paddock",
                         "@LISTEN@": f"127.0.0.1:{self.port}", "@STATE_DIR@": self.state_dir,
                         "@FCGI_SOCKET@": sock, "@LOCATIONS@": locations}.items():
                conf = conf.replace(k, v)
            path = os.path.join(self.state_dir, "nginx", "nginx.conf")
            with open(path, "w", encoding="utf-8") as f:
                f.write(conf)
            log = open(os.path.join(self.state_dir, "log", "nginx.log"), "ab")
            ng = subprocess.Popen([NGINX, "-p", os.path.join(self.state_dir, "nginx") + "/", "-c", path,
                                   "-e", os.path.join(self.state_dir, "log", "nginx-error.log")],
                                  stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                  start_new_session=True)
            log.close()
            self.procs["nginx"] = ng
            try:
                wait_connectable(socket.AF_INET, ("127.0.0.1", self.port), ng, "peer nginx")
                return self
            except RuntimeError:
                if ng.poll() is None:
                    raise
        raise RuntimeError("peer nginx could not bind a free port")

    def stop(self):
        for key in ("nginx", "fcgi_fixed"):
            p = self.procs.pop(key, None)
            if p is not None:
                stop_process(p, 15)
        if self.state_dir:
            shutil.rmtree(self.state_dir, ignore_errors=True)


# ---------------------------------------------------------------------------
# The suite.

class Bench:
    def __init__(self, args):
        self.args = args
        self.bin = args.bench_bin
        self.lib = os.path.join(args.build, "lib")
        self.machine = machine()
        self.rows = []
        self.extra = {}
        self.samples = {}
        self.tmp = tempfile.mkdtemp(prefix="paddock-bench-")
        os.chmod(self.tmp, 0o755)
        self.workdir = os.path.join(self.tmp, "workspace")
        os.makedirs(self.workdir)
        self.stack = None
        self.peer = None
        self.stop_problems = []

    # -- drivers

    def pdload(self, mode, *argv, key=None):
        out = os.path.join(self.tmp, "samples.txt")
        cmd = [os.path.join(self.bin, "pdload"), mode, "--out", out, *map(str, argv)]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise RuntimeError(f"pdload failed: {' '.join(cmd)}\n{r.stderr}")
        summary = json.loads(r.stdout.strip().splitlines()[-1])
        with open(out, encoding="ascii") as f:
            samples = [int(x) for x in f if x.strip()]
        if key:
            self.samples.setdefault(key, []).extend(samples)
        return summary, samples

    def http_lat(self, port, method, path, body_file, expect, n, secs, key):
        args = ["--port", port, "--method", method, "--path", path, "-n", n, "-t", secs,
                "--warmup", self.args.warmup, "--header", "Content-Type: application/json"]
        if body_file:
            args += ["--body", body_file]
        if expect:
            args += ["--expect", expect]
        return self.pdload("http", *args, key=key)

    def harness_lat(self, kind, code, expect, n, secs, key, procs=1):
        args = ["--kind", kind, "--lib", self.lib, "--code", code, "--workdir", self.workdir,
                "-n", n, "-t", secs, "--warmup", self.args.warmup, "--procs", procs]
        if expect:
            args += ["--expect", expect]
        return self.pdload("harness", *args, key=key)

    def add_row(self, **row):
        row.setdefault("machine", machine_line(self.machine))
        row.setdefault("load", load())
        self.rows.append(row)
        print(format_row(row), flush=True)

    def section(self, title):
        print(f"\n== {title}  [{machine_line(self.machine)}; load {load()}]", flush=True)

    # -- set-up

    def start(self):
        os.environ["PADDOCK_BUILD_DIR"] = self.args.build
        sys.path.insert(0, os.path.join(SOURCE_DIR, "tests", "integration"))
        import paddock_stack as ps
        ps.BUILD_DIR = self.args.build
        env = {"PADDOCK_LOG_LEVEL": "info",
               "PADDOCK_MAX_SESSIONS": str(max(64, self.args.density + 64))}
        if self.args.pool_size is not None:
            env["PADDOCK_POOL_SIZE"] = str(self.args.pool_size)
        self.stack = self.new_stack("bench", env)
        self.http = Http(self.stack.port)
        # The fixed reply: paddock's own answer to print(1), so both carry the same bytes.
        sid = self.http.create()
        self.reply = self.http.exec(sid, {"tool": "code_execution", "input": {"code": "print(1)"}})
        self.http.destroy(sid)
        self.peer = Peer(self.bin, 8, self.reply, self.args.file_mib << 20).start()
        print(f"stack on 127.0.0.1:{self.stack.port}, peer on 127.0.0.1:{self.peer.port}", flush=True)

    def new_stack(self, name, env):
        """A started stack with env, and every --env setting on top; once its Python
        templates (when the build has them) are ready, what it serves comes from them."""
        import paddock_stack as ps
        extra = dict(kv.split("=", 1) for kv in self.args.env)
        stack = ps.Stack(name=name, env={**env, **extra}).start()
        self.wait_templates(stack)
        return stack

    @staticmethod
    def wait_templates(stack, timeout=120):
        """Wait until the templates have said whether they serve, then swap the pool's
        sandboxes made meanwhile (their Python came from init) for new ones."""
        log = os.path.join(stack.state_dir, "log", "paddock-sessiond.log")
        deadline = time.monotonic() + timeout
        done = ("kernel template ready", "kernel template is off", "kernel template cannot",
                "kernel template failed")
        while time.monotonic() < deadline:
            with open(log, encoding="utf-8", errors="replace") as f:
                text = f.read()
            if "template starting" not in text or any(d in text for d in done):
                break
            time.sleep(0.2)
        if "template starting" not in text:
            return
        st = stack.daemon_call({"op": "stats"})
        http = Http(stack.port)
        for sid in [http.create() for _ in range(st.get("pool_target") or 0)]:
            http.destroy(sid)
        http.close()

    def stop(self):
        problems = []
        if self.peer:
            self.peer.stop()
        if self.stack:
            self.http.close()
            problems = self.stack.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)
        return self.stop_problems + problems

    def pids(self):
        return {k: p.pid for k, p in self.stack.procs.items()}

    # -- row 1: sequential latency, one warm session

    def row_latency(self):
        a = self.args
        self.section(f"1. sequential keep-alive latency, one warm session "
                     f"({a.rounds} rounds x up to {a.n} requests or {a.seconds} s each)")
        sid = self.http.create()
        marker = "paddock-bench-view-marker"
        self.http.exec(sid, {"tool": "text_editor_code_execution",
                             "input": {"command": "create", "path": "notes.md",
                                       "file_text": "".join(f"line {i} {marker}\n" for i in range(20))}})
        view = {"command": "view", "path": "notes.md"}
        cases = [
            ("python print(1)", {"tool": "code_execution", "input": {"code": "print(1)"}},
             "python", "print(1)", '"1\\n"',
             {"op": "exec", "tool": "python", "code": "print(1)", "timeout_ms": 60000}),
            ("bash echo 1", {"tool": "bash_code_execution", "input": {"command": "echo 1"}},
             "bash", "echo 1", '"1\\n"',
             {"op": "exec", "tool": "bash", "code": "echo 1", "timeout_ms": 60000}),
            ("editor view", {"tool": "text_editor_code_execution", "input": view},
             None, None, marker, {"op": "edit", "input": view}),
        ]
        path = f"/sessions/{sid}/exec"
        for name, req, kind, code, expect, sdreq in cases:
            body_file = os.path.join(self.tmp, "body.json")
            with open(body_file, "w", encoding="utf-8") as f:
                json.dump(req, f)
            sd_file = os.path.join(self.tmp, "sessiond.json")
            with open(sd_file, "w", encoding="utf-8") as f:
                json.dump({**sdreq, "session_id": sid}, f)
            reply = self.http.exec(sid, req)
            assert expect.encode() in reply, (name, reply[:300])
            errs = {"paddock": 0, "harness": 0, "relay": 0, "return200": 0, "sessiond": 0, "hop": 0}
            meters = {k: CpuMeter(a.warmup) for k in ("paddock", "harness", "relay", "hop")}
            groups = self.cpu_groups()
            for _ in range(a.rounds):
                s = meters["paddock"].run(groups["paddock"], lambda: self.http_lat(
                    self.stack.port, "POST", path, body_file, expect, a.n, a.seconds, f"{name}|paddock"))
                errs["paddock"] += s["errors"]
                if kind:
                    s = meters["harness"].run({}, lambda: self.harness_lat(
                        kind, code, "1\n", a.n, a.seconds, f"{name}|harness"))
                    errs["harness"] += s["errors"]
                s = meters["relay"].run(groups["relay"], lambda: self.http_lat(
                    self.peer.port, "POST", path, body_file, None, a.n, a.seconds, f"{name}|relay"))
                errs["relay"] += s["errors"]
                s, _ = self.http_lat(self.peer.port, "POST", "/bench/return200", body_file, None, a.n,
                                     a.seconds, f"{name}|return200")
                errs["return200"] += s["errors"]
                s, _ = self.pdload("sessiond", "--socket", os.path.join(self.stack.run_dir, "sessiond.sock"),
                                   "--body", sd_file, "--expect", expect, "-n", a.n, "-t", a.seconds,
                                   "--warmup", a.warmup, key=f"{name}|sessiond")
                errs["sessiond"] += s["errors"]
                s = meters["hop"].run({}, lambda: self.pdload(
                    "hop", "--size", os.path.getsize(sd_file), "-n", a.n, "-t", a.seconds,
                    "--warmup", a.warmup, key=f"{name}|hop"))
                errs["hop"] += s["errors"]
            p = stats_us(self.samples[f"{name}|paddock"])
            h = stats_us(self.samples[f"{name}|harness"]) if kind else {"median": 0.0, "p99": 0.0, "n": 0}
            r = stats_us(self.samples[f"{name}|relay"])
            n200 = stats_us(self.samples[f"{name}|return200"])
            sd = stats_us(self.samples[f"{name}|sessiond"])
            hop = stats_us(self.samples[f"{name}|hop"])
            floor_med = h["median"] + r["median"]
            floor_p99 = h["p99"] + r["p99"]
            note = ("floor = harness over its pipes (same argv, no sandbox) + the same nginx config "
                    "relaying to fcgi_fixed") if kind else (
                    "the editor runs inside sessiond: floor (a) is taken as 0 (one small file read), "
                    "so the floor is the relay alone: strict")
            self.add_row(row="1", what=f"{name} via nginx", unit="us", n=p["n"], median=p["median"],
                         p99=p["p99"], peer="floor (a)+(b)", peer_median=floor_med, peer_p99=floor_p99,
                         ratio_median=p["median"] / floor_med, ratio_p99=p["p99"] / floor_p99,
                         target="med <= 1.25x, p99 <= 2x (print: also <= 2x return 200)",
                         errors=errs["paddock"], note=note)
            if kind:
                self.add_row(row="1a", what=f"  floor (a): {kind} harness over pipes", unit="us", n=h["n"],
                             median=h["median"], p99=h["p99"], errors=errs["harness"])
            self.add_row(row="1b", what="  floor (b): nginx -> fcgi_fixed relay", unit="us", n=r["n"],
                         median=r["median"], p99=r["p99"], errors=errs["relay"])
            self.add_row(row="1c", what="  peer: nginx `return 200`", unit="us", n=n200["n"],
                         median=n200["median"], p99=n200["p99"], peer="return 200",
                         peer_median=n200["median"], peer_p99=n200["p99"], ratio_median=p["median"] / n200["median"],
                         ratio_p99=p["p99"] / n200["p99"], errors=errs["return200"],
                         note="ratios: paddock over return 200")
            self.add_row(row="1d", what="  split: the same call straight to sessiond's socket", unit="us",
                         n=sd["n"], median=sd["median"], p99=sd["p99"], errors=errs["sessiond"],
                         note="where the time goes, not a floor: paddock minus this is nginx and the "
                              "worker; this minus floor (a) is sessiond and the sandbox")
            self.hop_rows(p, floor_med, hop, errs["hop"])
            self.cpu_rows(name, meters, kind)
        self.http.destroy(sid)
        # Cross-check of floor (a) with bench/harness_floor.py (a Python driver; its own argv).
        script = os.path.join(HERE, "harness_floor.py")
        if os.path.exists(script):
            r = subprocess.run([sys.executable, script, "-n", str(a.n), "--json"], capture_output=True,
                               text=True, timeout=300)
            try:
                hf = json.loads(r.stdout)["harnesses"]
            except (ValueError, KeyError):
                hf = {}
                print(f"  harness_floor.py failed: {r.stderr.strip()[-300:]}")
            self.extra["harness_floor_py"] = hf
            for kind, v in hf.items():
                self.add_row(row="1a'", what=f"  cross-check: harness_floor.py, {kind}", unit="us",
                             n=v.get("iterations"), median=v.get("median_us"), p99=v.get("p99_us"),
                             note="Python driver (adds its own overhead) and the harness's "
                                  "documented argv; pdload (C) gives floor (a) above")

    def hop_rows(self, p, floor_med, hop, errors):
        """Rows 1f and 1g: the one hop paddock's chain has beyond its floor (worker to
        sessiond), measured bare, and what the 1.25x target leaves for everything else.

        The floor's two parts already hold nginx and a FastCGI program, and a client driving
        the harness over its pipes (sessiond's part); the chain adds one request and reply
        between two processes. 1g compares the time paddock adds beyond the floor and that
        hop with the time the target allows for it."""
        self.add_row(row="1f", what="  one more hop, bare (pdload hop)",
                     unit="us", n=hop["n"], median=hop["median"], p99=hop["p99"], errors=errors,
                     note="pdload hop: a unix stream socket, the size of the call to sessiond "
                          "each way, no work at the far end")
        room = 0.25 * floor_med - hop["median"]
        spent = p["median"] - floor_med - hop["median"]
        self.add_row(row="1g", what="  paddock's own work: median - floor - hop",
                     unit="us", median=spent, p99=None, peer="room at 1.25x the floor",
                     peer_median=room, ratio_median=spent / room if room > 0 else None,
                     note="medians: paddock - floor - hop, against 0.25 x floor - hop; the "
                          "worker's and sessiond's own work (JSON in and out, accounting, "
                          "the produced-files walk, their syscalls and wake-ups)")

    def cpu_groups(self):
        """The processes whose CPU row 1e counts: paddock's chain and the relay's."""
        kids = children_map()
        sd = self.stack.procs["paddock-sessiond"].pid
        return {
            "paddock": {"nginx": kids.get(self.stack.procs["nginx"].pid, []),
                        "paddock-fcgi": [self.stack.procs["paddock-fcgi"].pid],
                        "paddock-sessiond": [sd],
                        # Every sandbox (init and interpreter); the pool's are idle meanwhile.
                        "sandbox": [p for p in tree(sd, kids) if p != sd]},
            "relay": {"nginx": kids.get(self.peer.procs["nginx"].pid, []),
                      "fcgi_fixed": [self.peer.procs["fcgi_fixed"].pid]},
        }

    def cpu_rows(self, name, meters, kind):
        """Row 1e: CPU time per request of each process on the path, beside the floor's.

        With one client and sequential requests, a request's latency is close to the sum
        of these: the processes take turns. The floor has three processes on its paths
        (harness, nginx, fcgi_fixed; plus the client twice), paddock five."""
        pm, hm, rm = meters["paddock"], meters["harness"], meters["relay"]
        parts = [("nginx", pm.per_request_us("nginx"), "nginx (relay)", rm.per_request_us("nginx")),
                 ("paddock-fcgi", pm.per_request_us("paddock-fcgi"), "fcgi_fixed",
                  rm.per_request_us("fcgi_fixed")),
                 ("paddock-sessiond", pm.per_request_us("paddock-sessiond"), None, None)]
        if kind:
            parts.append(("sandbox: init + harness", pm.per_request_us("sandbox"),
                          "harness over pipes + pdload", hm.per_request_us("client")))
        parts.append(("client (pdload)", pm.per_request_us("client"), "pdload (relay)",
                      rm.per_request_us("client")))
        total = sum(v for _, v, _, _ in parts)
        floor_total = sum(v for _, _, _, v in parts if v is not None)
        self.extra.setdefault("cpu_per_request_us", {})[name] = {
            "paddock": {k: round(v, 1) for k, v, _, _ in parts},
            "floor": {k: round(v, 1) for _, _, k, v in parts if k},
            "requests": {"paddock": pm.requests, "harness": hm.requests, "relay": rm.requests}}
        for what, v, peer, pv in parts:
            self.add_row(row="1e", what=f"  CPU per {name}: {what}", unit="us", n=pm.requests,
                         median=v, p99=None, peer=peer, peer_median=pv,
                         ratio_median=v / pv if pv else None)
        self.add_row(row="1e", what=f"  CPU per {name}: all of the above", unit="us", n=pm.requests,
                     median=total, p99=None, peer="floor's processes", peer_median=floor_total,
                     ratio_median=total / floor_total if floor_total else None,
                     note="user + system time from /proc over every round, per request; the "
                          "harness floor's includes its start (amortised) and pdload")
        if kind:
            self.two_process_floor(name, meters)

    def two_process_floor(self, name, meters):
        """Row 1h: what paddock-fcgi and sessiond cost together, against the least two
        processes in their places cost on this machine: a FastCGI program that answers at
        once (fcgi_fixed), one request and reply between two processes (pdload hop, both
        ends) and a program that drives the harness over its pipes (pdload itself, without
        the harness). What is left beyond it is the two programs' own work."""
        pm, hm, rm, om = meters["paddock"], meters["harness"], meters["relay"], meters["hop"]
        ours = pm.per_request_us("paddock-fcgi") + pm.per_request_us("paddock-sessiond")
        parts = [("fcgi_fixed", rm.per_request_us("fcgi_fixed")),
                 ("the hop, both ends", om.per_request_us("client")),
                 ("the harness's driver", hm.per_request_us("client_self"))]
        floor = sum(v for _, v in parts)
        for what, v in parts:
            self.add_row(row="1h", what=f"  CPU floor per {name}: {what}", unit="us",
                         n=om.requests if what.startswith("the hop") else None, median=v, p99=None)
        self.add_row(row="1h", what=f"  CPU per {name}: paddock-fcgi + sessiond", unit="us",
                     n=pm.requests, median=ours, p99=None, peer="the floor of two processes",
                     peer_median=floor, ratio_median=ours / floor if floor else None,
                     target="<= 70 us",
                     note="floor: fcgi_fixed + pdload hop (both ends) + pdload driving the "
                          "harness (its own CPU, the harness apart); all measured in this run")

    # -- row 2: CreateSession + DestroySession, with the warm pool and without

    def stats(self, stack):
        return stack.daemon_call({"op": "stats"})

    def create_cycles(self, http, count, interval=None):
        """count create + print(1) + destroy cycles, back to back or one every interval s."""
        create, first, destroy = [], [], []
        body = {"tool": "code_execution", "input": {"code": "print(1)"}}
        deadline = time.monotonic() + 120
        tick = time.monotonic()
        for _ in range(count):
            if time.monotonic() > deadline:
                break
            if interval:
                tick += interval
                time.sleep(max(0.0, tick - time.monotonic()))
            t0 = time.perf_counter_ns()
            sid = http.create()
            t1 = time.perf_counter_ns()
            out = http.exec(sid, body)
            t2 = time.perf_counter_ns()
            http.destroy(sid)
            t3 = time.perf_counter_ns()
            assert b'"1\\n"' in out
            create.append(t1 - t0)
            first.append(t2 - t1)
            destroy.append(t3 - t2)
        return create, first, destroy

    def row_create(self):
        a = self.args
        self.section(f"2. CreateSession + first print(1) + DestroySession through nginx "
                     f"({a.creates} sequential cycles; warm pool as configured, then pool_size 0)")
        st0 = self.stats(self.stack)
        t0 = time.monotonic()
        pooled = self.create_cycles(self.http, a.creates)
        elapsed = time.monotonic() - t0
        st1 = self.stats(self.stack)
        paced, paced_taken = None, 0
        if st1.get("pool_target"):
            self.wait_pool_started(self.stack, st1["pool_target"])
            st2 = self.stats(self.stack)
            paced = self.create_cycles(self.http, a.creates, 1.0 / a.paced_rate)
            paced_taken = self.stats(self.stack).get("pool_taken", 0) - st2.get("pool_taken", 0)
        nopool_stack = self.new_stack("bench-nopool", {"PADDOCK_LOG_LEVEL": "info",
                                                       "PADDOCK_POOL_SIZE": "0"})
        try:
            h = Http(nopool_stack.port)
            cold = self.create_cycles(h, a.creates)
            h.close()
        finally:
            for p in nopool_stack.stop():
                self.stop_problems.append(f"no-pool stack: {p}")
        for name, data in (("pool", pooled), ("cold", cold)):
            for what, vals in zip(("create", "first", "destroy"), data):
                self.samples[f"{what}|{name}"] = vals
        py, _ = self.pdload("spawn", "-n", a.creates, "-t", 60, "--warmup", 3, "--",
                            "/usr/bin/python3", "-I", "-c", "pass", key="python3 -I -c pass")
        # sessiond starts the harness with -S (no site, no .pth files): the same start.
        pys_s, _ = self.pdload("spawn", "-n", a.creates, "-t", 60, "--warmup", 3, "--",
                               "/usr/bin/python3", "-I", "-S", "-c", "pass",
                               key="python3 -I -S -c pass")
        hs, _ = self.pdload("harness-start", "--kind", "python", "--lib", self.lib, "--workdir",
                            self.workdir, "--expect", "1\n", "-n", a.creates, "-t", 60, "--warmup", 3,
                            key="harness start + print(1)")
        pys = stats_us(self.samples["python3 -I -c pass"])
        hss = stats_us(self.samples["harness start + print(1)"])
        taken = st1.get("pool_taken", 0) - st0.get("pool_taken", 0)
        built = st1.get("pool_built", 0) - st0.get("pool_built", 0)
        self.extra["pool"] = {"target": st1.get("pool_target"), "taken": taken, "built": built,
                              "seconds": elapsed}
        pc, pf, pd = (stats_us(x) for x in pooled)
        cc, cf, cd = (stats_us(x) for x in cold)
        ms = 1e3
        self.add_row(row="2", what=f"CreateSession, warm pool (target {st1.get('pool_target')})",
                     unit="ms", n=pc["n"], median=pc["median"] / ms, p99=pc["p99"] / ms,
                     target="median <= 2 ms, p99 <= 5 ms", errors=0,
                     note=f"{taken} of {pc['n']} creates took a pooled sandbox; {built} built in "
                          f"{elapsed:.1f} s while the loop ran ({built / elapsed:.1f}/s, bounded by "
                          f"demand: not the refill capacity)")
        self.add_row(row="2", what="  first print(1), pooled session", unit="ms", n=pf["n"],
                     median=pf["median"] / ms, p99=pf["p99"] / ms)
        if paced:
            self.samples["create|paced"], self.samples["first|paced"] = paced[0], paced[1]
            qc, qf = stats_us(paced[0]), stats_us(paced[1])
            self.add_row(row="2p", what=f"CreateSession, warm pool, {a.paced_rate:g} creates/s",
                         unit="ms", n=qc["n"], median=qc["median"] / ms, p99=qc["p99"] / ms,
                         target="median <= 2 ms, p99 <= 5 ms", errors=0,
                         note=f"paced below the refill rate, pool full at the start; "
                              f"{paced_taken} of {qc['n']} creates took a pooled sandbox")
            self.add_row(row="2p", what="  first print(1), pooled session", unit="ms", n=qf["n"],
                         median=qf["median"] / ms, p99=qf["p99"] / ms)
        self.add_row(row="2", what="CreateSession, no pool (pool_size 0)", unit="ms", n=cc["n"],
                     median=cc["median"] / ms, p99=cc["p99"] / ms, peer="python3 -I -c pass",
                     peer_median=pys["median"] / ms, peer_p99=pys["p99"] / ms,
                     ratio_median=cc["median"] / pys["median"], ratio_p99=cc["p99"] / pys["p99"],
                     target="<= interpreter start + 5 ms", errors=py["errors"],
                     note="the sandbox only: its interpreter starts as the sandbox is ready, unawaited")
        self.add_row(row="2", what="  first print(1), cold session (interpreter start)", unit="ms",
                     n=cf["n"], median=cf["median"] / ms, p99=cf["p99"] / ms,
                     peer="harness start + print(1), no sandbox", peer_median=hss["median"] / ms,
                     peer_p99=hss["p99"] / ms, ratio_median=cf["median"] / hss["median"],
                     ratio_p99=cf["p99"] / hss["p99"], errors=hs["errors"])
        self.add_row(row="2", what="  cold create + first print(1)", unit="ms", n=cc["n"],
                     median=(cc["median"] + cf["median"]) / ms, p99=None,
                     peer="python3 -I -c pass + 5 ms", peer_median=pys["median"] / ms + 5,
                     ratio_median=(cc["median"] + cf["median"]) / (pys["median"] + 5000),
                     target="<= 1x", note="sum of the two medians")
        pyss = stats_us(self.samples["python3 -I -S -c pass"])
        self.add_row(row="2", what="  cold create + first print(1)", unit="ms", n=cc["n"],
                     median=(cc["median"] + cf["median"]) / ms, p99=None,
                     peer="python3 -I -S -c pass + 5 ms", peer_median=pyss["median"] / ms + 5,
                     ratio_median=(cc["median"] + cf["median"]) / (pyss["median"] + 5000),
                     target="<= 1x", errors=pys_s["errors"],
                     note="the same, against the interpreter started as sessiond starts it (-S)")
        self.add_row(row="2", what="DestroySession (pooled / cold)", unit="ms", n=pd["n"],
                     median=pd["median"] / ms, p99=pd["p99"] / ms,
                     note=f"cold stack: median {cd['median'] / ms:.2f} ms, p99 {cd['p99'] / ms:.2f} ms")

    # -- row 2i: a data task's first cell in a session just taken from the pool

    FIRST_IMPORT = "import numpy, pandas, matplotlib.pyplot\nprint(1)"

    def row_first_import(self, cycles=8):
        """Create from a full pool, import the data stack, destroy: the import's time, against
        the same import in a fresh interpreter outside any sandbox (what a session pays when
        its interpreter holds nothing preloaded)."""
        self.section("2i. first `import numpy, pandas, matplotlib.pyplot` in a pooled session")
        body = {"tool": "code_execution", "input": {"code": self.FIRST_IMPORT}}
        target = self.stats(self.stack).get("pool_target") or 0
        times = []
        for _ in range(cycles):
            if target:
                self.wait_pool_started(self.stack, target)
            sid = self.http.create()
            t0 = time.perf_counter_ns()
            out = self.http.exec(sid, body)
            times.append(time.perf_counter_ns() - t0)
            self.http.destroy(sid)
            assert b'"1\\n"' in out, out[:300]
        self.samples["first import|pool"] = times
        fresh, _ = self.pdload("spawn", "-n", cycles, "-t", 120, "--warmup", 1, "--",
                               "/usr/bin/python3", "-I", "-c",
                               "import numpy, pandas, matplotlib.pyplot",
                               key="fresh interpreter: import")
        st, fs = stats_us(times), stats_us(self.samples["fresh interpreter: import"])
        ms = 1e3
        self.add_row(row="2i", what="first import numpy, pandas, matplotlib.pyplot, pooled session",
                     unit="ms", n=st["n"], median=st["median"] / ms, p99=st["p99"] / ms,
                     peer="python3 -I -c 'import ...', no sandbox",
                     peer_median=fs["median"] / ms, peer_p99=fs["p99"] / ms,
                     ratio_median=st["median"] / fs["median"], ratio_p99=st["p99"] / fs["p99"],
                     target="<= 20 ms", errors=fresh["errors"],
                     note="each from a full pool; the peer is a whole interpreter's start and "
                          "import, the call is the import alone in a started one")

    def wait_pool_started(self, stack, want, timeout=180):
        deadline = time.monotonic() + timeout
        while True:
            st = self.stats(stack)
            if st.get("pool_started", 0) >= want:
                return st
            if time.monotonic() > deadline:
                raise RuntimeError(f"the pool did not reach {want} started sandboxes: {st}")
            time.sleep(0.01)

    @staticmethod
    def probe_during(st, probe, action):
        """print(1) in the session probe, paced at one call per 5 ms, for 2 s alone and then
        while action() runs; returns (quiet, busy) latencies in ns and action's result."""
        body = {"tool": "code_execution", "input": {"code": "print(1)"}}

        def lat_loop(stop, out):
            c = Http(st.port)
            # Paced, so the probe samples the loop without taking a core from what it watches.
            while not stop.wait(0.005):
                t0 = time.perf_counter_ns()
                c.exec(probe, body)
                out.append(time.perf_counter_ns() - t0)
            c.close()

        quiet, busy = [], []
        for out, fn in ((quiet, lambda: time.sleep(2)), (busy, action)):
            stop = threading.Event()
            t = threading.Thread(target=lat_loop, args=(stop, out))
            t.start()
            try:
                result = fn()
            finally:
                stop.set()
                t.join()
        return quiet, busy, result

    @contextlib.contextmanager
    def probe_stack(self, name, env, what):
        """A stack of its own with a session that has run print(1), the probe for
        probe_during(); both go when the block ends, the stack's problems noted."""
        st = self.new_stack(name, {"PADDOCK_LOG_LEVEL": "info", **env})
        try:
            h = Http(st.port)
            probe = h.create()
            h.exec(probe, {"tool": "code_execution", "input": {"code": "print(1)"}})
            yield st, h, probe
            h.destroy(probe)
            h.close()
        finally:
            for p in st.stop():
                self.stop_problems.append(f"{what} stack: {p}")

    def add_probe_row(self, row, key, quiet, busy, peer, during):
        """The probe of probe_during() while something ran, against itself before; its
        samples are kept under key."""
        self.samples[f"{key}|quiet"], self.samples[f"{key}|busy"] = quiet, busy
        q, b = stats_us(quiet), stats_us(busy)
        self.add_row(row=row, what="  print(1) in another session meanwhile", unit="ms",
                     n=b["n"], median=b["median"] / 1e3, p99=b["p99"] / 1e3, peer=peer,
                     peer_median=q["median"] / 1e3, peer_p99=q["p99"] / 1e3,
                     ratio_median=b["median"] / q["median"], ratio_p99=b["p99"] / q["p99"],
                     target="no stalls", note=f"max {max(busy) / 1e6:.1f} ms {during}, "
                                              f"{max(quiet) / 1e6:.1f} ms before (Python client)")

    def row_refill(self):
        """Refill capacity: take a full pool at once, time its rebuild (sandbox and Python
        started), and watch print(1) in another session meanwhile."""
        k = self.args.refill
        self.section(f"2r. pool refill: {k} warm sandboxes taken at once, rebuilt while a "
                     f"session runs print(1) every 5 ms")
        taken = []
        env = {"PADDOCK_POOL_SIZE": str(k), "PADDOCK_MAX_SESSIONS": str(2 * k + 16)}
        with self.probe_stack("bench-refill", env, "refill") as (st, h, probe):
            self.wait_pool_started(st, k)
            before = self.stats(st)

            taker = Http(st.port)

            def take_all_and_wait():
                t0 = time.monotonic()
                for _ in range(k):
                    taken.append(taker.create())
                t_taken = time.monotonic() - t0
                after = self.wait_pool_started(st, k)
                return t_taken, after, time.monotonic() - t0

            def destroy_all():
                for sid in taken:
                    taker.destroy(sid)

            # The refill and the destroys of what it replaced, watched apart: each has its
            # own cost (builds; unmounts, namespaces and cgroups taken down).
            quiet, busy, (t_taken, after, elapsed) = self.probe_during(st, probe, take_all_and_wait)
            d_quiet, d_busy, _ = self.probe_during(st, probe, destroy_all)
            taker.close()
            built = after.get("pool_built", 0) - before.get("pool_built", 0)
        self.add_row(row="2r", what=f"pool refill, {k} sandboxes with Python started", unit="/s",
                     n=built, median=built / elapsed, p99=None, target=">= 50/s on 2 cores",
                     errors=0, note=f"{k} creates took {t_taken * 1e3:.0f} ms; {built} rebuilt and "
                                    f"answering in {elapsed:.2f} s")
        self.add_probe_row("2r", "refill", quiet, busy, "same, pool full", "during the refill")
        self.add_probe_row("2d", "destroys", d_quiet, d_busy, "same, before",
                           f"while the {k} sessions taken are destroyed")
        self.row_empty_pool_creates()
        self.row_many_files()

    def row_empty_pool_creates(self):
        """Creates that find the pool empty, several at once, while another session runs
        print(1): each waits for a sandbox built for it; the others should not."""
        k, rounds = 8, 5
        self.section(f"2c. {rounds} rounds of {k} concurrent creates with no pool, while a "
                     f"session runs print(1) every 5 ms")
        creates = []
        env = {"PADDOCK_POOL_SIZE": "0", "PADDOCK_MAX_SESSIONS": str(k + 4)}
        with self.probe_stack("bench-emptypool", env, "empty-pool") as (st, h, probe):
            def one(out):
                c = Http(st.port)
                t0 = time.perf_counter_ns()
                sid = c.create()
                out.append(time.perf_counter_ns() - t0)
                c.destroy(sid)
                c.close()

            def rounds_of_creates():
                for _ in range(rounds):
                    ts = [threading.Thread(target=one, args=(creates,)) for _ in range(k)]
                    for t in ts:
                        t.start()
                    for t in ts:
                        t.join()

            quiet, busy, _ = self.probe_during(st, probe, rounds_of_creates)
        cr = stats_us(creates)
        self.samples["emptypool|create"] = creates
        self.add_row(row="2c", what=f"CreateSession, no pool, {k} at once", unit="ms", n=cr["n"],
                     median=cr["median"] / 1e3, p99=cr["p99"] / 1e3, errors=k * rounds - cr["n"])
        self.add_probe_row("2c", "emptypool", quiet, busy, "same, no creates", "during the creates")

    def row_many_files(self):
        """A session with 100,000 files in its workspace runs `pass` in a loop (each call
        ends with a walk for the files it made) while another session runs print(1)."""
        n, calls = 100000, 20
        self.section(f"2w. a session with {n} files runs pass {calls} times, while another "
                     f"runs print(1) every 5 ms")
        noisy_calls = []
        with self.probe_stack("bench-manyfiles", {}, "many-files") as (st, h, probe):
            noisy = h.create()
            make = (f"import os\nos.makedirs('many', exist_ok=True)\n"
                    f"for k in range({n}): open(f'many/f{{k}}', 'w').close()\n")
            h.exec(noisy, {"tool": "code_execution", "input": {"code": make}, "timeout_seconds": 300})

            def noisy_loop():
                c = Http(st.port)
                for _ in range(calls):
                    t0 = time.perf_counter_ns()
                    c.exec(noisy, {"tool": "code_execution", "input": {"code": "pass"}})
                    noisy_calls.append(time.perf_counter_ns() - t0)
                c.close()

            quiet, busy, _ = self.probe_during(st, probe, noisy_loop)
            h.destroy(noisy)
        nc = stats_us(noisy_calls)
        self.samples["manyfiles|noisy"] = noisy_calls
        self.add_row(row="2w", what=f"pass in a session with {n} files", unit="ms", n=nc["n"],
                     median=nc["median"] / 1e3, p99=nc["p99"] / 1e3,
                     note="each call ends with a walk of the workspace for the files it made")
        self.add_probe_row("2w", "manyfiles", quiet, busy, "same, before", "during the calls")

    # -- row 3: throughput

    def row_throughput(self):
        a = self.args
        k = a.sessions
        self.section(f"3. throughput: {k} sessions x print(1), {k} concurrent clients, {a.tput_seconds} s")
        sids = [self.http.create() for _ in range(k)]
        body = {"tool": "code_execution", "input": {"code": "print(1)"}}
        for sid in sids:
            self.http.exec(sid, body)
        ids_file = os.path.join(self.tmp, "ids.txt")
        with open(ids_file, "w", encoding="ascii") as f:
            f.write("\n".join(sids) + "\n")
        body_file = os.path.join(self.tmp, "tput.json")
        with open(body_file, "w", encoding="utf-8") as f:
            json.dump(body, f)

        def wrk(port):
            env = dict(os.environ, PDBENCH_IDS=ids_file)
            r = subprocess.run(["wrk", f"-t{k}", f"-c{k}", f"-d{a.tput_seconds}s", "--timeout", "30s",
                                "-s", os.path.join(HERE, "wrk_sessions.lua"),
                                f"http://127.0.0.1:{port}/", "--", body_file, '"1\\n"'],
                               capture_output=True, text=True, env=env, timeout=a.tput_seconds + 120)
            m = re.search(r"^WRKJSON (.*)$", r.stdout, re.M)
            if not m:
                raise RuntimeError(f"wrk failed:\n{r.stdout}\n{r.stderr}")
            w = json.loads(m.group(1))
            w["rps"] = w["requests"] / (w["duration_us"] / 1e6)
            return w

        results = []
        for _ in range(a.tput_rounds):
            w = wrk(self.stack.port)
            h, _ = self.harness_lat("python", "print(1)", "1\n", 10 ** 7, a.tput_seconds, None, procs=k)
            r = wrk(self.peer.port)
            results.append((w, h, r))
        best = max(results, key=lambda x: x[0]["rps"] / x[1]["rate"])
        med = sorted(results, key=lambda x: x[0]["rps"] / x[1]["rate"])[len(results) // 2]
        w, h, r = med
        self.extra["throughput_rounds"] = [{"paddock": x[0], "harness": x[1], "relay": x[2]} for x in results]
        errors = sum(x[0]["bad"] + x[0]["socket_errors"] for x in results)
        self.add_row(row="3", what=f"paddock via nginx, wrk -t{k} -c{k}", unit="req/s", n=w["requests"],
                     median=w["rps"], p99=None, peer=f"{k} harnesses over pipes", peer_median=h["rate"],
                     ratio_median=w["rps"] / h["rate"], target=">= 0.5x, zero errors", errors=errors,
                     note=f"median of {len(results)} rounds (best {best[0]['rps'] / best[1]['rate']:.3f}); "
                          f"request latency p50 {w['p50_us'] / 1e3:.2f} ms p99 {w['p99_us'] / 1e3:.2f} ms")
        self.add_row(row="3a", what=f"  floor: {k} python harnesses over pipes, {k} threads", unit="req/s",
                     n=h["count"], median=h["rate"], p99=None, errors=h["errors"])
        self.add_row(row="3b", what="  peer: nginx -> fcgi_fixed relay, same wrk", unit="req/s",
                     n=r["requests"], median=r["rps"], p99=None, errors=r["bad"] + r["socket_errors"])
        for sid in sids:
            self.http.destroy(sid)

    # -- row 4: density

    def admin_sessions(self):
        reply = self.stack.daemon_call({"op": "admin_sessions"})
        assert reply.get("ok"), reply
        return reply["sessions"]

    def row_density(self):
        import paddock_stack as ps
        a = self.args
        n = a.density
        self.section(f"4. density: {n} idle Python sessions")
        pids = self.pids()
        mem0 = meminfo()["MemAvailable"]
        sd0 = proc_status(pids["paddock-sessiond"])
        sids, lock, failures = [], threading.Lock(), []
        body = {"tool": "code_execution", "input": {"code": "print(1)"}}
        t0 = time.monotonic()
        deadline = t0 + a.density_timeout

        def worker(count):
            c = Http(self.stack.port)
            try:
                for _ in range(count):
                    if time.monotonic() > deadline:
                        failures.append("time bound reached")
                        return
                    try:
                        sid = c.create()
                        with lock:
                            sids.append(sid)
                        c.exec(sid, body)
                    except AssertionError as e:
                        failures.append(str(e)[:200])
                        return
            finally:
                c.close()

        # print(1) in one session, before the others exist and once they are all live: what
        # a request pays for the sessions beside it.
        probe_h = Http(self.stack.port)
        probe = probe_h.create()
        probe_h.exec(probe, body)
        probe_file = os.path.join(self.tmp, "density_probe.json")
        with open(probe_file, "w", encoding="utf-8") as f:
            json.dump(body, f)

        def probe_lat(key):
            return self.http_lat(self.stack.port, "POST", f"/sessions/{probe}/exec", probe_file,
                                 '"1\\n"', 2000, 20, key)

        alone, _ = probe_lat("density|probe-alone")
        conc = 4
        th = [threading.Thread(target=worker, args=(n // conc + (i < n % conc),)) for i in range(conc)]
        for t in th:
            t.start()
        for t in th:
            t.join()
        created_s = time.monotonic() - t0
        time.sleep(1.0)  # let the interpreters settle after their first print(1)
        crowded, _ = probe_lat("density|probe-crowded")
        probe_h.destroy(probe)
        probe_h.close()
        sessions = self.admin_sessions()
        spaces = pid_namespaces()
        per = []
        for s in sessions:
            procs = sandbox_members(s["init_pid"], spaces)
            per.append(sum(pss_kib(p) for p in procs))
        per.sort()
        mem1 = meminfo()["MemAvailable"]
        sd1 = proc_status(pids["paddock-sessiond"])
        cg = sorted(s.get("memory_bytes", 0) for s in sessions)
        live = len(sessions)
        self.extra["density"] = {"requested": n, "live": live, "create_seconds": created_s,
                                 "failures": failures[:5], "pss_kib": per,
                                 "memavailable_drop_kib": mem0 - mem1,
                                 "sessiond_before": sd0, "sessiond_after": sd1}
        self.add_row(row="4", what=f"PSS per idle Python session ({live} live)", unit="MiB",
                     n=live, median=pct(per, 50) / 1024, p99=pct(per, 99) / 1024,
                     target="<= 6 MiB; >= 1,000 sessions", errors=len(failures),
                     note=f"every process of the sandbox (its pid namespace), smaps_rollup Pss; created in {created_s:.1f} s "
                          f"({live / created_s:.1f}/s with {conc} clients, each with one print(1))")
        pa, pc = (stats_us(self.samples[f"density|probe-{k}"]) for k in ("alone", "crowded"))
        self.add_row(row="4", what=f"  print(1) with {live} sessions live", unit="us", n=pc["n"],
                     median=pc["median"], p99=pc["p99"], peer="same, before they were created",
                     peer_median=pa["median"], peer_p99=pa["p99"],
                     ratio_median=pc["median"] / pa["median"], ratio_p99=pc["p99"] / pa["p99"],
                     errors=alone["errors"] + crowded["errors"])
        self.add_row(row="4", what="  MemAvailable drop per session", unit="MiB", n=live,
                     median=(mem0 - mem1) / max(live, 1) / 1024, p99=None,
                     note="includes kernel objects (netns, mounts, cgroup, page tables); noisy on a "
                          "shared machine")
        if cg and cg[-1]:
            self.add_row(row="4", what="  cgroup memory per session", unit="MiB", n=live,
                         median=pct(cg, 50) / 2 ** 20, p99=pct(cg, 99) / 2 ** 20)
        self.add_row(row="4", what="  sessiond RSS before -> after", unit="MiB", n=live,
                     median=sd1.get("VmRSS", 0) / 1024, p99=None,
                     note=f"before {sd0.get('VmRSS', 0) / 1024:.1f} MiB, "
                          f"{(sd1.get('VmRSS', 0) - sd0.get('VmRSS', 0)) / max(live, 1):.0f} KiB/session")
        tmpl = [p for p in children_map().get(pids["paddock-sessiond"], [])
                if b"harness_template.py" in (ps.cmdline(p) or b"")
                and os.readlink(f"/proc/{p}/ns/pid") == os.readlink("/proc/self/ns/pid")]
        if tmpl:
            self.add_row(row="4", what="  Python template PSS (once per node)", unit="MiB", n=1,
                         median=pss_kib(tmpl[0]) / 1024, p99=None,
                         note="the preloaded interpreter sessions' Python is forked from; "
                              "its pages are shared with every session (its RSS: "
                              f"{proc_status(tmpl[0]).get('VmRSS', 0) / 1024:.0f} MiB)")
        t1 = time.monotonic()

        def destroyer(part):
            c = Http(self.stack.port)
            try:
                for sid in part:
                    c.destroy(sid)
            finally:
                c.close()

        th = [threading.Thread(target=destroyer, args=(sids[i::conc],)) for i in range(conc)]
        for t in th:
            t.start()
        for t in th:
            t.join()
        self.extra["density"]["destroy_seconds"] = time.monotonic() - t1

    # -- row 5: files

    def curl(self, args):
        r = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w",
                            "%{http_code} %{time_total} %{size_upload} %{size_download}", *args],
                           capture_output=True, text=True, timeout=300)
        code, tt, up, down = r.stdout.split()
        return int(code), float(tt), float(up), float(down)

    def row_files(self):
        a = self.args
        size = a.file_mib << 20
        self.section(f"5. {a.file_mib} MiB PutFile then GetFile ({a.file_rounds} rounds), curl over loopback")
        pids = self.pids()
        before = {k: proc_status(pids[k]) for k in ("paddock-sessiond", "paddock-fcgi")}
        sid = self.http.create()
        base, peer = f"http://127.0.0.1:{self.stack.port}", f"http://127.0.0.1:{self.peer.port}"
        src = self.peer.static_path
        res = {"put": [], "get": [], "static": [], "relay_put": []}
        groups = self.cpu_groups()
        cpu = {"put": {"nginx": 0.0, "worker": 0.0}, "relay_put": {"nginx": 0.0, "worker": 0.0}}

        def metered(key, side, worker, args):
            """One upload, its CPU in the side's nginx and FastCGI program added to cpu[key]."""
            pids = {"nginx": groups[side]["nginx"], "worker": groups[side][worker]}
            before = {k: sum(cpu_seconds(p) for p in v) for k, v in pids.items()}
            out = self.curl(args)
            for k, v in pids.items():
                cpu[key][k] += sum(cpu_seconds(p) for p in v) - before[k]
            return out

        for _ in range(a.file_rounds):
            code, tt, up, _ = metered("put", "paddock", "paddock-fcgi",
                                      ["-F", f"file=@{src};filename=big.bin", "-F", "path=big.bin",
                                       f"{base}/sessions/{sid}/files"])
            assert code == 201, code
            res["put"].append(size / tt)
            code, tt, _, down = self.curl([f"{base}/sessions/{sid}/files?path=big.bin"])
            assert code == 200 and int(down) == size, (code, down)
            res["get"].append(size / tt)
            code, tt, _, down = self.curl([f"{peer}/bench/static"])
            assert code == 200 and int(down) == size, (code, down)
            res["static"].append(size / tt)
            code, tt, up, _ = metered("relay_put", "relay", "fcgi_fixed",
                                      ["-F", f"file=@{src};filename=big.bin", "-F", "path=big.bin",
                                       f"{peer}/sessions/x/files"])
            assert code == 200, code
            res["relay_put"].append(size / tt)
        after = {k: proc_status(pids[k]) for k in ("paddock-sessiond", "paddock-fcgi")}
        self.http.destroy(sid)
        med = {k: sorted(v)[len(v) // 2] / 2 ** 20 for k, v in res.items()}
        self.extra["files"] = {"mib_per_s": res, "rss_before": before, "rss_after": after}
        mem = "; ".join(f"{k.replace('paddock-', '')} RSS {before[k].get('VmRSS', 0) / 1024:.1f}->"
                        f"{after[k].get('VmRSS', 0) / 1024:.1f} MiB (peak {after[k].get('VmHWM', 0) / 1024:.1f})"
                        for k in before)
        self.add_row(row="5", what=f"PutFile {a.file_mib} MiB via nginx", unit="MiB/s",
                     n=a.file_rounds, median=med["put"], p99=None, peer="nginx static GET (cat)",
                     peer_median=med["static"], ratio_median=med["put"] / med["static"],
                     target=">= 0.5x cat; memory flat", errors=0, note=mem)
        self.add_row(row="5", what=f"GetFile {a.file_mib} MiB via nginx", unit="MiB/s",
                     n=a.file_rounds, median=med["get"], p99=None, peer="nginx static GET (cat)",
                     peer_median=med["static"], ratio_median=med["get"] / med["static"],
                     target=">= 0.5x cat", errors=0)
        self.add_row(row="5a", what="  peer: nginx static file GET", unit="MiB/s", n=a.file_rounds,
                     median=med["static"], p99=None)
        # Each round's upload and its peer's run back to back: their ratio, round by round,
        # moves less with the machine's drift than the ratio of the two medians.
        paired = sorted(p / r for p, r in zip(res["put"], res["relay_put"]))
        self.add_row(row="5b", what="  peer: same upload to fcgi_fixed (reads, discards)", unit="MiB/s",
                     n=a.file_rounds, median=med["relay_put"], p99=None,
                     note=f"PutFile / this = {med['put'] / med['relay_put']:.2f} (medians), "
                          f"{paired[len(paired) // 2]:.2f} (median of the rounds' ratios, "
                          f"{paired[0]:.2f} to {paired[-1]:.2f})")
        per = {k: {w: v / a.file_rounds * 1e3 for w, v in c.items()} for k, c in cpu.items()}
        self.extra["files"]["cpu_ms_per_put"] = per
        for what, w, peer in (("paddock-fcgi", "worker", "fcgi_fixed"), ("nginx", "nginx", "nginx (relay)")):
            self.add_row(row="5c", what=f"  CPU per PutFile: {what}", unit="ms", n=a.file_rounds,
                         median=per["put"][w], p99=None, peer=peer, peer_median=per["relay_put"][w],
                         ratio_median=per["put"][w] / per["relay_put"][w] if per["relay_put"][w] else None)

    # -- row 8: workspace I/O

    WS_WRITE = ("s=$(date +%s%N); dd if=/dev/zero of={path} bs=1M count={mib} conv=fsync "
                "status=none; e=$(date +%s%N); echo $((e - s))")
    WS_READ = "s=$(date +%s%N); dd if={path} of=/dev/null bs=1M status=none; e=$(date +%s%N); echo $((e - s))"

    def ws_io_in_session(self, h, sid, mib):
        """Seconds to write mib MiB (fsync'd) in the session's workspace, and to read it
        back with the host's page cache dropped."""
        def run(cmd):
            body = json.loads(h.exec(sid, {"tool": "bash_code_execution", "input": {"command": cmd}}))
            content = body["result_block"]["content"]
            assert content["return_code"] == 0, content
            out = content["stdout"].strip()
            return int(out) / 1e9 if out else None
        w = run(self.WS_WRITE.format(path="/workspace/io", mib=mib))
        drop_caches()
        r = run(self.WS_READ.format(path="/workspace/io"))
        run("rm -f /workspace/io")
        return w, r

    def ws_io_on_host(self, path, mib):
        def run(cmd):
            return int(subprocess.run(["bash", "-c", cmd], capture_output=True, text=True,
                                      check=True).stdout.strip()) / 1e9
        w = run(self.WS_WRITE.format(path=path, mib=mib))
        drop_caches()
        r = run(self.WS_READ.format(path=path))
        os.unlink(path)
        return w, r

    def ws_creates(self, ht):
        """CreateSession from a full pool, paced (what the pool is for), alternated between
        the stack as configured and the tmpfs one: the pool hides the workspace's cost, or
        not. Then cold creates on two stacks without a pool: the build's cost itself."""
        n = self.args.ws_creates
        out = {"pooled disk": [], "pooled tmpfs": [], "cold disk": [], "cold tmpfs": []}

        def timed(h, key):
            t0 = time.monotonic_ns()
            sid = h.create()
            out[key].append(time.monotonic_ns() - t0)
            h.destroy(sid)

        for _ in range(n):
            for h, key in ((self.http, "pooled disk"), (ht, "pooled tmpfs")):
                timed(h, key)
                time.sleep(0.1)  # the refill finishes: every create finds the pool full
        cold = {b: self.new_stack(f"bench-ws-cold-{b}", {"PADDOCK_WORKSPACE_BACKEND": b,
                                                         "PADDOCK_POOL_SIZE": "0",
                                                         "PADDOCK_LOG_LEVEL": "info"})
                for b in ("disk", "tmpfs")}
        try:
            hs = {b: Http(st.port) for b, st in cold.items()}
            for _ in range(n):
                for b in ("disk", "tmpfs"):
                    timed(hs[b], f"cold {b}")
            for h in hs.values():
                h.close()
        finally:
            for b, st in cold.items():
                for p in st.stop():
                    self.stop_problems.append(f"cold {b} stack: {p}")
        return out

    def ws_create_rows(self, c):
        ms = 1e3
        for kind in ("pooled", "cold"):
            d, t = stats_us(c[f"{kind} disk"]), stats_us(c[f"{kind} tmpfs"])
            what = "from a full pool, paced" if kind == "pooled" else "no pool (a build each)"
            self.add_row(row="8c", what=f"CreateSession {what}, disk workspace", unit="ms",
                         n=d["n"], median=d["median"] / ms, p99=d["p99"] / ms,
                         peer="same, tmpfs workspace", peer_median=t["median"] / ms,
                         peer_p99=t["p99"] / ms, ratio_median=d["median"] / t["median"],
                         ratio_p99=d["p99"] / t["p99"], errors=0)

    def row_workspace_io(self):
        """Workspace throughput: a session's /workspace on disk (the stack as configured) and
        on tmpfs, against the same dd in the state directory outside any sandbox."""
        a = self.args
        mib = a.ws_mib
        self.section(f"8. workspace I/O: {mib} MiB written (fsync) and read back cold, "
                     f"{a.ws_rounds} rounds, against the state dir's file system")
        tmpfs = self.new_stack("bench-ws-tmpfs", {"PADDOCK_WORKSPACE_BACKEND": "tmpfs",
                                                  "PADDOCK_LOG_LEVEL": "info"})
        try:
            ht = Http(tmpfs.port)
            sid, sid_t = self.http.create(), ht.create()
            host_path = os.path.join(self.stack.state_dir, "bench-io")
            res = {k: ([], []) for k in ("disk", "tmpfs", "host")}
            for _ in range(a.ws_rounds):
                for key, fn in (("disk", lambda: self.ws_io_in_session(self.http, sid, mib)),
                                ("tmpfs", lambda: self.ws_io_in_session(ht, sid_t, mib)),
                                ("host", lambda: self.ws_io_on_host(host_path, mib))):
                    w, r = fn()
                    res[key][0].append(mib / w)
                    res[key][1].append(mib / r)
            self.http.destroy(sid)
            ht.destroy(sid_t)
            creates = self.ws_creates(ht)
            ht.close()
        finally:
            for p in tmpfs.stop():
                self.stop_problems.append(f"tmpfs workspace stack: {p}")
        self.ws_create_rows(creates)
        med = {k: (sorted(w)[len(w) // 2], sorted(r)[len(r) // 2]) for k, (w, r) in res.items()}
        self.extra["workspace_io"] = {k: {"write_mib_s": w, "read_mib_s": r} for k, (w, r) in res.items()}
        for i, op in enumerate(("write", "read")):
            self.add_row(row="8", what=f"workspace {op}, disk (ext4 on a loop device)", unit="MiB/s",
                         n=a.ws_rounds, median=med["disk"][i], p99=None, peer="state dir, no sandbox",
                         peer_median=med["host"][i], ratio_median=med["disk"][i] / med["host"][i],
                         target=">= 0.7x the state dir", errors=0)
            self.add_row(row="8", what=f"  workspace {op}, tmpfs (workspace_backend = tmpfs)",
                         unit="MiB/s", n=a.ws_rounds, median=med["tmpfs"][i], p99=None,
                         peer="state dir, no sandbox", peer_median=med["host"][i],
                         ratio_median=med["tmpfs"][i] / med["host"][i], errors=0)

    # -- row 6: callgrind

    def row_code_tiers(self):
        import code_tiers as ct
        a = self.args
        self.section(f"7. code plane per tier: one-off 1+1 cold and warm, 1+1 in a session "
                     f"({a.code_n} each), against a plain ipykernel via jupyter_client")
        tiers = [("python", "native", {"AIO_CODE_BACKEND": "native"}, "AIO_CODE_PREWARM"),
                 ("python", "kernel", {"AIO_CODE_BACKEND": "kernel"}, "AIO_KERNEL_PREWARM"),
                 ("javascript", "node", {}, None)]
        # The endpoint tier, against Debian's jupyter-server on loopback when it is installed.
        import jupyter_endpoint as je
        jserver = None
        if je.missing() is None:
            jserver = je.JupyterServer().start()
            tiers.append(("python", "endpoint", {"AIO_JUPYTER_ENDPOINT": jserver.endpoint},
                          "AIO_CODE_PREWARM"))
        starts, execs, plots = ct.plain_ipykernel(max(3, a.code_n // 5), a.code_n,
                                                  max(3, a.code_n // 5))
        ks, ke, kp = ct.summary_ms(starts), ct.summary_ms(execs), ct.summary_ms(plots)
        self.add_row(row="7", what="plain ipykernel: start to first 1+1", unit="ms", n=ks["n"],
                     median=ks["median"], p99=ks["p99"], note="jupyter_client, no sandbox")
        self.add_row(row="7", what="plain ipykernel: 1+1", unit="ms", n=ke["n"],
                     median=ke["median"], p99=ke["p99"])
        self.add_row(row="7", what="plain ipykernel: the matplotlib plot, warm kernel", unit="ms",
                     n=kp["n"], median=kp["median"], p99=kp["p99"],
                     note="the one-off rows' plot, after one plot in the same kernel")
        try:
            for lang, tier, env, prewarm in tiers:
                base = {"PADDOCK_LOG_LEVEL": "info", "PADDOCK_POOL_SIZE": "0"}
                base.update(env)
                cold_stack = self.new_stack(f"bench-{tier}-cold", base)
                try:
                    cold = ct.summary_ms(ct.one_offs(cold_stack.port, lang, max(3, a.code_n // 5)))
                    ex = ct.summary_ms(ct.in_session(cold_stack.port, lang, a.code_n))
                finally:
                    for p in cold_stack.stop():
                        self.stop_problems.append(f"{tier} stack: {p}")
                warm = plot = None
                if prewarm:
                    wenv = dict(base)
                    wenv[prewarm] = "1"
                    warm_stack = self.new_stack(f"bench-{tier}-warm", wenv)
                    try:
                        def settle(st=warm_stack):
                            # Ready: the warm interpreter has answered its first request.
                            deadline = time.monotonic() + 120
                            while self.stats(st).get("pool_started", 0) < 1:
                                assert time.monotonic() < deadline, "the pool did not refill"
                                time.sleep(0.01)
                        warm = ct.summary_ms(ct.one_offs(warm_stack.port, lang,
                                                         max(3, a.code_n // 5), settle))
                        if tier == "kernel":  # figures are the kernel tier's
                            plot = ct.summary_ms(ct.one_offs(warm_stack.port, lang,
                                                             max(3, a.code_n // 5), settle,
                                                             plot=True))
                    finally:
                        for p in warm_stack.stop():
                            self.stop_problems.append(f"{tier} warm stack: {p}")
                self.add_row(row="7", what=f"{tier}: one-off 1+1, cold", unit="ms", n=cold["n"],
                             note="timed once the worker's runtime probe is done (bench/README.md)",
                             median=cold["median"], p99=cold["p99"],
                             peer="plain ipykernel start", peer_median=ks["median"],
                             ratio_median=cold["median"] / ks["median"])
                if warm:
                    self.add_row(row="7", what=f"{tier}: one-off 1+1, warm pool", unit="ms",
                                 n=warm["n"], median=warm["median"], p99=warm["p99"],
                                 peer="plain ipykernel start", peer_median=ks["median"],
                                 ratio_median=warm["median"] / ks["median"],
                                 target="<= 20 ms" if tier in ("native", "kernel") else None)
                if plot:
                    self.add_row(row="7", what=f"{tier}: one-off matplotlib plot, warm pool",
                                 unit="ms", n=plot["n"], median=plot["median"], p99=plot["p99"],
                                 peer="plain ipykernel plot, warm kernel",
                                 peer_median=kp["median"], peer_p99=kp["p99"],
                                 ratio_median=plot["median"] / kp["median"],
                                 ratio_p99=plot["p99"] / kp["p99"],
                                 target="<= 50 ms",
                                 note="plt.plot of three points and plt.show(); its PNG back "
                                      "as display_data")
                self.add_row(row="7", what=f"{tier}: 1+1 in a session", unit="ms", n=ex["n"],
                             median=ex["median"], p99=ex["p99"], peer="plain ipykernel 1+1",
                             peer_median=ke["median"], peer_p99=ke["p99"],
                             ratio_median=ex["median"] / ke["median"],
                             ratio_p99=ex["p99"] / ke["p99"],
                             target="kernel tier median <= 1.5x" if tier == "kernel" else None)
        finally:
            if jserver:
                jserver.stop()

    def row_callgrind(self):
        a = self.args
        self.section("6. callgrind: instructions per print(1) exec inside sessiond and inside the worker")
        self.cg_regressed = False
        for target, program in (("sessiond", "sessiond"), ("fcgi", "paddock-fcgi")):
            out = os.path.join(self.tmp, f"cg-{target}.json")
            cmd = [sys.executable, os.path.join(HERE, "callgrind_check.py"), "--build", a.build,
                   "--bench-bin", self.bin, "--execs", str(a.cg_execs), "--target", target,
                   "--json", out]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
            sys.stdout.write(r.stdout)
            if r.returncode not in (0, 1):
                print(r.stderr)
                self.add_row(row="6", what=f"callgrind check of {program}", unit="Ir", n=0, median=None,
                             p99=None, errors=1, note="the check failed to run: " + r.stderr.strip()[-300:])
                continue
            with open(out, encoding="utf-8") as f:
                cg = json.load(f)
            self.extra["callgrind" if target == "sessiond" else f"callgrind_{target}"] = cg
            self.add_row(row="6", what=f"{program} instructions per exec (callgrind)", unit="Ir",
                         n=cg["execs"], median=cg["per_exec"], p99=None, peer="baseline",
                         peer_median=cg.get("baseline"), ratio_median=cg.get("ratio"),
                         target=f"<= {1 + cg['threshold']:.2f}x baseline", errors=0,
                         verdict_ok=cg["ok"], note=cg.get("note", ""))
            self.cg_regressed = self.cg_regressed or not cg["ok"]


# ---------------------------------------------------------------------------
# Output.

def fmt(v, unit):
    if v is None:
        return "-"
    if isinstance(v, float) and v != v:
        return "nan"
    if unit == "Ir":
        return f"{v:,.0f}"
    if unit == "us":
        return f"{v:.0f}"
    if abs(v) >= 100:
        return f"{v:.0f}"
    return f"{v:.2f}"


def fmt_ratio(v):
    return "-" if v is None else f"{v:.2f}x"


def format_row(r):
    u = r.get("unit", "")
    s = f"  {r['what']:<52} {fmt(r.get('median'), u):>10} {fmt(r.get('p99'), u):>10} {u:<6}"
    if r.get("peer_median") is not None:
        s += (f" | {r.get('peer', ''):<26} {fmt(r.get('peer_median'), u):>9} "
              f"{fmt(r.get('peer_p99'), u):>9}  ratio {fmt_ratio(r.get('ratio_median'))}"
              f" / {fmt_ratio(r.get('ratio_p99'))}")
    if r.get("errors"):
        s += f"  ERRORS {r['errors']}"
    return s


def markdown(bench, started, problems, plot_name=None):
    m = bench.machine
    lines = [f"# paddock bench, {started}", "",
             f"Machine: {m['nproc']} CPUs, {m['model']}, kernel {m['kernel']}, {m['mem_total_mib']} MiB; "
             f"Python {m['python']}; source {m['source']}, Release build.", "",
             "Every floor and peer was measured in this run, interleaved with the row it "
             "serves (rounds). Latencies are per request, sequential, keep-alive, one client (pdload). "
             "`load` is the 1-minute load average when the row was printed (the machine is shared).", ""]
    if bench.args.env:
        lines += ["Every stack ran with " + ", ".join(f"`{kv}`" for kv in bench.args.env) + ".", ""]
    lines += ["| row | what | median | p99 | unit | floor / peer | its median | its p99 | ratio median | "
              "ratio p99 | target | errors | load |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in bench.rows:
        u = r.get("unit", "")
        lines.append("| " + " | ".join([
            r["row"], r["what"].strip().replace("|", "\\|"), fmt(r.get("median"), u), fmt(r.get("p99"), u), u,
            r.get("peer", "") or "", fmt(r.get("peer_median"), u) if r.get("peer_median") is not None else "",
            fmt(r.get("peer_p99"), u) if r.get("peer_p99") is not None else "",
            fmt_ratio(r.get("ratio_median")) if r.get("ratio_median") is not None else "",
            fmt_ratio(r.get("ratio_p99")) if r.get("ratio_p99") is not None else "",
            r.get("target", "") or "", str(r.get("errors", "")), str(r.get("load", ""))]) + " |")
    notes = [f"- row {r['row']}, {r['what'].strip()}: {r['note']}" for r in bench.rows if r.get("note")]
    if notes:
        lines += ["", "Notes:", ""] + notes
    for key, program in (("callgrind", "sessiond"), ("callgrind_fcgi", "paddock-fcgi")):
        cg = bench.extra.get(key)
        if not cg or not cg.get("top"):
            continue
        lines += ["", f"Callgrind, {program}'s instructions per exec by function (self cost, "
                  "difference of a run with N execs and one with none, divided by N):", "",
                  "| Ir per exec | share | function |", "|---|---|---|"]
        for f in cg["top"][:15]:
            lines.append(f"| {f['per_exec']:,.0f} | {f['share'] * 100:.1f}% | `{f['fn']}` |")
    if problems:
        lines += ["", "Problems found when stopping the stack:", ""] + [f"- {p}" for p in problems]
    if plot_name:
        lines += ["", f"![the rows against their floors]({plot_name})"]
    return "\n".join(lines) + "\n"


def plot(bench, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is missing (scripts/deps.sh): no plot", file=sys.stderr)
        return False
    fig, axes = plt.subplots(2, 2, figsize=(14, 10))
    ax = axes[0][0]
    names = [k.split("|")[0] for k in bench.samples if k.endswith("|paddock")]
    parts = ["paddock", "harness", "relay", "return200"]
    width = 0.2
    for i, part in enumerate(parts):
        meds, p99s, xs = [], [], []
        for j, n in enumerate(names):
            s = bench.samples.get(f"{n}|{part}")
            if not s:
                continue
            st = stats_us(s)
            xs.append(j + (i - 1.5) * width)
            meds.append(st["median"])
            p99s.append(st["p99"])
        ax.bar(xs, meds, width, label=part)
        ax.scatter(xs, p99s, marker="_", color="black", s=200, zorder=3)
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names)
    if names:
        ax.set_yscale("log")
    ax.set_ylabel("µs (bar: median, dash: p99)")
    ax.set_title("1. sequential latency vs floors")
    ax.legend()
    ax = axes[0][1]
    for part in parts:
        s = bench.samples.get(f"python print(1)|{part}")
        if s:
            v = sorted(x / 1000 for x in s)
            ax.plot(v, [i / len(v) for i in range(len(v))], label=part)
    if bench.samples.get("python print(1)|paddock"):
        ax.set_xscale("log")
    ax.set_xlabel("µs")
    ax.set_title("print(1): latency CDF")
    ax.legend()
    ax = axes[1][0]
    labels, vals = [], []
    for r in bench.rows:
        if r["row"].startswith("3") or r["row"].startswith("5"):
            labels.append(f"{r['what'].strip()[:40]} ({r['unit']})")
            vals.append(r["median"] or 0)
    ax.barh(labels, vals)
    if any(v > 0 for v in vals):
        ax.set_xscale("log")
    ax.set_title("3. throughput (req/s) and 5. files (MiB/s)")
    ax = axes[1][1]
    labels, vals = [], []
    for key, label in (("create|pool", "create, pool"), ("create|paced", "create, pool,\npaced"),
                       ("create|cold", "create, no pool"),
                       ("first|cold", "first print(1), cold"),
                       ("python3 -I -c pass", "python3 -I -c pass"),
                       ("harness start + print(1)", "harness start\n+ print(1)")):
        if bench.samples.get(key):
            labels.append(label)
            vals.append(stats_us(bench.samples[key])["median"] / 1e3)
    ax.bar(labels, vals)
    ax.set_ylabel("ms (median)")
    ax.set_title("2. cold create vs interpreter start")
    m = bench.machine
    fig.suptitle(f"paddock bench: {m['nproc']} x {m['model']}, kernel {m['kernel']}")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(SOURCE_DIR, "build-bench"),
                    help="release build of paddock (paddock-sessiond, paddock-fcgi, lib/)")
    ap.add_argument("--bench-bin", help="where pdload, fcgi_fixed, vg_shim.so are (default BUILD/bench)")
    ap.add_argument("--out-dir", help="where every run's files go (default BUILD/bench-results)")
    ap.add_argument("--name", help="results file name (default <date>_<time>_<kernel>, UTC)")
    ap.add_argument("--rows", default=ALL_ROWS, help="comma-separated rows to run")
    ap.add_argument("--latest", action=argparse.BooleanOptionalAction, default=None,
                    help=f"replace {os.path.relpath(LATEST_DIR, SOURCE_DIR)}/latest.{{md,json,png}} "
                    "(default: when every row ran)")
    ap.add_argument("--code-n", type=int, default=50, help="row 7: runs per measurement")
    ap.add_argument("-n", type=int, default=2000, help="row 1: requests per measurement per round")
    ap.add_argument("--seconds", type=float, default=10, help="row 1: time bound per measurement")
    ap.add_argument("--rounds", type=int, default=3, help="row 1: interleaved rounds")
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--creates", type=int, default=40, help="row 2: create/destroy cycles")
    ap.add_argument("--paced-rate", type=float, default=10,
                    help="row 2p: creates per second of the paced create cycles")
    ap.add_argument("--pool-size", type=int, help="pool_size of the main stack (default: paddock's)")
    ap.add_argument("--env", action="append", default=[], metavar="PADDOCK_KEY=VALUE",
                    help="a setting for every stack the bench starts, over the row's own")
    ap.add_argument("--refill", type=int, default=40, help="row 2r: warm sandboxes taken at once")
    ap.add_argument("--sessions", type=int, default=32, help="row 3: sessions and clients")
    ap.add_argument("--tput-seconds", type=int, default=10)
    ap.add_argument("--tput-rounds", type=int, default=3)
    ap.add_argument("--density", type=int, default=200, help="row 4: idle Python sessions")
    ap.add_argument("--density-timeout", type=int, default=600)
    ap.add_argument("--file-mib", type=int, default=100)
    ap.add_argument("--file-rounds", type=int, default=9)
    ap.add_argument("--cg-execs", type=int, default=50, help="row 6: execs under callgrind")
    ap.add_argument("--ws-mib", type=int, default=256, help="row 8: MiB written and read")
    ap.add_argument("--ws-rounds", type=int, default=3, help="row 8: rounds")
    ap.add_argument("--ws-creates", type=int, default=40, help="row 8c: creates per kind")
    args = ap.parse_args()
    args.build = os.path.abspath(args.build)
    args.bench_bin = os.path.abspath(args.bench_bin or os.path.join(args.build, "bench"))
    args.out_dir = os.path.abspath(args.out_dir or os.path.join(args.build, "bench-results"))
    rows = set(args.rows.split(","))
    if args.latest is None:
        args.latest = rows >= set(ALL_ROWS.split(","))
    if os.geteuid() != 0:
        sys.exit("run_bench.py: run as root (sessiond needs it)")

    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    bench = Bench(args)
    bench.cg_regressed = False
    problems = []
    print(f"paddock bench: {machine_line(bench.machine)}; load {load()}", flush=True)
    t0 = time.monotonic()
    try:
        bench.start()
        for key, fn in (("1", bench.row_latency), ("2", bench.row_create), ("2i", bench.row_first_import),
                        ("2r", bench.row_refill), ("3", bench.row_throughput),
                        ("4", bench.row_density), ("5", bench.row_files), ("6", bench.row_callgrind),
                        ("7", bench.row_code_tiers), ("8", bench.row_workspace_io)):
            if key in rows:
                fn()
    finally:
        problems = bench.stop()
    elapsed = time.monotonic() - t0

    os.makedirs(args.out_dir, exist_ok=True)
    # Date and time (UTC): a second run the same day does not replace the first.
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d_%H%M")
    name = args.name or f"{stamp}_{bench.machine['kernel']}"
    base = os.path.join(args.out_dir, name)
    plotted = plot(bench, base + ".png")
    with open(base + ".md", "w", encoding="utf-8") as f:
        f.write(markdown(bench, started, problems, os.path.basename(base) + ".png" if plotted else None))
    with open(base + ".json", "w", encoding="utf-8") as f:
        json.dump({"started": started, "elapsed_s": elapsed, "machine": bench.machine, "args": vars(args),
                   "rows": bench.rows, "extra": bench.extra, "problems": problems,
                   "samples_summary": {k: stats_us(v) for k, v in bench.samples.items()}}, f, indent=1)
    print(f"\nwrote {base}.md, {base}.json{', ' + base + '.png' if plotted else ''} in {elapsed:.0f} s")
    if args.latest:
        latest = os.path.join(LATEST_DIR, "latest")
        os.makedirs(LATEST_DIR, exist_ok=True)
        with open(latest + ".md", "w", encoding="utf-8") as f:
            f.write(markdown(bench, started, problems, "latest.png" if plotted else None))
        shutil.copyfile(base + ".json", latest + ".json")
        if plotted:
            shutil.copyfile(base + ".png", latest + ".png")
        elif os.path.exists(latest + ".png"):
            os.unlink(latest + ".png")  # an older run's plot would pass for this one's
        print(f"replaced {latest}.{{md,json{',png' if plotted else ''}}}")
    for p in problems:
        print(f"stack: {p}")
    bad = [r for r in bench.rows if r.get("errors")]
    if bench.cg_regressed:
        print("REGRESSION: instructions per exec above the callgrind baseline's threshold")
    if bad:
        print("ERRORS in rows: " + ", ".join(r["what"].strip() for r in bad))
    return 1 if (bench.cg_regressed or bad or problems) else 0


if __name__ == "__main__":
    sys.exit(main())
