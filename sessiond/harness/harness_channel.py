# SPDX-License-Identifier: MIT
"""The control side the Python harnesses share (docs/harness-protocol.md).

The control socket moved out of user code's way, newline-delimited requests in,
the checks every request passes, one reply line out per request, the loop that
serves them, and the reaping of dead children sessiond asks for. harness_native.py, harness_kernel.py and harness_endpoint.py import it from
their own directory (each takes the directory off sys.path again, and the
module out of sys.modules, before user code runs).

Only builtins and os are imported: the native harness loads this at every
start. The OS calls go through references taken at import, and builtins are
looked up in a snapshot taken then, before any user code runs: user code that
rebinds os.read or deletes len cannot break the channel.
"""

import builtins
import os

import _signal
import _thread

__builtins__ = dict(builtins.__dict__)

CTL_FD_IN = 3        # where init (or sessiond, for the endpoint bridge) hands it over
CTL_FD = 63          # where the harness keeps it, out of the way of user code
READ_CHUNK = 1 << 16
# Code is capped at 32 MiB by the API; JSON escaping can grow any byte to at
# most six ("\u001f"), so this bound admits every legal request.
MAX_REQUEST_BYTES = 6 * (32 << 20) + 4096

_read = os.read
_write = os.write
_waitpid = os.waitpid
_WNOHANG = os.WNOHANG
_getpid = os.getpid
_exit = os._exit
_PID = os.getpid()
_sigmask = _signal.pthread_sigmask
_BLOCK_SIGINT = {_signal.SIGINT}
# A programmatic tool's answer: the only line sessiond sends that is not a request.
TOOL_RESULT_PREFIX = b'{"tool_result"'


class Channel:
    """Newline-delimited requests in, replies out, on the control socket; encode
    turns a reply into one line of JSON text."""

    TOO_LARGE = object()

    def __init__(self, fd, encode):
        self.fd = fd
        self.encode = encode
        self.buf = bytearray()
        self.send_lock = _thread.allocate_lock()
        self.call_lock = _thread.allocate_lock()

    def read_request(self):
        """Return the next line (bytes), TOO_LARGE, or None at end of file."""
        too_large = False
        scanned = 0
        while True:
            newline = self.buf.find(b"\n", scanned)
            if newline >= 0:
                line = bytes(self.buf[:newline])
                del self.buf[:newline + 1]
                return self.TOO_LARGE if too_large else line
            if len(self.buf) > MAX_REQUEST_BYTES:
                # Keep memory bounded: drop the line, answer it with an error.
                too_large = True
                self.buf.clear()
            scanned = len(self.buf)
            chunk = _read(self.fd, READ_CHUNK)
            if not chunk:
                return None
            self.buf += chunk

    def send(self, reply):
        self.send_text(self.encode(reply))

    def send_text(self, text):
        # A lone surrogate cannot be encoded in UTF-8; "?" keeps the line valid.
        data = memoryview((text + "\n").encode("utf-8", "replace"))
        # Whole lines only: the deadline's SIGINT waits until the line is out (a cut one
        # would swallow the reply after it), and threads take turns.
        with self.send_lock:
            old = _sigmask(_signal.SIG_BLOCK, _BLOCK_SIGINT)
            try:
                while data:
                    data = data[_write(self.fd, data):]
            finally:
                _sigmask(_signal.SIG_SETMASK, old)

    def call_tool(self, name, arguments):
        """A programmatic tool call (docs/harness-protocol.md): (is_error, the content or
        the error's message). One at a time; other threads wait their turn."""
        import json   # only code that calls tools pays for it
        line = json.dumps({"event": "tool_call", "name": name, "input": arguments},
                          ensure_ascii=False, allow_nan=False)
        with self.call_lock:
            self.send_text(line)
            while True:
                got = self.read_request()
                if got is None or got is self.TOO_LARGE:
                    return True, "the tool channel closed"
                if got.startswith(TOOL_RESULT_PREFIX):
                    result = json.loads(got)["tool_result"]
                    if result.get("is_error"):
                        return True, str(result.get("error"))
                    return False, result.get("content")


def request_fields(request):
    """(id, code, cell, reap) of a decoded request; ValueError, whose message is the
    protocol error's, when it is not one."""
    if not isinstance(request, dict):
        raise ValueError("a request is a JSON object")
    code = request.get("code")
    mode = request.get("mode", "otari")
    if not isinstance(code, str):
        raise ValueError("'code' must be a string")
    if mode not in ("otari", "cell"):
        raise ValueError("'mode' must be 'otari' or 'cell'")
    request_id = request.get("id")
    if request_id is not None and (isinstance(request_id, bool)
                                   or not isinstance(request_id, (int, str))):
        raise ValueError("'id' must be an integer or a string")
    return request_id, code, mode == "cell", request.get("reap") is True


def take_control_fd():
    """Move the control socket to CTL_FD, close-on-exec, and free fd 3.

    Subprocesses then never inherit it (they could write to it by mistake), and
    user code that opens files gets fd 3 as usual.
    """
    os.dup2(CTL_FD_IN, CTL_FD, inheritable=False)
    os.close(CTL_FD_IN)

    def close_in_child():
        # A forked child (multiprocessing, os.fork) must not hold the channel.
        try:
            os.close(CTL_FD)
        except OSError:
            pass

    os.register_at_fork(after_in_child=close_in_child)
    return CTL_FD


_tools_module = None


def apply_tools(channel, request):
    """Give user code the session's programmatic tools, when the request lists them:
    the _platform_tools module (this directory's), loaded on first use, its calls going
    over channel."""
    global _tools_module
    tools = request.get("tools")
    if not isinstance(tools, list):
        return
    if _tools_module is None:
        import sys
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        try:
            import _platform_tools
        finally:
            del sys.path[0]
        _platform_tools.__paddock_call__ = channel.call_tool
        _tools_module = _platform_tools
    _tools_module.__paddock_set_tools__(tools)


def reap_children():
    """Collect this process's dead children. sessiond asks for it after it killed
    what a timed-out run left behind: those children are ours to wait for, and
    until then each holds a pid of the session's limit."""
    while True:
        try:
            pid, _ = _waitpid(-1, _WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def serve(channel, handle, flush):
    """Answer requests until the channel ends, then end the process.

    handle(line) returns the reply; flush() pushes what user code wrote through
    Python into the pipes, before each reply (sessiond reads the pipes dry once
    the reply is in) and at the end.
    """
    while True:
        try:
            line = channel.read_request()
        except OSError:
            break          # user code closed or broke the channel
        if line is None:
            break          # sessiond closed the channel: we are done
        if line is not Channel.TOO_LARGE and line.startswith(TOOL_RESULT_PREFIX):
            continue       # the answer to a tool call its deadline interrupted
        reply = handle(line)
        flush()
        if _getpid() != _PID:
            # User code forked and the child came back here: it must not
            # answer requests meant for the parent.
            _exit(reply["return_code"])
        try:
            channel.send(reply)
        except OSError:
            break
    flush()
    # os._exit: do not wait for user threads or run user atexit hooks.
    _exit(0)
