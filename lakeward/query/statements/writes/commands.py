"""Running CREATE TABLE AS, INSERT INTO and UNLOAD: one write protocol for all three."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pyarrow as pa
from sqlglot import exp

from lakeward.access.arns import s3_arn
from lakeward.errors import InvalidRequest, QueryCancelled, StorageError
from lakeward.iceberg.catalog import is_iceberg
from lakeward.iceberg.commits import arrow_rows, commit_with_retries
from lakeward.iceberg.schemas import table_columns
from lakeward.metastore.tables import Column, PartitionInfo, TableInfo
from lakeward.query import projection
from lakeward.query.engines.base import (
    EngineResult,
    WriteResult,
    WriteTarget,
)
from lakeward.query.engines.text_layout import hive_byte
from lakeward.query.engines.writers import (
    TEXT_NULL,
    compression_of,
    hive_columns,
    partition_directory,
)
from lakeward.query.formats import HIVE_DEFAULT_PARTITION, TableFormat
from lakeward.query.journal import Write
from lakeward.query.model import StatementType, TableRef
from lakeward.query.planner import Plan
from lakeward.query.sql.queries import Statement
from lakeward.query.statements.base import Command, Context
from lakeward.query.statements.writes.options import (
    COMPRESSION_PARAMETER,
    INTEGRAL,
    KINDS,
    ROWS_COLUMN,
    WriteOptions,
)
from lakeward.query.translate.query import check_translatable
from lakeward.query.types import AthenaType, athena_type_of_hive
from lakeward.storage.paths import catalog_uri, lake_place, public_uri

# -- running ----------------------------------------------------------------------------------


def _write(
    context: Context,
    write: Write,
    plan: Plan,
    options: WriteOptions,
    columns: tuple[str, ...] | None = None,
) -> WriteResult:
    """The engine writes the SELECT's rows into the write's staging directory."""
    target = WriteTarget(
        str(write.staging),
        options.kind,
        options.compression,
        options.partitioned_by,
        options.delimiter,
        prefix=f"{context.execution.id}_",
        columns=columns,
        null_format=options.null_format,
        name=write.staging_name,
    )
    return plan.engine.write(context.execution.id, plan.sql, plan.tables, plan.limits, target)


def _publish(
    context: Context, write: Write, written: WriteResult, places: list[str] | None = None
) -> None:
    if context.cancelled():
        raise QueryCancelled("the query was cancelled")
    published = write.publish(written.files, places)
    _write_manifest(context, [public_uri(context.settings, o.bucket, o.key) for o in published])


def _write_manifest(context: Context, files: list[str]) -> None:
    """Athena's data manifest: the files a write made, one URI a line, beside its result
    (``<query id>-manifest.csv``), named in ``Statistics.DataManifestLocation``."""
    execution = context.execution
    place = lake_place(context.settings, execution.output_location)
    if place is None:
        return
    bucket, key = place
    manifest = key.removesuffix(".csv") + "-manifest.csv"
    context.storage.put(bucket, manifest, "".join(f"{f}\n" for f in files).encode())
    execution.statistics.data_manifest_location = public_uri(context.settings, bucket, manifest)


def _lake_location(context: Context, uri: str, what: str) -> tuple[str, str]:
    place = lake_place(context.settings, uri)
    if place is None or not place[0]:
        raise InvalidRequest(f"{what} {uri} is not in the lake ({context.settings.lake_root})")
    return place


def _require_empty(context: Context, uri: str, what: str) -> None:
    bucket, key = _lake_location(context, uri, what)
    prefix = key.rstrip("/") + "/" if key else ""
    try:
        held = context.storage.keys(bucket, prefix)
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
    # Athena describes the result as one bigint column, rows, and answers no row: the
    # count is the UpdateCount (a client's rowcount), not a row to fetch.
    column = AthenaType.of("bigint").column(ROWS_COLUMN)
    batch = pa.record_batch([pa.array([], pa.int64())], names=[ROWS_COLUMN])
    return EngineResult([column], iter([batch]), written.bytes_scanned, update_count=written.rows)


def _partitions(location: str, written: WriteResult, keys: tuple[str, ...]) -> list[PartitionInfo]:
    values = dict.fromkeys(f.partition for f in written.files)
    return [
        PartitionInfo(
            [HIVE_DEFAULT_PARTITION if v is None else v for v in vs],
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


class _FromSelect(Command):
    """A write whose rows a SELECT gives: it reads that SELECT's tables, on any engine
    that can run the SELECT."""

    select: Statement

    def tables_read(self) -> tuple[TableRef, ...]:
        return self.select.tables

    def check(self, engine: str) -> None:
        check_translatable(self.select, engine)


@dataclass
class CreateTableAs(_FromSelect):
    table: TableRef
    select: Statement
    options: WriteOptions
    external_location: str | None
    with_data: bool = True
    if_not_exists: bool = False  # Trino's: an existing table is left as it is, 0 rows
    statement_type: StatementType = StatementType.DML
    substatement_type: str | None = "CREATE_TABLE_AS_SELECT"

    def catalogs(self) -> set[str]:
        return {self.table.catalog, *super().catalogs()}

    def run(self, context: Context) -> EngineResult:
        ref, execution = self.table, context.execution
        context.authorize_table(["glue:CreateTable"], ref)
        catalog = context.catalog(ref.catalog)
        catalog.require_database(ref.database)
        if catalog.table_exists(ref.database, ref.table):
            if self.if_not_exists:
                return _rows_result(WriteResult([], [], 0))
            raise InvalidRequest(f"table {ref} already exists")
        results = execution.output_location.rsplit("/", 1)[0]
        location = (self.external_location or f"{results}/tables/{execution.id}").rstrip("/")
        # The metastore keeps the place's public name, however the statement spelt it.
        location = catalog_uri(context.settings, location)
        _require_empty(context, location, "external_location")
        _authorize_put(context, location)
        select = self.select
        if not self.with_data:  # only the columns and their types are wanted
            assert isinstance(select._ast, exp.Query)
            select = dataclasses.replace(
                select, _ast=exp.select("*").from_(select._ast.subquery("_q")).limit(0)
            )
        plan = context.plan(select)
        with context.journal.write(
            execution.id, location, context.cancelled, plan.engine.stages_in_lake
        ) as write:
            written = _write(context, write, plan, self.options)
            info = self._table_info(location, written)
            _publish(context, write, written)
            write.creating(catalog, ref)
            if not catalog.create_table(info):
                raise InvalidRequest(f"table {ref} already exists")
            keys = self.options.partitioned_by
            if keys and written.files:
                catalog.add_partitions(
                    ref.database, ref.table, _partitions(location, written, keys)
                )
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
        parameters = {COMPRESSION_PARAMETER[kind]: self.options.compression.upper()}
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
        catalog = context.catalog(ref.catalog)
        info = catalog.table(ref.database, ref.table)
        if info.table_type == "VIRTUAL_VIEW":
            raise InvalidRequest(f"{ref} is a view: INSERT INTO writes tables only")
        context.authorize_table(["glue:UpdateTable"], ref)
        if is_iceberg(info.parameters):
            return self._into_iceberg(context, info)
        if info.bucket_columns:
            raise InvalidRequest(
                f"INSERT INTO a bucketed table ({ref}, CLUSTERED BY "
                f"{', '.join(info.bucket_columns)}) is not supported: the rows would not be "
                "written in their buckets"
            )
        if projection.enabled(info.parameters):
            raise InvalidRequest(
                f"INSERT INTO a table with partition projection ({ref}) is not supported: "
                "its rows would be read only where its projection places partitions"
            )
        if info.partition_keys:
            context.authorize_table(["glue:BatchCreatePartition"], ref)
        options = self._options(info)
        _lake_location(context, info.location, "the table's location")
        _authorize_put(context, info.location)
        select = self._select(context, info)
        plan = context.plan(select)
        with context.journal.write(
            execution.id, info.location, context.cancelled, plan.engine.stages_in_lake
        ) as write:
            written = _write(context, write, plan, options)
            keys = options.partitioned_by
            known = {}
            if keys and written.files:
                known = {
                    tuple(p.values): p.location for p in catalog.partitions(ref.database, ref.table)
                }
            _publish(context, write, written, self._places(context, info, written, known))
            registered = _partitions(info.location, written, keys) if keys else []
            new = [p for p in registered if tuple(p.values) not in known]
            if new:
                catalog.add_partitions(ref.database, ref.table, new)
        return _rows_result(written)

    def _into_iceberg(self, context: Context, info: TableInfo) -> EngineResult:
        """The rows appended to an Iceberg table, one snapshot committed through the catalog."""
        ref = self.table
        _authorize_put(context, info.location)
        catalog = context.catalog(ref.catalog).iceberg(context.settings)
        table = catalog.load_table((ref.database, ref.table))
        columns = table_columns(table.schema())
        select = self._select(context, dataclasses.replace(info, columns=columns))
        plan = context.plan(select)
        result = plan.engine.execute(context.execution.id, plan.sql, plan.tables, plan.limits)
        rows = arrow_rows(result.batches, table.schema().as_arrow())
        if rows.num_rows:
            if context.cancelled():
                raise QueryCancelled("the query was cancelled")
            commit_with_retries(catalog, (ref.database, ref.table), lambda t: t.append(rows))
        written = WriteResult([], [], rows.num_rows, result.bytes_scanned)
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
            values = tuple(HIVE_DEFAULT_PARTITION if v is None else v for v in file.partition)
            where = known.get(values)
            if where is None:
                places.append(f"{info.location.rstrip('/')}/{file.path}")
                continue
            _lake_location(context, where, f"partition {'/'.join(values)}'s location")
            _authorize_put(context, where)
            places.append(f"{where.rstrip('/')}/{file.path.rsplit('/', 1)[-1]}")
        return places

    def _options(self, info: TableInfo) -> WriteOptions:
        table_format = TableFormat.of(info)
        kind = table_format.kind
        if kind not in KINDS:
            raise InvalidRequest(
                f"INSERT INTO a table of SerDe {table_format.serde} is not supported "
                "(tables of PARQUET, ORC, JSON or TEXTFILE with LazySimpleSerDe)"
            )
        write_kind = KINDS[kind]
        stored = info.parameters.get(COMPRESSION_PARAMETER[write_kind])
        try:
            compression = compression_of(write_kind, stored)
        except InvalidRequest:
            compression = compression_of(write_kind, None)
        parameters = info.serde_parameters
        return WriteOptions(
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
        is refused before anything is written (``check_types``).
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
        check_types([(c.name, c.type) for c in targets if c.name in listed], query_columns, listed)
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
        columns, _ = context.planner.probe(context.run_, self.select)
        return [(c.name, c.type) for c in columns]


def check_types(
    table: list[tuple[str, str]], query: list[tuple[str, str]], listed: tuple[str, ...]
) -> None:
    """Trino's rule for INSERT: each value's type must be compatible with its column's, one
    coercible to the other; a narrower column takes the value through a cast that fails
    where the value does not fit (a bigint into an integer column, a double into a real)."""
    wanted = {name: athena_type_of_hive(kind).name for name, kind in table}
    mismatched = [
        (wanted[name], given)
        for name, (_, given) in zip(listed, query, strict=True)
        if not (coercible(given, wanted[name]) or coercible(wanted[name], given))
    ]
    if mismatched:
        table_types = ", ".join(wanted[n] for n in listed)
        query_types = ", ".join(t for _, t in query)
        raise InvalidRequest(
            f"Insert query has mismatched column types: Table: [{table_types}], "
            f"Query: [{query_types}]"
        )


def coercible(given: str, wanted: str) -> bool:
    if given == wanted or given == "unknown":
        return True
    if given in INTEGRAL:
        if wanted in INTEGRAL:
            return INTEGRAL.index(given) <= INTEGRAL.index(wanted)
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
    options: WriteOptions
    statement_type: StatementType = StatementType.DML
    substatement_type: str | None = "UNLOAD"

    def run(self, context: Context) -> EngineResult:
        location = catalog_uri(context.settings, self.location.rstrip("/"))
        _lake_location(context, location, "UNLOAD's location")
        _authorize_put(context, location)
        if not self.options.partitioned_by:
            _require_empty(context, location, "UNLOAD's location")
        plan = context.plan(self.select)
        with context.journal.write(
            context.execution.id, location, context.cancelled, plan.engine.stages_in_lake
        ) as write:
            written = _write(context, write, plan, self.options)
            _check_partition_order([c.name for c in written.columns], self.options.partitioned_by)
            if self.options.partitioned_by:  # Athena's rule: new partitions only
                for directory in {f.path.rsplit("/", 1)[0] for f in written.files}:
                    _require_empty(context, f"{location}/{directory}", "UNLOAD's partition")
            _publish(context, write, written)
        return _rows_result(written, count=False)
