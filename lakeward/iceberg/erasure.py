"""Erasing people from an Iceberg table: their rows deleted, then every file that held them
physically gone, and nothing else touched.

1. ``delete_rows``: the data files holding the ids are rewritten without those rows, in one
   overwrite snapshot (copy-on-write, as the SQL DELETE does). Delete files any engine wrote
   are applied while reading, so rows already deleted stay deleted.
2. ``superseded_files``: the files that still hold the ids but are no longer in the table's
   current snapshot, found through every snapshot the table's metadata names, and those of its
   earlier metadata files. An erasure stopped after the expiry below still finds them.
3. ``expire_snapshots``: the snapshots that name those files are expired, and no others. The
   current snapshot is never expired. The head of a branch or tag is kept and reported.
4. ``remove_files``: those files are deleted, then the manifests and manifest lists that
   named them (a manifest keeps its files' column bounds, which may be the ids).

Each step is safe to repeat: an erasure stopped anywhere is finished by running it again.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.catalog import Catalog
from pyiceberg.expressions import AlwaysTrue, BooleanExpression, In
from pyiceberg.io import FileIO
from pyiceberg.io.pyarrow import ArrowScan
from pyiceberg.manifest import DataFile, DataFileContent, ManifestFile
from pyiceberg.serializers import FromInputFile
from pyiceberg.table import FileScanTask, Table
from pyiceberg.table.snapshots import Snapshot

from lakeward.errors import InputError
from lakeward.iceberg.commits import commit_with_retries, replace_files

Identifier = tuple[str, str]


@dataclass
class Erased:
    """What an erasure did to one table, for the outcome and the certificate."""

    removed_rows: int = 0
    superseded: list[str] = field(default_factory=list)  # data and delete files
    removed: list[str] = field(default_factory=list)  # every file deleted, metadata included
    expired: list[int] = field(default_factory=list)  # snapshot ids
    pinned: list[str] = field(default_factory=list)  # branches and tags naming a superseded file


def erase(catalog: Catalog, identifier: Identifier, column: str, ids: Sequence[str]) -> Erased:
    """All four steps, in order (see the module's description)."""
    done = Erased(removed_rows=delete_rows(catalog, identifier, column, ids))
    table = catalog.load_table(identifier)
    done.superseded = sorted(superseded_files(table, column, ids))
    done.expired, done.pinned = expire_snapshots(catalog, identifier, set(done.superseded))
    table = catalog.load_table(identifier)
    done.removed = remove_files(table, set(done.superseded))
    return done


def count_rows(table: Table, column: str, ids: Sequence[str]) -> int:
    """How many rows of the ids the table's current snapshot holds."""
    tasks = list(table.scan(row_filter=_pruning(table, column, ids)).plan_files())
    return _hits(_read(table, tasks, column), column, ids) if tasks else 0


def delete_rows(catalog: Catalog, identifier: Identifier, column: str, ids: Sequence[str]) -> int:
    """Rewrite the current data files holding the ids without their rows; how many went."""
    removed = 0

    def change(table: Table) -> None:
        nonlocal removed
        removed = 0
        _column_of(table, column)
        changed: set[str] = set()
        kept: list[pa.Table] = []
        for task in table.scan(row_filter=_pruning(table, column, ids)).plan_files():
            rows = _read(table, [task], None)
            hit = _matches(rows, column, ids)
            found = int(pc.sum(hit.cast(pa.int64())).as_py() or 0)
            if found:
                removed += found
                changed.add(task.file.file_path)
                kept.append(rows.filter(pc.invert(hit)))
        if changed:
            schema = table.schema().as_arrow()
            # Files written by different writers may give a text column as string or as
            # large_string: one type for all.
            rows = (
                pa.concat_tables(kept, promote_options="permissive")
                if kept
                else schema.empty_table()
            )
            replace_files(table, changed, rows, "erasure DELETE")

    commit_with_retries(catalog, identifier, change)
    return removed


def superseded_files(table: Table, column: str, ids: Sequence[str]) -> set[str]:
    """Data and equality-delete files no longer current that still hold the ids."""
    current = _current_files(table)
    found: set[str] = set()
    for data_file in _history_files(table):
        path = data_file.file_path
        if path in current or path in found:
            continue
        if data_file.content == DataFileContent.POSITION_DELETES:
            continue  # positions and file names only
        if not table.io.new_input(path).exists():
            continue
        rows = _read(table, [FileScanTask(data_file)], column)
        if _hits(rows, column, ids):
            found.add(path)
    return found


def expire_snapshots(
    catalog: Catalog, identifier: Identifier, files: set[str]
) -> tuple[list[int], list[str]]:
    """Expire the snapshots naming any of ``files`` but the current one and the heads of
    branches and tags; the ids expired and the references that keep a file named."""
    expired: list[int] = []
    pinned: list[str] = []

    def change(table: Table) -> None:
        expired.clear()
        pinned.clear()
        if not files:
            return
        heads = {ref.snapshot_id: name for name, ref in table.metadata.refs.items()}
        for snapshot in table.snapshots():
            if not files & _named_by(table.io, snapshot):
                continue
            if snapshot.snapshot_id in heads:
                pinned.append(heads[snapshot.snapshot_id])
            else:
                expired.append(snapshot.snapshot_id)
        if expired:
            table.maintenance.expire_snapshots().by_ids(list(expired)).commit()

    commit_with_retries(catalog, identifier, change)
    return expired, sorted(pinned)


def remove_files(table: Table, files: set[str]) -> list[str]:
    """Delete ``files`` no snapshot of the table names any more, then the manifests and
    manifest lists of earlier snapshots that named them; the locations deleted."""
    kept_files: set[str] = set()
    kept_metadata: set[str] = set()
    for snapshot in table.snapshots():
        kept_files |= _named_by(table.io, snapshot)
        kept_metadata |= {m.manifest_path for m in _manifests(table.io, snapshot)}
        kept_metadata.add(snapshot.manifest_list)
    gone = sorted(files - kept_files)
    manifests: set[str] = set()
    lists: set[str] = set()
    for snapshot in _history_snapshots(table):
        naming = [m for m in _manifests(table.io, snapshot) if files & _files_of(table.io, m)]
        if naming:
            manifests |= {m.manifest_path for m in naming}
            lists.add(snapshot.manifest_list)
    # Data first: a run stopped midway still finds the rest through the metadata.
    order = gone + sorted(manifests - kept_metadata) + sorted(lists - kept_metadata)
    removed = []
    for location in order:
        if table.io.new_input(location).exists():
            table.io.delete(location)
            removed.append(location)
    return removed


def _column_of(table: Table, column: str) -> None:
    try:
        table.schema().find_field(column)
    except ValueError:
        name = ".".join(table.name())
        raise InputError(f"the Iceberg table {name} has no column {column!r}") from None


def _pruning(table: Table, column: str, ids: Sequence[str]) -> BooleanExpression:
    """A filter that prunes the files whose statistics exclude the ids, when the ids are
    values of the column's type (a number column and ids that are no numbers: no pruning)."""
    _column_of(table, column)
    values: set[str] = set(ids)
    expression = In(term=column, values=values)  # type: ignore[arg-type]  # strings bind
    try:
        expression.bind(table.schema())
    except ValueError:
        return AlwaysTrue()
    return expression


def _read(table: Table, tasks: list[FileScanTask], column: str | None) -> pa.Table:
    schema = table.schema() if column is None else table.schema().select(column)
    return ArrowScan(table.metadata, table.io, schema, AlwaysTrue()).to_table(tasks)


def _matches(rows: pa.Table, column: str, ids: Sequence[str]) -> pa.Array:
    """True for the rows whose id (as text, the way the index reads ids) is listed."""
    values = rows.column(column)
    if not pa.types.is_string(values.type) and not pa.types.is_large_string(values.type):
        values = pc.cast(values, pa.string())
    hit = pc.is_in(values, value_set=pa.array(list(ids), pa.string()))
    return pc.fill_null(hit, False)


def _hits(rows: pa.Table, column: str, ids: Sequence[str]) -> int:
    return int(pc.sum(_matches(rows, column, ids).cast(pa.int64())).as_py() or 0)


def _current_files(table: Table) -> set[str]:
    """The files of the current snapshot (a branch's or tag's are superseded, and kept)."""
    current = table.current_snapshot()
    return _named_by(table.io, current) if current is not None else set()


def _history_snapshots(table: Table) -> list[Snapshot]:
    """Every snapshot the table's metadata and its earlier metadata files name."""
    found: dict[int, Snapshot] = {s.snapshot_id: s for s in table.snapshots()}
    for entry in table.metadata.metadata_log:
        source = table.io.new_input(entry.metadata_file)
        if not source.exists():
            continue
        for snapshot in FromInputFile.table_metadata(source).snapshots:
            found.setdefault(snapshot.snapshot_id, snapshot)
    return list(found.values())


def _history_files(table: Table) -> Iterator[DataFile]:
    seen: set[str] = set()
    for snapshot in _history_snapshots(table):
        for manifest in _manifests(table.io, snapshot):
            if manifest.manifest_path in seen:
                continue
            seen.add(manifest.manifest_path)
            yield from _entries(table.io, manifest)


def _manifests(io: FileIO, snapshot: Snapshot) -> list[ManifestFile]:
    if not snapshot.manifest_list or not io.new_input(snapshot.manifest_list).exists():
        return []  # removed by an earlier VACUUM or erasure
    return snapshot.manifests(io)


def _entries(io: FileIO, manifest: ManifestFile) -> list[DataFile]:
    with contextlib.suppress(FileNotFoundError):
        if io.new_input(manifest.manifest_path).exists():
            entries = manifest.fetch_manifest_entry(io, discard_deleted=False)
            return [entry.data_file for entry in entries]
    return []


def _files_of(io: FileIO, manifest: ManifestFile) -> set[str]:
    return {data_file.file_path for data_file in _entries(io, manifest)}


def _named_by(io: FileIO, snapshot: Snapshot) -> set[str]:
    """The data and delete files a snapshot names as live."""
    named: set[str] = set()
    for manifest in _manifests(io, snapshot):
        if io.new_input(manifest.manifest_path).exists():
            for entry in manifest.fetch_manifest_entry(io, discard_deleted=True):
                named.add(entry.data_file.file_path)
    return named
