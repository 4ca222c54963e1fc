"""What the catalog statements share: the metastore they change, permissions, places, results.

Permissions are Glue's, as Athena checks them for a Hive catalog: an action is allowed
on a table only when it is allowed on the catalog, the database and the table ARNs
(Glue's resource model). Every check is made before anything changes, so a refusal
leaves the metastore and the lake as they were; each decision is audited by the
authorizer.
"""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa

from lakeward.access.arns import glue_catalog_arn, glue_database_arn, glue_table_arn
from lakeward.errors import InvalidRequest, ResourceNotFound, TableNotFound
from lakeward.metastore.client import MetastoreClient, TableInfo
from lakeward.query.engines.base import EngineResult
from lakeward.query.model import ColumnInfo, TableRef
from lakeward.query.statements import Command, Context
from lakeward.storage.paths import hadoop_uri, lake_place


class CatalogCommand(Command):
    """A statement on one catalog's metastore (``catalog``), DDL unless it only shows."""

    catalog: str

    def catalogs(self) -> set[str]:
        return {self.catalog}

    def metastore(self, context: Context) -> MetastoreClient:
        return context.service.catalogs.connector(self.catalog).client


def authorize_database(context: Context, action: str, catalog: str, database: str) -> None:
    context.authorize(action, glue_catalog_arn(catalog))
    context.authorize(action, glue_database_arn(catalog, database))


def authorize_table(context: Context, actions: Iterable[str], ref: TableRef) -> None:
    """Each action on the catalog, the database and the table, as Glue checks them."""
    for action in actions:
        authorize_database(context, action, ref.catalog, ref.database)
        context.authorize(action, glue_table_arn(ref.catalog, ref.database, ref.table))


def require_database(client: MetastoreClient, database: str) -> None:
    if database not in client.databases():
        raise ResourceNotFound(f"Database {database} does not exist")


def existing_table(client: MetastoreClient, ref: TableRef) -> TableInfo:
    """The table, or Athena's error for a missing one."""
    require_database(client, ref.database)
    try:
        return client.table(ref.database, ref.table)
    except TableNotFound:
        raise ResourceNotFound(f"Table {ref.database}.{ref.table} does not exist") from None


def refuse_view(table: TableInfo, statement: str) -> None:
    if table.table_type == "VIRTUAL_VIEW":
        raise InvalidRequest(
            f"{table.database}.{table.name} is a view: {statement} applies to tables only"
        )


def lake_location(context: Context, location: str) -> str:
    """A LOCATION as the metastore keeps it; refused unless it is in one of the lake's buckets."""
    settings = context.service.settings
    # Athena's rule: a LOCATION names a folder, never a pattern nor an empty folder name.
    path = location.split("://", 1)[-1]
    if any(c in location for c in "*?[]{}") or "//" in path:
        raise InvalidRequest(
            f"LOCATION '{location}' must name a folder: no wildcards and no empty folder ('//')"
        )
    place = lake_place(settings, location)
    if place is None or not place[0]:
        raise InvalidRequest(
            f"LOCATION '{location}' is not in the lake: use a place under {settings.lake_root}/"
        )
    # The metastore makes a missing directory: on a file:// lake that would be a new
    # bucket, so a bucket must exist already (an S3 lake's buckets are S3's to check).
    local = context.service.storage.local_dir
    if local is not None and not (local / place[0]).is_dir():
        raise InvalidRequest(f"LOCATION '{location}': the lake has no bucket {place[0]}")
    return hadoop_uri(location)


def no_rows() -> EngineResult:
    """What Athena returns for DDL: a result with no columns and no rows."""
    return EngineResult([], iter(()))


def lines(name: str, values: list[str]) -> EngineResult:
    """A one-column varchar result, one row per value (SHOW PARTITIONS, SHOW CREATE TABLE)."""
    table = pa.table({name: pa.array(values, pa.string())})
    return EngineResult([ColumnInfo(name=name, type="varchar")], iter(table.to_batches()))
