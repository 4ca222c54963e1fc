"""What the DDL statements share: the catalog they change, permissions, places.

Permissions are Glue's, as Athena checks them for a Hive catalog: an action is allowed
on a table only when it is allowed on the catalog, the database and the table ARNs
(Glue's resource model). Every check is made before anything changes, so a refusal
leaves the metastore and the lake as they were; each decision is audited by the
authorizer.
"""

from __future__ import annotations

from dataclasses import dataclass

from lakeward.errors import InvalidRequest
from lakeward.metastore.tables import TableInfo
from lakeward.query.catalogs.base import Catalog
from lakeward.query.model import TableRef
from lakeward.query.sql.names import Names
from lakeward.query.statements.base import Command, Context
from lakeward.query.statements.ddl.parsing import Reader, check_name
from lakeward.storage.paths import catalog_uri, lake_place


class CatalogCommand(Command):
    """A statement on one catalog's metastore (``catalog``), DDL unless it only shows."""

    catalog: str

    def catalogs(self) -> set[str]:
        return {self.catalog}

    def metastore(self, context: Context) -> Catalog:
        return context.catalog(self.catalog)


@dataclass
class TableCommand(CatalogCommand):
    """A statement on one table (``ref``) of a catalog."""

    ref: TableRef

    def __post_init__(self) -> None:
        self.catalog = self.ref.catalog


def table_ref(reader: Reader, names: Names) -> TableRef:
    ref = names.table(reader.names(3, "a table name"))
    check_name(ref.table, "table")
    return ref


def refuse_view(table: TableInfo, statement: str) -> None:
    if table.table_type == "VIRTUAL_VIEW":
        raise InvalidRequest(
            f"{table.database}.{table.name} is a view: {statement} applies to tables only"
        )


def lake_location(context: Context, location: str) -> str:
    """A LOCATION as the metastore keeps it; refused unless it is in one of the lake's buckets."""
    settings = context.settings
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
    local = context.storage.local_dir
    if local is not None and not (local / place[0]).is_dir():
        raise InvalidRequest(f"LOCATION '{location}': the lake has no bucket {place[0]}")
    # The metastore keeps the place's public name, whichever name the statement used.
    return catalog_uri(settings, location)
