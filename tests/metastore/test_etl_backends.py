"""The covid ETL on the real JHU files with the metastore on PostgreSQL and on MariaDB.

Each backend's stack (three nodes) is brought up once for the module with
``lakeward up``, as a user would, and compared with the Derby stack of the
session: same tables, same metadata, same rows, same totals through SQL.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from lakeward.config import Settings, load_settings
from lakeward.metastore import MetastoreClient, TableInfo
from lakeward.metastore.uris import metastore_uris
from lakeward.stack import COVID_TABLES
from tests.helpers import fresh_database, lake_path, lakeward, need_java, parse_outputs
from tests.metastore.conftest import ENGINES, metastore_env

pytestmark = [pytest.mark.spark, pytest.mark.slow]

NODES = 3
TOTALS_SQL = (
    "SELECT date, sum(confirmed) AS confirmed, sum(deaths) AS deaths FROM default.covid_cases "
    "WHERE date IN (DATE '2020-09-10', DATE '2023-03-09') GROUP BY date ORDER BY date"
)
# Sums over all rows of the source files on two days (the data's README lists them).
TOTALS = [
    {"date": "2020-09-10", "confirmed": "28227493", "deaths": "972736"},
    {"date": "2023-03-09", "confirmed": "676570149", "deaths": "6881802"},
]
# Parameters that differ between any two loads (times, run ids), not between backends.
VOLATILE = {"transient_lastDdlTime", "lakeward.run_id", "lakeward.loaded_at"}


@pytest.fixture(scope="module", params=ENGINES)
def backend_stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, jhu_dir: Path
) -> Iterator[Settings]:
    need_java()
    engine: str = request.param
    data_dir = tmp_path_factory.mktemp(f"etl-{engine}") / "data"
    with fresh_database(engine) as url:
        env = metastore_env(engine, url, NODES)
        result = lakeward(
            "up", "--covid-source", str(jhu_dir), data_dir=data_dir, env=env, timeout=1200
        )
        (data_dir / "up.stdout").write_text(result.stdout)
        try:
            yield load_settings(data_dir=data_dir, env={})
        finally:
            lakeward("down", data_dir=data_dir, check=False, timeout=120)


def tables(settings: Settings) -> dict[str, TableInfo]:
    with MetastoreClient(metastore_uris(settings)) as client:
        database = settings.covid.database
        return {name: client.table(database, name) for name in COVID_TABLES}


def comparable(info: TableInfo, settings: Settings) -> dict[str, object]:
    """What must match across backends: all but where the stack lives and when it loaded."""
    location = info.location  # the lake's s3:// name: the same in every stack
    return {
        "columns": info.columns,
        "partition_keys": info.partition_keys,
        "table_type": info.table_type,
        "input_format": info.input_format,
        "serde": info.serde,
        "parameters": {k: v for k, v in info.parameters.items() if k not in VOLATILE},
        "folder": re.sub(r"/v[^/]+$", "", location),  # without the load's own v<run> folder
    }


def row_count(settings: Settings, info: TableInfo) -> int:
    return ds.dataset(str(lake_path(settings, info.location)), format="parquet").count_rows()


def test_up_reports_every_node(backend_stack: Settings) -> None:
    outputs = parse_outputs((backend_stack.data_dir / "up.stdout").read_text())
    assert outputs["metastore_backend"] == backend_stack.metastore.backend
    assert outputs["metastore_uris"].split(",") == metastore_uris(backend_stack)
    assert len(metastore_uris(backend_stack)) == NODES
    status = lakeward("metastore", "status", data_dir=backend_stack.data_dir)
    rows = [line for line in status.stdout.splitlines() if line.startswith("│ metastore-")]
    assert len(rows) == NODES and all("│ yes " in row for row in rows)


def test_same_tables_metadata_and_rows_as_derby(backend_stack: Settings, stack: Settings) -> None:
    assert stack.metastore.backend == "derby"
    ours, derby = tables(backend_stack), tables(stack)
    for name in COVID_TABLES:
        assert comparable(ours[name], backend_stack) == comparable(derby[name], stack), name
        assert row_count(backend_stack, ours[name]) == row_count(stack, derby[name]), name
    assert (
        row_count(backend_stack, ours["covid_confirmed_cases"]) == 330_327
    )  # 289 locations x 1,143 days


def test_same_totals_through_sql(backend_stack: Settings, stack: Settings) -> None:
    ours = lakeward("query", TOTALS_SQL, "--output", "json", data_dir=backend_stack.data_dir)
    derby = lakeward("query", TOTALS_SQL, "--output", "json", data_dir=stack.data_dir)
    assert json.loads(ours.stdout) == TOTALS
    assert json.loads(derby.stdout) == TOTALS


def test_every_node_serves_the_tables(backend_stack: Settings) -> None:
    expected = set(COVID_TABLES)
    for uri in metastore_uris(backend_stack):
        with MetastoreClient([uri], rounds=1) as client:
            assert expected <= set(client.tables(backend_stack.covid.database)), uri
