"""CREATE TABLE ... WITH (table_type = 'ICEBERG', ...) AS SELECT, as Athena runs it.

    CREATE TABLE t WITH (table_type = 'ICEBERG', is_external = false,
                         location = 's3://...', partitioning = ARRAY['day(ts)', 'bucket(8, id)'],
                         format = 'PARQUET', write_compression = 'ZSTD', vacuum_... = ...)
    AS SELECT ... [WITH [NO] DATA]

The query's columns (Athena's types, as Hive names them) make the table's schema; the table
is created through its catalog and the rows appended as its first snapshot. A failure after
the table was created drops it again, files and all: never a half-made table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lakeward.errors import InvalidRequest, QueryCancelled
from lakeward.iceberg.commits import arrow_rows, purge
from lakeward.iceberg.schemas import iceberg_schema, partition_spec
from lakeward.metastore.tables import Column
from lakeward.query.engines.base import EngineResult, WriteResult
from lakeward.query.engines.writers import hive_columns
from lakeward.query.model import StatementType, TableRef
from lakeward.query.sql.queries import Statement
from lakeward.query.statements.base import Context
from lakeward.query.statements.ddl.common import lake_location
from lakeward.query.statements.ddl.evolution import (
    ICEBERG_PROPERTIES,
    check_iceberg_properties,
    iceberg_table_properties,
)
from lakeward.query.statements.writes.commands import _authorize_put, _FromSelect, _rows_result

ICEBERG_CTAS_PROPERTIES = ("location", "partitioning", "is_external")


@dataclass
class CreateIcebergTableAs(_FromSelect):
    table: TableRef
    select: Statement
    properties: dict[str, Any] = field(default_factory=dict)
    with_data: bool = True
    if_not_exists: bool = False
    statement_type: StatementType = StatementType.DML
    substatement_type: str | None = "CREATE_TABLE_AS_SELECT"

    def __post_init__(self) -> None:
        if self.properties.get("is_external") is not False:
            raise InvalidRequest(
                "an Iceberg table made by CREATE TABLE AS is not external: give is_external = false"
            )
        textual = {
            k: str(v) for k, v in self.properties.items() if k not in ICEBERG_CTAS_PROPERTIES
        }
        check_iceberg_properties({**textual, "table_type": "ICEBERG"})
        partitioning = self.properties.get("partitioning", [])
        if not isinstance(partitioning, list):
            raise InvalidRequest("partitioning is an ARRAY of columns and transforms")
        location = self.properties.get("location")
        if location is not None and not isinstance(location, str):
            raise InvalidRequest("location must be a quoted string")

    def catalogs(self) -> set[str]:
        return {self.table.catalog, *super().catalogs()}

    def run(self, context: Context) -> EngineResult:
        ref = self.table
        context.authorize_table(["glue:CreateTable"], ref)
        catalog = context.catalog(ref.catalog)
        catalog.require_database(ref.database)
        if catalog.table_exists(ref.database, ref.table):
            if self.if_not_exists:
                return _rows_result(WriteResult([], [], 0))
            raise InvalidRequest(f"table {ref} already exists")
        location = self.properties.get("location")
        if location is None:
            database = catalog.database(ref.database)
            location = f"{database.location.rstrip('/')}/{ref.table}"
        location = lake_location(context, location).rstrip("/")
        _authorize_put(context, location)
        plan = context.plan(self.select)
        result = plan.engine.execute(context.execution.id, plan.sql, plan.tables, plan.limits)
        batches = list(result.batches) if self.with_data else []
        names = [c.name.lower() for c in result.columns]
        if len(set(names)) != len(names):
            raise InvalidRequest("the SELECT gives two columns the same name")
        typed = hive_columns(result.schema, result.columns)
        schema = iceberg_schema([Column(n.lower(), t) for n, t in typed])
        spec = partition_spec(schema, [str(p) for p in self.properties.get("partitioning", [])])
        if context.cancelled():
            raise QueryCancelled("the query was cancelled")
        iceberg = catalog.iceberg(context.settings)
        textual = {k: str(v) for k, v in self.properties.items() if k in ICEBERG_PROPERTIES}
        table = iceberg.create_table(
            (ref.database, ref.table),
            schema,
            location=location,
            partition_spec=spec,
            properties=iceberg_table_properties(textual),
        )
        try:
            rows = arrow_rows(batches, table.schema().as_arrow())
            if rows.num_rows:
                table.append(rows)
        except BaseException:
            purge(iceberg, (ref.database, ref.table))  # never a half-made table
            raise
        finally:
            catalog.invalidate(ref.database, ref.table)
        return _rows_result(WriteResult([], [], rows.num_rows, result.bytes_scanned))
