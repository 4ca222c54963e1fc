"""Athena's own clients, unchanged, against the stack's server: boto3, PyAthena, the CLI."""

from __future__ import annotations

import json
import time

import pytest

from lakeward.config import Settings
from tests.helpers import lake_path, lakeward
from tests.query.support import credentials, endpoint

pytestmark = pytest.mark.spark

SEED = (
    "SELECT * FROM demo_hive_metastore.default.covid_confirmed_cases WHERE country = 'US' "
    "OR country = 'Italy' OR country = 'India' OR country = 'Brazil' OR country = 'Spain' "
    "OR country = 'United Kingdom'"
)
COUNTRIES = {"US", "Italy", "India", "Brazil", "Spain", "United Kingdom"}


def expected_rows(stack: Settings) -> int:
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    from lakeward.metastore import MetastoreClient
    from lakeward.metastore.uris import metastore_uris

    with MetastoreClient(metastore_uris(stack)) as client:
        location = client.table("default", "covid_confirmed_cases").location
    table = ds.dataset(str(lake_path(stack, location)), format="parquet")
    return table.count_rows(filter=pc.field("country").isin(sorted(COUNTRIES)))


def test_boto3_runs_the_seed_query(stack: Settings) -> None:
    import boto3

    athena = boto3.client("athena", endpoint_url=endpoint(stack), **credentials(stack))
    assert "demo_hive_metastore" in [
        c["CatalogName"] for c in athena.list_data_catalogs()["DataCatalogsSummary"]
    ]
    tables = athena.list_table_metadata(CatalogName="demo_hive_metastore", DatabaseName="default")
    assert "covid_confirmed_cases" in [t["Name"] for t in tables["TableMetadataList"]]

    started = athena.start_query_execution(
        QueryString=SEED, ResultConfiguration={"OutputLocation": "s3://staging/"}
    )
    execution_id = started["QueryExecutionId"]
    while True:
        execution = athena.get_query_execution(QueryExecutionId=execution_id)["QueryExecution"]
        if execution["Status"]["State"] in ("SUCCEEDED", "FAILED", "CANCELLED"):
            break
        time.sleep(0.05)
    assert execution["Status"]["State"] == "SUCCEEDED", execution["Status"]
    assert execution["Statistics"]["DataScannedInBytes"] > 0
    rows: list[list[str | None]] = []
    for page in athena.get_paginator("get_query_results").paginate(QueryExecutionId=execution_id):
        rows.extend([d.get("VarCharValue") for d in r["Data"]] for r in page["ResultSet"]["Rows"])
        columns = page["ResultSet"]["ResultSetMetadata"]["ColumnInfo"]
    assert [c["Name"] for c in columns][:2] == ["province_state", "country"]
    assert [c["Type"] for c in columns] == [
        "varchar",
        "varchar",
        "double",
        "double",
        "date",
        "bigint",
        "bigint",
    ]
    assert rows[0] == [c["Name"] for c in columns]
    data = rows[1:]
    assert len(data) == expected_rows(stack)
    us = [r for r in data if r[1] == "US" and r[0] is None and r[4] == "2020-09-10"]
    assert us == [[None, "US", "40.0", "-100.0", "2020-09-10", "6420040", us[0][6]]]


def test_pyathena_cursor_and_pandas_read_sql(stack: Settings) -> None:
    import pandas as pd
    from pyathena import connect
    from sqlalchemy import create_engine

    options = {
        "s3_staging_dir": "s3://staging/",
        "endpoint_url": endpoint(stack),
        "poll_interval": 0.05,
        **credentials(stack),
    }
    cursor = connect(**options).cursor()
    cursor.execute(SEED)
    rows = cursor.fetchall()
    assert len(rows) == expected_rows(stack)
    assert {r[1] for r in rows} == COUNTRIES
    italy = [r for r in rows if r[1] == "Italy" and str(r[4]) == "2020-09-10"]
    assert [r[5] for r in italy] == [283_180]

    url = (
        "awsathena+rest://{aws_access_key_id}:{aws_secret_access_key}@athena.us-east-1."
        "amazonaws.com:443/default?s3_staging_dir=s3%3A%2F%2Fstaging%2F&catalog_name="
        "demo_hive_metastore&endpoint_url={endpoint}&poll_interval=0.05"
    ).format(endpoint=endpoint(stack), **credentials(stack))
    frame = pd.read_sql(SEED, create_engine(url))
    assert len(frame) == expected_rows(stack)
    assert (
        int(
            frame[
                (frame.country == "US")
                & (frame.province_state.isna())
                & (frame.date.astype(str) == "2020-09-10")
            ].confirmed.iloc[0]
        )
        == 6_420_040
    )


