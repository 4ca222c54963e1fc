"""Resolving an Iceberg table for a query: which snapshot, and the metadata tables.

- ``FOR VERSION AS OF <snapshot id>`` reads that snapshot; ``FOR TIMESTAMP AS OF <t>`` the
  snapshot current at ``t`` (the last one committed at or before it). Either reads with the
  schema the snapshot was written with, as Trino does. Before the first snapshot, the error
  names the earliest one.
- ``"t$snapshots"``, ``"t$history"``, ``"t$files"``, ``"t$manifests"``, ``"t$partitions"`` and
  ``"t$refs"`` are the table's metadata as rows (pyiceberg's inspection, whose columns are
  Trino's), read with the same permissions as the table.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

import duckdb
import pyarrow as pa
from pyiceberg.table import Table

from lakeward.config import Settings
from lakeward.errors import InvalidRequest, JavaError, ResourceNotFound
from lakeward.iceberg.catalog import METADATA_LOCATION, is_iceberg, table_at
from lakeward.iceberg.schemas import table_columns
from lakeward.jvm import iceberg_runtime_jar
from lakeward.metastore.tables import Column, TableInfo
from lakeward.query.catalogs.base import Catalog
from lakeward.query.engines.base import ResolvedTable
from lakeward.query.model import TableRef, WorkGroup
from lakeward.query.sql.queries import Statement
from lakeward.query.types import hive_type_of_arrow

METADATA_TABLES = ("snapshots", "history", "files", "manifests", "partitions", "refs")


def resolve_iceberg(
    settings: Settings, catalog: Catalog, ref: TableRef, info: TableInfo
) -> ResolvedTable | None:
    """The Iceberg table (or metadata table) ``ref`` names, ``info`` being the metastore's
    table (the base table of a metadata table); None for any other table."""
    base, _, kind = ref.table.partition("$")
    if not is_iceberg(info.parameters):
        if kind:
            raise ResourceNotFound(
                f"Table {ref.database}.{ref.table} does not exist: {base} is not an Iceberg "
                "table, which alone has metadata tables"
            )
        if ref.version:
            raise InvalidRequest(
                f"{ref.current} is not an Iceberg table: {ref.version} reads Iceberg tables only"
            )
        return None
    iceberg = catalog.iceberg(settings)
    location = info.parameters.get(METADATA_LOCATION)
    # The metastore client's table is current (its cache follows the change log), and so
    # is the metadata file it names: read once, kept.
    if location:
        table = table_at(iceberg, (ref.database, base), location)
    else:
        table = iceberg.load_table((ref.database, base))
    parameters = dict(info.parameters)
    if kind:
        rows = _metadata_rows(table, kind, ref)
        columns = [Column(f.name, hive_type_of_arrow(f.type, f.name)) for f in rows.schema]
        return ResolvedTable(ref, info.location, columns, parameters=parameters, rows=rows)
    snapshot_id = _snapshot_id(table, ref) if ref.version else None
    schema = table.schema()
    if snapshot_id is not None:
        snapshot = table.snapshot_by_id(snapshot_id)
        if snapshot is not None and snapshot.schema_id is not None:
            schema = table.schemas().get(snapshot.schema_id, schema)
    return ResolvedTable(
        ref,
        info.location,
        table_columns(schema),
        parameters=parameters,
        iceberg=table,
        snapshot_id=snapshot_id,
    )


def refuse_iceberg_otherwise(
    group: WorkGroup, tables: list[ResolvedTable], select: Statement
) -> None:
    """Refuse, by name, what a workgroup whose engine is not DuckDB cannot answer as Athena
    would of Iceberg tables. Spark reads them through Iceberg's runtime (the snapshot the
    planner chose, by its id), and their metadata tables as the rows lakeward reads them
    (Spark's own have other columns than Trino's), ``"$path"`` as Iceberg's ``_file``; it
    gives no other hidden column, nor row places (DELETE, UPDATE and MERGE are Spark's own
    there: statements/writes/rows.py and merge.py)."""
    found = [t for t in tables if t.iceberg is not None or t.rows is not None]
    if not found:
        return
    if group.engine != "spark" or not _spark_runtime():
        raise InvalidRequest(
            f"{found[0].ref} is an Iceberg table, which workgroup {group.name}'s "
            f"{group.engine} engine does not read here; use a DuckDB workgroup"
        )
    target = select.target
    text = target._ast.sql(dialect="trino") if target._ast is not None else target.sql
    if _OTHER_HIDDEN.search(text) or "__lakeward_" in text:
        raise InvalidRequest(
            f'NOT_SUPPORTED: the hidden columns of Iceberg tables other than "$path" are '
            f"read in DuckDB workgroups only, not in workgroup {group.name}; use a DuckDB "
            "workgroup"
        )


# "$path" is Iceberg's _file in Spark (translate/spark/); the others it does not give.
_OTHER_HIDDEN = re.compile(r'"\$(?!path")')


def _spark_runtime() -> bool:
    try:
        iceberg_runtime_jar()
    except JavaError:
        return False
    return True


def _metadata_rows(table: Table, kind: str, ref: TableRef) -> pa.Table:
    if kind not in METADATA_TABLES:
        raise ResourceNotFound(
            f"Table {ref.database}.{ref.table} does not exist: an Iceberg table's metadata "
            f"tables are {', '.join('$' + k for k in METADATA_TABLES)}"
        )
    if ref.version:
        raise InvalidRequest(f"{ref.version} does not apply to the metadata table {ref.table}")
    rows: pa.Table = getattr(table.inspect, kind)()
    return rows


def _snapshot_id(table: Table, ref: TableRef) -> int:
    snapshots = sorted(table.snapshots(), key=lambda s: s.timestamp_ms)
    if ref.version.startswith("FOR VERSION AS OF "):
        wanted = int(ref.version.removeprefix("FOR VERSION AS OF "))
        if table.snapshot_by_id(wanted) is None:
            raise InvalidRequest(
                f"Iceberg snapshot {wanted} of {ref.current} does not exist"
                + (f" (the current one is {snapshots[-1].snapshot_id})" if snapshots else "")
            )
        return wanted
    at = _timestamp_ms(ref)
    before = [s for s in snapshots if s.timestamp_ms <= at]
    if not before:
        if not snapshots:
            raise InvalidRequest(f"{ref.current} has no snapshot: nothing was written to it")
        first = snapshots[0]
        raise InvalidRequest(
            f"No version history table {ref.current} at or before "
            f"{_iso(at)}: its earliest snapshot is {first.snapshot_id}, committed at "
            f"{_iso(first.timestamp_ms)}"
        )
    return before[-1].snapshot_id


def _timestamp_ms(ref: TableRef) -> int:
    expression = ref.version.removeprefix("FOR TIMESTAMP AS OF ")
    # A constant expression (a literal, or current_timestamp minus an interval), in DuckDB's
    # SQL, evaluated alone: it names no table, and the query's checks have passed on it.
    connection = duckdb.connect(config={"enable_external_access": "false"})
    try:
        connection.execute("SET TimeZone = 'UTC'")
        found = connection.execute(f"SELECT epoch_ms(({expression}))").fetchone()
    except duckdb.Error as exc:
        raise InvalidRequest(
            f"FOR TIMESTAMP AS OF of {ref.current} takes a timestamp: {exc}"
        ) from None
    finally:
        connection.close()
    if found is None or found[0] is None:
        raise InvalidRequest(f"FOR TIMESTAMP AS OF of {ref.current} is NULL")
    return int(found[0])


def _iso(epoch_ms: int) -> str:
    moment = datetime.fromtimestamp(epoch_ms / 1000, UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"
