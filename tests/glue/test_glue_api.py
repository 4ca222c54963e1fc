"""boto3's glue and sts clients, unchanged, against the stack: what Glue users see is what the
SQL service and Spark see, Glue's errors by Glue's names, table versions, and IAM."""

from __future__ import annotations

import io
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from botocore.exceptions import ClientError

from lakeward.access.control import AccessControl
from lakeward.config import Settings
from lakeward.metastore.tables import PARQUET
from tests.access.test_seed_users import creds
from tests.helpers import lakeward
from tests.query.support import api_ok, api_run, credentials, endpoint

pytestmark = pytest.mark.spark


def client(stack: Settings, service: str, key: dict[str, str] | None = None) -> Any:
    given = (
        {
            "aws_access_key_id": key["access_key_id"],
            "aws_secret_access_key": key["secret_access_key"],
        }
        if key
        else {k: v for k, v in credentials(stack).items() if k != "region_name"}
    )
    return boto3.client(service, endpoint_url=endpoint(stack), region_name="us-east-1", **given)


def parquet(rows: dict[str, list[Any]]) -> bytes:
    sink = io.BytesIO()
    pq.write_table(pa.table(rows), sink)
    return sink.getvalue()


def table_input(
    name: str, location: str, partition_keys: list[dict[str, str]] | None = None
) -> dict[str, Any]:
    return {
        "Name": name,
        "TableType": "EXTERNAL_TABLE",
        "Parameters": {"classification": "parquet"},
        "PartitionKeys": partition_keys or [],
        "StorageDescriptor": {
            "Columns": [{"Name": "id", "Type": "bigint"}, {"Name": "name", "Type": "string"}],
            "Location": location,
            "InputFormat": PARQUET["input_format"],
            "OutputFormat": PARQUET["output_format"],
            "SerdeInfo": {"SerializationLibrary": PARQUET["serde"]},
        },
    }


@pytest.fixture
def database(stack: Settings) -> Any:
    glue = client(stack, "glue")
    name = f"glue_{uuid.uuid4().hex[:8]}"
    glue.create_database(DatabaseInput={"Name": name, "Description": "made through Glue"})
    yield name
    glue.delete_database(Name=name)


def test_tables_made_by_spark_and_sql_are_glue_tables_and_glue_tables_are_queried(
    stack: Settings, database: str
) -> None:
    glue, s3, athena = client(stack, "glue"), client(stack, "s3"), client(stack, "athena")
    # The ETL's tables (Spark's) are there, with the s3:// locations the metastore keeps.
    covid = glue.get_table(DatabaseName="default", Name="covid_deaths")["Table"]
    assert covid["StorageDescriptor"]["Location"].startswith(f"s3://{stack.lake.data_bucket}/")
    assert {"covid_deaths", "covid_cases"} <= {
        t["Name"] for t in glue.get_tables(DatabaseName="default")["TableList"]
    }
    # A table made by SQL is seen by Glue at once...
    api_ok(athena, f"CREATE TABLE {database}.made_by_sql AS SELECT 1 AS one")
    made = glue.get_table(DatabaseName=database, Name="made_by_sql")["Table"]
    assert [c["Name"] for c in made["StorageDescriptor"]["Columns"]] == ["one"]
    # ...and one made by Glue over files put through S3 is queried by SQL at once.
    key = f"glue-tests/{database}/people/part-0.parquet"
    s3.put_object(
        Bucket=stack.lake.data_bucket,
        Key=key,
        Body=parquet({"id": [1, 2, 3], "name": ["ada", "grace", "alan"]}),
    )
    location = f"s3://{stack.lake.data_bucket}/glue-tests/{database}/people/"
    glue.create_table(DatabaseName=database, TableInput=table_input("people", location))
    result = api_ok(athena, f"SELECT name FROM {database}.people WHERE id > 1 ORDER BY id")
    assert result["rows"][1:] == [["grace"], ["alan"]]  # after Athena's labels row
    listed = glue.get_tables(DatabaseName=database, Expression="peo*")["TableList"]
    assert [t["Name"] for t in listed] == ["people"]
    with pytest.raises(glue.exceptions.AlreadyExistsException):
        glue.create_table(DatabaseName=database, TableInput=table_input("people", location))
    # Deleted through Glue: gone for SQL too.
    errors = glue.batch_delete_table(DatabaseName=database, TablesToDelete=["people", "nope"])
    assert [(e["TableName"], e["ErrorDetail"]["ErrorCode"]) for e in errors["Errors"]] == [
        ("nope", "EntityNotFoundException")
    ]
    failed = api_run(athena, f"SELECT * FROM {database}.people")
    assert failed["Status"]["State"] == "FAILED"
    assert "people" in failed["Status"]["StateChangeReason"]


