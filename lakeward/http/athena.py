"""Amazon Athena's JSON 1.1 API over the SQL service, so boto3, PyAthena and JDBC/ODBC
drivers talk to lakeward unchanged.

Every operation is ``POST /`` with ``X-Amz-Target: AmazonAthena.<Operation>`` and a
SigV4 signature. Requests are checked against Athena's own model as botocore ships it
(``athena/2017-05-18/service-2.json``: types, required members, lengths, ranges, enums,
patterns); a handler then calls ``SqlApi`` and renames the records into Athena's
response shapes. Errors go back as ``{"__type": ..., "Message": ...}`` so botocore
raises its own exception classes.
"""

from __future__ import annotations

import functools
import json
import logging
import re
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar

from botocore.loaders import Loader
from botocore.model import ServiceModel
from fastapi import APIRouter, Request, Response
from starlette.concurrency import run_in_threadpool

from lakeward.access import (
    current_context,
    current_principal,
    current_request_id,
    current_source,
)
from lakeward.errors import (
    AccessDenied,
    InvalidRequest,
    LakewardError,
    ResourceNotFound,
    TableNotFound,
    TooManyRequests,
)
from lakeward.http.body import DEFAULT_MAX_BODY_BYTES, read_body
from lakeward.http.sigv4 import Credentials, ReplayGuard, verify
from lakeward.metastore.client import Column, TableInfo
from lakeward.query.api import SqlApi
from lakeward.query.model import (
    ColumnInfo,
    DataCatalog,
    JsonDict,
    NamedQuery,
    QueryExecution,
    ResultPage,
    WorkGroup,
)

CONTENT_TYPE = "application/x-amz-json-1.1"
_TARGET_PREFIX = "AmazonAthena."
_MUTATING = ("Start", "Stop", "Create", "Delete")
_log = logging.getLogger(__name__)
T = TypeVar("T")


def athena_router(
    api: SqlApi, credentials: Credentials, *, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
) -> APIRouter:
    """The Athena API as ``POST /``; include it at the app's root, where SDKs post."""
    router = APIRouter()
    guard = ReplayGuard()
    _model()  # load the model now rather than on the first request

    @router.post("/", include_in_schema=False)
    async def athena(request: Request) -> Response:
        request_id = str(uuid.uuid4())
        target = request.headers.get("x-amz-target", "")
        try:
            body = await read_body(request, max_body_bytes)
            # Condition keys policies may test (aws:SourceIp, ...); read by the authorizer.
            current_context.set(
                {
                    "aws:SourceIp": request.client.host if request.client else "",
                    "aws:SecureTransport": request.url.scheme == "https",
                    "aws:UserAgent": request.headers.get("user-agent", ""),
                }
            )
            raw_path = request.scope.get("raw_path")
            # The client signed the path as it sent it, percent-encoding included.
            path = raw_path.decode("latin-1") if raw_path else request.url.path
            result = await run_in_threadpool(
                _handle,
                api,
                credentials,
                guard,
                request.headers,
                path,
                request.url.query,
                body,
                request_id,
            )
            return _respond(200, result, request_id)
        except Exception as exc:  # every failure must leave as an Athena-shaped error
            return _error_response(exc, target, request_id)

    return router


def _handle(
    api: SqlApi,
    credentials: Credentials,
    guard: ReplayGuard,
    headers: Mapping[str, str],
    path: str,
    query: str,
    body: bytes,
    request_id: str,
) -> JsonDict:
    target = headers.get("x-amz-target", "")
    operation = target.removeprefix(_TARGET_PREFIX) if target.startswith(_TARGET_PREFIX) else ""
    mutating = operation.startswith(_MUTATING)
    principal = verify(
        "POST", path, query, headers, body, credentials, replay_guard=guard, mutating=mutating
    )
    # This call runs in its own copy of the context: what is set here is this request's.
    current_principal.set(principal)
    current_request_id.set(request_id)
    current_source.set("athena-api")
    handler = _OPERATIONS.get(operation)
    if handler is None:
        raise InvalidRequest(f"Unknown operation {target!r}: expected AmazonAthena.<Operation>")
    try:
        data = json.loads(body or b"{}")
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidRequest(f"Could not parse request body into JSON: {exc}") from None
    if not isinstance(data, dict):
        raise InvalidRequest("Could not parse request body into JSON: expected an object")
    shape = _model().operation_model(operation).input_shape
    return handler(api, _checked(shape, data, ""), principal)


