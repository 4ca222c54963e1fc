"""Calls to a set of metastore nodes: node choice, connections, retries.

The metastore is stateless over its database, so any node answers any call.
What a client must get right is which failures it may retry, and where:

* a failure before the request left (no connection, a connection found
  closed) is retried on the next node at once;
* a read that failed after it was sent (the node died or did not answer
  within the call timeout) is simply repeated on the next node;
* a mutation that failed after it was sent may have been applied: its
  ``applied`` check runs on the next node first, and the mutation is repeated
  only if the check says it was not.

The node that last answered is preferred by every client of the same URI list
in the process, so that after a failover the other threads and clients go
straight to the live node instead of each finding the dead one on its own.
Connecting has its own short timeout (a dead host costs about a second, not
the call timeout).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pymetastore.hive_metastore import ThriftHiveMetastore
from thrift.protocol import TBinaryProtocol
from thrift.transport import TSocket, TTransport

from lakeward.errors import MetastoreError

Address = tuple[str, int]
Check = Callable[[ThriftHiveMetastore.Client], bool]

# What a lost node looks like from the client's side.
TRANSPORT_ERRORS = (TTransport.TTransportException, TimeoutError, OSError, EOFError)
MAX_IDLE = 16  # connections kept open per client for the next calls


@dataclass
class NodeSet:
    """What every client of one URI list in this process shares."""

    addresses: tuple[Address, ...]
    preferred: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    # metadata cache: key -> (time loaded, value); see MetastoreClient.cached
    cache: dict[tuple[str, ...], tuple[float, Any]] = field(default_factory=dict)
    generation: int = 0  # bumped by every invalidation: a load that raced one is not kept

    def answered(self, node: int) -> None:
        self.preferred = node

    def failed(self, node: int) -> None:
        """Move past ``node`` unless another thread has already moved on."""
        with self.lock:
            if self.preferred == node:
                self.preferred = (node + 1) % len(self.addresses)


_NODE_SETS: dict[tuple[Address, ...], NodeSet] = {}
_NODE_SETS_LOCK = threading.Lock()


def node_set(addresses: tuple[Address, ...]) -> NodeSet:
    with _NODE_SETS_LOCK:
        return _NODE_SETS.setdefault(addresses, NodeSet(addresses))


@dataclass
class Connection:
    node: int
    transport: TTransport.TBufferedTransport
    socket: TSocket.TSocket
    client: ThriftHiveMetastore.Client

    def usable(self) -> bool:
        """Still open at our end and not closed by the node (a cheap non-blocking peek)."""
        return bool(self.socket.isOpen())

    def close(self) -> None:
        self.transport.close()


class Failover:
    """Runs Thrift calls on the preferred node, failing over to the others."""

    def __init__(
        self,
        addresses: list[Address],
        timeout: float,
        connect_timeout: float,
        rounds: int,
        retry_delay: float,
    ) -> None:
        self.nodes = node_set(tuple(addresses))
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.rounds = rounds
        self.retry_delay = retry_delay
        self._idle: list[Connection] = []
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()

    def read(self, method: str, *args: Any) -> Any:
        """A call that changes nothing: repeated on the next node whenever it fails."""
        return self._run(method, args, applied=None)

    def mutate(self, method: str, *args: Any, applied: Check) -> Any:
        """A call that changes the catalog; ``applied`` tells, on a live node, whether it took."""
        return self._run(method, args, applied=applied)

    def _run(self, method: str, args: tuple[Any, ...], applied: Check | None) -> Any:
        count = len(self.nodes.addresses)
        failures: list[str] = []
        in_doubt = False  # a mutation was sent and its answer lost
        for attempt in range(self.rounds * count):
            if attempt and attempt % count == 0:
                time.sleep(self.retry_delay)  # every node failed once: give them a moment
            node = self.nodes.preferred
            sent = False
            try:
                connection = self._acquire(node)
            except TRANSPORT_ERRORS as exc:
                self._failed(node, exc, failures)
                continue
            try:
                if in_doubt and applied is not None:
                    if applied(connection.client):
                        self._release(connection)
                        return None
                    in_doubt = False  # checked: it did not take, so it is sent again
                getattr(connection.client, f"send_{method}")(*args)
                sent = True
                result = getattr(connection.client, f"recv_{method}")()
            except TRANSPORT_ERRORS as exc:
                connection.close()
                in_doubt = in_doubt or (sent and applied is not None)
                self._failed(node, exc, failures)
                continue
            except Exception:
                # The metastore answered with an error: the connection is in step.
                self._release(connection)
                raise
            except BaseException:
                connection.close()  # interrupted mid-call: the stream is out of step
                raise
            self._release(connection)
            return result
        doubt = (
            f"; {method} was sent and may have been applied (check before repeating it)"
            if in_doubt
            else ""
        )
        raise MetastoreError(
            "no metastore node answered ("
            + "; ".join(dict.fromkeys(failures))
            + f"){doubt}; is the metastore running? try: lakeward metastore status"
        )

    def _failed(self, node: int, exc: BaseException, failures: list[str]) -> None:
        host, port = self.nodes.addresses[node]
        failures.append(f"{host}:{port}: {exc}")
        self.nodes.failed(node)
        self._drop_idle(node)

    def _acquire(self, node: int) -> Connection:
        with self._lock:
            while self._idle:
                connection = self._idle.pop()
                if connection.node == node and connection.usable():
                    return connection
                connection.close()  # another node's, or closed by the node
        return self._connect(node)

    def _release(self, connection: Connection) -> None:
        self.nodes.answered(connection.node)
        with self._lock:
            if len(self._idle) < MAX_IDLE:
                self._idle.append(connection)
                return
        connection.close()

    def _drop_idle(self, node: int) -> None:
        with self._lock:
            stale = [c for c in self._idle if c.node == node]
            self._idle = [c for c in self._idle if c.node != node]
        for connection in stale:
            connection.close()

    def _connect(self, node: int) -> Connection:
        host, port = self.nodes.addresses[node]
        sock = TSocket.TSocket(host, port)
        sock.setTimeout(self.connect_timeout * 1000)
        transport = TTransport.TBufferedTransport(sock)
        transport.open()
        sock.setTimeout(self.timeout * 1000)  # from now on: how long a call may take
        client = ThriftHiveMetastore.Client(TBinaryProtocol.TBinaryProtocol(transport))
        return Connection(node, transport, sock, client)
