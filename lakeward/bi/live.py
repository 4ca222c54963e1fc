"""Live queries: the BI layer's SQL, run through the SQL service as ``bi-service-role``.

Every query goes through ``QueryService.start_query_execution`` with the
role as principal, so the service's checks all apply (one Athena statement,
``athena:StartQueryExecution``, ``lakeward:UseCatalog``, ``s3:GetObject`` on
the tables' data, ``s3:PutObject`` on the result); a refusal names the
permission the role lacks.

The service leaves a result as Athena does: a CSV in the lake with every
value quoted, NULL as an empty unquoted field, and the column types in the
execution's result metadata. Once ``GetQueryResults`` has allowed the read,
the whole CSV is read at once (paging 1,000 rows at a time would only add
round trips), each column typed by its Athena type.
"""

from __future__ import annotations

import io
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pyarrow as pa
import pyarrow.csv as pacsv

from lakeward.access import current_principal
from lakeward.access.control import role_principal
from lakeward.access.seed import BI_ROLE
from lakeward.bi.model import DataSource
from lakeward.config import Settings
from lakeward.errors import AccessDenied, InvalidRequest, StorageError
from lakeward.query.model import ColumnInfo, QueryState
from lakeward.query.service import QueryService
from lakeward.storage import Storage
from lakeward.storage.paths import lake_place

POLL_LIMIT = 0.25  # seconds between looks at a running query, at most


class RoleQueries:
    """Runs the BI layer's queries as the BI role."""

    def __init__(self, settings: Settings, queries: QueryService, storage: Storage) -> None:
        self.settings = settings
        self.queries = queries
        self.storage = storage
        self.role = role_principal(BI_ROLE)

    @contextmanager
    def as_role(self) -> Iterator[None]:
        # The service's read calls take the principal from the context.
        token = current_principal.set(self.role)
        try:
            yield
        finally:
            current_principal.reset(token)

    def run(self, source: DataSource, sql: str, database: str = "default") -> pa.Table:
        """Run a query on the data source's catalog and workgroup; its rows as Arrow."""
        with self.as_role():
            try:
                execution_id = self.queries.start_query_execution(
                    sql,
                    catalog=source.catalog,
                    database=database,
                    workgroup=source.workgroup,
                    principal=self.role,
                )
            except AccessDenied as exc:
                raise AccessDenied(
                    f"the BI service role {BI_ROLE} lacks a permission: {exc.message}"
                ) from None
            delay = 0.005
            execution = self.queries.get_query_execution(execution_id)
            while not execution.state.done:
                time.sleep(delay)
                delay = min(delay * 2, POLL_LIMIT)
                execution = self.queries.get_query_execution(execution_id)
            if execution.state != QueryState.SUCCEEDED:
                reason = execution.state_change_reason or execution.state.value
                if "not authorized" in reason:
                    raise AccessDenied(
                        f"the BI service role {BI_ROLE} lacks a permission: {reason}"
                    )
                raise InvalidRequest(f"the query failed: {reason}")
            page = self.queries.get_query_results(execution_id, max_results=1)
            return read_result(self.storage, self.settings, execution.output_location, page.columns)

    def some_tables(self, source: DataSource, most: int = 20) -> list[str]:
        """The first table of each of the catalog's databases (up to ``most``), quoted, for
        a test query: a role need not read every database of a shared catalog."""
        tables = []
        with self.as_role():
            for database in self.queries.list_databases(source.catalog):
                for info in self.queries.list_table_metadata(source.catalog, database):
                    tables.append(f'"{database}"."{info.name}"')
                    break
                if len(tables) >= most:
                    break
        return tables


_INTEGERS = ("tinyint", "smallint", "integer", "int", "bigint")
_FLOATS = ("double", "float", "real", "decimal")


def arrow_type(athena_type: str) -> pa.DataType:
    """The Arrow type a column of an Athena type is read as (text for nested types)."""
    kind = athena_type.lower().split("(", 1)[0].strip()
    if kind in _INTEGERS:
        return pa.int64()
    if kind in _FLOATS:
        return pa.float64()
    if kind == "boolean":
        return pa.bool_()
    if kind == "date":
        return pa.date32()
    if kind.startswith("timestamp"):
        return pa.timestamp("ms")
    return pa.string()


def read_result(
    storage: Storage, settings: Settings, output_location: str, columns: list[ColumnInfo]
) -> pa.Table:
    place = lake_place(settings, output_location)
    if place is None:
        raise StorageError(f"the query result {output_location} is not in the lake")
    bucket, key = place
    names = [c.name for c in columns]
    if not names:
        return pa.table({})
    data = storage.get(bucket, key)
    unique = _unique(names)
    try:
        table = pacsv.read_csv(
            io.BytesIO(data),
            read_options=pacsv.ReadOptions(column_names=unique, skip_rows=1),
            convert_options=pacsv.ConvertOptions(
                column_types={n: arrow_type(c.type) for n, c in zip(unique, columns, strict=True)},
                null_values=[""],
                strings_can_be_null=True,
                quoted_strings_can_be_null=False,
                timestamp_parsers=[pacsv.ISO8601, "%Y-%m-%d %H:%M:%S"],
            ),
        )
    except pa.ArrowInvalid as exc:
        raise StorageError(f"the query result {output_location} could not be read: {exc}") from None
    return table


def _unique(names: list[str]) -> list[str]:
    """Result columns may repeat a name (``SELECT a, a``); a table's fields may not."""
    seen: dict[str, int] = {}
    out = []
    for name in names:
        count = seen.get(name.lower(), 0)
        seen[name.lower()] = count + 1
        out.append(name if count == 0 else f"{name}_{count + 1}")
    return out
