"""What every SQL engine provides to the query service."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field

import pyarrow as pa

from lakeward.metastore.client import Column
from lakeward.query.model import ColumnInfo, TableRef


@dataclass(frozen=True)
class ResolvedTable:
    """A table a query reads, as the catalog connector resolved it."""

    ref: TableRef
    location: str  # as the metastore gives it: file:/..., file:///..., s3a://..., s3://...
    columns: list[Column]
    partition_keys: list[Column] = field(default_factory=list)


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


class Engine(ABC):
    """Runs one read-only statement, already translated to the engine's dialect."""

    name: str
    dialect: str  # sqlglot dialect name

    @abstractmethod
    def table_name(self, ref: TableRef) -> str:
        """How the translated SQL names a table (quoted as the dialect needs)."""

    @abstractmethod
    def execute(
        self, execution_id: str, sql: str, tables: list[ResolvedTable], limits: Limits
    ) -> EngineResult:
        """Run ``sql`` reading ``tables`` only; blocking until the first batch is ready."""

    @abstractmethod
    def interrupt(self, execution_id: str) -> None:
        """Stop a running execution (its ``execute`` or batches raise)."""

    def close(self) -> None:  # noqa: B027 - most engines hold nothing to release
        """Release the engine's resources."""
