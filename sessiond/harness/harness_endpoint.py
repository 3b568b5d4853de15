# SPDX-License-Identifier: MIT
"""paddock's endpoint-tier Python harness: cells run on an external Jupyter Server.

sessiond starts it on the host (not in a sandbox: the code runs on the server), as
the unprivileged worker user, for sessions created with "endpoint": true:

    /usr/bin/python3 -I -u /usr/lib/paddock/harness_endpoint.py

with PADDOCK_JUPYTER_ENDPOINT=<url> (it may carry ?token=..., or the token comes in
PADDOCK_JUPYTER_TOKEN) and PADDOCK_SESSION_ID=<id>. It speaks the protocol of
harness_kernel.py (docs/harness-protocol.md): one JSON request line in on fd 3,
{"id", "code", "mode"}, one JSON reply line out, {"id", "status", "return_code",
"result", "error", "display"}; stream output goes to fd 1 and 2 as it arrives.

One kernel per harness, started through the server's REST API (POST /api/kernels)
as soon as the harness starts, driven over the kernel channels websocket
(/api/kernels/{id}/channels, the Jupyter messaging protocol), and deleted
(DELETE /api/kernels/{id}) at end of file on fd 3 or on SIGTERM. SIGINT during a
cell (sessiond's timeout) becomes POST /api/kernels/{id}/interrupt; the cell's
KeyboardInterrupt reply is then awaited. Every network call has a timeout, so a
dead or silent server gives an error reply, never a hang.

The websocket is websocket-client (Debian's python3-websocket): a maintained,
pure-Python, synchronous client with no dependencies of its own. It fits a
harness that waits for one thing at a time; the asyncio and tornado clients
would bring an event loop for nothing.
"""

import os
import sys

sys.dont_write_bytecode = True

import base64  # noqa: E402
import http.client  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import select  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import ssl  # noqa: E402
import struct  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
from urllib.parse import parse_qs, quote, urlsplit  # noqa: E402

# The control side shared with the other harnesses, from this file's directory.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    from harness_channel import Channel, request_fields, take_control_fd  # noqa: E402
finally:
    del sys.path[0]


def _env_seconds(name, default):
    try:
        value = float(os.environ.get(name, ""))
    except ValueError:
        return default
    return value if value > 0 else default


# Bounds on every network wait (seconds).
REST_TIMEOUT = _env_seconds("PADDOCK_JUPYTER_REST_TIMEOUT", 5.0)      # one REST call
START_TIMEOUT = _env_seconds("PADDOCK_JUPYTER_START_TIMEOUT", 30.0)   # kernel up and answering
INTERRUPT_WAIT = _env_seconds("PADDOCK_JUPYTER_INTERRUPT_WAIT", 1.2)  # reply after an interrupt
FRAME_TIMEOUT = 30.0   # the rest of a websocket frame once it has begun to arrive
PING_EVERY = 20.0      # a silent websocket is pinged; no answer in as long again: gone
IDLE_AFTER_REPLY = 5.0  # the idle status after the execute_reply, at most
DELETE_TIMEOUT = 2.0   # the kernel's deletion on the way out
# After a failed interrupt the kernel is busy, and the server's deletion waits for it to
# stop before killing it (seconds): the request is sent, the answer not awaited, so the
# harness exits within sessiond's grace period; the server finishes the deletion itself.
GIVE_UP_DELETE_TIMEOUT = 0.3

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_PID = os.getpid()


class EndpointError(Exception):
    """The server cannot be used: unreachable, refusing, or gone mid-run."""


class _Terminate(BaseException):
    """SIGTERM: the session ends."""


# ---------------------------------------------------------------- output

def _encode_reply(reply):
    return json.dumps(reply, ensure_ascii=False, default=str)


def _write_all(fd, text):
    data = memoryview(text.encode("utf-8", "replace"))
    while data:
        try:
            data = data[os.write(fd, data):]
        except InterruptedError:
            continue
        except OSError:
            return


# ---------------------------------------------------------------- the server

