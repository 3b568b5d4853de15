# SPDX-License-Identifier: MIT
"""paddock's kernel-tier Python harness: IPython semantics, driven over fd 3.

The sandbox's init starts it, unprivileged, in /workspace, as

    /usr/bin/python3 -I -u /opt/paddock/harness_kernel.py

for sessions created with "kernel": true. It speaks the protocol of harness.py
(docs/harness-protocol.md): one JSON request line in, {"code", "mode"}, one
JSON reply line out, {"status", "return_code", "result", "error", "display"}.

Cells run in one in-process IPython InteractiveShell (no ZMQ kernel: the
daemon is the only client), so they get what a Jupyter kernel offers: magics
and shell escapes, rich reprs (a DataFrame's text/html), display(), and
matplotlib figures captured the way `%matplotlib inline` does, as PNG. Rich
output is collected in "display"; the last expression's mime bundle is the
"result". A SIGINT (the daemon's timeout) interrupts the cell and keeps the
namespace. User output goes to fd 1 and 2; never to the control socket.
"""

import os
import sys

# -I ignores PYTHONDONTWRITEBYTECODE: no .pyc files in the workspace either way.
sys.dont_write_bytecode = True


def set_environment():
    """Before IPython and matplotlib load: keep their caches and profiles out of the
    workspace (HOME is /workspace), and capture figures inline. (The kernel template,
    which imports this module on the host, calls it in each fork instead.)"""
    os.environ["IPYTHONDIR"] = "/tmp/.ipython"
    os.environ["MPLCONFIGDIR"] = "/tmp/.matplotlib"
    os.environ["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"


if __name__ == "__main__":
    set_environment()

import base64  # noqa: E402
import json  # noqa: E402
import signal  # noqa: E402

# The control side shared with the other harnesses, from this file's directory;
# neither the directory nor the module stays visible to user code.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    from harness_channel import (Channel, apply_tools, reap_children,  # noqa: E402
                                 request_fields, serve, take_control_fd)
finally:
    del sys.path[0]
del sys.modules["harness_channel"]

_displays = []         # display_data items of the running cell
_result = None         # the running cell's execute_result bundle
_error = None          # the running cell's error object
_cwd_applied = False
_channel = None        # the control socket's Channel
_stream_id = None      # the running cell's request id when its outputs stream, else None


# ---------------------------------------------------------------- JSON of mime bundles

def _encode_reply(reply):
    return json.dumps(reply, ensure_ascii=False, default=_jsonable_default)


def _jsonable_default(value):
    # Binary mime data (image/png from matplotlib) travels as bare base64, as in Jupyter.
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    return str(value)


def _is_binary_mime(key):
    return isinstance(key, str) and key.startswith(("image/", "application/pdf")) \
        and not key.startswith("image/svg")


def _bundle(data):
    """A mime bundle with JSON-safe values; keys must be strings."""
    if not isinstance(data, dict):
        return {"text/plain": repr(data)}
    out = {}
    for key, value in data.items():
        if isinstance(value, (bytes, bytearray, memoryview)):
            value = base64.b64encode(bytes(value)).decode("ascii")
        elif _is_binary_mime(key) and isinstance(value, str):
            # IPython hands some images over already encoded, in lines: make it bare.
            value = "".join(value.split())
        out[str(key)] = value
    return out


# ---------------------------------------------------------------- the shell

def _make_shell():
    from IPython.core.displayhook import DisplayHook
    from IPython.core.displaypub import DisplayPublisher
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    class Publisher(DisplayPublisher):
        """display(), rich reprs and inline figures: kept for the reply."""

        def publish(self, data, metadata=None, source=None, *, transient=None,
                    update=False, **kwargs):
            item = {"data": _bundle(data), "metadata": _bundle(metadata or {})}
            _displays.append(item)
            if _stream_id is not None:
                # Streamed as published; "event" first: sessiond tells it from a reply.
                try:
                    _channel.send({"event": "display", "id": _stream_id, **item})
                except OSError:
                    pass    # sessiond sees the channel's end on its own

        def clear_output(self, wait=False):
            _displays.clear()

    class Hook(DisplayHook):
        """The last expression's value: its whole mime bundle becomes the result."""

        def start_displayhook(self):
            pass

        def write_output_prompt(self):
            pass

        def write_format_data(self, format_dict, md_dict=None):
            global _result
            _result = _bundle(format_dict)

        def finish_displayhook(self):
            pass

    config = Config()
    config.HistoryManager.enabled = False
    config.InteractiveShell.colors = "NoColor"
    config.InteractiveShell.autocall = 0
    shell = InteractiveShell.instance(config=config)
    shell.display_pub = Publisher(shell=shell, parent=shell)
    hook = Hook(shell=shell, cache_size=shell.cache_size, parent=shell)
    shell.displayhook = hook
    shell.display_trap.hook = hook

    def show_traceback(etype, evalue, stb):
        global _error
        lines = "\n".join(stb).splitlines()
        _error = {"ename": getattr(etype, "__name__", "Error"),
                  "evalue": _safe_str(evalue), "traceback": lines}
    shell._showtraceback = show_traceback
    # The inline backend hooks itself into the shell when it is imported; one imported
    # before the shell was made (preloaded by the kernel template) is hooked now.
    inline = sys.modules.get("matplotlib_inline.backend_inline")
    if inline is not None:
        inline._enable_matplotlib_integration()
    return shell


