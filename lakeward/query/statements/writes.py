"""Writes: CREATE TABLE ... AS SELECT, INSERT INTO ... SELECT|VALUES, and UNLOAD.

Each runs its SELECT on the workgroup's engine as a query would (``QueryService.plan``:
tables resolved, reading authorized, SQL translated), the engine writes the rows into a
staging directory (``Engine.write``), and ``publish.Write`` publishes the files through
the lake's storage (checksums, object events) under the table's lock, then registers
the metadata last: the table for a CTAS, the new partitions (one ``add_partitions``) for
an INSERT. Anything refused is refused before a file is published; a failure or a stop
rolls back what was published and registered; a process that dies mid-write is rolled
back by the next one that notices (``publish.roll_back_orphans``).

Athena's rules: a CTAS's ``external_location`` must be an empty place in the lake
(without one, the table goes to ``<workgroup result location>/tables/<query id>``); the
partition columns are the SELECT's last, in ``partitioned_by``'s order; the table's
Hive types follow from the SELECT's result types. The result is Trino's: one row of one
``rows`` column (the rows written), and ``UpdateCount`` in GetQueryResults.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from sqlglot import exp
from sqlglot.tokenizer_core import TokenType

from lakeward.access.arns import (
    glue_catalog_arn,
    glue_database_arn,
    glue_table_arn,
    s3_arn,
)
from lakeward.errors import (
    InvalidRequest,
    QueryCancelled,
    StorageError,
    TableNotFound,
)
from lakeward.metastore.client import Column, PartitionInfo, TableInfo
from lakeward.query.engines.base import (
    Compression,
    EngineResult,
    WriteFormat,
    WriteResult,
    WriteTarget,
)
from lakeward.query.engines.readers import hive_byte
from lakeward.query.engines.writers import (
    HIVE_NULL,
    TEXT_NULL,
    compression_of,
    hive_columns,
    partition_directory,
)
from lakeward.query.formats import TableFormat, stored_as
from lakeward.query.model import StatementType, TableRef
from lakeward.query.statements import PARSERS, Command, Context, claims
from lakeward.query.statements.publish import Write
from lakeward.query.types import AthenaType
from lakeward.storage.paths import lake_place

if TYPE_CHECKING:
    from lakeward.metastore.client import MetastoreClient
    from lakeward.query.service import Plan
    from lakeward.query.sql import Cursor, Names, Statement

ROWS_COLUMN = "rows"  # Trino's (and Athena's) one result column of CTAS and INSERT
# The table formats (formats.TableFormat.kind) lakeward writes: not OpenCSVSerde, not Avro.
_KINDS: dict[str, WriteFormat] = {
    "parquet": "parquet",
    "orc": "orc",
    "json": "json",
    "text": "text",
}
_COMPRESSION_NAMES = ("write_compression", "parquet_compression", "orc_compression")
_COMPRESSION_PARAMETER = {
    "parquet": "parquet.compression",
    "orc": "orc.compress",
    "json": "write.compression",
    "text": "write.compression",
}
_CTAS_PROPERTIES = (
    "table_type",
    "external_location",
    "format",
    "partitioned_by",
    "bucketed_by",
    "bucket_count",
    "write_compression",
    "field_delimiter",
    "parquet_compression",
    "orc_compression",
)
_UNLOAD_PROPERTIES = ("format", "compression", "partitioned_by", "field_delimiter")
_INTEGRAL = ("tinyint", "smallint", "integer", "bigint")


# -- parsing ----------------------------------------------------------------------------------


def _properties(cursor: Cursor, known: tuple[str, ...], what: str) -> dict[str, Any]:
    """``( name = value, ... )``: values are strings, numbers or ARRAY['...', ...]."""
    found: dict[str, Any] = {}
    cursor.expect("(")
    while True:
        start = cursor.pos
        name = cursor.name()
        if name not in known:
            cursor.pos = start
            cursor.fail(f"unknown {what} property '{name}' (known: {', '.join(known)})")
        if name in found:
            cursor.pos = start
            cursor.fail(f"property '{name}' is given twice")
        cursor.expect("=")
        found[name] = _value(cursor)
        if cursor.expect(",", ")") == ")":
            return found


def _value(cursor: Cursor) -> Any:
    if cursor.word("ARRAY"):
        cursor.expect("[")
        items = []
        if not cursor.word("]"):
            while True:
                items.append(cursor.string())
                if cursor.expect(",", "]") == "]":
                    break
        return items
    if cursor.pos < len(cursor.tokens) and cursor.tokens[cursor.pos].token_type == TokenType.NUMBER:
        cursor.pos += 1
        return int(cursor.tokens[cursor.pos - 1].text)
    return cursor.string()


def _query(sql: str, cursor: Cursor, end: int, names: Names) -> Statement:
    """The SELECT (or VALUES) from the cursor up to token ``end`` (exclusive)."""
    from lakeward.query.sql import parse_query

    if cursor.pos >= end:
        cursor.fail("expected a query")
    first, last = cursor.tokens[cursor.pos], cursor.tokens[end - 1]
    if first.text.upper() not in ("SELECT", "WITH", "VALUES", "("):
        cursor.fail("expected SELECT, WITH, VALUES or a parenthesised query")
    return parse_query(sql[first.start : last.end + 1], names)


def _string_property(props: dict[str, Any], name: str) -> str | None:
    value = props.get(name)
    if value is not None and not isinstance(value, str):
        raise InvalidRequest(f"property {name} must be a quoted string")
    return value


def _write_format(name: str) -> tuple[TableFormat, WriteFormat]:
    if name.upper() == "AVRO":
        raise InvalidRequest(
            "format AVRO is not supported for writes: lakeward has no Avro writer "
            "(use PARQUET, ORC, JSON or TEXTFILE)"
        )
    table_format = stored_as(name)
    return table_format, _KINDS[table_format.kind]


def _delimiter(props: dict[str, Any], kind: WriteFormat) -> str:
    value = _string_property(props, "field_delimiter")
    if value is None:
        return "\x01"
    if kind != "text":
        raise InvalidRequest("field_delimiter is allowed only with format TEXTFILE")
    if len(value) != 1:
        raise InvalidRequest(f"field_delimiter must be one character, not '{value}'")
    return value


def _partition_names(props: dict[str, Any]) -> tuple[str, ...]:
    value = props.get("partitioned_by", [])
    if not isinstance(value, list):
        raise InvalidRequest("partitioned_by must be an ARRAY of column names")
    names = tuple(v.lower() for v in value)
    if len(set(names)) != len(names):
        raise InvalidRequest("partitioned_by names a column twice")
    return names


@dataclass(frozen=True)
class _Options:
    """How a write lays its files out."""

    table_format: TableFormat
    kind: WriteFormat
    compression: Compression
    partitioned_by: tuple[str, ...] = ()
    delimiter: str = "\x01"
    null_format: str = TEXT_NULL

    def serde_parameters(self) -> dict[str, str]:
        parameters = dict(self.table_format.serde_parameters)
        if self.kind == "text":
            parameters["field.delim"] = self.delimiter
            parameters["serialization.format"] = self.delimiter
        return parameters


def _ctas_options(props: dict[str, Any]) -> _Options:
    table_type = (_string_property(props, "table_type") or "HIVE").upper()
    if table_type == "ICEBERG":
        raise InvalidRequest(
            "table_type 'ICEBERG' is not supported: lakeward's CTAS writes Hive tables"
        )
    if table_type != "HIVE":
        raise InvalidRequest(f"table_type '{table_type}' is not supported (HIVE or ICEBERG)")
    if "bucketed_by" in props or "bucket_count" in props:
        raise InvalidRequest(
            "bucketed_by and bucket_count are not supported: lakeward does not write "
            "bucketed tables"
        )
    table_format, kind = _write_format(_string_property(props, "format") or "PARQUET")
    compressions = [props[k] for k in _COMPRESSION_NAMES if k in props]
    if len(compressions) > 1:
        raise InvalidRequest("give the compression once (write_compression)")
    for legacy, legacy_kind in (("parquet_compression", "parquet"), ("orc_compression", "orc")):
        if legacy in props and kind != legacy_kind:
            raise InvalidRequest(f"{legacy} is allowed only with format {legacy_kind.upper()}")
    given = compressions[0] if compressions else None
    if given is not None and not isinstance(given, str):
        raise InvalidRequest("write_compression must be a quoted string")
    return _Options(
        table_format,
        kind,
        compression_of(kind, given),
        _partition_names(props),
        _delimiter(props, kind),
    )


def _data_tail(cursor: Cursor) -> tuple[int, bool]:
    """Where a CTAS's query ends, and whether ``WITH NO DATA`` ends the statement."""
    words = [t.text.upper() for t in cursor.tokens[-3:]]
    if words[-3:] == ["WITH", "NO", "DATA"]:
        return len(cursor.tokens) - 3, False
    if words[-2:] == ["WITH", "DATA"]:
        return len(cursor.tokens) - 2, True
    return len(cursor.tokens), True


