#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Instruction-count guard: instructions per print(1) exec in paddock's own processes, under
callgrind: paddock-sessiond (--target sessiond, the default) or paddock-fcgi (--target fcgi).

Each target runs twice under valgrind --tool=callgrind: create a session, warm it with a few
execs, then run N execs (second run) or none (first run), destroy it, stop. The difference of
the two totals divided by N is the cost of one exec in that program (and the libraries it
calls); everything else runs natively. Per-function self costs are diffed the same way.

- sessiond: driven over its socket with tests/integration/proto_client.py. valgrind 3.19
  lacks clone3, openat2 and pidfd_send_signal: bench/vg_shim.so (LD_PRELOAD) maps them to
  older calls for this run only (see its header).
- fcgi: a native sessiond behind it; the worker is started as the paddock user (so callgrind
  can write its output after the worker would have dropped root) and driven over its FastCGI
  socket by the small client below, with the request nginx would send for
  POST /sessions/{id}/exec: no nginx in the count.

Compares with bench/callgrind_baseline.json (sessiond) or bench/callgrind_baseline_fcgi.json
(fcgi) and exits 1 when the count exceeds the baseline by more than its threshold (10%).
--update-baseline records the current count.
Exit status: 0 ok (or no baseline yet), 1 regression, 2 the check could not run.
"""

import argparse
import datetime
import json
import os
import platform
import pwd
import re
import secrets
import shutil
import socket
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.path.dirname(HERE)
BASELINES = {"sessiond": os.path.join(HERE, "callgrind_baseline.json"),
             "fcgi": os.path.join(HERE, "callgrind_baseline_fcgi.json")}
sys.path.insert(0, os.path.join(SOURCE_DIR, "tests", "integration"))
from proto_client import SessiondClient  # noqa: E402
from procs import stop_process, wait_connectable  # noqa: E402

WARM_EXECS = 3
EXEC = {"op": "exec", "tool": "python", "code": "print(1)", "timeout_ms": 60000}
HTTP_EXEC = {"tool": "code_execution", "input": {"code": "print(1)"}}
START_S = 120   # seconds for a program to open its socket
STOP_S = 120    # seconds for it to exit after SIGTERM (callgrind writes its output then)


def make_state():
    """A state dir with run/ as paddock_stack makes it, and the daemons' environment."""
    state = tempfile.mkdtemp(prefix="paddock-bench-cg-")
    os.chmod(state, 0o755)
    run = os.path.join(state, "run")
    os.makedirs(run)
    pw = pwd.getpwnam("paddock")
    os.chown(run, 0, pw.pw_gid)
    os.chmod(run, 0o770)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PADDOCK_")}
    env.update({"PADDOCK_STATE_DIR": state, "PADDOCK_RUNTIME_DIR": run,
                "PADDOCK_NODE_NAME": "cg" + secrets.token_hex(4),
                "PADDOCK_UID_BASE": str(300000 + secrets.randbelow(4000) * 4096),
                "PADDOCK_LOG_LEVEL": "info"})
    return state, run, env


def start(argv, env, log_path):
    with open(log_path, "ab") as log:
        return subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                start_new_session=True)


def create_session(sock):
    """A session over sessiond's socket: (client, session id)."""
    c = SessiondClient(sock, timeout=120)
    reply, _ = c.call({"op": "create"})
    if not reply.get("ok"):
        raise RuntimeError(f"create failed: {reply}")
    return c, reply["session_id"]


def exec_checked(c, sid, i):
    reply, _ = c.call(dict(EXEC, session_id=sid))
    if not reply.get("ok") or reply.get("stdout") != "1\n":
        raise RuntimeError(f"exec {i} failed: {reply}")


