# SPDX-License-Identifier: MIT
"""Start paddock's real stack (sessiond, fcgi worker, nginx) for the integration tests,
talk to it over HTTP, and check every answer against the Otari OpenAPI document.

The stack is started the way scripts/run.sh starts it: a state dir with a run/ dir
owned root:paddock 0770, sessiond first (waited for on its socket), then the worker
(waited for on its socket), then nginx from nginx/paddock-dev.conf.in, on a free
loopback port. Stopping it checks that nothing is left behind: processes, mounts
under the state dir, cgroups named after the stack's sessions.
"""

import glob
import http.client
import json
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import types
import urllib.parse

import jsonschema
import requests
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.path.abspath(os.environ.get("PADDOCK_SOURCE_DIR") or os.path.join(HERE, "..", ".."))
BUILD_DIR = os.path.abspath(os.environ.get("PADDOCK_BUILD_DIR") or os.path.join(SOURCE_DIR, "build"))
# Installed mode (the system test, in a guest where the .deb is installed): the main stack
# is the package's own (systemd units, the site on port 8080), and stacks with other
# settings are started the dev way, with the installed programs.
INSTALLED = os.environ.get("PADDOCK_TEST_INSTALLED") == "1"
if INSTALLED:
    SESSIOND_BIN = "/usr/sbin/paddock-sessiond"
    FCGI_BIN = "/usr/sbin/paddock-fcgi"
    PADDOCKCTL_BIN = "/usr/sbin/paddockctl"
    LIB_DIR = "/usr/libexec/paddock"
else:
    SESSIOND_BIN = os.path.join(BUILD_DIR, "paddock-sessiond")
    FCGI_BIN = os.path.join(BUILD_DIR, "paddock-fcgi")
    PADDOCKCTL_BIN = os.path.join(BUILD_DIR, "paddockctl")
    LIB_DIR = os.path.join(BUILD_DIR, "lib")
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"

START_TIMEOUT = 60.0  # seconds for one program to open its socket
STOP_TIMEOUT = 30.0  # seconds for one program to exit after SIGTERM
SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:")

# Every stack started by this process, for the log dump on failure.
STACKS = []


def _openapi_candidates():
    env = os.environ.get("PADDOCK_OTARI_OPENAPI")
    if env:
        yield env
    name = os.path.join("spec", "otari-code-execution-openapi.yaml")
    yield os.path.join(SOURCE_DIR, "..", "shared", name)
    yield os.path.join(SOURCE_DIR, "..", "..", "shared", name)
    yield os.path.join("/work/shared", name)


def openapi_path():
    for p in _openapi_candidates():
        if os.path.isfile(p):
            return os.path.abspath(p)
    return None


def sanitized_build():
    """Whether BUILD_DIR was configured with PADDOCK_SANITIZE=ON (ASan keeps freed memory
    in quarantine, so its processes' RSS says nothing about leaks: LeakSanitizer does)."""
    try:
        with open(os.path.join(BUILD_DIR, "CMakeCache.txt"), encoding="utf-8") as f:
            return any(line.strip() == "PADDOCK_SANITIZE:BOOL=ON" for line in f)
    except OSError:
        return False


def preflight():
    """What stops the stack from starting here, as a list of sentences."""
    problems = []
    for b in (SESSIOND_BIN, FCGI_BIN):
        if not os.access(b, os.X_OK):
            problems.append(f"{b} is missing ("
                            + ("is the package installed?" if INSTALLED else "build first") + ")")
    if not os.access(NGINX, os.X_OK):
        problems.append("nginx is not installed (scripts/deps.sh)")
    try:
        pwd.getpwnam("paddock")
    except KeyError:
        problems.append("there is no user 'paddock' (scripts/deps.sh)")
    if not openapi_path():
        problems.append("the Otari OpenAPI document was not found; set PADDOCK_OTARI_OPENAPI "
                        "to spec/otari-code-execution-openapi.yaml")
    return problems


# ---------------------------------------------------------------------------
# The OpenAPI document: the schema it names for each operation and status.

class OpenApi:
    _instance = None

    def __init__(self, path):
        with open(path, encoding="utf-8") as f:
            self.doc = yaml.safe_load(f)
        self.components = self.doc["components"]

    @classmethod
    def get(cls):
        if cls._instance is None:
            cls._instance = cls(openapi_path())
        return cls._instance

    def resolve(self, node):
        while isinstance(node, dict) and "$ref" in node:
            ref = node["$ref"]
            assert ref.startswith("#/"), ref
            node = self.doc
            for part in ref[2:].split("/"):
                node = node[part]
        return node

    def validator(self, schema):
        # The component schemas refer to each other as #/components/...: validate
        # against a root that carries the components beside the schema.
        root = dict(schema)
        root["components"] = self.components
        return jsonschema.Draft202012Validator(root)

    def component(self, name):
        return self.components["schemas"][name]

    def response_spec(self, template, method, status):
        """The response object the document declares, or None."""
        op = self.doc["paths"].get(template, {}).get(method.lower())
        if op is None:
            return None
        r = op["responses"].get(str(status))
        return self.resolve(r) if r is not None else None

    def json_schema(self, template, method, status):
        r = self.response_spec(template, method, status)
        if r is None:
            return None
        media = r.get("content", {}).get("application/json")
        return None if media is None else media["schema"]

    def validate(self, instance, schema, what):
        errors = sorted(self.validator(schema).iter_errors(instance), key=lambda e: list(e.path))
        assert not errors, f"{what}: response does not match the OpenAPI schema: " + "; ".join(
            f"{'/'.join(map(str, e.path)) or '<root>'}: {e.message}" for e in errors[:5])

    def header_schema(self, template, method, status, header):
        r = self.response_spec(template, method, status) or {}
        h = r.get("headers", {}).get(header)
        return None if h is None else self.resolve(h)["schema"]


