"""The dashboard `lakeward up` seeds, read through the BI API as the data engineer and the
salesperson: the numbers of the real JHU files, from the extract and live."""

from __future__ import annotations

import io
import json
from collections.abc import Callable

import httpx
import pyarrow.parquet as pq
import pytest

from lakeward.bi.service import BiService
from lakeward.config import Settings
from lakeward.storage import load_storage
from tests.bi import jhu
from tests.helpers import lakeward
from tests.query.support import run

pytestmark = pytest.mark.spark

DAY = [{"type": "time_range", "field": "date",
        "start": "2020-09-10T00:00:00", "end": "2020-09-11T00:00:00"}]  # fmt: skip
LINE_COUNTRIES = {"US", "Italy", "India", "Brazil", "Spain", "United Kingdom"}


def series(client: httpx.Client, visual: str, **params: str) -> dict[str, object]:
    response = client.get(f"/dashboards/covid-19-cases/visuals/{visual}/series", params=params)
    assert response.status_code == 200, response.text
    result: dict[str, object] = response.json()
    return result


def points_by_country(result: dict[str, object]) -> dict[str, dict[str, object]]:
    data = result["data"]
    assert isinstance(data, dict)
    return {p["color"]: p for p in data["points"]}


def test_the_map_shows_confirmed_cases_on_2020_09_10(api: Callable[..., httpx.Client]) -> None:
    de = api("de_user")
    dashboard = de.get("/dashboards/covid-19-cases").json()
    assert dashboard["name"] == "COVID-19 cases"
    assert dashboard["arn"] == "arn:lakeward:quicksight:::dashboard/covid-19-cases"
    saved = points_by_country(series(de, "map"))  # the filter saved with the map
    picked = points_by_country(series(de, "map", filters=json.dumps(DAY)))  # the date pickers'
    assert saved == picked
    assert picked["US"]["size"] == 6_420_040 == jhu.count("confirmed", "US")
    assert picked["US"]["tooltip"]["deaths"] == jhu.count("deaths", "US")
    assert (picked["US"]["lat"], picked["US"]["lon"]) == (40.0, -100.0)
    assert set(picked) >= LINE_COUNTRIES
    assert picked["Italy"]["size"] == 283_180
    # Another day is another map: the filter is applied, not decorative.
    other = [{**DAY[0], "start": "2020-05-01T00:00:00", "end": "2020-05-02T00:00:00"}]
    earlier = points_by_country(series(de, "map", filters=json.dumps(other)))
    assert earlier["US"]["size"] == jhu.count("confirmed", "US", "5/1/20")


def test_the_line_chart_shows_italys_mortality_rate(api: Callable[..., httpx.Client]) -> None:
    result = series(api("de_user"), "mortality")
    assert result["truncated"] is False  # every day of every line
    data = result["data"]
    assert isinstance(data, dict)
    lines = {line["name"]: line for line in data["series"]}
    assert set(lines) == LINE_COUNTRIES
    italy = lines["Italy"]
    rate = italy["y"][italy["x"].index("2020-09-10")]
    assert rate == pytest.approx(35_587 / 283_180)
    assert rate == pytest.approx(jhu.count("deaths", "Italy") / jhu.count("confirmed", "Italy"))
    assert italy["x"] == sorted(italy["x"]) and len(italy["x"]) > 1000  # every day, in order


def test_the_extract_is_in_the_lake_and_visuals_read_it(
    stack: Settings, bi: BiService, api: Callable[..., httpx.Client]
) -> None:
    extract = bi.get_extract("root", "covid-19")
    assert extract.status == "COMPLETED" and extract.issues == []
    storage = load_storage(stack)
    bucket = stack.lake.data_bucket
    key = extract.uri.removeprefix(storage.uri(bucket) + "/")
    assert key.startswith("bi/extracts/covid-19/") and key.endswith(".parquet")
    assert storage.stat(bucket, key).size == extract.size_bytes
    table = pq.read_table(io.BytesIO(storage.get(bucket, key)))
    assert table.num_rows == extract.row_count > 10_000
    assert {"country", "date", "location", "mortality_rate"} <= set(table.column_names)
    assert str(table.schema.field("date").type) == "date32[day]"
    assert series(api("de_user"), "map")["source"] == "extract"


