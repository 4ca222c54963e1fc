"""The Athena API's operations: each takes the checked request ``r`` and calls ``SqlApi``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from lakeward.access import current_request_id
from lakeward.errors import (
    InvalidRequest,
    MetadataNotFound,
    ResourceNotFound,
    TableNotFound,
)
from lakeward.http.athena import prepared, shapes, workgroups
from lakeward.query.api import SqlApi
from lakeward.query.model import (
    DataCatalog,
    JsonDict,
)

Handler = Callable[[SqlApi, JsonDict, str], JsonDict | bytes]  # bytes: JSON already encoded


def _reuse_minutes(r: JsonDict) -> int | None:
    by_age = r.get("ResultReuseConfiguration", {}).get("ResultReuseByAgeConfiguration", {})
    if not by_age.get("Enabled"):
        return None
    return int(by_age.get("MaxAgeInMinutes", 60))  # Athena's default age


def _start_query_execution(api: SqlApi, r: JsonDict, principal: str) -> JsonDict:
    context = r.get("QueryExecutionContext", {})
    execution_id = api.start_query_execution(
        r["QueryString"],
        catalog=context.get("Catalog"),
        database=context.get("Database"),
        workgroup=r.get("WorkGroup"),
        output_location=r.get("ResultConfiguration", {}).get("OutputLocation"),
        client_request_token=r.get("ClientRequestToken"),
        reuse_max_age_minutes=_reuse_minutes(r),
        execution_parameters=r.get("ExecutionParameters"),
        principal=principal,
    )
    return {"QueryExecutionId": execution_id}


def _get_query_execution(api: SqlApi, r: JsonDict, _: str) -> JsonDict:
    return {
        "QueryExecution": shapes.query_execution(api.get_query_execution(r["QueryExecutionId"]))
    }


def _get_query_results(api: SqlApi, r: JsonDict, _: str) -> bytes:
    if r.get("QueryResultType", "DATA_ROWS") != "DATA_ROWS":
        raise InvalidRequest("lakeward returns query results as DATA_ROWS only")
    execution_id, max_results = r["QueryExecutionId"], r.get("MaxResults", 1000)
    page = api.get_query_results(execution_id, r.get("NextToken"), max_results)
    return shapes.query_results(page)


def _stop_query_execution(api: SqlApi, r: JsonDict, _: str) -> JsonDict:
    api.stop_query_execution(r["QueryExecutionId"])
    return {}


def _list_query_executions(api: SqlApi, r: JsonDict, _: str) -> JsonDict:
    page = r.get("WorkGroup"), r.get("NextToken"), r.get("MaxResults") or 50
    ids, token = api.list_query_executions(*page)
    return {"QueryExecutionIds": ids} | shapes.next(token)


def _batch_get_query_execution(api: SqlApi, r: JsonDict, _: str) -> JsonDict:
    found, missing = api.batch_get_query_execution(r["QueryExecutionIds"])
    executions = list(map(shapes.query_execution, found))
    return {"QueryExecutions": executions} | _unprocessed("QueryExecutionId", missing)


def _batch_get_named_query(api: SqlApi, r: JsonDict, _: str) -> JsonDict:
    found, missing = api.batch_get_named_query(r["NamedQueryIds"])
    named = list(map(shapes.named_query, found))
    return {"NamedQueries": named} | _unprocessed("NamedQueryId", missing)


def _unprocessed(id_field: str, missing: list[tuple[str, str]]) -> JsonDict:
    """A batch's ``Unprocessed<Thing>Ids``: each id with why it was not returned."""
    listed = [
        {id_field: i, "ErrorCode": "INVALID_INPUT", "ErrorMessage": reason} for i, reason in missing
    ]
    return {f"Unprocessed{id_field}s": listed}


def _list_data_catalogs(api: SqlApi, r: JsonDict, _: str) -> JsonDict:
    catalogs, token = shapes.page(api.list_data_catalogs(), r)
    summaries = [{"CatalogName": c.name, "Type": c.type} for c in catalogs]
    return {"DataCatalogsSummary": summaries} | token


def _get_data_catalog(api: SqlApi, r: JsonDict, _: str) -> JsonDict:
    return {"DataCatalog": shapes.catalog(api.get_data_catalog(r["Name"]))}


def _create_data_catalog(api: SqlApi, r: JsonDict, _: str) -> JsonDict:
    parameters = r.get("Parameters", {})
    catalog = DataCatalog(r["Name"], r["Type"], r.get("Description", ""), parameters)
    api.create_data_catalog(catalog)
    return {"DataCatalog": shapes.catalog(catalog)}


def _delete_data_catalog(api: SqlApi, r: JsonDict, _: str) -> JsonDict:
    catalog = api.get_data_catalog(r["Name"])  # Athena answers with what it deleted
    api.delete_data_catalog(catalog.name)
    return {"DataCatalog": shapes.catalog(catalog)}