ROUTES = [
    (re.compile(r"^/sessions$"), "/sessions"),
    (re.compile(r"^/sessions/[^/]+$"), "/sessions/{session_id}"),
    (re.compile(r"^/sessions/[^/]+/exec$"), "/sessions/{session_id}/exec"),
    (re.compile(r"^/sessions/[^/]+/files/list$"), "/sessions/{session_id}/files/list"),
    (re.compile(r"^/sessions/[^/]+/files$"), "/sessions/{session_id}/files"),
]


def route_template(path):
    path = urllib.parse.urlsplit(path).path
    for rx, template in ROUTES:
        if rx.match(path):
            return template
    return None


def _no_constant(name):
    raise ValueError(f"{name} is not JSON")


def strict_json(body):
    """Parse an answer as JSON and nothing looser: its bytes UTF-8, and no NaN or Infinity,
    which Python's json module reads but no JSON parser need."""
    text = body.decode("utf-8") if isinstance(body, (bytes, bytearray)) else body
    return json.loads(text, parse_constant=_no_constant)


def check_response(status, headers, body, method, path, bearer=False):
    """Check one answer against the contract: the schema the OpenAPI document names for
    its status, the Error shape for every 4xx/5xx, Retry-After and WWW-Authenticate."""
    api = OpenApi.get()
    template = route_template(path)
    what = f"{method} {path[:120]} -> {status}"
    ctype = (headers.get("Content-Type") or "").split(";")[0].strip().lower()
    declared = api.response_spec(template, method, status) if template else None
    parsed = None
    if ctype == "application/json" and body:
        try:
            parsed = strict_json(body)
        except ValueError as e:
            raise AssertionError(f"{what}: body is not JSON ({e}): {body[:200]!r}")

    if status >= 400:
        assert ctype == "application/json", f"{what}: error body is {ctype or 'untyped'}: {body[:200]!r}"
        assert isinstance(parsed, dict), f"{what}: error body is not an object: {body[:200]!r}"
        detail = parsed.get("detail")
        assert isinstance(detail, str) and detail.strip(), f"{what}: no detail sentence in {parsed!r}"
        schema = api.json_schema(template, method, status) if declared else None
        api.validate(parsed, schema or api.component("Error"), what)
        if status == 401 and bearer:
            auth = headers.get("WWW-Authenticate") or ""
            assert auth.lower().startswith("bearer"), f"{what}: WWW-Authenticate is {auth!r}"
        if status == 503 and "Retry-After" in headers:
            hs = api.header_schema(template, method, status, "Retry-After") or {
                "type": "string", "pattern": "^[0-9]+$", "maxLength": 6}
            api.validate(headers["Retry-After"], hs, what + " Retry-After")
        return parsed

    if template is None:
        raise AssertionError(f"{what}: success on a path that is no Otari route")
    assert declared is not None, f"{what}: status {status} is not declared for {method} {template}"
    content = declared.get("content")
    if not content:
        assert not body, f"{what}: a {status} must have no body, got {body[:200]!r}"
        return None
    if "application/json" in content:
        assert ctype == "application/json", f"{what}: Content-Type is {ctype!r}"
        assert parsed is not None, f"{what}: empty body"
        api.validate(parsed, content["application/json"]["schema"], what)
        return parsed
    return None


# ---------------------------------------------------------------------------
# Processes, sockets, leftovers.

