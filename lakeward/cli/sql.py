"""``lakeward query``: run SQL through the stack's Athena-compatible API.

It goes through the API (not the service in-process), so it works the same
against a remote server: ``--endpoint`` and the usual AWS key variables.
"""

from __future__ import annotations

import csv
import json
import sys
import time
from typing import Any

from lakeward.config import Settings
from lakeward.errors import InvalidRequest, LakewardError, StackError


def athena_client(settings: Settings, endpoint: str | None = None) -> Any:
    import boto3

    api = settings.api
    if endpoint is None:
        if settings.server.port is None:
            raise StackError("the stack is not up; start it with: lakeward up")
        endpoint = settings.server_url
    return boto3.client(
        "athena",
        endpoint_url=endpoint,
        region_name=api.region,
        aws_access_key_id=api.access_key_id,
        aws_secret_access_key=api.secret_access_key,
    )


_WRITES = ("CREATE_TABLE_AS_SELECT", "INSERT")  # answer their count as UpdateCount


def run_query(
    client: Any,
    sql: str,
    catalog: str | None,
    database: str | None,
    workgroup: str | None,
    poll: float = 0.05,
) -> tuple[list[str], list[list[str | None]], dict[str, Any]]:
    """Start, wait, page: the column names, the rows, and the execution."""
    from botocore.exceptions import ClientError, EndpointConnectionError

    context = {k: v for k, v in (("Catalog", catalog), ("Database", database)) if v}
    try:
        started = client.start_query_execution(
            QueryString=sql,
            QueryExecutionContext=context,
            **({"WorkGroup": workgroup} if workgroup else {}),
        )
        execution_id = started["QueryExecutionId"]
        try:
            while True:
                execution = client.get_query_execution(QueryExecutionId=execution_id)
                status = execution["QueryExecution"]["Status"]
                if status["State"] in ("SUCCEEDED", "FAILED", "CANCELLED"):
                    break
                time.sleep(poll)
                poll = min(poll * 1.5, 1.0)
        except KeyboardInterrupt:
            client.stop_query_execution(QueryExecutionId=execution_id)
            raise
        if status["State"] != "SUCCEEDED":
            raise InvalidRequest(
                f"query {status['State'].lower()}: {status.get('StateChangeReason', '')}"
            )
        names: list[str] = []
        rows: list[list[str | None]] = []
        first = True
        for page in client.get_paginator("get_query_results").paginate(
            QueryExecutionId=execution_id
        ):
            result = page["ResultSet"]
            names = [c["Name"] for c in result["ResultSetMetadata"]["ColumnInfo"]]
            page_rows = [[d.get("VarCharValue") for d in r["Data"]] for r in result["Rows"]]
            is_select = execution["QueryExecution"].get("StatementType") == "DML"
            if first and is_select and page_rows and page_rows[0] == names:
                page_rows = page_rows[1:]  # the labels row Athena puts first
            writes = execution["QueryExecution"].get("SubstatementType") in _WRITES
            if first and writes and "UpdateCount" in page:
                page_rows = [[str(page["UpdateCount"])]]  # a write's count: its only row
            first = False
            rows.extend(page_rows)
    except ClientError as exc:
        error = exc.response.get("Error", {})
        raise InvalidRequest(f"{error.get('Code')}: {error.get('Message')}") from None
    except EndpointConnectionError as exc:
        raise StackError(f"the server does not answer ({exc}); is the stack up?") from None
    return names, rows, execution["QueryExecution"]


def print_result(names: list[str], rows: list[list[str | None]], output: str) -> None:
    if output == "csv":
        writer = csv.writer(sys.stdout)
        writer.writerow(names)
        writer.writerows(rows)
    elif output == "json":
        print(json.dumps([dict(zip(names, r, strict=True)) for r in rows], indent=2))
    else:
        from rich.table import Table

        from lakeward.cli._common import out

        table = Table(*names)
        for row in rows:
            table.add_row(*("NULL" if v is None else v for v in row))
        out.print(table)


__all__ = ["LakewardError", "athena_client", "print_result", "run_query"]
