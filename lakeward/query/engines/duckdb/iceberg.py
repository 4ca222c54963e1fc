"""An Iceberg table as a DuckDB execution reads it.

pyiceberg plans the scan from the table's current snapshot (its manifests name the live
data files and the delete files that apply to each) and reads them: columns resolved by
field id, so renamed and dropped columns read right, and position and equality deletes
written by any engine applied. Each row carries the data file it was read from (the
table's ``"$path"``, and what a row-level DELETE rewrites) and its place among that
file's rows (``__lakeward_row``: what tells MERGE that one row matched twice). The rows
reach DuckDB as an Arrow dataset, read once the execution has started, so a cancel
stops it.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.io.pyarrow import ArrowScan
from pyiceberg.table import FileScanTask

from lakeward.query.engines.base import ResolvedTable
from lakeward.query.engines.duckdb.hidden import FILE_COLUMN, ROW_COLUMN
from lakeward.query.engines.duckdb.scanned import DataFile, Source

_READERS = 4


def iceberg_source(table: ResolvedTable) -> Source:
    if table.rows is not None:  # a metadata table: its rows are at hand
        return Source(table, [DataFile(table.location, 0, ())], dataset=pads.dataset(table.rows))
    row_filter = AlwaysTrue() if table.row_filter is None else table.row_filter
    scan = table.iceberg.scan(snapshot_id=table.snapshot_id, row_filter=row_filter)
    tasks = list(scan.plan_files())
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
