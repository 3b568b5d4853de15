# SPDX-License-Identifier: MIT
"""The interpreter harnesses, driven directly the way sessiond drives them.

No sandbox needed: each harness runs as a child with fd 0 = /dev/null,
fd 1 and 2 = pipes, fd 3 = one end of a socketpair, in its own process group
(so SIGINT goes to the group, as sessiond sends it on a timeout).
"""

import json
import os
import re
import selectors
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

SOURCE_DIR = Path(os.environ.get("PADDOCK_SOURCE_DIR", Path(__file__).resolve().parents[2]))
HARNESS_DIR = SOURCE_DIR / "sessiond" / "harness"
# The build's lib dir: the harnesses as sessiond's sandboxes get them, with bytecode.
BUILD_LIB = Path(os.environ.get("PADDOCK_BUILD_DIR", SOURCE_DIR / "build")) / "lib"
PYTHON_ARGV = ["/usr/bin/python3", "-I", "-S", "-B", "-X", "utf8", str(HARNESS_DIR / "harness.py")]
BASH_ARGV = ["/bin/bash", "--noprofile", "--norc", str(HARNESS_DIR / "harness.bash")]
REPLY_TIMEOUT = float(os.environ.get("HARNESS_REPLY_TIMEOUT", 20))


class Harness:
    """One harness process and its three channels."""

    def __init__(self, argv, terminator):
        self.terminator = terminator
        self.ctl, child_ctl = socket.socketpair()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        self.pid = os.posix_spawn(argv[0], argv, dict(os.environ), setsid=True, file_actions=[
            (os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
            (os.POSIX_SPAWN_DUP2, out_w, 1),
            (os.POSIX_SPAWN_DUP2, err_w, 2),
            (os.POSIX_SPAWN_DUP2, child_ctl.fileno(), 3),
        ])
        for fd in (out_w, err_w):
            os.close(fd)
        child_ctl.close()
        self.out, self.err = out_r, err_r
        for fd in (self.out, self.err):
            os.set_blocking(fd, False)
        self.status = None

    def send(self, payload):
        self.ctl.sendall(payload + self.terminator)

    def receive(self):
        """Wait for one reply line; return (reply bytes or None at EOF, stdout, stderr)."""
        chunks = {self.out: [], self.err: []}
        reply = b""
        deadline = time.monotonic() + REPLY_TIMEOUT
        with selectors.DefaultSelector() as sel:
            sel.register(self.ctl, selectors.EVENT_READ)
            for fd in chunks:
                sel.register(fd, selectors.EVENT_READ)
            while not reply.endswith(b"\n"):
                left = deadline - time.monotonic()
                assert left > 0, "no reply from the harness"
                for key, _ in sel.select(left):
                    if key.fileobj is self.ctl:
                        data = self.ctl.recv(65536)
                        if not data:
                            return None, *self._drain(chunks)
                        reply += data
                    else:
                        self._read_some(key.fileobj, chunks)
        return reply, *self._drain(chunks)

    def _read_some(self, fd, chunks):
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            return False
        chunks[fd].append(data)
        return bool(data)

    def _drain(self, chunks):
        # What sessiond does once the reply is in: take what the pipes hold.
        for fd in chunks:
            while self._read_some(fd, chunks):
                pass
        return b"".join(chunks[self.out]), b"".join(chunks[self.err])

    def interrupt(self):
        os.killpg(self.pid, signal.SIGINT)

    def wait(self, timeout=10.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = os.waitstatus_to_exitcode(status)
                return self.status
            time.sleep(0.01)
        raise AssertionError("harness did not exit")

    def close(self):
        self.ctl.close()
        if self.status is None:
            try:
                self.wait(timeout=3)
            except AssertionError:
                os.killpg(self.pid, signal.SIGKILL)
                self.wait()
        for fd in (self.out, self.err):
            os.close(fd)


class PythonHarness(Harness):
    def __init__(self):
        super().__init__(PYTHON_ARGV, b"\n")

    def run(self, code, mode="otari"):
        """Return (reply dict, stdout text, stderr text)."""
        self.send(json.dumps({"code": code, "mode": mode}).encode())
        return self.finish()

    def finish(self):
        reply, out, err = self.receive()
        assert reply is not None, "harness closed the channel: " + err.decode(errors="replace")
        return json.loads(reply), out.decode(), err.decode()


class BashHarness(Harness):
    def __init__(self):
        super().__init__(BASH_ARGV, b"\0")

    def run(self, command):
        """Return (exit status, stdout text, stderr text)."""
        self.send(command.encode())
        return self.finish()

    def finish(self):
        reply, out, err = self.receive()
        assert reply is not None, "harness closed the channel: " + err.decode(errors="replace")
        return int(reply), out.decode(), err.decode()


@pytest.fixture
def py():
    harness = PythonHarness()
    yield harness
    harness.close()


@pytest.fixture
def sh():
    harness = BashHarness()
    yield harness
    harness.close()


def assert_no_harness_frames(text):
    # harness.py (the entry point) or harness_native.py (the code).
    assert not re.search(r"harness\w*\.py", text), text


# ------------------------------------------------------------------ Python

def test_globals_persist_and_cell_echoes_last_expression(py):
    reply, out, err = py.run("x = 41")
    assert reply == {"status": "ok", "return_code": 0, "result": None, "error": None}
    reply, _, _ = py.run("x + 1", mode="cell")
    assert reply["result"] == {"text/plain": "42"}
    assert reply["status"] == "ok"


def test_otari_mode_does_not_echo(py):
    reply, out, err = py.run("1 + 1")
    assert reply["result"] is None and out == "" and err == ""


def test_cell_mode_echo_rules(py):
    assert py.run("None", mode="cell")[0]["result"] is None
    assert py.run("y = 3", mode="cell")[0]["result"] is None
    assert py.run("if True:\n    y", mode="cell")[0]["result"] is None
    reply, out, _ = py.run("print('p')\n'x' * 3", mode="cell")
    assert out == "p\n"
    assert reply["result"] == {"text/plain": "'xxx'"}


def test_main_module_is_user_namespace(py):
    reply, out, err = py.run(
        "import pickle, sys\n"
        "class Point:\n    pass\n"
        "print(__name__, sys.modules['__main__'].Point is Point)\n"
        "print(type(pickle.loads(pickle.dumps(Point()))).__name__)")
    assert (reply["return_code"], out) == (0, "__main__ True\nPoint\n"), err


def test_traceback_has_no_harness_frames(py):
    reply, out, err = py.run("def f():\n    return 1 / 0\n\nf()")
    assert reply["status"] == "error" and reply["return_code"] == 1
    assert err.startswith("Traceback (most recent call last):\n")
    assert 'File "<cell-' in err and "return 1 / 0" in err
    assert err.endswith("ZeroDivisionError: division by zero\n")
    assert_no_harness_frames(err)
    assert reply["error"]["ename"] == "ZeroDivisionError"


def test_cell_sources_reach_linecache_once_it_is_loaded(py):
    # Before linecache is imported, cells are remembered; from the cell after
    # its import, each new cell is added alone, and all of them again after the
    # user clears it.
    py.run("def early():\n    raise KeyError('early cell')")
    py.run("import linecache, traceback")
    reply, out, err = py.run(
        "def later():\n    return early()\n"
        "try:\n    later()\nexcept KeyError:\n    print(traceback.format_exc())")
    assert reply["return_code"] == 0, err
    assert "raise KeyError('early cell')" in out and "return early()" in out
    py.run("x = 1")
    reply, out, err = py.run(
        "print(sorted(k for k in linecache.cache if k.startswith('<cell-')))")
    cells = eval(out)
    assert len(cells) == 5, out
    py.run("linecache.clearcache()")
    reply, out, err = py.run("later()")
    assert reply["return_code"] == 1
    assert "raise KeyError('early cell')" in err and "return early()" in err, err


def test_cell_mode_error_goes_to_reply_not_stderr(py):
    reply, out, err = py.run("raise ValueError('bad')", mode="cell")
    assert err == ""
    assert reply["status"] == "error" and reply["return_code"] == 1
    error = reply["error"]
    assert (error["ename"], error["evalue"]) == ("ValueError", "bad")
    assert error["traceback"][0] == "Traceback (most recent call last):"
    assert error["traceback"][-1] == "ValueError: bad"
    assert_no_harness_frames("\n".join(error["traceback"]))


def test_syntax_error(py):
    reply, out, err = py.run("x = (\n")
    assert reply["return_code"] == 1
    assert "SyntaxError" in err and "<cell-" in err
    assert_no_harness_frames(err)
    reply, _, _ = py.run("def f(:\n  pass", mode="cell")
    assert reply["error"]["ename"] == "SyntaxError"


def test_sys_exit_sets_return_code_and_interpreter_survives(py):
    py.run("kept = 'yes'")
    reply, out, err = py.run("import sys\nsys.exit(3)")
    assert reply["return_code"] == 3 and reply["status"] == "error"
    assert err == ""
    assert py.run("raise SystemExit")[0]["return_code"] == 0
    reply, _, err = py.run("raise SystemExit('goodbye')")
    assert reply["return_code"] == 1 and err == "goodbye\n"
    reply, out, _ = py.run("print(kept)")
    assert out == "yes\n"


def test_subprocess_output_lands_on_stdout(py):
    reply, out, err = py.run("import os\nos.system('echo hi; echo oops >&2')")
    assert out == "hi\n" and err == "oops\n"


def test_output_order_and_flush_before_reply(py):
    code = ("import os, sys\n"
            "print('a')\n"
            "os.system('echo b')\n"
            "print('c', end='')\n"
            "sys.stderr.write('partial')")
    reply, out, err = py.run(code)
    assert out == "a\nb\nc"
    assert err == "partial"


def test_sigint_interrupts_and_keeps_state(py):
    py.run("state = [1, 2, 3]")
    py.send(json.dumps({"code": "import time\ntime.sleep(100)", "mode": "otari"}).encode())
    time.sleep(0.5)
    started = time.monotonic()
    py.interrupt()
    reply, out, err = py.finish()
    assert time.monotonic() - started < 5
    assert reply["return_code"] == 130
    assert "KeyboardInterrupt" in err and "time.sleep(100)" in err
    assert_no_harness_frames(err)
    assert py.run("print(sum(state))")[1] == "6\n"


def test_sigint_interrupts_a_busy_loop_in_cell_mode(py):
    py.send(json.dumps({"code": "while True:\n    pass", "mode": "cell"}).encode())
    time.sleep(0.5)
    py.interrupt()
    reply, out, err = py.finish()
    assert reply["return_code"] == 130 and reply["error"]["ename"] == "KeyboardInterrupt"
    assert err == ""


def test_sigint_while_idle_is_ignored(py):
    py.run("n = 5")
    py.interrupt()
    time.sleep(0.2)
    assert py.run("print(n)")[1] == "5\n"


def test_user_code_cannot_break_the_protocol(py):
    code = ("import builtins, sys, io, os\n"
            "sys.modules['json'] = None\n"
            "for name in ('print', 'len', 'repr', 'isinstance', 'exec', 'compile', 'str'):\n"
            "    delattr(builtins, name)\n"
            "sys.stdout = io.StringIO()\n"
            "sys.stderr = None\n"
            "os.read = os.write = None\n"
            "os.close(3) if False else None\n")
    reply, out, err = py.run(code)
    assert reply["return_code"] == 0, err
    reply, _, err = py.run("1 / 0")
    assert reply["return_code"] == 1 and "ZeroDivisionError" in err
    reply, _, _ = py.run("6 * 7", mode="cell")
    assert reply["result"] == {"text/plain": "42"}


def test_fd3_is_free_for_user_code(py):
    reply, out, err = py.run("import os\nf = open('/dev/null')\nprint(f.fileno())\nos.close(f.fileno())")
    assert (reply["return_code"], out) == (0, "3\n"), err
    assert py.run("print('still here')")[1] == "still here\n"


def test_control_fd_is_not_inherited(py):
    reply, out, err = py.run("import os\nos.system('ls /proc/self/fd')")
    assert reply["return_code"] == 0, err
    assert "63" not in out.split()


def test_non_ascii_source_and_output(py):
    reply, out, err = py.run("s = 'héllo ✓ 日本'\nprint(s)\ns", mode="cell")
    assert out == "héllo ✓ 日本\n"
    assert reply["result"] == {"text/plain": "'héllo ✓ 日本'"}


def test_forked_child_does_not_answer(py):
    code = ("import os\n"
            "pid = os.fork()\n"
            "print('parent' if pid else 'child')\n"
            "if pid:\n"
            "    print('child exit', os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))")
    reply, out, err = py.run(code)
    assert reply["return_code"] == 0, err
    assert sorted(out.splitlines()) == ["child", "child exit 0", "parent"]
    # Exactly one reply came: the next request gets its own.
    assert py.run("print('next')")[1] == "next\n"


def zombie_children(pid):
    """Pids of pid's children that have exited and were not waited for."""
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            try:
                state = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if state == "Z":
                found.append(int(child))
    return found


def test_reap_collects_dead_children_left_by_a_killed_run(py):
    # Children forked by user code and killed from outside (as sessiond kills what a
    # timed-out run left behind) are the harness's zombies until it waits for them.
    reply, out, err = py.run("import os, time\n"
                             "kids = []\n"
                             "for _ in range(3):\n"
                             "    pid = os.fork()\n"
                             "    if pid == 0:\n"
                             "        time.sleep(60)\n"
                             "        os._exit(0)\n"
                             "    kids.append(pid)\n"
                             "print(' '.join(map(str, kids)))")
    assert reply["return_code"] == 0, err
    kids = [int(k) for k in out.split()]
    for k in kids:
        os.kill(k, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while len(zombie_children(py.pid)) < len(kids) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sorted(zombie_children(py.pid)) == sorted(kids)
    # A request without the flag leaves them to user code; one with it collects them.
    assert py.run("pass")[0]["return_code"] == 0
    assert len(zombie_children(py.pid)) == len(kids)
    py.send(json.dumps({"code": "print('after')", "reap": True}).encode())
    reply, out, err = py.finish()
    assert out == "after\n", err
    assert zombie_children(py.pid) == []


def test_protocol_errors_are_answered(py):
    py.send(b"this is not json")
    reply, out, err = py.finish()
    assert reply["error"]["ename"] == "ProtocolError"
    py.send(b'{"code": 1}')
    assert py.finish()[0]["error"]["ename"] == "ProtocolError"
    assert py.run("print('ok')")[1] == "ok\n"


def test_eof_ends_the_python_harness(py):
    py.run("x = 1")
    py.ctl.shutdown(socket.SHUT_WR)
    assert py.wait() == 0


# ------------------------------------------------------------------ bash

def test_bash_state_persists(sh):
    assert sh.run("cd /tmp && export GREETING=hello && declare -A m=([k]=v)")[0] == 0
    status, out, err = sh.run('pwd; echo "$GREETING ${m[k]}"')
    assert (status, out, err) == (0, "/tmp\nhello v\n", "")


def test_bash_exit_status_and_stderr(sh):
    assert sh.run("false")[0] == 1
    status, out, err = sh.run("echo out; echo err >&2; (exit 4)")
    assert (status, out, err) == (4, "out\n", "err\n")
    status, out, err = sh.run("no_such_command_here")
    assert status == 127 and "no_such_command_here: command not found" in err
    assert "line 1:" in err


def test_bash_command_bytes_are_kept(sh):
    status, out, _ = sh.run("printf '%s|' 'a\\tb' \"two  spaces\"\necho\necho $((6 * 7))")
    assert out == "a\\tb|two  spaces|\n42\n"


def test_bash_exit_ends_the_process(sh):
    sh.send(b"exit 7")
    reply, _, _ = sh.receive()
    assert reply is None
    assert sh.wait() == 7


def test_bash_sigint_stops_command_and_keeps_state(sh):
    sh.run("cd /tmp; KEEP=1")
    sh.send(b"sleep 100; echo not-reached")
    time.sleep(0.5)
    started = time.monotonic()
    sh.interrupt()
    status, out, err = sh.finish()
    assert time.monotonic() - started < 5
    assert status == 130 and "not-reached" not in out
    assert sh.run("echo $KEEP $PWD")[1] == "1 /tmp\n"
    # And the next interruption works too.
    sh.send(b"while :; do :; done")
    time.sleep(0.3)
    sh.interrupt()
    assert sh.finish()[0] == 130


def test_bash_sigint_in_function_keeps_harness_responsive(sh):
    sh.send(b"f() { sleep 100; }; f")
    time.sleep(0.5)
    sh.interrupt()
    assert sh.finish()[0] == 130
    sh.send(b"sleep 100")
    time.sleep(0.3)
    sh.interrupt()
    assert sh.finish()[0] == 130
    assert sh.run("echo alive")[1] == "alive\n"


def test_bash_sigint_while_idle_is_ignored(sh):
    sh.run("V=9")
    sh.interrupt()
    time.sleep(0.2)
    assert sh.run("echo $V")[1] == "9\n"


def test_bash_user_fd3_does_not_break_protocol(sh):
    status, out, err = sh.run("exec 3>&-; echo closed")
    assert (status, out) == (0, "closed\n")
    sh.run("exec 3>/dev/null; echo x >&3")
    assert sh.run("echo fine")[1] == "fine\n"


def test_bash_control_fd_is_not_inherited(sh):
    status, out, _ = sh.run("ls /proc/self/fd")
    assert "63" not in out.split()


def test_bash_set_x_traces_only_user_commands(sh):
    sh.run("set -x")
    status, out, err = sh.run("echo traced")
    assert out == "traced\n"
    assert "echo traced" in err and "__paddock" not in err
    sh.run("set +x")
    assert sh.run("echo quiet")[2] == ""


def test_eof_ends_the_bash_harness(sh):
    sh.run("true")
    sh.ctl.shutdown(socket.SHUT_WR)
    assert sh.wait() == 0


def test_python_request_id_is_echoed_first(py):
    py.send(json.dumps({"id": 17, "code": "print('x')", "mode": "otari"}).encode())
    reply, out, err = py.receive()
    assert reply.startswith(b'{"id":17,')
    assert json.loads(reply)["return_code"] == 0 and out == b"x\n"


def test_python_started_like_sessiond_does():
    # sessiond's table may pass -u instead of -B -X utf8: same behaviour.
    harness = Harness(["/usr/bin/python3", "-I", "-S", "-u", str(HARNESS_DIR / "harness.py")], b"\n")
    try:
        harness.send(json.dumps({"code": "import sys\nprint('é', sys.dont_write_bytecode)"}).encode())
        reply, out, err = harness.receive()
        assert json.loads(reply)["return_code"] == 0 and out.decode() == "é True\n"
    finally:
        harness.close()


def run_verbose(lib_dir):
    """Start the native harness from lib_dir under python3 -v and run one cell; return
    its reply, its output and the import log (stderr)."""
    argv = ["/usr/bin/python3", "-v", "-I", "-S", "-B", "-X", "utf8", str(lib_dir / "harness.py")]
    harness = Harness(argv, b"\n")
    try:
        harness.send(json.dumps({"code": "print(2 + 2)"}).encode())
        reply, out, err = harness.receive()
    finally:
        harness.close()
    return json.loads(reply), out.decode(), err.decode()


NATIVE_MODULES = ("harness_native", "harness_channel")


def test_native_harness_runs_from_the_builds_bytecode():
    """harness.py imports harness_native (and it harness_channel), whose bytecode the
    build made: the interpreter takes the code objects from __pycache__ instead of
    compiling the source."""
    reply, out, log = run_verbose(BUILD_LIB)
    assert reply["return_code"] == 0 and out == "4\n", log[-2000:]
    for module in NATIVE_MODULES:
        pycs = list((BUILD_LIB / "__pycache__").glob(f"{module}.*.pyc"))
        assert len(pycs) == 1, f"no bytecode for {module} in {BUILD_LIB}"
        assert f"code object from '{pycs[0]}'" in log, log[-3000:]


def test_native_harness_compiles_its_source_when_the_bytecode_is_stale(tmp_path):
    """The control: the same files, the source changed after the bytecode was made. The
    hash check refuses the bytecode, the source is compiled, the harness answers alike."""
    for name in ("harness",) + NATIVE_MODULES:
        shutil.copy(BUILD_LIB / f"{name}.py", tmp_path / f"{name}.py")
    shutil.copytree(BUILD_LIB / "__pycache__", tmp_path / "__pycache__")
    with open(tmp_path / "harness_native.py", "a", encoding="utf-8") as f:
        f.write("# changed after the bytecode was made\n")
    reply, out, log = run_verbose(tmp_path)
    assert reply["return_code"] == 0 and out == "4\n", log[-2000:]
    assert f"code object from {tmp_path / 'harness_native.py'}" in log, log[-3000:]
    stale = str(tmp_path / "__pycache__" / "harness_native.")
    assert "code object from '" + stale not in log, log[-3000:]


def test_harness_directory_and_module_are_hidden_from_user_code(py):
    """The entry point puts its directory on sys.path only for its own import and drops
    the module from sys.modules, as when the harness itself ran as __main__."""
    reply, out, err = py.run("import sys\nprint(any('harness' in p for p in sys.path))\n"
                             "print(sorted(m for m in sys.modules if m.startswith('harness')))")
    assert reply["return_code"] == 0, err
    assert out == "False\n[]\n", out


SITE_PROBE = """
import builtins, os, site, sys
dirs = [d for d in site.getsitepackages() if os.path.isdir(d)]
print(sys.flags.no_site, [p for p in sys.path if p in dirs] == dirs)
print(all(callable(getattr(builtins, n, None)) for n in ("exit", "quit", "help", "copyright")))
print("_distutils_hack" in sys.modules)
import yaml
print(yaml.__file__.startswith(tuple(dirs)))
"""


def test_site_directories_without_pth_files(py):
    """Started with -S, the harness puts Debian's dist-packages on sys.path and gives
    user code exit/quit/help as site would, but runs none of the host's .pth files
    (python3-setuptools' distutils-precedence.pth imports _distutils_hack)."""
    reply, out, err = py.run(SITE_PROBE)
    assert reply["return_code"] == 0, err
    assert out.splitlines() == ["1 True", "True", "False", "True"], out


def test_site_runs_the_pth_files_without_the_harness():
    """The control for the test above: the same probe in a plain `python3 -I`."""
    if not os.path.exists("/usr/lib/python3/dist-packages/distutils-precedence.pth"):
        pytest.skip("python3-setuptools' .pth file is not installed")
    r = subprocess.run(["/usr/bin/python3", "-I", "-c", SITE_PROBE], capture_output=True, text=True,
                       timeout=60)
    assert r.stdout.splitlines() == ["0 True", "True", "True", "True"], r.stdout + r.stderr


def test_bash_request_id(sh):
    sh.send(b"42\necho $LINENO; false")
    reply, out, err = sh.receive()
    assert (reply, out) == (b"42 1\n", b"1\n")
    sh.send(b"7\n:")
    assert sh.receive()[0] == b"7 0\n"
    # Without an id line, the reply is the bare status.
    assert sh.run("echo 12345")[1] == "12345\n"
