"""Committing a change to an Iceberg table: rows in the table's types, files replaced in
one snapshot, retries, and a table's purge.

A commit swaps the table's metadata location under a metastore lock, and fails when
another writer committed since the table was read. The change is then made again on the
table as it is now, a few times, and otherwise fails with Athena's ICEBERG_COMMIT_ERROR:
never lost, never half-applied (the metadata location moves in one step or not at all).
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable, Iterable, Sequence

import pyarrow as pa
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import CommitFailedException, ValidationException
from pyiceberg.io.pyarrow import _dataframe_to_data_files
from pyiceberg.manifest import DataFile
from pyiceberg.table import Table

from lakeward.errors import QueryFailed

COMMIT_TRIES = 5


def arrow_rows(batches: Iterable[pa.RecordBatch], schema: pa.Schema) -> pa.Table:
    """The batches as one table of the Iceberg table's Arrow types (names in order)."""
    found = list(batches)
    if not found:
        return schema.empty_table()
    rows = pa.Table.from_batches(found)
    return pa.table(
        [rows.column(i).cast(field.type) for i, field in enumerate(schema)], schema=schema
    )


def commit_with_retries(
    catalog: Catalog, identifier: tuple[str, str], change: Callable[[Table], None]
) -> Table:
    """Make ``change`` on the table's current version; again on a newer one if it moved."""
    for attempt in range(COMMIT_TRIES):
        table = catalog.load_table(identifier)
        try:
            change(table)
            return table
        # Another writer committed first: the metadata moved (CommitFailed), or pyiceberg's
        # conflict check found its files where this change reads (ValidationException).
        except (CommitFailedException, ValidationException) as exc:
            if attempt == COMMIT_TRIES - 1:
                raise QueryFailed(
                    f"ICEBERG_COMMIT_ERROR: {'.'.join(identifier)} changed under "
                    f"{COMMIT_TRIES} tries to commit ({exc})"
                ) from None
            time.sleep(random.uniform(0.05, 0.2) * (attempt + 1))
    raise AssertionError("unreachable")


def replace_files(
    table: Table, paths: set[str], rows: pa.Table, verb: str, written: Sequence[DataFile] = ()
) -> None:
    """One overwrite snapshot: the data files at ``paths`` out, ``rows`` in new files (as
    the table's partitioning lays them out) and the files ``written`` already in. Fails with
    ICEBERG_COMMIT_ERROR when one of the files left the table since it was read."""
    replaced = live_files(table, paths, verb)
    with (
        table.transaction() as transaction,
        transaction.update_snapshot().overwrite() as overwrite,
    ):
        for data_file in replaced:
            overwrite.delete_data_file(data_file)
        for data_file in written:
            overwrite.append_data_file(data_file)
        if rows.num_rows:
            for data_file in _dataframe_to_data_files(
                table_metadata=transaction.table_metadata,
                df=rows,
                io=table.io,
                write_uuid=overwrite.commit_uuid,
            ):
                overwrite.append_data_file(data_file)


def live_files(table: Table, paths: set[str], verb: str) -> list[DataFile]:
    """The table's data files at ``paths``; ICEBERG_COMMIT_ERROR if one has left it."""
    live = {task.file.file_path: task.file for task in table.scan().plan_files()}
    missing = sorted(paths - set(live))
    if missing:  # another writer removed or rewrote it
        raise QueryFailed(
            f"ICEBERG_COMMIT_ERROR: data file {missing[0]} changed while the {verb} ran; "
            "run it again"
        )
    return [live[path] for path in sorted(paths)]


def purge(catalog: Catalog, identifier: tuple[str, str]) -> None:
    """Drop the table from the catalog, then delete every file any of its snapshots names:
    data and delete files, manifests, manifest lists and metadata files."""
    table = catalog.load_table(identifier)
    files = set(table.inspect.all_files().column("file_path").to_pylist())
    files |= set(table.inspect.all_manifests().column("path").to_pylist())
    files |= {s.manifest_list for s in table.snapshots() if s.manifest_list}
    files |= {entry.metadata_file for entry in table.metadata.metadata_log}
    files.add(table.metadata_location)
    catalog.drop_table(identifier)
    for path in sorted(files):
        with contextlib.suppress(FileNotFoundError):  # gone already: a purge run again
            table.io.delete(path)