def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _unlink_if_there(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _connectable(family, address):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(1.0)
    try:
        s.connect(address)
        return True
    except OSError:
        return False
    finally:
        s.close()


def _proc_stat(pid):
    """(ppid, starttime) of a live pid, or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read().decode("ascii", "replace")
    except OSError:
        return None
    rest = data[data.rfind(")") + 2:].split()
    return int(rest[1]), int(rest[19])


def _all_pids():
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def descendants(roots):
    """{pid: starttime} of every live descendant of the given pids."""
    children = {}
    stats = {}
    for pid in _all_pids():
        st = _proc_stat(pid)
        if st:
            stats[pid] = st
            children.setdefault(st[0], []).append(pid)
    out = {}
    todo = list(roots)
    while todo:
        p = todo.pop()
        for c in children.get(p, []):
            if c not in out:
                out[c] = stats[c][1]
                todo.append(c)
    return out


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        return "?"


def _describe(pid):
    """pid (state, ppid, cmdline) for a report."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read().decode("ascii", "replace")
        rest = data[data.rfind(")") + 2:].split()
        comm = data[data.find("(") + 1:data.rfind(")")]
        return f"{pid} [{comm}, state {rest[0]}, ppid {rest[1]}] {_cmdline(pid)}"
    except OSError:
        return f"{pid} (gone)"


def workspace_backend():
    """What the test stacks' workspaces are: disk, or tmpfs where the system test's
    container (which has no loop devices) sets it for them."""
    return os.environ.get("PADDOCK_SYSTEST_WORKSPACE_BACKEND") or "disk"


def parse_size(text):
    """A size as the config file writes it ("512M", "2G", "4096")."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper()
    if text[-1:] in units:
        return int(text[:-1]) * units[text[-1]]
    return int(text)


def loops_backed_under(path):
    """Loop devices whose backing file is (or was, deleted) under path."""
    found = []
    for dev in glob.glob("/sys/block/loop*/loop/backing_file"):
        try:
            with open(dev, encoding="utf-8", errors="replace") as f:
                backing = f.read().strip()
        except OSError:
            continue  # detached meanwhile
        if backing.startswith(path.rstrip("/") + "/"):
            found.append(dev.split("/")[3] + " " + backing)
    return found


def _unescape_mountinfo(s):
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), s)


def mounts_under(path):
    path = os.path.realpath(path)
    found = []
    with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
        for line in f:
            mp = _unescape_mountinfo(line.split()[4])
            if mp == path or mp.startswith(path + "/"):
                found.append(mp)
    return found


def cgroups_matching(needles, root="/sys/fs/cgroup", max_depth=7):
    """Cgroup directories whose name contains one of needles."""
    found = []
    needles = [n for n in needles if n]

    def walk(d, depth):
        try:
            entries = list(os.scandir(d))
        except OSError:
            return
        for e in entries:
            try:
                if not e.is_dir(follow_symlinks=False):
                    continue
            except OSError:
                continue
            if any(n in e.name for n in needles):
                found.append(e.path)
            elif depth < max_depth:
                walk(e.path, depth + 1)

    walk(root, 0)
    return found


def processes_in_cgroups_matching(needles):
    found = []
    for pid in _all_pids():
        try:
            with open(f"/proc/{pid}/cgroup", encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError:
            continue
        if any(n and n in text for n in needles):
            found.append(_describe(pid))
    return found


def open_files(pid):
    """The paths pid has open (what its fds point at), [] once it is gone."""
    out = []
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                out.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
            except OSError:
                pass
    except OSError:
        pass
    return out


def children(pid):
    """The pids of pid's children."""
    out = set()
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return out  # gone
    for t in tasks:
        try:
            with open(f"/proc/{pid}/task/{t}/children") as f:
                out |= {int(x) for x in f.read().split()}
        except OSError:
            pass
    return out


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return None


def in_own_pid_namespace(pid):
    """Whether pid was cloned into a pid namespace of its own (two NSpid levels): a
    sandbox's child, not another child of the daemon (a cleanup, a checkpoint)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("NSpid:"):
                    return len(line.split()) == 3
    except OSError:
        pass
    return False


def _signal(pid, sig):
    try:
        os.kill(pid, sig)
        return True
    except ProcessLookupError:
        return False


def _stop(pid):
    """SIGSTOP pid and wait until it has stopped (a signal is delivered when the process
    next runs: until then it may still exec). False once it is gone."""
    if not _signal(pid, signal.SIGSTOP):
        return False
    for _ in range(10000):
        try:
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return False
        if state in ("T", "t"):
            return True
        if state in ("Z", "X"):
            return False
        time.sleep(0.0001)
    return False


class ChildStopper(threading.Thread):
    """Stops each new sandbox child of the daemon the moment it appears, while it is still
    the daemon's copy setting up a sandbox (before it executes paddock-init), and then
    sends it sig (to the first `most` of them). Children seen too late are let go, in
    `missed`. until(pid): let the child run on, a little at a time, until it holds (it is
    stopped again each time before it is checked); a child for which it never holds is
    let go too."""

    def __init__(self, daemon_pid, sig=signal.SIGSTOP, most=None, until=None):
        super().__init__(daemon=True)
        self.daemon_pid = daemon_pid
        self.daemon_cmdline = cmdline(daemon_pid)
        self.sig = sig
        self.most = most
        self.until = until
        self.known = children(daemon_pid)
        self.stopped = []
        self.missed = []
        self.done = threading.Event()

    def _let_go(self, pid):
        _signal(pid, signal.SIGCONT)
        self.missed.append(pid)

    def _catch(self, pid):
        if not _stop(pid):
            return
        if not in_own_pid_namespace(pid):
            _signal(pid, signal.SIGCONT)  # not a sandbox's child
            return
        # Stopped, it cannot exec meanwhile: its command line says which it is.
        for _ in range(10000):
            if cmdline(pid) != self.daemon_cmdline:
                return self._let_go(pid)
            if self.until is None or self.until(pid):
                break
            _signal(pid, signal.SIGCONT)
            time.sleep(0.0002)
            if not _stop(pid):
                return
        else:
            return self._let_go(pid)
        if self.sig != signal.SIGSTOP and not _signal(pid, self.sig):
            return
        self.stopped.append(pid)

    def run(self):
        while not self.done.is_set() and (self.most is None or len(self.stopped) < self.most):
            for pid in children(self.daemon_pid) - self.known:
                self.known.add(pid)
                self._catch(pid)

    def finish(self, sig=signal.SIGCONT):
        """Stop catching; the stopped children get sig (go on, by default)."""
        self.done.set()
        self.join()
        for pid in self.stopped:
            _signal(pid, sig)


def host_workspace(stack, marker_file):
    """The host directory of the workspace that holds marker_file (root sees them all)."""
    top = os.path.join(stack.state_dir, "workspaces")
    found = [os.path.join(top, d) for d in os.listdir(top)
             if os.path.exists(os.path.join(top, d, marker_file))]
    assert len(found) == 1, f"workspace with {marker_file}: {found}"
    return found[0]


def remove_tree_one_fs(top):
    """rm -rf top without crossing into another file system (a leftover mount)."""
    try:
        top_dev = os.lstat(top).st_dev
    except FileNotFoundError:
        return
    for dirpath, dirnames, filenames in os.walk(top, topdown=False):
        for name in filenames:
            p = os.path.join(dirpath, name)
            try:
                if os.lstat(p).st_dev == top_dev:
                    os.unlink(p)
            except OSError:
                pass
        for name in dirnames:
            p = os.path.join(dirpath, name)
            try:
                st = os.lstat(p)
                if st.st_dev != top_dev:
                    continue
                if os.path.islink(p):
                    os.unlink(p)
                else:
                    os.rmdir(p)
            except OSError:
                pass
    try:
        os.rmdir(top)
    except OSError:
        pass


class Stack:
    """One running paddock: sessiond + fcgi worker + nginx, on a free loopback port.

    env: extra PADDOCK_* settings for both programs (e.g. PADDOCK_MAX_SESSIONS).
    """

    def __init__(self, name="main", env=None, node_name=None):
        self.name = name
        self.extra_env = dict(env or {})
        # node_name: the session id prefix (letters and digits), random when not given.
        self.node_name = node_name or "t" + secrets.token_hex(5)
        # Stacks side by side must not hand out the same uids; a restarted daemon keeps its own.
        self.uid_base = 300000 + secrets.randbelow(4000) * 4096
        self.session_ids = set()
        self.procs = {}
        self.exit_codes = {}
        self.final_logs = None
        self.state_dir = None
        self.port = None
        self.started = False
        STACKS.append(self)

    @property
    def bearer(self):
        """Tokens are configured: every 401 must carry WWW-Authenticate: Bearer."""
        return bool(self.extra_env.get("PADDOCK_AUTH_TOKENS"))

    # paths
    @property
    def run_dir(self):
        return os.path.join(self.state_dir, "run")

    @property
    def log_dir(self):
        return os.path.join(self.state_dir, "log")

    @property
    def base_url(self):
        return f"http://127.0.0.1:{self.port}"

    @property
    def installed_cgroup_root(self):
        return f"systest-{self.node_name}"

    @property
    def nginx_conf(self):
        """The configuration the stack's nginx runs."""
        return os.path.join(self.state_dir, "nginx", "nginx.conf")

    def env(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith("PADDOCK_")}
        env.update({
            "PADDOCK_STATE_DIR": self.state_dir,
            "PADDOCK_RUNTIME_DIR": self.run_dir,
            "PADDOCK_LIB_DIR": LIB_DIR,
            "PADDOCK_NODE_NAME": self.node_name,
            "PADDOCK_UID_BASE": str(self.uid_base),
            "PADDOCK_LOG_LEVEL": "debug",
        })
        if INSTALLED:
            # Beside the package's daemon, under systemd: a cgroup of the stack's own below
            # the root, where the controllers are enabled (the test's unit cgroup holds the
            # test's processes, so it cannot give controllers to sandboxes).
            env["PADDOCK_CGROUP_ROOT"] = self.installed_cgroup_root
        env["PADDOCK_WORKSPACE_BACKEND"] = workspace_backend()
        env.update(self.extra_env)
        return env

    def _spawn(self, key, argv, env):
        log = open(os.path.join(self.log_dir, key + ".log"), "ab")
        try:
            p = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                 stderr=subprocess.STDOUT, start_new_session=True)
        finally:
            log.close()
        self.procs[key] = p
        return p

    def _wait_until(self, ready, proc, what):
        deadline = time.monotonic() + START_TIMEOUT
        while not ready():
            if proc.poll() is not None:
                raise RuntimeError(f"{what} exited with status {proc.returncode} during start-up\n"
                                   + self.logs())
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what} was not ready within {START_TIMEOUT:.0f} s\n" + self.logs())
            time.sleep(0.02)

    def render_locations(self):
        """The shipped locations, with PutFile's body limit raised to a put_max_bytes set
        above the shipped 100M (as an operator raising it edits that line)."""
        src = os.path.join(SOURCE_DIR, "nginx", "paddock-locations.conf")
        put_max = self.extra_env.get("PADDOCK_PUT_MAX_BYTES")
        if not put_max:
            return src
        with open(src, encoding="utf-8") as f:
            text = f.read()
        mib = parse_size(put_max) // (1 << 20) + 1
        assert "client_max_body_size 101m;" in text
        text = text.replace("client_max_body_size 101m;", f"client_max_body_size {mib}m;")
        path = os.path.join(self.state_dir, "nginx", "paddock-locations.conf")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return path

    def render_nginx_conf(self):
        with open(os.path.join(SOURCE_DIR, "nginx", "paddock-dev.conf.in"), encoding="utf-8") as f:
            text = f.read()
        fields = {
            "@USER@": "paddock",
            "@GROUP@": "paddock",
            "@LISTEN@": f"127.0.0.1:{self.port}",
            "@STATE_DIR@": self.state_dir,
            "@FCGI_SOCKET@": os.path.join(self.run_dir, "fcgi.sock"),
            "@LOCATIONS@": self.render_locations(),
        }
        for k, v in fields.items():
            text = text.replace(k, v)
        assert "@" not in re.sub(r"#.*", "", text).replace("$request_id", ""), "unrendered field"
        path = os.path.join(self.state_dir, "nginx", "nginx.conf")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return path

    def start(self):
        """Start sessiond, the worker and nginx; if one fails, stop the others and raise."""
        try:
            return self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self):
        self.state_dir = tempfile.mkdtemp(prefix=f"paddock-{self.name}-")
        os.chmod(self.state_dir, 0o755)
        for d in ("log", "nginx", "run"):
            os.makedirs(os.path.join(self.state_dir, d), exist_ok=True)
        pw = pwd.getpwnam("paddock")
        os.chown(self.run_dir, 0, pw.pw_gid)
        os.chmod(self.run_dir, 0o770)
        env = self.env()

        sessiond = self._spawn("paddock-sessiond", [SESSIOND_BIN], env)
        sock = os.path.join(self.run_dir, "sessiond.sock")
        self._wait_until(lambda: _connectable(socket.AF_UNIX, sock), sessiond, "paddock-sessiond")

        fsock = os.path.join(self.run_dir, "fcgi.sock")
        fcgi = self._spawn("paddock-fcgi", [FCGI_BIN, "--socket", fsock], env)
        self._wait_until(lambda: _connectable(socket.AF_UNIX, fsock), fcgi, "paddock-fcgi")

        for _ in range(5):  # the free port may be taken between probe and bind
            self.port = free_port()
            conf = self.render_nginx_conf()
            argv = [NGINX, "-p", os.path.join(self.state_dir, "nginx") + "/", "-c", conf,
                    "-e", os.path.join(self.log_dir, "nginx-error.log")]
            ng = self._spawn("nginx", argv, env)
            try:
                self._wait_until(lambda: _connectable(socket.AF_INET, ("127.0.0.1", self.port)), ng, "nginx")
                break
            except RuntimeError:
                if ng.poll() is None:
                    raise
        else:
            raise RuntimeError("nginx could not bind a free port\n" + self.logs())
        self.started = True
        return self

    def daemon_call(self, request):
        """One request straight to sessiond's socket, as a worker sends it; the reply dict."""
        from proto_client import SessiondClient
        c = SessiondClient(os.path.join(self.run_dir, "sessiond.sock"))
        try:
            reply, _ = c.call(request)
        finally:
            c.close()
        return reply

    def store_rows(self, sql, *args):
        """Rows of a query on the stack's store, opened read-only."""
        import sqlite3
        db = sqlite3.connect(f"file:{os.path.join(self.state_dir, 'paddock.db')}?mode=ro", uri=True)
        try:
            return db.execute(sql, args).fetchall()
        finally:
            db.close()

    def sandbox_name(self, sid):
        """What a session's cgroups and workspace are named after (a warm sandbox keeps the
        name it was built under), from the store."""
        rows = self.store_rows("SELECT coalesce(rid, id) FROM sessions WHERE id = ?", sid)
        assert rows, f"session {sid} is not in the store"
        return rows[0][0]

    def kill9(self, key):
        """SIGKILL one program of the stack, as a crash would, and wait for it to be gone."""
        p = self.procs[key]
        p.kill()
        p.wait()

    def restart(self, key):
        """Start a program of the stack again (after kill9) and wait until it serves."""
        env = self.env()
        # The path the dead program listened on may still accept for a moment (a child of
        # the killed daemon, sharing its files, has not died yet): gone first, a connect
        # can only reach the new program.
        if key == "paddock-sessiond":
            sock = os.path.join(self.run_dir, "sessiond.sock")
            _unlink_if_there(sock)
            p = self._spawn(key, [SESSIOND_BIN], env)
            self._wait_until(lambda: _connectable(socket.AF_UNIX, sock), p, key)
        elif key == "paddock-fcgi":
            fsock = os.path.join(self.run_dir, "fcgi.sock")
            _unlink_if_there(fsock)
            p = self._spawn(key, [FCGI_BIN, "--socket", fsock], env)
            self._wait_until(lambda: _connectable(socket.AF_UNIX, fsock), p, key)
        else:
            raise ValueError(key)
        return p

    def alive(self):
        return {k: p.poll() is None for k, p in self.procs.items()}

    def assert_alive(self):
        dead = {k: p.returncode for k, p in self.procs.items() if p.poll() is not None}
        assert not dead, f"stack {self.name}: processes exited: {dead}\n" + self.logs()

    def logs(self, tail=20000):
        if self.final_logs is not None:
            return self.final_logs
        out = []
        if self.state_dir and os.path.isdir(self.log_dir):
            for name in sorted(os.listdir(self.log_dir)):
                p = os.path.join(self.log_dir, name)
                try:
                    with open(p, "rb") as f:
                        f.seek(0, os.SEEK_END)
                        size = f.tell()
                        f.seek(max(0, size - tail))
                        data = f.read().decode("utf-8", "replace")
                except OSError:
                    continue
                out.append(f"----- {self.name}: {name} ({size} bytes, last {min(size, tail)}) -----\n{data}")
        return "\n".join(out)

    def stop(self):
        """Stop everything (front to back) and return the problems found, as sentences."""
        problems = []
        if not self.procs:
            return problems
        roots = [p.pid for p in self.procs.values() if p.poll() is None]
        tree = descendants(roots)
        for key in ("nginx", "paddock-fcgi", "paddock-sessiond"):
            p = self.procs.get(key)
            if p is None:
                continue
            if p.poll() is not None:
                problems.append(f"{key} had already exited with status {p.returncode}")
                self.exit_codes[key] = p.returncode
                continue
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                problems.append(f"{key} did not exit within {STOP_TIMEOUT:.0f} s of SIGTERM")
                p.kill()
                p.wait()
            self.exit_codes[key] = p.returncode
            if p.returncode not in (0, -signal.SIGTERM):
                problems.append(f"{key} exited with status {p.returncode} on SIGTERM")

        # Processes the stack started, with the same start time (not a reused pid).
        # Ones still exiting get a few seconds to finish.
        def still_there():
            out = []
            for pid, start in tree.items():
                st = _proc_stat(pid)
                if st and st[1] == start:
                    out.append(pid)
            return out

        deadline = time.monotonic() + 5
        left = still_there()
        while left and time.monotonic() < deadline:
            time.sleep(0.05)
            left = still_there()
        if left:
            problems.append("processes left running: " + ", ".join(_describe(p) for p in left[:20]))
        if INSTALLED and "PADDOCK_CGROUP_ROOT" not in self.extra_env:
            # The place env() chose for the sandboxes' cgroups: empty now, unless one leaked.
            for h in [m for m in mounts_under("/sys/fs/cgroup") if m != "/sys/fs/cgroup"] or \
                    ["/sys/fs/cgroup"]:
                try:
                    os.rmdir(os.path.join(h, self.installed_cgroup_root))
                except OSError:
                    pass
        needles = [self.node_name] + sorted(self.session_ids)
        in_cg = processes_in_cgroups_matching(needles)
        if in_cg:
            problems.append("processes left in session cgroups: " + ", ".join(in_cg[:20]))
        mounts = mounts_under(self.state_dir)
        if mounts:
            problems.append("mounts left under the state dir: " + ", ".join(mounts[:20]))
        # A workspace's loop device detaches itself once its last mount is gone (the
        # sandboxes' namespaces included): a moment after the processes.
        loops = loops_backed_under(self.state_dir)
        deadline = time.monotonic() + 5
        while loops and time.monotonic() < deadline:
            time.sleep(0.05)
            loops = loops_backed_under(self.state_dir)
        if loops:
            problems.append("loop devices left: " + ", ".join(loops[:20]))
        cgs = cgroups_matching(needles)
        if cgs:
            problems.append("cgroups left: " + ", ".join(cgs[:20]))
        if os.path.isdir("/run/netns"):
            ns = [n for n in os.listdir("/run/netns") if any(x in n for x in needles)]
            if ns:
                problems.append("network namespaces left: " + ", ".join(ns))

        self.final_logs = None
        logs = self.logs(tail=2_000_000)
        for mark in SANITIZER_MARKS:
            if mark in logs:
                problems.append(f"a sanitizer reported '{mark}' (see the logs)")
        self.final_logs = self.logs()
        self.procs = {}
        if not mounts and not os.environ.get("PADDOCK_KEEP_STATE"):
            remove_tree_one_fs(self.state_dir)
        return problems