_plain_create_table = PARSERS.get(("CREATE", "TABLE"))
"""The catalog module's CREATE TABLE without AS, if it claims one (imported before us)."""


@claims("CREATE", "TABLE")
def parse_create_table(sql: str, cursor: Cursor, names: Names) -> Command:
    start = cursor.pos
    cursor.expect("CREATE")
    cursor.expect("TABLE")
    if_not_exists = False
    if cursor.word("IF"):
        cursor.expect("NOT")
        cursor.expect("EXISTS")
        if_not_exists = True
    if _without_as(cursor):
        if _plain_create_table is not None:
            cursor.pos = start
            return _plain_create_table(sql, cursor, names)
        cursor.fail(
            "only external tables are created: use CREATE EXTERNAL TABLE ... LOCATION, "
            "or CREATE TABLE ... AS SELECT"
        )
    table = names.table(cursor.names(3))
    props = _properties(cursor, _CTAS_PROPERTIES, "CREATE TABLE AS") if cursor.word("WITH") else {}
    cursor.expect("AS")
    end, with_data = _data_tail(cursor)
    select = _query(sql, cursor, end, names)
    _check_named(select)
    options = _ctas_options(props)
    location = _string_property(props, "external_location")
    return CreateTableAs(table, select, options, location, with_data, if_not_exists)


