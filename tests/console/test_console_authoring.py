"""Authoring in Chromium: a top-10 bar chart of deaths by country on 2021-01-01, sorted and
formatted, and a map of every country; the visual edited, published as version 2, the
dashboard taken back to version 1, the draft deleted; and the seed dashboard's colours.

Expected figures are computed from the JHU files themselves (tests/bi/jhu.py).
"""

from __future__ import annotations

import re
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from lakeward.config import Settings
from tests.bi import jhu
from tests.console.console_helpers import password_of, screenshot, server_url, sign_in

pytestmark = pytest.mark.spark

DAY = "1/1/21"  # as the JHU files name 2021-01-01
SQL = """SELECT country,
       max(CASE WHEN province_state IS NULL THEN lat END) AS lat,
       max(CASE WHEN province_state IS NULL THEN lon END) AS lon,
       CAST("date" AS varchar) AS day, CAST(sum(deaths) AS bigint) AS deaths
FROM covid_cases
WHERE "date" BETWEEN DATE '2020-12-31' AND DATE '2021-01-02'
GROUP BY country, "date\""""
FIELDS = [
    {"op": "convert", "field": "day", "to": "date", "format": "yyyy-MM-dd"},
    {"op": "geo", "name": "location", "latitude": "lat", "longitude": "lon"},
]
BARS = """(id) => {
  const v = document.querySelector(`.visual[data-visual="${id}"]`);
  const chart = v.querySelector('.chart');
  const texts = (selector) => Array.from(v.querySelectorAll(selector)).map(t => t.textContent);
  return {traces: chart.data.map(t => ({name: t.name, x: t.x, y: t.y})),
          categories: chart.layout.xaxis.categoryarray,
          ticks: texts('.xaxislayer-above .xtick text'),
          yticks: texts('.yaxislayer-above .ytick text'),
          labels: texts('text.bartext'),
          xtitle: (v.querySelector('.g-xtitle text') || {}).textContent,
          ytitle: (v.querySelector('.g-ytitle text') || {}).textContent};
}"""
MAP = """(id) => {
  const v = document.querySelector(`.visual[data-visual="${id}"]`);
  const chart = v.querySelector('.chart');
  return {traces: chart.data.map(t => ({name: t.name, lat: t.lat, size: t.marker.size,
                                        color: t.marker.color, text: t.text})),
          showlegend: chart.layout.showlegend,
          legend: Array.from(v.querySelectorAll('.size-legend figure')).map(f => ({
            value: Number(f.dataset.value), caption: f.querySelector('figcaption').textContent,
            width: f.querySelector('.circle').getBoundingClientRect().width}))};
}"""


def deaths_on(day: str = DAY) -> dict[str, int]:
    """Deaths per country on a day, summed over its provinces, from the JHU file."""
    found: dict[str, int] = defaultdict(int)
    for row in jhu.rows("deaths"):
        found[row["Country/Region"]] += int(row[day])
    return dict(found)


def mapped_countries() -> set[str]:
    """Countries with a row of their own (no province) with coordinates, in any of the three
    files (Canada's provinces have no point of the country; its recovered row does)."""
    return {
        r["Country/Region"] for measure in ("confirmed", "deaths", "recovered")
        for r in jhu.rows(measure) if not r["Province/State"] and r["Lat"] not in ("", None)
    }  # fmt: skip


def ready(page: Any) -> None:
    page.wait_for_selector("body[data-charts=ready], body[data-charts=failed]", timeout=90_000)
    state = page.evaluate("window.lakewardCharts")
    assert state["errors"] == [], state


def confirmed(page: Any, action: Any) -> None:
    """Click through the page's confirmation dialog (accepting it)."""
    page.once("dialog", lambda dialog: dialog.accept())
    action()


@pytest.fixture
def de_page(page: Any, stack: Settings) -> Any:
    sign_in(page, server_url(stack), "de_user", password_of(stack, "DataEngineerUserCreds"))
    return page


