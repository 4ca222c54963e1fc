"""The embedded lake's places are kept in the metastore by their ``s3://`` names.

A stack made before lakeward named its lake by ``s3://`` kept ``file://`` locations
(``file:/<data dir>/lake/<bucket>/<key>``). ``up`` renames them: every table and partition
location in the lake is given its public name (``paths.catalog_uri``). Only the names
change, in the metastore alone: the files stay where they are, and a location still spelt
``file:`` (by an older client) reads as before.

A database keeps its location: Hive 2.3's metastore changes a database's parameters and
owner, never its location. It only matters to a managed table made in it without a
LOCATION (by Spark), which then lies under the old name and is read as before.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from lakeward.config import Settings
from lakeward.errors import TableNotFound
from lakeward.metastore.client import MetastoreClient
from lakeward.metastore.tables import VIRTUAL_VIEW, PartitionInfo
from lakeward.storage.paths import catalog_uri


@dataclass
class Renamed:
    tables: int = 0
    partitions: int = 0

    def __bool__(self) -> bool:
        return bool(self.tables or self.partitions)


def rename_lake_locations(settings: Settings, client: MetastoreClient) -> Renamed:
    """Give every location in the lake its ``s3://`` name; what was renamed."""
    renamed = Renamed()

    def public(location: str) -> str | None:
        """The new name of a location that needs one."""
        if not location.startswith("file:"):
            return None
        name = catalog_uri(settings, location)
        return None if name == location else name

    for database in client.databases():
        for name in client.tables(database):
            try:
                table = client.table(database, name)
            except TableNotFound:  # dropped meanwhile
                continue
            if table.table_type == VIRTUAL_VIEW:
                continue
            new = public(table.location)
            if new is not None:
                client.alter_table(replace(table, location=new))
                renamed.tables += 1
            if not table.partition_keys:
                continue
            for partition in client.partitions(database, name):
                new = public(partition.location)
                if new is not None:
                    client.move_partition(database, name, PartitionInfo(partition.values, new))
                    renamed.partitions += 1
    return renamed
