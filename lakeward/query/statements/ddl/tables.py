"""CREATE EXTERNAL TABLE, DROP TABLE, SHOW CREATE TABLE and ALTER TABLE of a table's definition.

The storage descriptor a statement names (STORED AS, ROW FORMAT, INPUTFORMAT) is
resolved through lakeward.query.formats, the one place that maps Hive's class names to
how files are read. A SerDe that neither lakeward nor Athena reads is refused when the
table is created; one only Athena reads (Grok, say) is kept, and refused when read.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from lakeward.access.arns import s3_arn
from lakeward.errors import InvalidRequest, ResourceNotFound
from lakeward.iceberg.catalog import is_iceberg
from lakeward.iceberg.commits import purge
from lakeward.metastore.tables import Column, TableInfo
from lakeward.query import formats
from lakeward.query.engines.base import EngineResult
from lakeward.query.model import TableRef
from lakeward.query.projection import projection_of
from lakeward.query.sql.names import Names
from lakeward.query.sql.tokens import Cursor
from lakeward.query.statements.base import Command, Context, no_rows
from lakeward.query.statements.ddl.common import (
    TableCommand,
    lake_location,
    refuse_view,
    table_ref,
)
from lakeward.query.statements.ddl.evolution import AlterIceberg
from lakeward.query.statements.ddl.parsing import Reader
from lakeward.storage.paths import lake_place

# ROW FORMAT DELIMITED's clauses, in Hive's order, and the SerDe parameter each sets.
_DELIMITED = (
    (("FIELDS", "TERMINATED", "BY"), "field.delim"),
    (("ESCAPED", "BY"), "escape.delim"),
    (("COLLECTION", "ITEMS", "TERMINATED", "BY"), "collection.delim"),
    (("MAP", "KEYS", "TERMINATED", "BY"), "mapkey.delim"),
    (("LINES", "TERMINATED", "BY"), "line.delim"),
    (("NULL", "DEFINED", "AS"), "serialization.null.format"),
)
# Table properties Athena gives a meaning lakeward does not implement: refused, never ignored.
_UNSUPPORTED_PROPERTIES = {
    "table_type": "an Iceberg table is made by CREATE TABLE, without EXTERNAL",
    "has_encrypted_data": "files encrypted on the client side (CSE-KMS) cannot be read",
}
# Kept by the metastore, not written by users: left out of SHOW CREATE TABLE.
_HIDDEN_PROPERTIES = frozenset({"EXTERNAL", "transient_lastDdlTime", "comment"})


def check_projection(context: Context, table: TableInfo) -> None:
    """A table's partition projection, if it has one, is complete, well-formed and places
    its partitions in the lake."""
    keys = [k.name for k in table.partition_keys]
    projection = projection_of(table.parameters, table.location, keys)
    if projection is not None:
        try:
            lake_location(context, projection.prefix)
        except InvalidRequest as exc:
            raise InvalidRequest(f"table property 'storage.location.template': {exc}") from None


def check_properties(properties: dict[str, str]) -> None:
    for key, value in properties.items():
        why = _UNSUPPORTED_PROPERTIES.get(key.lower())
        if why and value.lower() not in ("false", "hive"):  # the values meaning "not that"
            raise InvalidRequest(f"table property '{key}': {why}")
        if key in ("skip.header.line.count", "skip.footer.line.count") and not (value.isdigit()):
            raise InvalidRequest(f"table property '{key}' must be a whole number, not '{value}'")


@dataclass
class CreateTable(TableCommand):
    columns: list[Column]
    if_not_exists: bool = False
    comment: str | None = None
    partition_keys: list[Column] = field(default_factory=list)
    format: formats.TableFormat = formats.TEXTFILE
    location: str | None = None
    properties: dict[str, str] = field(default_factory=dict)
    bucket_columns: list[str] = field(default_factory=list)
    bucket_count: int = -1

    def run(self, context: Context) -> EngineResult:
        location = None if self.location is None else lake_location(context, self.location)
        context.authorize_table(["glue:CreateTable"], self.ref)
        client = self.metastore(context)
        client.require_database(self.ref.database)
        if location is None:  # Hive's default: a directory of the table's name in the database's
            location = f"{client.database(self.ref.database).location.rstrip('/')}/{self.ref.table}"
            location = lake_location(context, location)
        parameters = dict(self.properties)
        if self.comment is not None:
            parameters["comment"] = self.comment
        table = TableInfo(
            database=self.ref.database,
            name=self.ref.table,
            location=location,
            columns=self.columns,
            partition_keys=self.partition_keys,
            parameters=parameters,
            input_format=self.format.input_format,
            output_format=self.format.output_format,
            serde=self.format.serde,
            serde_parameters=dict(self.format.serde_parameters),
            bucket_columns=list(self.bucket_columns),
            bucket_count=self.bucket_count,
        )
        check_projection(context, table)
        if client.table_exists(self.ref.database, self.ref.table) or not client.create_table(table):
            if self.if_not_exists:
                return no_rows()
            raise InvalidRequest(f"Table {self.ref.database}.{self.ref.table} already exists")
        return no_rows()


def parse_create_external_table(sql: str, cursor: Cursor, names: Names) -> Command:
    reader = Reader(sql, cursor)
    reader.expect_words("CREATE", "EXTERNAL", "TABLE")
    if_not_exists = reader.if_not_exists()
    ref = table_ref(reader, names)
    if reader.peek() in ("AS", "LIKE"):
        reader.fail(
            "expected a list of columns (for a table made from a query, use "
            "CREATE TABLE ... WITH (external_location = ...) AS SELECT)"
        )
    columns = reader.columns()
    command = CreateTable(ref, columns, if_not_exists)
    if reader.word("COMMENT"):
        command.comment = reader.prose("a quoted comment")
    if reader.words("PARTITIONED", "BY"):
        command.partition_keys = reader.columns("partition column")
        for key in command.partition_keys:
            if any(c.name == key.name for c in columns):
                raise InvalidRequest(
                    f"partition column {key.name} is also a column of the table: a partition "
                    "column is not repeated in the column list"
                )
    if reader.words("CLUSTERED", "BY"):
        command.bucket_columns, command.bucket_count = _buckets(reader, columns)
    serde: str | None = None
    serde_parameters: dict[str, str] = {}
    if reader.words("ROW", "FORMAT"):
        if reader.expect("DELIMITED", "SERDE") == "DELIMITED":
            serde_parameters = _delimited(reader)
            serde = formats.LAZY_SIMPLE_SERDE
        else:
            serde = reader.string("a quoted SerDe class name")
            if reader.words("WITH", "SERDEPROPERTIES"):
                serde_parameters = reader.properties()
    stored = formats.TEXTFILE
    if serde == formats.OPENX_JSON_SERDE:
        stored = replace(stored, output_format=formats.OLD_TEXT_OUTPUT)
    if reader.words("STORED", "AS"):
        if reader.word("INPUTFORMAT"):
            input_format = reader.string("a quoted input format class name")
            reader.expect("OUTPUTFORMAT")
            output_format = reader.string("a quoted output format class name")
            stored = formats.TableFormat(input_format, output_format, formats.LAZY_SIMPLE_SERDE)
        else:
            name = reader.name("a file format")
            if name.upper() not in formats.STORED_AS:
                reader.cursor.pos -= 1
                known = ", ".join(formats.STORED_AS)
                reader.fail(f"expected a file format ({known} or INPUTFORMAT ... OUTPUTFORMAT)")
            stored = formats.stored_as(name)
    if reader.word("LOCATION"):
        command.location = reader.string("a quoted location")
    if reader.word("TBLPROPERTIES"):
        command.properties = reader.properties()
        check_properties(command.properties)
    reader.done()
    if serde is None:  # no ROW FORMAT: the format's own SerDe, with its parameters
        parameters = stored.serde_parameters or {"serialization.format": "1"}
        command.format = replace(stored, serde_parameters=dict(parameters))
    else:
        if "serialization.format" not in serde_parameters:
            serde_parameters["serialization.format"] = serde_parameters.get("field.delim", "1")
        command.format = formats.TableFormat(
            stored.input_format, stored.output_format, serde, serde_parameters
        )
    command.format.check_known()
    return command


def refuse_plain_create_table(sql: str, cursor: Cursor, names: Names) -> Command:
    """CREATE TABLE without EXTERNAL and without AS: Athena makes only external tables in a
    Hive catalog (CREATE TABLE ... AS SELECT is a write: ``statements.writes``)."""
    reader = Reader(sql, cursor)
    reader.expect_words("CREATE", "TABLE")
    reader.if_not_exists()
    table_ref(reader, names)
    if reader.peek() == "WITH":
        raise InvalidRequest(
            "CREATE TABLE ... WITH (...) needs AS and a query: CREATE TABLE t WITH (...) AS "
            "SELECT ... (or CREATE EXTERNAL TABLE with columns and a LOCATION)"
        )
    raise InvalidRequest(
        "CREATE TABLE without AS makes Iceberg tables only: add TBLPROPERTIES ('table_type' = "
        "'ICEBERG'); for a Hive table use CREATE EXTERNAL TABLE ... LOCATION, or CREATE TABLE "
        "... AS SELECT"
    )


def _buckets(reader: Reader, columns: list[Column]) -> tuple[list[str], int]:
    """``(col, ...) INTO n BUCKETS``: columns of the table (not partition keys), n >= 1."""
    reader.expect("(")
    names: list[str] = []
    while True:
        name = reader.name("a bucketing column")
        if all(c.name != name for c in columns):
            reader.cursor.pos -= 1
            reader.fail(f"bucketing column {name} is not a column of the table")
        names.append(name)
        if reader.expect(",", ")") == ")":
            break
    reader.expect("INTO")
    count = reader.integer("a number of buckets")
    if count < 1:
        reader.cursor.pos -= 1
        reader.fail("the number of buckets is at least 1")
    reader.expect("BUCKETS")
    return names, count


def _delimited(reader: Reader) -> dict[str, str]:
    found: dict[str, str] = {}
    for words, parameter in _DELIMITED:
        if not reader.words(*words):
            continue
        if words[0] == "ESCAPED" and "field.delim" not in found:
            reader.fail("ESCAPED BY follows FIELDS TERMINATED BY")
        value = reader.string("a quoted delimiter")
        if parameter == "line.delim" and value != "\n":
            raise InvalidRequest("LINES TERMINATED BY supports only newline ('\\n')")
        found[parameter] = value
        if parameter == "field.delim":
            found["serialization.format"] = value
    return found


@dataclass
class DropTable(TableCommand):
    if_exists: bool = False

    def run(self, context: Context) -> EngineResult:
        context.authorize_table(["glue:DeleteTable"], self.ref)
        client = self.metastore(context)
        try:
            table = client.table(self.ref.database, self.ref.table)
        except ResourceNotFound:
            if self.if_exists:
                return no_rows()
            raise
        if table.table_type == "VIRTUAL_VIEW":
            raise InvalidRequest(
                f"Cannot drop a view with DROP TABLE: {self.ref.database}.{self.ref.table} is a "
                "view; use DROP VIEW"
            )
        if is_iceberg(table.parameters):
            # Athena's Iceberg tables are managed: dropping one deletes its files too.
            bucket, key = lake_place(context.settings, table.location) or ("", "")
            if bucket:
                context.authorize("s3:DeleteObject", s3_arn(bucket, f"{key.rstrip('/')}/*"))
            purge(client.iceberg(context.settings), (self.ref.database, self.ref.table))
            client.invalidate(self.ref.database, self.ref.table)
            return no_rows()
        client.drop_table(self.ref.database, self.ref.table)
        return no_rows()


def parse_drop_table(sql: str, cursor: Cursor, names: Names) -> Command:
    reader = Reader(sql, cursor)
    reader.expect_words("DROP", "TABLE")
    if_exists = reader.if_exists()
    ref = table_ref(reader, names)
    reader.word("PURGE")  # Hive's: the data of an external table stays either way
    reader.done()
    return DropTable(ref, if_exists)


def create_statement(table: TableInfo) -> str:
    """The CREATE EXTERNAL TABLE that makes ``table`` again, laid out as Hive shows it."""
    out = [f"CREATE EXTERNAL TABLE `{table.database}`.`{table.name}`("]
    out += column_lines(table.columns)
    out[-1] += ")"
    if table.parameters.get("comment"):
        out.append(f"COMMENT {quote_string(table.parameters['comment'])}")
    if table.partition_keys:
        out.append("PARTITIONED BY ( ")
        out += column_lines(table.partition_keys)
        out[-1] += ")"
    if table.bucket_columns:
        out.append("CLUSTERED BY ( ")
        out += [f"  `{name}`, " for name in table.bucket_columns]
        out[-1] = out[-1].removesuffix(", ") + ") "
        out.append(f"INTO {table.bucket_count} BUCKETS")
    found = formats.TableFormat.of(table)
    delimited = {p for _w, p in _DELIMITED} | {"serialization.format"}
    if found.serde == formats.LAZY_SIMPLE_SERDE and set(found.serde_parameters) <= delimited:
        out.append("ROW FORMAT DELIMITED ")
        for words, parameter in _DELIMITED:
            if parameter in found.serde_parameters:
                value = quote_string(found.serde_parameters[parameter])
                out.append(f"  {' '.join(words)} {value} ")
    else:
        out += ["ROW FORMAT SERDE ", f"  {quote_string(found.serde)} "]
        shown = {k: v for k, v in found.serde_parameters.items()}
        if shown:
            out.append("WITH SERDEPROPERTIES ( ")
            out += property_lines(shown)
    out += ["STORED AS INPUTFORMAT ", f"  {quote_string(found.input_format)} "]
    out += ["OUTPUTFORMAT ", f"  {quote_string(found.output_format)}"]
    out += ["LOCATION", f"  {quote_string(table.location)}"]
    shown = {k: v for k, v in table.parameters.items() if k not in _HIDDEN_PROPERTIES}
    if shown:
        out.append("TBLPROPERTIES (")
        out += property_lines(shown)
    return "\n".join(out)


def column_lines(columns: list[Column]) -> list[str]:
    rows = []
    for column in columns:
        comment = f" COMMENT {quote_string(column.comment)}" if column.comment else ""
        rows.append(f"  `{column.name}` {column.type}{comment}, ")
    rows[-1] = rows[-1].removesuffix(", ")
    return rows


def property_lines(properties: dict[str, str]) -> list[str]:
    rows = [f"  {quote_string(k)}={quote_string(v)}, " for k, v in sorted(properties.items())]
    rows[-1] = rows[-1].removesuffix(", ") + ")"
    return rows


def quote_string(value: str) -> str:
    """A string literal of ``value`` that reader.unescape reads back.

    A quote is doubled (the SQL way, which lakeward's tokenizer reads); Hive's ``\\'``
    is not used for it.
    """
    out = []
    for char in value:
        if char == "'":
            out.append("''")
        elif char == "\\":
            out.append("\\\\")
        elif char == "\t":
            out.append("\\t")
        elif char == "\n":
            out.append("\\n")
        elif ord(char) < 32 or ord(char) == 127:
            out.append(f"\\{ord(char):03o}")
        else:
            out.append(char)
    return "'" + "".join(out) + "'"


@dataclass
class AlterTable(TableCommand):
    """SET TBLPROPERTIES, ADD COLUMNS and REPLACE COLUMNS: one change of the definition."""

    clause: str  # SET TBLPROPERTIES | ADD COLUMNS | REPLACE COLUMNS | SET LOCATION
    properties: dict[str, str] = field(default_factory=dict)
    columns: list[Column] = field(default_factory=list)
    location: str = ""

    def run(self, context: Context) -> EngineResult:
        if self.clause == "SET LOCATION":
            lake_location(context, self.location)  # refused before anything is asked
        context.authorize_table(["glue:UpdateTable"], self.ref)
        client = self.metastore(context)
        table = client.table(self.ref.database, self.ref.table)
        refuse_view(table, f"ALTER TABLE {self.clause}")
        if is_iceberg(table.parameters):
            if self.clause not in ("SET TBLPROPERTIES", "ADD COLUMNS"):
                raise InvalidRequest(
                    f"ALTER TABLE {self.clause} is not supported for Iceberg tables: "
                    f"{self.ref} is one"
                )
            change = AlterIceberg(self.ref, self.clause, self.columns, properties=self.properties)
            return change.run(context)
        if self.clause == "SET TBLPROPERTIES":
            changed = replace(table, parameters={**table.parameters, **self.properties})
            check_projection(context, changed)
        elif self.clause == "SET LOCATION":
            changed = replace(table, location=lake_location(context, self.location))
        else:
            columns = self.columns
            if self.clause == "ADD COLUMNS":
                columns = [*table.columns, *self.columns]
            taken = {c.name for c in table.partition_keys}
            seen: set[str] = set()
            for column in columns:
                if column.name in seen:
                    raise InvalidRequest(f"Column {column.name} already exists in {self.ref}")
                if column.name in taken:
                    raise InvalidRequest(
                        f"Column {column.name} is a partition column of {self.ref}"
                    )
                seen.add(column.name)
            changed = replace(table, columns=columns)
        client.alter_table(changed)
        return no_rows()


@dataclass
class RenameTable(TableCommand):
    """ALTER TABLE t RENAME TO u: the definition and partitions under a new name (in the same
    catalog); the data stays where it is. A rename is, to Glue's rights, the table deleted
    under its old name and created under the new one."""

    target: TableRef

    def run(self, context: Context) -> EngineResult:
        if self.target.catalog != self.ref.catalog:
            raise InvalidRequest(
                f"ALTER TABLE RENAME TO cannot move {self.ref} to another catalog "
                f"({self.target.catalog})"
            )
        context.authorize_table(["glue:DeleteTable"], self.ref)
        context.authorize_table(["glue:CreateTable"], self.target)
        catalog = self.metastore(context)
        table = catalog.table(self.ref.database, self.ref.table)
        refuse_view(table, "ALTER TABLE RENAME TO")
        catalog.require_database(self.target.database)
        if catalog.table_exists(self.target.database, self.target.table):
            raise InvalidRequest(f"Table {self.target} already exists")
        catalog.rename_table(
            self.ref.database, self.ref.table, self.target.database, self.target.table
        )
        return no_rows()


def parse_alter_definition(reader: Reader, ref: TableRef, names: Names) -> Command:
    """What follows ``ALTER TABLE name`` when it changes the definition (not partitions)."""
    if reader.words("RENAME", "TO"):
        target = table_ref(reader, names)
        reader.done()
        return RenameTable(ref, target)
    if reader.words("SET", "TBLPROPERTIES"):
        properties = reader.properties()
        check_properties(properties)
        reader.done()
        return AlterTable(ref, "SET TBLPROPERTIES", properties=properties)
    if reader.words("SET", "LOCATION"):
        location = reader.string("a quoted location")
        reader.done()
        return AlterTable(ref, "SET LOCATION", location=location)
    if reader.word("SET"):
        reader.fail("expected TBLPROPERTIES or LOCATION")
    clause = reader.expect("ADD", "REPLACE")
    reader.expect("COLUMNS")
    columns = reader.columns()
    reader.word("CASCADE", "RESTRICT")
    reader.done()
    return AlterTable(ref, f"{clause} COLUMNS", columns=columns)
