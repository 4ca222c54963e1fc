"""CTAS, INSERT INTO and UNLOAD on the real stack: files in the lake, tables in the metastore.

Each write is checked from outside the statement: the metastore's table and partitions,
the files in the lake (and their object events), the rows read back by a query, by
pyarrow, and by a separate Spark session on the same metastore. Refused and failed
writes, and a write whose process is killed, leave nothing behind.
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow.orc as orc
import pyarrow.parquet as pq
import pytest

from lakeward.access import AllowAll
from lakeward.config import Settings
from lakeward.errors import AccessDenied, InvalidRequest, TableNotFound
from lakeward.metastore.client import MetastoreClient
from lakeward.metastore.uris import metastore_uris
from lakeward.query.journal import PAUSE_FOR_TESTS
from lakeward.query.model import QueryExecution, QueryState, WorkGroup
from lakeward.query.service import QueryService
from lakeward.storage import decode_key
from lakeward.storage.paths import lake_place
from tests.helpers import over_stack
from tests.query.support import run, wait

pytestmark = pytest.mark.spark

COUNTRIES = ("France", "Italy", "Spain")
IN_COUNTRIES = "country IN ('France', 'Italy', 'Spain')"
SOURCE = "covid_confirmed_cases"


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def finish(service: QueryService, sql: str) -> QueryExecution:
    return wait(service, service.start_query_execution(sql))


def failed(service: QueryService, sql: str) -> str:
    execution = finish(service, sql)
    assert execution.state == QueryState.FAILED, execution
    return execution.state_change_reason or ""


def lake_files(service: QueryService, location: str) -> list[str]:
    place = lake_place(service.settings, location)
    assert place is not None
    bucket, key = place
    return sorted(service.storage.keys(bucket, key.rstrip("/") + "/"))


def local(location: str) -> Path:
    return Path(location.removeprefix("file://").removeprefix("file:"))


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

    # Athena's result: one `rows` column, and UpdateCount.
    page = service.get_query_results(execution.id)
    assert page.rows == [["rows"], [str(expected)]]
    assert page.update_count == expected

    table = metastore.table("default", name)
    results = execution.output_location.rsplit("/", 1)[0]
    assert table.location.rstrip("/").endswith(f"/tables/{execution.id}")
    assert local(table.location) == local(f"{results}/tables/{execution.id}")
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


def test_ctas_formats_write_what_their_serde_reads(
    service: QueryService, metastore: MetastoreClient
) -> None:
    query = f"SELECT country, date, confirmed FROM {SOURCE} WHERE country = 'Italy'"
    _, expected = run(service, query + " ORDER BY date")
    cases = {
        "orc": "format = 'ORC', write_compression = 'SNAPPY'",
        "json": "format = 'JSON'",
        "text": "format = 'TEXTFILE', field_delimiter = ','",
    }
    for kind, properties in cases.items():
        name = unique(f"ctas_{kind}")
        execution = finish(service, f"CREATE TABLE {name} WITH ({properties}) AS {query}")
        assert execution.state == QueryState.SUCCEEDED, (kind, execution.state_change_reason)
        table = metastore.table("default", name)
        files = [local(table.location) / Path(k).name for k in lake_files(service, table.location)]
        assert len(files) == 1
        if kind == "orc":
            assert table.serde == "org.apache.hadoop.hive.ql.io.orc.OrcSerde"
            data = orc.read_table(files[0]).sort_by("date")
            rows = [[r["country"], str(r["date"]), str(r["confirmed"])] for r in data.to_pylist()]
        elif kind == "json":  # GZIP, Athena's default for JSON
            assert table.serde == "org.apache.hive.hcatalog.data.JsonSerDe"
            assert files[0].name.endswith(".json.gz")
            lines = gzip.decompress(files[0].read_bytes()).decode().splitlines()
            records = sorted((json.loads(line) for line in lines), key=lambda r: r["date"])
            rows = [[r["country"], r["date"], str(r["confirmed"])] for r in records]
        else:
            assert table.serde == "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe"
            assert table.serde_parameters["field.delim"] == ","
            lines = gzip.decompress(files[0].read_bytes()).decode().splitlines()
            rows = sorted((line.split(",") for line in lines), key=lambda r: r[1])
        assert rows == expected, kind
        _, read_back = run(service, f"SELECT country, date, confirmed FROM {name} ORDER BY date")
        assert read_back == expected, kind  # and lakeward's reader of the format reads them


def test_insert_into_a_text_table_writes_as_its_serde_reads(
    service: QueryService, metastore: MetastoreClient
) -> None:
    name = unique("text_target")
    place = f"{service.settings.lake_root}/{service.settings.lake.data_bucket}/{name}"
    made = finish(
        service,
        f"CREATE EXTERNAL TABLE {name} (a int, b string) ROW FORMAT DELIMITED "
        f"FIELDS TERMINATED BY '|' NULL DEFINED AS 'NA' STORED AS TEXTFILE LOCATION '{place}'",
    )
    assert made.state == QueryState.SUCCEEDED, made.state_change_reason
    inserted = finish(service, f"INSERT INTO {name} VALUES (1, 'x'), (NULL, NULL)")
    assert inserted.state == QueryState.SUCCEEDED, inserted.state_change_reason
    files = lake_files(service, place)
    assert len(files) == 1 and files[0].endswith(".txt.gz")
    text = gzip.decompress((local(place) / Path(files[0]).name).read_bytes()).decode()
    assert text.splitlines() == ["1|x", "NA|NA"]
    _, rows = run(service, f"SELECT a, b FROM {name} ORDER BY a")
    assert rows == [["1", "x"], [None, None]]


def test_ctas_reads_through_a_view(service: QueryService, metastore: MetastoreClient) -> None:
    view, name = unique("writes_view"), unique("ctas_of_view")
    made = finish(
        service,
        f"CREATE VIEW {view} AS SELECT country, max(confirmed) AS peak FROM {SOURCE} "
        f"WHERE {IN_COUNTRIES} GROUP BY country",
    )
    assert made.state == QueryState.SUCCEEDED, made.state_change_reason
    execution = finish(service, f"CREATE TABLE {name} AS SELECT * FROM {view}")
    assert execution.state == QueryState.SUCCEEDED, execution.state_change_reason
    assert [(c.name, c.type) for c in metastore.table("default", name).columns] == [
        ("country", "string"),
        ("peak", "bigint"),
    ]
    _, through_view = run(service, f"SELECT * FROM {view} ORDER BY country")
    _, copied = run(service, f"SELECT * FROM {name} ORDER BY country")
    assert copied == through_view and len(copied) == len(COUNTRIES)
    assert "is a view" in failed(service, f"INSERT INTO {view} SELECT * FROM {name}")


def test_ctas_with_no_data_makes_an_empty_table_of_the_query_types(
    service: QueryService, metastore: MetastoreClient
) -> None:
    name = unique("ctas_empty")
    execution = finish(
        service,
        f"CREATE TABLE {name} AS SELECT country, lat, confirmed, date FROM {SOURCE} WITH NO DATA",
    )
    assert execution.state == QueryState.SUCCEEDED, execution.state_change_reason
    table = metastore.table("default", name)
    assert [(c.name, c.type) for c in table.columns] == [
        ("country", "string"),
        ("lat", "double"),
        ("confirmed", "bigint"),
        ("date", "date"),
    ]
    assert lake_files(service, table.location) == []
    assert service.get_query_results(execution.id).rows == [["rows"], ["0"]]
    _, rows = run(service, f"SELECT count(*) FROM {name}")
    assert rows == [["0"]]


def test_unload_writes_files_and_no_table(
    service: QueryService, metastore: MetastoreClient
) -> None:
    target = f"{service.settings.lake_root}/{service.settings.lake.data_bucket}/{unique('unload')}"
    tables = set(metastore.tables("default"))
    query = f"SELECT country, date, confirmed FROM {SOURCE} WHERE {IN_COUNTRIES}"
    execution = finish(
        service,
        f"UNLOAD ({query}) TO '{target}/' WITH (format = 'PARQUET', "
        "partitioned_by = ARRAY['country'])",
    )
    # partitioned_by names a column that is not last: Athena's rule, refused.
    assert execution.state == QueryState.FAILED
    assert lake_files(service, target) == []

    execution = finish(
        service, f"UNLOAD ({query}) TO '{target}/' WITH (format = 'PARQUET', compression = 'NONE')"
    )
    assert execution.state == QueryState.SUCCEEDED, execution.state_change_reason
    files = lake_files(service, target)
    assert files
    _, counted = run(service, f"SELECT count(*) FROM {SOURCE} WHERE {IN_COUNTRIES}")
    data = pq.read_table([local(target) / Path(f).name for f in files])
    assert data.num_rows == int(str(counted[0][0]))
    assert data.column_names == ["country", "date", "confirmed"]
    assert set(metastore.tables("default")) == tables
    page = service.get_query_results(execution.id)  # no rows; UpdateCount the rows written
    assert page.update_count == data.num_rows and page.columns == []
    assert execution.substatement_type == "UNLOAD"

    # The target is not empty any more: a second UNLOAD is refused and adds nothing.
    again = failed(service, f"UNLOAD ({query}) TO '{target}' WITH (format = 'JSON')")
    assert "is not empty" in again
    assert lake_files(service, target) == files


def test_refused_writes_change_nothing(service: QueryService, metastore: MetastoreClient) -> None:
    name = unique("ctas_refused")
    made = finish(service, f"CREATE TABLE {name} AS SELECT 1 AS a")
    assert made.state == QueryState.SUCCEEDED, made.state_change_reason
    table = metastore.table("default", name)

    assert f"table demo_hive_metastore.default.{name} already exists" in failed(
        service, f"CREATE TABLE {name} AS SELECT 2 AS b"
    )
    assert metastore.table("default", name) == table
    kept = finish(service, f"CREATE TABLE IF NOT EXISTS {name} AS SELECT 2 AS b")
    assert kept.state == QueryState.SUCCEEDED, kept.state_change_reason
    assert service.get_query_results(kept.id).rows == [["rows"], ["0"]]
    assert metastore.table("default", name) == table

    # external_location: a place with files, and a place outside the lake.
    other = unique("ctas_refused")
    reason = failed(
        service,
        f"CREATE TABLE {other} WITH (external_location = '{table.location}') AS SELECT 1 AS a",
    )
    assert "is not empty" in reason
    reason = failed(
        service, f"CREATE TABLE {other} WITH (external_location = 'file:///tmp/x') AS SELECT 1 a"
    )
    assert "is not in the lake" in reason
    with pytest.raises(TableNotFound):
        metastore.table("default", other)

    # Partition columns not last: the write is staged only, nothing is published.
    place = f"{service.settings.lake_root}/{service.settings.lake.data_bucket}/{unique('p')}"
    reason = failed(
        service,
        f"CREATE TABLE {other} WITH (external_location = '{place}', "
        f"partitioned_by = ARRAY['country']) AS SELECT country, date, confirmed FROM {SOURCE}",
    )
    assert "partition columns must be the last columns of the SELECT" in reason
    assert lake_files(service, place) == []
    with pytest.raises(TableNotFound):
        metastore.table("default", other)

    # Refused at the start, naming what is not supported.
    for sql, message in (
        (f"CREATE TABLE {other} WITH (table_type = 'ICEBERG') AS SELECT 1 a", "ICEBERG"),
        (f"CREATE TABLE {other} WITH (format = 'AVRO') AS SELECT 1 a", "AVRO"),
        (f"CREATE TABLE {other} WITH (bucket_count = 4) AS SELECT 1 a", "bucket"),
        (f"CREATE TABLE {other} WITH (write_compression = 'LZO') AS SELECT 1 a", "LZO"),
        (f"CREATE TABLE {other} AS SELECT count(*) FROM {SOURCE}", "not specified at position 1"),
    ):
        with pytest.raises(InvalidRequest, match=message):
            service.start_query_execution(sql)

    # INSERT of values that Trino would not coerce: refused, no file added.
    files = lake_files(service, table.location)
    reason = failed(service, f"INSERT INTO {name} VALUES ('not a number')")
    assert "Insert query has mismatched column types: Table: [integer], Query: [varchar]" in reason
    assert lake_files(service, table.location) == files


def test_a_stopped_or_failing_write_leaves_nothing(
    service: QueryService, metastore: MetastoreClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Stopped once its files are published and its table registered, before its commit.
    monkeypatch.setenv(PAUSE_FOR_TESTS, "600")
    name = unique("ctas_stopped")
    execution_id = service.start_query_execution(
        f"CREATE TABLE {name} WITH (partitioned_by = ARRAY['country']) AS "
        f"SELECT date, confirmed, country FROM {SOURCE} WHERE {IN_COUNTRIES}"
    )
    deadline = time.monotonic() + 120
    while not metastore.table_exists("default", name):
        assert time.monotonic() < deadline, service.get_query_execution(execution_id)
        time.sleep(0.05)
    location = metastore.table("default", name).location
    assert len(lake_files(service, location)) == len(COUNTRIES)
    service.stop_query_execution(execution_id)
    assert wait(service, execution_id).state == QueryState.CANCELLED
    assert not metastore.table_exists("default", name)
    assert lake_files(service, location) == []
    monkeypatch.delenv(PAUSE_FOR_TESTS)

    # A query that fails half-way (a value that is not a number) writes nothing.
    execution = finish(
        service, f"CREATE TABLE {name} AS SELECT CAST(province_state AS integer) AS n FROM {SOURCE}"
    )
    assert execution.state == QueryState.FAILED
    assert not metastore.table_exists("default", name)
    results = execution.output_location.rsplit("/", 1)[0]
    assert lake_files(service, f"{results}/tables/{execution.id}") == []


class _Denying(AllowAll):
    """Everything allowed but one action on some resources, as a policy would decide."""

    def __init__(self, denied: str, on: str) -> None:
        self.denied, self.on = denied, on

    def authorize(self, action: str, resource: str, **kwargs: Any) -> object:
        if action == self.denied and self.on in resource:
            raise AccessDenied(f"not authorized to perform {action} on {resource}")
        return super().authorize(action, resource, **kwargs)


@pytest.mark.parametrize(
    ("denied", "on"),
    [("glue:CreateTable", "table/"), ("s3:PutObject", "/tables/"), ("s3:GetObject", "covid")],
)
def test_a_refused_permission_fails_the_ctas_and_changes_nothing(
    stack: Settings, tmp_path: Path, metastore: MetastoreClient, denied: str, on: str
) -> None:
    service = QueryService(over_stack(stack, tmp_path), access=_Denying(denied, on), owner=True)
    try:
        name = unique("ctas_denied")
        execution = finish(service, f"CREATE TABLE {name} AS SELECT * FROM {SOURCE}")
        assert execution.state == QueryState.FAILED
        assert denied in (execution.state_change_reason or "")
        with pytest.raises(TableNotFound):
            metastore.table("default", name)
        results = execution.output_location.rsplit("/", 1)[0]
        assert lake_files(service, f"{results}/tables/{execution.id}") == []
    finally:
        service.close()


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


def test_a_write_whose_process_is_killed_is_rolled_back(
    stack: Settings, tmp_path: Path, metastore: MetastoreClient
) -> None:
    """kill -9 of the process in the middle of a CTAS: its files, its table, gone."""
    name = unique("ctas_killed")
    sql = f"CREATE TABLE {name} AS SELECT * FROM {SOURCE}"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(stack.data_dir), str(tmp_path), sql],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, PAUSE_FOR_TESTS: "600"},
        cwd=Path(__file__).parents[3],
    )
    try:
        assert child.stdout is not None
        execution_id = child.stdout.readline().strip()
        assert execution_id, "the child process did not start the CTAS"
        deadline = time.monotonic() + 300
        while not metastore.table_exists("default", name):  # registered: paused before commit
            assert child.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        location = metastore.table("default", name).location
        settings = over_stack(stack, tmp_path)
        staging = settings.data_dir / "query" / "staging" / execution_id
        assert staging.is_dir()
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
    assert cursor.fetchall() == [(count,)]
    assert cursor.rowcount == count  # PyAthena's, from UpdateCount of an INSERT
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
        assert made["columns"] == ["rows"] and int(made["rows"][1][0]) > 1000
        # INSERT needs glue:UpdateTable, which the policy does not give.
        insert = f"INSERT INTO default.{name} {select}"
        assert "glue:UpdateTable" in api_failed(engineer, insert)
        counted = ok(engineer, f"SELECT count(*) FROM default.{name}")["rows"][1][0]
        assert counted == made["rows"][1][0]  # the refused INSERT added nothing
    finally:
        lakeward("iam", "detach-user-policy", "--user", "de_user", "--policy", policy, **iam)
    with MetastoreClient(metastore_uris(stack)) as client:
        assert client.table_exists("default", name)
