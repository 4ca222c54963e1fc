"""The audit log's tables, the triggers that keep them append-only, their migrations, and
the SQLite appender: the storage side of ``audit.py``."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    insert,
    text,
)
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError

metadata = MetaData()
COMPONENT = "audit"  # its row in sqlstate's schema_version

audit_log = Table(
    "audit_log",
    metadata,
    # Ids are assigned by lakeward, not the database: the hash covers the id, so
    # it must be known before the insert. (Integer on SQLite to keep the rowid.)
    Column(
        "id",
        BigInteger().with_variant(Integer, "sqlite"),
        primary_key=True,
        autoincrement=False,
    ),
    Column("time", DateTime(timezone=True), nullable=False, index=True),
    Column("principal", Text, nullable=False, index=True),
    Column("action", Text, nullable=False),
    Column("resource", Text, nullable=False),
    Column("decision", String(16), nullable=False),
    Column("statement", Text),
    Column("request_id", Text),
    Column("source", Text, nullable=False),
    Column("hash", String(64), nullable=False),
)

audit_segments = Table(
    "audit_segments",
    metadata,
    Column("first_id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True),
    Column("last_id", BigInteger, nullable=False, unique=True),
    Column("records", Integer, nullable=False),
    Column("prev_hash", String(64), nullable=False),  # the hash the segment chains onto
    Column("last_hash", String(64), nullable=False),
    Column("name", Text, nullable=False),  # the file's name in the archive directory
    Column("sha256", String(64), nullable=False),  # of the file's bytes
    Column("sealed_at", DateTime(timezone=True), nullable=False),
)

_REFUSED = "the audit log is append-only: {op} refused"
_SEALED_THROUGH = "(SELECT COALESCE(MAX(last_id), 0) FROM audit_segments)"

SQLITE_TRIGGERS = [
    f"""CREATE TRIGGER IF NOT EXISTS audit_log_no_update BEFORE UPDATE ON audit_log
        BEGIN SELECT RAISE(ABORT, '{_REFUSED.format(op="UPDATE")}'); END""",
    # A record leaves the table only once a sealed segment holds it.
    f"""CREATE TRIGGER IF NOT EXISTS audit_log_no_delete BEFORE DELETE ON audit_log
        WHEN OLD.id > {_SEALED_THROUGH}
        BEGIN SELECT RAISE(ABORT, '{_REFUSED.format(op="DELETE")}'); END""",
    *(
        f"""CREATE TRIGGER IF NOT EXISTS audit_segments_no_{op.lower()}
            BEFORE {op} ON audit_segments
            BEGIN SELECT RAISE(ABORT, '{_REFUSED.format(op=op)}'); END"""
        for op in ("UPDATE", "DELETE")
    ),
]

POSTGRES_TRIGGERS = [
    # Serializes two processes setting up the same database at once.
    "LOCK TABLE audit_log IN SHARE ROW EXCLUSIVE MODE",
    # The message is concatenated: a % placeholder would be taken as the driver's.
    # A record leaves audit_log only once a sealed segment holds it.
    f"""CREATE OR REPLACE FUNCTION lakeward_audit_log_append_only() RETURNS trigger
       LANGUAGE plpgsql AS $$
       BEGIN
           -- Nested: PL/pgSQL does not promise to stop at the first false AND.
           IF TG_OP = 'DELETE' AND TG_TABLE_NAME = 'audit_log' THEN
               IF OLD.id <= {_SEALED_THROUGH} THEN
                   RETURN OLD;
               END IF;
           END IF;
           RAISE EXCEPTION USING MESSAGE = 'the audit log is append-only: ' || TG_OP || ' refused';
       END $$""",
    *(
        f"""DO $$ BEGIN
       IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = '{table}'::regclass
                      AND tgname = '{table}_no_change') THEN
           CREATE TRIGGER {table}_no_change BEFORE UPDATE OR DELETE ON {table}
               FOR EACH ROW EXECUTE FUNCTION lakeward_audit_log_append_only();
       END IF;
       IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = '{table}'::regclass
                      AND tgname = '{table}_no_truncate') THEN
           CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table}
               FOR EACH STATEMENT EXECUTE FUNCTION lakeward_audit_log_append_only();
       END IF;
       END $$"""
        for table in ("audit_log", "audit_segments")
    ),
]


class SqliteAppender:
    """Rows into ``audit_log`` through the driver's own connection (the engine's pragmas
    applied), the values stored as SQLAlchemy stores them."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        compiled = insert(audit_log).compile(dialect=engine.dialect)
        self._sql = str(compiled)
        self._names = list(compiled.positiontup or ())
        time_type = audit_log.c.time.type.dialect_impl(engine.dialect)
        processor = time_type.bind_processor(engine.dialect)
        self._time: Callable[[Any], Any] = processor or (lambda value: value)

    def insert(self, rows: list[dict[str, Any]]) -> None:
        """Insert ``rows`` in one transaction; SQLAlchemy's errors, as the engine raises them."""
        values = [
            tuple(self._time(row[n]) if n == "time" else row[n] for n in self._names)
            for row in rows
        ]
        connection = self._engine.raw_connection()  # from the engine's pool
        con: sqlite3.Connection = connection.driver_connection  # type: ignore[assignment]
        try:
            con.execute("BEGIN IMMEDIATE")
            try:
                con.executemany(self._sql, values)
                con.execute("COMMIT")
            except BaseException:
                if con.in_transaction:
                    con.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise DBAPIError.instance(self._sql, None, exc, sqlite3.Error) from exc
        finally:
            connection.close()


def _create_v1(conn: Connection) -> None:
    audit_log.create(conn, checkfirst=True)  # also adopts a table made before versions


def _segments_v2(conn: Connection) -> None:
    audit_segments.create(conn, checkfirst=True)
    if conn.dialect.name == "sqlite":
        # Its successor lets sealed records leave; the log's opening creates it.
        conn.execute(text("DROP TRIGGER IF EXISTS audit_log_no_delete"))


MIGRATIONS = [_create_v1, _segments_v2]
