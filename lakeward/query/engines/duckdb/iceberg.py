"""An Iceberg table as a DuckDB execution reads it.

pyiceberg plans the scan from the table's current snapshot (its manifests name the live
data files and the delete files that apply to each) and reads them: columns resolved by
field id, so renamed and dropped columns read right, and position and equality deletes
written by any engine applied. The rows reach DuckDB as an Arrow dataset, read once the
execution has started, so a cancel stops it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow.dataset as pads
from pyiceberg.io.pyarrow import ArrowScan

from lakeward.query.engines.base import ResolvedTable
from lakeward.query.engines.duckdb.scanned import DataFile, Source


def iceberg_source(table: ResolvedTable) -> Source:
    scan = table.iceberg.scan()
    tasks = list(scan.plan_files())
    files = [DataFile(t.file.file_path, t.file.file_size_in_bytes, ()) for t in tasks]

    def load(check: Callable[[], None], _read: list[DataFile]) -> Any:
        check()
        reader = ArrowScan(
            scan.table_metadata, scan.io, scan.projection(), scan.row_filter, scan.case_sensitive
        )
        return pads.dataset(reader.to_table(tasks))

    return Source(table, files, load=load)