def test_top_ten_bar_chart_edited_published_and_taken_back(
    de_page: Any, stack: Settings, tmp_path: Path
) -> None:
    page, base = de_page, server_url(stack)
    suffix = uuid.uuid4().hex[:6]
    dataset_id, analysis_id = f"deaths-{suffix}", f"top-{suffix}"
    made = page.evaluate(
        "([body]) => lakeward.call('POST', '/api/bi/datasets', body)",
        [{"id": dataset_id, "name": f"Deaths {suffix}", "data_source_id": "demo_hive_metastore",
          "sql": SQL, "fields": FIELDS}],
    )  # fmt: skip
    assert made["extract"]["status"] == "COMPLETED"
    deaths = deaths_on()
    ranked = sorted(deaths.items(), key=lambda kv: (-kv[1], kv[0]))
    top10 = ranked[:10]

    page.goto(f"{base}/console/analyses/new/{dataset_id}")
    page.fill("input[name=id]", analysis_id)
    page.fill("input[name=name]", "Deaths by country")
    page.select_option("select[name=type]", "bar")
    # Only the bar chart's fields are shown: no geo point, no table columns.
    assert page.locator("select[name=geo]").is_hidden()
    assert page.locator("input[name=columns]").is_hidden()
    page.fill("input[name=title]", "Top 10 countries by deaths, 2021-01-01")
    page.select_option("select[name=x]", "country")
    page.select_option("select[name=y]", "deaths")
    page.select_option("select[name=sort]", "value:desc")
    page.fill("input[name=top_n]", "10")
    page.check("input[name=value_labels]")
    page.fill("input[name=x_title]", "Country")
    page.select_option("select[name=fmt_field_0]", "deaths")
    page.fill("input[name=fmt_decimals_0]", "0")
    page.select_option("select[name=time_field]", "day")
    page.fill("input[name=time_start]", "2021-01-01T00:00")
    page.fill("input[name=time_end]", "2021-01-02T00:00")
    page.click("text=Create analysis")
    assert page.url.endswith(f"/console/analyses/{analysis_id}")
    ready(page)
    bars = page.evaluate(BARS, "v1")
    (trace,) = bars["traces"]
    assert list(zip(trace["x"], trace["y"], strict=True)) == top10
    assert bars["categories"] == bars["ticks"] == [c for c, _ in top10]  # drawn in this order
    assert bars["labels"] == [f"{n:,}" for _, n in top10]  # e.g. 352,464
    assert all(re.fullmatch(r"\d{1,3}(,\d{3})*", t) for t in bars["yticks"]), bars["yticks"]
    assert (bars["xtitle"], bars["ytitle"]) == ("Country", "deaths")

    # A map of every country on the same day: one point each, a size legend, no legend of
    # 190 names.
    page.click("summary:text('Add a visual')")
    added = page.locator("form[action$='/visuals']")
    added.locator("select[name=type]").select_option("map")
    assert added.locator("select[name=x]").is_hidden()
    added.locator("select[name=geo]").select_option("location")
    added.locator("select[name=size]").select_option("deaths")
    added.locator("select[name=color]").select_option("country")
    added.locator("select[name=fmt_field_0]").select_option("deaths")
    added.locator("select[name=time_field]").select_option("day")
    added.locator("input[name=time_start]").fill("2021-01-01T00:00")
    added.locator("input[name=time_end]").fill("2021-01-02T00:00")
    added.locator("button[type=submit]").click()
    assert "added visual v2" in page.locator(".flash.done").inner_text()
    ready(page)
    world = page.evaluate(MAP, "v2")
    assert len(world["traces"]) == 1 and world["showlegend"] is False
    points = world["traces"][0]
    expected = {c: n for c, n in deaths.items() if c in mapped_countries()}
    assert sorted(points["size"]) == sorted(expected.values())
    assert len(set(points["color"])) == min(22, len(expected))  # the whole palette in use
    legend = world["legend"]
    assert len(legend) == 3
    assert [f["value"] for f in legend] == sorted((f["value"] for f in legend), reverse=True)
    assert legend[0]["width"] > legend[1]["width"] > legend[2]["width"] >= 3
    assert all(f["caption"] == f"{int(f['value']):,}" for f in legend)
    assert max(expected.values()) / 2 < legend[0]["value"] <= max(expected.values()) * 1.5
    screenshot(page, "analysis-top10", tmp_path)

    # Published: version 1.
    page.click("form[action$='/publish'] button[type=submit]")
    page.wait_for_url(f"**/console/dashboards/{analysis_id}?done=*")
    assert "published version 1" in page.locator(".flash.done").inner_text()
    ready(page)

    # The visual edited: top 5 and the rest as Other.
    page.goto(f"{base}/console/analyses/{analysis_id}")
    ready(page)
    editor = page.locator(".visual[data-visual=v1] details.visual-edit")
    editor.locator("summary").click()
    assert editor.locator("input[name=top_n]").input_value() == "10"
    editor.locator("input[name=top_n]").fill("5")
    editor.locator("input[name=other]").check()
    editor.locator("button[type=submit]").click()
    assert "visual v1 saved" in page.locator(".flash.done").inner_text()
    ready(page)
    five = page.evaluate(BARS, "v1")
    rest = sum(n for _, n in ranked[5:])
    assert five["categories"] == [c for c, _ in ranked[:5]] + ["Other"]
    assert five["traces"][0]["y"] == [n for _, n in ranked[:5]] + [rest]
    assert five["labels"][-1] == f"{rest:,}"

    # Published again: version 2, with the edited chart.
    page.click("form[action$='/publish'] button[type=submit]")
    page.wait_for_url(f"**/console/dashboards/{analysis_id}?done=*")
    assert "published version 2" in page.locator(".flash.done").inner_text()
    ready(page)
    assert "version 2 of 2" in page.locator("#dashboard-version").inner_text()
    assert page.evaluate(BARS, "v1")["categories"][-1] == "Other"

    # Back to version 1, after the confirmation: ten bars again (the list of versions is
    # open once there are two).
    back = page.locator("#versions tr[data-version='1'] button")
    page.once("dialog", lambda dialog: dialog.dismiss())  # changing one's mind changes nothing
    back.click()
    assert "version 2 of 2" in page.locator("#dashboard-version").inner_text()
    confirmed(page, back.click)
    expect(page.locator(".flash.done")).to_contain_text("now showing version 1")
    expect(page.locator("#dashboard-version")).to_contain_text("version 1 of 2")
    ready(page)
    assert page.evaluate(BARS, "v1")["categories"] == [c for c, _ in top10]

    # The dataset cannot go while the analysis uses it: the refusal names it.
    page.goto(f"{base}/console/datasets/{dataset_id}")
    confirmed(page, lambda: page.click("button:text('Delete')"))
    refusal = page.locator(".flash.error").inner_text()
    assert f"analysis {analysis_id}" in refusal and f"dashboard {analysis_id}" in refusal

    # The draft analysis deleted; the published dashboard stays.
    page.goto(f"{base}/console/analyses/{analysis_id}")
    page.click("summary:text('Rename or delete the analysis')")
    confirmed(page, lambda: page.click("button:text('Delete analysis')"))
    assert f"analysis {analysis_id} deleted" in page.locator(".flash.done").inner_text()
    assert page.locator(f"a[href$='/analyses/{analysis_id}']").count() == 0
    page.goto(f"{base}/console/dashboards/{analysis_id}")
    ready(page)

    # Then the dashboard, and the dataset with it.
    page.click("summary:text('Rename or delete the dashboard')")
    confirmed(page, lambda: page.click("button:text('Delete dashboard')"))
    assert f"dashboard {analysis_id} deleted" in page.locator(".flash.done").inner_text()
    page.goto(f"{base}/console/datasets/{dataset_id}")
    confirmed(page, lambda: page.click("button:text('Delete')"))
    assert f"dataset {dataset_id} deleted" in page.locator(".flash.done").inner_text()
    assert page.locator(f"a[href$='/datasets/{dataset_id}']").count() == 0
    # Their old addresses: not found, with no request for a policy.
    for path in (f"dashboards/{analysis_id}", f"analyses/{analysis_id}", f"datasets/{dataset_id}"):
        response = page.goto(f"{base}/console/{path}")
        assert response is not None and response.status == 404, path
        assert page.locator("h1").inner_text() == "Not found"
        assert "not shared with you" in page.locator(".flash.error").inner_text()
        assert "administrator" not in page.locator(".next-step").inner_text()


