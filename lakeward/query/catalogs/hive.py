"""A HIVE catalog: lakeward's Thrift client of the catalog's metastore nodes.

The client fails over across the catalog's metastore URIs and keeps its metadata cache
on: table definitions change rarely and are read on every query, so they are kept until
the metastore's change log names them (asked once per lookup, one cheap call; see
``lakeward.metastore.client``). A table re-pointed by any client of the metastore
(Spark's ETL, another process) is read anew by the next query.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pyiceberg.catalog.hive import HiveCatalog as IcebergCatalog

from lakeward.config import Settings
from lakeward.iceberg.catalog import iceberg_catalog
from lakeward.metastore.client import MetastoreClient
from lakeward.metastore.tables import DatabaseInfo, PartitionInfo, TableInfo
from lakeward.query.catalogs.base import Catalog


class HiveCatalog(Catalog):
    def __init__(self, uris: list[str], check_interval: float = 0.0) -> None:
        self.uris = uris
        self.client = MetastoreClient(uris, timeout=5.0, cache=True, check_interval=check_interval)

    def iceberg(self, settings: Settings) -> IcebergCatalog:
        return iceberg_catalog(settings, self.uris)

    def databases(self) -> list[str]:
        return self.client.databases()

    def database(self, name: str) -> DatabaseInfo:
        return self.client.database(name)

    def tables(self, database: str) -> list[str]:
        with self.client.lookup():
            self.require_database(database)
            return self.client.tables(database)

    def views(self, database: str) -> list[str]:
        return self.client.views(database)

    def load_table(self, database: str, name: str) -> TableInfo:
        return self.client.table(database, name)

    def partitions(self, database: str, name: str) -> list[PartitionInfo]:
        return self.client.partitions(database, name)

    def partition_names(self, database: str, name: str) -> list[str]:
        return self.client.partition_names(database, name)

    def create_database(
        self,
        name: str,
        location: str,
        description: str = "",
        parameters: dict[str, str] | None = None,
    ) -> bool:
        return self.client.create_database(name, location, description, parameters)

    def drop_database(self, name: str, cascade: bool = False) -> None:
        self.client.drop_database(name, cascade)

    def create_table(self, table: TableInfo) -> bool:
        return self.client.create_table(table)

    def alter_table(self, table: TableInfo) -> None:
        self.client.alter_table(table)

    def put_view(self, view: TableInfo, *, replace: bool) -> None:
        self.client.put_view(view, replace=replace)

    def drop_table(self, database: str, name: str) -> None:
        self.client.drop_table(database, name)

    def rename_table(self, database: str, name: str, new_database: str, new_name: str) -> None:
        self.client.rename_table(database, name, new_database, new_name)

    def add_partitions(self, database: str, name: str, partitions: list[PartitionInfo]) -> None:
        self.client.add_partitions(database, name, partitions)

    def move_partition(self, database: str, name: str, partition: PartitionInfo) -> None:
        self.client.move_partition(database, name, partition)

    def drop_partitions(self, database: str, name: str, names: list[str]) -> None:
        self.client.drop_partitions(database, name, names)

    def invalidate(self, database: str | None = None, table: str | None = None) -> None:
        self.client.invalidate(database, table)

    @contextmanager
    def lookup(self) -> Iterator[None]:
        with self.client.lookup():
            yield

    def close(self) -> None:
        self.client.close()
