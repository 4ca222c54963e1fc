"""The SQL service's metadata: catalogs, databases, tables, workgroups, named queries.

SHOW and DESCRIBE statements are answered here too, from the catalogs.
``QueryService`` (service.py) runs query executions and inherits these; both work
on the same state (the service's store, the catalogs and the access check).
"""

from __future__ import annotations

import base64
import uuid
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from lakeward.access import Authorizer
from lakeward.access.arns import catalog_arn, workgroup_arn
from lakeward.config import Settings
from lakeward.errors import InvalidRequest, ResourceNotFound
from lakeward.iceberg.catalog import is_iceberg
from lakeward.metastore.tables import TableInfo
from lakeward.query.catalogs import (
    ACCOUNT_ID,
    AWS_DATA_CATALOG,
    DEFAULT_CATALOG,
    Catalogs,
    matches,
)
from lakeward.query.model import DataCatalog, NamedQuery, QueryExecution, WorkGroup
from lakeward.query.owners import listed_owner, may_read
from lakeward.query.prepared import PreparedStatement, PreparedStatements
from lakeward.query.store import Store
from lakeward.query.view_definitions import described
from lakeward.query.workgroups import WorkGroups, check
from lakeward.storage.paths import lake_place, public_uri

if TYPE_CHECKING:
    from lakeward.storage import Storage

DEFAULT_WORKGROUP = "primary"
MAX_QUERY_LENGTH = 262_144