class FcgiClient:
    """Just enough FastCGI (responder role, kept connection) to send requests as nginx does."""

    BEGIN, END, PARAMS, STDIN, STDOUT, STDERR = 1, 3, 4, 5, 6, 7
    KEEP_CONN = 1

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(120)
        self.sock.connect(path)

    def close(self):
        self.sock.close()

    @staticmethod
    def record(kind, content, req_id=1):
        return struct.pack(">BBHHBx", 1, kind, req_id, len(content), 0) + content

    @staticmethod
    def pair(name, value):
        def length(n):
            return bytes([n]) if n < 128 else struct.pack(">I", n | 0x80000000)
        return length(len(name)) + length(len(value)) + name + value

    def _recv_exact(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise RuntimeError("the worker closed the FastCGI connection")
            buf += chunk
        return buf

    def request(self, method, uri, body):
        params = {"REQUEST_METHOD": method, "REQUEST_URI": uri, "DOCUMENT_URI": uri,
                  "QUERY_STRING": "", "CONTENT_TYPE": "application/json",
                  "CONTENT_LENGTH": str(len(body)), "SERVER_PROTOCOL": "HTTP/1.1",
                  "GATEWAY_INTERFACE": "CGI/1.1", "REMOTE_ADDR": "127.0.0.1",
                  "REQUEST_ID": secrets.token_hex(16), "HTTP_X_PADDOCK_TENANT": ""}
        enc = b"".join(self.pair(k.encode(), v.encode()) for k, v in params.items())
        out = self.record(self.BEGIN, struct.pack(">HB5x", 1, self.KEEP_CONN))
        out += self.record(self.PARAMS, enc) + self.record(self.PARAMS, b"")
        if body:
            out += self.record(self.STDIN, body)
        out += self.record(self.STDIN, b"")
        self.sock.sendall(out)
        stdout = b""
        while True:
            _, kind, _, clen, plen = struct.unpack(">BBHHBx", self._recv_exact(8))
            content = self._recv_exact(clen + plen)[:clen]
            if kind == self.STDOUT:
                stdout += content
            elif kind == self.END:
                break
        head, _, payload = stdout.partition(b"\r\n\r\n")
        m = re.search(rb"^Status: (\d+)", head, re.M)
        return (int(m.group(1)) if m else 200), payload


def run_sessiond(build, bench_bin, execs):
    """sessiond under callgrind, driven over its socket."""
    state, run, env = make_state()
    env.update({"PADDOCK_LIB_DIR": os.path.join(build, "lib"),
                "LD_PRELOAD": os.path.join(bench_bin, "vg_shim.so")})
    out = os.path.join(state, "callgrind.out.%p")
    log = os.path.join(state, "sessiond.log")
    p = start(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
               os.path.join(build, "paddock-sessiond"), "--no-kernel-probes"], env, log)
    try:
        sock = os.path.join(run, "sessiond.sock")
        wait_connectable(socket.AF_UNIX, sock, p, "sessiond under valgrind", START_S)
        c, sid = create_session(sock)
        for i in range(WARM_EXECS + execs):
            exec_checked(c, sid, i)
        c.call({"op": "destroy", "session_id": sid})
        c.close()
    except BaseException:
        with open(log, "rb") as f:
            sys.stderr.write(f.read()[-3000:].decode("utf-8", "replace"))
        raise
    finally:
        stop_process(p, STOP_S)
    return finish(state, os.path.join(state, f"callgrind.out.{p.pid}"))


def run_fcgi(build, bench_bin, execs):
    """paddock-fcgi under callgrind, a native sessiond behind it, driven over FastCGI."""
    del bench_bin  # the worker makes none of the calls valgrind lacks
    state, run, env = make_state()
    env["PADDOCK_LIB_DIR"] = os.path.join(build, "lib")
    pw = pwd.getpwnam("paddock")
    cg_dir = os.path.join(state, "cg")
    os.makedirs(cg_dir)
    os.chown(cg_dir, pw.pw_uid, pw.pw_gid)
    sd_log, w_log = os.path.join(state, "sessiond.log"), os.path.join(state, "fcgi.log")
    sd = start([os.path.join(build, "paddock-sessiond")], env, sd_log)
    w = None
    try:
        sd_sock, w_sock = os.path.join(run, "sessiond.sock"), os.path.join(run, "fcgi.sock")
        wait_connectable(socket.AF_UNIX, sd_sock, sd, "sessiond", START_S)
        w = start(["setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--init-groups",
                   "valgrind", "--tool=callgrind",
                   f"--callgrind-out-file={os.path.join(cg_dir, 'callgrind.out.%p')}",
                   os.path.join(build, "paddock-fcgi"), "--socket", w_sock], env, w_log)
        wait_connectable(socket.AF_UNIX, w_sock, w, "paddock-fcgi under valgrind", START_S)
        c, sid = create_session(sd_sock)
        f = FcgiClient(w_sock)
        body = json.dumps(HTTP_EXEC).encode()
        for i in range(WARM_EXECS + execs):
            status, payload = f.request("POST", f"/sessions/{sid}/exec", body)
            if status != 200 or b'"stdout":"1\\n"' not in payload:
                raise RuntimeError(f"exec {i} through the worker failed: {status} {payload[:300]!r}")
        f.close()
        c.call({"op": "destroy", "session_id": sid})
        c.close()
    except BaseException:
        for log in (sd_log, w_log):
            with open(log, "rb") as fh:
                sys.stderr.write(fh.read()[-2000:].decode("utf-8", "replace"))
        raise
    finally:
        if w:
            stop_process(w, STOP_S)
        stop_process(sd, STOP_S)
    return finish(state, os.path.join(cg_dir, f"callgrind.out.{w.pid}"))


def finish(state, path):
    keep = os.environ.get("PADDOCK_CALLGRIND_KEEP")
    try:
        if keep:  # the raw profile, for callgrind_annotate --tree=caller
            shutil.copy(path, keep)
        return parse(path)
    finally:
        shutil.rmtree(state, ignore_errors=True)


