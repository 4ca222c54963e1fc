"""The SQL service's records, shaped after Athena's API so the HTTP layer only renames.

Times are UTC datetimes; byte counts and milliseconds are ints.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any


class QueryState(StrEnum):
    QUEUED = "QUEUED"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"

    @property
    def done(self) -> bool:
        return self in (QueryState.SUCCEEDED, QueryState.FAILED, QueryState.CANCELLED)


class StatementType(StrEnum):
    DML = "DML"  # SELECT, WITH
    DDL = "DDL"
    UTILITY = "UTILITY"  # SHOW, DESCRIBE, EXPLAIN


@dataclass(frozen=True)
class ColumnInfo:
    """One result column, as Athena's ``ResultSetMetadata.ColumnInfo`` describes it."""

    name: str
    type: str  # Athena type name: varchar, bigint, integer, double, boolean, date, timestamp,
    # decimal, array, map, row, ...
    precision: int = 0
    scale: int = 0
    nullable: str = "UNKNOWN"  # NOT_NULL | NULLABLE | UNKNOWN
    catalog: str = "hive"
    schema: str = ""
    table: str = ""
    case_sensitive: bool = False


@dataclass
class QueryStatistics:
    engine_execution_ms: int = 0
    data_scanned_bytes: int = 0
    total_execution_ms: int = 0
    queue_ms: int = 0
    planning_ms: int = 0
    service_processing_ms: int = 0
    result_reused: bool = False
    update_count: int | None = None  # rows a CTAS or INSERT INTO wrote (GetQueryResults)
    data_manifest_location: str | None = None  # the files a CTAS, INSERT or UNLOAD wrote


@dataclass
class QueryExecution:
    id: str
    query: str
    statement_type: StatementType
    workgroup: str
    catalog: str
    database: str
    output_location: str  # <location>/<id>.csv
    state: QueryState
    submitted: datetime
    state_change_reason: str | None = None
    completed: datetime | None = None
    statistics: QueryStatistics = field(default_factory=QueryStatistics)
    engine: str = "duckdb"
    client_request_token: str | None = None
    started_by: str | None = None  # a user, role/<name> or root (None: before v3)
    substatement_type: str | None = None  # Athena's: SELECT, CREATE_TABLE_AS_SELECT, INSERT...
    # A FAILED execution's AthenaError: category (1 system, 2 user), type, and whether a
    # retry may succeed (None: before v6, or not failed).
    error_category: int | None = None
    error_type: int | None = None
    retryable: bool | None = None
    reuse_max_age_minutes: int | None = None  # ResultReuseByAgeConfiguration, when enabled


@dataclass(frozen=True)
class ResultPage:
    """One page of a result, labels row included, as ``GetQueryResults`` sends its rows.

    ``rows_json`` is the page's rows in Athena's JSON, ``{"Data":[...]}`` objects
    joined by commas, rendered when the result was written; ``rows`` reads them
    back as strings (None for NULL) for callers inside lakeward.
    """

    columns: list[ColumnInfo]
    rows_json: bytes
    next_token: str | None = None
    update_count: int = 0

    @classmethod
    def of_rows(
        cls, columns: list[ColumnInfo], rows: list[list[str | None]], next_token: str | None = None
    ) -> ResultPage:
        return cls(columns, json_rows(rows), next_token)

    @property
    def rows(self) -> list[list[str | None]]:
        return rows_of_json(self.rows_json)


@dataclass(frozen=True)
class DataCatalog:
    name: str
    type: str  # HIVE (lakeward also lists its own as HIVE)
    description: str = ""
    parameters: dict[str, str] = field(default_factory=dict)  # HIVE: {"metastore-uris": "..."}


@dataclass
class WorkGroup:
    name: str
    description: str = ""
    state: str = "ENABLED"
    output_location: str | None = None  # lake URI; None: <data bucket>/query-results/<name>/
    enforce_configuration: bool = True
    bytes_scanned_cutoff: int | None = None
    engine: str = "duckdb"  # duckdb | spark
    timeout_seconds: float = 1800.0
    max_concurrent: int = 4  # executions running at once; the rest wait, QUEUED
    max_queued: int = 100  # executions waiting at once; StartQueryExecution refuses beyond
    max_per_principal: int | None = None  # one principal's QUEUED + RUNNING; None: no limit
    created: datetime | None = None


@dataclass(frozen=True)
class NamedQuery:
    id: str
    name: str
    database: str
    query: str
    workgroup: str = "primary"
    description: str = ""


PATH_COLUMN = "$path"
"""Athena's hidden column of each row's file."""


@dataclass(frozen=True)
class TableRef:
    """A table a statement reads: catalog.database.table, lower-cased as Hive stores them;
    ``version`` for an Iceberg table read as it was (``FOR VERSION AS OF 123``, or
    ``FOR TIMESTAMP AS OF <expression>`` in DuckDB's SQL)."""

    catalog: str
    database: str
    table: str
    version: str = ""

    def __str__(self) -> str:
        name = f"{self.catalog}.{self.database}.{self.table}"
        return f"{name} {self.version}" if self.version else name

    @property
    def current(self) -> TableRef:
        """The same table as it is now."""
        return TableRef(self.catalog, self.database, self.table)


JsonDict = dict[str, Any]


_COMPACT = (",", ":")


def flat_fields(column: ColumnInfo) -> dict[str, Any]:
    """A column's fields by name (all plain values): ``dataclasses.asdict`` copies each
    deeply, which cost a result's columns a tenth of a millisecond a query."""
    return dict(vars(column))


def json_rows(rows: list[list[str | None]]) -> bytes:
    """Rows of Python strings as a page's rows (comma-joined), for what has no Arrow form."""
    return b",".join(_row_json(row) for row in rows)


def _row_json(row: list[str | None]) -> bytes:
    data = [{} if v is None else {"VarCharValue": v} for v in row]
    return json.dumps({"Data": data}, separators=_COMPACT).encode("ascii")


def rows_of_json(rows_json: bytes) -> list[list[str | None]]:
    """A page's rows back as Python strings (None for NULL)."""
    rows = json.loads(b"[" + rows_json + b"]")
    return [[datum.get("VarCharValue") for datum in row["Data"]] for row in rows]
