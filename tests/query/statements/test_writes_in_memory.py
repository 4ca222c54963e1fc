"""CTAS, INSERT INTO and UNLOAD on the in-memory catalog: what a write puts in the lake and in
the catalog, read back from the files themselves, and what refused, stopped, failing and
unauthorized writes leave behind (nothing). The stack's tests (test_writes.py) keep what
needs the real metastore or Spark: object events, partitions read by Spark, a killed process.
"""

from __future__ import annotations

import errno
import gzip
import json
import time
from pathlib import Path
from typing import Any

import pyarrow.orc as orc
import pyarrow.parquet as pq
import pytest

from lakeward.access.arns import catalog_arn, glue_table_arn, s3_arn, workgroup_arn
from lakeward.errors import InvalidRequest
from lakeward.metastore.tables import TableInfo
from lakeward.query import service as service_module
from lakeward.query.journal import PAUSE_FOR_TESTS
from lakeward.query.model import QueryExecution, QueryState
from lakeward.query.service import QueryService
from tests.query.support import MEMORY, lake_files, local, run, wait

IN_COUNTRIES = "country IN ('France', 'Italy', 'Spain')"
COUNTRIES = ("France", "Italy", "Spain")


def start(service: QueryService, sql: str, principal: str = "analyst") -> str:
    return service.start_query_execution(sql, catalog=MEMORY, database="sales", principal=principal)


def finish(service: QueryService, sql: str, principal: str = "analyst") -> QueryExecution:
    return wait(service, start(service, sql, principal))


def succeeded(service: QueryService, sql: str) -> QueryExecution:
    execution = finish(service, sql)
    assert execution.state == QueryState.SUCCEEDED, (sql, execution.state_change_reason)
    return execution


def failed(service: QueryService, sql: str, principal: str = "analyst") -> str:
    execution = finish(service, sql, principal)
    assert execution.state == QueryState.FAILED, (sql, execution)
    return execution.state_change_reason or ""


def rows(service: QueryService, sql: str) -> list[list[str | None]]:
    return run(service, sql, catalog=MEMORY, database="sales", principal="analyst")[1]


def table(service: QueryService, name: str) -> TableInfo:
    return service.catalogs.catalog(MEMORY).load_table("sales", name)


def exists(service: QueryService, name: str) -> bool:
    return service.catalogs.catalog(MEMORY).table_exists("sales", name)


def place_in_lake(service: QueryService, name: str) -> str:
    return f"{service.settings.lake_root}/{service.settings.lake.data_bucket}/{name}"


def test_ctas_formats_write_what_their_serde_reads(sales: QueryService) -> None:
    query = "SELECT country, date, confirmed FROM covid WHERE country = 'Italy'"
    expected = rows(sales, query + " ORDER BY date")
    assert len(expected) > 1000
    cases = {
        "orc": "format = 'ORC', write_compression = 'SNAPPY'",
        "json": "format = 'JSON'",
        "text": "format = 'TEXTFILE', field_delimiter = ','",
    }
    for kind, properties in cases.items():
        name = f"ctas_{kind}"
        succeeded(sales, f"CREATE TABLE {name} WITH ({properties}) AS {query}")
        info = table(sales, name)
        files = [
            local(sales.settings, info.location) / Path(k).name
            for k in lake_files(sales, info.location)
        ]
        assert len(files) == 1
        if kind == "orc":
            assert info.serde == "org.apache.hadoop.hive.ql.io.orc.OrcSerde"
            data = orc.read_table(files[0]).sort_by("date")
            found = [[r["country"], str(r["date"]), str(r["confirmed"])] for r in data.to_pylist()]
        elif kind == "json":  # GZIP, Athena's default for JSON
            assert info.serde == "org.apache.hive.hcatalog.data.JsonSerDe"
            assert files[0].name.endswith(".json.gz")
            lines = gzip.decompress(files[0].read_bytes()).decode().splitlines()
            records = sorted((json.loads(line) for line in lines), key=lambda r: r["date"])
            found = [[r["country"], r["date"], str(r["confirmed"])] for r in records]
        else:
            assert info.serde == "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe"
            assert info.serde_parameters["field.delim"] == ","
            lines = gzip.decompress(files[0].read_bytes()).decode().splitlines()
            found = sorted((line.split(",") for line in lines), key=lambda r: r[1])
        assert found == expected, kind
        # ... and lakeward's reader of the format reads them back.
        assert rows(sales, f"SELECT country, date, confirmed FROM {name} ORDER BY date") == expected


