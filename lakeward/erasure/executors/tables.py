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

from lakeward.erasure.executors.base import (
    DELTA,
    HUDI,
    ICEBERG,
    Executor,
    Outcome,
    Target,
    sql_string,
)
from lakeward.errors import InputError, NeedsOwnDelete, StorageError
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
    """Iceberg tables of a SQL catalog: ``Target.connection`` is the catalog's database URL."""

    layer = ICEBERG

    def _table(self, target: Target) -> Any:
        from pyiceberg.catalog.sql import SqlCatalog

        if not target.connection:
            raise InputError(f"{target.uri}: the Iceberg table has no catalog URL")
        catalog = SqlCatalog("lakeward", uri=target.connection)
        return catalog.load_table(target.uri)

    def _filter(self, target: Target, user_ids: Sequence[str]) -> Any:
        from pyiceberg.expressions import In

        values: Any = set(user_ids)  # pyiceberg's stubs want Literal objects; strings work
        return In(term=target.id_columns[0], values=values)  # type: ignore[arg-type]

    def count(self, target: Target, user_ids: Sequence[str]) -> int:
        table = self._table(target)
        scan = table.scan(
            row_filter=self._filter(target, user_ids), selected_fields=(target.id_columns[0],)
        )
        return int(scan.to_arrow().num_rows)

    def purge(self, target: Target, user_ids: Sequence[str]) -> Outcome:
        table = self._table(target)
        removed = self.count(target, user_ids)
        if removed:
            table.delete(delete_filter=self._filter(target, user_ids))
            table = self._table(target)
        current = table.current_snapshot()
        kept = {current.snapshot_id} if current else set()
        retained: list[dict[str, str]] = []
        for name, ref in table.refs().items():
            if ref.snapshot_id not in kept:
                # Tags and branches pin their snapshots; expiring them is the owner's call.
                retained.append(
                    {
                        "copy": f"{target.uri}@{name}",
                        "kind": "snapshot reference",
                        "state": "retained",
                    }
                )
                kept.add(ref.snapshot_id)
        old = [s.snapshot_id for s in table.snapshots() if s.snapshot_id not in kept]
        if old:
            table.maintenance.expire_snapshots().by_ids(old).commit()
            table = self._table(target)
        retained.extend(_gone(self._remove_orphans(table)))
        return Outcome(
            target.uri,
            self.layer,
            "rows-deleted" if removed else "unchanged",
            removed=removed,
            retained=retained,
            note=f"{len(old)} snapshots expired",
        )

    def _remove_orphans(self, table: Any) -> list[str]:
        """Delete data and manifest files no remaining snapshot references; return them."""
        root = local_path(table.location())
        referenced = {
            str(local_path(p)) for p in table.inspect.all_files().column("file_path").to_pylist()
        }
        referenced |= {
            str(local_path(p)) for p in table.inspect.all_manifests().column("path").to_pylist()
        }
        referenced |= {str(local_path(s.manifest_list)) for s in table.snapshots()}
        removed = []
        for path in sorted(root.rglob("*")):
            if not path.is_file() or path.suffix not in (".parquet", ".avro"):
                continue
            if str(path) not in referenced:
                try:
                    path.unlink()
                except OSError as exc:
                    raise StorageError(f"could not remove {path}: {exc.strerror}") from None
                removed.append(path.as_uri())
        return removed


class HudiExecutor(Executor):
    layer = HUDI

    def purge(self, target: Target, user_ids: Sequence[str]) -> Outcome:
        raise NeedsOwnDelete(
            f"{target.uri} is a Hudi table: delete with Hudi's own DELETE and run its cleaner "
            "(lakeward never rewrites files under a table format's log)"
        )

    def count(self, target: Target, user_ids: Sequence[str]) -> int:
        raise NeedsOwnDelete(f"{target.uri} is a Hudi table: lakeward cannot read it")