def _check_named(select: Statement) -> None:
    """A table's columns need names: Trino's refusal of an unnamed expression."""
    tree = select._ast
    while isinstance(tree, (exp.SetOperation, exp.Subquery)):
        tree = tree.left if isinstance(tree, exp.SetOperation) else tree.this
    if isinstance(tree, exp.Values):
        raise InvalidRequest("Column name not specified at position 1 (name the VALUES' columns)")
    if isinstance(tree, exp.Select):
        for position, item in enumerate(tree.expressions, 1):
            if not isinstance(item, (exp.Alias, exp.Column, exp.Star)):
                raise InvalidRequest(f"Column name not specified at position {position}")


def _without_as(cursor: Cursor) -> bool:
    """Whether the statement has no AS at its top level (a CREATE TABLE with columns)."""
    depth = 0
    for token in cursor.tokens[cursor.pos :]:
        if token.token_type in (TokenType.L_PAREN, TokenType.L_BRACKET):
            depth += 1
        elif token.token_type in (TokenType.R_PAREN, TokenType.R_BRACKET):
            depth -= 1
        elif depth == 0 and token.token_type == TokenType.ALIAS:
            return False
    return True


@claims("INSERT", "INTO")
def parse_insert(sql: str, cursor: Cursor, names: Names) -> Command:
    cursor.expect("INSERT")
    cursor.expect("INTO")
    table = names.table(cursor.names(3))
    columns: tuple[str, ...] | None = None
    if cursor.peek() == "(" and not _starts_query(cursor, cursor.pos + 1):
        cursor.expect("(")
        listed = [cursor.name()]
        while cursor.expect(",", ")") == ",":
            listed.append(cursor.name())
        if len(set(listed)) != len(listed):
            raise InvalidRequest("INSERT INTO names a column twice")
        columns = tuple(listed)
    select = _query(sql, cursor, len(cursor.tokens), names)
    return InsertInto(table, select, columns)


def _starts_query(cursor: Cursor, index: int) -> bool:
    return index < len(cursor.tokens) and cursor.tokens[index].text.upper() in (
        "SELECT",
        "WITH",
        "VALUES",
        "(",
    )