def test_partitions_with_expressions_segments_and_per_partition_errors(
    stack: Settings, database: str
) -> None:
    glue, s3, athena = client(stack, "glue"), client(stack, "s3"), client(stack, "athena")
    base = f"s3://{stack.lake.data_bucket}/glue-tests/{database}/events"
    keys = [{"Name": "year", "Type": "int"}, {"Name": "country", "Type": "string"}]
    glue.create_table(DatabaseName=database, TableInput=table_input("events", base + "/", keys))
    partitions = []
    for year in (2019, 2020, 2021):
        for country in ("FR", "US"):
            prefix = f"glue-tests/{database}/events/year={year}/country={country}"
            s3.put_object(
                Bucket=stack.lake.data_bucket,
                Key=f"{prefix}/data.parquet",
                Body=parquet({"id": [year], "name": [country]}),
            )
            partitions.append(
                {
                    "Values": [str(year), country],
                    "StorageDescriptor": {"Location": f"s3://{stack.lake.data_bucket}/{prefix}/"},
                }
            )
    assert (
        glue.batch_create_partition(
            DatabaseName=database, TableName="events", PartitionInputList=partitions
        )["Errors"]
        == []
    )
    again = glue.batch_create_partition(
        DatabaseName=database,
        TableName="events",
        PartitionInputList=[partitions[0], {"Values": ["2022"]}],
    )["Errors"]
    assert [e["ErrorDetail"]["ErrorCode"] for e in again] == [
        "AlreadyExistsException",
        "InvalidInputException",
    ]

    def values(**request: Any) -> list[list[str]]:
        found = glue.get_partitions(DatabaseName=database, TableName="events", **request)
        return sorted(p["Values"] for p in found["Partitions"])

    assert values(Expression="year > 2019 AND country = 'US'") == [["2020", "US"], ["2021", "US"]]
    assert values(Expression="year BETWEEN 2019 AND 2020 AND country IN ('FR')") == [
        ["2019", "FR"],
        ["2020", "FR"],
    ]
    halves = [values(Segment={"SegmentNumber": n, "TotalSegments": 2}) for n in (0, 1)]
    assert sorted(halves[0] + halves[1]) == values() and len(values()) == 6
    with pytest.raises(ClientError) as bad:
        glue.get_partitions(DatabaseName=database, TableName="events", Expression="yeer = 1")
    assert bad.value.response["Error"]["Code"] == "InvalidInputException"
    assert "yeer is not a partition key" in bad.value.response["Error"]["Message"]
    # SQL reads the partitions Glue registered, and prunes by them.
    rows = api_ok(athena, f"SELECT id, name FROM {database}.events WHERE year = 2020 ORDER BY name")
    assert rows["rows"][1:] == [["2020", "FR"], ["2020", "US"]]
    # Deleted partitions: per-partition errors for those that do not exist.
    errors = glue.batch_delete_partition(
        DatabaseName=database,
        TableName="events",
        PartitionsToDelete=[{"Values": ["2019", "FR"]}, {"Values": ["1999", "FR"]}],
    )["Errors"]
    assert [e["PartitionValues"] for e in errors] == [["1999", "FR"]]
    assert errors[0]["ErrorDetail"]["ErrorCode"] == "EntityNotFoundException"
    rows = api_ok(athena, f"SELECT count(*) FROM {database}.events WHERE year = 2019")
    assert rows["rows"][1:] == [["1"]]
    got = glue.batch_get_partition(
        DatabaseName=database, TableName="events", PartitionsToGet=[{"Values": ["2021", "FR"]}]
    )["Partitions"]
    assert got[0]["StorageDescriptor"]["Location"].rstrip("/").endswith("year=2021/country=FR")