def test_insert_into_a_text_table_writes_as_its_serde_reads(sales: QueryService) -> None:
    place = place_in_lake(sales, "text_target")
    succeeded(
        sales,
        "CREATE EXTERNAL TABLE text_target (a int, b string) ROW FORMAT DELIMITED "
        f"FIELDS TERMINATED BY '|' NULL DEFINED AS 'NA' STORED AS TEXTFILE LOCATION '{place}'",
    )
    succeeded(sales, "INSERT INTO text_target VALUES (1, 'x'), (NULL, NULL)")
    files = lake_files(sales, place)
    assert len(files) == 1 and files[0].endswith(".txt.gz")
    text = gzip.decompress(
        (local(sales.settings, place) / Path(files[0]).name).read_bytes()
    ).decode()
    assert text.splitlines() == ["1|x", "NA|NA"]
    assert rows(sales, "SELECT a, b FROM text_target ORDER BY a") == [["1", "x"], [None, None]]


def test_ctas_reads_through_a_view(sales: QueryService) -> None:
    succeeded(
        sales,
        "CREATE VIEW peaks AS SELECT country, max(confirmed) AS peak FROM covid "
        f"WHERE {IN_COUNTRIES} GROUP BY country",
    )
    succeeded(sales, "CREATE TABLE copied AS SELECT * FROM peaks")
    assert [(c.name, c.type) for c in table(sales, "copied").columns] == [
        ("country", "string"),
        ("peak", "bigint"),
    ]
    through_view = rows(sales, "SELECT * FROM peaks ORDER BY country")
    assert rows(sales, "SELECT * FROM copied ORDER BY country") == through_view
    assert [r[0] for r in through_view] == list(COUNTRIES)
    assert "is a view" in failed(sales, "INSERT INTO peaks SELECT * FROM copied")


def test_ctas_with_no_data_makes_an_empty_table_of_the_query_types(sales: QueryService) -> None:
    execution = succeeded(
        sales, "CREATE TABLE empty AS SELECT country, lat, confirmed, date FROM covid WITH NO DATA"
    )
    info = table(sales, "empty")
    assert [(c.name, c.type) for c in info.columns] == [
        ("country", "string"),
        ("lat", "double"),
        ("confirmed", "bigint"),
        ("date", "date"),
    ]
    assert lake_files(sales, info.location) == []
    page = sales.get_query_results(execution.id)
    assert (page.rows, page.update_count) == ([["rows"]], 0)
    assert rows(sales, "SELECT count(*) FROM empty") == [["0"]]


def test_unload_writes_files_and_no_table(sales: QueryService) -> None:
    target = place_in_lake(sales, "unloaded")
    tables = rows(sales, "SHOW TABLES")
    query = f"SELECT country, date, confirmed FROM covid WHERE {IN_COUNTRIES}"
    # partitioned_by names a column that is not last: Athena's rule, refused.
    failed(
        sales,
        f"UNLOAD ({query}) TO '{target}/' WITH (format = 'PARQUET', "
        "partitioned_by = ARRAY['country'])",
    )
    assert lake_files(sales, target) == []

    execution = succeeded(
        sales, f"UNLOAD ({query}) TO '{target}/' WITH (format = 'PARQUET', compression = 'NONE')"
    )
    files = lake_files(sales, target)
    assert files
    data = pq.read_table([local(sales.settings, target) / Path(f).name for f in files])
    assert [[str(data.num_rows)]] == rows(sales, f"SELECT count(*) FROM ({query})")
    assert data.column_names == ["country", "date", "confirmed"]
    assert rows(sales, "SHOW TABLES") == tables
    page = sales.get_query_results(execution.id)  # no rows; UpdateCount the rows written
    assert page.update_count == data.num_rows and page.columns == []
    assert execution.substatement_type == "UNLOAD"

    # The target is not empty any more: a second UNLOAD is refused and adds nothing.
    assert "is not empty" in failed(sales, f"UNLOAD ({query}) TO '{target}' WITH (format = 'JSON')")
    assert lake_files(sales, target) == files