class UnitProcess:
    """The main process of a systemd unit, with the part of Popen's interface the tests use
    (pid, poll(), returncode): poll() is None while that same process runs."""

    def __init__(self, unit):
        self.unit = unit
        out = subprocess.run(["systemctl", "show", "-P", "MainPID", unit], capture_output=True,
                             text=True).stdout.strip()
        self.pid = int(out or 0)
        self.start = _proc_stat(self.pid)[1] if self.pid and _proc_stat(self.pid) else None
        self.returncode = None if self.start is not None else 1

    def poll(self):
        st = _proc_stat(self.pid) if self.pid else None
        if st is None or st[1] != self.start:
            self.returncode = 1
        return self.returncode


class InstalledStack(Stack):
    """The package's own stack, run by systemd (installed mode): nginx's paddock site on
    127.0.0.1:8080, sessiond and the socket-activated worker as units, the state in
    /var/lib/paddock. stop() leaves the services running and only checks that the
    sessions this test process made left nothing behind."""

    UNITS = {"paddock-sessiond": "paddock-sessiond.service", "paddock-fcgi": "paddock-fcgi.service",
             "nginx": "nginx.service"}
    CONFIG = "/etc/paddock/paddock.conf"

    def __init__(self, name="main"):
        self.name = name
        self.extra_env = {}
        self.session_ids = set()
        self.exit_codes = {}
        self.final_logs = None
        self.state_dir = "/var/lib/paddock"
        self.port = 8080
        self.started = False
        self.since = time.strftime("%Y-%m-%d %H:%M:%S")
        self.config = self._check_config()
        self.node_name = self.config.get("node_name", "")
        self.uid_base = int(self.config.get("uid_base", "0") or 0)
        STACKS.append(self)

    def _check_config(self):
        r = subprocess.run([SESSIOND_BIN, "--config", self.CONFIG, "--check-config"],
                           capture_output=True, text=True)
        conf = {}
        for line in r.stdout.splitlines():
            k, sep, v = line.partition(" = ")
            if sep:
                conf[k.strip()] = v.strip()
        return conf

    @property
    def run_dir(self):
        return self.config.get("runtime_dir") or "/run/paddock"

    @property
    def log_dir(self):
        return None

    @property
    def nginx_conf(self):
        return "/etc/nginx/nginx.conf"

    @property
    def procs(self):
        # The worker is socket-activated: it has a main process once a request came.
        out = {}
        for key, unit in self.UNITS.items():
            p = UnitProcess(unit)
            if p.pid or key != "paddock-fcgi":
                out[key] = p
        return out

    @procs.setter
    def procs(self, value):
        pass

    def env(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith("PADDOCK_")}
        env["PADDOCK_TEST_INSTALLED"] = "1"
        return env

    def start(self):
        # The services were started by the package: this only waits out a restart.
        sock = os.path.join(self.run_dir, "sessiond.sock")
        wait_for(lambda: _connectable(socket.AF_UNIX, sock), 20, "sessiond.sock")
        wait_for(lambda: _connectable(socket.AF_INET, ("127.0.0.1", self.port)), 20,
                 f"the paddock site on 127.0.0.1:{self.port} (is it enabled?)")
        self.started = True
        return self

    def _wait_serving(self, key):
        if key == "paddock-sessiond":
            sock = os.path.join(self.run_dir, "sessiond.sock")
        else:
            sock = os.path.join(self.run_dir, "fcgi.sock")
        wait_for(lambda: _connectable(socket.AF_UNIX, sock), START_TIMEOUT, f"{key}'s socket")

    def kill9(self, key):
        """SIGKILL the unit's main process, as a crash would, and wait for it to be gone."""
        p = UnitProcess(self.UNITS[key])
        subprocess.run(["systemctl", "kill", "-s", "KILL", "--kill-who=main", self.UNITS[key]],
                       check=True, capture_output=True)
        if p.pid:
            wait_for(lambda: p.poll() is not None, STOP_TIMEOUT, f"{key} to die")

    def restart(self, key):
        """systemctl restart the unit and wait until it serves."""
        if key not in ("paddock-sessiond", "paddock-fcgi"):
            raise ValueError(key)
        subprocess.run(["systemctl", "restart", self.UNITS[key]], check=True, capture_output=True)
        self._wait_serving(key)
        return UnitProcess(self.UNITS[key])

    def assert_alive(self):
        down = [u for k, u in self.UNITS.items() if k != "paddock-fcgi"
                and subprocess.run(["systemctl", "is-active", "-q", u]).returncode != 0]
        assert not down, f"installed stack: units not active: {down}\n" + self.logs()

    def logs(self, tail=20000):
        r = subprocess.run(["journalctl", "--no-pager", "-q", "--since", self.since,
                            "-u", "paddock-sessiond", "-u", "paddock-fcgi", "-u", "nginx"],
                           capture_output=True, text=True, errors="replace")
        return f"----- {self.name}: journal since {self.since} -----\n" + r.stdout[-tail:]

    def _rows_of(self, sids):
        return [r[0] for r in self.store_rows(
            "SELECT coalesce(rid, id) FROM sessions WHERE id IN (%s)" % ",".join("?" * len(sids)),
            *sids)]

    def stop(self):
        """Leave the services running; destroy the sessions made here that are still live
        (as a dev stack's stop does) and report what they left behind."""
        problems = []
        sids = sorted(self.session_ids)
        if sids:
            # What their cgroups and workspaces are named after (a warm sandbox's own name).
            needles = sorted(set(sids) | set(self._rows_of(sids)))
            http = requests.Session()
            for sid in sids:
                try:
                    r = http.delete(f"{self.base_url}/sessions/{sid}", timeout=60)
                    if r.status_code not in (204, 404):
                        problems.append(f"DELETE {sid}: {r.status_code} {r.text[:200]}")
                except requests.RequestException as e:
                    problems.append(f"DELETE {sid}: {e}")
            try:
                wait_for(lambda: not self._rows_of(sids), 10, "the destroyed sessions' rows to go")
            except AssertionError:
                problems.append("sessions still in the store after DestroySession: "
                                + ", ".join(self._rows_of(sids)[:20]))

            def leftovers():
                out = []
                in_cg = processes_in_cgroups_matching(needles)
                if in_cg:
                    out.append("processes left in session cgroups: " + ", ".join(in_cg[:20]))
                mounts = [m for m in mounts_under(self.state_dir) if any(n in m for n in needles)]
                if mounts:
                    out.append("mounts left under the state dir: " + ", ".join(mounts[:20]))
                cgs = cgroups_matching(needles)
                if cgs:
                    out.append("cgroups left: " + ", ".join(cgs[:20]))
                return out

            # A destroy answers before the sandbox is all gone: a few seconds to finish.
            deadline = time.monotonic() + 5
            left = leftovers()
            while left and time.monotonic() < deadline:
                time.sleep(0.1)
                left = leftovers()
            problems += left
        logs = self.logs(tail=2_000_000)
        for mark in SANITIZER_MARKS:
            if mark in logs:
                problems.append(f"a sanitizer reported '{mark}' (see the logs)")
        self.final_logs = self.logs()
        return problems


