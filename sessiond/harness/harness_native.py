# SPDX-License-Identifier: MIT
"""paddock's native Python harness: a persistent interpreter driven over fd 3.

The sandbox's init starts it, unprivileged, in /workspace, through its entry
point harness.py (which loads this module from its compiled bytecode and calls
main()), as

    /usr/bin/python3 -I -S -B -X utf8 /opt/paddock/harness.py

  -I       ignore PYTHON* variables and the user site directory, and keep the
           script's own directory off sys.path.
  -S       no `site` at startup: the harness then gives user code what site
           would (Debian's dist-packages on sys.path, exit/quit/help) without
           running the host's .pth files (see _setup_site).
  -B       never write .pyc files: the workspace must hold only what the user
           made (importing a module from /workspace would add __pycache__).
  -X utf8  UTF-8 for stdio, open() and file names whatever the locale is.

fd 0 is /dev/null; fd 1 and 2 are pipes read by sessiond; fd 3 is the control
socket. The protocol (one JSON line each way per request) is described in
docs/harness-protocol.md. User output never goes to the control socket.

Startup is kept short on purpose: `json`, `signal`, `ast` and `traceback` pull
in re, enum and friends and would double the interpreter's start time, so the
harness uses their C halves (_json, _signal, _ast) and imports traceback only
when it first has an exception to format.
"""

import builtins
import os
import sys

import _ast
import _json
import _signal

# From this directory, while the entry point has it on sys.path.
from harness_channel import (Channel, apply_tools, reap_children, request_fields,
                             serve, take_control_fd)

# Functions defined below look builtins up in this private snapshot, so user
# code that deletes or rebinds builtins (print, len, exec, ...) cannot break
# the harness. User code keeps the real builtins module.
__builtins__ = dict(builtins.__dict__)

# Cell sources larger than this are not kept for traceback source lines.
MAX_REMEMBERED_SOURCE = 1 << 20

# Private references taken before any user code runs.
_sys = sys
_write = os.write
_STDOUT = sys.stdout
_STDERR = sys.stderr

_running = False          # True while user code runs: SIGINT interrupts it
_cell_count = 0
_sources = {}             # "<cell-N>" -> source lines, for linecache
_synced_cache = [None]    # the linecache.cache all of _sources is in
_user_globals = None
_channel = None           # the control socket


# ---------------------------------------------------------------- JSON

class _ScannerContext:
    """The settings _json.make_scanner reads (what json.JSONDecoder holds)."""
    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = None   # NaN and Infinity are not valid requests
    memo = {}


_scan_json = _json.make_scanner(_ScannerContext)
_quote_json = _json.encode_basestring   # str -> '"..."', non-ASCII kept


def _parse_json(text):
    """Decode one JSON document, surrounding blanks allowed."""
    start = len(text) - len(text.lstrip())
    try:
        value, end = _scan_json(text, start)
    except StopIteration as stop:
        raise ValueError(f"invalid JSON at offset {stop.value}") from None
    if text[end:].strip():
        raise ValueError(f"trailing data at offset {end}")
    return value