@contextmanager
def _metadata() -> Iterator[None]:
    """A missing database or table as Athena's metadata calls report it: a MetadataException
    carrying the Glue error it came from (clients such as PyAthena's SQLAlchemy dialect read
    ``Error Code: EntityNotFoundException`` there as "no such table")."""
    try:
        yield
    except (ResourceNotFound, TableNotFound) as exc:
        raise MetadataNotFound(
            f"{exc.message} (Service: AmazonDataCatalog; Status Code: 400; "
            f"Error Code: EntityNotFoundException; Request ID: {current_request_id.get()}; "
            "Proxy: null)"
        ) from None


def _list_databases(api: SqlApi, r: JsonDict, _: str) -> JsonDict:
    names, token = shapes.page(api.list_databases(r["CatalogName"]), r)
    return {"DatabaseList": [{"Name": n} for n in names]} | token


def _get_database(api: SqlApi, r: JsonDict, _: str) -> JsonDict:
    with _metadata():
        return {"Database": {"Name": api.get_database(r["CatalogName"], r["DatabaseName"])}}


def _list_table_metadata(api: SqlApi, r: JsonDict, _: str) -> JsonDict:
    expression = r.get("Expression") or None
    with _metadata():
        tables = api.list_table_metadata(r["CatalogName"], r["DatabaseName"], expression)
    page, token = shapes.page(tables, r)
    return {"TableMetadataList": list(map(shapes.table, page))} | token


def _get_table_metadata(api: SqlApi, r: JsonDict, _: str) -> JsonDict:
    with _metadata():
        table = api.get_table_metadata(r["CatalogName"], r["DatabaseName"], r["TableName"])
    return {"TableMetadata": shapes.table(table)}


def _list_work_groups(api: SqlApi, r: JsonDict, _: str) -> JsonDict:
    groups, token = shapes.page(api.list_work_groups(), r)
    summaries = [
        shapes.work_group_summary(w) | {"EngineVersion": shapes.engine(w.engine)} for w in groups
    ]
    return {"WorkGroups": summaries} | token


def _get_work_group(api: SqlApi, r: JsonDict, _: str) -> JsonDict:
    return {"WorkGroup": shapes.work_group(api.get_work_group(r["WorkGroup"]))}


def _create_named_query(api: SqlApi, r: JsonDict, _: str) -> JsonDict:
    named_query_id = api.create_named_query(
        r["Name"],
        r["Database"],
        r["QueryString"],
        workgroup=r.get("WorkGroup"),
        description=r.get("Description", ""),
        client_request_token=r.get("ClientRequestToken"),
    )
    return {"NamedQueryId": named_query_id}


def _get_named_query(api: SqlApi, r: JsonDict, _: str) -> JsonDict:
    return {"NamedQuery": shapes.named_query(api.get_named_query(r["NamedQueryId"]))}


def _update_named_query(api: SqlApi, r: JsonDict, _: str) -> JsonDict:
    api.update_named_query(r["NamedQueryId"], r["Name"], r["QueryString"], r.get("Description"))
    return {}


def _delete_named_query(api: SqlApi, r: JsonDict, _: str) -> JsonDict:
    api.delete_named_query(r["NamedQueryId"])
    return {}


def _list_named_queries(api: SqlApi, r: JsonDict, _: str) -> JsonDict:
    ids, token = api.list_named_queries(
        r.get("WorkGroup"), r.get("NextToken"), r.get("MaxResults") or 50
    )
    return {"NamedQueryIds": ids} | shapes.next(token)


OPERATIONS: dict[str, Handler] = {
    "StartQueryExecution": _start_query_execution,
    "GetQueryExecution": _get_query_execution,
    "GetQueryResults": _get_query_results,
    "StopQueryExecution": _stop_query_execution,
    "ListQueryExecutions": _list_query_executions,
    "BatchGetQueryExecution": _batch_get_query_execution,
    "ListDataCatalogs": _list_data_catalogs,
    "GetDataCatalog": _get_data_catalog,
    "CreateDataCatalog": _create_data_catalog,
    "DeleteDataCatalog": _delete_data_catalog,
    "ListDatabases": _list_databases,
    "GetDatabase": _get_database,
    "ListTableMetadata": _list_table_metadata,
    "GetTableMetadata": _get_table_metadata,
    "ListWorkGroups": _list_work_groups,
    "GetWorkGroup": _get_work_group,
    "CreateWorkGroup": workgroups.create_work_group,
    "UpdateWorkGroup": workgroups.update_work_group,
    "DeleteWorkGroup": workgroups.delete_work_group,
    "CreateNamedQuery": _create_named_query,
    "GetNamedQuery": _get_named_query,
    "ListNamedQueries": _list_named_queries,
    "UpdateNamedQuery": _update_named_query,
    "DeleteNamedQuery": _delete_named_query,
    "BatchGetNamedQuery": _batch_get_named_query,
    "CreatePreparedStatement": prepared.create,
    "UpdatePreparedStatement": prepared.update,
    "GetPreparedStatement": prepared.get,
    "BatchGetPreparedStatement": prepared.batch_get,
    "ListPreparedStatements": prepared.list_,
    "DeletePreparedStatement": prepared.delete,
}
