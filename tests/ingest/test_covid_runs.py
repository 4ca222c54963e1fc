"""Runs of the real ETL against the session stack: killed half-way, and on a Spark cluster."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pytest

from lakeward.config import Settings
from lakeward.ingest import covid as covid_etl
from lakeward.jvm import find_java, java_env, spark_home
from lakeward.metastore import MetastoreClient
from lakeward.metastore.uris import metastore_uris
from lakeward.process import free_port
from tests.helpers import lake_path, lakeward

pytestmark = pytest.mark.spark

DATA_TABLES = ["covid_confirmed_cases", "covid_deaths", "covid_recovered", "covid_cases"]


def locations(settings: Settings) -> dict[str, str]:
    with MetastoreClient(metastore_uris(settings)) as client:
        return {t: client.table("default", t).location for t in DATA_TABLES}


def read(settings: Settings, location: str) -> pa.Table:
    table = ds.dataset(str(lake_path(settings, location)), format="parquet").to_table()
    return table.sort_by([(c, "ascending") for c in ("country", "province_state", "date")])


def test_a_run_killed_half_way_leaves_the_tables_intact(stack: Settings, jhu_dir: Path) -> None:
    before = locations(stack)
    counts = {t: read(stack, loc).num_rows for t, loc in before.items()}
    parquet = stack.data_dir / "lake" / "lakeward-data" / "covid_data" / "parquet"
    existing = {p.name for p in (parquet / "covid_confirmed_cases").iterdir()}

    etl = subprocess.Popen(
        [sys.executable, "-m", "lakeward", "etl", "covid", "--data-dir", str(stack.data_dir),
         "--covid-source", str(jhu_dir)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        # Kill it as soon as it has begun writing the new version of the first table.
        while not ({p.name for p in (parquet / "covid_confirmed_cases").iterdir()} - existing):
            assert etl.poll() is None, "the ETL ended before it could be killed"
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        os.killpg(etl.pid, signal.SIGKILL)
        etl.wait()

    assert locations(stack) == before
    for table, location in before.items():
        assert read(stack, location).num_rows == counts[table]


@pytest.fixture
def spark_cluster(stack: Settings, tmp_path: Path) -> Iterator[str]:
    """A Spark standalone master and one worker on 127.0.0.1, from the pyspark install."""
    java = find_java()
    env = {
        **java_env(java),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_WORKER_DIR": str(tmp_path / "work"),
    }
    spark_class = str(spark_home() / "bin" / "spark-class")
    port = free_port("127.0.0.1", 17077)
    ui = free_port("127.0.0.1", 18080)
    master_url = f"spark://127.0.0.1:{port}"
    daemons = []
    for args in (
        ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
         "--webui-port", str(ui)],
        ["org.apache.spark.deploy.worker.Worker", master_url, "--host", "127.0.0.1",
         "--cores", "2", "--memory", "2g", "--webui-port", str(free_port("127.0.0.1", ui + 1))],
    ):  # fmt: skip
        log = open(tmp_path / f"{args[0].rsplit('.', 1)[1]}.log", "wb")  # noqa: SIM115
        daemons.append(
            subprocess.Popen(
                [spark_class, *args],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        )
        time.sleep(3)
    deadline = time.monotonic() + 60
    worker_log = tmp_path / "Worker.log"
    while b"Successfully registered with master" not in worker_log.read_bytes():
        assert time.monotonic() < deadline, worker_log.read_text(errors="replace")
        time.sleep(0.5)
    yield master_url
    for daemon in daemons:
        os.killpg(daemon.pid, signal.SIGTERM)
        daemon.wait(timeout=30)


def test_spark_submit_to_a_standalone_cluster_gives_identical_tables(
    stack: Settings, jhu_dir: Path, spark_cluster: str, tmp_path: Path
) -> None:
    previous = locations(stack)
    before = {t: read(stack, loc) for t, loc in previous.items()}
    env = {
        **java_env(find_java()),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    # The stack's Spark settings (the s3a connector, the lake's endpoint and keys), as a user
    # gives them to a Spark of their own.
    properties = tmp_path / "spark.properties"
    properties.write_text(lakeward("spark-conf", data_dir=stack.data_dir).stdout)
    result = subprocess.run(
        [str(spark_home() / "bin" / "spark-submit"), "--master", spark_cluster,
         "--properties-file", str(properties),
         "--conf", "spark.executor.memory=1g", "--conf", "spark.driver.memory=1g",
         covid_etl.__file__, "--data-dir", str(stack.data_dir),
         "--source", str(jhu_dir)],
        env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert '"run_id"' in result.stdout
    after = locations(stack)
    for table, expected in before.items():
        assert after[table] != previous[table], f"{table} was not replaced by the submitted run"
        assert read(stack, after[table]).equals(expected), table
