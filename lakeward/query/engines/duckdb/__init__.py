"""DuckDB as the SQL service's engine: one locked-down, in-process database per execution.

Each execution runs alone on a connection whose configuration was locked
before anything else ran on it: the memory limit, spill directory and threads
of its ``Limits``; the tables' directories as the only files it may read; no
other file, network or extension access; no ``SET`` afterwards. Connections
are kept open between executions that may read the same directories, and
cleaned in between (``engines/pool.py``). The tables are views
``"<catalog>"."<database>"."<table>"`` over their data files, typed as the
metastore declares them, and the statement (one SELECT, or EXPLAIN of one)
runs over them. What a view needs to know of its files (their columns and
types, from a DESCRIBE) is kept per list of files and sizes.

The table's storage descriptor chooses the reader (``readers.py``). Local Parquet
tables (``file:`` locations) are read by DuckDB's own Parquet reader; Parquet on S3
(``s3://``, ``s3a://``), ORC, and Parquet whose partitions lie outside the table's
``key=value`` directories through a pyarrow dataset registered on the connection
(DuckDB's httpfs extension cannot be installed offline); text and JSON files are
parsed into an in-memory dataset. Either way DuckDB prunes partitions and pushes
filters and projections down. A partitioned table's partitions are the metastore's
(``ResolvedTable.partitions``), each at its own location; a table's files are listed
under its shared lock (``query/journal.py``).
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import duckdb
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.fs as pafs

from lakeward.errors import LakewardError, QueryCancelled, QueryFailed
from lakeward.metastore.tables import Column
from lakeward.query.engines.base import (
    Engine,
    EngineResult,
    Limits,
    ResolvedTable,
    WriteResult,
    WriteTarget,
)
from lakeward.query.engines.duckdb import readers
from lakeward.query.engines.duckdb.conform import Conformer
from lakeward.query.engines.duckdb.hidden import (
    FILE_COLUMN,
    hidden_columns_refused,
    hidden_view_columns,
    iceberg_hidden_columns,
    reads_hidden_columns,
)
from lakeward.query.engines.duckdb.iceberg import iceberg_source
from lakeward.query.engines.duckdb.listing import hive_layout, list_files, projected_files
from lakeward.query.engines.duckdb.overloads import beneath_overloads
from lakeward.query.engines.duckdb.pool import Connection, ConnectionPool, close, statement_kinds
from lakeward.query.engines.duckdb.readers import (
    ParsedFiles,
    read_text,
    text_column_check,
    text_view_column,
)
from lakeward.query.engines.duckdb.scanned import (
    DataFile,
    Source,
    bytes_scanned,
    duck_type,
    files_read,
    sql_literal,
)
from lakeward.query.engines.text_layout import TextLayout
from lakeward.query.engines.writers import write_result
from lakeward.query.formats import HIVE_DEFAULT_PARTITION
from lakeward.query.journal import table_lock
from lakeward.query.model import TableRef
from lakeward.query.types import arrow_type_of_hive, athena_type_of_duckdb, duckdb_type_of_hive
from lakeward.query.types import quote_identifier as quote
from lakeward.storage.arrow import S3Options, arrow_filesystem

if TYPE_CHECKING:
    from lakeward.config import Settings

ROWS_PER_BATCH = 65_536
PLAN_COLUMN = "Query Plan"  # what Athena calls EXPLAIN's one column
_EXPLAIN = re.compile(r"^\s*EXPLAIN\s+(ANALYZE\s+)?(\([^)]*\)\s*)?", re.IGNORECASE)
_REINTERRUPT_SECONDS, _REINTERRUPTS = 0.25, 40
_DESCRIBED = 512  # file lists whose columns are kept


@dataclass
class _Connected:
    """A query on its DuckDB connection: what the engine holds while it runs."""

    connection: Connection
    cancelled: threading.Event = field(default_factory=threading.Event)
    datasets: list[Any] = field(default_factory=list)  # kept alive while the views read them
    done: bool = False  # ran to its end: the connection may serve another execution
    conformer: Conformer = field(default_factory=Conformer)  # result types as Athena's

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        return self.connection.con


class DuckDbEngine(Engine):
    name = "duckdb"
    dialect = "duckdb"

    def __init__(
        self, s3: Settings | S3Options | None = None, rows_per_batch: int = ROWS_PER_BATCH
    ) -> None:
        self.s3 = s3 if isinstance(s3, S3Options) or s3 is None else S3Options.from_settings(s3)
        # A stack's engine lists a table's files under the table's lock (shared), so a
        # write being published is seen whole or not at all (query/journal.py).
        self.settings = None if isinstance(s3, S3Options) or s3 is None else s3
        self.rows_per_batch = rows_per_batch
        self.pool = ConnectionPool()
        # Making a used connection clean again for the pool takes DuckDB a few ms (and
        # 10-30 ms more after a statement other than a SELECT: it lists every function
        # to find leftovers); one thread does it after the execution has ended, so a
        # query's result is not held up by it.
        self._cleaner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="duckdb-pool")
        self._described: OrderedDict[tuple[str, tuple[int, ...]], dict[str, str]] = OrderedDict()
        self._parsed = ParsedFiles()  # text files' rows, kept per file version
        self._runs: dict[str, _Connected] = {}
        # Reentrant: a result dropped unread closes its execution from the garbage
        # collector, in whatever thread it runs, possibly one holding the lock.
        self._lock = threading.RLock()

    def table_name(self, ref: TableRef) -> str:
        # A table read as it was is a view of its own beside the current one.
        name = ref.table
        if ref.version:
            name += "@" + hashlib.sha1(ref.version.encode()).hexdigest()[:12]
        return f"{quote(ref.catalog)}.{quote(ref.database)}.{quote(name)}"

    def execute(
        self, execution_id: str, sql: str, tables: list[ResolvedTable], limits: Limits
    ) -> EngineResult:
        """Run ``sql``; returns its columns and a stream of its batches.

        ``bytes_scanned`` is the total size of the data files of the tables the
        statement reads, less the files of partitions that DuckDB's plan prunes
        (filters on partition keys). A table whose scan cannot be found in the
        plan counts whole, so the figure never undercounts. A plain EXPLAIN
        scans nothing.
        """
        sources = [self._source(t) for t in {t.ref: t for t in tables}.values()]
        run = self._open(execution_id, [d for s in sources for d in s.local_dirs], limits)
        try:
            with _errors(run, limits, sql):
                _check(run)
                run.connection.ran(sql)
                explain = _checked_statement(run.con, sql)
                self._create_views(run, sources, sql if explain is None else _EXPLAIN.sub("", sql))
                if explain is not None:
                    inner = _EXPLAIN.sub("", sql)
                    scanned = bytes_scanned(run.con, inner, sources) if explain else 0
                    plan = run.con.sql(sql).fetchall()
                    run.done = True
                    self._close(execution_id, run)
                    lines = [line for _, text in plan for line in text.splitlines()]
                    batch = pa.record_batch([pa.array(lines, pa.string())], names=[PLAN_COLUMN])
                    column = athena_type_of_duckdb("VARCHAR").column(PLAN_COLUMN)
                    return EngineResult([column], iter([batch]), scanned)
                scanned = bytes_scanned(run.con, sql, sources)
                relation = run.con.sql(sql)
                types = [str(t) for t in relation.types]
                run.conformer = Conformer.of(types)
                _check(run)
                reader = relation.to_arrow_reader(self.rows_per_batch)
                first = _next_batch(run, reader)  # execute returns once results flow
                # After the first batch: an interval column's type is told by its values.
                columns = run.conformer.columns(relation.columns, types)
        except BaseException:
            self._close(execution_id, run)
            raise
        batches = self._stream(execution_id, run, reader, first, limits)
        # A result dropped unread never runs the generator's cleanup: end it when collected.
        weakref.finalize(batches, self._close, execution_id, run)
        return EngineResult(columns, batches, scanned, run.conformer.schema(reader.schema))

    def write(
        self,
        execution_id: str,
        sql: str,
        tables: list[ResolvedTable],
        limits: Limits,
        target: WriteTarget,
    ) -> WriteResult:
        """The query's rows, written by lakeward's Arrow writers (``engines/writers.py``)."""
        return write_result(self.execute(execution_id, sql, tables, limits), target)

    def interrupt(self, execution_id: str) -> None:
        with self._lock:
            run = self._runs.get(execution_id)
        if run is not None:
            run.cancelled.set()
            self._interrupt_until_closed(execution_id, run, _REINTERRUPTS)

    def settle(self) -> None:
        """Wait until the connections of ended executions are back in the pool."""
        self._cleaner.submit(lambda: None).result()

    def close(self) -> None:
        with self._lock:
            running = list(self._runs)
        for execution_id in running:
            self.interrupt(execution_id)
        self._cleaner.shutdown(wait=True)
        self.pool.close()

    # -- one execution -----------------------------------------------------------------------

    def _open(self, execution_id: str, directories: list[str], limits: Limits) -> _Connected:
        """A connection that may read ``directories``, registered so it can be interrupted."""
        run = _Connected(self.pool.take(directories, limits))
        with self._lock:
            if execution_id in self._runs:
                close(run.connection)
                raise QueryFailed(f"execution {execution_id} is already running")
            self._runs[execution_id] = run
        return run

    def _stream(
        self, execution_id: str, run: _Connected, reader: Any, first: Any, limits: Limits
    ) -> Iterator[pa.RecordBatch]:
        try:
            batch = first
            while batch is not None:
                yield batch
                with _errors(run, limits):
                    batch = _next_batch(run, reader)
            run.done = True
        finally:
            self._close(execution_id, run)

    def _close(self, execution_id: str, run: _Connected) -> None:
        with self._lock:
            if self._runs.get(execution_id) is not run:
                return  # closed already
            del self._runs[execution_id]
            if not run.done or run.cancelled.is_set():
                close(run.connection)  # stopped half-way: never reused
                return
        try:
            self._cleaner.submit(self.pool.give, run.connection)
        except RuntimeError:  # the engine is closing: no pool to return to
            close(run.connection)

    def _interrupt_until_closed(self, execution_id: str, run: _Connected, tries: int) -> None:
        # A statement that starts just after an interrupt does not see it, so
        # interrupt again until the execution has ended.
        with self._lock:
            if self._runs.get(execution_id) is not run:
                return
            try:
                run.con.interrupt()
            except duckdb.Error:
                return
        if tries > 1:
            args = (execution_id, run, tries - 1)
            timer = threading.Timer(_REINTERRUPT_SECONDS, self._interrupt_until_closed, args)
            timer.daemon = True
            timer.start()

    # -- tables ------------------------------------------------------------------------------

    def _source(self, table: ResolvedTable) -> Source:
        if table.iceberg is not None or table.rows is not None:
            return iceberg_source(table)
        keys = [k.name for k in table.partition_keys]
        try:
            kind = table.format.kind
        except LakewardError as exc:
            raise QueryFailed(f"cannot read table {table.ref}: {exc}") from None
        if kind == "avro":
            raise QueryFailed(f"table {table.ref} is stored as Avro, which is not supported")
        try:
            filesystem, root = self._filesystem(table, table.location)
            local = isinstance(filesystem, pafs.LocalFileSystem)
            with self._listing(table.location):
                if table.projection is not None:
                    place, where = self._filesystem(table, table.projection.prefix)
                    if type(place) is not type(filesystem):
                        raise QueryFailed(
                            f"the partitions of table {table.ref} are projected to "
                            f"{table.projection.prefix}, not on the storage of its location "
                            f"{table.location}"
                        )
                    files, dirs = projected_files(filesystem, where, table.projection), [where]
                elif table.partitions is None:
                    files, dirs = list_files(filesystem, root, keys), [root]
                else:
                    files, dirs = self._partition_files(table, filesystem, root)
            if kind == "parquet" and local and hive_layout(root, files, keys):
                return Source(table, files, dirs)  # DuckDB reads the files itself
            if kind in ("parquet", "orc"):
                return Source(table, files, dataset=_dataset(filesystem, files, table, kind))
            layout = TextLayout.of(table)
            for column in table.columns if layout.kind != "json" else []:
                text_column_check(column, layout)  # refused before anything is read

            def load(check: Callable[[], None], read: list[DataFile]) -> Any:
                # A dataset, not the table: DuckDB pushes filters into a dataset's scan,
                # so the plan shows which partitions a query reads (bytes scanned).
                parsed = read_text(filesystem, read, table, layout, check, self._parsed)
                return pads.dataset(parsed)

            return Source(table, files, load=load, layout=layout)
        except (OSError, pa.ArrowException) as exc:
            raise QueryFailed(f"cannot read table {table.ref} at {table.location}: {exc}") from None

    def _filesystem(self, table: ResolvedTable, location: str) -> tuple[pafs.FileSystem, str]:
        try:
            filesystem, root = arrow_filesystem(location, self.s3, self.settings)
        except ValueError as exc:
            if isinstance(exc, pa.ArrowException):
                raise
            raise QueryFailed(  # a scheme the storage layer has no filesystem for
                f"table {table.ref} is at {location}, which the DuckDB engine cannot "
                "read (only file:, s3: and s3a: locations)"
            ) from None
        if isinstance(filesystem, pafs.LocalFileSystem):
            root = os.path.realpath(root)
        return filesystem, root

    def _partition_files(
        self, table: ResolvedTable, filesystem: pafs.FileSystem, root: str
    ) -> tuple[list[DataFile], list[str]]:
        """The files of the metastore's partitions, wherever each partition is."""
        files: list[DataFile] = []
        dirs = [root]
        for partition in table.partitions or []:
            values = tuple(None if v == HIVE_DEFAULT_PARTITION else v for v in partition.values)
            if len(values) != len(table.partition_keys):
                raise QueryFailed(
                    f"partition {partition.values} of table {table.ref} has "
                    f"{len(values)} values for {len(table.partition_keys)} partition keys"
                )
            place, where = self._filesystem(table, partition.location)
            if type(place) is not type(filesystem):
                raise QueryFailed(
                    f"partition {'/'.join(partition.values)} of table {table.ref} is at "
                    f"{partition.location}, not on the storage of the table's location "
                    f"{table.location}"
                )
            found = list_files(filesystem, where, [])
            files.extend(DataFile(f.path, f.size, values, f.mtime_ns) for f in found)
            if not where.startswith(root.rstrip("/") + "/"):
                dirs.append(where)
        return sorted(files, key=lambda f: f.path), dirs

    @contextmanager
    def _listing(self, location: str) -> Iterator[None]:
        if self.settings is None:
            yield
            return
        with table_lock(self.settings, location, shared=True):
            yield

    def _create_views(self, run: _Connected, sources: list[Source], sql: str) -> None:
        """The tables' views; text files are parsed only for the partitions ``sql`` reads.

        A partitioned text table's view is first made over no rows, so that the plan of
        the statement tells which partitions it reads (as bytes_scanned does), and then
        over the rows of those partitions' files.
        """

        def check() -> None:
            _check(run)

        pruned = [s for s in sources if s.load is not None and s.table.partition_keys]
        hidden = reads_hidden_columns(sql)
        for source in sources:
            if source.load is not None:
                source.dataset = source.load(check, [] if source in pruned else source.files)
            self._create_view(run, source, hidden)
        for source in pruned:
            if source.scan_name is None:
                continue  # no files
            read = files_read(run.con, sql, source)
            files = source.files if read is None else [source.files[i] for i in sorted(read)]
            assert source.load is not None
            source.dataset = source.load(check, files)
            run.datasets.append(source.dataset)
            run.con.unregister(source.scan_name)
            run.con.register(source.scan_name, source.dataset)

    def _create_view(self, run: _Connected, source: Source, hidden: bool = False) -> None:
        ref, con = source.table.ref, run.con
        run.connection.attaching(ref.catalog)
        try:
            con.execute(f"ATTACH IF NOT EXISTS ':memory:' AS {quote(ref.catalog)}")
            con.execute(f"CREATE SCHEMA IF NOT EXISTS {quote(ref.catalog)}.{quote(ref.database)}")
            iceberg = source.table.iceberg is not None
            if hidden and source.files and source.dataset is not None and not iceberg:
                raise hidden_columns_refused(ref)
            scan, found = self._scan(run, source, hidden), {}
            if scan:
                found = self._describe(con, scan, source)
                source.scan_columns = set(found)
            layout = source.layout
            if scan and layout is not None and layout.kind != "json":  # fields typed here
                select = ", ".join(
                    [text_view_column(c, layout) for c in source.table.columns]
                    + [_view_column(k, found) for k in source.table.partition_keys]
                )
            else:
                columns = [*source.table.columns, *source.table.partition_keys]
                select = ", ".join(_view_column(c, found) for c in columns)
            if hidden and iceberg:
                direct = self.settings if source.dataset is None else None
                select += iceberg_hidden_columns(bool(scan), direct)
            elif hidden:
                select += hidden_view_columns(self.settings, bool(scan))
            body = f"SELECT {select} FROM {scan}" if scan else f"SELECT {select} WHERE false"
            con.execute(f"CREATE VIEW {self.table_name(ref)} AS {body}")
        except duckdb.InterruptException:
            raise
        except (duckdb.Error, pa.ArrowException, OSError) as exc:
            location = source.table.location
            raise QueryFailed(f"cannot read table {ref} at {location}: {exc}") from None

    def _describe(
        self, con: duckdb.DuckDBPyConnection, scan: str, source: Source
    ) -> dict[str, str]:
        """The columns and types the files hold (lower-cased names), kept per files and sizes."""
        key = (scan if source.dataset is None else "", tuple(f.size for f in source.files))
        with self._lock:
            found = self._described.get(key) if key[0] else None
        if found is None:
            if key[0]:  # DuckDB's own Parquet reader: each file's columns checked once
                local, parquet = pafs.LocalFileSystem(), pads.ParquetFileFormat()
                for file in source.files:
                    schema = readers.schema_of(parquet, file.path, local)
                    readers.check_schema(file.path, schema, source.table.columns)
            described = con.execute(f"DESCRIBE SELECT * FROM {scan}").fetchall()
            found = {str(row[0]).lower(): str(row[1]) for row in described}
            if key[0]:
                with self._lock:
                    self._described[key] = found
                    while len(self._described) > _DESCRIBED:
                        self._described.popitem(last=False)
        return found

    def _scan(self, run: _Connected, source: Source, hidden: bool = False) -> str | None:
        """The relation a table's view selects from; None for a table without files."""
        if not source.files:
            return None
        if source.dataset is not None:
            name = f"__lakeward_scan_{len(run.datasets)}"
            run.con.register(name, source.dataset)
            run.connection.registered.append(name)
            source.scan_name = name
            run.datasets.append(source.dataset)
            return quote(name)
        keys = source.table.partition_keys
        # The files listed, not a glob: Hive's rules (no _temporary/ of a running write)
        # and exactly the files bytes_scanned counts.
        files = ", ".join(sql_literal(f.path) for f in source.files)
        options = f"hive_partitioning = {str(bool(keys)).lower()}, union_by_name = true"
        if hidden:  # each row's file, for "$path" and "$bucket"; an Iceberg row's place
            options += f", filename = {sql_literal(FILE_COLUMN)}"
            if source.table.iceberg is not None:
                options += ", file_row_number = true"
        if keys:  # typed as declared, so that filters on them prune without casts
            types = ", ".join(
                f"{sql_literal(k.name)}: {sql_literal(duck_type(k.type))}" for k in keys
            )
            options += f", hive_types = {{{types}}}"
        return f"read_parquet([{files}], {options})"


