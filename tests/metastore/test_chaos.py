"""Chaos: three metastore nodes on PostgreSQL, the node in use killed twice under load.

16 client threads (get_table, partition listing, DuckDB reads through the SQL
service's catalog connector and engine) and a Spark session read a covid table
built from the real JHU files for 30 s; the node the clients use is killed
with SIGKILL twice, 10 s apart, and healed. No operation may fail and every
read must return what the CSV holds. The failover latency is printed (run with
``-s`` to see it; bench/metastore.py reports it too).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bench._chaos import SparkReader, expected_totals, register_covid_table, run_chaos
from lakeward.config import Settings, load_settings
from lakeward.metastore.uris import metastore_uris
from lakeward.stack import Stack
from tests.helpers import fresh_database, lakeward, need_java
from tests.metastore.conftest import free_ports

pytestmark = pytest.mark.spark  # metastore JVMs and a Spark session

THREADS = 16


@pytest.fixture(scope="module")
def three_nodes(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Settings, dict[str, str]]]:
    """``lakeward metastore start --nodes 3`` over a database of its own in PostgreSQL."""
    need_java()
    with fresh_database("postgres") as url:
        data_dir = tmp_path_factory.mktemp("chaos") / "data"
        env = {
            "LAKEWARD_METASTORE__BACKEND": "postgres",
            "LAKEWARD_METASTORE__URL": url,
            "LAKEWARD_METASTORE__PORT": str(free_ports(3)),
            "LAKEWARD_METASTORE__HEAP": "384m",  # three JVMs and Spark share a small machine
        }
        lakeward("metastore", "start", "--nodes", "3", data_dir=data_dir, env=env, timeout=600)
        try:
            yield load_settings(data_dir=data_dir, env={}), env
        finally:  # the nodes go before their database does
            lakeward("metastore", "stop", data_dir=data_dir, check=False, timeout=120)


def test_clients_ride_through_two_kills_of_the_node_in_use(
    three_nodes: tuple[Settings, dict[str, str]], jhu_dir: Path, tmp_path: Path
) -> None:
    settings, env = three_nodes
    uris = metastore_uris(settings)
    assert len(uris) == 3
    totals = expected_totals(jhu_dir)
    register_covid_table(uris, jhu_dir, tmp_path / "lake")
    spark = SparkReader(settings, tmp_path)
    spark.wait_ready(timeout=300)

    report = run_chaos(settings, totals, duration=30, threads=THREADS, spark=spark, env=env)
    print("\n" + report.summary())

    assert report.failures == []
    assert report.heal_errors == []
    first, second = report.kills
    assert first.uri != second.uri  # the second kill hit the node the clients had moved to
    counts = report.counts()
    for kind in ("get_table", "partitions", "duckdb"):
        assert sum(n for k, n in counts.items() if k.startswith(kind)) > 0, counts
    # Every thread that calls the metastore itself got through both kills.
    metastore_threads = sum(1 for i in range(THREADS) if i % 3 != 2)
    assert len(report.failover()) == 2 * metastore_threads
    # Spark kept answering (correctly, checked in the report) after the second kill.
    assert any(float(str(s["start"])) > second.at for s in report.spark), report.spark[-3:]
    # Healed: every node serves again.
    assert all(node.healthy() for node in Stack(settings).metastore_nodes())