class Endpoint:
    """Where the server is and how to authenticate; the token never appears in messages."""

    def __init__(self, url, token=None):
        parts = urlsplit(url.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise EndpointError(f"PADDOCK_JUPYTER_ENDPOINT is not an http(s) URL: "
                                f"{parts.scheme or '?'}://{parts.hostname or '?'}")
        query = parse_qs(parts.query)
        self.token = (query.get("token") or [None])[0] or token or None
        self.secure = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port or (443 if self.secure else 80)
        self.base = "/" + parts.path.strip("/") + "/" if parts.path.strip("/") else "/"
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.shown = f"{parts.scheme}://{host}:{self.port}{self.base}"

    def headers(self):
        h = {"Accept": "application/json"}
        if self.token:
            h["Authorization"] = f"token {self.token}"
        return h

    def rest(self, method, path, body=None, timeout=REST_TIMEOUT):
        """(status, parsed JSON or None). EndpointError when the server cannot be reached."""
        cls = http.client.HTTPSConnection if self.secure else http.client.HTTPConnection
        conn = cls(self.host, self.port, timeout=timeout)
        headers = self.headers()
        payload = None
        if body is not None:
            payload = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        try:
            conn.request(method, self.base + path, body=payload, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
        except (OSError, http.client.HTTPException) as exc:
            raise EndpointError(f"{method} {self.shown}{path} failed: {_describe(exc)}") from None
        finally:
            conn.close()
        try:
            parsed = json.loads(data) if data else None
        except ValueError:
            parsed = None
        return resp.status, parsed

    def ws_url(self, path):
        return ("wss://" if self.secure else "ws://") + \
            (f"[{self.host}]" if ":" in self.host else self.host) + \
            f":{self.port}{self.base}{path}"


def _describe(exc):
    if isinstance(exc, socket.timeout):
        return "no answer in time"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    text = str(exc) or type(exc).__name__
    return text


def _http_failure(what, status, body):
    detail = ""
    if isinstance(body, dict):
        detail = body.get("message") or body.get("reason") or ""
    if status in (401, 403):
        detail = detail or "the token was not accepted"
    return EndpointError(f"{what}: HTTP {status}{': ' + detail if detail else ''}")


# ---------------------------------------------------------------- the kernel

class Kernel:
    """One kernel on the server and the websocket to its channels."""

    def __init__(self, endpoint, session_id):
        import websocket  # deferred: a bad endpoint URL still answers requests
        self.websocket = websocket
        self.ep = endpoint
        self.id = None
        self.ws = None
        self.client_session = f"paddock-{session_id}-{uuid.uuid4().hex[:12]}"
        self.interrupt_pending = False   # SIGINT arrived during the running cell
        self.running = False             # a cell runs: SIGINT sets interrupt_pending
        self.starting = False            # a cell waits for a kernel: SIGINT raises
        wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.wake_r = wake_r
        signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)

    # -- lifecycle

    def ensure(self):
        """A kernel and an open channel; returns a note for stderr ("" when none)."""
        note = ""
        if self.ws is not None:
            try:
                note = self.drain_idle()
            except EndpointError:
                pass    # closed while idle: reopened below
        if self.ws is not None:
            return note
        if self.id is not None:
            status, _ = self.ep.rest("GET", f"api/kernels/{self.id}")
            if status == 404:
                self.id = None
                note = ("[paddock] the kernel on the Jupyter server was gone; a new one was "
                        "started, and earlier state is lost\n")
            elif status != 200:
                raise _http_failure(f"GET {self.ep.shown}api/kernels/{self.id}", status, None)
        if self.id is None:
            self.start()
        self.connect()
        return note

    def start(self):
        status, body = self.ep.rest("POST", "api/kernels", body={},
                                    timeout=max(REST_TIMEOUT, START_TIMEOUT))
        if status not in (200, 201) or not isinstance(body, dict) or "id" not in body:
            raise _http_failure(f"POST {self.ep.shown}api/kernels (start a kernel)", status, body)
        self.id = str(body["id"])

    def connect(self):
        url = self.ep.ws_url(f"api/kernels/{quote(self.id)}/channels"
                             f"?session_id={quote(self.client_session)}")
        headers = [f"{k}: {v}" for k, v in self.ep.headers().items()]
        try:
            ws = self.websocket.create_connection(url, timeout=REST_TIMEOUT, header=headers,
                                                  suppress_origin=True,
                                                  enable_multithread=False)
        except (OSError, self.websocket.WebSocketException) as exc:
            raise EndpointError(f"cannot open the kernel channels at "
                                f"{self.ep.shown}api/kernels/{self.id}/channels: "
                                f"{_describe(exc)}") from None
        self.ws = ws
        self.last_heard = time.monotonic()
        self.ping_sent = None
        try:
            self.wait_ready()
        except EndpointError:
            self.drop()
            raise

    def wait_ready(self):
        """kernel_info_request until the kernel answers on both channels: the reply proves
        it listens, and a status message for the same request proves that the server's
        output subscription to this kernel process is live (a fresh subscription misses the
        first messages, and a cell's result would be lost with them)."""
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            msg_id = self.send("kernel_info_request", {})
            resend = time.monotonic() + 1.0
            replied = published = False
            while time.monotonic() < resend:
                msg = self.receive(min(resend, deadline))
                if msg is None:
                    break
                if msg.get("parent_header", {}).get("msg_id") != msg_id:
                    continue
                if msg.get("msg_type") == "kernel_info_reply":
                    replied = True
                elif msg.get("msg_type") == "status":
                    published = True
                if replied and published:
                    return
            if time.monotonic() >= deadline:
                raise EndpointError(f"the kernel on {self.ep.shown} did not answer within "
                                    f"{START_TIMEOUT:g} s of its start")

    def drain_idle(self):
        """Read what came while no cell ran (a closed channel shows up here, before a cell is
        sent into it); a note when the server restarted the kernel meanwhile."""
        note = ""
        while self.ws is not None:
            sock = self.ws.sock
            pending = isinstance(sock, ssl.SSLSocket) and sock.pending()
            if not pending and not select.select([sock], [], [], 0)[0]:
                break
            msg = self.receive(None)
            if msg and msg.get("msg_type") == "status" and msg.get("content", {}).get(
                    "execution_state") in ("restarting", "dead"):
                note = ("[paddock] the kernel on the Jupyter server died while idle and was "
                        "restarted; earlier state is lost\n")
                self.drop()
        return note

    def drop(self):
        ws, self.ws = self.ws, None
        if ws is not None:
            try:
                ws.sock and ws.sock.settimeout(0.2)
                ws.close(timeout=0.2)
            except Exception:
                pass

    def delete(self, timeout=DELETE_TIMEOUT):
        self.drop()
        if self.id is not None:
            kid, self.id = self.id, None
            try:
                self.ep.rest("DELETE", f"api/kernels/{kid}", timeout=timeout)
            except EndpointError:
                pass

    def interrupt(self):
        try:
            status, body = self.ep.rest("POST", f"api/kernels/{self.id}/interrupt",
                                        timeout=min(REST_TIMEOUT, 1.0))
        except EndpointError:
            return False
        return status in (200, 204)

    # -- messages

    def send(self, msg_type, content, channel="shell"):
        msg_id = uuid.uuid4().hex
        msg = {"header": {"msg_id": msg_id, "msg_type": msg_type, "username": "paddock",
                          "session": self.client_session, "version": "5.3",
                          "date": time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())},
               "parent_header": {}, "metadata": {}, "content": content,
               "channel": channel, "buffers": []}
        try:
            self.ws.settimeout(REST_TIMEOUT)
            self.ws.send(json.dumps(msg))
        except (OSError, self.websocket.WebSocketException) as exc:
            self.drop()
            raise EndpointError(f"lost the connection to {self.ep.shown}: "
                                f"{_describe(exc)}") from None
        return msg_id

    def receive(self, deadline):
        """The next message, or None when the deadline (monotonic) passes first.

        Returns early, with None, when a SIGINT arrived (see interrupt_pending)."""
        ws = self.ws
        while True:
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                return None
            if self.ping_sent is not None and now - self.ping_sent > PING_EVERY:
                self.drop()
                raise EndpointError(f"the Jupyter server at {self.ep.shown} stopped answering")
            wait = PING_EVERY
            if deadline is not None:
                wait = min(wait, deadline - now)
            pending = isinstance(ws.sock, ssl.SSLSocket) and ws.sock.pending()
            if not pending:
                _quickack(ws.sock)
                try:
                    ready, _, _ = select.select([ws.sock, self.wake_r], [], [], wait)
                except InterruptedError:
                    ready = []
                if self.wake_r in ready:
                    self._drain_wake()
                    if self.interrupt_pending:
                        return None
                if ws.sock not in ready:
                    if not ready and time.monotonic() - self.last_heard >= PING_EVERY \
                            and self.ping_sent is None:
                        self._ping()
                    continue
            try:
                ws.settimeout(FRAME_TIMEOUT)
                _quickack(ws.sock)
                opcode, data = ws.recv_data(control_frame=True)
            except self.websocket.WebSocketTimeoutException:
                continue    # a frame began and stalled; its state is kept for the next read
            except (OSError, self.websocket.WebSocketException) as exc:
                self.drop()
                raise EndpointError(f"lost the connection to {self.ep.shown}: "
                                    f"{_describe(exc)}") from None
            self.last_heard = time.monotonic()
            self.ping_sent = None
            abnf = self.websocket.ABNF
            if opcode == abnf.OPCODE_CLOSE:
                self.drop()
                raise EndpointError(f"the Jupyter server at {self.ep.shown} closed the "
                                    f"kernel channels")
            if opcode == abnf.OPCODE_TEXT:
                msg = _loads(data)
            elif opcode == abnf.OPCODE_BINARY:
                msg = _loads(_binary_message_json(data))
            else:
                continue
            if isinstance(msg, dict):
                return msg

    def _ping(self):
        try:
            self.ws.settimeout(REST_TIMEOUT)
            self.ws.ping()
        except (OSError, self.websocket.WebSocketException) as exc:
            self.drop()
            raise EndpointError(f"lost the connection to {self.ep.shown}: "
                                f"{_describe(exc)}") from None
        self.ping_sent = time.monotonic()

    def _drain_wake(self):
        try:
            while os.read(self.wake_r, 256):
                pass
        except OSError:
            pass

    # -- one cell

    def execute(self, code, cell):
        """Run code; returns (return_code, result, error, display)."""
        msg_id = self.send("execute_request", {
            "code": code, "silent": False, "store_history": True, "user_expressions": {},
            "allow_stdin": False, "stop_on_error": False})
        result, error, display = None, None, []
        replied = idle = False
        replied_at = None
        reply_status = None
        interrupted_at = None
        self.running = True
        try:
            while not (replied and idle):
                deadline = None if interrupted_at is None else interrupted_at + INTERRUPT_WAIT
                if replied_at is not None:
                    # The reply is in (the interrupt, if any, worked); the idle status ends
                    # the cell's output, and should it be lost, the cell still ends.
                    deadline = replied_at + IDLE_AFTER_REPLY
                if self.interrupt_pending and interrupted_at is None and not replied:
                    interrupted_at = time.monotonic()
                    self.interrupt()
                    continue
                msg = self.receive(deadline)
                if msg is None:
                    if deadline is not None and time.monotonic() >= deadline:
                        if replied_at is not None:
                            break
                        raise _InterruptFailed()
                    continue
                if msg.get("parent_header", {}).get("msg_id") != msg_id:
                    if msg.get("msg_type") == "status" and msg.get("content", {}).get(
                            "execution_state") in ("restarting", "dead"):
                        # The kernel died under the cell; the server restarts it empty. The
                        # channel is opened anew for the next cell: the server's output
                        # subscription to the new process may miss its first messages.
                        self.drop()
                        return 1, None, _died_error(), []
                    continue
                kind = msg.get("msg_type")
                content = msg.get("content") or {}
                if kind == "stream":
                    fd = 2 if content.get("name") == "stderr" else 1
                    _write_all(fd, str(content.get("text", "")))
                elif kind == "execute_result":
                    result = _bundle(content.get("data"))
                elif kind in ("display_data", "update_display_data"):
                    display.append({"data": _bundle(content.get("data")),
                                    "metadata": _plain(content.get("metadata"))})
                elif kind == "clear_output":
                    display.clear()
                elif kind == "error":
                    error = _error_of(content)
                elif kind == "status" and content.get("execution_state") == "idle":
                    idle = True
                elif kind == "execute_reply":
                    replied = True
                    replied_at = time.monotonic()
                    reply_status = content.get("status")
                    if reply_status == "error" and error is None:
                        error = _error_of(content)
                    elif reply_status == "aborted" and error is None:
                        error = {"ename": "Aborted", "evalue": "the kernel aborted the cell",
                                 "traceback": ["Aborted: the kernel aborted the cell"]}
        finally:
            self.running = False
            self.interrupt_pending = False
        failed = error is not None or reply_status not in ("ok", None)
        code_ = 0
        if failed:
            code_ = 130 if error and error["ename"] == "KeyboardInterrupt" else 1
        return code_, (result if cell and not failed else None), \
            (error if failed else None), (display if cell else [])


