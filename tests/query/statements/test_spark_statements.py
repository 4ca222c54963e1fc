"""Statements in a Spark workgroup: CTAS, INSERT INTO and UNLOAD written by Spark give the
rows and the table a DuckDB workgroup gives; DDL behaves as in a DuckDB workgroup.

Each table is compared with its DuckDB twin from outside the statement: the metastore's
definition and partitions, the rows read back through lakeward and by a separate Spark
session on the same metastore, and the object events of its files.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from lakeward.config import Settings
from lakeward.metastore.client import MetastoreClient
from lakeward.metastore.tables import TableInfo
from lakeward.query.model import QueryState
from lakeward.query.service import QueryService
from lakeward.storage import decode_key
from lakeward.storage.paths import lake_place
from tests.query.support import lake_files, run, wait, written

pytestmark = pytest.mark.spark

DATABASE = "spark_statements"
# Every type a covid table holds, and the ones a query makes: the two engines must agree
# on each (a table's Hive types follow the query's Athena types).
QUERY = (
    "SELECT province_state, lat, date, confirmed, "
    "CAST(confirmed AS integer) AS confirmed_int, "
    "CAST(confirmed AS decimal(20, 2)) AS confirmed_decimal, "
    "confirmed > 1000 AS over_1000, "
    "CAST(date AS timestamp) + INTERVAL '90' MINUTE AS reported, "
    "country "
    "FROM covid_cases WHERE country IN ('Australia', 'Cote d''Ivoire') "
    "AND date BETWEEN DATE '2020-03-01' AND DATE '2020-03-07'"
)
QUERY_ROWS = 8 * 7 + 7  # Australia's 8 states and Cote d'Ivoire, a week
# (Hive escapes the quote in the partition's directory: country=Cote d%27Ivoire.)


@pytest.fixture(scope="module", autouse=True)
def database(service: QueryService) -> None:
    run(service, f"CREATE DATABASE IF NOT EXISTS {DATABASE}")


def unique(prefix: str) -> str:
    return f"{DATABASE}.{prefix}_{uuid.uuid4().hex[:8]}"


def rows(service: QueryService, sql: str, workgroup: str = "duck") -> list[list[str | None]]:
    return sorted(run(service, sql, workgroup=workgroup)[1], key=repr)


def definition(metastore: MetastoreClient, name: str) -> tuple[Any, ...]:
    database, table = name.split(".")
    info: TableInfo = metastore.table(database, table)
    return (
        [(c.name, c.type) for c in info.columns],
        [(c.name, c.type) for c in info.partition_keys],
        info.input_format,
        info.output_format,
        info.serde,
        info.serde_parameters,
        info.parameters.get("parquet.compression") or info.parameters.get("orc.compress"),
    )


def spark_rows(spark: Any, name: str) -> list[list[str | None]]:
    """The rows a plain Spark session reads, as lakeward's results show them."""
    frame = spark.table(name)
    texts = frame.selectExpr(*(f"CAST(`{c}` AS STRING)" for c in frame.columns))
    return sorted(([*r] for r in texts.collect()), key=repr)


@pytest.mark.parametrize(
    ("properties", "refused_by_spark"),
    [
        ("format = 'PARQUET', partitioned_by = ARRAY['country']", None),
        ("format = 'ORC', write_compression = 'ZSTD'", None),
        # Spark's Hive text reader refuses a zone-less timestamp (a plain Spark session,
        # whose timestamps are zoned, reads it); a plain Spark has no Hive JSON SerDe.
        (
            "format = 'TEXTFILE', field_delimiter = '|', partitioned_by = ARRAY['country']",
            "does not read timestamp columns of text tables",
        ),
        ("format = 'JSON', write_compression = 'GZIP'", "Spark has no org.apache.hive.hcatalog"),
    ],
    ids=["parquet", "orc", "text", "json"],
)
def test_ctas_in_a_spark_workgroup_makes_the_table_a_duckdb_one_makes(
    service: QueryService,
    metastore: MetastoreClient,
    spark: Any,
    properties: str,
    refused_by_spark: str | None,
) -> None:
    made = {}
    for workgroup in ("duck", "big"):
        name = made[workgroup] = unique(f"ctas_{workgroup}")
        counted = written(
            service, f"CREATE TABLE {name} WITH ({properties}) AS {QUERY}", workgroup=workgroup
        )
        assert counted == QUERY_ROWS
    assert definition(metastore, made["big"]) == definition(metastore, made["duck"])
    database, duck_table = made["duck"].split(".")
    spark_table = made["big"].split(".")[1]
    assert metastore.partition_names(database, spark_table) == metastore.partition_names(
        database, duck_table
    )
    expected = rows(service, QUERY)
    assert len(expected) == QUERY_ROWS
    for name in made.values():
        assert rows(service, f"SELECT * FROM {name}") == expected
        if refused_by_spark is None:
            assert rows(service, f"SELECT * FROM {name}", "big") == expected
        else:
            execution = wait(
                service, service.start_query_execution(f"SELECT * FROM {name}", workgroup="big")
            )
            assert execution.state == QueryState.FAILED
            assert refused_by_spark in (execution.state_change_reason or "")
    if "JSON" not in properties:
        assert spark_rows(spark, made["big"]) == spark_rows(spark, made["duck"])
        assert len(spark_rows(spark, made["big"])) == QUERY_ROWS


