# SPDX-License-Identifier: MIT
"""Row 7 of the bench: the code-interpreter plane per tier, next to a plain ipykernel.

For each tier (native Python, kernel Python, JavaScript; the endpoint tier when a
Jupyter Server is configured) through nginx on /v2/code/execute:
  cold   a one-off `1+1` on a stack with no warm pools (sandbox + interpreter start)
  warm   a one-off `1+1` on a stack whose pools hold that tier ready; on the kernel tier
         (the one that returns figures) also a one-off matplotlib plot: a line, shown, its
         PNG back as display_data
  exec   `1+1` in an existing session
and, measured in the same run, Debian's jupyter_client driving a plain ipykernel on the
host (no sandbox): kernel start to first reply, and `1+1` in a running kernel.
"""

import http.client
import json
import statistics
import time


def _pct(vals, p):
    vals = sorted(vals)
    return vals[min(len(vals) - 1, int(round(p / 100 * (len(vals) - 1))))]


def summary_ms(samples_s):
    ms = [s * 1e3 for s in samples_s]
    return {"n": len(ms), "median": statistics.median(ms), "p99": _pct(ms, 99)}


class CodeHttp:
    def __init__(self, port):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)

    def execute(self, body):
        self.conn.request("POST", "/v2/code/execute", body=json.dumps(body),
                          headers={"Content-Type": "application/json"})
        r = self.conn.getresponse()
        data = json.loads(r.read())
        assert r.status == 200 and data["success"], (r.status, str(data)[:300])
        return data["data"]

    def capabilities(self):
        """GET /v1/capabilities: answered once the worker's runtime probe has finished."""
        self.conn.request("GET", "/v1/capabilities")
        r = self.conn.getresponse()
        r.read()
        assert r.status == 200, r.status

    def delete(self, sid):
        self.conn.request("DELETE", f"/v2/code/sessions/{sid}")
        self.conn.getresponse().read()

    def close(self):
        self.conn.close()


def _result(d):
    for o in d["outputs"]:
        if o.get("output_type") == "execute_result":
            return o["data"]["text/plain"]
    return None


def wait_probe(port):
    """The worker probes the interpreters once at its start (importing IPython takes most
    of a second) and the code plane's first requests wait for it: a one-time cost of a
    worker's start, kept out of the per-call rows."""
    h = CodeHttp(port)
    try:
        h.capabilities()
    finally:
        h.close()


PLOT = "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()"


def _has_png(d):
    return any("image/png" in (o.get("data") or {}) for o in d["outputs"])


def one_offs(port, language, n, settle=None, plot=False):
    """n one-off runs of 1+1 (or of a matplotlib plot, which must come back as a PNG);
    settle() is called before each (waits for the pool to refill)."""
    wait_probe(port)
    h = CodeHttp(port)
    out = []
    try:
        for _ in range(n):
            if settle:
                settle()
            t = time.perf_counter()
            d = h.execute({"language": language, "code": PLOT if plot else "1+1"})
            out.append(time.perf_counter() - t)
            assert _has_png(d) if plot else _result(d) == "2", str(d)[:300]
    finally:
        h.close()
    return out


def in_session(port, language, n):
    h = CodeHttp(port)
    out = []
    try:
        d = h.execute({"language": language, "code": "1+1", "stateful": True})
        sid = d["session_id"]
        for _ in range(n):
            t = time.perf_counter()
            d = h.execute({"language": language, "code": "1+1", "session_id": sid})
            out.append(time.perf_counter() - t)
            assert _result(d) == "2", d
        h.delete(sid)
    finally:
        h.close()
    return out


def _shows_png(msg, seen):
    """An output hook: notes a display_data message that carries a PNG."""
    if msg["msg_type"] == "display_data" and "image/png" in msg["content"]["data"]:
        seen.append(True)


def plain_ipykernel(n_starts, n_execs, n_plots=0):
    """Debian's jupyter_client and ipykernel, no sandbox: start times, 1+1 times, and the
    times of the one-off rows' plot in the last kernel once it has drawn one (matplotlib's
    own work in a warm interpreter, the inline backend's PNG included)."""
    from jupyter_client.manager import start_new_kernel

    starts, execs, plots = [], [], []
    for i in range(n_starts):
        t = time.perf_counter()
        km, kc = start_new_kernel(kernel_name="python3")
        try:
            kc.execute_interactive("1+1", timeout=60, output_hook=lambda m: None)
            starts.append(time.perf_counter() - t)
            if i == n_starts - 1:
                for _ in range(n_execs):
                    t = time.perf_counter()
                    reply = kc.execute_interactive("1+1", timeout=60,
                                                   output_hook=lambda m: None)
                    execs.append(time.perf_counter() - t)
                    assert reply["content"]["status"] == "ok", reply
                for j in range(n_plots + 1 if n_plots else 0):
                    seen = []
                    t = time.perf_counter()
                    reply = kc.execute_interactive(PLOT, timeout=60,
                                                   output_hook=lambda m: _shows_png(m, seen))
                    if j:  # the first draws matplotlib's fonts and caches in
                        plots.append(time.perf_counter() - t)
                    assert reply["content"]["status"] == "ok" and seen, reply
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=True)
    return starts, execs, plots