# ---------------------------------------------------------------------------
# The HTTP client.

NOBODY = object()


def multipart(parts, boundary=None):
    """Encode parts [(name, filename or None, bytes, content_type or None)] in order."""
    boundary = boundary or "paddock" + secrets.token_hex(12)
    out = []
    for name, filename, data, ctype in parts:
        disp = f'form-data; name="{name}"'
        if filename is not None:
            disp += f'; filename="{filename}"'
        head = f"--{boundary}\r\nContent-Disposition: {disp}\r\n"
        if ctype:
            head += f"Content-Type: {ctype}\r\n"
        out.append(head.encode() + b"\r\n" + data + b"\r\n")
    out.append(f"--{boundary}--\r\n".encode())
    return b"".join(out), f"multipart/form-data; boundary={boundary}"


class ExecResult(types.SimpleNamespace):
    """stdout, stderr, rc, files, tool_use_id, time_ms, body (the whole response)."""


TOOLS = ("code_execution", "bash_code_execution", "text_editor_code_execution")


def check_exec_body(body, tool, tool_use_id=None):
    """The Execute envelope as OTARI.md fixes it; returns an ExecResult."""
    assert isinstance(body, dict)
    block = body["result_block"]
    assert block["type"] == f"{tool}_tool_result", block["type"]
    assert body["tool_use_id"] == block["tool_use_id"], (body["tool_use_id"], block["tool_use_id"])
    if tool_use_id is not None:
        assert body["tool_use_id"] == tool_use_id
    content = block["content"]
    assert isinstance(content, dict), "result_block.content must be one object"
    assert content.get("type") == "code_execution_result", content.get("type")
    assert "error_code" not in content and "error_code" not in block and "error" not in body
    for k in ("stdout", "stderr"):
        assert isinstance(content.get(k), str), f"{k} is {content.get(k)!r}, not a string"
    assert isinstance(content.get("return_code"), int), content.get("return_code")
    assert isinstance(content.get("content"), list), "the file list must always be present"
    for f in content["content"]:
        assert f.get("type") == "code_execution_output", f
        assert isinstance(f["file_id"], str) and f["file_id"], f
        assert isinstance(f["filename"], str) and f["filename"], f
    t = body.get("execution_time_ms")
    assert isinstance(t, int) and t >= 0, f"execution_time_ms is {t!r}"
    return ExecResult(stdout=content["stdout"], stderr=content["stderr"], rc=content["return_code"],
                      files=content["content"], tool_use_id=body["tool_use_id"], time_ms=t, body=body)