def test_pyathena_pandas_cursor_fetches_results_from_the_lake_over_s3(
    stack: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PandasCursor reads the result file itself, from the OutputLocation (s3://...), with
    an S3 client that finds the stack through AWS_ENDPOINT_URL; with ``unload=True`` it reads
    the Parquet files the data manifest lists."""
    from pyathena import connect
    from pyathena.pandas.cursor import PandasCursor

    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint(stack))
    options = {
        "s3_staging_dir": f"s3://{stack.lake.data_bucket}/query-results/",
        "catalog_name": "demo_hive_metastore",
        "schema_name": "default",
        "poll_interval": 0.05,
        "cursor_class": PandasCursor,
        **credentials(stack),
    }
    cursor = connect(**options).cursor()
    frame = cursor.execute(SEED).as_pandas()
    assert cursor.output_location.startswith(f"s3://{stack.lake.data_bucket}/query-results/")
    assert len(frame) == expected_rows(stack)
    italy = frame[(frame.country == "Italy") & (frame.date.astype(str) == "2020-09-10")]
    assert italy.confirmed.tolist() == [283_180]

    unloaded = connect(**options).cursor(unload=True)
    frame = unloaded.execute(SEED).as_pandas()
    assert len(frame) == expected_rows(stack)
    assert unloaded.data_manifest_location.endswith("-manifest.csv")
    us = frame[(frame.country == "US") & (frame.date.astype(str) == "2020-09-10")]
    assert us.confirmed.tolist() == [6_420_040]  # the JHU files' own figure


def test_cli_query(stack: Settings) -> None:
    result = lakeward("query", SEED, "--output", "json", data_dir=stack.data_dir)
    rows = json.loads(result.stdout)
    assert len(rows) == expected_rows(stack)
    italy = [r for r in rows if r["country"] == "Italy" and r["date"] == "2020-09-10"]
    assert [r["confirmed"] for r in italy] == ["283180"]
    refused = lakeward(
        "query", "SELECT * FROM read_csv('/etc/passwd')", data_dir=stack.data_dir, check=False
    )
    assert refused.returncode != 0 and "InvalidRequestException" in refused.stderr
    assert "Traceback" not in refused.stderr


def test_a_spark_workgroup_made_through_the_api_runs_on_spark(stack: Settings) -> None:
    import boto3

    athena = boto3.client("athena", endpoint_url=endpoint(stack), **credentials(stack))
    athena.create_work_group(
        Name="api-spark",
        Configuration={
            "EngineVersion": {"SelectedEngineVersion": "spark"},
            "AdditionalConfiguration": '{"TimeoutSeconds": 600}',
        },
    )
    try:
        sql = (
            "SELECT country, max(confirmed) AS c FROM covid_confirmed_cases "
            "WHERE country IN ('Italy', 'Spain') AND province_state IS NULL "
            "GROUP BY country ORDER BY country"
        )
        answers = {}
        for workgroup in ("primary", "api-spark"):
            started = athena.start_query_execution(
                QueryString=sql,
                WorkGroup=workgroup,
                QueryExecutionContext={"Catalog": "demo_hive_metastore", "Database": "default"},
            )
            while True:
                execution = athena.get_query_execution(
                    QueryExecutionId=started["QueryExecutionId"]
                )["QueryExecution"]
                if execution["Status"]["State"] in ("SUCCEEDED", "FAILED", "CANCELLED"):
                    break
                time.sleep(0.1)
            assert execution["Status"]["State"] == "SUCCEEDED", execution["Status"]
            rows = athena.get_query_results(QueryExecutionId=execution["QueryExecutionId"])
            engine = execution["EngineVersion"]["EffectiveEngineVersion"]
            answers[engine] = rows["ResultSet"]["Rows"]
        assert set(answers) == {"duckdb", "spark"}
        assert answers["spark"] == answers["duckdb"]
        assert len(answers["spark"]) == 3  # the labels row and two countries
    finally:
        athena.delete_work_group(WorkGroup="api-spark")