def _safe_str(value):
    try:
        return str(value)
    except BaseException:
        return f"<{type(value).__name__} object: str() failed>"


def _flush_output():
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except BaseException:
            pass


def _run(shell, code, cell):
    """Run one cell; returns the reply."""
    global _result, _error
    _displays.clear()
    _result = None
    _error = None
    try:
        # SIGINT interrupts a running cell only; idle, it is ignored. The C handler
        # leaves no harness frame in the user's traceback.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        outcome = shell.run_cell(code, store_history=True)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except KeyboardInterrupt:
        # Landed in IPython's own machinery rather than in user code.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        outcome = None
        _error = {"ename": "KeyboardInterrupt", "evalue": "",
                  "traceback": ["KeyboardInterrupt"]}
    _flush_output()
    failed = _error is not None or (outcome is not None and not outcome.success)
    if failed and _error is None:
        exc = outcome.error_in_exec or outcome.error_before_exec
        _error = {"ename": type(exc).__name__, "evalue": _safe_str(exc),
                  "traceback": [f"{type(exc).__name__}: {_safe_str(exc)}"]}
    if failed and not cell:
        _print_error("\n".join(_error["traceback"]) + "\n")
    code_ = 0
    if failed:
        code_ = 130 if _error["ename"] == "KeyboardInterrupt" else 1
    return {"status": "error" if failed else "ok", "return_code": code_,
            "result": _result if cell and not failed else None,
            "error": _error if failed else None,
            "display": list(_displays) if cell else []}


def _print_error(text):
    try:
        sys.__stderr__.write(text)
        sys.__stderr__.flush()
    except BaseException:
        pass


def _protocol_error(message):
    return {"status": "error", "return_code": 1, "result": None, "display": [],
            "error": {"ename": "ProtocolError", "evalue": message,
                      "traceback": [f"ProtocolError: {message}"]}}


def _handle(shell, line):
    if line is Channel.TOO_LARGE:
        return _protocol_error("request larger than the harness accepts")
    try:
        request = json.loads(line.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        return _protocol_error(f"invalid request: {_safe_str(exc)}")
    try:
        request_id, code, cell, reap = request_fields(request)
    except ValueError as exc:
        return _protocol_error(str(exc))
    if reap:
        reap_children()
    apply_tools(_channel, request)
    global _stream_id
    _stream_id = request_id if request.get("stream") is True else None
    try:
        reply = _chdir_and_run(shell, request, code, cell)
    finally:
        _stream_id = None
    if request_id is not None:
        # First key: sessiond finds it without parsing the whole reply.
        reply = {"id": request_id, **reply}
    return reply


def _chdir_and_run(shell, request, code, cell):
    global _cwd_applied
    # An optional working directory, fixed when the interpreter takes its first cell.
    cwd = request.get("cwd")
    if not _cwd_applied and isinstance(cwd, str):
        try:
            os.chdir(os.path.join("/workspace", cwd))
        except OSError as exc:
            return _protocol_error(f"cannot change to {cwd}: {exc.strerror}")
    _cwd_applied = True
    return _run(shell, code, cell)


def make_shell():
    """The shell, made ahead (by the kernel template, before it forks)."""
    return _make_shell()


def _adopt_shell(shell):
    """A shell made in another process (the template, on the host): what it took from
    that process's environment is taken again from this one's."""
    from IPython.core.profiledir import ProfileDir
    shell.ipython_dir = os.environ["IPYTHONDIR"]
    shell.profile_dir = ProfileDir.create_profile_dir_by_name(shell.ipython_dir, "default")
    shell.starting_dir = os.getcwd()
    shell.home_dir = os.path.expanduser("~")
    shell.init_logger()
    shell.init_encoding()


def _warm_up(shell):
    """One silent cell before the first request. A fork of the kernel template shares the
    template's pages until it writes them, and a first cell writes a great many (every
    object it touches has its reference count changed): each is a copy-on-write fault.
    Here they are taken while the sandbox waits in the pool, not in the first call. A
    silent cell counts no execution and keeps no history."""
    shell.run_cell("pass", store_history=False, silent=True)
    # And the formatters a result goes through (a silent cell displays nothing).
    shell.display_formatter.format(0)


def main(shell=None):
    global _channel
    channel = _channel = Channel(take_control_fd(), _encode_reply)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if shell is None:
        shell = _make_shell()
    else:
        _adopt_shell(shell)
    _warm_up(shell)
    # Like the REPL: modules in the current directory (the workspace) import.
    sys.path.insert(0, "")
    serve(channel, lambda line: _handle(shell, line), _flush_output)


if __name__ == "__main__":
    main()
