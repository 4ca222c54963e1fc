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

import contextlib
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pymetastore.hive_metastore import ThriftHiveMetastore
from thrift.protocol import TBinaryProtocol
from thrift.protocol.TProtocol import TProtocolException
from thrift.Thrift import TException
from thrift.transport import TSocket, TTransport

from lakeward.errors import MetastoreError

Address = tuple[str, int]
Check = Callable[[ThriftHiveMetastore.Client], bool]

# What a lost node looks like from the client's side.
TRANSPORT_ERRORS = (TTransport.TTransportException, TimeoutError, OSError, EOFError)
MAX_IDLE = 16  # connections kept open per client and node for the next calls
MAX_WARM_READS = 8  # kinds of reads a spare replays
SPARE_RETRY = 5.0  # seconds before trying again to open spares on a standby that was down


@dataclass
class NodeSet:
    """What every client of one URI list in this process shares."""

    addresses: tuple[Address, ...]
    preferred: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    # metadata cache: key -> (time loaded, value); see MetastoreClient.cached
    cache: dict[tuple[str, ...], tuple[float, Any]] = field(default_factory=dict)
    generation: int = 0  # bumped by every invalidation: a load that raced one is not kept
    event_id: int | None = None  # the metastore's last change the cache accounts for
    checked_at: float = float("-inf")  # when the metastore was last asked for its changes

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
    closed: bool = False

    def usable(self) -> bool:
        """Still open at our end and not closed by the node (a cheap non-blocking peek)."""
        return bool(self.socket.isOpen())

    def abort(self) -> None:
        """End a call another thread is making on this connection: its read or write fails
        at once (the socket is shut down, not closed under that thread's feet)."""
        handle = self.socket.handle
        if handle is not None:
            with contextlib.suppress(OSError):
                handle.shutdown(socket.SHUT_RDWR)