def test_refused_writes_change_nothing(sales: QueryService) -> None:
    succeeded(sales, "CREATE TABLE kept AS SELECT 1 AS a")
    before = table(sales, "kept")
    refused = failed(sales, "CREATE TABLE kept AS SELECT 2 AS b")
    assert f"table {MEMORY}.sales.kept already exists" in refused
    assert table(sales, "kept") == before
    same = succeeded(sales, "CREATE TABLE IF NOT EXISTS kept AS SELECT 2 AS b")
    assert sales.get_query_results(same.id).rows == [["rows"]]
    assert table(sales, "kept") == before

    # external_location: a place with files, and a place outside the lake.
    reason = failed(
        sales, f"CREATE TABLE other WITH (external_location = '{before.location}') AS SELECT 1 a"
    )
    assert "is not empty" in reason
    reason = failed(
        sales, "CREATE TABLE other WITH (external_location = 'file:///tmp/x') AS SELECT 1 a"
    )
    assert "is not in the lake" in reason
    assert not exists(sales, "other")

    # Partition columns not last: the write is staged only, nothing is published.
    place = place_in_lake(sales, "misplaced")
    reason = failed(
        sales,
        f"CREATE TABLE other WITH (external_location = '{place}', "
        "partitioned_by = ARRAY['country']) AS SELECT country, date, confirmed FROM covid",
    )
    assert "partition columns must be the last columns of the SELECT" in reason
    assert lake_files(sales, place) == []
    assert not exists(sales, "other")

    # Refused at the start, naming what is not supported.
    for sql, message in (
        ("CREATE TABLE other WITH (table_type = 'ICEBERG') AS SELECT 1 a", "is_external = false"),
        ("CREATE TABLE other WITH (partitioning = ARRAY['a']) AS SELECT 1 a", "'ICEBERG'"),
        ("CREATE TABLE other WITH (format = 'AVRO') AS SELECT 1 a", "AVRO"),
        ("CREATE TABLE other WITH (bucket_count = 4) AS SELECT 1 a", "bucket"),
        ("CREATE TABLE other WITH (write_compression = 'LZO') AS SELECT 1 a", "LZO"),
        ("CREATE TABLE other AS SELECT count(*) FROM covid", "not specified at position 1"),
    ):
        with pytest.raises(InvalidRequest, match=message):
            start(sales, sql)

    # INSERT of values that Trino would not coerce: refused, no file added.
    files = lake_files(sales, before.location)
    reason = failed(sales, "INSERT INTO kept VALUES ('not a number')")
    assert "Insert query has mismatched column types: Table: [integer], Query: [varchar]" in reason
    assert lake_files(sales, before.location) == files
    # A value of a type compatible with its column's goes in through a cast, as Trino's
    # INSERT takes it: 2.25 (a double to Athena) into a decimal column, 7 into a real.
    succeeded(sales, "CREATE TABLE priced AS SELECT DECIMAL '1.50' AS amount, REAL '1' AS r")
    succeeded(sales, "INSERT INTO priced VALUES (2.25, 7.5), (DECIMAL '3.125', 7)")
    assert sorted(rows(sales, "SELECT amount, r FROM priced")) == [
        ["1.50", "1.0"], ["2.25", "7.5"], ["3.13", "7.0"]
    ]  # fmt: skip
    # A narrowing that does not fit fails the write, and nothing is added.
    succeeded(sales, "CREATE TABLE small AS SELECT 1 AS n")
    reason = failed(sales, "INSERT INTO small VALUES (BIGINT '9999999999')")
    assert reason == "NUMERIC_VALUE_OUT_OF_RANGE: Out of range for integer: 9999999999"
    assert rows(sales, "SELECT n FROM small") == [["1"]]