def _respond(status: int, body: JsonDict, request_id: str) -> Response:
    content = json.dumps(body, separators=(",", ":"))
    headers = {"x-amzn-RequestId": request_id}
    return Response(content, status_code=status, media_type=CONTENT_TYPE, headers=headers)


_CLIENT_ERRORS: list[tuple[type[LakewardError], str]] = [
    (InvalidRequest, "InvalidRequestException"),
    (ResourceNotFound, "ResourceNotFoundException"),
    (TableNotFound, "ResourceNotFoundException"),
    (AccessDenied, "AccessDeniedException"),
    (TooManyRequests, "TooManyRequestsException"),
]


def _error_response(exc: Exception, target: str, request_id: str) -> Response:
    """Athena's error shape; botocore picks the exception class from ``__type``."""
    for error, kind in _CLIENT_ERRORS:
        if isinstance(exc, error):
            body = {"__type": kind, "Message": exc.message}
            if isinstance(exc, InvalidRequest):
                body["AthenaErrorCode"] = getattr(exc, "athena_error_code", "INVALID_INPUT")
            return _respond(400, body, request_id)
    _log.error("Athena API %r failed (request %s)", target, request_id, exc_info=exc)
    # LakewardError messages are written for users; anything else may leak internals.
    message = exc.message if isinstance(exc, LakewardError) else "Internal server error"
    return _respond(500, {"__type": "InternalServerException", "Message": message}, request_id)


# --- requests, checked against Athena's model ---------------------------------------------


@functools.cache
def _model() -> Any:
    return ServiceModel(Loader().load_service_model("athena", "service-2"), "athena")


@functools.cache
def _pattern(java_regex: str) -> re.Pattern[str]:
    # AWS matches a pattern against the whole value (an IAM name with a space fails
    # "[\w+=,.@-]+"). The patterns are Java regexes over UTF-16, where a surrogate-pair
    # range stands for "any character beyond the BMP"; Python sees those as one code point.
    return re.compile(java_regex.replace(r"\uD800\uDC00-\uDBFF\uDFFF", r"\U00010000-\U0010FFFF"))


_JSON_TYPES: dict[str, tuple[tuple[type, ...], str]] = {
    "structure": ((dict,), "an object"),
    "map": ((dict,), "an object"),
    "list": ((list,), "a list"),
    "string": ((str,), "a string"),
    "boolean": ((bool,), "a boolean"),
    "integer": ((int,), "an integer"),
    "long": ((int,), "an integer"),
    "double": ((int, float), "a number"),
}


def _invalid(path: str, value: object, constraint: str) -> InvalidRequest:
    shown = value if isinstance(value, str) else json.dumps(value)
    shown = "null" if value is None else f"'{shown[:100]}{'...' if len(shown) > 100 else ''}'"
    return InvalidRequest(
        f"1 validation error detected: Value {shown} at '{path}' failed to satisfy "
        f"constraint: Member must {constraint}"
    )


def _is_json(value: object, types: tuple[type, ...]) -> bool:
    # JSON's true is no number, though Python's bool is an int
    return isinstance(value, types) and (bool in types or not isinstance(value, bool))


