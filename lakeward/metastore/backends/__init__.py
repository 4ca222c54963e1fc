"""Relational databases behind the Hive Metastore, one module per backend."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

from lakeward.metastore.backends.base import MetastoreBackend

if TYPE_CHECKING:
    from lakeward.config import Settings

__all__ = ["MetastoreBackend", "load_backend"]

# backend name -> module:class; imported lazily so that a backend's driver is
# only needed when that backend is used.
BACKENDS = {
    "derby": "lakeward.metastore.backends.derby:DerbyBackend",
    "postgres": "lakeward.metastore.backends.postgres:PostgresBackend",
    "mysql": "lakeward.metastore.backends.mysql:MysqlBackend",
    "mariadb": "lakeward.metastore.backends.mysql:MariadbBackend",
}


def load_backend(settings: Settings) -> MetastoreBackend:
    module_name, _, class_name = BACKENDS[settings.metastore.backend].partition(":")
    backend_class: type[MetastoreBackend] = getattr(import_module(module_name), class_name)
    return backend_class(settings)
