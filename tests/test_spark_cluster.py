"""The stack's own Spark standalone cluster: ``up`` with ``spark.workers = 2`` starts a master
and two workers on this machine, the covid ETL and a Spark workgroup's SELECT, CTAS and
INSERT run on it (executors reaching the lake by its s3:// names through the S3 endpoint,
writes staged in the lake), and ``down`` stops them."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.request import urlopen

import boto3
import pytest

from lakeward.config import Settings, load_settings
from lakeward.spark_cluster import SparkCluster
from tests.helpers import lakeward, need_java, parse_outputs

pytestmark = pytest.mark.spark

# The JHU files' world total of deaths on 2020-12-31 (their README).
DEATHS_1231 = 1_901_777


@pytest.fixture(scope="module")
def cluster_stack(tmp_path_factory: pytest.TempPathFactory, jhu_dir: Path) -> Iterator[Settings]:
    need_java()
    data_dir = tmp_path_factory.mktemp("cluster") / "data"
    env = {"LAKEWARD_SPARK__WORKERS": "2"}
    try:
        up = lakeward("up", "--covid-source", str(jhu_dir), data_dir=data_dir, env=env, timeout=900)
        (data_dir / "up.stdout").write_text(up.stdout)
        yield load_settings(data_dir=data_dir, env={})
    finally:
        lakeward("down", data_dir=data_dir, check=False, timeout=300)


def master_state(settings: Settings) -> dict[str, Any]:
    cluster = SparkCluster(settings)
    with urlopen(f"http://{cluster.host}:{cluster.web_port()}/json/", timeout=5) as answer:
        return dict(json.load(answer))


def run(athena: Any, sql: str, workgroup: str) -> list[list[str | None]]:
    execution_id = athena.start_query_execution(QueryString=sql, WorkGroup=workgroup)[
        "QueryExecutionId"
    ]
    deadline = time.monotonic() + 600
    while True:
        execution = athena.get_query_execution(QueryExecutionId=execution_id)["QueryExecution"]
        if execution["Status"]["State"] in ("SUCCEEDED", "FAILED", "CANCELLED"):
            break
        assert time.monotonic() < deadline, sql
        time.sleep(0.2)
    assert execution["Status"]["State"] == "SUCCEEDED", (sql, execution["Status"])
    rows = athena.get_query_results(QueryExecutionId=execution_id)["ResultSet"]["Rows"]
    found = [[d.get("VarCharValue") for d in r["Data"]] for r in rows]
    return found[1:] if execution["StatementType"] == "DML" else found


def test_up_starts_a_master_and_two_workers_and_the_etl_runs_on_them(
    cluster_stack: Settings,
) -> None:
    outputs = parse_outputs((cluster_stack.data_dir / "up.stdout").read_text())
    master = outputs["spark_master"]
    assert master.startswith("spark://127.0.0.1:")
    state = master_state(cluster_stack)
    assert state["url"] == master
    assert state["aliveworkers"] == 2
    assert "lakeward-covid-etl" in [app["name"] for app in state["completedapps"]]
    status = lakeward("status", data_dir=cluster_stack.data_dir).stdout
    assert "spark cluster" in status and "2 worker(s) alive" in status


def test_a_spark_workgroup_selects_creates_and_inserts_on_the_cluster(
    cluster_stack: Settings,
) -> None:
    athena = boto3.client(
        "athena",
        endpoint_url=cluster_stack.server_url,
        region_name="us-east-1",
        aws_access_key_id=cluster_stack.api.access_key_id,
        aws_secret_access_key=cluster_stack.api.secret_access_key,
    )
    athena.create_work_group(
        Name="cluster", Configuration={"EngineVersion": {"SelectedEngineVersion": "spark"}}
    )
    total = "SELECT sum(deaths) FROM covid_deaths WHERE date = DATE '2020-12-31'"
    assert run(athena, total, "cluster") == [[str(DEATHS_1231)]]

    run(
        athena,
        "CREATE TABLE deaths_1231 WITH (format = 'PARQUET') AS "
        "SELECT country, sum(deaths) AS deaths FROM covid_deaths "
        "WHERE date = DATE '2020-12-31' GROUP BY country",
        "cluster",
    )
    run(athena, "INSERT INTO deaths_1231 VALUES ('Atlantis', 1)", "cluster")
    # Read back by the other engine, from the files the executors wrote.
    assert run(athena, "SELECT sum(deaths), count(*) FROM deaths_1231", "primary") == [
        [str(DEATHS_1231 + 1), "202"]
    ]
    located = run(athena, 'SELECT DISTINCT "$path" FROM deaths_1231', "primary")
    assert located and all(p[0].startswith("s3://lakeward-data/") for p in located)
    # The writes' staging folders are gone from the lake.
    lake = cluster_stack.data_dir / "lake"
    assert not [p for p in lake.rglob(".lakeward-staging-*")]
    # The server's Spark application is the cluster's.
    assert "lakeward-sql" in [app["name"] for app in master_state(cluster_stack)["activeapps"]]


def test_down_stops_the_master_and_workers(cluster_stack: Settings) -> None:
    cluster = SparkCluster(cluster_stack)
    processes = [cluster.master_process, *cluster.worker_processes()]
    assert all(p.pid() is not None for p in processes)
    lakeward("down", "--retain-data", data_dir=cluster_stack.data_dir, timeout=300)
    assert all(p.pid() is None for p in processes)
    assert cluster.status() is None