def _dump_json(value):
    """Encode the few types a reply holds: dict, list, str, int, bool, None."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return _quote_json(value)
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, list):
        return "[" + ",".join(map(_dump_json, value)) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(_quote_json(k) + ":" + _dump_json(v)
                              for k, v in value.items()) + "}"
    raise TypeError(f"cannot encode {type(value).__name__}")


# ---------------------------------------------------------------- signals and output

def _on_sigint(signum, frame):
    # Idle, or inside the harness's own bookkeeping: ignore, so a late SIGINT
    # never kills the interpreter. Running user code: behave like Python.
    if _running:
        raise KeyboardInterrupt


def _setup_site():
    """Under -S, what `site` gives user code, except .pth files. Those run code
    from the host's site directories at every start (setuptools' and
    matplotlib's take about as long as the rest of the interpreter's start on
    Debian) and are of no use in a sandbox."""
    if not sys.flags.no_site:
        return
    import site    # under -S, importing it does not run site.main()
    for d in site.getsitepackages():
        if d not in sys.path and os.path.isdir(d):
            sys.path.append(d)
    site.setquit()
    site.setcopyright()
    site.sethelper()


def _setup_process():
    _setup_site()
    _signal.signal(_signal.SIGINT, _on_sigint)
    # Whatever flags we were started with (-B, -X utf8 recommended): no .pyc
    # files in the workspace, and UTF-8 on the pipes, since sessiond returns
    # the output as UTF-8 text.
    sys.dont_write_bytecode = True
    # Line-buffered: one write per line keeps the pipe traffic low while lines
    # still interleave naturally with subprocess output; whatever is left is
    # flushed before every reply.
    sys.stdout.reconfigure(encoding="utf-8", errors="surrogateescape",
                           line_buffering=True)
    sys.stderr.reconfigure(encoding="utf-8", errors="backslashreplace",
                           line_buffering=True)


def _flush_output():
    """Push everything user code wrote through Python into the pipes."""
    for name in ("stdout", "stderr"):
        try:
            getattr(_sys, name).flush()   # the user's stream, if rebound
        except BaseException:
            pass
    for stream in (_STDOUT, _STDERR):
        try:
            stream.flush()
        except BaseException:
            pass


def _print_error(text):
    """Write to fd 2, whatever user code did to sys.stderr."""
    try:
        _STDERR.write(text)
        _STDERR.flush()
    except BaseException:
        try:
            _write(2, text.encode("utf-8", "backslashreplace"))
        except OSError:
            pass


# ---------------------------------------------------------------- user namespace

def _make_user_globals():
    """A fresh __main__ module for user code.

    Registered in sys.modules so pickle and multiprocessing find classes and
    functions the user defines; the harness's own module stays unreachable.
    """
    module = type(sys)("__main__")
    module.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = module
    sys.argv = [""]
    # Like the REPL: modules in the current directory (the workspace) import.
    # Added after the harness's imports, so they cannot shadow those.
    sys.path.insert(0, "")
    return module.__dict__


def _remember_source(filename, code):
    """Keep the cell's lines so tracebacks (ours and the user's) can show them."""
    if len(code) > MAX_REMEMBERED_SOURCE:
        return
    lines = _sources[filename] = code.splitlines(True)
    cache = _linecache_dict()
    if cache is None:
        return
    if cache is _synced_cache[0]:
        # Every earlier cell is there already: add this one alone, so a call
        # costs the same in the 20,000th cell as in the first.
        _cache_source(cache, filename, lines)
    else:
        _sync_linecache()


def _linecache_dict():
    # linecache is not imported at startup (it pulls in tokenize and re); a
    # preloaded interpreter has it from its first cell.
    cache = getattr(_sys.modules.get("linecache"), "cache", None)
    return cache if isinstance(cache, dict) else None


def _cache_source(cache, filename, lines):
    # mtime None marks the entry as not backed by a file, so checkcache()
    # leaves it alone.
    if filename not in cache:
        cache[filename] = (sum(map(len, lines)), None, lines, filename)


def _sync_linecache():
    """Hand linecache every cell source: once it first appears, and again
    before formatting an exception (user code may have cleared it)."""
    cache = _linecache_dict()
    if cache is None:
        return
    for filename, lines in _sources.items():
        _cache_source(cache, filename, lines)
    _synced_cache[0] = cache


# ---------------------------------------------------------------- running code

def _compile(code, filename, echo_last):
    """Compile a request; with echo_last, split off a final expression.

    Returns (body, last) code objects; last is None when there is nothing to
    echo. dont_inherit keeps the harness's own compiler flags out.
    """
    if not echo_last:
        return compile(code, filename, "exec", dont_inherit=True), None
    tree = compile(code, filename, "exec", _ast.PyCF_ONLY_AST, dont_inherit=True)
    last = None
    if tree.body and isinstance(tree.body[-1], _ast.Expr):
        last = compile(_ast.Expression(tree.body.pop().value), filename, "eval",
                       dont_inherit=True)
    return compile(tree, filename, "exec", dont_inherit=True), last


def _execute(code, filename, echo_last):
    """Compile and run user code; return (repr of the echoed value, exception).

    Compiling and repr() count as user work too: a SIGINT during them is a
    KeyboardInterrupt like any other.
    """
    global _running
    try:
        _running = True
        body, last = _compile(code, filename, echo_last)
        exec(body, _user_globals)
        text = None
        if last is not None:
            value = eval(last, _user_globals)
            if value is not None:
                text = repr(value)
        _running = False
        return text, None
    except BaseException as exc:
        _running = False
        return None, exc


def _run(code, filename, echo_last):
    global _running
    try:
        return _execute(code, filename, echo_last)
    except KeyboardInterrupt as exc:
        # A SIGINT landing in _execute's own except clause, before the flag
        # was cleared: still the run's interruption.
        _running = False
        return None, exc


# ---------------------------------------------------------------- exceptions

def _harness_file():
    return _harness_file.__code__.co_filename


def _without_harness_frames(tb):
    """The traceback chain minus frames of this file (exec's caller, the
    SIGINT handler), so users see only their own code and libraries."""
    own = _harness_file()
    kept = []
    while tb is not None:
        if tb.tb_frame.f_code.co_filename != own:
            kept.append(tb)
        tb = tb.tb_next
    for earlier, later in zip(kept, kept[1:]):
        earlier.tb_next = later
    if kept:
        kept[-1].tb_next = None
        return kept[0]
    return None


def _strip_harness_frames(exc):
    seen = set()
    todo = [exc]
    while todo:
        current = todo.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        current.__traceback__ = _without_harness_frames(current.__traceback__)
        todo.extend((current.__cause__, current.__context__))


def _safe_str(value):
    try:
        return str(value)
    except BaseException:
        return f"<{type(value).__name__} object: str() failed>"


def _format_exception(exc):
    """The standard traceback text, as a list of lines without newlines."""
    try:
        import traceback   # on first use only; see the module docstring
        _sync_linecache()
        text = "".join(traceback.format_exception(exc))
    except BaseException:
        # A broken import system or a hostile exception: say what we can.
        text = f"{type(exc).__name__}: {_safe_str(exc)}\n"
    return text.splitlines()


def _exit_status(code):
    """Map SystemExit.code as the interpreter would: (status, message)."""
    if code is None:
        return 0, None
    if isinstance(code, int):
        return code & 0xFF, None
    return 1, _safe_str(code)


def _reply(status, return_code, result=None, error=None):
    return {"status": status, "return_code": return_code,
            "result": result, "error": error}


def _error_object(exc):
    return {"ename": type(exc).__name__, "evalue": _safe_str(exc),
            "traceback": _format_exception(exc)}


def _outcome(text, exc, cell):
    """Turn a run's result or exception into a reply (and stderr text)."""
    if exc is None:
        result = {"text/plain": text} if cell and text is not None else None
        return _reply("ok", 0, result)
    _strip_harness_frames(exc)
    if isinstance(exc, SystemExit):
        code, message = _exit_status(exc.code)
        if code == 0:
            return _reply("ok", 0)
        if message is not None and not cell:
            _print_error(message + "\n")
        return _reply("error", code, error=_error_object(exc))
    code = 130 if isinstance(exc, KeyboardInterrupt) else 1
    error = _error_object(exc)
    if not cell:
        _print_error("\n".join(error["traceback"]) + "\n")
    return _reply("error", code, error=error)


def _protocol_error(message):
    return _reply("error", 1, error={"ename": "ProtocolError", "evalue": message,
                                     "traceback": [f"ProtocolError: {message}"]})


def _handle(line):
    global _cell_count
    if line is Channel.TOO_LARGE:
        return _protocol_error("request larger than the harness accepts")
    try:
        request = _parse_json(line.decode("utf-8"))
        request_id, code, cell, reap = request_fields(request)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        return _protocol_error(_safe_str(exc))
    if reap:
        reap_children()
    apply_tools(_channel, request)
    _cell_count += 1
    filename = f"<cell-{_cell_count}>"
    _remember_source(filename, code)
    text, exc = _run(code, filename, cell)
    reply = _outcome(text, exc, cell)
    if request_id is not None:
        # First key: sessiond finds it without parsing the whole reply.
        reply = {"id": request_id, **reply}
    return reply


# ---------------------------------------------------------------- main loop

def main():
    global _user_globals, _channel
    channel = _channel = Channel(take_control_fd(), _dump_json)
    _setup_process()
    _user_globals = _make_user_globals()
    serve(channel, _handle, _flush_output)

