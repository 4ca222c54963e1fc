"""The SQL service on the real stack: the covid tables through the metastore, DuckDB and Spark."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from lakeward.config import Settings
from lakeward.errors import InvalidRequest
from lakeward.query.model import QueryState, WorkGroup
from lakeward.query.service import QueryService
from lakeward.storage.paths import lake_place
from tests.query.support import all_rows, run, wait

pytestmark = pytest.mark.spark

SEED = (
    "SELECT * FROM demo_hive_metastore.default.covid_confirmed_cases WHERE country = 'US' "
    "OR country = 'Italy' OR country = 'India' OR country = 'Brazil' OR country = 'Spain' "
    "OR country = 'United Kingdom'"
)


def test_seed_query_returns_the_countries(service: QueryService) -> None:
    names, rows = run(service, SEED)
    assert names == [
        "province_state",
        "country",
        "lat",
        "lon",
        "date",
        "confirmed",
        "new_confirmed",
    ]
    by_key = {(r[1], r[4]): r for r in rows if r[0] is None}
    assert by_key[("US", "2020-09-10")][5] == "6420040"
    assert by_key[("Italy", "2020-09-10")][5] == "283180"
    countries = {r[1] for r in rows}
    assert countries == {"US", "Italy", "India", "Brazil", "Spain", "United Kingdom"}
    assert len(rows) == len({(r[0], r[1], r[4]) for r in rows})
    location = service.get_query_execution(service.list_query_executions()[0][0]).output_location
    # Named as S3 names it: the stack's endpoint serves it (docs/storage.md).
    assert location.startswith(f"s3://{service.settings.lake.data_bucket}/query-results/primary/")
    bucket, key = lake_place(service.settings, location) or ("", "")
    assert service.storage.exists(bucket, key) and service.storage.exists(bucket, key + ".metadata")


def test_show_and_describe(service: QueryService) -> None:
    _, rows = run(service, "SHOW DATABASES")
    assert ["default"] in rows
    _, rows = run(service, "SHOW TABLES IN default LIKE 'covid%'")
    assert ["covid_cases"] in rows and ["covid_deaths"] in rows
    _, rows = run(service, "SHOW COLUMNS FROM covid_deaths")
    assert rows[0] == ["province_state      "]  # padded to 20, as Hive and Athena give it
    assert [(r[0] or "").rstrip() for r in rows] == [
        "province_state",
        "country",
        "lat",
        "lon",
        "date",
        "deaths",
        "new_deaths",
    ]
    _, rows = run(service, "DESCRIBE demo_hive_metastore.default.covid_deaths")
    assert rows[4][0].startswith("date\tdate")


def test_with_join_and_aggregate(service: QueryService) -> None:
    sql = (
        "WITH c AS (SELECT country, date, sum(confirmed) AS confirmed FROM covid_confirmed_cases "
        "GROUP BY country, date), d AS (SELECT country, date, sum(deaths) AS deaths "
        "FROM default.covid_deaths GROUP BY country, date) "
        "SELECT c.country, c.confirmed, d.deaths, "
        "round(100 * CAST(d.deaths AS double) / c.confirmed, 2) AS rate "
        "FROM c JOIN d ON c.country = d.country AND c.date = d.date "
        "WHERE c.date = date '2020-09-10' AND c.country = 'Italy'"
    )
    _, rows = run(service, sql)
    assert rows == [["Italy", "283180", "35587", "12.57"]]


def test_paging_over_more_than_3000_rows(service: QueryService) -> None:
    execution = wait(
        service,
        service.start_query_execution(
            "SELECT country, date, deaths FROM covid_deaths WHERE country = 'US' "
            "OR country = 'Italy' OR country = 'India' ORDER BY country, date"
        ),
    )
    first = service.get_query_results(execution.id, None, 1000)
    assert len(first.rows) == 1000 and first.rows[0] == ["country", "date", "deaths"]
    names, rows = all_rows(service, execution.id)
    assert len(rows) == 1 + 3 * 1143
    assert rows[1] == ["India", "2020-01-22", "0"]


def test_refused_statements_never_run(service: QueryService) -> None:
    for sql in (
        "SELECT * FROM read_csv('/etc/passwd')",
        "ATTACH 'x.db'",
        "SELECT 1; SELECT 2",
        "TRUNCATE TABLE covid_deaths",
        "SELECT * FROM nowhere_catalog.default.t",
    ):
        with pytest.raises(InvalidRequest):
            service.start_query_execution(sql)


def test_missing_table_fails_the_query_with_a_reason(service: QueryService) -> None:
    execution = wait(service, service.start_query_execution("SELECT * FROM default.no_such_table"))
    assert execution.state == QueryState.FAILED
    assert "no_such_table" in (execution.state_change_reason or "")


def test_cancel_a_running_query(service: QueryService) -> None:
    execution_id = service.start_query_execution(
        "SELECT count(*) FROM covid_deaths a CROSS JOIN covid_deaths b CROSS JOIN covid_deaths c"
    )
    deadline = time.monotonic() + 30
    while service.get_query_execution(execution_id).state != QueryState.RUNNING:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    time.sleep(0.3)
    service.stop_query_execution(execution_id)
    execution = wait(service, execution_id, timeout=30)
    assert execution.state == QueryState.CANCELLED
    with pytest.raises(InvalidRequest, match="CANCELLED"):
        service.get_query_results(execution_id)


def test_workgroup_timeout_and_bytes_cutoff(service: QueryService) -> None:
    service.put_work_group(WorkGroup(name="quick", timeout_seconds=1.0))
    service.put_work_group(WorkGroup(name="small", bytes_scanned_cutoff=100_000))
    slow = wait(
        service,
        service.start_query_execution(
            "SELECT count(*) FROM covid_deaths a CROSS JOIN covid_deaths b "
            "CROSS JOIN covid_deaths c",
            workgroup="quick",
        ),
    )
    assert slow.state == QueryState.FAILED and "timed out" in (slow.state_change_reason or "")
    assert slow.statistics.total_execution_ms < 15_000
    big = wait(
        service,
        service.start_query_execution("SELECT count(*) FROM covid_cases", workgroup="small"),
    )
    assert big.state == QueryState.FAILED
    assert "more than the workgroup's cutoff of 100,000 bytes" in (big.state_change_reason or "")
    small = wait(
        service,
        service.start_query_execution("SELECT count(*) FROM covid_quarantine", workgroup="small"),
    )
    assert small.state == QueryState.SUCCEEDED


def test_result_reuse_within_max_age(service: QueryService) -> None:
    sql = "SELECT max(deaths) FROM covid_deaths WHERE country = 'Spain'"
    first = wait(service, service.start_query_execution(sql, reuse_max_age_minutes=60))
    again = wait(service, service.start_query_execution(sql, reuse_max_age_minutes=60))
    assert again.id != first.id and again.statistics.result_reused
    assert again.output_location == first.output_location
    assert all_rows(service, again.id) == all_rows(service, first.id)
    fresh = wait(service, service.start_query_execution(sql))
    assert not fresh.statistics.result_reused


def test_client_request_token_is_idempotent(service: QueryService) -> None:
    one = service.start_query_execution("SELECT 1", client_request_token="token-123")
    two = service.start_query_execution("SELECT 1", client_request_token="token-123")
    assert one == two


def test_spark_engine_gives_the_same_results_as_duckdb(service: QueryService) -> None:
    service.put_work_group(WorkGroup(name="big", engine="spark"))
    queries = [
        "SELECT country, sum(deaths) AS d FROM covid_deaths WHERE date = date '2020-12-31' "
        "GROUP BY country ORDER BY d DESC, country LIMIT 10",
        "SELECT count(*) AS n, sum(confirmed) AS c FROM covid_cases WHERE country = 'US'",
        "SELECT province_state, country, lat, lon, date, recovered FROM covid_recovered "
        "WHERE country = 'Canada' AND date = date '2021-08-04' ORDER BY province_state",
    ]
    for sql in queries:
        duck = run(service, sql)
        spark = run(service, sql, workgroup="big")
        assert spark == duck, sql


def test_join_across_two_catalogs(service: QueryService, stack: Settings) -> None:
    from lakeward.metastore.uris import metastore_uris
    from lakeward.query.model import DataCatalog

    service.create_data_catalog(
        DataCatalog("second_hive", "HIVE", "", {"metastore-uris": ",".join(metastore_uris(stack))})
    )
    with pytest.raises(InvalidRequest, match="already exists"):
        service.create_data_catalog(
            DataCatalog("second_hive", "HIVE", "", {"metastore-uris": "thrift://127.0.0.1:1"})
        )
    _, rows = run(
        service,
        "SELECT c.confirmed, d.deaths FROM demo_hive_metastore.default.covid_confirmed_cases c "
        "JOIN second_hive.default.covid_deaths d ON c.country = d.country AND c.date = d.date "
        "AND c.province_state IS NULL AND d.province_state IS NULL "
        "WHERE c.country = 'Italy' AND c.date = date '2020-09-10'",
    )
    assert rows == [["283180", "35587"]]
    service.delete_data_catalog("second_hive")
    with pytest.raises(InvalidRequest, match="not registered"):
        service.start_query_execution("SELECT * FROM second_hive.default.covid_deaths")


def test_a_table_another_metastore_client_changes_is_read_anew_by_the_next_query(
    service: QueryService, stack: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    from collections import Counter
    from dataclasses import replace

    from lakeward.metastore.client import MetastoreClient
    from lakeward.metastore.uris import metastore_uris

    connector = service.catalogs.catalog("demo_hive_metastore")
    calls: Counter[str] = Counter()
    read = connector.client._failover.read

    def counted(method: str, *args: object) -> object:
        calls[method] += 1
        return read(method, *args)

    monkeypatch.setattr(connector.client._failover, "read", counted)
    # The same nodes under another name: a client that shares no cache with the
    # SQL service's connector, as Spark's or another process's would not.
    other_name = [u.replace("127.0.0.1", "localhost") for u in metastore_uris(stack)]
    sql = "SELECT * FROM demo_hive_metastore.default.repointed WHERE country = 'Italy' LIMIT 1"
    with MetastoreClient(other_name) as writer:
        assert writer._failover.nodes is not connector.client._failover.nodes
        confirmed = writer.table("default", "covid_confirmed_cases")
        deaths = writer.table("default", "covid_deaths")
        writer.put_external_table(replace(confirmed, name="repointed"))
        try:
            names, _ = run(service, sql)
            assert "confirmed" in names
            calls.clear()
            names, _ = run(service, sql)
            assert "confirmed" in names
            assert calls["get_table"] == 0  # unchanged: served from the cache
            assert calls["get_current_notificationEventId"] >= 1

            writer.put_external_table(replace(deaths, name="repointed"))
            names, rows = run(service, sql)  # the very next query, no wait
            assert "deaths" in names and "confirmed" not in names
            assert rows and rows[0][names.index("country")] == "Italy"
            assert calls["get_table"] == 1
        finally:
            writer.drop_table("default", "repointed")


def test_output_location_honoured_unless_the_workgroup_enforces_its_own(
    service: QueryService,
) -> None:
    lake = service.settings.lake_root
    own = f"{lake}/{service.settings.lake.data_bucket}/my-results"
    service.put_work_group(WorkGroup(name="open", enforce_configuration=False))
    mine = wait(
        service,
        service.start_query_execution("SELECT 1 AS x", workgroup="open", output_location=own),
    )
    assert mine.output_location == f"{own}/{mine.id}.csv"
    assert Path(mine.output_location.removeprefix("file://")).is_file()
    enforced = wait(service, service.start_query_execution("SELECT 1 AS x", output_location=own))
    assert "/query-results/primary/" in enforced.output_location
    with pytest.raises(InvalidRequest, match="the lake has no bucket else"):
        service.start_query_execution("SELECT 1", workgroup="open", output_location="s3://else/")
    with pytest.raises(InvalidRequest, match="not in the lake"):
        service.start_query_execution("SELECT 1", workgroup="open", output_location="file:///etc")


def test_concurrent_queries_beyond_the_cap_wait_in_the_queue(service: QueryService) -> None:
    service.put_work_group(WorkGroup(name="single", max_concurrent=1))
    slow = "SELECT count(*) FROM covid_deaths a CROSS JOIN covid_deaths b WHERE a.deaths > b.deaths"
    first = service.start_query_execution(slow, workgroup="single")
    second = service.start_query_execution("SELECT 2 AS y", workgroup="single")
    time.sleep(0.5)
    assert service.get_query_execution(second).state == QueryState.QUEUED
    service.stop_query_execution(first)
    done = wait(service, second)
    assert done.state == QueryState.SUCCEEDED and done.statistics.queue_ms >= 400


def test_history_named_queries_and_workgroups(service: QueryService) -> None:
    wait(service, service.start_query_execution("SELECT 0 AS zero"))
    first = wait(service, service.start_query_execution("SELECT 1 AS one"))
    ids, token = service.list_query_executions(max_results=1)
    assert ids == [first.id] and token is not None
    more, _ = service.list_query_executions(next_token=token, max_results=50)
    assert first.id not in more and len(more) >= 1
    found, missing = service.batch_get_query_execution([first.id, "no-such-id"])
    assert [e.id for e in found] == [first.id] and missing[0][0] == "no-such-id"

    named = service.create_named_query(
        "italy",
        "default",
        "SELECT * FROM covid_deaths WHERE country = 'Italy'",
        description="deaths in Italy",
        client_request_token="named-1",
    )
    assert (
        service.create_named_query("italy", "default", "SELECT 1", client_request_token="named-1")
        == named
    )
    saved = service.get_named_query(named)
    assert (saved.name, saved.database, saved.workgroup) == ("italy", "default", "primary")
    assert named in service.list_named_queries()[0]
    _, rows = run(service, saved.query, database=saved.database)
    assert len(rows) == 1143 and {r[1] for r in rows} == {"Italy"}
    assert "primary" in [g.name for g in service.list_work_groups()]
    with pytest.raises(InvalidRequest, match="WorkGroup nowhere is not found"):
        service.start_query_execution("SELECT 1", workgroup="nowhere")


def test_polls_and_pages_are_answered_from_memory_or_one_read(
    service: QueryService, monkeypatch: pytest.MonkeyPatch
) -> None:
    def counted(store: object) -> list[str]:
        reads: list[str] = []
        real = store.execution  # type: ignore[attr-defined]
        monkeypatch.setattr(store, "execution", lambda i: reads.append(i) or real(i))
        return reads

    reads = counted(service.store)
    execution = wait(service, service.start_query_execution(SEED))
    assert execution.state == QueryState.SUCCEEDED
    names, rows = all_rows(service, execution.id)
    assert len(rows) > 3000 and rows[0] == names
    assert reads == []  # run here: every poll and page from memory
    # Another process over the same state reads a finished execution once.
    other = QueryService(service.settings)
    try:
        other_reads = counted(other.store)
        for _ in range(3):
            assert other.get_query_execution(execution.id) == service.get_query_execution(
                execution.id
            )
        assert all_rows(other, execution.id) == (names, rows)
        assert other_reads == [execution.id]
    finally:
        other.close()