def test_insert_into_in_a_spark_workgroup_adds_files_and_partitions(
    service: QueryService, metastore: MetastoreClient, spark: Any
) -> None:
    name = unique("insert")
    run(
        service,
        f"CREATE TABLE {name} WITH (partitioned_by = ARRAY['country']) AS "
        "SELECT province_state, date, confirmed, country FROM covid_cases "
        "WHERE country = 'Iceland' AND date < DATE '2020-03-01'",
        workgroup="duck",
    )
    database, table = name.split(".")
    location = metastore.table(database, table).location
    before = lake_files(service, location)
    events: list[dict[str, Any]] = []
    unsubscribe = service.storage.subscribe(events.append)
    try:
        counted = written(
            service,
            f"INSERT INTO {name} SELECT province_state, date, confirmed, country "
            "FROM covid_cases WHERE country IN ('Iceland', 'Malta') AND date = DATE '2020-03-01'",
            workgroup="big",
        )
    finally:
        unsubscribe()
    assert counted == 2
    after = lake_files(service, location)
    added = sorted(set(after) - set(before))
    assert set(before) < set(after) and len(added) == 2  # new files only, one per country
    assert metastore.partition_names(database, table) == ["country=Iceland", "country=Malta"]
    # Every file the INSERT published raised its event, with the key and size in the lake.
    created = {
        decode_key(r["s3"]["object"]["key"]): r["s3"]["object"]["size"]
        for e in events
        for r in e["Records"]
        if r["eventName"].startswith("ObjectCreated:")
    }
    bucket, _ = lake_place(service.settings, location) or ("", "")
    assert set(added) <= set(created)
    assert all(created[key] == service.storage.stat(bucket, key).size for key in added)
    expected = rows(
        service,
        "SELECT province_state, date, confirmed, country FROM covid_cases "
        "WHERE country = 'Iceland' AND date <= DATE '2020-03-01' "
        "OR country = 'Malta' AND date = DATE '2020-03-01'",
    )
    assert rows(service, f"SELECT * FROM {name}", "big") == expected
    assert spark_rows(spark, name) == expected


def test_unload_in_a_spark_workgroup_writes_the_rows_duckdb_writes(
    service: QueryService, stack: Settings
) -> None:
    base = f"{stack.lake_root}/{stack.lake.data_bucket}/unload-{uuid.uuid4().hex[:8]}"
    for workgroup in ("duck", "big"):
        run(
            service,
            f"UNLOAD ({QUERY}) TO '{base}/{workgroup}/' "
            "WITH (format = 'PARQUET', partitioned_by = ARRAY['country'])",
            workgroup=workgroup,
        )
    import pyarrow.dataset as ds

    tables = {}
    for workgroup in ("duck", "big"):
        place = lake_place(stack, f"{base}/{workgroup}")
        assert place is not None and service.storage.local_dir is not None
        directory = service.storage.local_dir / place[0] / place[1]
        tables[workgroup] = ds.dataset(directory, partitioning="hive").to_table()
    assert tables["big"].num_rows == tables["duck"].num_rows == QUERY_ROWS
    columns = tables["duck"].column_names
    ordered = [("province_state", "ascending"), ("country", "ascending"), ("date", "ascending")]
    assert tables["big"].select(columns).sort_by(ordered).to_pylist() == (
        tables["duck"].sort_by(ordered).to_pylist()
    )


def test_a_failed_spark_write_leaves_nothing(
    service: QueryService, metastore: MetastoreClient, stack: Settings
) -> None:
    name = unique("failed")
    events: list[dict[str, Any]] = []
    unsubscribe = service.storage.subscribe(events.append)
    try:
        execution = wait(
            service,
            service.start_query_execution(
                f"CREATE TABLE {name} WITH (partitioned_by = ARRAY['country']) AS "
                "SELECT confirmed * 4611686018427387904 AS doubled, country FROM covid_cases",
                workgroup="big",
            ),
        )
    finally:
        unsubscribe()
    assert execution.state == QueryState.FAILED
    assert "overflow" in (execution.state_change_reason or "")
    assert "try_multiply" not in (execution.state_change_reason or "")
    database, table = name.split(".")
    assert not metastore.table_exists(database, table)
    results = execution.output_location.rsplit("/", 1)[0]
    assert lake_files(service, f"{results}/tables/{execution.id}") == []
    created = [
        r for e in events for r in e["Records"] if r["eventName"].startswith("ObjectCreated:")
    ]
    assert not [r for r in created if execution.id in decode_key(r["s3"]["object"]["key"])]


def test_ddl_in_a_spark_workgroup_answers_as_in_a_duckdb_one(
    service: QueryService, stack: Settings
) -> None:
    answers = {}
    for workgroup in ("duck", "big"):
        name = unique(f"ddl_{workgroup}")
        location = f"{stack.lake_root}/{stack.lake.data_bucket}/ddl-{uuid.uuid4().hex[:8]}"
        run(
            service,
            f"CREATE EXTERNAL TABLE {name} (country string, confirmed bigint) "
            f"PARTITIONED BY (day string) STORED AS PARQUET LOCATION '{location}/'",
            workgroup=workgroup,
        )
        run(
            service,
            f"ALTER TABLE {name} ADD PARTITION (day = '2020-03-01') "
            f"LOCATION '{location}/day=2020-03-01/'",
            workgroup=workgroup,
        )
        answers[workgroup] = [
            run(service, f"SHOW PARTITIONS {name}", workgroup=workgroup)[1],
            run(service, f"DESCRIBE {name}", workgroup=workgroup)[1],
            run(service, f"SELECT count(*) FROM {name}", workgroup=workgroup)[1],
        ]
        run(service, f"DROP TABLE {name}", workgroup=workgroup)
    assert answers["big"] == answers["duck"]
    assert answers["big"][0] == [["day=2020-03-01"]]
