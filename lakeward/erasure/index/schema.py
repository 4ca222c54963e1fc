"""The index metastore's tables and their migrations.

Uses the same engine opening and migration runner as the access stores
(``lakeward.access.schema``), under its own component name in
``schema_version``, so the index may share a PostgreSQL database with them.

Tables (all prefixed ``erasure_``):

* ``erasure_objects`` -- one row per indexed *source*: an object of the lake
  (its URI) or a relational layer (its ``database.table.column``). It holds the
  eTag and event sequencer the entries were built from, when, how many
  records were read and how many had no id, and ``deleted`` for a source whose
  removal was seen (kept as a tombstone, so that an older create event arriving
  late is recognised and ignored). Entries hang off its integer ``id``: a URI
  is stored once, not once per record.
* ``erasure_records`` -- record-level entries: (user id, source, position).
  The eTag a position is valid for is its source's ``etag``.
* ``erasure_locations`` -- object-level entries: (user id, source, layer,
  location, records): file-name objects, sidecar-described objects and
  relational rows, where there are no positions. ``records`` is NULL when the
  whole object is the user's (file-name and sidecar objects).
* ``erasure_datasets`` -- data mappers registered at run time (a JSON spec).
* ``erasure_dead_letters`` -- objects or events that could not be indexed, why.
* ``erasure_counters`` -- named event counters (events seen, ignored, ...).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    event,
)
from sqlalchemy.engine import Connection, Engine

from lakeward import sqlstate
from lakeward.sqlstate import open_engine, writer

__all__ = [
    "COMPONENT",
    "LATEST",
    "counters",
    "datasets",
    "dead_letters",
    "locations",
    "metadata",
    "migrate",
    "objects",
    "open_index_engine",
    "records",
    "writer",
]

metadata = MetaData()
COMPONENT = "erasure-index"

objects = Table(
    "erasure_objects",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("uri", Text, nullable=False, unique=True),
    Column("dataset", String(64), nullable=False, index=True),
    Column("etag", Text),
    # S3 sequencers are hex strings of varying width; stored left-padded to
    # SEQUENCER_WIDTH so that string order is numeric order.
    Column("sequencer", String(64)),
    Column("indexed_at", DateTime(timezone=True), nullable=False),
    Column("records", BigInteger, nullable=False, default=0),
    Column("records_without_id", BigInteger, nullable=False, default=0),
    Column("deleted", Boolean, nullable=False, default=False),
)


def _source_fk() -> ForeignKey:
    return ForeignKey("erasure_objects.id", ondelete="CASCADE")


records = Table(
    "erasure_records",
    metadata,
    Column("user_id", Text, nullable=False),
    Column("object_id", Integer, _source_fk(), nullable=False),
    Column("position", BigInteger, nullable=False),
    Index("erasure_records_user", "user_id"),
    Index("erasure_records_object", "object_id"),
)

locations = Table(
    "erasure_locations",
    metadata,
    Column("user_id", Text, nullable=False),
    Column("object_id", Integer, _source_fk(), nullable=False),
    Column("layer", String(32), nullable=False),
    Column("location", Text, nullable=False),
    Column("records", BigInteger),
    Index("erasure_locations_user", "user_id"),
    Index("erasure_locations_object", "object_id"),
)

datasets = Table(
    "erasure_datasets",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("kind", String(16), nullable=False),  # objects | relational
    Column("spec", Text, nullable=False),  # JSON of the mapper's settings
    Column("registered_at", DateTime(timezone=True), nullable=False),
)

dead_letters = Table(
    "erasure_dead_letters",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("source", Text, nullable=False),  # an object URI, or "event" for a malformed one
    Column("reason", Text, nullable=False),
    Column("at", DateTime(timezone=True), nullable=False, index=True),
)

counters = Table(
    "erasure_counters",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("value", BigInteger, nullable=False),
)


def _v1(conn: Connection) -> None:
    # Built from the definitions above. The day a table changes, freeze its v1
    # shape here first, so that v1 followed by v2 still gives the v2 layout.
    metadata.create_all(conn)


MIGRATIONS: list[Callable[[Connection], None]] = [_v1]
LATEST = len(MIGRATIONS)


def migrate(engine: Engine) -> int:
    """Bring the index database to ``LATEST``; return the version it was at before."""
    return sqlstate.migrate(engine, COMPONENT, MIGRATIONS, label="erasure index")


def open_index_engine(url_or_path: str | Path) -> Engine:
    """An engine on the index database (a SQLite path or a URL), migrated to ``LATEST``."""
    engine = open_engine(url_or_path)
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _relaxed_sync)
    migrate(engine)
    return engine


def _relaxed_sync(connection: Any, _record: Any) -> None:
    # In WAL mode, NORMAL keeps the database consistent through a crash and only
    # risks the last commits on power loss; the index can be rebuilt from the
    # lake, and FULL's fsync per commit would cap real-time indexing.
    cursor = connection.cursor()
    cursor.execute("PRAGMA synchronous=NORMAL")
    # Entries arrive in random user id order, so every insert touches its own page
    # of the user id index; SQLite's default 2 MB page cache re-reads them from the
    # OS at every statement once the index outgrows it. 64 MB (allocated as used)
    # keeps the hot pages of an index of millions of entries.
    cursor.execute("PRAGMA cache_size=-65536")
    cursor.close()
