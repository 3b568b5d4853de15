# SPDX-License-Identifier: MIT
"""A small client of sessiond's framed protocol, for tests and benchmarks that
talk to the daemon directly (see docs/internal-protocol.md)."""
import array
import json
import socket
import struct

HEADER = struct.Struct("<IB")


class SessiondClient:
    def __init__(self, path, timeout=60.0):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)

    def close(self):
        self.sock.close()

    def _recv_exact(self, n, fds):
        buf = b""
        while len(buf) < n:
            data, anc, _flags, _addr = self.sock.recvmsg(n - len(buf), socket.CMSG_SPACE(16))
            for level, kind, payload in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    a = array.array("i")
                    a.frombytes(payload[: len(payload) - (len(payload) % a.itemsize)])
                    fds.extend(a)
            if not data:
                raise ConnectionError("sessiond closed the connection")
            buf += data
        return buf

    def send(self, request):
        """Send one request without waiting for its reply."""
        payload = json.dumps(request).encode()
        self.sock.sendall(HEADER.pack(len(payload), ord("J")) + payload)

    def call(self, request):
        """Send one request; return (reply dict, list of received fds)."""
        self.send(request)
        fds = []
        length, kind = HEADER.unpack(self._recv_exact(HEADER.size, fds))
        body = self._recv_exact(length, fds) if length else b""
        if kind != ord("J"):
            raise ValueError("unexpected frame type %r" % kind)
        return json.loads(body), fds
