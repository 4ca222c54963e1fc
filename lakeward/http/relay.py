"""The webhook's notifications, from the worker that received them to the one indexer.

The supervisor of ``lakeward serve`` runs the real-time indexer (background.py);
a worker that receives ``POST /events/s3`` hands the parsed notification to it
over a local socket (an abstract Unix socket, with a key only the supervisor
and its workers know) and answers 202 once the indexer has queued it, so an
accepted notification is never only in a worker that may die. If the
supervisor cannot be reached the sender gets a 503 and sends again, as S3's
senders do.
"""

from __future__ import annotations

import logging
import secrets
import threading
from multiprocessing.connection import Client, Connection, Listener
from typing import TYPE_CHECKING

from lakeward.errors import Unavailable

if TYPE_CHECKING:  # the supervisor starts its workers before it loads the rest
    from lakeward.erasure.realtime import Parsed
    from lakeward.http.events import EventSink

log = logging.getLogger(__name__)


class RelayServer:
    """In the supervisor: takes the workers' notifications and gives them to ``indexer``."""

    def __init__(self, indexer: EventSink | None = None) -> None:
        self._ready = threading.Event()
        self.indexer = indexer
        self.key = secrets.token_bytes(32)
        self.address = f"\0lakeward-events-{secrets.token_hex(8)}"  # abstract: no file
        self._listener = Listener(self.address, family="AF_UNIX", authkey=self.key)
        self._closed = False
        threading.Thread(target=self._accept, name="event-relay", daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn = self._listener.accept()
            except Exception:  # closed, or a client that failed the key
                continue
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: Connection) -> None:
        with conn:
            while True:
                try:
                    parsed = conn.recv()
                except (EOFError, OSError):
                    return  # the worker went away
                self._ready.wait()
                assert self.indexer is not None
                self.indexer.accept(parsed)
                conn.send(True)

    @property
    def indexer(self) -> EventSink | None:
        return self._indexer

    @indexer.setter
    def indexer(self, indexer: EventSink | None) -> None:
        """Set before a worker serves (a worker's notification waits for it)."""
        self._indexer = indexer
        if indexer is not None:
            self._ready.set()

    def close(self) -> None:
        self._closed = True
        self._listener.close()


class RelayClient:
    """In a worker: an ``EventSink`` that hands notifications to the supervisor."""

    def __init__(self, address: str, key: bytes) -> None:
        self.address = address
        self.key = key
        self._conn: Connection | None = None
        self._lock = threading.Lock()

    def accept(self, parsed: Parsed) -> None:
        with self._lock:
            for attempt in range(2):  # once more on a new connection: the old may be stale
                try:
                    if self._conn is None:
                        self._conn = Client(self.address, family="AF_UNIX", authkey=self.key)
                    self._conn.send(parsed)
                    self._conn.recv()
                    return
                except (OSError, EOFError) as exc:
                    self._conn = None
                    if attempt:
                        log.warning("the event relay did not answer: %s", exc)
        raise Unavailable("the server's indexer is restarting; send the notification again")