class _InterruptFailed(BaseException):
    """The interrupted cell did not stop in time: the kernel goes, and so does the harness."""


def _quickack(sock):
    """Acknowledge at once what arrives next.

    The server writes a cell's messages (busy, result, idle, reply) one by one without
    TCP_NODELAY, so Nagle holds each until the previous one is acknowledged; a delayed
    ACK here would add about 40 ms to every cell. Linux clears the flag by itself, so
    it is set again before every read."""
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
    except (OSError, AttributeError):
        pass


def _loads(data):
    try:
        if isinstance(data, (bytes, bytearray)):
            data = bytes(data).decode("utf-8", "replace")
        return json.loads(data)
    except (ValueError, RecursionError):
        return None


def _binary_message_json(data):
    """The JSON part of jupyter_server's binary framing (messages with buffers)."""
    try:
        nbufs = struct.unpack_from("!I", data, 0)[0]
        offsets = struct.unpack_from(f"!{nbufs}I", data, 4)
        end = offsets[1] if nbufs > 1 else len(data)
        return data[offsets[0]:end]
    except struct.error:
        return b""


def _plain(value):
    return value if isinstance(value, dict) else {}


def _bundle(data):
    """A mime bundle: binary images bare base64 (no line breaks); text/plain always there."""
    if not isinstance(data, dict):
        return {"text/plain": "" if data is None else str(data)}
    out = {}
    for key, value in data.items():
        if isinstance(value, str) and key.startswith(("image/", "application/pdf")) \
                and not key.startswith("image/svg"):
            value = "".join(value.split())
        elif isinstance(value, (bytes, bytearray)):
            value = base64.b64encode(bytes(value)).decode("ascii")
        out[str(key)] = value
    return out


