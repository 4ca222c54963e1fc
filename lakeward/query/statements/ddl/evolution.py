"""Iceberg tables' properties as Athena names them, and changes to a table's schema and
properties: ALTER TABLE ... ADD COLUMNS, DROP COLUMN, CHANGE COLUMN, SET and UNSET
TBLPROPERTIES, committed through the table's catalog.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyiceberg.exceptions import ValidationError
from pyiceberg.table import Table

from lakeward.errors import InvalidRequest
from lakeward.iceberg.catalog import is_iceberg
from lakeward.iceberg.commits import commit_with_retries
from lakeward.iceberg.schemas import iceberg_schema
from lakeward.metastore.tables import Column
from lakeward.query.engines.base import EngineResult
from lakeward.query.model import TableRef
from lakeward.query.statements.base import Command, Context, no_rows
from lakeward.query.statements.ddl.common import TableCommand
from lakeward.query.statements.ddl.parsing import Reader

# Athena's table properties of an Iceberg table, each with the Iceberg property it sets
# (None: kept as given, read by lakeward's OPTIMIZE and VACUUM).
ICEBERG_PROPERTIES: dict[str, str | None] = {
    "table_type": None,
    "format": "write.format.default",
    "write_compression": "write.parquet.compression-codec",
    "write_target_data_file_size_bytes": "write.target-file-size-bytes",
    "vacuum_max_snapshot_age_seconds": None,
    "vacuum_min_snapshots_to_keep": None,
    "vacuum_max_metadata_files_to_keep": None,
    "optimize_rewrite_min_data_file_size_bytes": None,
    "optimize_rewrite_max_data_file_size_bytes": None,
    "optimize_rewrite_data_file_threshold": None,
    "optimize_rewrite_delete_file_threshold": None,
}
COMPRESSIONS = ("zstd", "snappy", "gzip", "lz4", "none")
WHOLE_NUMBERS = {
    k for k in ICEBERG_PROPERTIES if k.startswith(("vacuum_", "optimize_", "write_target"))
}


def iceberg_table_properties(given: dict[str, str]) -> dict[str, str]:
    """A new table's properties: Athena's as given (format and compression defaulted), and
    the Iceberg properties they stand for."""
    found = {"format": "parquet", "write_compression": "zstd", **given}
    found = {k: v.lower() if k in ("format", "write_compression") else v for k, v in found.items()}
    properties = {k: v for k, v in found.items() if k != "table_type"}
    for key, value in found.items():
        if (iceberg := ICEBERG_PROPERTIES.get(key)) is not None:
            properties[iceberg] = value
    return properties


def check_iceberg_properties(properties: dict[str, str]) -> None:
    if properties.get("table_type", "").upper() != "ICEBERG":
        raise InvalidRequest(
            "CREATE TABLE without AS makes Iceberg tables only: "
            "TBLPROPERTIES ('table_type' = 'ICEBERG'); for a Hive table use CREATE EXTERNAL TABLE"
        )
    for key, value in properties.items():
        if key not in ICEBERG_PROPERTIES:
            known = ", ".join(sorted(ICEBERG_PROPERTIES))
            raise InvalidRequest(
                f"table property '{key}' is not one of an Iceberg table's: {known}"
            )
        if key == "format" and value.lower() != "parquet":
            raise InvalidRequest(
                f"table property 'format' = '{value}': lakeward writes Iceberg tables as parquet"
            )
        if key == "write_compression" and value.lower() not in COMPRESSIONS:
            raise InvalidRequest(
                f"table property 'write_compression' = '{value}': one of {', '.join(COMPRESSIONS)}"
            )
        if key in WHOLE_NUMBERS and not value.isdigit():
            raise InvalidRequest(f"table property '{key}' must be a whole number, not '{value}'")


@dataclass
class AlterIceberg(TableCommand):
    """A change of an Iceberg table's schema or properties, committed through its catalog:
    ADD COLUMNS, DROP COLUMN, CHANGE COLUMN, SET and UNSET TBLPROPERTIES. Columns keep their
    field ids, so a renamed column reads its old data and a dropped one never comes back."""

    clause: str
    columns: list[Column] = field(default_factory=list)  # ADD COLUMNS; CHANGE's new column
    column: str = ""  # DROP COLUMN, CHANGE COLUMN: the column named
    properties: dict[str, str] = field(default_factory=dict)  # SET; UNSET: the keys
    if_exists: bool = False  # UNSET TBLPROPERTIES IF EXISTS

    def run(self, context: Context) -> EngineResult:
        context.authorize_table(["glue:UpdateTable"], self.ref)
        catalog = context.catalog(self.ref.catalog)
        info = catalog.table(self.ref.database, self.ref.table)
        if not is_iceberg(info.parameters):
            raise InvalidRequest(
                f"ALTER TABLE {self.clause} is supported for Iceberg tables only: {self.ref} "
                "is a Hive table"
            )
        identifier = (self.ref.database, self.ref.table)
        commit_with_retries(catalog.iceberg(context.settings), identifier, self._change)
        catalog.invalidate(self.ref.database, self.ref.table)
        return no_rows()

    def _change(self, table: Table) -> None:
        try:
            if self.clause in ("SET TBLPROPERTIES", "UNSET TBLPROPERTIES"):
                self._properties(table)
                return
            with table.update_schema() as update:
                if self.clause == "ADD COLUMNS":
                    for column, added in zip(
                        self.columns, iceberg_schema(self.columns).fields, strict=True
                    ):
                        update.add_column(column.name, added.field_type, column.comment)
                elif self.clause == "DROP COLUMN":
                    update.delete_column(self.column)
                else:  # CHANGE COLUMN old new type [COMMENT]
                    new = self.columns[0]
                    kind = iceberg_schema([new]).fields[0].field_type
                    current = table.schema().find_field(self.column)
                    if current.field_type != kind:
                        update.update_column(self.column, field_type=kind)
                    if new.comment is not None:
                        update.update_column(self.column, doc=new.comment)
                    if new.name != self.column:
                        update.rename_column(self.column, new.name)
        except (ValueError, ValidationError) as exc:
            raise InvalidRequest(f"ALTER TABLE {self.ref} {self.clause}: {exc}") from None

    def _properties(self, table: Table) -> None:
        if self.clause == "SET TBLPROPERTIES":
            given = {k.lower(): v for k, v in self.properties.items()}
            check_iceberg_properties({**given, "table_type": "ICEBERG"})
            values = {k: v for k, v in given.items() if k != "table_type"}
            for key, value in given.items():
                if (iceberg := ICEBERG_PROPERTIES.get(key)) is not None:
                    values[iceberg] = value
            with table.transaction() as transaction:
                transaction.set_properties(values)
            return
        keys = list(self.properties)
        missing = [k for k in keys if k not in table.properties]
        if missing and not self.if_exists:
            raise InvalidRequest(
                f"UNSET TBLPROPERTIES: {self.ref} has no property '{missing[0]}' "
                "(IF EXISTS skips those)"
            )
        present = [k for k in keys if k in table.properties]
        present += [
            i for k in present if (i := ICEBERG_PROPERTIES.get(k)) and i in table.properties
        ]
        if present:
            with table.transaction() as transaction:
                transaction.remove_properties(*present)


def parse_alter_iceberg(reader: Reader, ref: TableRef) -> Command:
    """``DROP COLUMN c``, ``CHANGE [COLUMN] old new type [COMMENT '...']`` and
    ``UNSET TBLPROPERTIES [IF EXISTS] ('k', ...)``, after ``ALTER TABLE name``."""
    if reader.words("DROP", "COLUMN"):
        column = reader.name("a column name")
        reader.done()
        return AlterIceberg(ref, "DROP COLUMN", column=column)
    if reader.word("CHANGE"):
        reader.word("COLUMN")
        column = reader.name("a column name")
        name = reader.name("the column's new name")
        kind = reader.hive_type(f"column {name}")
        comment = reader.prose("a quoted comment") if reader.word("COMMENT") else None
        reader.done()
        return AlterIceberg(ref, "CHANGE COLUMN", [Column(name, kind, comment)], column)
    reader.expect_words("UNSET", "TBLPROPERTIES")
    if_exists = reader.if_exists()
    reader.expect("(")
    keys: dict[str, str] = {}
    while True:
        keys[reader.string("a quoted property name").lower()] = ""
        if reader.expect(",", ")") == ")":
            break
    reader.done()
    return AlterIceberg(ref, "UNSET TBLPROPERTIES", properties=keys, if_exists=if_exists)
