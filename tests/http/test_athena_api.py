"""The Athena JSON API driven by the real clients (boto3, PyAthena, raw httpx) over HTTP.

The service behind the router is an in-memory fake of ``SqlApi``: these tests pin the
wire shapes and the auth, not query execution.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any
from unittest import mock

import boto3
import httpx
import pyathena
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials as BotoCredentials
from botocore.exceptions import ClientError
from fastapi import FastAPI

from lakeward.errors import InvalidRequest, ResourceNotFound, TooManyRequests, Unavailable
from lakeward.http.athena import CONTENT_TYPE, athena_router
from lakeward.metastore.tables import Column, TableInfo
from lakeward.query.model import (
    ColumnInfo,
    DataCatalog,
    NamedQuery,
    QueryExecution,
    QueryState,
    QueryStatistics,
    ResultPage,
    StatementType,
    WorkGroup,
)
from tests.helpers import serving

KEY, SECRET = "AKIDLAKEWARDTEST", "lakeward-test-secret"
SUBMITTED = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)
COLUMNS = [
    ColumnInfo("country", "varchar", precision=2147483647, nullable="NULLABLE"),
    ColumnInfo("cases", "bigint", precision=19, nullable="NULLABLE"),
    ColumnInfo("note", "varchar", precision=2147483647, nullable="UNKNOWN"),
]
DATA: list[list[str | None]] = [
    ["Austria", "10", None],
    ["Belgium", None, ""],
    ["Chile", "30", "third"],
]
TABLE = TableInfo(
    database="covid",
    name="confirmed",
    location="s3://lake/warehouse/covid/confirmed",
    columns=[Column("country", "string", "Country/Region"), Column("cases", "bigint")],
    partition_keys=[Column("day", "date")],
    parameters={"classification": "parquet"},
    input_format="org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat",
    serde="org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe",
)


class KeyPairs:
    def __init__(self, pairs: dict[str, str]) -> None:
        self.pairs = pairs

    def secret_for(self, access_key_id: str, session_token: str | None = None) -> str | None:
        return self.pairs.get(access_key_id) if session_token is None else None


class FakeSqlApi:
    """Canned answers; records what the HTTP layer asked for."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.executions: dict[str, QueryExecution] = {}
        self.catalogs = {
            "awsdatacatalog": DataCatalog(
                "awsdatacatalog", "HIVE", "the lake's metastore", {"metastore-uris": "thrift://m"}
            )
        }
        self.named: dict[str, NamedQuery] = {}

    def start_query_execution(self, query: str, **kwargs: Any) -> str:
        self.calls.append(("start", {"query": query, **kwargs}))
        if query == "SELECT throttled":
            raise TooManyRequests("Too many queries are running in workgroup primary.")
        if query == "SELECT bad":
            raise InvalidRequest("line 1:8: mismatched input 'bad'")
        if query == "SELECT crash":
            raise RuntimeError("secret internal detail /etc/lakeward")
        if query == "SELECT disk full":
            raise Unavailable("the audit log could not record the call (disk full); try again")
        execution_id = f"q-{len(self.executions) + 1:04d}"
        self.executions[execution_id] = QueryExecution(
            id=execution_id,
            query=query,
            statement_type=StatementType.DML,
            workgroup=kwargs.get("workgroup") or "primary",
            catalog=kwargs.get("catalog") or "awsdatacatalog",
            database=kwargs.get("database") or "default",
            output_location=f"s3://lake/query-results/{execution_id}.csv",
            state=QueryState.SUCCEEDED,
            submitted=SUBMITTED,
            completed=SUBMITTED + timedelta(seconds=1.5),
            statistics=QueryStatistics(1200, 4096, 1500, 100, 150, 50, result_reused=True),
        )
        return execution_id

    def get_query_execution(self, execution_id: str) -> QueryExecution:
        if execution_id not in self.executions:
            raise ResourceNotFound(f"QueryExecution {execution_id} was not found")
        return self.executions[execution_id]

    def get_query_results(
        self, execution_id: str, next_token: str | None = None, max_results: int = 1000
    ) -> ResultPage:
        self.get_query_execution(execution_id)
        self.calls.append(("results", {"next_token": next_token, "max_results": max_results}))
        rows: list[list[str | None]] = [[c.name for c in COLUMNS], *DATA]
        start = int(next_token or 0)
        end = start + max_results
        token = str(end) if end < len(rows) else None
        return ResultPage.of_rows(COLUMNS, rows[start:end], next_token=token)

    def stop_query_execution(self, execution_id: str) -> None:
        execution = self.get_query_execution(execution_id)
        self.executions[execution_id] = replace(execution, state=QueryState.CANCELLED)

    def list_query_executions(
        self, workgroup: str | None = None, next_token: str | None = None, max_results: int = 50
    ) -> tuple[list[str], str | None]:
        self.calls.append(("list_executions", {"workgroup": workgroup, "max": max_results}))
        return sorted(self.executions), None

    def batch_get_query_execution(
        self, execution_ids: list[str]
    ) -> tuple[list[QueryExecution], list[tuple[str, str]]]:
        found = [self.executions[i] for i in execution_ids if i in self.executions]
        missing = [(i, f"QueryExecution {i} was not found") for i in execution_ids]
        return found, [m for m in missing if m[0] not in self.executions]

    def list_data_catalogs(self) -> list[DataCatalog]:
        return list(self.catalogs.values())

    def get_data_catalog(self, name: str) -> DataCatalog:
        if name not in self.catalogs:
            raise ResourceNotFound(f"Catalog {name} was not found")
        return self.catalogs[name]

    def create_data_catalog(self, catalog: DataCatalog) -> None:
        self.catalogs[catalog.name] = catalog

    def delete_data_catalog(self, name: str) -> None:
        del self.catalogs[name]

    def list_databases(self, catalog: str) -> list[str]:
        self.get_data_catalog(catalog)
        return ["covid", "default", "sales"]

    def get_database(self, catalog: str, database: str) -> str:
        if database not in self.list_databases(catalog):
            raise ResourceNotFound(f"Database {database} was not found")
        return database

    def list_table_metadata(
        self, catalog: str, database: str, expression: str | None = None
    ) -> list[TableInfo]:
        self.calls.append(("list_tables", {"expression": expression}))
        return [TABLE, replace(TABLE, name="deaths")]

    def get_table_metadata(self, catalog: str, database: str, table: str) -> TableInfo:
        if table != TABLE.name:
            raise ResourceNotFound(f"Table {database}.{table} was not found")
        return TABLE

    def list_work_groups(self) -> list[WorkGroup]:
        return [self.get_work_group("primary")]

    def get_work_group(self, name: str) -> WorkGroup:
        if name != "primary":
            raise ResourceNotFound(f"WorkGroup {name} is not found.")
        return WorkGroup(
            "primary",
            description="default workgroup",
            output_location="s3://lake/query-results/primary/",
            bytes_scanned_cutoff=10_000_000_000,
            created=SUBMITTED,
        )

    def create_named_query(
        self,
        name: str,
        database: str,
        query: str,
        workgroup: str | None = None,
        description: str = "",
        client_request_token: str | None = None,
    ) -> str:
        named_query_id = f"nq-{len(self.named) + 1}"
        self.named[named_query_id] = NamedQuery(
            named_query_id, name, database, query, workgroup or "primary", description
        )
        return named_query_id

    def get_named_query(self, named_query_id: str) -> NamedQuery:
        if named_query_id not in self.named:
            raise ResourceNotFound(f"NamedQuery {named_query_id} was not found")
        return self.named[named_query_id]

    def list_named_queries(
        self, workgroup: str | None = None, next_token: str | None = None, max_results: int = 50
    ) -> tuple[list[str], str | None]:
        return sorted(self.named), None


