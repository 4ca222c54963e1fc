"""Spark SQL as a query engine, for data that outgrows one machine.

Spark reads the same metastore as the rest of the stack, so tables resolve by
``database.table`` inside Spark itself; the master (local or a cluster) comes
from the stack's settings. One long-lived session serves every query; each
query runs in its own job group so that it can be cancelled.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lakeward.config import Settings
from lakeward.errors import InvalidRequest, LakewardError, QueryFailed
from lakeward.query.engines.base import (
    Engine,
    EngineResult,
    Limits,
    ResolvedTable,
    WriteResult,
    WriteTarget,
)
from lakeward.query.formats import CATALOGUED_ONLY
from lakeward.query.model import ColumnInfo, TableRef
from lakeward.query.types import athena_type

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import DataType


ICEBERG_CATALOG = "lakeward_iceberg"  # the session's catalog of the metastore's Iceberg tables
_REFUSAL = re.compile(r"\b(upper|lower) of a text [^\n]*? is not supported on the Spark engine")

SQL_CONF = {
    # A second wall behind the SQL front: no `parquet.`/path` tables.
    "spark.sql.runSQLOnFiles": "false",
    # Closer to Trino (query/translate/spark/ lists what is checked): overflow and bad casts
    # fail instead of wrapping or giving NULL; TIMESTAMP '...' is a timestamp without a
    # time zone; a decimal result keeps its scale rather than losing digits silently.
    "spark.sql.ansi.enabled": "true",
    "spark.sql.timestampType": "TIMESTAMP_NTZ",
    "spark.sql.decimalOperations.allowPrecisionLoss": "false",
    "spark.sql.session.timeZone": "UTC",
    # Spark's own ORC reader, in a session whose timestamps are zone-less, reads a Hive
    # table's ORC timestamps as seconds taken for microseconds (2020-03-01 01:30 comes
    # back as 1970-01-01 00:26:23); Hive's ORC reader reads them right.
    "spark.sql.orc.impl": "hive",
}


class SparkEngine(Engine):
    name = "spark"
    dialect = "spark"
    stages_in_lake = True

    def __init__(self, settings: Settings, own_catalog: str = "demo_hive_metastore") -> None:
        self.settings = settings
        self.own_catalog = own_catalog
        self._session: SparkSession | None = None
        self._lock = threading.Lock()

    @property
    def session(self) -> SparkSession:
        with self._lock:
            if self._session is None:
                from lakeward.spark import build_session, iceberg_read_catalog

                # A session of its own (the SparkContext is shared): its settings stay its own.
                self._session = build_session(self.settings, "lakeward-sql").newSession()
                iceberg = iceberg_read_catalog(self.settings, ICEBERG_CATALOG)
                for key, value in {**SQL_CONF, **iceberg}.items():
                    self._session.conf.set(key, value)
            return self._session

    def table_name(self, ref: TableRef) -> str:
        if ref.catalog != self.own_catalog:
            raise InvalidRequest(
                f"the Spark engine reads the stack's own catalog ({self.own_catalog}) only, "
                f"not {ref.catalog}; run this query in a DuckDB workgroup"
            )
        return f"`{ref.database}`.`{ref.table}`"

    def iceberg_table_name(self, ref: TableRef) -> str:
        self.table_name(ref)  # the stack's own catalog only
        return f"`{ICEBERG_CATALOG}`.`{ref.database}`.`{ref.table}`"

    def rows_table_name(self, ref: TableRef, execution_id: str) -> str:
        return f"`{_rows_view(ref, execution_id)}`"

    def execute(
        self, execution_id: str, sql: str, tables: list[ResolvedTable], limits: Limits
    ) -> EngineResult:
        with self._job(execution_id, "query", tables) as session:
            try:
                frame = session.sql(sql)
                batches: list[pa.RecordBatch] = frame._collect_as_arrow()
            except Exception as error:
                # The translation's own refusals, met by a value (query/translate/spark/'s
                # guards), arrive wrapped in Java's exceptions: only their words are the
                # user's business.
                refusal = _REFUSAL.search(str(error))
                if refusal is None:
                    raise
                raise InvalidRequest(f"NOT_SUPPORTED: {refusal[0]}") from None
        columns = [
            ColumnInfo(name=field.name, **athena_type(field.dataType.simpleString()))
            for field in frame.schema.fields
        ]
        return EngineResult(columns, _iterate(batches))

    def write(
        self,
        execution_id: str,
        sql: str,
        tables: list[ResolvedTable],
        limits: Limits,
        target: WriteTarget,
    ) -> WriteResult:
        """Spark writes the files itself (engines/spark/writes.py): the rows never pass
        through this process, which is what makes Spark the engine of a large CTAS."""
        from lakeward.query.engines.spark import writes as spark_writes

        if target.name is None and not self.settings.spark.master.startswith("local"):
            # Staged on this machine (a lake on S3 is staged here): a cluster's executors
            # could not write into it.
            raise QueryFailed(
                f"the Spark engine on {self.settings.spark.master} writes tables in the "
                "embedded lake only; run this statement in a DuckDB workgroup"
            )
        with self._job(execution_id, "write", tables) as session:
            try:
                return spark_writes.write(session, sql, target)
            except LakewardError:
                raise
            except Exception as error:
                raise QueryFailed(failure_reason(error)) from None

    def change(self, execution_id: str, sql: str, tables: list[ResolvedTable]) -> None:
        """Run a row-level DELETE or UPDATE of an Iceberg table: Spark's own, through
        Iceberg's runtime, which rewrites the files it touches and commits as Iceberg's
        HiveCatalog does (a new metadata file, swapped in under the metastore's lock)."""
        with self._job(execution_id, "change", tables) as session:
            try:
                session.sql(sql).collect()
            except Exception as error:
                raise QueryFailed(failure_reason(error)) from None

    @contextlib.contextmanager
    def _job(
        self, execution_id: str, kind: str, tables: list[ResolvedTable]
    ) -> Iterator[SparkSession]:
        """The session, for one execution's Spark jobs: in their own group (which a cancel
        interrupts), with the tables read as they are now, and the rows in memory it reads
        (an Iceberg metadata table) as views of its own, dropped afterwards."""
        _refuse_tables_read_otherwise(tables)
        session = self.session
        context = session.sparkContext
        context.setJobGroup(execution_id, f"lakeward {kind} {execution_id}", interruptOnCancel=True)
        views = []
        try:
            self._refresh(tables)
            for table in tables:
                if table.rows is not None:
                    view = _rows_view(table.ref, execution_id)
                    rows_frame(session, table.rows).createOrReplaceTempView(view)
                    views.append(view)
            yield session
        finally:
            for view in views:
                session.catalog.dropTempView(view)
            context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]

    def _refresh(self, tables: list[ResolvedTable]) -> None:
        """Forget what the session knows of the tables read: Spark keeps a table's list of
        files from one query to the next, and would not see files added since (an INSERT
        INTO by any engine or process)."""
        for table in tables:
            if table.iceberg is None and table.rows is None:
                # Iceberg's catalog loads its tables anew each time.
                self.session.catalog.refreshTable(self.table_name(table.ref))

    def interrupt(self, execution_id: str) -> None:
        if self._session is not None:
            self._session.sparkContext.cancelJobGroup(execution_id)

    def close(self) -> None:
        # The session is forgotten, not stopped: stopping it would stop the process's one
        # SparkContext, under every other session of the process (another service's
        # engine, a job's). The JVM goes with the process (it exits when its Python does).
        with self._lock:
            self._session = None


