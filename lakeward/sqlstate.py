"""The services' own state in SQL: one way to open a database, migrate it and read times.

Every store (IAM, secrets, audit, the SQL service, BI, the erasure index and
requests) keeps its tables in SQLite by default (a path) or in another database
by URL (``postgresql://`` uses psycopg 3):

    engine = open_engine(path_or_url, sqlite_pragmas=("synchronous=NORMAL",))
    migrate(engine, "query", [create_v1, add_column_v2], label="query state")

``open_engine`` gives every SQLite file WAL, a busy timeout, foreign keys and
transactions that lakeward controls (``writer`` takes the write lock when a
transaction begins); a store's own trade-offs are visible as the pragmas or the
PostgreSQL session settings it passes. ``migrate`` applies the versioned steps a
database lacks, per component, in one transaction, recorded in ``schema_version``.
A first step that creates tables with ``create_all`` also adopts tables an earlier
lakeward made before it recorded versions.
"""

from __future__ import annotations

import logging
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import (
    Column,
    Integer,
    MetaData,
    String,
    Table,
    create_engine,
    event,
    insert,
    inspect,
    select,
    text,
    update,
)
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import OperationalError

from lakeward.errors import ConfigError

Step = Callable[[Connection], None]

_metadata = MetaData()
# One row per component (access, query, bi, ...): a database shared by several
# stores holds each one's version.
schema_version = Table(
    "schema_version",
    _metadata,
    Column("component", String(64), primary_key=True),
    Column("version", Integer, nullable=False),
)

# Execution option marking a transaction that will write (see ``_sqlite_begin``).
_WRITE = "lakeward_write"


def open_engine(
    url_or_path: str | Path,
    *,
    sqlite_pragmas: Sequence[str] = (),
    postgres_settings: Sequence[str] = (),
) -> Engine:
    """An engine for a SQLite file (a path) or a database URL.

    ``sqlite_pragmas`` (``"synchronous=NORMAL"``) and ``postgres_settings``
    (``"synchronous_commit = off"``) apply to every connection of this engine only.
    """
    if isinstance(url_or_path, Path) or "://" not in url_or_path:
        path = Path(url_or_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        url_or_path = f"sqlite:///{path}"
    url = make_url(url_or_path)
    if url.drivername in ("postgresql", "postgres"):
        url = url.set(drivername="postgresql+psycopg")
    try:
        engine = create_engine(url)
    except ModuleNotFoundError as e:
        raise ConfigError(
            f"the database driver for {url.drivername} is not installed ({e.name}); "
            "for PostgreSQL: pip install 'psycopg[binary]'"
        ) from None
    if engine.dialect.name == "sqlite":
        pragmas = ("journal_mode=WAL", "busy_timeout=5000", "foreign_keys=ON", *sqlite_pragmas)

        def on_connect(connection: Any, _record: Any) -> None:
            # Left to itself, Python's sqlite3 commits DDL on its own and opens
            # transactions late; take over so a migration is one transaction
            # (SQLAlchemy's documented recipe, with BEGIN emitted in _sqlite_begin).
            connection.isolation_level = None
            cursor = connection.cursor()
            for pragma in pragmas:
                cursor.execute(f"PRAGMA {pragma}")
            cursor.close()

        event.listen(engine, "connect", on_connect)
        event.listen(engine, "begin", _sqlite_begin)
    elif engine.dialect.name == "postgresql" and postgres_settings:

        def on_pg_connect(connection: Any, _record: Any) -> None:
            cursor = connection.cursor()
            for setting in postgres_settings:
                cursor.execute(f"SET {setting}")
            cursor.close()
            connection.commit()

        event.listen(engine, "connect", on_pg_connect)
    return engine


def writer(engine: Engine) -> Engine:
    """The same engine, with transactions that take the write lock when they begin."""
    return engine.execution_options(**{_WRITE: True})


def _sqlite_begin(conn: Connection) -> None:
    # A deferred transaction that reads and then writes fails at once (not after
    # the busy timeout) when another process wrote in between; a writer takes the
    # lock up front instead.
    immediate = conn.get_execution_options().get(_WRITE, False)
    conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


def migrate(engine: Engine, component: str, steps: Sequence[Step], *, label: str) -> int:
    """Apply the ``steps`` a database lacks for ``component``, in one transaction.

    ``label`` names the store in errors; returns the version the database was at.
    """
    latest = len(steps)
    with writer(engine).begin() as conn:
        if conn.dialect.name == "postgresql":
            # Two processes starting at once must not both create the tables.
            key = zlib.crc32(f"lakeward:{component}".encode())
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})
        current = current_version(conn, component)
        if current > latest:
            raise ConfigError(
                f"the {label} database {engine.url.render_as_string(hide_password=True)} is at "
                f"schema version {current}, newer than this lakeward knows ({latest}); "
                "upgrade lakeward, or point it at another database"
            )
        for step in steps[current:]:
            step(conn)
        if current == 0:
            conn.execute(insert(schema_version).values(component=component, version=latest))
        elif current < latest:
            conn.execute(
                update(schema_version)
                .where(schema_version.c.component == component)
                .values(version=latest)
            )
    return current