@claims("UNLOAD")
def parse_unload(sql: str, cursor: Cursor, names: Names) -> Command:
    cursor.expect("UNLOAD")
    if cursor.peek() != "(":
        cursor.fail("expected ( and the query to unload")
    close = _matching(cursor, cursor.pos)
    cursor.expect("(")
    select = _query(sql, cursor, close, names)
    cursor.pos = close + 1
    cursor.expect("TO")
    location = cursor.string()
    props = _properties(cursor, _UNLOAD_PROPERTIES, "UNLOAD") if cursor.word("WITH") else {}
    cursor.done()
    name = _string_property(props, "format")
    if name is None:
        raise InvalidRequest("UNLOAD needs WITH (format = ...): PARQUET, ORC, JSON or TEXTFILE")
    table_format, kind = _write_format(name)
    given = props.get("compression")
    if given is not None and not isinstance(given, str):
        raise InvalidRequest("compression must be a quoted string")
    options = _Options(
        table_format,
        kind,
        compression_of(kind, given),
        _partition_names(props),
        _delimiter(props, kind),
    )
    return Unload(select, location, options)


def _matching(cursor: Cursor, index: int) -> int:
    depth = 0
    for i in range(index, len(cursor.tokens)):
        kind = cursor.tokens[i].token_type
        if kind == TokenType.L_PAREN:
            depth += 1
        elif kind == TokenType.R_PAREN:
            depth -= 1
            if depth == 0:
                return i
    cursor.fail("the query to unload has no closing )")


# -- running ----------------------------------------------------------------------------------


@dataclass
class _Writing:
    """What every write statement does around the engine's write: one place for the protocol."""

    context: Context
    location: str
    options: _Options
    columns: tuple[str, ...] | None = None
    write: Write | None = field(default=None, init=False)

    def run(self, plan: Plan) -> WriteResult:
        service, execution = self.context.service, self.context.execution
        self.write = Write(
            service.settings,
            service.storage,
            service.store,
            execution.id,
            service.presence.id,
            self.location,
        )
        target = WriteTarget(
            str(self.write.staging),
            self.options.kind,
            self.options.compression,
            self.options.partitioned_by,
            self.options.delimiter,
            prefix=f"{execution.id}_",
            columns=self.columns,
            null_format=self.options.null_format,
        )
        return plan.engine.write(execution.id, plan.sql, plan.tables, plan.limits, target)

    def publish(self, written: WriteResult, places: list[str] | None = None) -> None:
        if self.context.cancelled():
            raise QueryCancelled("the query was cancelled")
        assert self.write is not None
        self.write.publish(written.files, places)

    def roll_back(self) -> None:
        if self.write is not None:
            self.write.roll_back()


def _lake_location(context: Context, uri: str, what: str) -> tuple[str, str]:
    place = lake_place(context.service.settings, uri)
    if place is None or not place[0]:
        raise InvalidRequest(
            f"{what} {uri} is not in the lake ({context.service.settings.lake_root})"
        )
    return place


def _require_empty(context: Context, uri: str, what: str) -> None:
    bucket, key = _lake_location(context, uri, what)
    prefix = key.rstrip("/") + "/" if key else ""
    try:
        held = context.service.storage.keys(bucket, prefix)
    except StorageError:  # no such bucket: nothing there
        held = []
    if held:
        raise InvalidRequest(f"{what} {uri} is not empty: a write's target must be empty")


def _authorize_put(context: Context, uri: str) -> None:
    bucket, key = _lake_location(context, uri, "the location")
    context.authorize("s3:PutObject", s3_arn(bucket, f"{key.rstrip('/')}/*"))


def _rows_result(written: WriteResult, count: bool = True) -> EngineResult:
    if not count:
        return EngineResult([], iter([]), written.bytes_scanned, update_count=written.rows)
    column = AthenaType.of("bigint").column(ROWS_COLUMN)
    batch = pa.record_batch([pa.array([written.rows], pa.int64())], names=[ROWS_COLUMN])
    return EngineResult([column], iter([batch]), written.bytes_scanned, update_count=written.rows)


def _partitions(location: str, written: WriteResult, keys: tuple[str, ...]) -> list[PartitionInfo]:
    values = dict.fromkeys(f.partition for f in written.files)
    return [
        PartitionInfo(
            [HIVE_NULL if v is None else v for v in vs],
            f"{location.rstrip('/')}/{partition_directory(keys, vs)}",
        )
        for vs in values
    ]