def test_a_stopped_or_failing_write_leaves_nothing(
    sales: QueryService, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Stopped once its files are published and its table registered, before its commit.
    monkeypatch.setenv(PAUSE_FOR_TESTS, "600")
    execution_id = start(
        sales,
        "CREATE TABLE stopped WITH (partitioned_by = ARRAY['country']) AS "
        f"SELECT date, confirmed, country FROM covid WHERE {IN_COUNTRIES}",
    )
    deadline = time.monotonic() + 120
    while not exists(sales, "stopped"):
        assert time.monotonic() < deadline, sales.get_query_execution(execution_id)
        time.sleep(0.05)
    location = table(sales, "stopped").location
    assert len(lake_files(sales, location)) == len(COUNTRIES)
    sales.stop_query_execution(execution_id)
    assert wait(sales, execution_id).state == QueryState.CANCELLED
    assert not exists(sales, "stopped")
    assert lake_files(sales, location) == []
    monkeypatch.delenv(PAUSE_FOR_TESTS)

    # A query that fails half-way (a value that is not a number) writes nothing.
    execution = finish(
        sales, "CREATE TABLE stopped AS SELECT CAST(province_state AS integer) AS n FROM covid"
    )
    assert execution.state == QueryState.FAILED
    assert "Cannot cast" in (execution.state_change_reason or "")
    assert not exists(sales, "stopped")
    results = execution.output_location.rsplit("/", 1)[0]
    assert lake_files(sales, f"{results}/tables/{execution.id}") == []


def test_a_write_whose_result_cannot_be_saved_is_rolled_back(
    sales: QueryService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CTAS committed, then its result object could not be written: FAILED, and no
    table, as Athena's query is all there with SUCCEEDED or absent."""

    def disk_full(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(service_module.results, "write_results", disk_full)
    execution = finish(sales, f"CREATE TABLE unsaved AS SELECT * FROM covid WHERE {IN_COUNTRIES}")
    assert execution.state == QueryState.FAILED
    assert "No space left on device" in (execution.state_change_reason or "")
    assert not exists(sales, "unsaved")
    results = execution.output_location.rsplit("/", 1)[0]
    assert lake_files(sales, f"{results}/tables/{execution.id}") == []
    assert not sales.store.write_in_flight(execution.id)
    monkeypatch.undo()
    # The same statement, once the result can be saved, creates the table.
    again = succeeded(sales, f"CREATE TABLE unsaved AS SELECT * FROM covid WHERE {IN_COUNTRIES}")
    assert table(sales, "unsaved").location == f"{results}/tables/{again.id}"
    assert rows(sales, "SELECT count(DISTINCT country) FROM unsaved") == [[str(len(COUNTRIES))]]


def allow(action: str, resource: str) -> dict[str, str]:
    return {"Effect": "Allow", "Action": action, "Resource": resource}


def policy(*statements: dict[str, Any]) -> dict[str, Any]:
    return {"Version": "2012-10-17", "Statement": list(statements)}


@pytest.mark.parametrize(
    ("missing", "on"),
    [
        ("glue:CreateTable", "the new table"),
        ("s3:PutObject", "the CTAS's folder"),
        ("s3:GetObject", "the table it reads"),
    ],
)
def test_a_refused_permission_fails_the_ctas_and_changes_nothing(
    sales: QueryService, missing: str, on: str
) -> None:
    """A writer granted all that a CTAS needs but ``missing`` on ``on``: refused, no trace."""
    bucket = sales.settings.lake.data_bucket
    grants = [
        allow("athena:*", workgroup_arn("*")),
        allow("lakeward:UseCatalog", catalog_arn("*")),
        allow("glue:*", "*"),
        allow("s3:*", s3_arn(bucket, "*")),
    ]
    denied = {
        "the new table": glue_table_arn(MEMORY, "sales", "written"),
        "the CTAS's folder": s3_arn(bucket, "*/tables/*"),
        "the table it reads": s3_arn(bucket, "covid/*"),
    }[on]
    principals = sales.access.principals  # type: ignore[attr-defined]
    principals.create_policy(
        "Writer", policy(*grants, {"Effect": "Deny", "Action": missing, "Resource": denied})
    )
    principals.create_user("writer")
    principals.attach_user_policy("writer", "Writer")
    execution = finish(sales, "CREATE TABLE written AS SELECT * FROM covid", principal="writer")
    assert execution.state == QueryState.FAILED
    assert missing in (execution.state_change_reason or "")
    assert not exists(sales, "written")
    results = execution.output_location.rsplit("/", 1)[0]
    assert lake_files(sales, f"{results}/tables/{execution.id}") == []


def test_an_end_the_busy_state_database_turns_away_is_saved_once_it_takes_it(
    sales: QueryService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite's lock held past the busy timeout (a loaded machine) turned an execution's
    RUNNING and final saves away: the query thread ended, and the execution stayed
    RUNNING for good, since its process lived on. Both saves are tried again."""
    from sqlalchemy.exc import OperationalError

    save, start_running = sales.store.save_execution, sales.workgroups.start_running
    turned_away: list[str] = []

    def busy(state: str) -> None:
        if turned_away.count(state) < 2:
            turned_away.append(state)
            raise OperationalError("UPDATE query_executions", {}, Exception("database is locked"))

    def busy_twice(execution: QueryExecution) -> None:
        if execution.state.value != "QUEUED":
            busy(execution.state.value)
        save(execution)

    def busy_twice_starting(execution_id: str, group: Any, values: Any = None) -> bool:
        busy("RUNNING")  # its RUNNING record is saved as it takes its slot
        return start_running(execution_id, group, values)

    monkeypatch.setattr(sales.store, "save_execution", busy_twice)
    monkeypatch.setattr(sales.workgroups, "start_running", busy_twice_starting)
    execution = finish(sales, f"SELECT count(*) FROM covid WHERE {IN_COUNTRIES}")
    assert execution.state == QueryState.SUCCEEDED
    saved = sales.store.execution(execution.id)
    assert saved is not None and saved.state == QueryState.SUCCEEDED
    assert turned_away == ["RUNNING", "RUNNING", "SUCCEEDED", "SUCCEEDED"]


def test_a_writes_staging_is_journaled_before_it_is_made(
    sales: QueryService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process killed between making its staging directory and journaling the write
    left the directory for good: nothing knew of it to roll it back. The journal now
    names it first."""
    begin = sales.store.begin_write
    seen: list[tuple[str, bool]] = []

    def noting(execution_id: str, owner: str, staging: str, location: str) -> None:
        seen.append((staging, Path(staging).exists()))
        begin(execution_id, owner, staging, location)

    monkeypatch.setattr(sales.store, "begin_write", noting)
    execution = finish(sales, f"CREATE TABLE staged AS SELECT * FROM covid WHERE {IN_COUNTRIES}")
    assert execution.state == QueryState.SUCCEEDED
    ((staging, existed),) = seen
    assert not existed
    assert not Path(staging).exists()  # and it is gone once the write is done
