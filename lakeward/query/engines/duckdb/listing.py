"""A Hive table's data files, listed as Hive reads them: hidden names skipped, each file's
partition values from its ``key=value`` directories."""

from __future__ import annotations

import pyarrow.fs as pafs

from lakeward.metastore.tables import partition_values
from lakeward.query.engines.duckdb.scanned import DataFile
from lakeward.query.formats import HIVE_DEFAULT_PARTITION
from lakeward.query.projection import Projection


def list_files(filesystem: pafs.FileSystem, root: str, keys: list[str]) -> list[DataFile]:
    """The table's data files as Hive reads them: no hidden names, partitions in key order."""
    files = []
    selector = pafs.FileSelector(root, recursive=True, allow_not_found=True)
    for info in filesystem.get_file_info(selector):
        relative = info.path[len(root) :].strip("/").split("/")
        # Hive and Spark skip these: _SUCCESS, _temporary/, .crc files, .hive-staging dirs.
        if info.type != pafs.FileType.File or any(p.startswith(("_", ".")) for p in relative):
            continue
        named = partition_values(relative[:-1], keys, exact=False) if keys else []
        if named is None:
            continue  # outside the partition directories: Hive ignores it
        values = tuple(None if v == HIVE_DEFAULT_PARTITION else v for v in named)
        files.append(DataFile(info.path, info.size, values, info.mtime_ns))
    return sorted(files, key=lambda f: f.path)


def projected_files(
    filesystem: pafs.FileSystem, root: str, projection: Projection
) -> list[DataFile]:
    """The files of a projected table's partitions: those under the template's prefix
    (``root``) at a place the template matches with values the projection allows."""
    files = []
    selector = pafs.FileSelector(root, recursive=True, allow_not_found=True)
    for info in filesystem.get_file_info(selector):
        relative = info.path[len(root) :].lstrip("/")
        if info.type != pafs.FileType.File or any(
            p.startswith(("_", ".")) for p in relative.split("/")
        ):
            continue
        values = projection.values(relative)
        if values is not None:
            files.append(DataFile(info.path, info.size, values, info.mtime_ns))
    return sorted(files, key=lambda f: f.path)


def hive_layout(root: str, files: list[DataFile], keys: list[str]) -> bool:
    """Whether every file is under ``root`` in the key=value directories of its partition
    (what DuckDB's hive_partitioning reads the values from)."""
    prefix = root.rstrip("/") + "/"
    for file in files:
        if not file.path.startswith(prefix):
            return False
        named = partition_values(
            file.path[len(prefix) :].split("/")[: len(keys)], keys, exact=False
        )
        values = (
            None if named is None else [None if v == HIVE_DEFAULT_PARTITION else v for v in named]
        )
        if values != list(file.partition):
            return False
    return True