# Spark's wrappers around the error a user must see (a task's, a job's).
_WRAPPERS = re.compile(r"^\[(TASK_WRITE_FAILED|JOB_ABORTED)[^\]]*\]")
# Advice to change Spark's settings or functions: not the user's to follow.
_SPARK_ADVICE = re.compile(r"\s+(Use `?'?try_|If necessary set|To return NULL instead)[^\n]*")
_ERROR_CLASS = re.compile(r"\[[A-Z][A-Z0-9_.]+\] [^\n]+")


def _refuse_tables_read_otherwise(tables: list[ResolvedTable]) -> None:
    """A table Spark would read otherwise than Athena (engines/duckdb/readers.py) is refused."""
    for table in tables:
        refusal = spark_refusal(table)
        if refusal:
            raise InvalidRequest(f"NOT_SUPPORTED: {refusal}")
        # Spark hands Hive's text SerDes the session's name of a table's timestamp type,
        # timestamp_ntz, which they do not know: the query would fail in Spark's reader.
        try:
            kind = table.format.kind
        except LakewardError:
            continue  # a SerDe lakeward does not read: Spark's to say
        stamped = [c.name for c in table.columns if c.type.startswith("timestamp")]
        if stamped and kind in ("text", "csv"):
            raise InvalidRequest(
                f"NOT_SUPPORTED: the Spark engine does not read timestamp columns of text "
                f"tables ({table.ref}.{stamped[0]}); run the query in a DuckDB workgroup"
            )


