"""What every SQL engine provides to the query service."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import pyarrow as pa

from lakeward.metastore.tables import Column, PartitionInfo
from lakeward.query.formats import PARQUET, TableFormat
from lakeward.query.model import ColumnInfo, TableRef
from lakeward.query.projection import Projection


@dataclass(frozen=True)
class ResolvedTable:
    """A table a query reads, as the catalog connector resolved it."""

    ref: TableRef
    location: str  # as the metastore gives it: file:/..., file:///..., s3a://..., s3://...
    columns: list[Column]
    partition_keys: list[Column] = field(default_factory=list)
    format: TableFormat = PARQUET  # the storage descriptor: which reader reads the files
    parameters: dict[str, str] = field(default_factory=dict)  # TBLPROPERTIES
    # The metastore's partitions, each at its own location (which may lie outside the
    # table's). None: not known, the partitions are the key=value directories under
    # the table's location.
    partitions: list[PartitionInfo] | None = None
    # Athena's partition projection: the partitions the table's properties tell, in place
    # of the metastore's (lakeward.query.projection).
    projection: Projection | None = None
    # An Iceberg table: pyiceberg's table, whose snapshot tells the files (not the place),
    # and the snapshot read (None: the current one).
    iceberg: Any = None
    snapshot_id: int | None = None
    rows: Any = None  # a table of rows in memory (an Iceberg metadata table), as Arrow
    row_filter: Any = None  # pyiceberg's filter of the scan, from the query's WHERE


@dataclass(frozen=True)
class Limits:
    memory_limit: str = "1GB"
    spill_directory: str | None = None
    threads: int | None = None


@dataclass
class EngineResult:
    columns: list[ColumnInfo]
    batches: Iterator[pa.RecordBatch]
    bytes_scanned: int = 0
    schema: pa.Schema | None = None  # the batches' schema, where known before any batch
    update_count: int | None = None  # rows a CTAS or INSERT INTO wrote (GetQueryResults)


WriteFormat = Literal["parquet", "orc", "json", "text", "avro"]
"""The file formats a write produces (``formats.TableFormat.kind`` of the table written)."""

Compression = Literal["none", "snappy", "gzip", "zstd", "zlib", "lz4", "bzip2"]
"""Lower-cased ``write_compression`` values (which a format takes: ``engines.writers``)."""


@dataclass(frozen=True)
class WriteTarget:
    """Where and how an engine writes a SELECT's rows (CTAS, INSERT INTO, UNLOAD).

    ``directory`` is a local directory that no reader lists (the statement's staging
    place, empty when the write starts); the engine writes its files under it and the
    statement publishes them to the lake. Partitioned writes put each row's file under
    ``k1=v1/k2=v2/`` (Hive's escaping; a NULL value is ``__HIVE_DEFAULT_PARTITION__``)
    and leave the partition columns, which are the SELECT's last, out of the files.
    File names are unique to the execution (``prefix`` starts them), so files of
    several writes into one table never collide.
    """

    directory: str
    format: WriteFormat = "parquet"
    compression: Compression = "none"
    partitioned_by: tuple[str, ...] = ()
    field_delimiter: str = "\x01"  # text only: Hive's default, ^A
    prefix: str = ""
    columns: tuple[str, ...] | None = None  # names the files give the columns, in order;
    # None: the SELECT's own (INSERT INTO writes the target table's names)
    null_format: str = "\\N"  # text only: how NULL is written (serialization.null.format)
    # The directory's s3:// name when it is in the lake (``Engine.stages_in_lake``).
    name: str | None = None


@dataclass(frozen=True)
class WrittenFile:
    """One file a write produced, relative to the target's directory."""

    path: str  # "part-....parquet" or "k1=v1/k2=v2/part-....parquet"
    size: int
    rows: int
    partition: tuple[str | None, ...] = ()  # the values of partitioned_by (None: NULL)


@dataclass
class WriteResult:
    """A write's outcome: the SELECT's columns (Athena's types), its files and row count."""

    columns: list[ColumnInfo]
    files: list[WrittenFile]
    rows: int
    bytes_scanned: int = 0
    schema: pa.Schema | None = None  # of the rows, partition columns included


class Engine(ABC):
    """Runs one statement, already translated to the engine's dialect: a read, or a write."""

    name: str
    dialect: str  # sqlglot dialect name
    # Whether the engine's writes are staged in the lake (``WriteTarget.name``), where
    # processes on other machines (a cluster's executors) can write, or on this one.
    stages_in_lake: bool = False

    @abstractmethod
    def table_name(self, ref: TableRef) -> str:
        """How the translated SQL names a table (quoted as the dialect needs)."""

    def iceberg_table_name(self, ref: TableRef) -> str:
        """How it names an Iceberg table: as any other, unless the engine reads Iceberg
        through a catalog of its own."""
        return self.table_name(ref)

    def rows_table_name(self, ref: TableRef, execution_id: str) -> str:
        """How it names a table of rows in memory (an Iceberg metadata table), which the
        engine registers for the execution: as any other, unless its registrations are
        shared by concurrent executions."""
        return self.table_name(ref)

    @abstractmethod
    def execute(
        self, execution_id: str, sql: str, tables: list[ResolvedTable], limits: Limits
    ) -> EngineResult:
        """Run ``sql`` reading ``tables`` only; blocking until the first batch is ready."""

    @abstractmethod
    def write(
        self,
        execution_id: str,
        sql: str,
        tables: list[ResolvedTable],
        limits: Limits,
        target: WriteTarget,
    ) -> WriteResult:
        """Run the SELECT ``sql`` and write its rows as ``target`` says; blocking.

        Interruptible like ``execute`` (``interrupt`` makes it raise). On any failure
        the files written so far may remain in ``target.directory``: the caller
        deletes the staging place. A SELECT without rows writes no file.

        DuckDB's rows are written by lakeward's Arrow writers (``writers.py``); Spark
        writes its files itself.
        """

    @abstractmethod
    def interrupt(self, execution_id: str) -> None:
        """Stop a running execution (its ``execute`` or batches raise)."""

    def close(self) -> None:  # noqa: B027 - most engines hold nothing to release
        """Release the engine's resources."""