def _check_partition_order(names: list[str], keys: tuple[str, ...]) -> None:
    if keys and tuple(n.lower() for n in names[-len(keys) :]) != keys:
        raise InvalidRequest(
            "partition columns must be the last columns of the SELECT, in the order of "
            f"partitioned_by: {', '.join(keys)} (the SELECT's columns: {', '.join(names)})"
        )


def _check_select(select: Statement, engine: str) -> None:
    from lakeward.query.sql import check_translatable

    check_translatable(select, engine)


def _client(context: Context, ref: TableRef) -> MetastoreClient:
    return context.service.catalogs.connector(ref.catalog).client


class _FromSelect(Command):
    """A write whose rows a SELECT gives: it reads that SELECT's tables, on any engine
    that can run the SELECT."""

    select: Statement

    def tables_read(self) -> tuple[TableRef, ...]:
        return self.select.tables

    def check(self, engine: str) -> None:
        _check_select(self.select, engine)


@dataclass
class CreateTableAs(_FromSelect):
    table: TableRef
    select: Statement
    options: _Options
    external_location: str | None
    with_data: bool = True
    if_not_exists: bool = False  # Trino's: an existing table is left as it is, 0 rows
    statement_type: StatementType = StatementType.DML
    substatement_type: str | None = "CREATE_TABLE_AS_SELECT"

    def catalogs(self) -> set[str]:
        return {self.table.catalog, *super().catalogs()}

    def run(self, context: Context) -> EngineResult:
        ref, execution = self.table, context.execution
        for arn in (
            glue_catalog_arn(ref.catalog),
            glue_database_arn(ref.catalog, ref.database),
            glue_table_arn(ref.catalog, ref.database, ref.table),
        ):
            context.authorize("glue:CreateTable", arn)
        client = _client(context, ref)
        context.service.catalogs.connector(ref.catalog).require_database(ref.database)
        if client.table_exists(ref.database, ref.table):
            if self.if_not_exists:
                return _rows_result(WriteResult([], [], 0))
            raise InvalidRequest(f"table {ref} already exists")
        results = execution.output_location.rsplit("/", 1)[0]
        location = (self.external_location or f"{results}/tables/{execution.id}").rstrip("/")
        _require_empty(context, location, "external_location")
        _authorize_put(context, location)
        select = self.select
        if not self.with_data:  # only the columns and their types are wanted
            assert isinstance(select._ast, exp.Query)
            select = dataclasses.replace(
                select, _ast=exp.select("*").from_(select._ast.subquery("_q")).limit(0)
            )
        plan = context.service.plan(execution, select)
        writing = _Writing(context, location, self.options)
        try:
            written = writing.run(plan)
            info = self._table_info(location, written)
            writing.publish(written)
            assert writing.write is not None
            writing.write.creating(client, ref)
            if not _create(client, info):
                raise InvalidRequest(f"table {ref} already exists")
            keys = self.options.partitioned_by
            if keys and written.files:
                client.add_partitions(ref.database, ref.table, _partitions(location, written, keys))
            writing.write.registered(context.cancelled)
            writing.write.commit()
        except BaseException:
            writing.roll_back()
            raise
        return _rows_result(written)

    def _table_info(self, location: str, written: WriteResult) -> TableInfo:
        names = [c.name for c in written.columns]
        keys = self.options.partitioned_by
        _check_partition_order(names, keys)
        if len(set(names)) != len(names):
            raise InvalidRequest("the SELECT gives two columns the same name")
        typed = hive_columns(written.schema, written.columns)
        data = [Column(n.lower(), t) for n, t in typed[: len(typed) - len(keys)]]
        partition_keys = [Column(n.lower(), t) for n, t in typed[len(typed) - len(keys) :]]
        kind = self.options.kind
        parameters = {_COMPRESSION_PARAMETER[kind]: self.options.compression.upper()}
        table_format = self.options.table_format
        return TableInfo(
            database=self.table.database,
            name=self.table.table,
            location=location,
            columns=data,
            partition_keys=partition_keys,
            parameters=parameters,
            input_format=table_format.input_format,
            output_format=table_format.output_format,
            serde=table_format.serde,
            serde_parameters=self.options.serde_parameters(),
        )


def _create(client: MetastoreClient, info: TableInfo) -> bool:
    """Create the table; False if one of that name exists (nothing changed then)."""
    return client.create_table(info)


