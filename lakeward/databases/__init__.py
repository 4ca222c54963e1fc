"""Managed database instances, the RDS analogue: ``lakeward db create|describe|modify|...``.

``Instances(settings)`` is the service; engines (``postgres``, and ``mysql`` /
``mariadb``, both served by MariaDB's server) plug in behind ``Engine`` and are
loaded by ``load_engine``. See docs/databases.md.
"""

from __future__ import annotations

from lakeward.databases.base import ENGINES, Endpoint, Engine, MasterCredentials, load_engine
from lakeward.databases.classes import CLASSES, DEFAULT_CLASS, InstanceClass
from lakeward.databases.instances import Instances
from lakeward.databases.maintenance import Window, parse_window
from lakeward.databases.registry import STATUSES, InstanceInfo

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
