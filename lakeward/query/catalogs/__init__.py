"""Data catalogs: the named catalogs the SQL service reads tables from, and their backends.

``Catalogs`` keeps the registered catalogs (Athena's data catalogs, in the service's
store) and one ``Catalog`` per name, made by ``load_catalog`` from the catalog's type:
``HIVE`` is a Hive Metastore (``hive.py``). ``memory.InMemoryCatalog`` implements the
same interface without a metastore, for the statements' tests.
"""

from __future__ import annotations

import fnmatch
import threading
from collections.abc import Callable

from lakeward.errors import InvalidRequest, ResourceNotFound
from lakeward.metastore.client import parse_uris
from lakeward.query.catalogs.base import Catalog
from lakeward.query.catalogs.hive import HiveCatalog
from lakeward.query.model import DataCatalog
from lakeward.query.sql.names import ACCOUNT_ID, AWS_DATA_CATALOG, DEFAULT_CATALOG
from lakeward.query.store import Store

URIS_PARAMETER = "metastore-uris"
CATALOG_TYPES = ("HIVE",)
__all__ = ["ACCOUNT_ID", "AWS_DATA_CATALOG", "DEFAULT_CATALOG", "Catalogs", "load_catalog"]


def matches(expression: str | None, name: str) -> bool:
    """Athena's table-name filter: ``*`` any characters, ``|`` alternatives."""
    if not expression:
        return True
    return any(fnmatch.fnmatchcase(name, p.strip().lower()) for p in expression.split("|"))


Loader = Callable[[DataCatalog], Catalog]


def load_catalog(catalog: DataCatalog, check_interval: float = 0.0) -> Catalog:
    """The backend of a registered catalog, by its type."""
    if catalog.type == "HIVE":
        uris = [u.strip() for u in catalog.parameters[URIS_PARAMETER].split(",")]
        return HiveCatalog(uris, check_interval=check_interval)
    raise InvalidRequest(f"catalog type {catalog.type} is not supported here (supported: HIVE)")


class Catalogs:
    """The registered catalogs and their backends (``loader`` makes one per name)."""

    def __init__(self, store: Store, loader: Loader = load_catalog) -> None:
        self.store = store
        self.loader = loader
        self._backends: dict[str, Catalog] = {}
        self._lock = threading.Lock()

    def all(self) -> list[DataCatalog]:
        return self.store.catalogs()

    def names(self) -> list[str]:
        return [c.name for c in self.all()]

    def canonical(self, name: str) -> str:
        """The registered name ``name`` stands for: catalog names are matched without regard
        to case, as Athena matches them, and ``awsdatacatalog`` is the default catalog."""
        lowered = name.lower()
        if lowered == AWS_DATA_CATALOG:
            names = self.names()
            if lowered not in names and DEFAULT_CATALOG in names:
                return DEFAULT_CATALOG
        return lowered

    def get(self, name: str) -> DataCatalog:
        name = self.canonical(name)
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
        self._drop_backend(catalog.name)

    def delete(self, name: str) -> None:
        if not self.store.delete_catalog(name):
            raise ResourceNotFound(f"data catalog {name} does not exist")
        self._drop_backend(name)

    def catalog(self, name: str) -> Catalog:
        """The backend of the registered catalog ``name``."""
        name = self.canonical(name)
        with self._lock:
            backend = self._backends.get(name)
        if backend is not None:
            return backend
        backend = self.loader(self.get(name))
        with self._lock:
            return self._backends.setdefault(name, backend)

    def _drop_backend(self, name: str) -> None:
        with self._lock:
            backend = self._backends.pop(name, None)
        if backend is not None:
            backend.close()
