"""Open table formats: deletes through the format itself, never behind its back.

Rewriting a Parquet file under a Delta or Iceberg log corrupts the table, so
these executors use each format's own delete, then make the superseded files
physically gone: Delta's vacuum with zero retention, Iceberg's snapshot expiry
plus removal of the files no remaining snapshot references. Each outcome lists
the superseded files and whether they are gone. Formats lakeward cannot delete
from (Hudi) are reported as needing their own delete.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lakeward.config import Settings
from lakeward.erasure.executors.base import (
    DELTA,
    HUDI,
    ICEBERG,
    Executor,
    Outcome,
    Target,
    sql_string,
)
from lakeward.errors import InputError, NeedsOwnDelete
from lakeward.storage import Storage
from lakeward.storage import paths as storage_paths


def local_path(uri: str) -> Path:
    """The directory of a table at a ``file://`` URI (or a plain path)."""
    path = storage_paths.local_path(uri)
    if path is None:
        raise InputError(f"{uri}: only file:// table locations are supported for table formats")
    return path


def _gone(paths: Sequence[str]) -> list[dict[str, str]]:
    return [
        {"copy": p, "kind": "superseded file", "state": "retained" if _exists(p) else "removed"}
        for p in paths
    ]


def _exists(path: str) -> bool:
    return local_path(path).exists()


class DeltaExecutor(Executor):
    layer = DELTA

    def _table(self, target: Target) -> Any:
        from deltalake import DeltaTable

        return DeltaTable(str(local_path(target.uri)))

    def _predicate(self, target: Target, user_ids: Sequence[str]) -> str:
        column = '"' + target.id_columns[0].replace('"', '""') + '"'
        return f"{column} IN ({', '.join(sql_string(u) for u in user_ids)})"

    def purge(self, target: Target, user_ids: Sequence[str]) -> Outcome:
        table = self._table(target)
        before_version = table.version()
        before_files = set(table.file_uris())
        metrics = table.delete(self._predicate(target, user_ids))
        removed = int(metrics.get("num_deleted_rows", 0) or 0)
        table = self._table(target)
        superseded = sorted(before_files - set(table.file_uris()))
        # Retention zero: the files the delete superseded go now, not in 7 days.
        table.vacuum(retention_hours=0, dry_run=False, enforce_retention_duration=False)
        retained = _gone(superseded)
        retained.append(
            {
                "copy": f"{target.uri}/_delta_log",
                "kind": "transaction log (file statistics of superseded files)",
                "state": "retained",
            }
        )
        return Outcome(
            target.uri,
            self.layer,
            "rows-deleted" if removed else "unchanged",
            removed=removed,
            retained=retained,
            note=f"version {before_version} -> {table.version()}",
        )

    def count(self, target: Target, user_ids: Sequence[str]) -> int:
        import pyarrow.compute as pc

        data = self._table(target).to_pyarrow_table(columns=[target.id_columns[0]])
        column = pc.cast(data.column(target.id_columns[0]), "string")
        return int(pc.sum(pc.is_in(column, value_set=_strings(user_ids))).as_py() or 0)


def _strings(values: Sequence[str]) -> Any:
    import pyarrow as pa

    return pa.array(list(values), pa.string())


class IcebergExecutor(Executor):
    """Iceberg tables: ``Target.uri`` is the table's ``namespace.table`` and
    ``Target.connection`` its catalog, the thrift:// URIs of the stack's metastore (where
    the SQL service and Spark see the table) or a SQL catalog's database URL. The rows go
    by a copy-on-write delete, then exactly the files that held them (see
    ``lakeward.iceberg.erasure``)."""

    layer = ICEBERG

    def __init__(self, storage: Storage, settings: Settings | None = None) -> None:
        super().__init__(storage)
        self.settings = settings

    def _catalog(self, target: Target) -> Any:
        if not target.connection:
            raise InputError(f"{target.uri}: the Iceberg table has no catalog")
        if target.connection.startswith("thrift://"):
            from lakeward.iceberg.catalog import iceberg_catalog

            if self.settings is None:
                raise InputError(f"{target.uri}: a metastore catalog needs the stack's settings")
            return iceberg_catalog(self.settings, target.connection.split(","))
        from pyiceberg.catalog.sql import SqlCatalog

        return SqlCatalog("lakeward", uri=target.connection)

    def _identifier(self, target: Target) -> tuple[str, str]:
        namespace, _, name = target.uri.rpartition(".")
        if not namespace or not name:
            raise InputError(f"{target.uri}: an Iceberg table is named namespace.table")
        return namespace, name

    def _load(self, target: Target) -> tuple[Any, tuple[str, str]]:
        from pyiceberg.exceptions import NoSuchTableError

        catalog, identifier = self._catalog(target), self._identifier(target)
        try:
            catalog.load_table(identifier)
        except NoSuchTableError:
            raise InputError(f"{target.uri}: no such Iceberg table in its catalog") from None
        return catalog, identifier

    def count(self, target: Target, user_ids: Sequence[str]) -> int:
        from lakeward.iceberg import erasure

        catalog, identifier = self._load(target)
        return erasure.count_rows(catalog.load_table(identifier), target.id_columns[0], user_ids)

    def purge(self, target: Target, user_ids: Sequence[str]) -> Outcome:
        from lakeward.iceberg import erasure

        catalog, identifier = self._load(target)
        done = erasure.erase(catalog, identifier, target.id_columns[0], user_ids)
        removed = set(done.removed)
        retained = [
            {"copy": path, "kind": "superseded file",
             "state": "removed" if path in removed else "retained"}
            for path in done.superseded
        ]  # fmt: skip
        retained += [
            {"copy": f"{target.uri}@{name}", "kind": "snapshot reference (a branch or tag "
             "keeps its files; expiring it is the owner's call)", "state": "retained"}
            for name in done.pinned
        ]  # fmt: skip
        if done.superseded:
            retained.append({"copy": f"{target.uri} (current manifests)", "state": "retained",
                             "kind": "manifest entries of the superseded files (their column "
                             "statistics), until the current snapshot is expired"})  # fmt: skip
        metadata = len(removed) - len(removed & set(done.superseded))
        return Outcome(
            target.uri,
            self.layer,
            "rows-deleted" if done.removed_rows else "unchanged",
            removed=done.removed_rows,
            retained=retained,
            note=f"{len(done.expired)} snapshots expired; {len(done.superseded)} superseded "
            f"files and {metadata} manifests or manifest lists removed",
        )


class HudiExecutor(Executor):
    layer = HUDI

    def purge(self, target: Target, user_ids: Sequence[str]) -> Outcome:
        raise NeedsOwnDelete(
            f"{target.uri} is a Hudi table: delete with Hudi's own DELETE and run its cleaner "
            "(lakeward never rewrites files under a table format's log)"
        )

    def count(self, target: Target, user_ids: Sequence[str]) -> int:
        raise NeedsOwnDelete(f"{target.uri} is a Hudi table: lakeward cannot read it")
