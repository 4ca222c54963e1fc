"""From a checked query to what an engine runs: the planner.

``Planner.plan`` readies a SELECT (a query's, or the one a CTAS, INSERT, UNLOAD or CREATE
VIEW reads): the views it names expanded (``views.py``), its tables resolved in their
catalogs (``resolve``: the one table lookup of a query), the caller's right to read their
data checked (``s3:GetObject`` on each place), the workgroup's bytes-scanned cutoff
applied, and the SQL translated for the workgroup's engine. ``probe`` plans and runs a
SELECT for its columns only (LIMIT 0), through the same checks.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

import pyarrow as pa
import pyarrow.fs as pafs
from sqlglot import exp

from lakeward.access import Authorizer
from lakeward.access.arns import s3_arn
from lakeward.config import Settings
from lakeward.errors import InvalidRequest, QueryFailed, ResourceNotFound
from lakeward.metastore.tables import Column
from lakeward.query.catalogs import Catalogs
from lakeward.query.engines.base import Engine, EngineResult, Limits, ResolvedTable
from lakeward.query.formats import TableFormat
from lakeward.query.model import PATH_COLUMN, ColumnInfo, QueryExecution, TableRef, WorkGroup
from lakeward.query.planner import information_schema, views
from lakeward.query.planner.iceberg import refuse_iceberg_otherwise, resolve_iceberg
from lakeward.query.planner.pruning import iceberg_filter
from lakeward.query.projection import projection_of
from lakeward.query.sql.queries import Statement
from lakeward.query.translate.query import to_engine_sql
from lakeward.query.translate.string_types import declared_string_types, with_string_types
from lakeward.query.types import AthenaType
from lakeward.storage.arrow import S3Options, arrow_filesystem
from lakeward.storage.paths import lake_place


class Run:
    """An execution while it is queued or running: what planning it needs and changes."""

    def __init__(self, group: WorkGroup, principal: str, execution: QueryExecution) -> None:
        self.execution = execution  # this process updates it: polls are answered from it
        self.group = group
        self.principal = principal
        self.cancelled = threading.Event()
        self.timed_out = threading.Event()
        self.engine: Engine | None = None  # once known, an interrupt reaches the query
        self.interrupted = float("-inf")  # monotonic time of the last interrupt sent
        self.started = time.monotonic()


def oldest_start(runs: Mapping[str, Run]) -> float | None:
    """When the longest-running of ``runs`` started (``time.monotonic()``); None if none."""
    return min((run.started for run in list(runs.values())), default=None)


@dataclass(frozen=True)
class Plan:
    """A SELECT ready to run: the engine, its SQL, the tables it reads and the bytes in them."""

    engine: Engine
    sql: str
    tables: list[ResolvedTable]
    limits: Limits
    scanned: int
    string_types: Mapping[int, AthenaType] = field(default_factory=dict)  # by result column

    def execute(self, execution_id: str) -> EngineResult:
        """The plan run by its engine; the result's columns with the string lengths the
        query shows."""
        result = self.engine.execute(execution_id, self.sql, self.tables, self.limits)
        result.columns = with_string_types(list(result.columns), self.string_types)
        return result


class Planner:
    def __init__(
        self,
        settings: Settings,
        access: Authorizer,
        catalogs: Catalogs,
        engine: Callable[[str], Engine],
        spill: str,
    ) -> None:
        self.settings = settings
        self.access = access
        self.catalogs = catalogs
        self.engine = engine  # an engine by name (the service keeps one of each)
        self.spill = spill

    def plan(self, run: Run, select: Statement) -> Plan:
        """Ready a SELECT to run on the run's engine: views expanded, tables resolved, their
        data's reading authorized, the workgroup's cutoff checked, the SQL translated."""
        planning = time.monotonic()

        def authorize(action: str, resource: str) -> object:
            return self.access.authorize(action, resource, principal=run.principal)

        def allowed(action: str, resource: str) -> bool:
            return self.access.allowed(action, resource, principal=run.principal)

        select = information_schema.inline(self.catalogs, select, allowed)
        select = views.expand(self.catalogs, select, authorize)
        tables = [self.resolve(ref) for ref in select.tables]
        tables = [_pruned(table, select) for table in tables]
        for table in tables:
            _require_injected_values(table, select)
        for table in tables:
            for place in places(table):  # a partition may lie outside the table's place
                data_arn = self.lake_arn(place.rstrip("/") + "/*")
                if data_arn:
                    authorize("s3:GetObject", data_arn)
        scanned = sum(_size_of(self.settings, place) for t in tables for place in places(t))
        cutoff = run.group.bytes_scanned_cutoff
        if cutoff is not None and scanned > cutoff:
            raise InvalidRequest(
                f"the query would scan {scanned:,} bytes, more than the workgroup's cutoff "
                f"of {cutoff:,} bytes (BytesScannedCutoffPerQuery)"
            )
        if run.group.engine != "duckdb":
            refuse_iceberg_otherwise(run.group, tables, select)
        engine = run.engine = self.engine(run.group.engine)
        if run.timed_out.is_set() or run.cancelled.is_set():
            # Asked before the engine was known (resolving, loading it): the interrupt
            # had nothing to reach, so the query must not start now.
            raise QueryFailed("stopped before the engine started")
        columns = {t.ref: [*t.columns, *t.partition_keys] for t in tables}
        if engine.dialect == "spark":  # Iceberg's runtime gives each row's data file
            for table in tables:
                if table.iceberg is not None:
                    columns[table.ref] = [*columns[table.ref], Column(PATH_COLUMN, "string")]
        iceberg = {t.ref: t.snapshot_id for t in tables if t.iceberg is not None}
        in_memory = {t.ref for t in tables if t.rows is not None}

        def table_name(ref: TableRef) -> str:
            if ref in in_memory:
                return engine.rows_table_name(ref, run.execution.id)
            return engine.iceberg_table_name(ref) if ref in iceberg else engine.table_name(ref)

        snapshots = {ref: s for ref, s in iceberg.items() if s is not None}
        if engine.dialect == "duckdb":
            snapshots = {}  # its views read the planned snapshot already
        sql = to_engine_sql(select, engine.dialect, table_name, columns, snapshots)
        limits = Limits(memory_limit="1GB", spill_directory=self.spill)
        run.execution.statistics.planning_ms = int((time.monotonic() - planning) * 1000)
        return Plan(engine, sql, tables, limits, scanned, declared_string_types(select, columns))

    def probe(self, run: Run, select: Statement) -> tuple[list[ColumnInfo], pa.Schema | None]:
        """The columns a SELECT gives (names, Athena types), from a plan that reads no rows;
        with the Arrow schema of its result when the engine gives one."""
        assert select._ast is not None
        # LIMIT on the query itself: a SELECT * around it would rename duplicate columns.
        query = select._ast.copy()
        if isinstance(query, exp.Query):
            probe: exp.Expr = query.limit(0)
        else:  # VALUES
            source = exp.Subquery(this=query, alias=exp.TableAlias(this=exp.to_identifier("_q")))
            probe = exp.select("*").from_(source).limit(0)
        plan = self.plan(run, replace(select, _ast=probe))
        result = plan.execute(run.execution.id)
        schema: pa.Schema | None = None
        for batch in result.batches:
            schema = schema or batch.schema
        return list(result.columns), schema

    def resolve(self, ref: TableRef) -> ResolvedTable:
        """A table as an engine reads it: its place, columns, format and partitions."""
        catalog = self.catalogs.catalog(ref.catalog)
        info = catalog.table(ref.database, ref.table.partition("$")[0])
        iceberg = resolve_iceberg(self.settings, catalog, ref, info)
        if iceberg is not None:
            return iceberg
        keys = [k.name for k in info.partition_keys]
        projection = projection_of(info.parameters, info.location, keys)
        # A partitioned table reads the partitions the metastore has, where it has them,
        # unless its properties project them.
        partitions = None
        if info.partition_keys and projection is None:
            partitions = catalog.partitions(ref.database, ref.table)
        return ResolvedTable(
            ref,
            info.location,
            info.columns,
            info.partition_keys,
            TableFormat.of(info),
            dict(info.parameters),
            partitions,
            projection=projection,
        )

    def lake_arn(self, uri: str) -> str | None:
        """The s3 ARN of a place in the lake (``arn:lakeward:s3:::<bucket>/<key>``).

        None for a place outside this stack's lake (a table another catalog
        keeps elsewhere): its catalog permission is what governs it then.
        """
        place = lake_place(self.settings, uri)
        return None if place is None else s3_arn(*place)


def _pruned(table: ResolvedTable, select: Statement) -> ResolvedTable:
    """An Iceberg table with the row filter its scan can skip files by (pruning.py)."""
    if table.iceberg is None or table.ref.version or select._ast is None:
        return table
    row_filter = iceberg_filter(select._ast, table.ref, table.iceberg.schema())
    return replace(table, row_filter=row_filter)


def _require_injected_values(table: ResolvedTable, select: Statement) -> None:
    """Athena's rule for an injected projection column: the query's WHERE compares it only
    for equality with constants (= or IN), at least once; it has no values otherwise."""
    if table.projection is None or not table.projection.injected or select._ast is None:
        return
    for name in table.projection.injected:
        named = [
            c
            for where in select._ast.find_all(exp.Where)
            for c in where.find_all(exp.Column)
            if c.name.lower() == name
        ]
        static = [c for c in named if _equal_to_constants(c)]
        if not static or len(static) != len(named):
            raise InvalidRequest(
                f"CONSTRAINT_VIOLATION: For the injected projected partition column {name} of "
                f"{table.ref}, the WHERE clause must contain only static equality conditions, "
                "and at least one such condition must be present."
            )


def _equal_to_constants(column: exp.Column) -> bool:
    """``column = 'v'`` or ``column IN ('v', ...)``, a conjunct of its WHERE (under ANDs only)."""
    parent = column.parent
    if isinstance(parent, exp.EQ):
        other = parent.expression if parent.this is column else parent.this
        static = isinstance(other, exp.Literal)
    elif isinstance(parent, exp.In) and parent.this is column and not parent.args.get("query"):
        static = all(isinstance(e, exp.Literal) for e in parent.expressions)
    else:
        return False
    above = parent.parent
    while isinstance(above, (exp.And, exp.Paren)):
        above = above.parent
    return static and isinstance(above, exp.Where)


def places(table: ResolvedTable) -> list[str]:
    """Where a table's files are: its location, or its partitions' when it has them."""
    if table.projection is not None:
        return [table.projection.prefix]
    if table.partitions is None:
        return [table.location]
    found: list[str] = []
    for location in sorted({p.location.rstrip("/") + "/" for p in table.partitions}):
        if not any(location.startswith(kept) for kept in found):  # nested: counted once
            found.append(location)
    return found


def _size_of(settings: Settings, location: str) -> int:
    """Bytes of the data files under a table location (what a full scan reads).

    A location with nothing under it holds no data, as on S3, where a folder exists only
    through its objects: an empty table, not an error.
    """
    try:
        filesystem, path = arrow_filesystem(location, S3Options.from_settings(settings), settings)
        selector = pafs.FileSelector(path, recursive=True, allow_not_found=True)
        infos = filesystem.get_file_info(selector)
    except (OSError, ValueError):
        raise ResourceNotFound(f"the table's location {location} cannot be read") from None
    root = path.rstrip("/") + "/"
    return sum(
        i.size or 0
        for i in infos
        # Readers skip a name starting with '.' or '_' at any depth (a write's staging).
        if i.type == pafs.FileType.File
        and not any(p.startswith((".", "_")) for p in i.path.removeprefix(root).split("/"))
    )
