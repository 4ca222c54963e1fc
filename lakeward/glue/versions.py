"""Table versions: the earlier definitions of each table, which the metastore does not keep.

Glue keeps a table's history (GetTableVersions); the Hive Metastore keeps only the
current definition. lakeward archives a table's definition each time Glue's UpdateTable
replaces it (and ``lakeward table restore`` puts one back). The current definition is
always the metastore's and is the newest version; archived versions are numbered before
it. A version belongs to one life of the table: each records the table's create time,
so a table dropped and created again under the same name starts a new history.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import (
    Column,
    DateTime,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    delete,
    insert,
    select,
)
from sqlalchemy.engine import Connection, Engine

from lakeward.query.model import JsonDict
from lakeward.sqlstate import migrate, writer

metadata = MetaData()
COMPONENT = "glue"

table_versions = Table(
    "glue_table_versions",
    metadata,
    Column("catalog", String(128), primary_key=True),
    Column("database_name", String(128), primary_key=True),
    Column("table_name", String(256), primary_key=True),
    Column("created", Integer, primary_key=True),  # the table's create time: its life
    Column("version", Integer, primary_key=True),
    Column("definition", Text, nullable=False),  # Glue's Table, as JSON
    Column("archived", DateTime(timezone=True), nullable=False),
)


@dataclass(frozen=True)
class TableVersion:
    version: int
    table: JsonDict
    archived: datetime


def _create_v1(conn: Connection) -> None:
    metadata.create_all(conn)


class TableVersions:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        migrate(engine, COMPONENT, [_create_v1], label="Glue table versions")
        self._writer = writer(engine)

    def archived(self, catalog: str, database: str, table: str, created: int) -> list[TableVersion]:
        """The table's earlier definitions in this life, oldest first."""
        c = table_versions.c
        query = (
            select(c.version, c.definition, c.archived)
            .where(c.catalog == catalog, c.database_name == database, c.table_name == table)
            .where(c.created == created)
            .order_by(c.version)
        )
        with self.engine.connect() as conn:
            rows = conn.execute(query).all()
        return [TableVersion(v, json.loads(d), a) for v, d, a in rows]

    def archive(
        self,
        catalog: str,
        database: str,
        table: str,
        created: int,
        version: int,
        definition: JsonDict,
    ) -> None:
        with self._writer.begin() as conn:
            conn.execute(
                insert(table_versions).values(
                    catalog=catalog,
                    database_name=database,
                    table_name=table,
                    created=created,
                    version=version,
                    definition=json.dumps(definition, default=str),
                    archived=datetime.now(UTC),
                )
            )

    def delete(
        self, catalog: str, database: str, table: str, versions: list[int] | None = None
    ) -> int:
        """Forget archived versions (all of the table's, every life, when ``versions`` is
        None); how many went."""
        c = table_versions.c
        where = (c.catalog == catalog) & (c.database_name == database) & (c.table_name == table)
        if versions is not None:
            where &= c.version.in_(versions)
        with self._writer.begin() as conn:
            return int(conn.execute(delete(table_versions).where(where)).rowcount)