def test_live_queries_give_the_same_numbers(api: Callable[..., httpx.Client]) -> None:
    de = api("de_user")
    for visual in ("map", "mortality"):
        from_extract = series(de, visual, mode="extract")
        live = series(de, visual, mode="live")
        assert (from_extract["source"], live["source"]) == ("extract", "live")
        assert live["data"] == from_extract["data"]


def test_the_salesperson_sees_nothing(api: Callable[..., httpx.Client]) -> None:
    sales = api("sales_user")
    assert sales.get("/dashboards").json() == []
    assert sales.get("/datasets").json() == []
    for path in ("/dashboards/covid-19-cases", "/dashboards/covid-19-cases/visuals/map/series",
                 "/datasets/covid-19", "/datasets/covid-19/preview", "/datasets/covid-19/extract",
                 "/analyses/covid-19-cases", "/data-sources/demo_hive_metastore"):  # fmt: skip
        response = sales.get(path)
        assert response.status_code == 403, path
        assert response.json()["error"]["type"] == "AccessDenied"
    # Guessing ids tells nothing: a missing dashboard is refused just like a real one.
    real = sales.get("/dashboards/covid-19-cases").json()["error"]["message"]
    guessed = sales.get("/dashboards/covid-20-cases").json()["error"]["message"]
    assert guessed == real.replace("covid-19-cases", "covid-20-cases")
    assert "not authorized to perform: quicksight:DescribeDashboard" in real
    # Nor can a definition of its own: the data source is not shared with the salesperson.
    spec = {"name": "x", "data_source_id": "demo_hive_metastore", "sql": "SELECT 1 AS one"}
    assert sales.post("/datasets/preview", json=spec).status_code == 403


def test_a_fields_distinct_values(api: Callable[..., httpx.Client]) -> None:
    de = api("de_user")
    path = "/dashboards/covid-19-cases/fields/country/values"
    found = de.get(path, params={"limit": 1000}).json()
    assert found["field"] == "country" and not found["truncated"]
    values = found["values"]
    # The dataset's 12 countries, the six the mortality chart saves among them.
    assert values == sorted(values, key=str.casefold) and len(values) == len(set(values)) == 12
    assert {"France", "Germany", "US", "Italy", "India", "Brazil"} <= set(values)
    assert de.get(path, params={"search": "germ"}).json()["values"] == ["Germany"]
    assert de.get(path, params={"limit": 3}).json()["truncated"] is True
    missing = de.get("/dashboards/covid-19-cases/fields/nope/values")
    assert missing.status_code == 400 and "no field 'nope'" in missing.json()["error"]["message"]
    assert api("sales_user").get(path).status_code == 403


def test_state_changes_need_the_csrf_token(api: Callable[..., httpx.Client]) -> None:
    spec = {"name": "rows", "data_source_id": "demo_hive_metastore",
            "sql": "SELECT country, confirmed FROM covid_cases LIMIT 3"}  # fmt: skip
    refused = api("de_user", csrf=False).post("/datasets/preview", json=spec)
    assert refused.status_code == 403 and "X-CSRF-Token" in refused.json()["error"]["message"]
    allowed = api("de_user").post("/datasets/preview", json=spec)
    assert allowed.status_code == 200 and allowed.json()["row_count"] == 3
    anonymous = httpx.get(str(api("de_user").base_url).rstrip("/") + "/dashboards")
    assert anonymous.status_code == 401


