"""CREATE TABLE of an Iceberg table, as Athena writes it.

    CREATE TABLE [IF NOT EXISTS] db.t (col type [COMMENT '...'], ...)
    [COMMENT '...']
    [PARTITIONED BY (col, year(ts), month(ts), day(ts), hour(ts), bucket(n, c), truncate(n, c))]
    [LOCATION 's3://...']
    TBLPROPERTIES ('table_type' = 'ICEBERG' [, 'format' = 'parquet'] [, 'write_compression' = ...]
                   [, 'vacuum_...' | 'optimize_...' = ...])

The table is made through pyiceberg's HiveCatalog, so it is kept in the metastore exactly as
Iceberg's own catalogs keep it, and Spark, Trino or pyiceberg on the metastore open it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyiceberg.exceptions import TableAlreadyExistsError
from pyiceberg.table import Table

from lakeward.errors import InvalidRequest
from lakeward.iceberg.schemas import iceberg_schema, partition_spec, table_columns, transform_text
from lakeward.metastore.tables import Column, TableInfo
from lakeward.query.engines.base import EngineResult
from lakeward.query.sql.names import Names
from lakeward.query.sql.tokens import Cursor
from lakeward.query.statements.base import Command, Context, no_rows
from lakeward.query.statements.ddl.common import TableCommand, lake_location, table_ref
from lakeward.query.statements.ddl.evolution import (
    ICEBERG_PROPERTIES,
    check_iceberg_properties,
    iceberg_table_properties,
)
from lakeward.query.statements.ddl.parsing import Reader
from lakeward.query.statements.ddl.tables import (
    column_lines,
    property_lines,
    quote_string,
)


@dataclass
class CreateIcebergTable(TableCommand):
    columns: list[Column]
    if_not_exists: bool = False
    comment: str | None = None
    partitioning: list[str] = field(default_factory=list)
    location: str | None = None
    properties: dict[str, str] = field(default_factory=dict)

    def run(self, context: Context) -> EngineResult:
        schema = iceberg_schema(self.columns)
        spec = partition_spec(schema, self.partitioning)
        location = None if self.location is None else lake_location(context, self.location)
        context.authorize_table(["glue:CreateTable"], self.ref)
        catalog = context.catalog(self.ref.catalog)
        catalog.require_database(self.ref.database)
        if location is None:  # as Hive places a table: a folder of its name in the database's
            database = catalog.database(self.ref.database)
            location = lake_location(context, f"{database.location.rstrip('/')}/{self.ref.table}")
        if catalog.table_exists(self.ref.database, self.ref.table):
            if self.if_not_exists:
                return no_rows()
            raise InvalidRequest(f"Table {self.ref.database}.{self.ref.table} already exists")
        try:
            catalog.iceberg(context.settings).create_table(
                (self.ref.database, self.ref.table),
                schema,
                location=location.rstrip("/"),
                partition_spec=spec,
                properties=self._iceberg_properties(),
            )
        except TableAlreadyExistsError:
            if self.if_not_exists:
                return no_rows()
            raise InvalidRequest(
                f"Table {self.ref.database}.{self.ref.table} already exists"
            ) from None
        catalog.invalidate(self.ref.database, self.ref.table)
        return no_rows()

    def _iceberg_properties(self) -> dict[str, str]:
        properties = iceberg_table_properties(self.properties)
        if self.comment is not None:
            properties["comment"] = self.comment
        return properties


def parse_create_iceberg_table(sql: str, cursor: Cursor, names: Names) -> Command:
    reader = Reader(sql, cursor)
    reader.expect_words("CREATE", "TABLE")
    if_not_exists = reader.if_not_exists()
    ref = table_ref(reader, names)
    command = CreateIcebergTable(ref, reader.columns(), if_not_exists)
    if reader.word("COMMENT"):
        command.comment = reader.string("a quoted comment")
    if reader.words("PARTITIONED", "BY"):
        command.partitioning = _transforms(reader)
    if reader.word("LOCATION"):
        command.location = reader.string("a quoted location")
    if not reader.word("TBLPROPERTIES"):
        reader.fail("expected TBLPROPERTIES ('table_type' = 'ICEBERG')")
    command.properties = {k.lower(): v for k, v in reader.properties().items()}
    reader.done()
    check_iceberg_properties(command.properties)
    return command


def _transforms(reader: Reader) -> list[str]:
    """``(col, day(ts), bucket(16, id))``: each transform's text, as written."""
    reader.expect("(")
    found: list[str] = []
    while True:
        start, depth = reader.token(), 0
        while (token := reader.token()) is not None:
            if depth == 0 and token.text in (",", ")"):
                break
            depth += (token.text == "(") - (token.text == ")")
            reader.cursor.pos += 1
        end = reader.tokens[reader.pos - 1]
        if start is None or reader.token() is start:
            reader.fail("expected a partition column or transform")
        found.append(reader.sql[start.start : end.end + 1])
        if reader.expect(",", ")") == ")":
            return found


def iceberg_create_statement(info: TableInfo, table: Table) -> str:
    """The CREATE TABLE that makes an Iceberg table again: its current schema, partition
    transforms, place and Athena's table properties."""
    schema = table.schema()
    out = [f"CREATE TABLE `{info.database}`.`{info.name}`("]
    out += column_lines(table_columns(schema))
    out[-1] += ")"
    if table.properties.get("comment"):
        out.append(f"COMMENT {quote_string(table.properties['comment'])}")
    transforms = transform_text(schema, table.spec())
    if transforms:
        out.append(f"PARTITIONED BY ({', '.join(transforms)})")
    out += ["LOCATION", f"  {quote_string(table.location())}"]
    shown = {"table_type": "iceberg"}
    for key, value in table.properties.items():
        if key in ICEBERG_PROPERTIES and key != "table_type":
            shown[key] = value
    out.append("TBLPROPERTIES (")
    out += property_lines(shown)
    return "\n".join(out)
