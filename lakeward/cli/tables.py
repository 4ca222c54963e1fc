"""``lakeward table``: a table's definitions over time (Glue's table versions)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from lakeward.cli._common import DataDir, access_for, out, settings_for

table_app = typer.Typer(help="Tables: their earlier definitions.", no_args_is_help=True)

Name = Annotated[str, typer.Argument(help="The table, as database.table")]
Catalog = Annotated[str | None, typer.Option(help="The catalog (default: the stack's)")]


def _glue(data_dir: DataDir):  # type: ignore[no-untyped-def]
    from lakeward.glue import GlueService
    from lakeward.glue.versions import TableVersions
    from lakeward.query.catalogs import DEFAULT_CATALOG
    from lakeward.query.service import QueryService

    access = access_for(data_dir)
    service = QueryService(settings_for(data_dir), access=access)
    return service, GlueService(
        service.catalogs, access, DEFAULT_CATALOG, TableVersions(service.store.engine)
    )


def _request(name: str, catalog: str | None) -> dict[str, str]:
    database, dot, table = name.partition(".")
    if not dot or not database or not table:
        raise typer.BadParameter(f"{name!r}: name the table as database.table")
    return {"DatabaseName": database, "TableName": table} | (
        {"CatalogId": catalog} if catalog else {}
    )


@table_app.command("versions")
def versions(name: Name, catalog: Catalog = None, data_dir: DataDir = None) -> None:
    """A table's versions, newest (the current definition) first (glue:GetTableVersions)."""
    service, glue = _glue(data_dir)
    try:
        found = glue.get_table_versions(_request(name, catalog) | {"MaxResults": 100})
    finally:
        service.close()
    listing = Table("version", "updated", "columns", "location")
    for item in found["TableVersions"]:
        table = item["Table"]
        storage = table.get("StorageDescriptor", {})
        columns = ", ".join(c["Name"] for c in storage.get("Columns", []))
        listing.add_row(
            item["VersionId"],
            str(table.get("UpdateTime", "")),
            columns,
            storage.get("Location", ""),
        )
    out.print(listing)


@table_app.command("restore")
def restore(
    name: Name,
    version: Annotated[str, typer.Option(help="The version to put back (see: table versions)")],
    catalog: Catalog = None,
    data_dir: DataDir = None,
) -> None:
    """Put an earlier definition of a table back; the one it replaces becomes a version."""
    service, glue = _glue(data_dir)
    try:
        glue.restore_version(_request(name, catalog) | {"VersionId": version})
    finally:
        service.close()
    out.print(f"{name}: version {version} is its definition again")