# -- tables' files and views ---------------------------------------------------------------------


def _view_column(column: Column, found: dict[str, str]) -> str:
    """A metastore column in its table's view: cast only where the files differ."""
    name = quote(column.name)
    try:
        wanted: str | None = duckdb_type_of_hive(column.type)
    except ValueError:
        wanted = None  # a type DuckDB lacks: keep what the files hold
    held = found.get(column.name.lower())
    if held is None:  # a column the files lack reads as NULL, as in Hive
        return f"CAST(NULL AS {wanted or 'VARCHAR'}) AS {name}"
    if wanted is None or held == wanted:  # no cast, so filters still reach the reader
        return f"{name} AS {name}"
    return f"CAST({name} AS {wanted}) AS {name}"


def _dataset(
    filesystem: pafs.FileSystem, files: list[DataFile], table: ResolvedTable, kind: str
) -> Any:
    """A pyarrow dataset of the files, each with its partition's values."""
    if not files:
        return None
    file_format = readers.file_format(kind)
    schemas = []
    for file in files:  # every file's schema: checked, and so that files written before
        schema = readers.schema_of(file_format, file.path, filesystem)  # a column was added
        readers.check_schema(readers.shown(filesystem, file.path), schema, table.columns)
        schemas.append(schema)
    physical = pa.unify_schemas(schemas, promote_options="permissive")
    keys = [(k.name, arrow_type_of_hive(k.type)) for k in table.partition_keys]
    names = {name.lower() for name, _ in keys}
    fields = [f for f in physical if f.name.lower() not in names] + [pa.field(*k) for k in keys]
    partitions = [_partition_expression(table, keys, f.partition) for f in files] if keys else None
    return pads.FileSystemDataset.from_paths(
        [f.path for f in files], pa.schema(fields), file_format, filesystem, partitions
    )