def _error_of(content):
    ename = str(content.get("ename") or "Error")
    evalue = str(content.get("evalue") or "")
    tb = content.get("traceback")
    if isinstance(tb, list) and tb:
        lines = _ANSI.sub("", "\n".join(str(t) for t in tb)).splitlines()
    else:
        lines = [f"{ename}: {evalue}" if evalue else ename]
    return {"ename": ename, "evalue": evalue, "traceback": lines}


def _died_error():
    text = "the kernel died; the Jupyter server restarts it, and its state is lost"
    return {"ename": "DeadKernel", "evalue": text, "traceback": [f"DeadKernel: {text}"]}


# ---------------------------------------------------------------- requests

def _error_reply(ename, message, return_code=1):
    return {"status": "error", "return_code": return_code, "result": None, "display": [],
            "error": {"ename": ename, "evalue": message, "traceback": [f"{ename}: {message}"]}}


def _run(kernel, setup_error, code, cell):
    if kernel is None:
        reply = _error_reply("EndpointError", setup_error)
    else:
        try:
            kernel.starting = True
            try:
                note = kernel.ensure()
            except KeyboardInterrupt:
                # The deadline passed while a kernel was being started or reached.
                kernel.starting = False
                kernel.delete(GIVE_UP_DELETE_TIMEOUT)
                return _error_reply("KeyboardInterrupt",
                                    "interrupted while waiting for a kernel on the server",
                                    return_code=130)
            finally:
                kernel.starting = False
            if note:
                _write_all(2, note)
            if code == "":
                # Nothing to run (sessiond's first no-op): the kernel is up, which is the point.
                return {"status": "ok", "return_code": 0, "result": None, "error": None,
                        "display": []}
            return_code, result, error, display = kernel.execute(code, cell)
            reply = {"status": "error" if return_code else "ok", "return_code": return_code,
                     "result": result, "error": error, "display": display}
        except EndpointError as exc:
            reply = _error_reply("EndpointError", str(exc))
    if reply["error"] is not None and not cell:
        _write_all(2, "\n".join(reply["error"]["traceback"]) + "\n")
    return reply