class MetadataOperations:
    """What ``QueryService`` answers without running a query."""

    settings: Settings
    access: Authorizer
    store: Store
    catalogs: Catalogs
    workgroups: WorkGroups

    def list_data_catalogs(self) -> list[DataCatalog]:
        return [
            c for c in self.catalogs.all()
            if self.access.allowed("athena:GetDataCatalog", catalog_arn(c.name))
        ]  # fmt: skip

    def get_data_catalog(self, name: str) -> DataCatalog:
        canonical = self.catalogs.canonical(name)
        self.access.authorize("athena:GetDataCatalog", catalog_arn(canonical))
        catalog = self.catalogs.get(canonical)
        if name.lower() == AWS_DATA_CATALOG and canonical != AWS_DATA_CATALOG:
            # The account's Glue catalog, as Athena describes it: Glue's API answers for it.
            return DataCatalog(
                AWS_DATA_CATALOG, "GLUE", catalog.description, {"catalog-id": ACCOUNT_ID}
            )
        return catalog

    def create_data_catalog(self, catalog: DataCatalog) -> None:
        self.access.authorize("athena:CreateDataCatalog", catalog_arn(catalog.name))
        self.catalogs.create(catalog)

    def delete_data_catalog(self, name: str) -> None:
        self.access.authorize("athena:DeleteDataCatalog", catalog_arn(name))
        self.catalogs.delete(name)

    def list_databases(self, catalog: str) -> list[str]:
        catalog = self.catalogs.canonical(catalog)
        if not self.access.allowed("lakeward:UseCatalog", catalog_arn(catalog)):
            return []  # a catalog one may not use shows nothing, as if empty
        return self.catalogs.catalog(catalog).databases()

    def get_database(self, catalog: str, database: str) -> str:
        catalog = self.catalogs.canonical(catalog)
        self.access.authorize("lakeward:UseCatalog", catalog_arn(catalog))
        self.catalogs.catalog(catalog).require_database(database)
        return database

    def list_table_metadata(
        self, catalog: str, database: str, expression: str | None = None
    ) -> list[TableInfo]:
        catalog = self.catalogs.canonical(catalog)
        if not self.access.allowed("lakeward:UseCatalog", catalog_arn(catalog)):
            return []
        backend = self.catalogs.catalog(catalog)
        names = [n for n in backend.tables(database) if matches(expression, n)]
        return [described(backend.table(database, n)) for n in sorted(names)]

    def get_table_metadata(self, catalog: str, database: str, table: str) -> TableInfo:
        catalog = self.catalogs.canonical(catalog)
        self.access.authorize("lakeward:UseCatalog", catalog_arn(catalog))
        return described(self.catalogs.catalog(catalog).table(database, table))

    def iceberg_snapshots(self, catalog: str, database: str, table: str) -> list[dict[str, Any]]:
        """An Iceberg table's snapshots, newest first, as its ``"t$snapshots"`` lists them
        (no rows for another kind of table)."""
        info = self.get_table_metadata(catalog, database, table)
        if not is_iceberg(info.parameters):
            return []
        backend = self.catalogs.catalog(self.catalogs.canonical(catalog))
        loaded = backend.iceberg(self.settings).load_table((database, table))
        rows: list[dict[str, Any]] = loaded.inspect.snapshots().to_pylist()
        for row in rows:
            row["summary"] = dict(row["summary"] or [])  # Arrow's map: a list of pairs
        return sorted(rows, key=lambda r: r["committed_at"], reverse=True)

    # -- workgroups and named queries ---------------------------------------

    def list_work_groups(self) -> list[WorkGroup]:
        return self.workgroups.listed()

    def get_work_group(self, name: str) -> WorkGroup:
        """The workgroup, with the OutputLocation its queries get when it names none (as
        Athena answers: clients such as awswrangler read their results from there)."""
        group = self.workgroups.get(name)
        if group.output_location:
            return group
        return replace(group, output_location=default_output_location(self.settings, group.name))

    def create_work_group(self, group: WorkGroup) -> WorkGroup:
        return self.workgroups.create(group)

    def update_work_group(self, name: str, **changes: Any) -> WorkGroup:
        return self.workgroups.update(name, **changes)

    def delete_work_group(self, name: str, *, recursive: bool = False) -> None:
        self.workgroups.delete(name, recursive=recursive)

    def _work_group(self, name: str) -> WorkGroup:
        return self.workgroups.find(name)

    def put_work_group(self, group: WorkGroup) -> None:
        """Create or replace a workgroup without asking anyone (the stack's own set-up)."""
        check(group, self.settings.lake_root)
        self.store.put_workgroup(group)

    def create_named_query(
        self,
        name: str,
        database: str,
        query: str,
        workgroup: str | None = None,
        description: str = "",
        client_request_token: str | None = None,
    ) -> str:
        if len(query) > MAX_QUERY_LENGTH:
            raise InvalidRequest(f"QueryString is longer than {MAX_QUERY_LENGTH} characters")
        group = self._work_group(workgroup or DEFAULT_WORKGROUP)
        self.access.authorize("athena:CreateNamedQuery", workgroup_arn(group.name))
        named = NamedQuery(str(uuid.uuid4()), name, database, query, group.name, description)
        return self.store.add_named_query(named, client_request_token)

    def get_named_query(self, named_query_id: str) -> NamedQuery:
        return self._named_query(named_query_id, "athena:GetNamedQuery")

    def update_named_query(
        self, named_query_id: str, name: str, query: str, description: str | None = None
    ) -> None:
        """A new name, query and (if given) description; its database and workgroup stay,
        as in Athena."""
        named = self._named_query(named_query_id, "athena:UpdateNamedQuery")
        if len(query) > MAX_QUERY_LENGTH:
            raise InvalidRequest(f"QueryString is longer than {MAX_QUERY_LENGTH} characters")
        kept = named.description if description is None else description
        self.store.update_named_query(named_query_id, name, query, kept)

    def delete_named_query(self, named_query_id: str) -> None:
        self._named_query(named_query_id, "athena:DeleteNamedQuery")
        self.store.delete_named_query(named_query_id)

    def batch_get_named_query(
        self, named_query_ids: list[str]
    ) -> tuple[list[NamedQuery], list[tuple[str, str]]]:
        """Those found that the caller may read, and (id, reason) for each of the others."""
        if not 1 <= len(named_query_ids) <= 50:
            raise InvalidRequest("NamedQueryIds must hold between 1 and 50 ids")
        found, missing = [], []
        for named_query_id in named_query_ids:
            named = self.store.named_query(named_query_id)
            if named is None:
                missing.append((named_query_id, f"NamedQuery {named_query_id} was not found"))
            elif not self.access.allowed(
                "athena:BatchGetNamedQuery", workgroup_arn(named.workgroup)
            ):
                missing.append((named_query_id, "not authorized to read this NamedQuery"))
            else:
                found.append(named)
        return found, missing

    def _named_query(self, named_query_id: str, action: str) -> NamedQuery:
        named = self.store.named_query(named_query_id)
        if named is None:
            raise InvalidRequest(f"NamedQuery {named_query_id} was not found")
        self.access.authorize(action, workgroup_arn(named.workgroup))
        return named

    def list_named_queries(
        self, workgroup: str | None = None, next_token: str | None = None, max_results: int = 50
    ) -> tuple[list[str], str | None]:
        self.access.authorize(
            "athena:ListNamedQueries", workgroup_arn(workgroup or DEFAULT_WORKGROUP)
        )
        offset = offset_of(next_token)
        ids = self.store.named_query_ids(workgroup, offset, max_results + 1)
        return ids[:max_results], next_token_at(offset + max_results) if len(
            ids
        ) > max_results else None

    # -- executions, as recorded

    def list_query_executions(
        self, workgroup: str | None = None, next_token: str | None = None, max_results: int = 50
    ) -> tuple[list[str], str | None]:
        started_by = listed_owner(self.access, workgroup or DEFAULT_WORKGROUP)
        offset = offset_of(next_token)
        ids = self.store.execution_ids(workgroup, offset, max_results + 1, started_by=started_by)
        more = len(ids) > max_results
        return ids[:max_results], next_token_at(offset + max_results) if more else None

    def batch_get_query_execution(
        self, execution_ids: list[str]
    ) -> tuple[list[QueryExecution], list[tuple[str, str]]]:
        found, missing = [], []
        for execution_id in execution_ids:
            execution = self.store.execution(execution_id)
            if execution is None:
                missing.append((execution_id, "QueryExecution was not found"))
            elif not may_read(self.access, execution, "BatchGetQueryExecution"):
                missing.append((execution_id, "not authorized to read this QueryExecution"))
            else:
                found.append(execution)
        return found, missing


