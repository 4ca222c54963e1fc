"""CTAS and INSERT INTO on the real stack: files in the lake, tables in the metastore.

What needs the stack: the metastore's table and partitions read by a separate Spark
session, object events, the Spark workgroup's writes, Athena's clients, the seeded data
engineer, and a write whose process is killed (another process rolls it back). The
statements' own logic (formats, UNLOAD, refused, stopped and unauthorized writes) is
tested on the in-memory catalog (test_writes_in_memory.py).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from lakeward.config import Settings
from lakeward.metastore.client import MetastoreClient
from lakeward.metastore.uris import metastore_uris
from lakeward.query.journal import PAUSE_AFTER_COMMIT, PAUSE_FOR_TESTS
from lakeward.query.model import QueryExecution, QueryState, WorkGroup
from lakeward.query.service import QueryService
from lakeward.storage import decode_key
from lakeward.storage.paths import lake_place
from tests.helpers import over_stack
from tests.query.support import lake_files, local, run, wait

pytestmark = pytest.mark.spark

COUNTRIES = ("France", "Italy", "Spain")
IN_COUNTRIES = "country IN ('France', 'Italy', 'Spain')"
SOURCE = "covid_confirmed_cases"


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def finish(service: QueryService, sql: str) -> QueryExecution:
    return wait(service, service.start_query_execution(sql))


def totals(service: QueryService, table: str) -> dict[str, str | None]:
    _, rows = run(service, f"SELECT country, sum(confirmed) FROM {table} GROUP BY country")
    return {str(r[0]): r[1] for r in rows}


def test_ctas_partitioned_parquet_is_a_table_of_the_query_rows(
    service: QueryService, metastore: MetastoreClient, spark: Any
) -> None:
    name = unique("ctas_parquet")
    events: list[dict[str, Any]] = []
    unsubscribe = service.storage.subscribe(events.append)
    try:
        execution = finish(
            service,
            f"CREATE TABLE {name} WITH (partitioned_by = ARRAY['country']) AS "
            f"SELECT province_state, date, confirmed, country FROM {SOURCE} WHERE {IN_COUNTRIES}",
        )
    finally:
        unsubscribe()
    assert execution.state == QueryState.SUCCEEDED, execution.state_change_reason
    _, counted = run(service, f"SELECT count(*) FROM {SOURCE} WHERE {IN_COUNTRIES}")
    expected = int(str(counted[0][0]))
    assert expected > 1000

    # Athena's result: one `rows` column and no row to fetch; the count is the UpdateCount.
    page = service.get_query_results(execution.id)
    assert page.rows == [["rows"]]
    assert page.update_count == expected

    table = metastore.table("default", name)
    results = execution.output_location.rsplit("/", 1)[0]
    assert table.location.rstrip("/").endswith(f"/tables/{execution.id}")
    # The result and the table are named s3://... in the results and in the metastore.
    assert results.startswith(f"s3://{service.settings.lake.data_bucket}/query-results/")
    assert table.location == f"{results}/tables/{execution.id}"
    assert [(c.name, c.type) for c in table.columns] == [
        ("province_state", "string"),
        ("date", "date"),
        ("confirmed", "bigint"),
    ]
    assert [(c.name, c.type) for c in table.partition_keys] == [("country", "string")]
    partitions = metastore.partitions("default", name)
    assert sorted(p.values[0] for p in partitions) == list(COUNTRIES)

    source_totals = totals(service, f"(SELECT * FROM {SOURCE} WHERE {IN_COUNTRIES})")
    assert totals(service, name) == source_totals

    # Every file went through the lake's storage: an ObjectCreated event with its ETag.
    files = lake_files(service, table.location)
    assert len(files) == len(COUNTRIES)
    created = {
        decode_key(r["s3"]["object"]["key"]): r["s3"]["object"].get("eTag")
        for e in events
        for r in e["Records"]
        if r["eventName"].startswith("ObjectCreated")
    }
    assert set(files) <= set(created)
    bucket = lake_place(service.settings, table.location)[0]  # type: ignore[index]
    for key in files:
        info = service.storage.stat(bucket, key)
        assert created[key] == info.etag and len(info.etag) == 32

    # A separate Spark session on the same metastore reads the same rows.
    spark_totals = {
        r[0]: str(r[1])
        for r in spark.sql(
            f"SELECT country, sum(confirmed) FROM default.{name} GROUP BY country"
        ).collect()
    }
    assert spark_totals == source_totals


def test_insert_into_adds_new_files_and_registers_new_partitions(
    service: QueryService, metastore: MetastoreClient, spark: Any
) -> None:
    name = unique("insert_target")
    made = finish(
        service,
        f"CREATE TABLE {name} WITH (partitioned_by = ARRAY['country']) AS "
        f"SELECT province_state, date, confirmed, country FROM {SOURCE} WHERE country = 'Italy'",
    )
    assert made.state == QueryState.SUCCEEDED, made.state_change_reason
    location = metastore.table("default", name).location
    before = lake_files(service, location)

    inserted = finish(
        service,
        f"INSERT INTO {name} SELECT province_state, date, confirmed, country "
        f"FROM {SOURCE} WHERE country IN ('Spain', 'Italy')",
    )
    assert inserted.state == QueryState.SUCCEEDED, inserted.state_change_reason
    _, counted = run(service, f"SELECT count(*) FROM {SOURCE} WHERE country IN ('Spain', 'Italy')")
    added = int(str(counted[0][0]))
    assert service.get_query_results(inserted.id).update_count == added

    after = lake_files(service, location)
    assert set(before) < set(after)  # the first files are still there, unchanged
    assert sorted(p.values[0] for p in metastore.partitions("default", name)) == [
        "Italy",
        "Spain",
    ]
    _, italy = run(service, f"SELECT count(*) FROM {SOURCE} WHERE country = 'Italy'")
    _, rows = run(service, f"SELECT country, count(*) FROM {name} GROUP BY country")
    italy_rows = int(str(italy[0][0]))
    assert {r[0]: int(str(r[1])) for r in rows} == {
        "Italy": 2 * italy_rows,
        "Spain": added - italy_rows,
    }

    # VALUES with a column list: the columns not listed are NULL.
    values = finish(
        service,
        f"INSERT INTO {name} (country, confirmed) VALUES ('Atlantis', 7), ('Atlantis', 8)",
    )
    assert values.state == QueryState.SUCCEEDED, values.state_change_reason
    _, atlantis = run(
        service,
        f"SELECT province_state, date, confirmed FROM {name} WHERE country = 'Atlantis' "
        "ORDER BY confirmed",
    )
    assert atlantis == [[None, None, "7"], [None, None, "8"]]
    spark_rows = spark.sql(
        f"SELECT confirmed FROM default.{name} WHERE country = 'Atlantis' ORDER BY confirmed"
    ).collect()
    assert [r[0] for r in spark_rows] == [7, 8]


CHILD = """
import sys, time
from pathlib import Path
from lakeward.config import load_settings
from lakeward.query.service import QueryService
from tests.helpers import over_stack

