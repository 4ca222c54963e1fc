"""Bytes scanned by a DuckDB execution, as Athena counts them: the files a query reads.

A table's data files are known before the query runs (``Source``). Without
partition keys every file is read; with them, the query's plan (``EXPLAIN``)
tells which partition filters each scan applies, and only the files of the
partitions that pass are counted. An estimate never fails a query: when the plan
cannot be read, every file counts.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import duckdb

from lakeward.metastore.tables import Column
from lakeward.query.engines.base import ResolvedTable
from lakeward.query.types import duckdb_type_of_hive
from lakeward.query.types import quote_identifier as quote


@dataclass(frozen=True)
class DataFile:
    path: str
    size: int
    partition: tuple[str | None, ...]  # the partition keys' values, from its directories
    mtime_ns: int | None = None  # when it was last written, if the storage says


@dataclass
class Source:
    """One table as an execution reads it."""

    table: ResolvedTable
    files: list[DataFile]
    local_dirs: list[str] = field(default_factory=list)  # what DuckDB reads itself, if anything
    dataset: Any = None  # else the pyarrow dataset or table its view reads
    scan_columns: set[str] = field(default_factory=set)  # lower-cased names the files hold
    # Text tables: the rows of some of its files, read once the execution has started
    # (so it can be cancelled), and only those of the partitions the plan reads.
    load: Callable[[Callable[[], None], list[DataFile]], Any] | None = None
    scan_name: str | None = None  # the name its dataset is registered under
    layout: Any = None  # text tables: their readers.TextLayout

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)


def sql_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def duck_type(hive_type: str) -> str:
    try:
        return duckdb_type_of_hive(hive_type)
    except ValueError:
        return "VARCHAR"


def bytes_scanned(con: duckdb.DuckDBPyConnection, sql: str, sources: list[Source]) -> int:
    """The bytes of ``sources``' files, less those of the partitions the plan of ``sql`` prunes."""
    if not any(source.table.partition_keys for source in sources):
        # Nothing to prune: every file is read, and planning the query twice costs time.
        return sum(source.size for source in sources)
    try:
        plan = json.loads(con.execute(f"EXPLAIN (FORMAT json) {sql}").fetchall()[0][1])
        scans = list(_scan_nodes(plan))
        return sum(_scanned_of(con, source, scans) for source in sources)
    except duckdb.InterruptException:
        raise
    except Exception:  # noqa: BLE001 - an estimate: never fail the query for it
        return sum(source.size for source in sources)


def _scan_nodes(nodes: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for node in nodes:
        if node.get("name") == "READ_PARQUET" or "ARROW" in str(node.get("name")):
            yield node
        yield from _scan_nodes(node.get("children", []))


def files_read(con: duckdb.DuckDBPyConnection, sql: str, source: Source) -> set[int] | None:
    """The indexes of ``source``'s files that the plan of ``sql`` may read; None: all."""
    if not source.table.partition_keys or not source.files:
        return None
    try:
        plan = json.loads(con.execute(f"EXPLAIN (FORMAT json) {sql}").fetchall()[0][1])
        return _read_of(con, source, list(_scan_nodes(plan)))
    except duckdb.InterruptException:
        raise
    except Exception:  # noqa: BLE001 - read everything rather than fail the query
        return None


def _scanned_of(con: duckdb.DuckDBPyConnection, source: Source, scans: list[Any]) -> int:
    """The bytes of a table's files that the plan's scans of it may read."""
    read = _read_of(con, source, scans)
    return source.size if read is None else sum(source.files[i].size for i in read)


def _read_of(con: duckdb.DuckDBPyConnection, source: Source, scans: list[Any]) -> set[int] | None:
    """The indexes of a table's files that the plan's scans of it may read; None: all."""
    if not source.table.partition_keys or not source.files:
        return None
    read: set[int] | None = None
    for node in scans:
        # A scan is this table's if it reads this kind of source, only columns the
        # table's files hold, and (local tables) as many files as the table has.
        info = node.get("extra_info", {})
        projected = info.get("Projections") or []
        projected = [projected] if isinstance(projected, str) else projected
        names = {p.strip('"').lower() for p in projected}
        total = str(info.get("Scanning Files", "")).partition("/")[2]
        if (
            (node["name"] == "READ_PARQUET") != (source.dataset is None)
            or not names <= source.scan_columns
            or (total and int(total) != len(source.files))
        ):
            continue
        filters = info.get("File Filters" if source.dataset is None else "Filters") or []
        read = (read or set()) | _files_passing(
            con, source, [filters] if isinstance(filters, str) else filters
        )
    return read


def _files_passing(con: duckdb.DuckDBPyConnection, source: Source, filters: list[str]) -> set[int]:
    """The files whose partition values pass those of ``filters`` that are on partition keys."""
    keys = source.table.partition_keys
    partitions: dict[tuple[str | None, ...], list[int]] = {}
    for i, f in enumerate(source.files):
        partitions.setdefault(f.partition, []).append(i)

    def cell(value: str | None, key: Column) -> str:
        return f"CAST({'NULL' if value is None else sql_literal(value)} AS {duck_type(key.type)})"

    rows = ", ".join(f"({n}, {', '.join(map(cell, v, keys))})" for n, v in enumerate(partitions))
    names = ", ".join(["__lakeward_n", *(quote(k.name) for k in keys)])
    passing = set(range(len(partitions)))
    for condition in filters:
        query = f"SELECT __lakeward_n FROM (VALUES {rows}) AS p({names}) WHERE {condition}"
        if len(con.extract_statements(query)) != 1:
            continue
        try:
            passing &= {row[0] for row in con.execute(query).fetchall()}
        except duckdb.InterruptException:
            raise
        except duckdb.Error:
            continue  # a filter on data columns: it prunes no partition
    groups = list(partitions.values())
    return {i for n in passing for i in groups[n]}