def test_glue_errors_name_what_is_wrong(stack: Settings, database: str) -> None:
    glue = client(stack, "glue")
    with pytest.raises(glue.exceptions.EntityNotFoundException):
        glue.get_tables(DatabaseName="no_such_database")
    with pytest.raises(glue.exceptions.EntityNotFoundException):
        glue.get_table(DatabaseName=database, Name="no_such_table")
    with pytest.raises(glue.exceptions.InvalidInputException, match="LocationUri"):
        glue.update_database(
            Name=database, DatabaseInput={"Name": database, "LocationUri": "s3://elsewhere/x"}
        )
    with pytest.raises(glue.exceptions.InvalidInputException, match="TableInput.Name"):
        glue.create_table(DatabaseName=database, TableInput=table_input("bad name!", "s3://x/y/"))
    # Glue's own model checks what botocore leaves to the service (lengths, patterns).
    with pytest.raises(glue.exceptions.InvalidInputException, match="'tableInput.name'"):
        glue.create_table(DatabaseName=database, TableInput=table_input("t" * 300, "s3://x/y/"))
    # A key or signature refused, by the names AWS's JSON services give them.
    stranger = client(stack, "glue", {"access_key_id": "AKIDSTRANGER", "secret_access_key": "x"})
    with pytest.raises(ClientError) as refused:
        stranger.get_databases()
    assert refused.value.response["Error"]["Code"] == "UnrecognizedClientException"
    secret = credentials(stack)["aws_secret_access_key"]
    forger = client(
        stack,
        "glue",
        {
            "access_key_id": credentials(stack)["aws_access_key_id"],
            "secret_access_key": secret + "x",
        },
    )
    with pytest.raises(ClientError) as refused:
        forger.get_databases()
    assert refused.value.response["Error"]["Code"] == "InvalidSignatureException"


def test_table_versions_and_restoring_one(stack: Settings, database: str) -> None:
    glue = client(stack, "glue")
    location = f"s3://{stack.lake.data_bucket}/glue-tests/{database}/versions/"
    glue.create_table(DatabaseName=database, TableInput=table_input("v", location))
    first = glue.get_table(DatabaseName=database, Name="v")["Table"]
    assert first["VersionId"] == "1"
    changed = table_input("v", location)
    changed["StorageDescriptor"]["Columns"].append({"Name": "extra", "Type": "string"})
    glue.update_table(DatabaseName=database, TableInput=changed, VersionId="1")
    with pytest.raises(glue.exceptions.ConcurrentModificationException):
        glue.update_table(DatabaseName=database, TableInput=changed, VersionId="1")
    versions = glue.get_table_versions(DatabaseName=database, TableName="v")["TableVersions"]
    assert [v["VersionId"] for v in versions] == ["2", "1"]
    columns = [[c["Name"] for c in v["Table"]["StorageDescriptor"]["Columns"]] for v in versions]
    assert columns == [["id", "name", "extra"], ["id", "name"]]
    with pytest.raises(glue.exceptions.InvalidInputException, match="current version"):
        glue.delete_table_version(DatabaseName=database, TableName="v", VersionId="2")

    # lakeward table restore puts version 1 back; version 2 is kept as a version.
    lakeward("table", "restore", f"{database}.v", "--version", "1", data_dir=stack.data_dir)
    current = glue.get_table(DatabaseName=database, Name="v")["Table"]
    assert [c["Name"] for c in current["StorageDescriptor"]["Columns"]] == ["id", "name"]
    assert current["VersionId"] == "3"
    assert (
        glue.batch_delete_table_version(
            DatabaseName=database, TableName="v", VersionIds=["1", "7"]
        )["Errors"][0]["VersionId"]
        == "7"
    )
    versions = glue.get_table_versions(DatabaseName=database, TableName="v")["TableVersions"]
    assert [v["VersionId"] for v in versions] == ["3", "2"]


def test_iam_decides_each_glue_call_and_sts_names_the_caller(stack: Settings) -> None:
    engineer = creds(stack, "DataEngineerUserCreds")
    glue = client(stack, "glue", engineer)
    started = datetime.now(UTC) - timedelta(seconds=1)
    assert "covid_deaths" in {
        t["Name"] for t in glue.get_tables(DatabaseName="default")["TableList"]
    }
    with pytest.raises(ClientError) as denied:
        glue.create_database(DatabaseInput={"Name": "engineer_was_here"})
    assert denied.value.response["Error"]["Code"] == "AccessDeniedException"
    assert "glue:CreateDatabase" in denied.value.response["Error"]["Message"]
    user = f"arn:lakeward:iam:::user/{engineer['username']}"
    refusals = AccessControl(stack).audit.query(
        principal=user, action="glue:CreateDatabase", since=started
    )
    assert [(r.decision, r.source) for r in refusals] == [("implicitDeny", "glue-api")]
    identity = client(stack, "sts", engineer).get_caller_identity()
    assert identity["Arn"] == user
    assert identity["Account"] == client(stack, "sts").get_caller_identity()["Account"]