settings = over_stack(load_settings(data_dir=sys.argv[1], env={}), Path(sys.argv[2]))
service = QueryService(settings, owner=True)
print(service.start_query_execution(sys.argv[3]), flush=True)
time.sleep(3600)
"""


@pytest.mark.parametrize("pause", [PAUSE_FOR_TESTS, PAUSE_AFTER_COMMIT])
def test_a_write_whose_process_is_killed_is_rolled_back(
    stack: Settings, tmp_path: Path, metastore: MetastoreClient, pause: str
) -> None:
    """kill -9 of the process in the middle of a CTAS: its files, its table, gone.

    Killed before its commit, or after it but before its execution was saved SUCCEEDED:
    either way it is all there with SUCCEEDED, or absent.
    """
    name = unique("ctas_killed")
    sql = f"CREATE TABLE {name} AS SELECT * FROM {SOURCE}"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(stack.data_dir), str(tmp_path), sql],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, pause: "600"},
        cwd=Path(__file__).parents[3],
    )
    settings = over_stack(stack, tmp_path)
    try:
        assert child.stdout is not None
        execution_id = child.stdout.readline().strip()
        assert execution_id, "the child process did not start the CTAS"
        staging = settings.data_dir / "query" / "staging" / execution_id
        committed = pause == PAUSE_AFTER_COMMIT
        deadline = time.monotonic() + 300
        # Registered, and paused before its commit; or committed (its staging removed).
        while not metastore.table_exists("default", name) or (committed and staging.exists()):
            assert child.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        location = metastore.table("default", name).location
        assert any(p.is_file() for p in local(settings, location).rglob("*"))
        assert staging.is_dir() != committed
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    survivor = QueryService(settings, owner=True)  # another process: it finds the dead one
    try:
        assert lake_files(survivor, location) == []
        assert not metastore.table_exists("default", name)
        assert not staging.exists()
        execution = survivor.get_query_execution(execution_id)
        assert execution.state == QueryState.FAILED
        assert "stopped before it finished" in (execution.state_change_reason or "")
        assert survivor.store.orphan_writes() == []
    finally:
        survivor.close()


def test_a_spark_workgroup_writes_the_same_table(
    service: QueryService, metastore: MetastoreClient
) -> None:
    service.put_work_group(WorkGroup(name="writes_on_spark", engine="spark"))
    query = f"SELECT province_state, date, confirmed, country FROM {SOURCE} WHERE {IN_COUNTRIES}"
    tables = {}
    for group in ("primary", "writes_on_spark"):
        name = unique("ctas_engine")
        started = service.start_query_execution(
            f"CREATE TABLE {name} WITH (partitioned_by = ARRAY['country']) AS {query}",
            workgroup=group,
        )
        execution = wait(service, started)
        assert execution.state == QueryState.SUCCEEDED, (group, execution.state_change_reason)
        tables[group] = name
    duck, spark = (metastore.table("default", tables[g]) for g in ("primary", "writes_on_spark"))
    assert [(c.name, c.type) for c in duck.columns] == [(c.name, c.type) for c in spark.columns]
    assert duck.partition_keys == spark.partition_keys
    for name in tables.values():
        assert totals(service, name) == totals(service, f"({query})")


def test_boto3_and_pyathena_see_athenas_ctas_result(stack: Settings) -> None:
    import boto3
    from pyathena import connect

    from tests.query.support import credentials, endpoint

    athena = boto3.client("athena", endpoint_url=endpoint(stack), **credentials(stack))
    name = unique("ctas_boto3")
    started = athena.start_query_execution(
        QueryString=f"CREATE TABLE {name} AS SELECT country FROM {SOURCE} WHERE country = 'Italy'",
        QueryExecutionContext={"Database": "default"},
    )
    while True:
        execution = athena.get_query_execution(QueryExecutionId=started["QueryExecutionId"])
        status = execution["QueryExecution"]["Status"]
        if status["State"] in ("SUCCEEDED", "FAILED", "CANCELLED"):
            break
        time.sleep(0.05)
    assert status["State"] == "SUCCEEDED", status
    assert execution["QueryExecution"]["StatementType"] == "DML"
    assert execution["QueryExecution"]["SubstatementType"] == "CREATE_TABLE_AS_SELECT"
    result = athena.get_query_results(QueryExecutionId=started["QueryExecutionId"])
    count = result["UpdateCount"]
    assert count > 100
    assert [c["Name"] for c in result["ResultSet"]["ResultSetMetadata"]["ColumnInfo"]] == ["rows"]

    cursor = connect(
        s3_staging_dir="s3://staging/", endpoint_url=endpoint(stack), poll_interval=0.05,
        catalog_name="demo_hive_metastore",
        **credentials(stack),
    ).cursor()  # fmt: skip
    cursor.execute(f"INSERT INTO {name} SELECT country FROM {SOURCE} WHERE country = 'Italy'")
    assert cursor.fetchall() == []  # the count is no row to fetch, as in Athena...
    assert cursor.rowcount == count  # ...but PyAthena's rowcount, from UpdateCount
    cursor.execute(f"SELECT count(*) FROM {name}")
    assert cursor.fetchall() == [(2 * count,)]


def test_the_data_engineer_writes_tables_only_when_granted(stack: Settings) -> None:
    """The seed's data engineer, through the API with its own keys, under real policies."""
    from lakeward.access.arns import glue_catalog_arn, glue_database_arn, glue_table_arn
    from tests.helpers import lakeward
    from tests.query.support import CATALOG, api_failed, client_for
    from tests.query.support import api_ok as ok

    creds = json.loads(
        lakeward("secrets", "get", "DataEngineerUserCreds", data_dir=stack.data_dir).stdout
    )
    engineer = client_for(stack, creds["access_key_id"], creds["secret_access_key"])
    name = unique("ctas_engineer")
    select = f"SELECT country, confirmed FROM {SOURCE}"
    ctas = f"CREATE TABLE default.{name} AS {select}"
    reason = api_failed(engineer, ctas)
    assert "glue:CreateTable" in reason and "de_user" in reason
    with MetastoreClient(metastore_uris(stack)) as client:
        assert not client.table_exists("default", name)

    policy = unique("CtasAllowed")
    document = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Action": ["glue:CreateTable"],
                "Resource": [
                    glue_catalog_arn(CATALOG),
                    glue_database_arn(CATALOG, "default"),
                    glue_table_arn(CATALOG, "default", name),
                ],
            }
        ],
    }
    iam = {"data_dir": stack.data_dir}
    lakeward("iam", "create-policy", "--policy", policy, "--document", json.dumps(document), **iam)
    lakeward("iam", "attach-user-policy", "--user", "de_user", "--policy", policy, **iam)
    try:
        made = ok(engineer, ctas)
        assert made["columns"] == ["rows"] and made["rows"] == [["rows"]]  # the count: no row
        written = engineer.get_query_results(QueryExecutionId=made["QueryExecutionId"])
        made_rows = written["UpdateCount"]
        assert made_rows > 1000
        # INSERT needs glue:UpdateTable, which the policy does not give.
        insert = f"INSERT INTO default.{name} {select}"
        assert "glue:UpdateTable" in api_failed(engineer, insert)
        counted = ok(engineer, f"SELECT count(*) FROM default.{name}")["rows"][1][0]
        assert int(counted) == made_rows  # the refused INSERT added nothing
    finally:
        lakeward("iam", "detach-user-policy", "--user", "de_user", "--policy", policy, **iam)
    with MetastoreClient(metastore_uris(stack)) as client:
        assert client.table_exists("default", name)
