"""A TCP proxy standing in for one metastore node, that dies on cue.

Several proxies in front of one real metastore make several "nodes" whose
failures the tests control to the byte: killed (every connection closed, the
port refusing), killed just after a given call's request reached the
metastore but before its answer came back (applied, answer lost), killed when
a call's request arrives (never applied), or hung (requests forwarded,
answers withheld). It also counts the calls that passed through it, by
method name, from the Thrift messages' headers.
"""

from __future__ import annotations

import contextlib
import select
import socket
import struct
import threading
from collections import Counter
from typing import Literal

Fault = Literal["lose_reply", "lose_request", "hang"]
THRIFT_STRICT = b"\x80\x01"  # first bytes of a binary-protocol message (strict mode)


def method_of(chunk: bytes) -> str | None:
    """The method a chunk starting a Thrift binary message calls."""
    if not chunk.startswith(THRIFT_STRICT) or len(chunk) < 8:
        return None
    (length,) = struct.unpack(">i", chunk[4:8])
    if not 0 < length <= 200 or len(chunk) < 8 + length:
        return None
    return chunk[8 : 8 + length].decode("ascii", "replace")


class NodeProxy:
    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.calls: Counter[str] = Counter()
        self.accepted = 0
        self._fault: tuple[str, Fault] | None = None
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()
        self.dead = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def uri(self) -> str:
        return f"thrift://127.0.0.1:{self.port}"

    def fail_on(self, method: str, fault: Fault) -> None:
        """Fail the next call of ``method`` that passes through, as ``fault`` says."""
        self._fault = (method, fault)

    def kill(self) -> None:
        """What ``kill -9`` does to a node: every connection drops, the port refuses."""
        self.dead = True
        with self._lock:
            sockets, self._sockets = self._sockets, set()
        for sock in [self._listener, *sockets]:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _accept(self) -> None:
        while not self.dead:
            try:
                downstream, _ = self._listener.accept()
            except OSError:
                return
            self.accepted += 1
            try:
                upstream = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                downstream.close()
                continue
            with self._lock:
                self._sockets |= {downstream, upstream}
            threading.Thread(target=self._pump, args=(downstream, upstream), daemon=True).start()

    def _pump(self, downstream: socket.socket, upstream: socket.socket) -> None:
        doomed: Fault | None = None  # what to do when the current call's answer comes
        try:
            while not self.dead:
                ready, _, _ = select.select([downstream, upstream], [], [], 0.5)
                for sock in ready:
                    chunk = sock.recv(65536)
                    if not chunk:
                        return
                    if sock is downstream:
                        method = method_of(chunk)
                        if method is not None:
                            self.calls[method] += 1
                            if self._fault is not None and self._fault[0] == method:
                                doomed, self._fault = self._fault[1], None
                        if doomed == "lose_request":
                            self.kill()
                            return
                        upstream.sendall(chunk)
                    elif doomed == "lose_reply":
                        self.kill()  # the metastore has answered, so it has applied the call
                        return
                    elif doomed != "hang":
                        downstream.sendall(chunk)
        except OSError:
            return
        finally:
            for sock in (downstream, upstream):
                sock.close()
            with self._lock:
                self._sockets -= {downstream, upstream}
