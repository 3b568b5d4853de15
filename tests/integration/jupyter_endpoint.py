# SPDX-License-Identifier: MIT
"""A throwaway Jupyter Server (Debian's python3-jupyter-server) on loopback for the tests.

It listens on 127.0.0.1 on a free port with a random token, keeps everything it
writes (runtime files, kernels' connection files, IPython profiles) in a temporary
directory, and runs in its own session so that stopping it can also reach kernels
it leaves behind. Its kernels inherit MARK_VAR=<mark>, so a cell can prove where
it runs.
"""

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

PYTHON = "/usr/bin/python3"
MARK_VAR = "PADDOCK_TEST_JUPYTER_MARK"
START_TIMEOUT = 60.0


def missing():
    """Why no server can be started here, or None."""
    probe = ("import jupyter_server, ipykernel, websocket\n"
             "print(jupyter_server.__version__)\n")
    try:
        r = subprocess.run([PYTHON, "-I", "-c", probe], capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{PYTHON} did not run: {exc}"
    if r.returncode != 0:
        return ("python3-jupyter-server, python3-ipykernel and python3-websocket are needed "
                "(scripts/deps.sh): " + r.stderr.decode(errors="replace").strip()[-300:])
    return None


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class JupyterServer:
    def __init__(self):
        self.token = secrets.token_hex(16)
        self.mark = secrets.token_hex(8)
        self.port = None
        self.proc = None
        self.dir = None

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}/"

    @property
    def endpoint(self):
        """What AIO_JUPYTER_ENDPOINT says: the URL with the token."""
        return f"{self.url}?token={self.token}"

    def start(self):
        self.dir = tempfile.mkdtemp(prefix="paddock-jupyter-")
        os.chmod(self.dir, 0o755)
        self.port = _free_port()
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": self.dir,
               "JUPYTER_RUNTIME_DIR": os.path.join(self.dir, "runtime"),
               "JUPYTER_DATA_DIR": os.path.join(self.dir, "data"),
               "JUPYTER_CONFIG_DIR": os.path.join(self.dir, "config"),
               "IPYTHONDIR": os.path.join(self.dir, "ipython"),
               "MPLCONFIGDIR": os.path.join(self.dir, "mpl"),
               "PYTHONDONTWRITEBYTECODE": "1", MARK_VAR: self.mark}
        argv = [PYTHON, "-m", "jupyter_server", "--allow-root", "--no-browser",
                "--ip=127.0.0.1", f"--port={self.port}", "--port-retries=0",
                f"--ServerApp.token={self.token}", f"--ServerApp.root_dir={self.dir}",
                "--ServerApp.password=", "--ServerApp.open_browser=False"]
        self.log = open(os.path.join(self.dir, "server.log"), "wb")
        self.proc = subprocess.Popen(argv, env=env, cwd=self.dir, stdin=subprocess.DEVNULL,
                                     stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"jupyter-server exited ({self.proc.returncode}): "
                                   + self.log_text()[-2000:])
            try:
                status, _ = self.api("GET", "api/status", timeout=1)
                if status == 200:
                    return self
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("jupyter-server did not answer: " + self.log_text()[-2000:])
            time.sleep(0.05)

    def log_text(self):
        try:
            with open(os.path.join(self.dir, "server.log"), "rb") as f:
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def api(self, method, path, body=None, timeout=10):
        """(status, parsed JSON or None), authenticated with the token."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Authorization": f"token {self.token}",
                                              "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                raw = r.read()
                return r.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as e:
            return e.code, None

    def kernel_ids(self):
        status, body = self.api("GET", "api/kernels")
        assert status == 200, status
        return {k["id"] for k in body}

    def wait_kernels(self, predicate, timeout=15.0):
        """Poll the kernel list until predicate(ids) holds; returns the last ids."""
        deadline = time.monotonic() + timeout
        while True:
            ids = self.kernel_ids()
            if predicate(ids) or time.monotonic() > deadline:
                return ids
            time.sleep(0.05)

    @staticmethod
    def _stat(pid):
        """(parent pid, start time) of pid, or None when it is gone."""
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            return None
        fields = stat[stat.rindex(b")") + 2:].split()
        return int(fields[1]), int(fields[19])

    def _children(self):
        """Processes whose parent is the server: its kernels (each in its own session)."""
        kids = []
        for name in os.listdir("/proc"):
            if name.isdigit():
                st = self._stat(int(name))
                if st and st[0] == self.proc.pid:
                    kids.append((int(name), st[1]))
        return kids

    def kernel_pids_alive(self, kids):
        return [pid for pid, start in kids if (self._stat(pid) or (0, None))[1] == start]

    def stop(self):
        if self.proc is None:
            return
        kids = self._children() if self.proc.poll() is None else []
        if self.proc.poll() is None:
            # SIGTERM: the server shuts its kernels down, then exits.
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                pass
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        # Kernels that outlived it (they run in sessions of their own) go too.
        for pid in self.kernel_pids_alive(kids):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        self.proc = None