def _checked(shape: Any, value: Any, path: str) -> Any:
    """``value`` after checking it against ``shape``, with null members dropped.

    Unknown members are ignored rather than refused: newer SDKs send members that
    this server's copy of the model may not have yet.
    """
    kind, meta = shape.type_name, shape.metadata
    expected, noun = _JSON_TYPES.get(kind, ((object,), ""))
    if not _is_json(value, expected):
        raise _invalid(path, value, f"be {noun}")
    sized = kind in ("string", "list", "map")
    size, measure = (len(value), "length") if sized else (value, "value")
    ranged = sized or kind in ("integer", "long", "double")
    if ranged and "min" in meta and size < meta["min"]:
        raise _invalid(path, value, f"have {measure} greater than or equal to {meta['min']}")
    if ranged and "max" in meta and size > meta["max"]:
        raise _invalid(path, value, f"have {measure} less than or equal to {meta['max']}")
    if kind == "string" and shape.enum and value not in shape.enum:
        raise _invalid(path, value, f"satisfy enum value set: [{', '.join(shape.enum)}]")
    if kind == "string" and "pattern" in meta and not _pattern(meta["pattern"]).fullmatch(value):
        raise _invalid(path, value, f"satisfy regular expression pattern: {meta['pattern']}")
    if kind == "list":
        return [_checked(shape.member, v, f"{path}.{i + 1}.member") for i, v in enumerate(value)]
    if kind == "map":
        return {k: _checked(shape.value, v, f"{path}.{k}") for k, v in value.items()}
    if kind != "structure":
        return value
    prefix = f"{path}." if path else ""
    members = {}
    for name, member in shape.members.items():
        where = prefix + name[:1].lower() + name[1:]  # AWS names members in lowerCamel
        if value.get(name) is not None:
            members[name] = _checked(member, value[name], where)
        elif name in shape.required_members:
            raise _invalid(where, None, "not be null")
    return members


# --- records to Athena's shapes -----------------------------------------------------------


def _compact(fields: JsonDict) -> JsonDict:
    """Leave out absent members, as Athena does, rather than sending nulls."""
    return {key: value for key, value in fields.items() if value is not None and value != ""}


def _epoch(when: datetime | None) -> float | None:
    """botocore's JSON protocol reads timestamps as epoch seconds; records are UTC."""
    if when is None:
        return None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()


def _engine(engine: str) -> JsonDict:
    return {"SelectedEngineVersion": engine, "EffectiveEngineVersion": engine}


def _query_execution(q: QueryExecution) -> JsonDict:
    s, failed = q.statistics, q.state == "FAILED" and q.state_change_reason
    status = {
        "State": q.state.value,
        "StateChangeReason": q.state_change_reason,
        "SubmissionDateTime": _epoch(q.submitted),
        "CompletionDateTime": _epoch(q.completed),
        "AthenaError": {"ErrorMessage": q.state_change_reason} if failed else None,
    }
    statistics = {
        "EngineExecutionTimeInMillis": s.engine_execution_ms,
        "DataScannedInBytes": s.data_scanned_bytes,
        "TotalExecutionTimeInMillis": s.total_execution_ms,
        "QueryQueueTimeInMillis": s.queue_ms,
        "QueryPlanningTimeInMillis": s.planning_ms,
        "ServiceProcessingTimeInMillis": s.service_processing_ms,
        "ResultReuseInformation": {"ReusedPreviousResult": s.result_reused},
    }
    return {
        "QueryExecutionId": q.id,
        "Query": q.query,
        "StatementType": q.statement_type.value,
        "ResultConfiguration": {"OutputLocation": q.output_location},
        "QueryExecutionContext": _compact({"Catalog": q.catalog, "Database": q.database}),
        "Status": _compact(status),
        "Statistics": statistics,
        "WorkGroup": q.workgroup,
        "EngineVersion": _engine(q.engine),
    }


def _column_info(c: ColumnInfo) -> JsonDict:
    return {
        "CatalogName": c.catalog,
        "SchemaName": c.schema,
        "TableName": c.table,
        "Name": c.name,
        "Label": c.name,
        "Type": c.type,
        "Precision": c.precision,
        "Scale": c.scale,
        "Nullable": c.nullable,
        "CaseSensitive": c.case_sensitive,
    }


