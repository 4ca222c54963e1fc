"""information_schema per catalog, as Trino answers it, on both engines' workgroups; a caller
sees only the databases and tables their policies let them list."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import boto3
import pytest

from lakeward.config import Settings
from tests.access.test_seed_users import creds
from tests.helpers import lakeward
from tests.query.support import api_ok, credentials, endpoint

pytestmark = pytest.mark.spark


def athena(stack: Settings, key: dict[str, str] | None = None) -> Any:
    given = credentials(stack)
    if key is not None:
        given |= {
            "aws_access_key_id": key["access_key_id"],
            "aws_secret_access_key": key["secret_access_key"],
        }
    return boto3.client("athena", endpoint_url=endpoint(stack), **given)


def rows(client: Any, sql: str, workgroup: str = "primary") -> list[list[str | None]]:
    execution_id = client.start_query_execution(QueryString=sql, WorkGroup=workgroup)[
        "QueryExecutionId"
    ]
    while True:
        state = client.get_query_execution(QueryExecutionId=execution_id)["QueryExecution"]
        if state["Status"]["State"] in ("SUCCEEDED", "FAILED", "CANCELLED"):
            break
        time.sleep(0.05)
    assert state["Status"]["State"] == "SUCCEEDED", state["Status"]
    pages = client.get_paginator("get_query_results").paginate(QueryExecutionId=execution_id)
    found = [
        [d.get("VarCharValue") for d in r["Data"]] for p in pages for r in p["ResultSet"]["Rows"]
    ]
    return found[1:]  # after the labels row


@pytest.fixture(scope="module")
def spark_workgroup(stack: Settings) -> Any:
    client = athena(stack)
    name = f"info-spark-{uuid.uuid4().hex[:6]}"
    client.create_work_group(
        Name=name, Configuration={"EngineVersion": {"SelectedEngineVersion": "spark"}}
    )
    yield name
    client.delete_work_group(WorkGroup=name, RecursiveDeleteOption=True)


def test_tables_columns_views_and_schemata_on_both_engines(
    stack: Settings, spark_workgroup: str
) -> None:
    client = athena(stack)
    view = f"info_view_{uuid.uuid4().hex[:6]}"
    api_ok(client, f"CREATE VIEW default.{view} AS SELECT country, deaths FROM covid_deaths")
    queries = {
        "tables": "SELECT table_name, table_type FROM information_schema.tables "
        f"WHERE table_schema = 'default' AND table_name IN ('covid_deaths', '{view}') "
        "ORDER BY table_name",
        "columns": "SELECT column_name, ordinal_position, data_type, extra_info "
        "FROM awsdatacatalog.information_schema.columns "
        "WHERE table_schema = 'default' AND table_name = 'covid_deaths' ORDER BY 2",
        "views": "SELECT view_definition FROM information_schema.views "
        f"WHERE table_name = '{view}'",
        "schemata": "SELECT schema_name FROM information_schema.schemata "
        "WHERE schema_name IN ('default', 'information_schema') ORDER BY 1",
        "joined": "SELECT count(*) FROM information_schema.columns c JOIN covid_deaths d "
        "ON c.column_name = 'country' AND c.table_name = 'covid_deaths' "
        "AND c.table_schema = 'default' "
        "AND d.country = 'Iceland' AND d.date = DATE '2021-01-01'",
    }
    answers = {}
    for workgroup in ("primary", spark_workgroup):
        answers[workgroup] = {k: rows(client, q, workgroup) for k, q in queries.items()}
    assert answers["primary"] == answers[spark_workgroup]
    got = answers["primary"]
    assert got["tables"] == sorted([["covid_deaths", "BASE TABLE"], [view, "VIEW"]])
    assert got["columns"][:3] == [
        ["province_state", "1", "varchar", None],
        ["country", "2", "varchar", None],
        ["lat", "3", "double", None],
    ]
    assert ["deaths", "6", "bigint", None] in got["columns"]
    # The view's text as Trino keeps it: laid out by its SQL formatter.
    assert got["views"] == [["SELECT\n  country\n, deaths\nFROM\n  covid_deaths"]]
    assert got["schemata"] == [["default"], ["information_schema"]]
    assert got["joined"] == [["1"]]
    api_ok(client, f"DROP VIEW default.{view}")
    with pytest.raises(client.exceptions.InvalidRequestException, match="roles is not supported"):
        client.start_query_execution(QueryString="SELECT * FROM information_schema.roles")


def test_a_caller_sees_only_the_databases_and_tables_they_may_list(stack: Settings) -> None:
    client = athena(stack)
    hidden = f"info_hidden_{uuid.uuid4().hex[:6]}"
    api_ok(client, f"CREATE DATABASE {hidden}")
    api_ok(client, f"CREATE TABLE {hidden}.secret AS SELECT 1 AS x")
    engineer = athena(stack, creds(stack, "DataEngineerUserCreds"))
    everything = {
        r[0] for r in rows(engineer, "SELECT schema_name FROM information_schema.schemata")
    }
    assert {"default", hidden} <= everything

    def iam(*args: str) -> str:
        return lakeward("iam", *args, data_dir=stack.data_dir).stdout

    user, policy = f"info_{uuid.uuid4().hex[:6]}", f"InfoDefaultOnly{uuid.uuid4().hex[:6]}"
    document = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Action": ["athena:*", "lakeward:UseCatalog"], "Resource": "*"},
            {"Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject"], "Resource": "*"},
            {
                "Effect": "Allow",
                "Action": ["glue:GetDatabase", "glue:GetTables"],
                "Resource": [
                    "arn:lakeward:glue:::catalog/demo_hive_metastore",
                    "arn:lakeward:glue:::database/demo_hive_metastore/default",
                ],
            },
        ],
    }
    iam("create-user", "--user", user)
    iam("create-policy", "--policy", policy, "--document", json.dumps(document))
    iam("attach-user-policy", "--user", user, "--policy", policy)
    keys = iam("create-access-key", "--user", user)
    pair = {
        k.strip(): v.strip() for k, v in (line.split(" = ") for line in keys.strip().splitlines())
    }
    narrow = athena(stack, pair)
    schemata = {r[0] for r in rows(narrow, "SELECT schema_name FROM information_schema.schemata")}
    assert schemata == {"default", "information_schema"}
    listed = {
        tuple(r)
        for r in rows(narrow, "SELECT table_schema, table_name FROM information_schema.tables")
    }
    assert ("default", "covid_deaths") in listed
    assert not {t for t in listed if t[0] == hidden}
