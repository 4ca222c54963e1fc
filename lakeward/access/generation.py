"""The IAM generation, read cheaply on every request.

Every request decides by the IAM generation (``Principals.generation``), which any
IAM change bumps in the same transaction. Reading it is a query: about 0.3 ms on
SQLite through SQLAlchemy's pool, on every request.

On SQLite one connection of this process watches the database instead:
``PRAGMA data_version`` (a few µs) changes whenever any other connection, of
this process or of another (the ``lakeward iam`` command, another server
worker), has committed to the file since this connection last looked. The
generation is read again only then. So a change committed before a request
begins still decides that request, in every process, with no message to pass.

On PostgreSQL the generation is read per request (one round trip): a
``LISTEN``/``NOTIFY`` channel would save it, but a notification arrives after
the commit, on its own time, so the request that follows a change at once
could still be decided by the old policies.
"""

from __future__ import annotations

import os
import sqlite3
import threading

from sqlalchemy import select
from sqlalchemy.engine import Engine

from lakeward.access.schema import generation

_READ = "SELECT value FROM iam_generation WHERE id = 1"


class GenerationReader:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        database = engine.url.database
        self._path = database if engine.dialect.name == "sqlite" and database else None
        self._lock = threading.Lock()
        self._watch: sqlite3.Connection | None = None
        self._pid = 0  # the process that opened the watch (a forked child opens its own)
        self._seen: tuple[int, int] | None = None  # (data_version, generation)

    def read(self) -> int:
        if self._path is None:
            query = select(generation.c.value).where(generation.c.id == 1)
            with self.engine.connect() as conn:
                return int(conn.execute(query).scalar_one())
        with self._lock:
            watch = self._connection(self._path)
            (version,) = watch.execute("PRAGMA data_version").fetchone()
            if self._seen is not None and self._seen[0] == version:
                return self._seen[1]
            # A commit landing between the two reads changes data_version again, so
            # the next call reads the generation again: never a stale pair.
            (value,) = watch.execute(_READ).fetchone()
            self._seen = (version, int(value))
            return self._seen[1]

    def close(self) -> None:
        with self._lock:
            if self._watch is not None and self._pid == os.getpid():
                self._watch.close()
            self._watch, self._seen = None, None

    def _connection(self, path: str) -> sqlite3.Connection:
        if self._watch is None or self._pid != os.getpid():
            # Autocommit: no read transaction is left open, so each read sees the
            # newest commit.
            self._watch = sqlite3.connect(
                path, timeout=5, isolation_level=None, check_same_thread=False
            )
            self._pid, self._seen = os.getpid(), None
        return self._watch