def _result_set(page: ResultPage) -> JsonDict:
    # NULL is a Datum without VarCharValue; an empty string is VarCharValue "".
    rows = [{"Data": [{} if v is None else {"VarCharValue": v} for v in r]} for r in page.rows]
    return {
        "Rows": rows,
        "ResultSetMetadata": {"ColumnInfo": list(map(_column_info, page.columns))},
    }


def _catalog(c: DataCatalog) -> JsonDict:
    fields = {"Name": c.name, "Type": c.type, "Description": c.description}
    return _compact(fields | {"Parameters": c.parameters})


def _column(c: Column) -> JsonDict:
    return _compact({"Name": c.name, "Type": c.type, "Comment": c.comment})


def _table(t: TableInfo) -> JsonDict:
    # Athena lists the storage descriptor among the parameters; PyAthena reads it there.
    storage = {"location": t.location, "inputformat": t.input_format}
    storage["serde.serialization.lib"] = t.serde
    return {
        "Name": t.name,
        "TableType": t.table_type,
        "Columns": list(map(_column, t.columns)),
        "PartitionKeys": list(map(_column, t.partition_keys)),
        "Parameters": t.parameters | _compact(storage),
    }


def _work_group_summary(w: WorkGroup) -> JsonDict:
    fields = {"Name": w.name, "State": w.state, "Description": w.description}
    return _compact(fields | {"CreationTime": _epoch(w.created)})


def _work_group(w: WorkGroup) -> JsonDict:
    output = {"OutputLocation": w.output_location} if w.output_location else None
    configuration = {
        "ResultConfiguration": output,
        "EnforceWorkGroupConfiguration": w.enforce_configuration,
        "BytesScannedCutoffPerQuery": w.bytes_scanned_cutoff,
        "PublishCloudWatchMetricsEnabled": False,
        "RequesterPaysEnabled": False,
        "EngineVersion": _engine(w.engine),
    }
    return _work_group_summary(w) | {"Configuration": _compact(configuration)}


def _named_query(n: NamedQuery) -> JsonDict:
    fields = {"Name": n.name, "Description": n.description, "Database": n.database}
    fields |= {"QueryString": n.query, "NamedQueryId": n.id, "WorkGroup": n.workgroup}
    return _compact(fields)


def _page(items: list[T], r: JsonDict, default: int = 50) -> tuple[list[T], JsonDict]:
    """A page of a list the service returns whole; the token is the next offset."""
    token = r.get("NextToken", "0")
    if not token.isdigit():
        raise InvalidRequest(f"The NextToken {token!r} is not valid.")
    start = int(token)
    end = start + (r.get("MaxResults") or default)
    return items[start:end], ({"NextToken": str(end)} if end < len(items) else {})


def _next(token: str | None) -> JsonDict:
    return {"NextToken": token} if token else {}


# --- operations: r is the request, already checked against the model ---------------------

Handler = Callable[[SqlApi, JsonDict, str], JsonDict]


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
    return {"QueryExecution": _query_execution(api.get_query_execution(r["QueryExecutionId"]))}


def _get_query_results(api: SqlApi, r: JsonDict, _: str) -> JsonDict:
    if r.get("QueryResultType", "DATA_ROWS") != "DATA_ROWS":
        raise InvalidRequest("lakeward returns query results as DATA_ROWS only")
    execution_id, max_results = r["QueryExecutionId"], r.get("MaxResults", 1000)
    page = api.get_query_results(execution_id, r.get("NextToken"), max_results)
    result = {"UpdateCount": page.update_count, "ResultSet": _result_set(page)}
    return result | _next(page.next_token)


def _stop_query_execution(api: SqlApi, r: JsonDict, _: str) -> JsonDict:
    api.stop_query_execution(r["QueryExecutionId"])
    return {}