@pytest.fixture(scope="module")
def fake() -> FakeSqlApi:
    return FakeSqlApi()


@pytest.fixture(scope="module")
def url(fake: FakeSqlApi) -> Iterator[str]:
    """The router served by uvicorn on a free port, in a background thread."""
    app = FastAPI()
    app.include_router(athena_router(fake, KeyPairs({KEY: SECRET}), max_body_bytes=64 * 1024))
    with serving(app, lifespan="off") as url:
        yield url


def athena(url: str, key: str = KEY, secret: str = SECRET, **config: Any) -> Any:
    # No retries: a retried 500 or throttle would only slow the tests down.
    retries = Config(retries={"total_max_attempts": 1}, **config)
    return boto3.client(
        "athena",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id=key,
        aws_secret_access_key=secret,
        config=retries,
    )


def signed(
    url: str, operation: str, body: dict[str, Any] | bytes, when: datetime | None = None
) -> tuple[dict[str, str], bytes]:
    """Headers and body of a request signed by botocore (at ``when`` if given)."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = {"Content-Type": CONTENT_TYPE, "X-Amz-Target": f"AmazonAthena.{operation}"}
    request = AWSRequest(method="POST", url=url + "/", data=data, headers=headers)
    signer = SigV4Auth(BotoCredentials(KEY, SECRET), "athena", "us-east-1")
    if when is None:
        signer.add_auth(request)
    else:  # botocore stamps a naive UTC "now"
        naive = when.astimezone(UTC).replace(tzinfo=None)
        with mock.patch("botocore.auth.get_current_datetime", return_value=naive):
            signer.add_auth(request)
    return dict(request.headers.items()), data


def assert_athena_error(response: httpx.Response, kind: str, status: int = 400) -> str:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == CONTENT_TYPE
    body = response.json()
    assert body["__type"] == kind
    assert "Traceback" not in response.text
    message: str = body["Message"]
    return message


def test_start_get_and_page_results(url: str, fake: FakeSqlApi) -> None:
    client = athena(url)
    execution_id = client.start_query_execution(
        QueryString="SELECT * FROM confirmed",
        QueryExecutionContext={"Catalog": "awsdatacatalog", "Database": "covid"},
        ResultConfiguration={"OutputLocation": "s3://lake/out/"},
        ResultReuseConfiguration={"ResultReuseByAgeConfiguration": {"Enabled": True}},
        ExecutionParameters=["'Austria'"],
        WorkGroup="primary",
    )["QueryExecutionId"]
    _, started = fake.calls[-1]
    assert started["database"] == "covid" and started["catalog"] == "awsdatacatalog"
    assert started["output_location"] == "s3://lake/out/"
    assert started["reuse_max_age_minutes"] == 60  # Athena's default age
    assert started["execution_parameters"] == ["'Austria'"]
    assert started["principal"] == KEY
    assert len(started["client_request_token"]) >= 32  # botocore fills it in

    execution = client.get_query_execution(QueryExecutionId=execution_id)["QueryExecution"]
    assert execution["QueryExecutionId"] == execution_id
    assert execution["Query"] == "SELECT * FROM confirmed"
    assert execution["StatementType"] == "DML"
    assert execution["WorkGroup"] == "primary"
    assert execution["QueryExecutionContext"] == {"Catalog": "awsdatacatalog", "Database": "covid"}
    assert execution["ResultConfiguration"]["OutputLocation"].endswith(f"{execution_id}.csv")
    status = execution["Status"]
    assert status["State"] == "SUCCEEDED"
    assert status["SubmissionDateTime"] == SUBMITTED
    assert status["CompletionDateTime"] == SUBMITTED + timedelta(seconds=1.5)
    assert execution["Statistics"] == {
        "EngineExecutionTimeInMillis": 1200,
        "DataScannedInBytes": 4096,
        "TotalExecutionTimeInMillis": 1500,
        "QueryQueueTimeInMillis": 100,
        "QueryPlanningTimeInMillis": 150,
        "ServiceProcessingTimeInMillis": 50,
        "ResultReuseInformation": {"ReusedPreviousResult": True},
    }
    assert execution["EngineVersion"]["EffectiveEngineVersion"] == "duckdb"

    first = client.get_query_results(QueryExecutionId=execution_id, MaxResults=2)
    rows = first["ResultSet"]["Rows"]
    assert rows[0] == {"Data": [{"VarCharValue": "country"}, {"VarCharValue": "cases"},
                                {"VarCharValue": "note"}]}  # fmt: skip
    assert rows[1] == {"Data": [{"VarCharValue": "Austria"}, {"VarCharValue": "10"}, {}]}
    assert first["UpdateCount"] == 0
    info = first["ResultSet"]["ResultSetMetadata"]["ColumnInfo"][1]
    assert info == {
        "CatalogName": "hive", "SchemaName": "", "TableName": "", "Name": "cases",
        "Label": "cases", "Type": "bigint", "Precision": 19, "Scale": 0,
        "Nullable": "NULLABLE", "CaseSensitive": False,
    }  # fmt: skip
    second = client.get_query_results(
        QueryExecutionId=execution_id, MaxResults=2, NextToken=first["NextToken"]
    )
    assert second["ResultSet"]["Rows"] == [
        {"Data": [{"VarCharValue": "Belgium"}, {}, {"VarCharValue": ""}]},
        {"Data": [{"VarCharValue": "Chile"}, {"VarCharValue": "30"}, {"VarCharValue": "third"}]},
    ]
    assert "NextToken" not in second


def test_stop_list_and_batch_get(url: str, fake: FakeSqlApi) -> None:
    client = athena(url)
    execution_id = client.start_query_execution(QueryString="SELECT 1")["QueryExecutionId"]
    client.stop_query_execution(QueryExecutionId=execution_id)
    assert fake.executions[execution_id].state == QueryState.CANCELLED

    listed = client.list_query_executions(WorkGroup="primary", MaxResults=10)
    assert execution_id in listed["QueryExecutionIds"]
    assert fake.calls[-1] == ("list_executions", {"workgroup": "primary", "max": 10})

    batch = client.batch_get_query_execution(QueryExecutionIds=[execution_id, "q-nope"])
    assert [q["QueryExecutionId"] for q in batch["QueryExecutions"]] == [execution_id]
    assert batch["QueryExecutions"][0]["Status"]["State"] == "CANCELLED"
    (unprocessed,) = batch["UnprocessedQueryExecutionIds"]
    assert unprocessed["QueryExecutionId"] == "q-nope"
    assert unprocessed["ErrorCode"] and "not found" in unprocessed["ErrorMessage"]


def test_data_catalogs(url: str) -> None:
    client = athena(url)
    summary = client.list_data_catalogs()["DataCatalogsSummary"]
    assert {"CatalogName": "awsdatacatalog", "Type": "HIVE"} in summary
    catalog = client.get_data_catalog(Name="awsdatacatalog")["DataCatalog"]
    assert catalog == {
        "Name": "awsdatacatalog",
        "Type": "HIVE",
        "Description": "the lake's metastore",
        "Parameters": {"metastore-uris": "thrift://m"},
    }
    created = client.create_data_catalog(
        Name="partner", Type="HIVE", Parameters={"metastore-uris": "thrift://partner:9083"}
    )
    assert created["DataCatalog"]["Name"] == "partner"
    assert client.get_data_catalog(Name="partner")["DataCatalog"]["Type"] == "HIVE"
    deleted = client.delete_data_catalog(Name="partner")
    assert deleted["DataCatalog"]["Name"] == "partner"
    with pytest.raises(client.exceptions.ResourceNotFoundException, match="partner"):
        client.get_data_catalog(Name="partner")


def test_databases_and_table_metadata(url: str, fake: FakeSqlApi) -> None:
    client = athena(url)
    paginator = client.get_paginator("list_databases")
    pages = list(paginator.paginate(CatalogName="awsdatacatalog", PaginationConfig={"PageSize": 2}))
    assert [len(p["DatabaseList"]) for p in pages] == [2, 1]
    names = [d["Name"] for p in pages for d in p["DatabaseList"]]
    assert names == ["covid", "default", "sales"]
    database = client.get_database(CatalogName="awsdatacatalog", DatabaseName="covid")
    assert database["Database"] == {"Name": "covid"}

    listed = client.list_table_metadata(
        CatalogName="awsdatacatalog", DatabaseName="covid", Expression="conf*"
    )
    assert fake.calls[-1] == ("list_tables", {"expression": "conf*"})
    assert [t["Name"] for t in listed["TableMetadataList"]] == ["confirmed", "deaths"]
    table = client.get_table_metadata(
        CatalogName="awsdatacatalog", DatabaseName="covid", TableName="confirmed"
    )["TableMetadata"]
    assert table["Name"] == "confirmed" and table["TableType"] == "EXTERNAL_TABLE"
    assert table["Columns"] == [
        {"Name": "country", "Type": "string", "Comment": "Country/Region"},
        {"Name": "cases", "Type": "bigint"},
    ]
    assert table["PartitionKeys"] == [{"Name": "day", "Type": "date"}]
    assert table["Parameters"]["location"] == TABLE.location
    assert table["Parameters"]["classification"] == "parquet"
    assert table["Parameters"]["serde.serialization.lib"] == TABLE.serde


def test_work_groups(url: str) -> None:
    client = athena(url)
    (summary,) = client.list_work_groups()["WorkGroups"]
    assert summary["Name"] == "primary" and summary["State"] == "ENABLED"
    assert summary["CreationTime"] == SUBMITTED
    assert summary["EngineVersion"]["SelectedEngineVersion"] == "duckdb"
    group = client.get_work_group(WorkGroup="primary")["WorkGroup"]
    assert group["Description"] == "default workgroup"
    configuration = group["Configuration"]
    assert configuration["ResultConfiguration"] == {
        "OutputLocation": "s3://lake/query-results/primary/"
    }
    assert configuration["EnforceWorkGroupConfiguration"] is True
    assert configuration["BytesScannedCutoffPerQuery"] == 10_000_000_000
    with pytest.raises(client.exceptions.ResourceNotFoundException):
        client.get_work_group(WorkGroup="nope")


def test_named_queries(url: str) -> None:
    client = athena(url)
    named_query_id = client.create_named_query(
        Name="top countries", Database="covid", QueryString="SELECT 1", Description="d"
    )["NamedQueryId"]
    named = client.get_named_query(NamedQueryId=named_query_id)["NamedQuery"]
    assert named == {
        "Name": "top countries",
        "Description": "d",
        "Database": "covid",
        "QueryString": "SELECT 1",
        "NamedQueryId": named_query_id,
        "WorkGroup": "primary",
    }
    assert named_query_id in client.list_named_queries()["NamedQueryIds"]


def test_service_errors_reach_botocore_as_athena_exceptions(url: str) -> None:
    client = athena(url)
    with pytest.raises(client.exceptions.InvalidRequestException) as invalid:
        client.start_query_execution(QueryString="SELECT bad")
    assert invalid.value.response["Error"]["Message"] == "line 1:8: mismatched input 'bad'"
    assert invalid.value.response["AthenaErrorCode"]
    with pytest.raises(client.exceptions.ResourceNotFoundException, match="q-missing"):
        client.get_query_execution(QueryExecutionId="q-missing")
    with pytest.raises(client.exceptions.TooManyRequestsException):
        client.start_query_execution(QueryString="SELECT throttled")


def test_unexpected_failure_is_a_plain_500_logged_with_its_trace(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    headers, body = signed(url, "StartQueryExecution", {"QueryString": "SELECT crash"})
    with caplog.at_level(logging.ERROR, logger="lakeward.http.athena"):
        response = httpx.post(url + "/", headers=headers, content=body)
    message = assert_athena_error(response, "InternalServerException", status=500)
    assert "secret internal detail" not in response.text
    assert message == "Internal server error"
    (record,) = [r for r in caplog.records if r.name == "lakeward.http.athena"]
    assert record.exc_info and "secret internal detail" in str(record.exc_info[1])
    assert response.headers["x-amzn-requestid"] in record.getMessage()
    with pytest.raises(athena(url).exceptions.InternalServerException):
        athena(url).start_query_execution(QueryString="SELECT crash")


def test_a_passing_failure_is_a_500_naming_it_logged_without_a_trace(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    headers, body = signed(url, "StartQueryExecution", {"QueryString": "SELECT disk full"})
    with caplog.at_level(logging.WARNING, logger="lakeward.http.athena"):
        response = httpx.post(url + "/", headers=headers, content=body)
    message = assert_athena_error(response, "InternalServerException", status=500)
    assert message == "the audit log could not record the call (disk full); try again"
    (record,) = [r for r in caplog.records if r.name == "lakeward.http.athena"]
    assert record.levelno == logging.WARNING and not record.exc_info
    assert message in record.getMessage()


def test_requests_outside_the_model_are_invalid(url: str) -> None:
    # Without client-side validation botocore sends what it is given, as other clients may.
    client = athena(url, parameter_validation=False)
    with pytest.raises(
        client.exceptions.InvalidRequestException, match="less than or equal to 1000"
    ):
        client.get_query_results(QueryExecutionId="q-0001", MaxResults=2000)
    with pytest.raises(client.exceptions.InvalidRequestException, match="'queryString'.*null"):
        client.start_query_execution(WorkGroup="primary")
    with pytest.raises(client.exceptions.InvalidRequestException, match="be an integer"):
        client.list_query_executions(MaxResults="ten")
    with pytest.raises(client.exceptions.InvalidRequestException, match="'workGroup'.*pattern"):
        client.get_work_group(WorkGroup="no spaces allowed")
    with pytest.raises(client.exceptions.InvalidRequestException, match="enum"):
        client.create_data_catalog(Name="x", Type="ORACLE")
    with pytest.raises(client.exceptions.InvalidRequestException, match="NextToken"):
        client.list_databases(CatalogName="awsdatacatalog", NextToken="garbage")


def test_malformed_requests_get_athena_shaped_400s(url: str) -> None:
    headers, body = signed(url, "GetQueryExecution", b'{"QueryExecutionId": ')
    message = assert_athena_error(httpx.post(url + "/", headers=headers, content=body),
                                  "InvalidRequestException")  # fmt: skip
    assert "Could not parse request body" in message

    headers, body = signed(url, "GetQueryExecution", b"[1, 2]")
    assert_athena_error(httpx.post(url + "/", headers=headers, content=body),
                        "InvalidRequestException")  # fmt: skip

    headers, body = signed(url, "DropEverything", {})
    message = assert_athena_error(httpx.post(url + "/", headers=headers, content=body),
                                  "InvalidRequestException")  # fmt: skip
    assert "Unknown operation" in message

    big = {"QueryString": "SELECT '" + "x" * 70_000 + "'"}
    headers, body = signed(url, "StartQueryExecution", big)
    message = assert_athena_error(httpx.post(url + "/", headers=headers, content=body),
                                  "InvalidRequestException")  # fmt: skip
    assert message.startswith("request body too large")


def test_wrong_secret_and_unknown_key_are_denied_by_athenas_names(url: str) -> None:
    with pytest.raises(ClientError) as wrong:
        athena(url, secret="not-the-secret").list_work_groups()
    assert wrong.value.response["Error"]["Code"] == "InvalidSignatureException"
    assert "signature we calculated does not match" in wrong.value.response["Error"]["Message"]

    with pytest.raises(ClientError) as unknown:
        athena(url, key="AKIDSOMEONEELSE").list_work_groups()
    assert unknown.value.response["Error"]["Code"] == "UnrecognizedClientException"
    assert unknown.value.response["Error"]["Message"] == (
        "The security token included in the request is invalid."
    )


def test_unsigned_request_is_denied(url: str) -> None:
    response = httpx.post(
        url + "/",
        headers={"Content-Type": CONTENT_TYPE, "X-Amz-Target": "AmazonAthena.ListWorkGroups"},
        content=b"{}",
    )
    message = assert_athena_error(response, "MissingAuthenticationTokenException")
    assert "Missing Authentication Token" in message


def test_request_signed_six_minutes_ago_is_expired(url: str) -> None:
    when = datetime.now(UTC) - timedelta(minutes=6)
    headers, body = signed(url, "ListWorkGroups", {}, when=when)
    message = assert_athena_error(
        httpx.post(url + "/", headers=headers, content=body), "AccessDeniedException"
    )
    assert message.startswith(f"Signature expired: {when.strftime('%Y%m%dT%H%M%SZ')} is now")


def test_a_replayed_change_is_refused_a_failed_one_retried_and_polls_pass(
    url: str, fake: FakeSqlApi
) -> None:
    create = {"Name": "replayed", "Database": "default", "QueryString": "SELECT 1"}
    headers, body = signed(url, "CreateNamedQuery", create)
    with httpx.Client() as http:
        first = http.post(url + "/", headers=headers, content=body)
        assert first.status_code == 200, first.text
        replay = http.post(url + "/", headers=headers, content=body)
        assert "already been received" in assert_athena_error(replay, "AccessDeniedException")
        assert [n.name for n in fake.named.values()].count("replayed") == 1

        # A call that failed did nothing: the same request again (as botocore's retry signed
        # in the same second is) is a retry, not a replay.
        headers, body = signed(url, "StartQueryExecution", {"QueryString": "SELECT throttled"})
        for _ in range(2):
            throttled = http.post(url + "/", headers=headers, content=body)
            assert_athena_error(throttled, "TooManyRequestsException")

        # A start with a ClientRequestToken is the same start again: the service answers
        # it with the token's execution, as Athena does.
        start = {"QueryString": "SELECT 42", "ClientRequestToken": "replay-" + "0" * 26}
        headers, body = signed(url, "StartQueryExecution", start)
        for _ in range(2):
            again = http.post(url + "/", headers=headers, content=body)
            assert again.status_code == 200, again.text

        poll = {"QueryExecutionId": again.json()["QueryExecutionId"]}
        headers, body = signed(url, "GetQueryExecution", poll)
        for _ in range(2):
            response = http.post(url + "/", headers=headers, content=body)
            assert response.status_code == 200, response.text
            assert response.json()["QueryExecution"]["Status"]["State"] == "SUCCEEDED"


def test_pyathena_runs_a_query_and_fetches_rows(url: str, fake: FakeSqlApi) -> None:
    connection = pyathena.connect(
        s3_staging_dir="s3://x/",
        region_name="us-east-1",
        endpoint_url=url,
        aws_access_key_id=KEY,
        aws_secret_access_key=SECRET,
        work_group="primary",
        poll_interval=0.05,
    )
    with connection, connection.cursor() as cursor:
        cursor.execute("SELECT country, cases, note FROM confirmed")
        assert [d[0] for d in cursor.description] == ["country", "cases", "note"]
        # The labels row is dropped; bigint comes back as int, NULL as None.
        assert cursor.fetchall() == [("Austria", 10, None), ("Belgium", None, ""),
                                     ("Chile", 30, "third")]  # fmt: skip
        assert cursor.state == "SUCCEEDED"
        assert cursor.data_scanned_in_bytes == 4096
    started = [args for op, args in fake.calls if op == "start"][-1]
    assert started["output_location"] == "s3://x/"
    assert started["workgroup"] == "primary"
    assert started["principal"] == KEY
