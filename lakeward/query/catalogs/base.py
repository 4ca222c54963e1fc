"""What a catalog is to the SQL service: the databases, tables, views and partitions of one
metastore, read and changed.

``Catalog`` is the interface every backend implements (``hive.HiveCatalog`` over a Hive
Metastore's Thrift API, ``memory.InMemoryCatalog`` for statement logic without Java), in
the manner of pyiceberg's catalogs. The lookups every statement shares are here, once,
with one error each: ``require_database``, ``table`` and ``find_table``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from lakeward.errors import InvalidRequest, ResourceNotFound, TableNotFound
from lakeward.metastore.tables import DatabaseInfo, PartitionInfo, TableInfo

if TYPE_CHECKING:
    from pyiceberg.catalog.hive import HiveCatalog as IcebergCatalog

    from lakeward.config import Settings


class Catalog(ABC):
    """One catalog's metadata. Missing tables raise ``TableNotFound`` from the ``load_*``
    and mutation methods; the lookups below turn that into the user's error."""

    # -- reads ------------------------------------------------------------------------------

    @abstractmethod
    def databases(self) -> list[str]: ...

    @abstractmethod
    def database(self, name: str) -> DatabaseInfo: ...

    @abstractmethod
    def tables(self, database: str) -> list[str]:
        """The names of a database's tables and views."""

    @abstractmethod
    def views(self, database: str) -> list[str]: ...

    @abstractmethod
    def load_table(self, database: str, name: str) -> TableInfo:
        """The table or view; ``TableNotFound`` if there is none."""

    @abstractmethod
    def partitions(self, database: str, name: str) -> list[PartitionInfo]:
        """Every partition of a table, with its location."""

    @abstractmethod
    def partition_names(self, database: str, name: str) -> list[str]:
        """The names of a table's partitions (``k=v/k2=v2``, escaped as Hive does)."""

    # -- changes ----------------------------------------------------------------------------

    @abstractmethod
    def create_database(
        self,
        name: str,
        location: str,
        description: str = "",
        parameters: dict[str, str] | None = None,
    ) -> bool:
        """Create a database unless it exists; False if it did."""

    @abstractmethod
    def drop_database(self, name: str, cascade: bool = False) -> None: ...

    @abstractmethod
    def create_table(self, table: TableInfo) -> bool:
        """Create a table; False (and nothing changed) if one of that name exists."""

    @abstractmethod
    def alter_table(self, table: TableInfo) -> None:
        """Change a table's location, columns, parameters and SerDe parameters."""

    @abstractmethod
    def put_view(self, view: TableInfo, *, replace: bool) -> None:
        """Create a view, or with ``replace`` change the view of that name; fails (changing
        nothing) if a table, or without ``replace`` a view, holds the name."""

    @abstractmethod
    def drop_table(self, database: str, name: str) -> None: ...

    @abstractmethod
    def rename_table(self, database: str, name: str, new_database: str, new_name: str) -> None:
        """Rename a table (its data stays where it is); fails if the new name is taken."""

    @abstractmethod
    def add_partitions(self, database: str, name: str, partitions: list[PartitionInfo]) -> None:
        """Register partitions of a table: all or none."""

    @abstractmethod
    def move_partition(self, database: str, name: str, partition: PartitionInfo) -> None: ...

    @abstractmethod
    def drop_partitions(self, database: str, name: str, names: list[str]) -> None: ...

    def invalidate(self, database: str | None = None, table: str | None = None) -> None:  # noqa: B027
        """Forget cached metadata: all of it, a database's, or one table's."""

    @contextmanager
    def lookup(self) -> Iterator[None]:
        """Reads inside see the catalog as of one moment (a cache asks for changes once)."""
        yield

    def close(self) -> None:  # noqa: B027 - a catalog holding nothing has nothing to close
        pass

    def iceberg(self, settings: Settings) -> IcebergCatalog:
        """pyiceberg's catalog of the same metastore, which Iceberg tables commit through."""
        raise InvalidRequest("Iceberg tables are kept in a HIVE catalog's metastore")

    # -- the lookups statements share ------------------------------------------------------

    def require_database(self, database: str) -> None:
        with self.lookup():
            if database not in self.databases():
                raise ResourceNotFound(f"Database {database} does not exist")

    def table(self, database: str, name: str) -> TableInfo:
        """The table or view, or the error a missing one (or its database) gives."""
        found = self.find_table(database, name)
        if found is None:
            raise ResourceNotFound(f"Table {database}.{name} does not exist")
        return found

    def find_table(self, database: str, name: str) -> TableInfo | None:
        """The table or view; None if there is none (its database must exist)."""
        with self.lookup():
            self.require_database(database)
            try:
                return self.load_table(database, name)
            except TableNotFound:
                return None

    def table_exists(self, database: str, name: str) -> bool:
        try:
            self.load_table(database, name)
        except TableNotFound:
            return False
        return True