class PreparedOperations:
    """Athena's prepared-statement calls (PREPARE and DEALLOCATE are statements)."""

    access: Authorizer
    catalogs: Catalogs
    prepared: PreparedStatements
    workgroups: WorkGroups

    def put_prepared_statement(
        self, name: str, workgroup: str, query: str, description: str = "", *, create: bool
    ) -> None:
        group = self.workgroups.find(workgroup).name
        action = "Create" if create else "Update"
        self.access.authorize(f"athena:{action}PreparedStatement", workgroup_arn(group))
        existing = self.prepared.get(group, name)
        if create and existing is not None:
            raise InvalidRequest(f"PreparedStatement {name} already exists in workGroup {group}")
        if not create and existing is None:
            raise ResourceNotFound(f"PreparedStatement {name} was not found in workGroup {group}")
        from lakeward.query.statements import parse_statement  # the statements' one table

        parse_statement(  # the text must be a statement PREPARE takes
            f"PREPARE {name} FROM {query}",
            default_catalog=DEFAULT_CATALOG,
            default_database="default",
            catalogs=self.catalogs.names(),
        )
        self.prepared.put(PreparedStatement(group, name, query, description))

    def get_prepared_statement(self, name: str, workgroup: str) -> PreparedStatement:
        group = self.workgroups.find(workgroup).name
        self.access.authorize("athena:GetPreparedStatement", workgroup_arn(group))
        found = self.prepared.get(group, name)
        if found is None:
            raise ResourceNotFound(f"PreparedStatement {name} was not found in workGroup {group}")
        return found

    def list_prepared_statements(self, workgroup: str) -> list[tuple[str, datetime]]:
        group = self.workgroups.find(workgroup).name
        self.access.authorize("athena:ListPreparedStatements", workgroup_arn(group))
        return self.prepared.names(group)

    def delete_prepared_statement(self, name: str, workgroup: str) -> None:
        group = self.workgroups.find(workgroup).name
        self.access.authorize("athena:DeletePreparedStatement", workgroup_arn(group))
        if not self.prepared.delete(group, name):
            raise ResourceNotFound(f"PreparedStatement {name} was not found in workGroup {group}")


def default_output_location(settings: Settings, workgroup: str) -> str:
    """Where a workgroup without an OutputLocation of its own keeps its results."""
    return public_uri(settings, settings.lake.data_bucket, f"query-results/{workgroup}")


def output_location_of(
    settings: Settings, storage: Storage, group: WorkGroup, requested: str | None
) -> str:
    """Where an execution of ``group`` keeps its result, ``requested`` or not."""
    default = default_output_location(settings, group.name)
    # An enforcing workgroup's location is its own, or the default GetWorkGroup reports.
    if group.enforce_configuration or not requested:
        return (group.output_location or default).rstrip("/")
    requested = requested.rstrip("/")
    place = lake_place(settings, requested)
    if place is None or not place[0]:
        raise InvalidRequest(f"OutputLocation {requested} is not in the lake")
    if place[0] not in storage.buckets():
        raise InvalidRequest(f"OutputLocation {requested}: the lake has no bucket {place[0]}")
    return requested


def next_token_at(offset: int) -> str:
    return base64.urlsafe_b64encode(f"o:{offset}".encode()).decode()


def offset_of(token: str | None) -> int:
    if not token:
        return 0
    try:
        kind, _, value = base64.urlsafe_b64decode(token.encode()).decode().partition(":")
        if kind != "o":
            raise ValueError(kind)
        return int(value)
    except (ValueError, UnicodeDecodeError):
        raise InvalidRequest("NextToken is not valid") from None