@dataclass
class InsertInto(_FromSelect):
    table: TableRef
    select: Statement
    columns: tuple[str, ...] | None
    statement_type: StatementType = StatementType.DML
    substatement_type: str | None = "INSERT"

    def catalogs(self) -> set[str]:
        return {self.table.catalog, *super().catalogs()}

    def run(self, context: Context) -> EngineResult:
        ref, execution = self.table, context.execution
        client = _client(context, ref)
        try:
            info = client.table(ref.database, ref.table)
        except TableNotFound:
            raise InvalidRequest(f"table {ref} does not exist") from None
        if info.table_type == "VIRTUAL_VIEW":
            raise InvalidRequest(f"{ref} is a view: INSERT INTO writes tables only")
        table_arn = glue_table_arn(ref.catalog, ref.database, ref.table)
        context.authorize("glue:UpdateTable", table_arn)
        if info.partition_keys:
            context.authorize("glue:BatchCreatePartition", table_arn)
        options = self._options(info)
        _lake_location(context, info.location, "the table's location")
        _authorize_put(context, info.location)
        select = self._select(context, info)
        plan = context.service.plan(execution, select)
        writing = _Writing(context, info.location, options)
        try:
            written = writing.run(plan)
            keys = options.partitioned_by
            known = {}
            if keys and written.files:
                known = {
                    tuple(p.values): p.location for p in client.partitions(ref.database, ref.table)
                }
            writing.publish(written, self._places(context, info, written, known))
            registered = _partitions(info.location, written, keys) if keys else []
            new = [p for p in registered if tuple(p.values) not in known]
            if new:
                client.add_partitions(ref.database, ref.table, new)
            assert writing.write is not None
            writing.write.registered(context.cancelled)
            writing.write.commit()
        except BaseException:
            writing.roll_back()
            raise
        return _rows_result(written)

    def _places(
        self,
        context: Context,
        info: TableInfo,
        written: WriteResult,
        known: dict[tuple[str, ...], str],
    ) -> list[str]:
        """Where each file goes: a registered partition's own location, else the table's."""
        places = []
        for file in written.files:
            values = tuple(HIVE_NULL if v is None else v for v in file.partition)
            where = known.get(values)
            if where is None:
                places.append(f"{info.location.rstrip('/')}/{file.path}")
                continue
            _lake_location(context, where, f"partition {'/'.join(values)}'s location")
            _authorize_put(context, where)
            places.append(f"{where.rstrip('/')}/{file.path.rsplit('/', 1)[-1]}")
        return places

    def _options(self, info: TableInfo) -> _Options:
        table_format = TableFormat.of(info)
        kind = table_format.kind
        if kind not in _KINDS:
            raise InvalidRequest(
                f"INSERT INTO a table of SerDe {table_format.serde} is not supported "
                "(tables of PARQUET, ORC, JSON or TEXTFILE with LazySimpleSerDe)"
            )
        write_kind = _KINDS[kind]
        stored = info.parameters.get(_COMPRESSION_PARAMETER[write_kind])
        try:
            compression = compression_of(write_kind, stored)
        except InvalidRequest:
            compression = compression_of(write_kind, None)
        parameters = info.serde_parameters
        return _Options(
            table_format,
            write_kind,
            compression,
            tuple(k.name for k in info.partition_keys),
            # As Hive reads it: field.delim, else serialization.format ("1" is ^A), else ^A.
            hive_byte(
                parameters.get("field.delim", parameters.get("serialization.format")),
                "\x01",
                "field.delim",
            ),
            parameters.get("serialization.null.format", TEXT_NULL),
        )

    def _select(self, context: Context, info: TableInfo) -> Statement:
        """The query as the table's columns: listed ones from it, the rest NULL, all cast.

        The casts are the coercions Trino applies on INSERT; a value of another kind
        is refused before anything is written (``_check_types``).
        """
        targets = [*info.columns, *info.partition_keys]
        names = [c.name for c in targets]
        listed = self.columns if self.columns is not None else tuple(names)
        unknown = [c for c in listed if c not in names]
        if unknown:
            raise InvalidRequest(f"INSERT INTO {self.table}: the table has no column {unknown[0]}")
        query_columns = self._query_columns(context)
        if len(query_columns) != len(listed):
            raise InvalidRequest(
                f"Insert query has {len(query_columns)} columns, but {len(listed)} are "
                "written (the table's columns or the listed ones)"
            )
        _check_types([(c.name, c.type) for c in targets if c.name in listed], query_columns, listed)
        assert isinstance(self.select._ast, (exp.Query, exp.Values))
        aliases = [f"_c{i}" for i in range(len(listed))]
        source = exp.Subquery(
            this=self.select._ast.copy(),
            alias=exp.TableAlias(
                this=exp.to_identifier("_q"), columns=[exp.to_identifier(a) for a in aliases]
            ),
        )
        by_name = dict(zip(listed, aliases, strict=True))
        projections = []
        for column in targets:
            kind = exp.DataType.build(column.type, dialect="hive")
            value: exp.Expression = (
                exp.column(by_name[column.name], table="_q")
                if column.name in by_name
                else exp.null()
            )
            projections.append(exp.alias_(exp.cast(value, kind), column.name))
        tree = exp.select(*projections).from_(source)
        return dataclasses.replace(self.select, _ast=tree)

    def _query_columns(self, context: Context) -> list[tuple[str, str]]:
        """The query's column names and Athena types, from a plan that reads no rows."""
        assert isinstance(self.select._ast, (exp.Query, exp.Values))
        inner = exp.Subquery(
            this=self.select._ast.copy(), alias=exp.TableAlias(this=exp.to_identifier("_q"))
        )
        probe_ast = exp.select("*").from_(inner).limit(0)
        probe = dataclasses.replace(self.select, _ast=probe_ast)
        plan = context.service.plan(context.execution, probe)
        result = plan.engine.execute(context.execution.id, plan.sql, plan.tables, plan.limits)
        for _ in result.batches:
            pass
        return [(c.name, c.type) for c in result.columns]


