"""The SQL service's records renamed into Athena's response shapes."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TypeVar

from lakeward.errors import (
    InvalidRequest,
)
from lakeward.http.athena.workgroups import additional_configuration
from lakeward.metastore.tables import Column, TableInfo
from lakeward.query.athena_errors import error_kind
from lakeward.query.model import (
    ColumnInfo,
    DataCatalog,
    JsonDict,
    NamedQuery,
    QueryExecution,
    ResultPage,
    WorkGroup,
)

T = TypeVar("T")


def compact(fields: JsonDict) -> JsonDict:
    """Leave out absent members, as Athena does, rather than sending nulls."""
    return {key: value for key, value in fields.items() if value is not None and value != ""}


def epoch(when: datetime | None) -> float | None:
    """botocore's JSON protocol reads timestamps as epoch seconds; records are UTC."""
    if when is None:
        return None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()


def engine(engine: str) -> JsonDict:
    return {"SelectedEngineVersion": engine, "EffectiveEngineVersion": engine}


def _athena_error(q: QueryExecution) -> JsonDict:
    kind = error_kind(q.state_change_reason or "", None)
    return {
        "ErrorCategory": q.error_category if q.error_category is not None else kind.category,
        "ErrorType": q.error_type if q.error_type is not None else kind.type,
        "Retryable": q.retryable if q.retryable is not None else kind.retryable,
        "ErrorMessage": q.state_change_reason,
    }


def query_execution(q: QueryExecution) -> JsonDict:
    s, failed = q.statistics, q.state == "FAILED" and q.state_change_reason
    status = {
        "State": q.state.value,
        "StateChangeReason": q.state_change_reason,
        "SubmissionDateTime": epoch(q.submitted),
        "CompletionDateTime": epoch(q.completed),
        "AthenaError": _athena_error(q) if failed else None,
    }
    statistics = {
        "EngineExecutionTimeInMillis": s.engine_execution_ms,
        "DataScannedInBytes": s.data_scanned_bytes,
        "TotalExecutionTimeInMillis": s.total_execution_ms,
        "QueryQueueTimeInMillis": s.queue_ms,
        "QueryPlanningTimeInMillis": s.planning_ms,
        "ServiceProcessingTimeInMillis": s.service_processing_ms,
        "ResultReuseInformation": {"ReusedPreviousResult": s.result_reused},
        **({"DataManifestLocation": s.data_manifest_location} if s.data_manifest_location else {}),
    }
    return {
        "QueryExecutionId": q.id,
        "Query": q.query,
        "StatementType": q.statement_type.value,
        **({"SubstatementType": q.substatement_type} if q.substatement_type else {}),
        "ResultConfiguration": {"OutputLocation": q.output_location},
        "ResultReuseConfiguration": {
            "ResultReuseByAgeConfiguration": {"Enabled": False}
            if q.reuse_max_age_minutes is None
            else {"Enabled": True, "MaxAgeInMinutes": q.reuse_max_age_minutes}
        },
        "QueryExecutionContext": compact({"Catalog": q.catalog, "Database": q.database}),
        "Status": compact(status),
        "Statistics": statistics,
        "WorkGroup": q.workgroup,
        "EngineVersion": engine(q.engine),
    }


def column_info(c: ColumnInfo) -> JsonDict:
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


def query_results(page: ResultPage) -> bytes:
    """GetQueryResults's answer, as ``json.dumps`` would write it, around the stored rows.

    The rows were rendered when the result was written (``query/pages.py``):
    NULL is a Datum without VarCharValue, an empty string is VarCharValue "".
    """
    described = {"ColumnInfo": list(map(column_info, page.columns))}
    parts = [
        b'{"UpdateCount":%d,"ResultSet":{"Rows":[' % page.update_count,
        page.rows_json,
        b'],"ResultSetMetadata":',
        json.dumps(described, separators=(",", ":")).encode("ascii"),
        b"}",
    ]
    if page.next_token:
        parts.append(b',"NextToken":' + json.dumps(page.next_token).encode("ascii"))
    return b"".join(parts) + b"}"


def catalog(c: DataCatalog) -> JsonDict:
    fields = {"Name": c.name, "Type": c.type, "Description": c.description}
    return compact(fields | {"Parameters": c.parameters})


def column(c: Column) -> JsonDict:
    return compact({"Name": c.name, "Type": c.type, "Comment": c.comment})


def table(t: TableInfo) -> JsonDict:
    # Athena lists the storage descriptor among the parameters; PyAthena reads it there.
    storage = {"location": t.location, "inputformat": t.input_format}
    storage |= {"outputformat": t.output_format, "serde.serialization.lib": t.serde}
    storage |= {f"serde.param.{k}": v for k, v in t.serde_parameters.items()}
    return {
        "Name": t.name,
        "TableType": t.table_type,
        "Columns": list(map(column, t.columns)),
        "PartitionKeys": list(map(column, t.partition_keys)),
        "Parameters": t.parameters | compact(storage),
    }


def work_group_summary(w: WorkGroup) -> JsonDict:
    fields = {"Name": w.name, "State": w.state, "Description": w.description}
    return compact(fields | {"CreationTime": epoch(w.created)})


def work_group(w: WorkGroup) -> JsonDict:
    output = {"OutputLocation": w.output_location} if w.output_location else None
    configuration = {
        "ResultConfiguration": output,
        "EnforceWorkGroupConfiguration": w.enforce_configuration,
        "BytesScannedCutoffPerQuery": w.bytes_scanned_cutoff,
        "PublishCloudWatchMetricsEnabled": False,
        "RequesterPaysEnabled": False,
        "EngineVersion": engine(w.engine),
        "AdditionalConfiguration": additional_configuration(w),
    }
    return work_group_summary(w) | {"Configuration": compact(configuration)}


def named_query(n: NamedQuery) -> JsonDict:
    fields = {"Name": n.name, "Description": n.description, "Database": n.database}
    fields |= {"QueryString": n.query, "NamedQueryId": n.id, "WorkGroup": n.workgroup}
    return compact(fields)


def page(items: list[T], r: JsonDict, default: int = 50) -> tuple[list[T], JsonDict]:
    """A page of a list the service returns whole; the token is the next offset."""
    token = r.get("NextToken", "0")
    if not token.isdigit():
        raise InvalidRequest(f"The NextToken {token!r} is not valid.")
    start = int(token)
    end = start + (r.get("MaxResults") or default)
    return items[start:end], ({"NextToken": str(end)} if end < len(items) else {})


def next(token: str | None) -> JsonDict:
    return {"NextToken": token} if token else {}
