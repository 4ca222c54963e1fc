"""Datasets over the real covid tables: conversions that fail on some rows, safe division,
refused definitions, scheduled refreshes, sharing, and a dashboard built over the API."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from lakeward.bi.service import BiService
from lakeward.config import Settings
from lakeward.errors import AccessDenied, InvalidRequest, LakewardError
from lakeward.storage import load_storage
from tests.bi import jhu

pytestmark = pytest.mark.spark

ONE_DAY = """SELECT country, province_state, lat, lon, CAST("date" AS varchar) AS day,
confirmed, deaths FROM covid_cases WHERE "date" = DATE '2020-09-10'"""


def spec(sql: str = ONE_DAY, **more: Any) -> dict[str, Any]:
    return {"name": "test", "data_source_id": "demo_hive_metastore", "sql": sql, **more}


@pytest.fixture
def cleanup(bi: BiService) -> Iterator[list[tuple[str, str]]]:
    """Objects a test made, deleted afterwards (dashboards first)."""
    made: list[tuple[str, str]] = []
    yield made
    order = {"dashboard": 0, "analysis": 1, "dataset": 2}
    for kind, resource_id in sorted(made, key=lambda m: order[m[0]]):
        getattr(bi, f"delete_{kind}")("root", resource_id)


def test_failed_conversions_report_count_and_examples(
    bi: BiService, cleanup: list[tuple[str, str]]
) -> None:
    fields = [
        {"op": "convert", "field": "province_state", "to": "integer"},
        {"op": "convert", "field": "day", "to": "date", "format": "dd/MM/yyyy"},
        {"op": "convert", "field": "lat", "to": "decimal"},
    ]
    rows = jhu.locations()
    provinces = sorted({province for province, _country in rows if province})
    preview = bi.preview_dataset("root", spec(fields=fields), limit=5)
    assert preview.row_count == len(rows)  # nothing dropped
    issues = {i["field"]: i for i in preview.issues}
    assert set(issues) == {"province_state", "day"}  # lat converts everywhere it is set
    assert issues["province_state"]["failed_rows"] == sum(1 for p, _c in rows if p)
    assert issues["province_state"]["examples"] == provinces[:5]
    assert issues["province_state"]["operation"] == "convert to integer"
    assert issues["day"]["failed_rows"] == len(rows)
    assert issues["day"]["examples"] == ["2020-09-10"]
    assert issues["day"]["operation"] == "convert to date (dd/MM/yyyy)"
    assert all(r["day"] is None and r["province_state"] is None for r in preview.rows)
    # Saved as a SPICE dataset, the extract records the same report.
    bi.create_dataset("root", "conversions", spec(fields=fields))
    cleanup.append(("dataset", "conversions"))
    extract = bi.get_extract("root", "conversions")
    assert extract.status == "COMPLETED" and extract.row_count == len(rows)
    assert {i.field: i.failed_rows for i in extract.issues} == {
        k: v["failed_rows"] for k, v in issues.items()
    }


def test_division_by_zero_gives_null(bi: BiService) -> None:
    sql = """SELECT country, confirmed, deaths FROM covid_cases
             WHERE "date" = DATE '2020-01-22' AND province_state IS NULL
             AND country IN ('Italy', 'Japan')"""
    fields = [
        {"op": "computed", "name": "mortality_rate", "expression": "deaths / confirmed"},
        {"op": "computed", "name": "whole", "expression": "confirmed / 2"},
    ]
    rows = {r["country"]: r for r in bi.preview_dataset("root", spec(sql, fields=fields)).rows}
    assert rows["Italy"]["confirmed"] == 0 and rows["Italy"]["mortality_rate"] is None
    assert rows["Japan"]["confirmed"] == 2 and rows["Japan"]["mortality_rate"] == 0.0
    assert rows["Japan"]["whole"] == 1.0 and rows["Italy"]["whole"] == 0.0


@pytest.mark.parametrize(
    ("definition", "message"),
    [
        (spec(fields=[{"op": "computed", "name": "r", "expression": "death / confirmed"}]),
         "computed field r: unknown field 'death'"),
        (spec(fields=[{"op": "computed", "name": "r",
                       "expression": "(SELECT max(deaths) FROM covid_deaths)"}]),
         "computed field r: SUBQUERY is not allowed"),
        (spec(fields=[{"op": "geo", "name": "p", "latitude": "latitude", "longitude": "lon"}]),
         "fields[0] (geo): no field 'latitude'"),
        (spec(fields=[{"op": "rename", "field": "lat", "to": "lon"}]),
         "fields[0] (rename): a field named 'lon' exists already"),
        (spec(fields=[{"op": "convert", "field": "day", "to": "date", "format": "yyyy-QQ"}]),
         "unknown pattern letter 'Q'"),
        (spec(fields=[{"op": "convert", "field": "day", "to": "pdf"}]),
         "fields.0.convert.to: Input should be"),
        ({**spec(), "table": "default.covid_cases"}, "give exactly one of sql"),
        (spec("DROP TABLE covid_cases"), "DROP"),
        (spec("SELECT * FROM read_csv('/etc/passwd')"), "read_csv"),
        (spec("SELECT 1; SELECT 2"), "one statement"),
        ({**spec(), "data_source_id": "nowhere"}, "data source nowhere does not exist"),
    ],
)  # fmt: skip
def test_bad_definitions_are_refused_naming_the_field(
    bi: BiService, definition: dict[str, Any], message: str
) -> None:
    with pytest.raises(LakewardError) as refused:
        bi.preview_dataset("root", definition)
    assert message.lower() in str(refused.value).lower()
    assert "Traceback" not in str(refused.value)


def test_scheduled_refresh_replaces_the_extract(
    stack: Settings, bi: BiService, cleanup: list[tuple[str, str]]
) -> None:
    bi.create_dataset("root", "scheduled", spec(refresh_interval_minutes=5))
    cleanup.append(("dataset", "scheduled"))
    first = bi.get_extract("root", "scheduled")
    assert first.next_refresh is not None and first.last_refresh is not None
    assert bi.run_due_refreshes() == []  # not due yet
    later = datetime.now(UTC) + timedelta(minutes=6)
    assert bi.run_due_refreshes(later) == ["scheduled"]
    second = bi.get_extract("root", "scheduled")
    assert second.uri != first.uri and second.last_refresh > first.last_refresh
    assert second.row_count == first.row_count
    storage = load_storage(stack)
    bucket = stack.lake.data_bucket

    def files() -> set[str]:
        return {storage.uri(bucket, k) for k in storage.keys(bucket, "bi/extracts/scheduled/")}

    # The previous extract stays for readers that looked it up a moment ago.
    assert files() == {first.uri, second.uri}
    storage.put(bucket, "bi/extracts/scheduled/left-by-a-crash.parquet", b"PAR1")
    bi.refresh_extract("root", "scheduled")
    third = bi.get_extract("root", "scheduled")
    assert files() == {
        first.uri,
        second.uri,
        third.uri,
        storage.uri(bucket, "bi/extracts/scheduled/left-by-a-crash.parquet"),
    }  # all too young to go
    bi.files.grace = timedelta(0)  # as if ten minutes had passed
    try:
        bi.refresh_extract("root", "scheduled")
    finally:
        bi.files.grace = timedelta(minutes=10)
    assert files() == {third.uri, bi.get_extract("root", "scheduled").uri}


def test_sharing_a_dashboard_does_not_share_its_data(
    stack: Settings, bi: BiService, cleanup: list[tuple[str, str]]
) -> None:
    analysis = {"name": "Shared", "dataset_id": "covid-19", "sheets": [{"id": "s", "visuals": [
        {"id": "bars", "type": "bar", "x": "country", "y": "confirmed",
         "filters": [{"type": "time_range", "field": "date", "start": "2020-09-10T00:00:00",
                      "end": "2020-09-11T00:00:00"}]}]}]}  # fmt: skip
    bi.create_analysis("root", "shared", analysis)
    cleanup.append(("analysis", "shared"))
    bi.publish_dashboard("root", "shared")
    cleanup.append(("dashboard", "shared"))
    bi.set_permissions("root", "dashboard", "shared", [{"principal": "user/sales_user"}])
    # The one sharing is told who will see no data, and why (the console shows it).
    assert bi.shared_without_data("dashboard", "shared", "user/sales_user") == (
        "demo_hive_metastore", ["sales_user"])  # fmt: skip
    assert bi.shared_without_data("dashboard", "shared", "user/de_user")[1] == []
    assert bi.shared_without_data("dashboard", "shared", "group/SalesGroup")[1] == [
        "sales_user"]  # fmt: skip
    assert [d.id for d in bi.list_dashboards("sales_user")] == ["shared"]
    assert bi.get_dashboard("sales_user", "shared").name == "Shared"
    with pytest.raises(AccessDenied, match="lakeward:UseCatalog") as refused:
        bi.dashboard_series("sales_user", "shared", "bars")
    assert "which you may not use" in str(refused.value)
    with pytest.raises(AccessDenied):
        bi.get_dataset("sales_user", "covid-19")  # the dashboard's dataset stays closed
    # QuickSight's behaviour, when the stack asks for it: the share alone suffices.
    quicksight = stack.model_copy(update={"bi": stack.bi.model_copy(
        update={"sharing_grants_data": True})})  # fmt: skip
    lenient = BiService(quicksight, bi.access, bi.queries)
    try:
        assert lenient.shared_without_data("dashboard", "shared", "user/sales_user")[1] == []
        bars = lenient.dashboard_series("sales_user", "shared", "bars").data["series"][0]
        assert bars["y"][bars["x"].index("Italy")] == jhu.count("confirmed", "Italy")
    finally:
        lenient.close()


def test_a_dashboard_built_over_the_api(
    api: Callable[..., httpx.Client], bi: BiService, cleanup: list[tuple[str, str]]
) -> None:
    de = api("de_user")
    sql = ONE_DAY.replace("province_state,", "")
    created = de.post("/datasets", json={"id": "de-day", **spec(sql, fields=[
        {"op": "convert", "field": "day", "to": "date", "format": "yyyy-MM-dd"},
        {"op": "rename", "field": "country", "to": "country_region"}])})  # fmt: skip
    assert created.status_code == 200, created.text
    cleanup.append(("dataset", "de-day"))
    body = created.json()
    assert body["extract"]["status"] == "COMPLETED" and body["owner"] == "de_user"
    assert {"name": "day", "type": "date", "role": "dimension"} in body["columns"]
    table = {"id": "t", "type": "table", "columns": ["country_region", "confirmed"], "limit": 3}
    sheet = {
        "id": "s",
        "visuals": [table],
        "filters": [{"type": "category", "field": "country_region", "values": ["Italy", "Spain"]}],
    }
    made = de.post("/analyses", json={"id": "de-day", "name": "Day", "dataset_id": "de-day",
                                      "sheets": [sheet]})  # fmt: skip
    assert made.status_code == 200, made.text
    cleanup.append(("analysis", "de-day"))
    published = de.post("/analyses/de-day/publish", json={"name": "One day"})
    assert published.status_code == 200, published.text
    cleanup.append(("dashboard", "de-day"))
    rows = de.get("/dashboards/de-day/visuals/t/series").json()["data"]["rows"]
    assert sorted(rows) == [["Italy", jhu.count("confirmed", "Italy")],
                            ["Spain", jhu.count("confirmed", "Spain")]]  # fmt: skip
    bad = de.post("/analyses", json={"id": "bad", "name": "x", "dataset_id": "de-day",
        "sheets": [{"id": "s", "visuals": [{"id": "m", "type": "map", "geo": "country_region",
                                            "size": "confirmed"}]}]})  # fmt: skip
    assert bad.status_code == 400
    assert bad.json()["error"]["message"] == (
        "visual m: geo: field country_region is string, not geopoint"
    )
    sales = api("sales_user")
    assert sales.get("/dashboards/de-day").status_code == 403
    shared = de.put("/dashboards/de-day/permissions", json={"shares": [
        {"principal": "group/SalesGroup", "role": "viewer"}]})  # fmt: skip
    assert shared.status_code == 200
    assert shared.json() == {"owner": "de_user", "shares": [
        {"principal": "group/SalesGroup", "role": "viewer"}]}  # fmt: skip
    assert sales.get("/dashboards/de-day").status_code == 200
    refused = sales.get("/dashboards/de-day/visuals/t/series")
    assert refused.status_code == 403 and "lakeward:UseCatalog" in refused.text
    # A viewer cannot pass the share on, nor change the dashboard.
    assert sales.put("/dashboards/de-day/permissions", json={"shares": []}).status_code == 403
    assert sales.delete("/dashboards/de-day").status_code == 403


def test_the_role_reads_nothing_for_a_user_that_the_user_may_not_read(bi: BiService) -> None:
    """A user who may use the catalog but not read a table's data cannot read it through
    the BI role either: the dataset's SQL is checked against the user's own policies."""
    principals = bi.access.principals
    principals.create_user("bi_catalog_only")
    try:
        principals.put_user_policy("bi_catalog_only", "CatalogOnly", {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Action": "lakeward:UseCatalog",
                           "Resource": "arn:lakeward:athena:::datacatalog/demo_hive_metastore"}],
        })  # fmt: skip
        shares = [{"principal": "group/DataEngineerGroup"}, {"principal": "user/bi_catalog_only"}]
        bi.set_permissions("root", "datasource", "demo_hive_metastore", shares)
        with pytest.raises(AccessDenied) as refused:
            bi.preview_dataset("bi_catalog_only", spec("SELECT country FROM covid_cases LIMIT 1"))
        message = str(refused.value)
        assert "reads the table demo_hive_metastore.default.covid_cases" in message
        assert "s3:GetObject" in message
    finally:
        bi.set_permissions("root", "datasource", "demo_hive_metastore",
                           [{"principal": "group/DataEngineerGroup"}])  # fmt: skip
        principals.delete_user("bi_catalog_only")


def test_a_failed_refresh_keeps_the_previous_extract(
    stack: Settings, bi: BiService, cleanup: list[tuple[str, str]]
) -> None:
    bi.create_dataset("root", "kept", spec())
    cleanup.append(("dataset", "kept"))
    before = bi.get_extract("root", "kept")
    principals = bi.access.principals
    principals.detach_role_policy("bi-service-role", "HiveMetastoreDataSourceAccessPolicy")
    try:
        with pytest.raises(AccessDenied, match="lakeward:UseCatalog"):
            bi.refresh_extract("root", "kept")
    finally:
        principals.attach_role_policy("bi-service-role", "HiveMetastoreDataSourceAccessPolicy")
    after = bi.get_extract("root", "kept")
    assert after.status == "FAILED" and "bi-service-role lacks a permission" in after.error
    assert (after.uri, after.row_count, after.last_refresh) == (
        before.uri, before.row_count, before.last_refresh)  # fmt: skip
    table = {"id": "t", "type": "table", "columns": ["country"], "limit": 100_000}
    shown = bi.dataset_series("root", "kept", table)  # the previous file still serves
    assert shown.source == "extract" and shown.row_count == before.row_count
    assert bi.refresh_extract("root", "kept").status == "COMPLETED"


def test_a_table_picked_and_queried_live(bi: BiService, cleanup: list[tuple[str, str]]) -> None:
    definition = {"name": "deaths", "data_source_id": "demo_hive_metastore",
                  "table": "default.covid_deaths", "import_mode": "DIRECT_QUERY"}  # fmt: skip
    dataset = bi.create_dataset("root", "picked", definition)
    cleanup.append(("dataset", "picked"))
    assert {c.name for c in dataset.columns} >= {"country", "date", "deaths", "new_deaths"}
    assert bi.get_extract("root", "picked").status == "NONE"
    bars = {"id": "b", "type": "bar", "x": "country", "y": "deaths", "filters": [
        {"type": "time_range", "field": "date", "start": "2020-09-10T00:00:00",
         "end": "2020-09-11T00:00:00"},
        {"type": "category", "field": "country", "values": ["Italy", "Brazil"]}]}  # fmt: skip
    shown = bi.dataset_series("root", "picked", bars)
    assert shown.source == "live"
    assert dict(zip(shown.data["series"][0]["x"], shown.data["series"][0]["y"], strict=True)) == {
        "Brazil": jhu.count("deaths", "Brazil"), "Italy": jhu.count("deaths", "Italy")}  # fmt: skip
    with pytest.raises(InvalidRequest, match="queries live"):
        bi.refresh_extract("root", "picked")
    with pytest.raises(InvalidRequest, match="has no extract yet"):
        bi.dataset_series("root", "picked", bars, mode="extract")
