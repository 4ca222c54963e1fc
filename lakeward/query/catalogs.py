"""Data catalogs: named Hive Metastores the SQL service reads tables from.

A HIVE catalog's connector is lakeward's Thrift client (failover across the
catalog's metastore URIs) with its metadata cache on: table definitions change
rarely and are read on every query, so they are kept until the metastore's
change log names them (asked once per lookup, one cheap call; see
``lakeward.metastore.client``). A table re-pointed by any client of the
metastore (Spark's ETL, another process) is read anew by the next query.
"""

from __future__ import annotations

import fnmatch
import threading

from lakeward.errors import InvalidRequest, ResourceNotFound, TableNotFound
from lakeward.metastore.client import MetastoreClient, PartitionInfo, TableInfo, parse_uris
from lakeward.query.model import DataCatalog
from lakeward.query.store import Store

URIS_PARAMETER = "metastore-uris"
CATALOG_TYPES = ("HIVE",)


class HiveConnector:
    """Metadata of one catalog, from its metastore, cached per table version."""

    def __init__(self, uris: list[str], check_interval: float = 0.0) -> None:
        self.client = MetastoreClient(uris, timeout=5.0, cache=True, check_interval=check_interval)

    def invalidate(self, database: str | None = None, table: str | None = None) -> None:
        """Forget cached metadata: all of it, a database's, or one table's."""
        self.client.invalidate(database, table)

    def databases(self) -> list[str]:
        return self.client.databases()

    def tables(self, database: str) -> list[str]:
        with self.client.lookup():
            self.require_database(database)
            return self.client.tables(database)

    def table(self, database: str, name: str) -> TableInfo:
        with self.client.lookup():
            self.require_database(database)
            try:
                return self.client.table(database, name)
            except TableNotFound:
                raise ResourceNotFound(f"table {database}.{name} does not exist") from None

    def partitions(self, database: str, name: str) -> list[PartitionInfo]:
        """The table's partitions as the metastore registered them, each with its location."""
        with self.client.lookup():
            try:
                return self.client.partitions(database, name)
            except TableNotFound:
                raise ResourceNotFound(f"table {database}.{name} does not exist") from None

    def require_database(self, database: str) -> None:
        if database not in self.databases():
            raise ResourceNotFound(f"database {database} does not exist")

    def close(self) -> None:
        self.client.close()


def matches(expression: str | None, name: str) -> bool:
    """Athena's table-name filter: ``*`` any characters, ``|`` alternatives."""
    if not expression:
        return True
    return any(fnmatch.fnmatchcase(name, p.strip().lower()) for p in expression.split("|"))


class Catalogs:
    """The registered catalogs and their connectors."""

    def __init__(self, store: Store, check_interval: float = 0.0) -> None:
        self.store = store
        self.check_interval = check_interval
        self._connectors: dict[str, HiveConnector] = {}
        self._lock = threading.Lock()

    def all(self) -> list[DataCatalog]:
        return self.store.catalogs()

    def names(self) -> list[str]:
        return [c.name for c in self.all()]

    def get(self, name: str) -> DataCatalog:
        for catalog in self.all():
            if catalog.name == name:
                return catalog
        raise ResourceNotFound(f"data catalog {name} does not exist")

    def create(self, catalog: DataCatalog) -> None:
        if catalog.type not in CATALOG_TYPES:
            raise InvalidRequest(
                f"catalog type {catalog.type} is not supported here (supported: HIVE)"
            )
        if (
            not catalog.name.replace("_", "").replace("-", "").isalnum()
            or catalog.name != catalog.name.lower()
        ):
            raise InvalidRequest(
                f"catalog name {catalog.name!r}: use lower-case letters, digits, '_' and '-'"
            )
        uris = catalog.parameters.get(URIS_PARAMETER, "")
        try:
            parse_uris(uris)
        except Exception as exc:
            raise InvalidRequest(
                f"catalog {catalog.name}: parameter {URIS_PARAMETER} must list metastore URIs "
                f"like thrift://host:9083 ({exc})"
            ) from None
        if not self.store.put_catalog(catalog):
            raise InvalidRequest(f"data catalog {catalog.name} already exists")

    def ensure(self, catalog: DataCatalog) -> None:
        """Create the catalog, or re-point an existing one of that name (used by the server).

        One statement either way: a query started meanwhile never finds the
        catalog missing.
        """
        current = next((c for c in self.all() if c.name == catalog.name), None)
        if current == catalog:
            return
        if current is None:
            self.create(catalog)
            return
        self.store.replace_catalog(catalog)
        self._drop_connector(catalog.name)

    def delete(self, name: str) -> None:
        if not self.store.delete_catalog(name):
            raise ResourceNotFound(f"data catalog {name} does not exist")
        self._drop_connector(name)

    def connector(self, name: str) -> HiveConnector:
        with self._lock:
            connector = self._connectors.get(name)
        if connector is not None:
            return connector
        catalog = self.get(name)
        uris = [u.strip() for u in catalog.parameters[URIS_PARAMETER].split(",")]
        connector = HiveConnector(uris, check_interval=self.check_interval)
        with self._lock:
            return self._connectors.setdefault(name, connector)

    def _drop_connector(self, name: str) -> None:
        with self._lock:
            connector = self._connectors.pop(name, None)
        if connector is not None:
            connector.close()
