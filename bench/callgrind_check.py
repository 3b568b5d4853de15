#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Instruction-count guard: paddock-sessiond's instructions per print(1) exec, under callgrind.

Runs paddock-sessiond (release build) under valgrind --tool=callgrind twice, driven over its
socket with tests/integration/proto_client.py: create a session, warm it with a few execs,
then run N execs (second run) or none (first run), destroy it, stop. The difference of the
two totals divided by N is the cost of one exec in sessiond's own code (the interpreter runs
natively, outside valgrind). Per-function self costs are diffed the same way.

valgrind 3.19 lacks clone3, openat2 and pidfd_send_signal: bench/vg_shim.so (LD_PRELOAD)
maps them to older calls for this run only (see its header).

Compares with bench/callgrind_baseline.json and exits 1 when the count exceeds the baseline
by more than its threshold (10%). --update-baseline records the current count.
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
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.path.dirname(HERE)
BASELINE = os.path.join(HERE, "callgrind_baseline.json")
sys.path.insert(0, os.path.join(SOURCE_DIR, "tests", "integration"))
from proto_client import SessiondClient  # noqa: E402

WARM_EXECS = 3
EXEC = {"op": "exec", "tool": "python", "code": "print(1)", "timeout_ms": 60000}


def run_once(build, bench_bin, execs):
    state = tempfile.mkdtemp(prefix="paddock-bench-cg-")
    os.chmod(state, 0o755)
    run = os.path.join(state, "run")
    os.makedirs(run)
    os.chown(run, 0, pwd.getpwnam("paddock").pw_gid)
    os.chmod(run, 0o770)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PADDOCK_")}
    env.update({"PADDOCK_STATE_DIR": state, "PADDOCK_RUNTIME_DIR": run,
                "PADDOCK_LIB_DIR": os.path.join(build, "lib"),
                "PADDOCK_NODE_NAME": "cg" + secrets.token_hex(4),
                "PADDOCK_UID_BASE": str(300000 + secrets.randbelow(4000) * 4096),
                "PADDOCK_LOG_LEVEL": "info",
                "LD_PRELOAD": os.path.join(bench_bin, "vg_shim.so")})
    out = os.path.join(state, "callgrind.out.%p")
    log = open(os.path.join(state, "sessiond.log"), "wb")
    p = subprocess.Popen(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                          os.path.join(build, "paddock-sessiond")],
                         env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    log.close()
    sock = os.path.join(run, "sessiond.sock")
    try:
        deadline = time.monotonic() + 120
        while True:
            s = socket.socket(socket.AF_UNIX)
            try:
                s.connect(sock)
                break
            except OSError:
                pass
            finally:
                s.close()
            if p.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("sessiond under valgrind did not start")
            time.sleep(0.1)
        c = SessiondClient(sock, timeout=120)
        reply, _ = c.call({"op": "create"})
        if not reply.get("ok"):
            raise RuntimeError(f"create failed under valgrind: {reply}")
        sid = reply["session_id"]
        for i in range(WARM_EXECS + execs):
            reply, _ = c.call(dict(EXEC, session_id=sid))
            if not reply.get("ok") or reply.get("stdout") != "1\n":
                raise RuntimeError(f"exec {i} failed under valgrind: {reply}")
        c.call({"op": "destroy", "session_id": sid})
        c.close()
    except BaseException:
        with open(os.path.join(state, "sessiond.log"), "rb") as f:
            sys.stderr.write(f.read()[-3000:].decode("utf-8", "replace"))
        raise
    finally:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(120)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    path = os.path.join(state, f"callgrind.out.{p.pid}")
    total, fns = parse(path)
    shutil.rmtree(state, ignore_errors=True)
    return total, fns


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
    args = ap.parse_args()
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
    result = {"execs": args.execs, "per_exec": per_exec, "total_without": t0, "total_with": t1,
              "threshold": args.threshold,
              "top": [{"fn": fn, "per_exec": v, "share": v / per_exec if per_exec else 0} for v, fn in top]}
    vg = subprocess.run(["valgrind", "--version"], capture_output=True, text=True).stdout.strip()
    baseline = None
    if os.path.exists(BASELINE):
        with open(BASELINE, encoding="utf-8") as f:
            baseline = json.load(f)
    if args.update_baseline:
        baseline = {"per_exec": round(per_exec), "threshold": args.threshold, "execs": args.execs,
                    "recorded": datetime.date.today().isoformat(), "valgrind": vg,
                    "kernel": platform.release(), "build": "Release",
                    "source": os.environ.get("PADDOCK_BENCH_SOURCE") or subprocess.run(
                        ["git", "-C", SOURCE_DIR, "describe", "--always", "--dirty"],
                        capture_output=True, text=True).stdout.strip(),
                    "note": "sessiond's instructions per print(1) exec (callgrind_check.py); "
                            "refresh with --update-baseline after an intended change"}
        with open(BASELINE, "w", encoding="utf-8") as f:
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
                      note="no baseline yet: run bench/callgrind_check.py --update-baseline")
    print(f"  callgrind: {per_exec:,.0f} instructions per exec in sessiond "
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
