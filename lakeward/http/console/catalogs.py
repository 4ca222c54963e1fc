"""Data catalogs: databases, tables and columns, as the SQL service's catalogs show them.

Everything goes through ``QueryService``, which checks the caller's policies:
a catalog one may not use lists no databases and no tables.
"""

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse

from lakeward.access.arns import catalog_arn
from lakeward.access.sessions import Session
from lakeward.http.console.base import PREFIX, Console, NavItem, signed_in
from lakeward.iceberg.catalog import is_iceberg
from lakeward.metastore.tables import TableInfo
from lakeward.query.service import QueryService

NAV = NavItem(
    "catalogs",
    "Data catalogs",
    f"{PREFIX}/catalogs",
    "athena:ListDataCatalogs",
    catalog_arn("*"),
)


def kind_of(table: TableInfo) -> str:
    """What the schema browsers tag a table with: a view, an Iceberg table, or a table."""
    if table.table_type == "VIRTUAL_VIEW":
        return "view"
    return "Iceberg" if is_iceberg(table.parameters) else "table"


def catalogs_router(console: Console, service: QueryService) -> APIRouter:
    router = APIRouter(prefix=f"{PREFIX}/catalogs", include_in_schema=False)
    Signed = Annotated[Session, Depends(signed_in(console))]

    @router.get("")
    def catalogs(request: Request, session: Signed) -> HTMLResponse:
        console.access.authorize(NAV.action, NAV.resource)
        found = service.list_data_catalogs()
        return console.render(
            request, "catalogs.html", session, title="Data catalogs", page=NAV.key, catalogs=found
        )

    @router.get("/{catalog}")
    def databases(request: Request, catalog: str, session: Signed) -> HTMLResponse:
        info = service.get_data_catalog(catalog)
        return console.render(
            request,
            "databases.html",
            session,
            title=catalog,
            page=NAV.key,
            catalog=info,
            databases=service.list_databases(catalog),
        )

    @router.get("/{catalog}/{database}")
    def tables(request: Request, catalog: str, database: str, session: Signed) -> HTMLResponse:
        service.get_database(catalog, database)
        return console.render(
            request,
            "tables.html",
            session,
            title=f"{catalog}.{database}",
            page=NAV.key,
            catalog=catalog,
            database=database,
            tables=[(t, kind_of(t)) for t in service.list_table_metadata(catalog, database)],
        )

    @router.get("/{catalog}/{database}/{table}")
    def table(
        request: Request, catalog: str, database: str, table: str, session: Signed
    ) -> HTMLResponse:
        info = service.get_table_metadata(catalog, database, table)
        name = f'"{database}"."{table}"'
        return console.render(
            request,
            "table.html",
            session,
            title=f"{database}.{table}",
            page=NAV.key,
            catalog=catalog,
            database=database,
            table=info,
            kind=kind_of(info),
            sample=f"SELECT * FROM {name} LIMIT 100",
            snapshots=[
                snapshot
                | {
                    "sample": f"SELECT * FROM {name} FOR VERSION AS OF "
                    f"{snapshot['snapshot_id']} LIMIT 100"
                }
                for snapshot in service.iceberg_snapshots(catalog, database, table)
            ],  # fmt: skip
        )

    return router


def schema_router(console: Console, service: QueryService) -> APIRouter:
    """JSON for the pickers and the editor's schema browser: what the user may see only.

    The SQL service answers (a catalog one may not use lists nothing), so the
    browser is never told of a database or table its user could not query.
    """
    router = APIRouter(prefix=f"{PREFIX}/api/catalogs", include_in_schema=False)
    Signed = Annotated[Session, Depends(signed_in(console))]

    @router.get("")
    def catalog_names(session: Signed) -> dict[str, list[str]]:
        names = [c.name for c in service.list_data_catalogs()]
        usable = [
            n for n in names if console.may(session.user, "lakeward:UseCatalog", catalog_arn(n))
        ]
        return {"catalogs": usable}

    @router.get("/{catalog}/databases")
    def database_names(catalog: str, session: Signed) -> dict[str, list[str]]:
        return {"databases": sorted(service.list_databases(catalog))}

    @router.get("/{catalog}/databases/{database}/tables")
    def table_columns(catalog: str, database: str, session: Signed) -> dict[str, object]:
        found = service.list_table_metadata(catalog, database)
        return {
            "tables": [
                {
                    "name": t.name,
                    "kind": kind_of(t),
                    "columns": [
                        {"name": c.name, "type": c.type} for c in [*t.columns, *t.partition_keys]
                    ],
                }
                for t in sorted(found, key=lambda t: t.name)
            ]
        }

    return router
