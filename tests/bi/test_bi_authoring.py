"""Editing and deleting BI objects over ``/api/bi``: data sources, datasets, analyses and
dashboards, each change authorized per object and audited; published dashboard versions
kept, and a dashboard taken back to an earlier one."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from lakeward.access.arns import quicksight_arn
from lakeward.bi.service import BiService
from lakeward.errors import LakewardError
from tests.bi import jhu

pytestmark = pytest.mark.spark

SQL = """SELECT country, CAST(sum(deaths) AS bigint) AS deaths FROM covid_cases
WHERE "date" = DATE '2020-09-10' AND country IN ('Italy', 'Spain', 'France') GROUP BY country"""


def bars(visual_id: str, **more: Any) -> dict[str, Any]:
    return {"id": visual_id, "type": "bar", "x": "country", "y": "deaths", **more}


@pytest.fixture
def made(bi: BiService) -> Iterator[dict[str, str]]:
    """A data source, a dataset and an analysis of de_user's (deleted afterwards as root)."""
    suffix = uuid.uuid4().hex[:6]
    ids = {"source": f"src-{suffix}", "dataset": f"ds-{suffix}", "analysis": f"an-{suffix}"}
    yield ids
    for kind, key in (("dashboard", "analysis"), ("analysis", "analysis"),
                      ("dataset", "dataset"), ("data_source", "source")):  # fmt: skip
        with contextlib.suppress(LakewardError):  # deleted by the test already
            getattr(bi, f"delete_{kind}")("root", ids[key])


