"""Instance classes: named resource budgets, written into the server's configuration.

A class stands for an amount of memory and a number of connections, the way an
RDS class stands for a machine size. Each engine turns it into its own settings
(``PostgresEngine.class_settings``, ``MariadbEngine.class_settings``); the table
in docs/databases.md lists them.
"""

from __future__ import annotations

from dataclasses import dataclass

from lakeward.errors import InvalidRequest

DEFAULT_CLASS = "db.small"


@dataclass(frozen=True)
class InstanceClass:
    name: str
    memory_mb: int  # the memory the class stands for; caches are sized from it
    buffer_mb: int  # shared_buffers / innodb_buffer_pool_size
    max_connections: int
    work_mem_mb: int  # per sort or hash: work_mem / sort_buffer_size, tmp_table_size

    @property
    def summary(self) -> str:
        return (
            f"{self.memory_mb} MiB memory, {self.buffer_mb} MiB buffers, "
            f"{self.max_connections} connections"
        )


CLASSES: dict[str, InstanceClass] = {
    c.name: c
    for c in (
        InstanceClass("db.small", memory_mb=512, buffer_mb=128, max_connections=50, work_mem_mb=4),
        InstanceClass(
            "db.medium", memory_mb=1024, buffer_mb=256, max_connections=100, work_mem_mb=8
        ),
        InstanceClass(
            "db.large", memory_mb=2048, buffer_mb=512, max_connections=200, work_mem_mb=16
        ),
    )
}


def instance_class(name: str) -> InstanceClass:
    try:
        return CLASSES[name]
    except KeyError:
        raise InvalidRequest(
            f"unknown instance class {name!r}; use one of {', '.join(CLASSES)}"
        ) from None
