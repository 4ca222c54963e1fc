"""The operations of the SQL service, as the HTTP layer and the CLI call them.

``QueryService`` (lakeward.query.service) implements this protocol; the Athena
JSON API (lakeward.http.athena) only maps Athena's request and response shapes
onto it. Errors are lakeward.errors exceptions: InvalidRequest,
ResourceNotFound, AccessDenied, TooManyRequests.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

from lakeward.metastore.tables import TableInfo
from lakeward.query.model import (
    DataCatalog,
    NamedQuery,
    QueryExecution,
    ResultPage,
    WorkGroup,
)
from lakeward.query.prepared import PreparedStatement


class SqlApi(Protocol):
    def start_query_execution(
        self,
        query: str,
        *,
        catalog: str | None = None,
        database: str | None = None,
        workgroup: str | None = None,
        output_location: str | None = None,
        client_request_token: str | None = None,
        reuse_max_age_minutes: int | None = None,
        execution_parameters: list[str] | None = None,
        principal: str = "anonymous",
    ) -> str:
        """Queue a query; returns its id at once. Idempotent on ``client_request_token``."""
        ...

    def get_query_execution(self, execution_id: str) -> QueryExecution: ...

    def get_query_results(
        self, execution_id: str, next_token: str | None = None, max_results: int = 1000
    ) -> ResultPage: ...

    def stop_query_execution(self, execution_id: str) -> None: ...

    def list_query_executions(
        self, workgroup: str | None = None, next_token: str | None = None, max_results: int = 50
    ) -> tuple[list[str], str | None]: ...

    def batch_get_query_execution(
        self, execution_ids: list[str]
    ) -> tuple[list[QueryExecution], list[tuple[str, str]]]:
        """Found executions, and (id, reason) for each one not found."""
        ...

    def list_data_catalogs(self) -> list[DataCatalog]: ...

    def get_data_catalog(self, name: str) -> DataCatalog: ...

    def create_data_catalog(self, catalog: DataCatalog) -> None: ...

    def delete_data_catalog(self, name: str) -> None: ...

    def list_databases(self, catalog: str) -> list[str]: ...

    def get_database(self, catalog: str, database: str) -> str:
        """The database's name if it exists (ResourceNotFound otherwise)."""
        ...

    def list_table_metadata(
        self, catalog: str, database: str, expression: str | None = None
    ) -> list[TableInfo]:
        """Tables of a database; ``expression`` is Athena's regex-like filter (``*`` wildcard)."""
        ...

    def get_table_metadata(self, catalog: str, database: str, table: str) -> TableInfo: ...

    def list_work_groups(self) -> list[WorkGroup]: ...

    def get_work_group(self, name: str) -> WorkGroup: ...

    def create_work_group(self, group: WorkGroup) -> WorkGroup:
        """Refused if one of that name exists; returns it with its creation time."""
        ...

    def update_work_group(self, name: str, **changes: Any) -> WorkGroup:
        """Change the named ``WorkGroup`` fields, keep the others; returns the result."""
        ...

    def delete_work_group(self, name: str, *, recursive: bool = False) -> None:
        """``recursive`` deletes its named queries too (refused otherwise if it has any)."""
        ...

    def create_named_query(
        self,
        name: str,
        database: str,
        query: str,
        workgroup: str | None = None,
        description: str = "",
        client_request_token: str | None = None,
    ) -> str: ...

    def get_named_query(self, named_query_id: str) -> NamedQuery: ...

    def update_named_query(
        self, named_query_id: str, name: str, query: str, description: str | None = None
    ) -> None: ...

    def delete_named_query(self, named_query_id: str) -> None: ...

    def batch_get_named_query(
        self, named_query_ids: list[str]
    ) -> tuple[list[NamedQuery], list[tuple[str, str]]]:
        """Found named queries, and (id, reason) for each one not found or not readable."""
        ...

    def list_named_queries(
        self, workgroup: str | None = None, next_token: str | None = None, max_results: int = 50
    ) -> tuple[list[str], str | None]: ...

    def put_prepared_statement(
        self, name: str, workgroup: str, query: str, description: str = "", *, create: bool
    ) -> None: ...

    def get_prepared_statement(self, name: str, workgroup: str) -> PreparedStatement: ...

    def list_prepared_statements(self, workgroup: str) -> list[tuple[str, datetime]]: ...

    def delete_prepared_statement(self, name: str, workgroup: str) -> None: ...
