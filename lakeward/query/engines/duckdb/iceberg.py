"""An Iceberg table as a DuckDB execution reads it.

pyiceberg plans the scan from the table's current snapshot (its manifests name the live
data files and the delete files that apply to each) and reads them: columns resolved by
field id, so renamed and dropped columns read right, and position and equality deletes
written by any engine applied. Each row carries the data file it was read from (the
table's ``"$path"``, and what a row-level DELETE rewrites) and its place among that
file's rows (``__lakeward_row``: what tells MERGE that one row matched twice). The rows
reach DuckDB as an Arrow dataset, read once the execution has started, so a cancel
stops it.

Files DuckDB can read itself go straight to its Parquet reader instead, with its
projection and filter pushdown (each row's file and place from the reader too): when no
delete file applies, the files are in the embedded lake, and every column name any of the table's
schemas gave a field id is the name the current schema gives it (no rename, no name
reused by another field): then reading by name is reading by field id.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.io.pyarrow import ArrowScan
from pyiceberg.manifest import FileFormat
from pyiceberg.table import DataScan, FileScanTask
from pyiceberg.table.metadata import TableMetadata

from lakeward.iceberg.io import LAKE_ROOT, LakeFileIO
from lakeward.query.engines.base import ResolvedTable
from lakeward.query.engines.duckdb.hidden import FILE_COLUMN, ROW_COLUMN
from lakeward.query.engines.duckdb.scanned import DataFile, Source

_READERS = 4
_PLANS_KEPT = 64
# A scan's plan depends on the metadata file, the snapshot and the filter only: all fixed.
_plans: OrderedDict[tuple[str, int | None, str], list[FileScanTask]] = OrderedDict()
_plans_lock = threading.Lock()


def _planned(scan: DataScan, metadata_location: str) -> list[FileScanTask]:
    """The scan's files and the delete files of each, planned once per process."""
    key = (metadata_location, scan.snapshot_id, repr(scan.row_filter))
    with _plans_lock:
        found = _plans.get(key) if key[0] else None
        if found is not None:
            _plans.move_to_end(key)
            return found
    tasks = list(scan.plan_files())
    if key[0]:
        with _plans_lock:
            _plans[key] = tasks
            while len(_plans) > _PLANS_KEPT:
                _plans.popitem(last=False)
    return tasks


def iceberg_source(table: ResolvedTable) -> Source:
    """How an execution reads the table: DuckDB's own reader where it can, else pyiceberg."""
    if table.rows is not None:  # a metadata table: its rows are at hand
        return Source(table, [DataFile(table.location, 0, ())], dataset=pads.dataset(table.rows))
    row_filter = AlwaysTrue() if table.row_filter is None else table.row_filter
    scan = table.iceberg.scan(snapshot_id=table.snapshot_id, row_filter=row_filter)
    tasks = _planned(scan, table.iceberg.metadata_location)
    direct = _local_files(table, tasks)
    if direct is not None:
        return Source(table, direct[0], local_dirs=[direct[1]])
    files = [DataFile(t.file.file_path, t.file.file_size_in_bytes, ()) for t in tasks]

    def load(check: Callable[[], None], _read: list[DataFile]) -> Any:
        reader = ArrowScan(
            scan.table_metadata, scan.io, scan.projection(), scan.row_filter, scan.case_sensitive
        )

        def read(task: FileScanTask) -> pa.Table:
            # File by file, so that each row knows its file ("$path", row-level DML).
            check()
            rows = reader.to_table([task])
            count = rows.num_rows
            path = pc.fill_null(pa.nulls(count, pa.string()), task.file.file_path)
            rows = rows.append_column(FILE_COLUMN, path)
            return rows.append_column(ROW_COLUMN, pa.array(np.arange(count, dtype=np.int64)))

        if not tasks:
            return pads.dataset(reader.to_table([]))
        with ThreadPoolExecutor(max_workers=_READERS) as pool:  # Parquet decoding frees the GIL
            parts = list(pool.map(read, tasks))
        return pads.dataset(pa.concat_tables(parts, promote_options="permissive"))

    return Source(table, files, load=load)


def _local_files(
    table: ResolvedTable, tasks: list[FileScanTask]
) -> tuple[list[DataFile], str] | None:
    """The tasks' files as local paths DuckDB may read by name, and their directory; None
    when pyiceberg must read them (see the module's description)."""
    io = table.iceberg.io
    if not isinstance(io, LakeFileIO) or not _names_are_field_ids(table.iceberg.metadata):
        return None
    if any(t.delete_files or t.file.file_format != FileFormat.PARQUET for t in tasks):
        return None
    _, _, root = io.parse_location(table.iceberg.location(), io.properties)
    if not io.properties.get(LAKE_ROOT):
        return None
    files = []
    for task in tasks:
        _, _, path = io.parse_location(task.file.file_path, io.properties)
        if not path.startswith(root.rstrip("/") + "/"):
            return None  # a file outside the table's place (the directory DuckDB may read)
        files.append(DataFile(path, task.file.file_size_in_bytes, ()))
    return files, root


def _names_are_field_ids(metadata: TableMetadata) -> bool:
    """Whether each name any schema gave a field is that field's name now, and no current
    name was another field's: files of any schema then read right by name."""
    current = metadata.schema()
    names = {current.find_column_name(i): i for i in current.field_ids}
    for schema in metadata.schemas:
        for field_id in schema.field_ids:
            name = schema.find_column_name(field_id)
            if field_id in current.field_ids:
                if name != current.find_column_name(field_id):
                    return False
            elif name in names:
                return False
    return True
