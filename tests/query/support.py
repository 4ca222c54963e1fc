"""What the SQL service's tests share: running a statement to its end, through the service
or through Athena's API. Not a test module: test modules import from here, never from one
another."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from lakeward.config import Settings
from lakeward.query.model import QueryExecution, QueryState
from lakeward.query.service import QueryService
from lakeward.storage.paths import lake_place
from tests.helpers import lake_path

CATALOG = "demo_hive_metastore"
MEMORY = "mem"  # the in-memory catalog of the memory_service fixture


def wait(service: QueryService, execution_id: str, timeout: float = 120) -> QueryExecution:
    deadline = time.monotonic() + timeout
    while True:
        execution = service.get_query_execution(execution_id)
        if execution.state.done:
            return execution
        assert time.monotonic() < deadline, execution
        time.sleep(0.02)


def all_rows(service: QueryService, execution_id: str) -> tuple[list[str], list[list[str | None]]]:
    rows: list[list[str | None]] = []
    token = None
    while True:
        page = service.get_query_results(execution_id, token, 1000)
        rows.extend(page.rows)
        token = page.next_token
        if token is None:
            names = [c.name for c in page.columns]
            return names, rows


def run(
    service: QueryService, sql: str, **kwargs: object
) -> tuple[list[str], list[list[str | None]]]:
    """Run ``sql`` to success; its column names and rows (without Athena's labels row)."""
    execution = wait(service, service.start_query_execution(sql, **kwargs))  # type: ignore[arg-type]
    assert execution.state == QueryState.SUCCEEDED, execution.state_change_reason
    names, rows = all_rows(service, execution.id)
    if execution.statement_type.value == "DML":
        assert rows[0] == names  # Athena's labels row
        rows = rows[1:]
    return names, rows


def written(service: QueryService, sql: str, **kwargs: object) -> int:
    """Run a write (CTAS, INSERT) to success; the rows it wrote, its UpdateCount (a write's
    result is the ``rows`` column with no row, as Athena's)."""
    execution = wait(service, service.start_query_execution(sql, **kwargs))  # type: ignore[arg-type]
    assert execution.state == QueryState.SUCCEEDED, execution.state_change_reason
    page = service.get_query_results(execution.id)
    assert page.rows == [["rows"]]
    return page.update_count


def failure(service: QueryService, sql: str, **kwargs: object) -> str:
    """Run ``sql``, which must fail; the reason it gives."""
    execution = wait(service, service.start_query_execution(sql, **kwargs))  # type: ignore[arg-type]
    assert execution.state == QueryState.FAILED, execution
    return execution.state_change_reason or ""


def lake_files(service: QueryService, location: str) -> list[str]:
    """The keys of the objects under a place in the lake, sorted."""
    place = lake_place(service.settings, location)
    assert place is not None
    bucket, key = place
    return sorted(service.storage.keys(bucket, key.rstrip("/") + "/"))


def local(settings: Settings, location: str) -> Path:
    """The path on this machine of a place in the embedded lake, however it is named."""
    return lake_path(settings, location)


def endpoint(stack: Settings) -> str:
    return f"http://{stack.server.host}:{stack.server.port}"


def credentials(stack: Settings) -> dict[str, Any]:
    return {
        "region_name": "us-east-1",
        "aws_access_key_id": stack.api.access_key_id,
        "aws_secret_access_key": stack.api.secret_access_key,
    }


def client_for(stack: Settings, key_id: str | None = None, secret: str | None = None) -> Any:
    import boto3

    return boto3.client(
        "athena",
        endpoint_url=endpoint(stack),
        region_name="us-east-1",
        aws_access_key_id=key_id or stack.api.access_key_id,
        aws_secret_access_key=secret or stack.api.secret_access_key,
    )


def api_run(athena: Any, sql: str) -> dict[str, Any]:
    """Start ``sql``, wait for it; its execution, with ``rows`` (no header) if it succeeded."""
    execution_id = athena.start_query_execution(QueryString=sql)["QueryExecutionId"]
    while True:
        execution = athena.get_query_execution(QueryExecutionId=execution_id)["QueryExecution"]
        if execution["Status"]["State"] in ("SUCCEEDED", "FAILED", "CANCELLED"):
            break
        time.sleep(0.05)
    if execution["Status"]["State"] == "SUCCEEDED":
        execution["rows"] = []
        pages = athena.get_paginator("get_query_results").paginate(QueryExecutionId=execution_id)
        for page in pages:
            result = page["ResultSet"]
            execution["rows"] += [
                [d.get("VarCharValue") for d in r["Data"]] for r in result["Rows"]
            ]
            execution["columns"] = [c["Name"] for c in result["ResultSetMetadata"]["ColumnInfo"]]
    return execution


def api_ok(athena: Any, sql: str) -> dict[str, Any]:
    execution = api_run(athena, sql)
    assert execution["Status"]["State"] == "SUCCEEDED", (sql, execution["Status"])
    return execution


def api_failed(athena: Any, sql: str) -> str:
    execution = api_run(athena, sql)
    assert execution["Status"]["State"] == "FAILED", (sql, execution["Status"])
    return str(execution["Status"]["StateChangeReason"])


def outside_catalog(stack: Settings) -> Any:
    """pyiceberg's HiveCatalog as an outside client configures it: the metastore's Thrift
    address and the stack's S3 endpoint with its key pair."""
    from pyiceberg.catalog.hive import HiveCatalog

    from lakeward.metastore.uris import metastore_uris

    keys = credentials(stack)
    return HiveCatalog(
        "outside",
        uri=",".join(metastore_uris(stack)),
        **{
            "s3.endpoint": endpoint(stack),
            "s3.access-key-id": keys["aws_access_key_id"],
            "s3.secret-access-key": keys["aws_secret_access_key"],
            "s3.region": "us-east-1",
        },
    )