def created(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def audited(bi: BiService, action: str, resource: str) -> list[tuple[str, str]]:
    """(principal, decision) of the audit records of an action on a resource (the stack's
    audit log, which the server writes before it answers)."""
    records = bi.access.audit.query(action=action, limit=10_000)
    return [(r.principal.rsplit("/", 1)[-1], r.decision) for r in records if r.resource == resource]


def test_edit_and_delete_each_kind_authorized_and_audited(
    api: Callable[..., httpx.Client], bi: BiService, made: dict[str, str]
) -> None:
    de, sales = api("de_user"), api("sales_user")
    source, dataset, analysis = made["source"], made["dataset"], made["analysis"]
    created(de.post("/data-sources", json={"id": source, "name": "Mine",
                                           "catalog": "demo_hive_metastore"}))  # fmt: skip
    assert created(de.post(f"/data-sources/{source}/validate"))["status"] == "VALID"
    # Renaming keeps the validation; the owner may, the salesperson may not.
    renamed = created(de.put(f"/data-sources/{source}", json={"name": "Renamed"}))
    assert (renamed["name"], renamed["status"]) == ("Renamed", "VALID")
    refused = sales.put(f"/data-sources/{source}", json={"name": "Mine now"})
    assert refused.status_code == 403 and refused.json()["error"]["type"] == "AccessDenied"
    bad = de.put(f"/data-sources/{source}", json={"catalog": "nowhere"})
    assert bad.status_code == 400 and "no catalog 'nowhere'" in bad.json()["error"]["message"]

    body = {"id": dataset, "name": "Deaths", "data_source_id": source, "sql": SQL}
    assert created(de.post("/datasets", json=body))["extract"]["status"] == "COMPLETED"
    in_use = de.delete(f"/data-sources/{source}")
    assert in_use.status_code == 400
    assert f"used by dataset(s) {dataset}" in in_use.json()["error"]["message"]
    spec = {"name": "Draft", "dataset_id": dataset,
            "sheets": [{"id": "s", "visuals": [bars("v1")]}]}  # fmt: skip
    created(de.post("/analyses", json={"id": analysis, **spec}))
    # A dataset an analysis uses is not deleted; the message names the analysis.
    used = de.delete(f"/datasets/{dataset}")
    assert used.status_code == 400
    assert used.json()["error"]["message"] == (
        f"dataset {dataset} is used by analysis {analysis}; delete those first"
    )
    # Editing the dataset re-imports it: a fourth country appears in the visual.
    wider = SQL.replace("'France')", "'France', 'Germany')")
    edited = created(de.put(f"/datasets/{dataset}", json={**body, "sql": wider}))
    assert edited["extract"]["row_count"] == 4
    series = created(de.get(f"/analyses/{analysis}/visuals/v1/series"))["data"]
    assert dict(zip(series["categories"], series["series"][0]["y"], strict=True)) == {
        c: jhu.count("deaths", c) for c in ("France", "Germany", "Italy", "Spain")
    }
    # Editing a visual of the analysis: sorted by value, largest first, top 2 and Other.
    spec["sheets"][0]["visuals"] = [bars("v1", sort={"by": "value"}, top_n=2, other=True)]
    created(de.put(f"/analyses/{analysis}", json=spec))
    series = created(de.get(f"/analyses/{analysis}/visuals/v1/series"))["data"]
    deaths = sorted(((jhu.count("deaths", c), c) for c in ("France", "Germany", "Italy",
                                                           "Spain")), reverse=True)  # fmt: skip
    assert series["categories"] == [deaths[0][1], deaths[1][1], "Other"]
    assert series["series"][0]["y"] == [deaths[0][0], deaths[1][0], deaths[2][0] + deaths[3][0]]
    assert sales.put(f"/analyses/{analysis}", json=spec).status_code == 403
    assert sales.delete(f"/analyses/{analysis}").status_code == 403

    assert created(de.delete(f"/analyses/{analysis}")) == {"deleted": analysis}
    assert created(de.delete(f"/datasets/{dataset}")) == {"deleted": dataset}
    assert created(de.delete(f"/data-sources/{source}")) == {"deleted": source}
    assert de.get(f"/datasets/{dataset}").status_code in (403, 404)

    # Each change and each refusal is in the audit log, with who asked.
    arn = quicksight_arn("datasource", source)
    assert ("de_user", "allowed") in audited(bi, "quicksight:UpdateDataSource", arn)
    assert ("sales_user", "implicitDeny") in audited(bi, "quicksight:UpdateDataSource", arn)
    arn = quicksight_arn("analysis", analysis)
    assert ("de_user", "allowed") in audited(bi, "quicksight:DeleteAnalysis", arn)
    assert ("sales_user", "implicitDeny") in audited(bi, "quicksight:DeleteAnalysis", arn)
    assert ("de_user", "allowed") in audited(
        bi, "quicksight:DeleteDataSet", quicksight_arn("dataset", dataset)
    )


def test_publishing_makes_versions_and_a_dashboard_goes_back(
    api: Callable[..., httpx.Client], bi: BiService, made: dict[str, str]
) -> None:
    de, sales = api("de_user"), api("sales_user")
    dataset, analysis = made["dataset"], made["analysis"]
    body = {"id": dataset, "name": "Deaths", "data_source_id": "demo_hive_metastore",
            "sql": SQL}  # fmt: skip
    created(de.post("/datasets", json=body))
    first = {"name": "Deaths v1", "dataset_id": dataset,
             "sheets": [{"id": "s", "visuals": [bars("v1")]}]}  # fmt: skip
    created(de.post("/analyses", json={"id": analysis, **first}))
    one = created(de.post(f"/analyses/{analysis}/publish", json={}))
    assert (one["version"], one["name"]) == (1, "Deaths v1")
    second = {**first, "name": "Deaths v2",
              "sheets": [{"id": "s", "visuals": [bars("v1", top_n=1)]}]}  # fmt: skip
    created(de.put(f"/analyses/{analysis}", json=second))
    two = created(de.post(f"/analyses/{analysis}/publish", json={}))
    assert (two["version"], two["name"]) == (2, "Deaths v2")
    assert (
        len(created(de.get(f"/dashboards/{analysis}/visuals/v1/series"))["data"]["categories"]) == 1
    )

    versions = created(de.get(f"/dashboards/{analysis}/versions"))
    assert [(v["version"], v["name"], v["publisher"]) for v in versions] == [
        (1, "Deaths v1", "de_user"), (2, "Deaths v2", "de_user")]  # fmt: skip
    # Back to version 1: its definition is what the dashboard shows again.
    back = created(de.put(f"/dashboards/{analysis}/versions/1"))
    assert back["version"] == 1 and back["definition"]["name"] == "Deaths v1"
    series = created(de.get(f"/dashboards/{analysis}/visuals/v1/series"))["data"]
    assert len(series["categories"]) == 3
    missing = de.put(f"/dashboards/{analysis}/versions/7")
    assert missing.status_code == 404
    assert missing.json()["error"]["message"] == f"dashboard {analysis} has no version 7"
    # Publishing again after going back makes version 3, not a second version 2.
    assert created(de.post(f"/analyses/{analysis}/publish", json={}))["version"] == 3
    renamed = created(de.put(f"/dashboards/{analysis}", json={"name": "Deaths by country"}))
    assert (renamed["name"], renamed["version"]) == ("Deaths by country", 3)

    # The salesperson, not shared with, may neither list the versions nor change them.
    assert sales.get(f"/dashboards/{analysis}/versions").status_code == 403
    assert sales.put(f"/dashboards/{analysis}/versions/1").status_code == 403
    # Shared as a viewer: the versions may be read, not changed.
    created(de.put(f"/dashboards/{analysis}/permissions",
                   json={"shares": [{"principal": "user/sales_user"}]}))  # fmt: skip
    assert [v["version"] for v in created(sales.get(f"/dashboards/{analysis}/versions"))] == [
        1, 2, 3]  # fmt: skip
    assert sales.put(f"/dashboards/{analysis}/versions/1").status_code == 403
    assert sales.put(f"/dashboards/{analysis}", json={"name": "x"}).status_code == 403
    arn = quicksight_arn("dashboard", analysis)
    decisions = audited(bi, "quicksight:UpdateDashboardPublishedVersion", arn)
    assert ("de_user", "allowed") in decisions and ("sales_user", "implicitDeny") in decisions

    assert created(de.delete(f"/dashboards/{analysis}")) == {"deleted": analysis}
    assert de.get(f"/dashboards/{analysis}/versions").status_code in (403, 404)