class Client:
    """HTTP client for one stack; every answer is checked by check_response()."""

    def __init__(self, stack, token=None, headers=None, timeout=120):
        self.stack = stack
        self.base = stack.base_url
        self.timeout = timeout
        self.headers = dict(headers or {})
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        self.http = requests.Session()

    def clone(self, **kw):
        """A client with its own connection pool (one per thread)."""
        c = Client(self.stack, timeout=self.timeout)
        c.headers = dict(self.headers)
        c.headers.update(kw.get("headers") or {})
        return c

    def request(self, method, path, *, check=True, **kw):
        headers = dict(self.headers)
        headers.update(kw.pop("headers", None) or {})
        kw.setdefault("timeout", self.timeout)
        r = self.http.request(method, self.base + path, headers=headers, **kw)
        r.parsed = None
        if check:
            r.parsed = check_response(r.status_code, r.headers, r.content, method, path,
                                      self.stack.bearer)
        return r

    def raw(self, method, path, body=b"", headers=None, check=True, timeout=None):
        """Send path exactly as given (no client-side normalisation); returns a
        SimpleNamespace(status, headers, body, parsed)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.stack.port, timeout=timeout or self.timeout)
        try:
            h = dict(self.headers)
            h.update(headers or {})
            conn.putrequest(method, path, skip_accept_encoding=True)
            for k, v in h.items():
                conn.putheader(k, v)
            if body or method in ("POST", "PUT"):
                conn.putheader("Content-Length", str(len(body)))
            conn.endheaders(body if body else None)
            resp = conn.getresponse()
            data = resp.read()
            hdrs = requests.structures.CaseInsensitiveDict(resp.getheaders())
            status = resp.status
        finally:
            conn.close()
        parsed = check_response(status, hdrs, data, method, path, self.stack.bearer) if check else None
        return types.SimpleNamespace(status=status, headers=hdrs, body=data, parsed=parsed,
                                     status_code=status)

    # CreateSession / DestroySession
    def create(self, body=NOBODY, **kw):
        if body is not NOBODY:
            kw["json"] = body
        r = self.request("POST", "/sessions", **kw)
        if r.status_code == 201:
            self.stack.session_ids.add(r.parsed["session_id"])
        return r

    def new_session(self, **body):
        r = self.create(body if body else NOBODY)
        assert r.status_code == 201, f"create: {r.status_code} {r.text[:300]}"
        return r.parsed["session_id"]

    def destroy(self, sid):
        return self.request("DELETE", f"/sessions/{sid}")

    # Execute
    def exec(self, sid, tool, input, **fields):
        body = {"tool": tool, "input": input}
        body.update(fields)
        return self.request("POST", f"/sessions/{sid}/exec", json=body)

    def exec_ok(self, sid, tool, input, **fields):
        r = self.exec(sid, tool, input, **fields)
        assert r.status_code == 200, f"exec: {r.status_code} {r.text[:500]}"
        return check_exec_body(r.parsed, tool, fields.get("tool_use_id"))

    def run(self, sid, code, **fields):
        return self.exec_ok(sid, "code_execution", {"code": code}, **fields)

    def bash(self, sid, command, **fields):
        return self.exec_ok(sid, "bash_code_execution", {"command": command}, **fields)

    def edit(self, sid, **input):
        return self.exec_ok(sid, "text_editor_code_execution", input)

    # Files
    def list_files(self, sid, path=None):
        params = {} if path is None else {"path": path}
        return self.request("GET", f"/sessions/{sid}/files/list", params=params)

    def get_file(self, sid, path=None, file_id=None, **kw):
        params = {}
        if path is not None:
            params["path"] = path
        if file_id is not None:
            params["file_id"] = file_id
        return self.request("GET", f"/sessions/{sid}/files", params=params, **kw)

    def put_file(self, sid, data, filename="upload.bin", path=None, path_first=False, **kw):
        file_part = ("file", filename, data, "application/octet-stream")
        parts = [file_part]
        if path is not None:
            path_part = ("path", None, path.encode() if isinstance(path, str) else path, None)
            parts = [path_part, file_part] if path_first else [file_part, path_part]
        body, ctype = multipart(parts)
        headers = {"Content-Type": ctype}
        headers.update(kw.pop("headers", None) or {})
        return self.request("POST", f"/sessions/{sid}/files", data=body, headers=headers, **kw)


def wait_for(predicate, timeout, what, interval=0.05):
    """Poll predicate() until it is truthy (returns its value) or fail after timeout s."""
    deadline = time.monotonic() + timeout
    while True:
        v = predicate()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)