def parse(path):
    """Total Ir and {function: self Ir} from callgrind_annotate."""
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    m = re.search(r"^(?:summary|totals):\s+(\d+)", text, re.M)
    total = int(m.group(1)) if m else 0
    r = subprocess.run(["callgrind_annotate", "--inclusive=no", "--threshold=100", path],
                       capture_output=True, text=True, check=True)
    fns = {}
    for line in r.stdout.splitlines():
        m = re.match(r"^\s*([\d,]+)\s+(?:\([^)]*\)\s+)*(\S.*?)(?:\s+\[.*\])?$", line)
        if m and ":" in m.group(2):
            fn = m.group(2)
            fns[fn] = fns.get(fn, 0) + int(m.group(1).replace(",", ""))
    return total, fns


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(SOURCE_DIR, "build-bench"))
    ap.add_argument("--bench-bin")
    ap.add_argument("--execs", type=int, default=50)
    ap.add_argument("--json", help="write the result here")
    ap.add_argument("--update-baseline", action="store_true")
    ap.add_argument("--threshold", type=float, default=0.10)
    ap.add_argument("--target", choices=sorted(BASELINES), default="sessiond",
                    help="the program counted")
    args = ap.parse_args()
    run_once = run_fcgi if args.target == "fcgi" else run_sessiond
    baseline_path = BASELINES[args.target]
    program = "paddock-fcgi" if args.target == "fcgi" else "sessiond"
    args.build = os.path.abspath(args.build)
    bench_bin = os.path.abspath(args.bench_bin or os.path.join(args.build, "bench"))
    if not shutil.which("valgrind"):
        print("callgrind_check: valgrind is not installed (scripts/deps.sh)", file=sys.stderr)
        return 2
    try:
        t0, f0 = run_once(args.build, bench_bin, 0)
        t1, f1 = run_once(args.build, bench_bin, args.execs)
    except (RuntimeError, OSError, subprocess.SubprocessError) as e:
        print(f"callgrind_check: {e}", file=sys.stderr)
        return 2
    per_exec = (t1 - t0) / args.execs
    diff = {fn: (f1.get(fn, 0) - f0.get(fn, 0)) / args.execs for fn in set(f0) | set(f1)}
    top = sorted(((v, fn) for fn, v in diff.items() if v > 0), reverse=True)[:25]
    result = {"target": args.target, "execs": args.execs, "per_exec": per_exec, "total_without": t0, "total_with": t1,
              "threshold": args.threshold,
              "top": [{"fn": fn, "per_exec": v, "share": v / per_exec if per_exec else 0} for v, fn in top]}
    vg = subprocess.run(["valgrind", "--version"], capture_output=True, text=True).stdout.strip()
    baseline = None
    if os.path.exists(baseline_path):
        with open(baseline_path, encoding="utf-8") as f:
            baseline = json.load(f)
    if args.update_baseline:
        baseline = {"per_exec": round(per_exec), "threshold": args.threshold, "execs": args.execs,
                    "recorded": datetime.date.today().isoformat(), "valgrind": vg,
                    "kernel": platform.release(), "build": "Release",
                    "source": os.environ.get("PADDOCK_BENCH_SOURCE") or subprocess.run(
                        ["git", "-C", SOURCE_DIR, "describe", "--always", "--dirty"],
                        capture_output=True, text=True).stdout.strip(),
                    "note": f"{program}'s instructions per print(1) exec (callgrind_check.py "
                            f"--target {args.target}); refresh with --update-baseline after an "
                            "intended change"}
        with open(baseline_path, "w", encoding="utf-8") as f:
            json.dump(baseline, f, indent=1)
            f.write("\n")
    if baseline:
        threshold = baseline.get("threshold", args.threshold)
        result.update(baseline=baseline["per_exec"], ratio=per_exec / baseline["per_exec"],
                      threshold=threshold)
        result["ok"] = result["ratio"] <= 1 + threshold
        result["note"] = (f"baseline recorded {baseline.get('recorded')} with {baseline.get('valgrind')}; "
                          f"{'within' if result['ok'] else 'ABOVE'} +{threshold * 100:.0f}%")
    else:
        result.update(baseline=None, ratio=None, ok=True,
                      note=f"no baseline yet: run bench/callgrind_check.py --target {args.target} "
                           "--update-baseline")
    print(f"  callgrind: {per_exec:,.0f} instructions per exec in {program} "
          f"({args.execs} execs; {t1:,} - {t0:,} total)")
    if baseline:
        print(f"  baseline {baseline['per_exec']:,}: ratio {result['ratio']:.3f} "
              f"({'ok' if result['ok'] else 'REGRESSION'}, threshold +{result['threshold'] * 100:.0f}%)")
    print("  top functions by self cost per exec:")
    for f in result["top"][:12]:
        print(f"    {f['per_exec']:>12,.0f}  {f['share'] * 100:5.1f}%  {f['fn']}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