def _list_query_executions(api: SqlApi, r: JsonDict, _: str) -> JsonDict:
    page = r.get("WorkGroup"), r.get("NextToken"), r.get("MaxResults") or 50
    ids, token = api.list_query_executions(*page)
    return {"QueryExecutionIds": ids} | _next(token)


def _batch_get_query_execution(api: SqlApi, r: JsonDict, _: str) -> JsonDict:
    found, missing = api.batch_get_query_execution(r["QueryExecutionIds"])
    unprocessed = [
        {"QueryExecutionId": i, "ErrorCode": "INVALID_INPUT", "ErrorMessage": reason}
        for i, reason in missing
    ]
    executions = list(map(_query_execution, found))
    return {"QueryExecutions": executions, "UnprocessedQueryExecutionIds": unprocessed}


def _list_data_catalogs(api: SqlApi, r: JsonDict, _: str) -> JsonDict:
    catalogs, token = _page(api.list_data_catalogs(), r)
    summaries = [{"CatalogName": c.name, "Type": c.type} for c in catalogs]
    return {"DataCatalogsSummary": summaries} | token


def _get_data_catalog(api: SqlApi, r: JsonDict, _: str) -> JsonDict:
    return {"DataCatalog": _catalog(api.get_data_catalog(r["Name"]))}


def _create_data_catalog(api: SqlApi, r: JsonDict, _: str) -> JsonDict:
    parameters = r.get("Parameters", {})
    catalog = DataCatalog(r["Name"], r["Type"], r.get("Description", ""), parameters)
    api.create_data_catalog(catalog)
    return {"DataCatalog": _catalog(catalog)}


def _delete_data_catalog(api: SqlApi, r: JsonDict, _: str) -> JsonDict:
    catalog = api.get_data_catalog(r["Name"])  # Athena answers with what it deleted
    api.delete_data_catalog(catalog.name)
    return {"DataCatalog": _catalog(catalog)}


def _list_databases(api: SqlApi, r: JsonDict, _: str) -> JsonDict:
    names, token = _page(api.list_databases(r["CatalogName"]), r)
    return {"DatabaseList": [{"Name": n} for n in names]} | token


def _get_database(api: SqlApi, r: JsonDict, _: str) -> JsonDict:
    return {"Database": {"Name": api.get_database(r["CatalogName"], r["DatabaseName"])}}


def _list_table_metadata(api: SqlApi, r: JsonDict, _: str) -> JsonDict:
    expression = r.get("Expression") or None
    tables = api.list_table_metadata(r["CatalogName"], r["DatabaseName"], expression)
    page, token = _page(tables, r)
    return {"TableMetadataList": list(map(_table, page))} | token


def _get_table_metadata(api: SqlApi, r: JsonDict, _: str) -> JsonDict:
    table = api.get_table_metadata(r["CatalogName"], r["DatabaseName"], r["TableName"])
    return {"TableMetadata": _table(table)}


def _list_work_groups(api: SqlApi, r: JsonDict, _: str) -> JsonDict:
    groups, token = _page(api.list_work_groups(), r)
    summaries = [_work_group_summary(w) | {"EngineVersion": _engine(w.engine)} for w in groups]
    return {"WorkGroups": summaries} | token


def _get_work_group(api: SqlApi, r: JsonDict, _: str) -> JsonDict:
    return {"WorkGroup": _work_group(api.get_work_group(r["WorkGroup"]))}


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
    return {"NamedQuery": _named_query(api.get_named_query(r["NamedQueryId"]))}


def _list_named_queries(api: SqlApi, r: JsonDict, _: str) -> JsonDict:
    ids, token = api.list_named_queries(
        r.get("WorkGroup"), r.get("NextToken"), r.get("MaxResults") or 50
    )
    return {"NamedQueryIds": ids} | _next(token)


_OPERATIONS: dict[str, Handler] = {
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
    "CreateNamedQuery": _create_named_query,
    "GetNamedQuery": _get_named_query,
    "ListNamedQueries": _list_named_queries,
}