def current_version(conn: Connection, component: str) -> int:
    if not inspect(conn).has_table(schema_version.name):
        schema_version.create(conn)
        return 0
    query = select(schema_version.c.version).where(schema_version.c.component == component)
    return int(conn.execute(query).scalar() or 0)


T = TypeVar("T")
PERSIST_PATIENCE = 600.0
"""Seconds ``persisted`` keeps trying a write the database turns away."""

_log = logging.getLogger(__name__)


def persisted(
    write: Callable[[], T],
    what: str,
    patience: float = PERSIST_PATIENCE,
    stopping: threading.Event | None = None,
) -> T:
    """``write()``, tried again while the database turns it away for a while (SQLite's
    lock held past the busy timeout by a loaded machine's other processes, its disk full,
    PostgreSQL restarting): for a write whose loss would leave something wrong for good,
    such as an execution's end, which nothing else would ever record while its process
    lives. ``stopping``: once set, the next refusal is raised (its thread is to end)."""
    deadline, delay = time.monotonic() + patience, 0.05
    stopping = stopping or threading.Event()
    while True:
        try:
            return write()
        except OperationalError as exc:
            if not _for_a_while(exc) or time.monotonic() > deadline or stopping.is_set():
                raise
            _log.warning("%s: the database turned it away (%s); trying again", what, exc.orig)
            stopping.wait(delay)
            delay = min(1.0, delay * 2)


def _for_a_while(exc: OperationalError) -> bool:
    """Whether the database turned a write away for a while (a lock, a full disk, a lost
    connection), not for good (a missing table or file, which waiting does not mend)."""
    if exc.connection_invalidated:
        return True
    sqlite_name = getattr(exc.orig, "sqlite_errorname", None)
    if sqlite_name is not None:
        return str(sqlite_name).startswith(("SQLITE_BUSY", "SQLITE_LOCKED", "SQLITE_FULL"))
    # PostgreSQL's classes: connection exception, insufficient resources, operator
    # intervention (a restart), transaction rollback; none at all when the connection
    # went before the server answered.
    sqlstate = getattr(exc.orig, "sqlstate", None)
    return sqlstate is None or str(sqlstate).startswith(("08", "53", "57", "40"))


def as_utc(value: datetime) -> datetime:
    """A time read back from a store, in UTC: SQLite hands it back without its zone
    (everything stored is UTC), PostgreSQL in the session's zone."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def as_utc_or_none(value: datetime | None) -> datetime | None:
    return None if value is None else as_utc(value)


def open_foreign_engine(url: str) -> Engine:
    """An engine on a database lakeward does not own (a relational layer the erasure
    index reads and purges): no pragmas, no migrations, the owner's settings kept."""
    try:
        return create_engine(url)
    except ModuleNotFoundError as e:
        raise ConfigError(f"the database driver for {url} is not installed ({e.name})") from None
