"""OPTIMIZE and VACUUM of an Iceberg table, honouring Athena's table properties.

- ``optimize``: bin-packing. In each partition, the data files smaller than the minimum
  size (``optimize_rewrite_min_data_file_size_bytes``, default three quarters of the target
  file size) or larger than the maximum (``..._max_...``, default 1.8 times it), and those
  with at least ``optimize_rewrite_delete_file_threshold`` delete files (default 2), are
  rewritten together once there are ``optimize_rewrite_data_file_threshold`` of them
  (default 5) or any has delete files: their live rows in new files, one snapshot.
- ``vacuum``: snapshots older than ``vacuum_max_snapshot_age_seconds`` (default 5 days) are
  expired, the newest ``vacuum_min_snapshots_to_keep`` (default 1) always kept; metadata
  files beyond the newest ``vacuum_max_metadata_files_to_keep`` (default 100) are deleted;
  and every file under the table's place that no kept snapshot names and that is older
  than the snapshot age (so a write still running keeps its files) is removed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import pyarrow.fs as pafs
from pyiceberg.io.pyarrow import ArrowScan
from pyiceberg.table import FileScanTask, Table

from lakeward.iceberg.commits import replace_files

DEFAULT_TARGET_FILE_SIZE = 512 * 1024 * 1024  # Iceberg's write.target-file-size-bytes


def _number(table: Table, key: str, default: float) -> float:
    value = table.properties.get(key)
    return float(value) if value is not None and value.strip() else default


def files_to_rewrite(table: Table, among: set[str] | None = None) -> list[FileScanTask]:
    """The current snapshot's data files that bin-packing rewrites (``among``: only those)."""
    target = _number(table, "write.target-file-size-bytes", DEFAULT_TARGET_FILE_SIZE)
    smallest = _number(table, "optimize_rewrite_min_data_file_size_bytes", target * 0.75)
    largest = _number(table, "optimize_rewrite_max_data_file_size_bytes", target * 1.8)
    enough_files = _number(table, "optimize_rewrite_data_file_threshold", 5)
    enough_deletes = _number(table, "optimize_rewrite_delete_file_threshold", 2)
    groups: dict[tuple[object, ...], list[FileScanTask]] = {}
    for task in table.scan().plan_files():
        if among is not None and task.file.file_path not in among:
            continue
        size = task.file.file_size_in_bytes
        deletes = len(task.delete_files)
        if size < smallest or size > largest or (deletes and deletes >= enough_deletes):
            partition = task.file.partition
            key = (task.file.spec_id, *(partition[i] for i in range(len(partition))))
            groups.setdefault(key, []).append(task)
    chosen = []
    for tasks in groups.values():
        if len(tasks) >= enough_files or any(t.delete_files for t in tasks):
            chosen += tasks
    return chosen


def optimize(table: Table, tasks: list[FileScanTask]) -> None:
    """Rewrite ``tasks``' files into new ones of their live rows, in one snapshot."""
    if not tasks:
        return
    scan = table.scan()
    reader = ArrowScan(
        scan.table_metadata, scan.io, scan.projection(), scan.row_filter, scan.case_sensitive
    )
    rows = reader.to_table(tasks)
    replace_files(table, {t.file.file_path for t in tasks}, rows, "OPTIMIZE")


@dataclass
class Vacuumed:
    expired: list[int] = field(default_factory=list)  # snapshot ids
    removed: list[str] = field(default_factory=list)  # file locations


def expired_snapshots(table: Table, now_ms: int | None = None) -> list[int]:
    """The snapshots VACUUM expires: older than the age, not among the newest kept, and
    not the head of a branch or tag."""
    now_ms = now_ms if now_ms is not None else int(time.time() * 1000)
    age_ms = _number(table, "vacuum_max_snapshot_age_seconds", 432_000) * 1000
    keep = int(_number(table, "vacuum_min_snapshots_to_keep", 1))
    newest = sorted(table.snapshots(), key=lambda s: s.timestamp_ms, reverse=True)
    protected = {ref.snapshot_id for ref in table.metadata.refs.values()}
    kept = {s.snapshot_id for s in newest[:keep]} | protected
    return [
        s.snapshot_id
        for s in newest
        if s.snapshot_id not in kept and s.timestamp_ms < now_ms - age_ms
    ]


def vacuum(
    table: Table, expire: Callable[[list[int]], Table], now_ms: int | None = None
) -> Vacuumed:
    """Expire the old snapshots (``expire`` commits that and gives the table after it), then
    remove the files no kept snapshot names."""
    now_ms = now_ms if now_ms is not None else int(time.time() * 1000)
    done = Vacuumed(expired_snapshots(table, now_ms))
    if done.expired:
        table = expire(done.expired)
    age_ms = _number(table, "vacuum_max_snapshot_age_seconds", 432_000) * 1000
    keep_metadata = int(_number(table, "vacuum_max_metadata_files_to_keep", 100))
    named = _named_files(table)
    log = [entry.metadata_file for entry in table.metadata.metadata_log]
    named |= set(log[len(log) - keep_metadata + 1 :] if keep_metadata > 1 else [])
    named.add(table.metadata_location)
    filesystem, root = _filesystem(table)
    selector = pafs.FileSelector(root, recursive=True, allow_not_found=True)
    prefix = table.location().rstrip("/") + "/"
    for info in filesystem.get_file_info(selector):
        if info.type != pafs.FileType.File:
            continue
        location = prefix + info.path[len(root) :].lstrip("/")
        old = info.mtime_ns is None or info.mtime_ns // 1_000_000 < now_ms - age_ms
        if location not in named and old:
            filesystem.delete_file(info.path)
            done.removed.append(location)
    return done


def _named_files(table: Table) -> set[str]:
    """Every file a snapshot of the table names: data and delete files, manifests, lists."""
    named: set[str] = set()
    for snapshot in table.snapshots():
        if snapshot.manifest_list:
            named.add(snapshot.manifest_list)
        for manifest in snapshot.manifests(table.io):
            named.add(manifest.manifest_path)
            # Live entries only: a file a snapshot removed is not kept for it.
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
                named.add(entry.data_file.file_path)
    return named


def _filesystem(table: Table) -> tuple[pafs.FileSystem, str]:
    io = table.io
    scheme, netloc, path = io.parse_location(table.location(), io.properties)  # type: ignore[attr-defined]
    return io.fs_by_scheme(scheme, netloc), path.rstrip("/")  # type: ignore[attr-defined]