SEED = """() => Object.fromEntries(Array.from(document.querySelectorAll('.visual')).map(v => [
  v.dataset.type, Object.fromEntries((v.querySelector('.chart').data || []).map(t => [t.name,
    {colour: (t.marker && typeof t.marker.color === 'string' && t.marker.color)
       || (t.line && t.line.color), text: t.text || null}]))]))"""


def test_seed_colours_stay_across_charts_and_filters(de_page: Any, stack: Settings) -> None:
    page = de_page
    page.goto(server_url(stack) + "/console/dashboards/covid-19-cases")
    ready(page)
    first = page.evaluate(SEED)
    colours = {name: t["colour"] for name, t in first["map"].items()}
    assert len(set(colours.values())) == len(colours) == 12
    assert {n: t["colour"] for n, t in first["line"].items()} == {
        n: colours[n] for n in first["line"]
    }
    # The map's tooltip gives the rate in percent, as the line chart's axis does.
    italy = first["map"]["Italy"]["text"][0]
    rate = jhu.count("deaths", "Italy") / jhu.count("confirmed", "Italy")
    assert f"mortality_rate: {100 * rate:.2f}%" in italy, italy
    assert f"deaths: {jhu.count('deaths', 'Italy'):,}" in italy
    yticks = page.locator(".visual[data-type=line] .yaxislayer-above .ytick text")
    assert yticks.count() > 2 and all(t.endswith("%") for t in yticks.all_text_contents())

    # Two other filter values: another day on the map, two countries on the line chart.
    time_filter = page.locator("fieldset.filter[data-type=time_range]")
    time_filter.locator("input[name=start]").fill("2020-04-01T00:00")
    time_filter.locator("input[name=end]").fill("2020-04-02T00:00")
    page.select_option("fieldset.filter[data-type=category] select", ["Spain", "India"])
    page.evaluate("document.body.dataset.charts = 'loading'")
    page.click("#apply-filters")
    ready(page)
    second = page.evaluate(SEED)
    assert set(second["line"]) == {"Spain", "India"}
    for chart in ("map", "line"):
        assert {n: t["colour"] for n, t in second[chart].items()} == {
            n: colours[n] for n in second[chart]
        }
    # A fresh load gives the same colours again (they go by value, not by rank).
    page.reload()
    ready(page)
    again = page.evaluate(SEED)
    assert {n: t["colour"] for n, t in again["map"].items()} == colours