def _check_types(
    table: list[tuple[str, str]], query: list[tuple[str, str]], listed: tuple[str, ...]
) -> None:
    """Trino's rule: each value must be coercible to its column's type without a cast."""
    from lakeward.query.types import athena_type_of_hive

    wanted = {name: athena_type_of_hive(kind).name for name, kind in table}
    mismatched = [
        (wanted[name], given)
        for name, (_, given) in zip(listed, query, strict=True)
        if not _coercible(given, wanted[name])
    ]
    if mismatched:
        table_types = ", ".join(wanted[n] for n in listed)
        query_types = ", ".join(t for _, t in query)
        raise InvalidRequest(
            f"Insert query has mismatched column types: Table: [{table_types}], "
            f"Query: [{query_types}]"
        )


def _coercible(given: str, wanted: str) -> bool:
    if given == wanted or given == "unknown":
        return True
    if given in _INTEGRAL:
        if wanted in _INTEGRAL:
            return _INTEGRAL.index(given) <= _INTEGRAL.index(wanted)
        return wanted in ("real", "float", "double", "decimal")
    if given in ("real", "float"):
        return wanted in ("real", "float", "double")
    if given == "decimal":
        return wanted in ("decimal", "double", "real", "float")
    if given in ("varchar", "char"):
        return wanted in ("varchar", "char", "string")
    if given == "date":
        return wanted == "timestamp"
    return given in ("array", "map", "row") and given == wanted


@dataclass
class Unload(_FromSelect):
    select: Statement
    location: str
    options: _Options
    statement_type: StatementType = StatementType.DML
    substatement_type: str | None = "UNLOAD"

    def run(self, context: Context) -> EngineResult:
        location = self.location.rstrip("/")
        _lake_location(context, location, "UNLOAD's location")
        _authorize_put(context, location)
        if not self.options.partitioned_by:
            _require_empty(context, location, "UNLOAD's location")
        plan = context.service.plan(context.execution, self.select)
        writing = _Writing(context, location, self.options)
        try:
            written = writing.run(plan)
            _check_partition_order([c.name for c in written.columns], self.options.partitioned_by)
            if self.options.partitioned_by:  # Athena's rule: new partitions only
                for directory in {f.path.rsplit("/", 1)[0] for f in written.files}:
                    _require_empty(context, f"{location}/{directory}", "UNLOAD's partition")
            writing.publish(written)
            assert writing.write is not None
            writing.write.registered(context.cancelled)
            writing.write.commit()
        except BaseException:
            writing.roll_back()
            raise
        return _rows_result(written, count=False)