def _handle(kernel, setup_error, line):
    if line is Channel.TOO_LARGE:
        return _error_reply("ProtocolError", "request larger than the harness accepts")
    try:
        request = json.loads(line.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        return _error_reply("ProtocolError", f"invalid request: {exc}")
    try:
        # Nothing of the session's runs in this process: "reap" has nothing to collect.
        request_id, code, cell, _ = request_fields(request)
    except ValueError as exc:
        return _error_reply("ProtocolError", str(exc))
    # "cwd" names a directory of the sandbox's workspace, which the server does not see:
    # the kernel works in the server's own directory, and the field is ignored.
    reply = _run(kernel, setup_error, code, cell)
    if request_id is not None:
        reply = {"id": request_id, **reply}
    return reply


def main():
    channel = Channel(take_control_fd(), _encode_reply)
    kernel = None
    setup_error = None

    def on_sigint(signum, frame):
        # Only a running cell is interrupted; idle, SIGINT is ignored.
        if kernel is not None and kernel.running:
            kernel.interrupt_pending = True
        elif kernel is not None and kernel.starting:
            raise KeyboardInterrupt

    def on_sigterm(signum, frame):
        raise _Terminate()

    signal.signal(signal.SIGINT, on_sigint)
    signal.signal(signal.SIGTERM, on_sigterm)
    status = 0
    delete_timeout = DELETE_TIMEOUT
    try:
        try:
            endpoint = Endpoint(os.environ.get("PADDOCK_JUPYTER_ENDPOINT", ""),
                                os.environ.get("PADDOCK_JUPYTER_TOKEN"))
            kernel = Kernel(endpoint, os.environ.get("PADDOCK_SESSION_ID", "-"))
        except EndpointError as exc:
            setup_error = str(exc)
        except ImportError as exc:
            setup_error = f"the websocket client (python3-websocket) is missing: {exc}"
        if kernel is not None:
            try:
                # Start now: the kernel boots while sessiond is still sending its first request.
                kernel.ensure()
            except EndpointError:
                pass    # tried again, and reported, on the first request
        while True:
            try:
                line = channel.read_request()
            except OSError:
                break
            if line is None:
                break
            reply = _handle(kernel, setup_error, line)
            try:
                channel.send(reply)
            except OSError:
                break
    except _Terminate:
        pass
    except _InterruptFailed:
        # sessiond will kill us after its grace period and start afresh: leave no kernel.
        status = 1
        delete_timeout = GIVE_UP_DELETE_TIMEOUT
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if kernel is not None:
            kernel.delete(delete_timeout)
    os._exit(status)


if __name__ == "__main__":
    main()