def test_validation_names_the_permission_the_role_lacks(stack: Settings, bi: BiService) -> None:
    def role_policy(verb: str, policy: str) -> None:
        lakeward("iam", f"{verb}-role-policy", "--role", "bi-service-role", "--policy", policy,
                 data_dir=stack.data_dir)  # fmt: skip

    principals = bi.access.principals
    assert bi.validate_data_source("root", "demo_hive_metastore").status == "VALID"
    # A database listed first whose data the role may not read (another team's bucket):
    # the role serves the data it is for, and the source stays valid.
    load_storage(stack).ensure_bucket("elsewhere")
    run(bi.queries, "CREATE DATABASE aaa_elsewhere")
    run(bi.queries, "CREATE EXTERNAL TABLE aaa_elsewhere.t (x int) LOCATION 's3://elsewhere/t/'")
    try:
        assert bi.validate_data_source("root", "demo_hive_metastore").status == "VALID"
    finally:
        run(bi.queries, "DROP TABLE aaa_elsewhere.t")
        run(bi.queries, "DROP DATABASE aaa_elsewhere")
    try:
        role_policy("detach", "HiveMetastoreDataSourceAccessPolicy")  # undoes the seed's step
        checked = bi.validate_data_source("root", "demo_hive_metastore")
        assert checked.status == "INVALID"
        assert "bi-service-role" in checked.status_message
        assert "lakeward:UseCatalog" in checked.status_message
        role_policy("attach", "HiveMetastoreDataSourceAccessPolicy")
        assert bi.validate_data_source("root", "demo_hive_metastore").status == "VALID"
        principals.detach_role_policy("bi-service-role", "DataBucketReadAccessPolicy")
        checked = bi.validate_data_source("root", "demo_hive_metastore")
        assert checked.status == "INVALID" and "s3:GetObject" in checked.status_message
    finally:
        attached = {name for name, _doc in principals.policies_for_role("bi-service-role")}
        for policy in ("HiveMetastoreDataSourceAccessPolicy", "DataBucketReadAccessPolicy"):
            if policy not in attached:
                principals.attach_role_policy("bi-service-role", policy)
    assert bi.validate_data_source("root", "demo_hive_metastore").status == "VALID"


def test_bad_requests_are_answered_in_the_one_error_shape(api: Callable[..., httpx.Client]) -> None:
    de = api("de_user")
    path = "/dashboards/covid-19-cases/visuals/map/series"
    cases = [
        ({"mode": "fast"}, 400, "mode: auto, extract or live, not 'fast'"),
        ({"filters": "[{"}, 400, "filters: not valid JSON"),
        ({"filters": '[{"type": "time_range", "field": "date", "start": "yesterday"}]'}, 400,
         "filters[0].time_range.start: Input should be a valid datetime"),
        ({"filters": '[{"type": "category", "field": "date\\" OR 1=1 --", "values": ["x"]}]'},
         400, "filters[0].category.field: String should match pattern"),
    ]  # fmt: skip
    for params, status, message in cases:
        response = de.get(path, params=params)
        assert response.status_code == status, (params, response.text)
        assert response.json()["error"]["type"] == "InvalidRequest"
        assert message in response.json()["error"]["message"]
    malformed = de.post(
        "/datasets/preview", content=b"{", headers={"content-type": "application/json"}
    )
    assert malformed.status_code == 400
    assert malformed.json()["error"]["message"].startswith("the request body is not valid JSON")
    huge = de.post("/datasets/preview", content=b" " * 1_048_577)
    assert huge.status_code == 413 and huge.json()["error"]["type"] == "PayloadTooLarge"
    missing = de.get("/dashboards/covid-19-cases/visuals/pie/series")
    assert missing.status_code == 404
    assert missing.json()["error"]["message"] == "dashboard COVID-19 cases has no visual pie"


def test_the_cli_reads_the_dashboard_as_the_caller(stack: Settings, bi: BiService) -> None:
    shown = lakeward("bi", "series", "--dashboard", "covid-19-cases", "--visual", "map",
                     data_dir=stack.data_dir)  # fmt: skip
    points = points_by_country(json.loads(shown.stdout))
    assert points["US"]["size"] == 6_420_040
    keys = bi.access.secrets.get("SalesUserCreds").value
    as_sales = {"AWS_ACCESS_KEY_ID": keys["access_key_id"],
                "AWS_SECRET_ACCESS_KEY": keys["secret_access_key"]}  # fmt: skip
    refused = lakeward("bi", "series", "--dashboard", "covid-19-cases", "--visual", "map",
                       data_dir=stack.data_dir, env=as_sales, check=False)  # fmt: skip
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert "not authorized to perform: quicksight:QueryDashboard" in refused.stderr
