"""Managed database instances, the RDS analogue: ``lakeward db create|describe|modify|...``.

``Instances(settings, secrets)`` is the service; engines (``postgres``, and ``mysql`` /
``mariadb``, both served by MariaDB's server) plug in behind ``Engine`` and are
loaded by ``load_engine``. See docs/databases.md.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lakeward.databases.base import ENGINES, Endpoint, Engine, MasterCredentials, load_engine
    from lakeward.databases.classes import CLASSES, DEFAULT_CLASS, InstanceClass
    from lakeward.databases.instances import Instances
    from lakeward.databases.maintenance import Window, parse_window
    from lakeward.databases.registry import STATUSES, InstanceInfo

# Name -> module, imported on first use: ``lakeward --help`` needs the engine and
# class names, not the service behind them.
_HOMES = {
    **dict.fromkeys(["ENGINES", "Endpoint", "Engine", "MasterCredentials", "load_engine"], "base"),
    **dict.fromkeys(["CLASSES", "DEFAULT_CLASS", "InstanceClass"], "classes"),
    "Instances": "instances",
    **dict.fromkeys(["Window", "parse_window"], "maintenance"),
    **dict.fromkeys(["STATUSES", "InstanceInfo"], "registry"),
}

__all__ = [
    "CLASSES",
    "DEFAULT_CLASS",
    "ENGINES",
    "STATUSES",
    "Endpoint",
    "Engine",
    "InstanceClass",
    "InstanceInfo",
    "Instances",
    "MasterCredentials",
    "Window",
    "load_engine",
    "parse_window",
]


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(import_module(f"lakeward.databases.{_HOMES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