def _partition_expression(
    table: ResolvedTable, keys: list[tuple[str, pa.DataType]], values: tuple[str | None, ...]
) -> Any:
    expression = None
    for (name, type_), value in zip(keys, values, strict=True):
        if value is None:
            term = pads.field(name).is_null()
        else:
            try:
                term = pads.field(name) == pa.scalar(value).cast(type_)
            except (pa.ArrowException, ValueError):
                raise QueryFailed(
                    f"partition value {value!r} of table {table.ref} is not a {type_} "
                    f"(partition key {name})"
                ) from None
        expression = term if expression is None else expression & term
    return expression


# -- statements ---------------------------------------------------------------------------------


def _checked_statement(con: duckdb.DuckDBPyConnection, sql: str) -> bool | None:
    """None for a SELECT; for an EXPLAIN of a SELECT, whether it is EXPLAIN ANALYZE."""
    kinds = statement_kinds(con, sql)
    if not kinds:  # DuckDB's own error, with its position
        con.extract_statements(sql)
    if len(kinds) != 1:
        raise QueryFailed("the DuckDB engine runs exactly one statement per query")
    (kind,) = kinds
    if kind == duckdb.StatementType.SELECT:
        return None
    match = _EXPLAIN.match(sql)
    if kind == duckdb.StatementType.EXPLAIN and match:
        inner = con.extract_statements(sql[match.end() :])
        if len(inner) == 1 and inner[0].type == duckdb.StatementType.SELECT:
            return bool(match.group(1))
    raise QueryFailed(f"the DuckDB engine runs SELECT and EXPLAIN statements only, not {kind.name}")


def _check(run: _Connected) -> None:
    if run.cancelled.is_set():
        raise QueryCancelled("the query was cancelled")


def _next_batch(run: _Connected, reader: Any) -> pa.RecordBatch | None:
    _check(run)
    try:
        batch = reader.read_next_batch()
    except StopIteration:
        return None
    return run.conformer.batch(batch)


@contextmanager
def _errors(run: _Connected, limits: Limits, sql: str = "") -> Iterator[None]:
    """DuckDB's and Arrow's errors as the lakeward errors the service reports."""
    try:
        yield
    except duckdb.InterruptException:
        raise QueryCancelled("the query was cancelled") from None
    except duckdb.OutOfMemoryException as exc:
        raise QueryFailed(
            f"the query needs more than {limits.memory_limit} of memory: {exc}"
        ) from None
    except duckdb.PermissionException as exc:
        raise QueryFailed(f"not allowed: {exc}") from None
    except (duckdb.Error, pa.ArrowException, OSError) as exc:
        if run.cancelled.is_set():
            raise QueryCancelled("the query was cancelled") from None
        message = str(exc)
        if sql and isinstance(exc, duckdb.Error):
            message = beneath_overloads(run.con, sql, message)
        raise QueryFailed(message) from None
