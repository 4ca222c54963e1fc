"""A catalog held in memory: the same behaviour as a Hive catalog, for statement logic run
without Java (tests) and for a catalog nothing else needs to see."""

from __future__ import annotations

import threading
from dataclasses import replace

from lakeward.errors import MetastoreError, TableNotFound
from lakeward.metastore.tables import (
    VIRTUAL_VIEW,
    DatabaseInfo,
    PartitionInfo,
    TableInfo,
    partition_name,
)
from lakeward.query.catalogs.base import Catalog


class InMemoryCatalog(Catalog):
    def __init__(self) -> None:
        self._databases: dict[str, DatabaseInfo] = {}
        self._tables: dict[tuple[str, str], TableInfo] = {}
        self._partitions: dict[tuple[str, str], dict[tuple[str, ...], PartitionInfo]] = {}
        self._lock = threading.RLock()

    def databases(self) -> list[str]:
        with self._lock:
            return sorted(self._databases)

    def database(self, name: str) -> DatabaseInfo:
        with self._lock:
            if name not in self._databases:
                raise TableNotFound(f"database {name} does not exist in the metastore")
            return self._databases[name]

    def tables(self, database: str) -> list[str]:
        self.require_database(database)
        with self._lock:
            return sorted(t for d, t in self._tables if d == database)

    def views(self, database: str) -> list[str]:
        with self._lock:
            return sorted(
                t for (d, t), info in self._tables.items()
                if d == database and info.table_type == VIRTUAL_VIEW
            )  # fmt: skip

    def load_table(self, database: str, name: str) -> TableInfo:
        with self._lock:
            found = self._tables.get((database, name))
        if found is None:
            raise TableNotFound(f"{database}.{name} does not exist in the metastore")
        return found

    def partitions(self, database: str, name: str) -> list[PartitionInfo]:
        self.load_table(database, name)
        with self._lock:
            return list(self._partitions.get((database, name), {}).values())

    def partition_names(self, database: str, name: str) -> list[str]:
        keys = [k.name for k in self.load_table(database, name).partition_keys]
        return [partition_name(keys, p.values) for p in self.partitions(database, name)]

    def create_database(
        self,
        name: str,
        location: str,
        description: str = "",
        parameters: dict[str, str] | None = None,
    ) -> bool:
        with self._lock:
            if name in self._databases:
                return False
            self._databases[name] = DatabaseInfo(name, location, description, parameters or {})
            return True

    def drop_database(self, name: str, cascade: bool = False) -> None:
        with self._lock:
            self.database(name)
            held = [key for key in self._tables if key[0] == name]
            if held and not cascade:
                raise MetastoreError(
                    f"drop_database of {name} failed: Database {name} is not empty"
                )
            for key in held:
                del self._tables[key]
                self._partitions.pop(key, None)
            del self._databases[name]

    def create_table(self, table: TableInfo) -> bool:
        with self._lock:
            self.database(table.database)
            key = (table.database, table.name)
            if key in self._tables:
                return False
            self._tables[key] = table
            return True

    def alter_table(self, table: TableInfo) -> None:
        with self._lock:
            stored = self.load_table(table.database, table.name)
            self._tables[(table.database, table.name)] = replace(
                stored,
                location=table.location,
                columns=list(table.columns),
                parameters=dict(table.parameters),
                serde_parameters=dict(table.serde_parameters),
            )

    def put_view(self, view: TableInfo, *, replace: bool) -> None:
        with self._lock:
            self.database(view.database)
            key = (view.database, view.name)
            existing = self._tables.get(key)
            if existing is not None and existing.table_type != VIRTUAL_VIEW:
                raise MetastoreError(f"a table named {view.database}.{view.name} exists already")
            if existing is not None and not replace:
                raise MetastoreError(f"view {view.database}.{view.name} exists already")
            self._tables[key] = view

    def drop_table(self, database: str, name: str) -> None:
        with self._lock:
            self.load_table(database, name)
            del self._tables[(database, name)]
            self._partitions.pop((database, name), None)

    def rename_table(self, database: str, name: str, new_database: str, new_name: str) -> None:
        with self._lock:
            table = self.load_table(database, name)
            if (new_database, new_name) in self._tables:
                raise MetastoreError(f"a table named {new_database}.{new_name} exists already")
            del self._tables[(database, name)]
            self._tables[(new_database, new_name)] = replace(
                table, database=new_database, name=new_name
            )
            if (database, name) in self._partitions:
                self._partitions[(new_database, new_name)] = self._partitions.pop((database, name))

    def add_partitions(self, database: str, name: str, partitions: list[PartitionInfo]) -> None:
        with self._lock:
            self.load_table(database, name)
            held = self._partitions.setdefault((database, name), {})
            clash = [p for p in partitions if tuple(p.values) in held]
            if clash:
                raise MetastoreError(
                    f"add_partitions of {database}.{name} failed: partition "
                    f"{'/'.join(clash[0].values)} exists already"
                )
            for partition in partitions:
                held[tuple(partition.values)] = partition

    def move_partition(self, database: str, name: str, partition: PartitionInfo) -> None:
        with self._lock:
            held = self._partitions.get((database, name), {})
            if tuple(partition.values) not in held:
                raise TableNotFound(f"{database}.{name} has no such partition")
            held[tuple(partition.values)] = partition

    def drop_partitions(self, database: str, name: str, names: list[str]) -> None:
        with self._lock:
            keys = [k.name for k in self.load_table(database, name).partition_keys]
            held = self._partitions.get((database, name), {})
            by_name = {partition_name(keys, p.values): v for v, p in held.items()}
            missing = [n for n in names if n not in by_name]
            if missing:
                raise TableNotFound(f"{database}.{name} has no partition {missing[0]}")
            for dropped in names:
                del held[by_name[dropped]]