def failure_reason(error: Exception) -> str:
    """The words of a Spark failure a user needs, without Java's stack and wrappers."""
    refusal = _REFUSAL.search(str(error))
    if refusal is not None:
        return f"NOT_SUPPORTED: {refusal[0]}"
    for match in _ERROR_CLASS.finditer(str(error)):
        if not _WRAPPERS.match(match[0]):
            return _SPARK_ADVICE.sub("", match[0])
    first = str(error).strip().splitlines()
    return first[0] if first else type(error).__name__


def _iterate(batches: list[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        yield without_zones(batch)


def without_zones(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Spark's timestamps (a Hive table's, read in the session's zone, UTC) as Athena shows
    a Hive timestamp: the UTC wall-clock time, with no zone after it."""
    columns = [
        column.cast(pa.timestamp(column.type.unit))
        if pa.types.is_timestamp(column.type) and column.type.tz is not None
        else column
        for column in batch.columns
    ]
    return pa.RecordBatch.from_arrays(columns, names=batch.schema.names)


def spark_refusal(table: ResolvedTable) -> str | None:
    """Why Spark SQL would answer otherwise than Athena over this table, if it would.

    Spark's Hive reader keeps a text file's header and footer lines
    (``skip.header.line.count`` is not read), types every column of an OpenCSVSerde
    table as a string, and has no JSON SerDe on its class path.
    """
    if table.projection is not None:
        return (
            f"table {table.ref} projects its partitions (projection.enabled), and Spark reads "
            "the metastore's partitions instead; run the query in a DuckDB workgroup"
        )
    try:
        kind = table.format.kind
    except LakewardError as exc:
        if table.format.serde in CATALOGUED_ONLY:  # Athena's own SerDes: not on Spark's path
            return str(exc)
        return None  # a SerDe Spark may have and lakeward does not read: Spark's to say
    if kind not in ("text", "csv", "json"):
        return None
    props = {k.lower(): v for k, v in table.parameters.items()}
    skipped = [
        p for p in ("skip.header.line.count", "skip.footer.line.count") if props.get(p, "0") != "0"
    ]
    if kind == "json":
        why = f"Spark has no {table.format.serde} to read it with"
    elif skipped:
        why = f"Spark's Hive reader does not skip the lines {skipped[0]} names"
    elif kind == "csv" and any(c.type.lower() != "string" for c in table.columns):
        why = "Spark reads every column of an OpenCSVSerde table as a string"
    else:
        return None
    return (
        f"table {table.ref} cannot be read by the Spark engine as Athena reads it: {why}; "
        "run the query in a DuckDB workgroup"
    )


def _rows_view(ref: TableRef, execution_id: str) -> str:
    """The session's view of a table of rows in memory, for one execution: its own, since
    the session serves concurrent executions, which may read other versions of it."""
    digest = hashlib.sha1(f"{execution_id}/{ref}".encode()).hexdigest()[:16]
    return f"lakeward_rows_{digest}"


def rows_frame(session: SparkSession, rows: pa.Table) -> DataFrame:
    """Rows in memory (an Iceberg metadata table, a few rows a snapshot or file) as a Spark
    frame of the same types; the values travel with the plan, so any master reads them."""
    from pyspark.sql import functions
    from pyspark.sql.types import StructField, StructType

    row_type = pa.struct(list(rows.schema))
    schema = StructType([StructField(f.name, _spark_type(f.type), f.nullable) for f in row_type])
    records = [_spark_value(row, row_type) for row in rows.to_pylist()]
    frame = session.createDataFrame(records, schema=schema, verifySchema=False)
    # A map arrives as its entries, in order (a dict would reach the JVM as a hash map and
    # come back in another order): made a map again here, which keeps the order.
    return frame.select(
        *(
            functions.map_from_entries(field.name).alias(field.name)
            if pa.types.is_map(field.type)
            else functions.col(field.name)
            for field in rows.schema
        )
    )


def _spark_type(arrow_type: pa.DataType, top: bool = True) -> DataType:
    """The Spark type of values of an Arrow type; a timestamp is the session's zone-less
    one, and a map (at the top only) its entries."""
    from pyspark.sql import types as st

    t = pa.types
    if t.is_dictionary(arrow_type):
        return _spark_type(arrow_type.value_type, top)
    if t.is_map(arrow_type) and top:
        entry = st.StructType(
            [
                st.StructField("key", _spark_type(arrow_type.key_type, False), False),
                st.StructField("value", _spark_type(arrow_type.item_type, False)),
            ]
        )
        return st.ArrayType(entry)
    if t.is_map(arrow_type):
        raise InvalidRequest(f"NOT_SUPPORTED: a map inside a value ({arrow_type}) in Spark")
    if t.is_struct(arrow_type):
        return st.StructType(
            [st.StructField(f.name, _spark_type(f.type, False), f.nullable) for f in arrow_type]
        )
    if t.is_list(arrow_type) or t.is_large_list(arrow_type):
        return st.ArrayType(_spark_type(arrow_type.value_type, False))
    if t.is_decimal(arrow_type):
        return st.DecimalType(arrow_type.precision, arrow_type.scale)
    if t.is_timestamp(arrow_type):
        return st.TimestampNTZType()
    for check, spark in (
        (t.is_boolean, st.BooleanType),
        (t.is_int8, st.ByteType),
        (t.is_int16, st.ShortType),
        (t.is_int32, st.IntegerType),
        (t.is_int64, st.LongType),
        (t.is_float32, st.FloatType),
        (t.is_float64, st.DoubleType),
        (t.is_date, st.DateType),
        (t.is_string, st.StringType),
        (t.is_large_string, st.StringType),
        (t.is_binary, st.BinaryType),
        (t.is_large_binary, st.BinaryType),
    ):
        if check(arrow_type):
            return spark()
    raise InvalidRequest(f"NOT_SUPPORTED: values of type {arrow_type} in the Spark engine")


def _spark_value(value: Any, arrow_type: pa.DataType) -> Any:
    """A value as Arrow gives it in Python, as Spark takes it for ``_spark_type``: a map as
    its entries, a struct as a tuple of its fields in order."""
    if value is None:
        return None
    t = pa.types
    if t.is_struct(arrow_type):
        return tuple(_spark_value(value.get(f.name), f.type) for f in arrow_type)
    if t.is_map(arrow_type):
        return [
            (_spark_value(k, arrow_type.key_type), _spark_value(v, arrow_type.item_type))
            for k, v in value
        ]
    if t.is_list(arrow_type) or t.is_large_list(arrow_type):
        return [_spark_value(v, arrow_type.value_type) for v in value]
    return value