class Failover:
    """Runs Thrift calls on the preferred node, failing over to the others.

    Besides its connections to the preferred node, a client in steady use
    keeps as many warm spare connections to the next node (each has made one
    call, so the node has set up its side): a failover then finds them ready
    instead of every thread opening a connection to the next node at once.
    """

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
        self._idle: dict[int, list[Connection]] = {}
        self._open: Counter[int] = Counter()  # connections per node, in use or idle
        self._lock = threading.Lock()
        self._answered = threading.local()  # the node that answered this thread's last call
        self._calls = 0
        # The reads this client makes (method -> last arguments): a spare replays them so
        # that the next node has loaded and compiled what they need before a failover.
        self._reads: dict[str, tuple[Any, ...]] = {}
        self._warming = False
        self._warmer: threading.Thread | None = None  # the thread opening spares, if any
        self._spare: Connection | None = None  # the spare it is making its calls on
        self._warm_after = 0.0  # no spares before this moment (the standby was down)
        self._closed = False

    def close(self) -> None:
        """Close every connection; a spare being opened in the background is abandoned and
        its thread waited for, so that a closed client makes no call any more."""
        with self._lock:
            self._closed = True
            idle = [c for connections in self._idle.values() for c in connections]
            self._idle = {}
            spare, warmer = self._spare, self._warmer
        if spare is not None:
            spare.abort()
        if warmer is not None and warmer is not threading.current_thread():
            warmer.join()  # at most a connect timeout: its calls fail at once now
        for connection in idle:
            self._discard(connection)

    def read(self, method: str, *args: Any) -> Any:
        """A call that changes nothing: repeated on the next node whenever it fails."""
        if method not in self._reads and len(self._reads) < MAX_WARM_READS:
            self._reads[method] = args
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
                self._discard(connection)
                in_doubt = in_doubt or (sent and applied is not None)
                self._failed(node, exc, failures)
                continue
            except TProtocolException:
                self._discard(connection)  # an answer we could not read: out of step
                raise
            except Exception:
                # The metastore answered with an error: the connection is in step.
                self._release(connection)
                raise
            except BaseException:
                self._discard(connection)  # interrupted mid-call: the stream is out of step
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
        with self._lock:
            stale = self._idle.pop(node, [])
        for connection in stale:
            self._discard(connection)

    def _acquire(self, node: int) -> Connection:
        while True:
            with self._lock:
                idle = self._idle.get(node)
                connection = idle.pop() if idle else None
            if connection is None:
                return self._connect(node)
            if connection.usable():
                return connection
            self._discard(connection)  # closed by the node meanwhile

    def answered_by(self) -> int | None:
        """The node that answered the calling thread's last successful call."""
        node: int | None = getattr(self._answered, "node", None)
        return node

    def _release(self, connection: Connection) -> None:
        self.nodes.answered(connection.node)
        self._answered.node = connection.node
        self._park(connection)
        self._top_up_spares(connection.node)

    def _park(self, connection: Connection) -> None:
        with self._lock:
            idle = self._idle.setdefault(connection.node, [])
            if not self._closed and len(idle) < MAX_IDLE:
                idle.append(connection)
                return
        self._discard(connection)

    def _discard(self, connection: Connection) -> None:
        with self._lock:
            if connection.closed:
                return
            connection.closed = True
            self._open[connection.node] -= 1
        connection.transport.close()

    def _top_up_spares(self, node: int) -> None:
        """Start warming spares on the next node if there are fewer than connections to this one.

        A client used for a single call (a health check) keeps no spares.
        """
        count = len(self.nodes.addresses)
        with self._lock:
            self._calls += 1
            standby = (node + 1) % count
            if (
                count == 1
                or self._calls < 2
                or self._warming
                or self._closed
                or self._open[standby] >= min(self._open[node], MAX_IDLE)
                or time.monotonic() < self._warm_after
            ):
                return
            self._warming = True
            self._warmer = threading.Thread(
                target=self._warm, args=(standby, node), name="metastore-spares", daemon=True
            )
            self._warmer.start()

    def _warm(self, node: int, preferred: int) -> None:
        """Open spares on ``node`` until there are as many as connections to ``preferred``."""
        replayed = False
        try:
            while True:
                with self._lock:
                    if self._closed or self._open[node] >= min(self._open[preferred], MAX_IDLE):
                        return
                connection = self._connect(node)
                with self._lock:
                    closed = self._closed  # closed while connecting: no call on it
                    self._spare = None if closed else connection
                if closed:
                    self._discard(connection)
                    return
                try:
                    # The node sets up its side (a handler, a database session) at the
                    # first call: done now rather than when a failover needs it.
                    connection.client.get_all_databases()
                    if not replayed:
                        self._replay_reads(connection)
                        replayed = True
                except BaseException:
                    self._discard(connection)
                    raise
                finally:
                    with self._lock:
                        self._spare = None
                self._park(connection)
        except (*TRANSPORT_ERRORS, TException):
            if not self._closed:  # else aborted by close(), not a standby that is down
                self._warm_after = time.monotonic() + SPARE_RETRY
        finally:
            self._warming = False

    def _replay_reads(self, connection: Connection) -> None:
        """Make the client's kinds of reads once on a spare (a cold node's first of each
        kind costs several times a warm one's)."""
        for method, args in list(self._reads.items()):
            try:
                getattr(connection.client, method)(*args)
            except TException as exc:
                if isinstance(exc, TTransport.TTransportException):
                    raise
                # the metastore's own answer (no such table): the path is warm all the same

    def _connect(self, node: int) -> Connection:
        host, port = self.nodes.addresses[node]
        sock = TSocket.TSocket(host, port)
        sock.setTimeout(self.connect_timeout * 1000)
        transport = TTransport.TBufferedTransport(sock)
        transport.open()
        sock.setTimeout(self.timeout * 1000)  # from now on: how long a call may take
        client = ThriftHiveMetastore.Client(TBinaryProtocol.TBinaryProtocolAccelerated(transport))
        with self._lock:
            self._open[node] += 1
        return Connection(node, transport, sock, client)
