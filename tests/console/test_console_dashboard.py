"""The seed's "COVID-19 cases" dashboard in Chromium, as the data engineer sees it.

The figures are read from the charts plotly drew in the page (the graph
divs' ``data``), after setting the time filter through the page's controls.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from lakeward.config import Settings
from tests.console.console_helpers import password_of, screenshot, server_url, sign_in

pytestmark = pytest.mark.spark

DASHBOARD = "/console/dashboards/covid-19-cases"
US_CONFIRMED_2020_09_10 = 6_420_040
ITALY_DEATHS, ITALY_CONFIRMED = 35_587, 283_180  # on 2020-09-10, in the JHU files

CHART_DATA = """() => Object.fromEntries(Array.from(document.querySelectorAll('.visual')).map(v => [
  v.dataset.visual,
  {type: v.dataset.type, source: v.dataset.source,
   traces: (v.querySelector('.chart').data || []).map(t => ({
     name: t.name, x: t.x || null, y: t.y || null, lat: t.lat || null, lon: t.lon || null,
     size: t.marker && Array.isArray(t.marker.size) ? t.marker.size : null,
     color: (t.marker && typeof t.marker.color === 'string' && t.marker.color)
       || (t.line && t.line.color) || null}))}]))"""


def wait_for_charts(page: Any) -> dict[str, Any]:
    page.wait_for_selector("body[data-charts=ready], body[data-charts=failed]", timeout=60_000)
    state = page.evaluate("window.lakewardCharts")
    assert state["errors"] == [] and state["rendered"] == state["total"] == 2, state
    charts: dict[str, Any] = page.evaluate(CHART_DATA)
    return charts


def set_time_filter(page: Any, start: str, end: str) -> None:
    time_filter = page.locator("fieldset.filter[data-type=time_range]")
    time_filter.locator("input[name=start]").fill(start)
    time_filter.locator("input[name=end]").fill(end)
    page.evaluate("document.body.dataset.charts = 'loading'")
    page.click("#apply-filters")


def by_kind(charts: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    maps = [c for c in charts.values() if c["type"] == "map"]
    lines = [c for c in charts.values() if c["type"] == "line"]
    assert len(maps) == 1 and len(lines) == 1, charts
    return maps[0], lines[0]


@pytest.fixture
def de_page(page: Any, stack: Settings) -> Any:
    sign_in(page, server_url(stack), "de_user", password_of(stack, "DataEngineerUserCreds"))
    return page


def test_map_and_mortality_on_2020_09_10(de_page: Any, stack: Settings, tmp_path: Path) -> None:
    page = de_page
    assets: list[Any] = []
    page.on("response", lambda r: assets.append(r) if "/console/assets/" in r.url else None)
    page.goto(server_url(stack) + "/console/dashboards")
    page.click("text=COVID-19 cases")
    assert page.url.endswith(DASHBOARD)
    wait_for_charts(page)
    # plotly.js came compressed, at an address of its content the browser may keep a year;
    # a map and a line chart need only its geo bundle, a third of the full one.
    plotly = [r for r in assets if "/plotly" in r.url]
    assert [r.url.rsplit("/", 1)[-1] for r in plotly] == ["plotly-geo.min.js"]
    assert plotly and plotly[0].header_value("content-encoding") == "gzip"
    assert plotly[0].header_value("cache-control") == "public, max-age=31536000, immutable"
    # Move the filter away and back, so the figures below come from the control's value.
    set_time_filter(page, "2020-06-01T00:00", "2020-06-02T00:00")
    june, _ = by_kind(wait_for_charts(page))
    set_time_filter(page, "2020-09-10T00:00", "2020-09-11T00:00")
    world, mortality = by_kind(wait_for_charts(page))

    countries = {t["name"]: t for t in world["traces"]}
    assert {"US", "Italy", "India", "Brazil", "Spain", "United Kingdom"} <= set(countries)
    us = countries["US"]
    assert us["size"] == [US_CONFIRMED_2020_09_10]
    assert len(us["lat"]) == len(us["lon"]) == 1
    assert 20 < us["lat"][0] < 50 and -130 < us["lon"][0] < -60  # a point in the US
    us_in_june = {t["name"]: t for t in june["traces"]}["US"]["size"][0]
    assert 0 < us_in_june < US_CONFIRMED_2020_09_10

    lines = {t["name"]: t for t in mortality["traces"]}
    assert set(lines) == {"US", "Italy", "India", "Brazil", "Spain", "United Kingdom"}
    italy = lines["Italy"]
    day = next(i for i, x in enumerate(italy["x"]) if str(x).startswith("2020-09-10"))
    assert italy["y"][day] == pytest.approx(ITALY_DEATHS / ITALY_CONFIRMED, rel=1e-9)
    assert round(100 * italy["y"][day], 2) == 12.57
    assert world["source"] == mortality["source"] == "extract"

    # One colour per country: distinct on the map, the same on the line chart, and the
    # same before and after the filter changed.
    map_colours = {t["name"]: t["color"] for t in world["traces"]}
    assert None not in map_colours.values()
    assert len(set(map_colours.values())) == len(map_colours) >= 12, map_colours
    assert {name: t["color"] for name, t in lines.items()} == {
        name: map_colours[name] for name in lines
    }
    june_colours = {t["name"]: t["color"] for t in june["traces"]}
    assert all(map_colours[name] == colour for name, colour in june_colours.items())

    # The world outline is drawn under the points, from the server's own topology.
    assert (
        page.locator(
            ".visual[data-type=map] path.countries, .visual[data-type=map] .countries path"
        ).count()
        > 0
    )
    screenshot(page, "dashboard", tmp_path)


def test_live_queries_draw_the_same_figures(de_page: Any, stack: Settings) -> None:
    page = de_page
    page.goto(server_url(stack) + DASHBOARD + "?mode=live")
    world, mortality = by_kind(wait_for_charts(page))
    assert world["source"] == mortality["source"] == "live"
    countries = {t["name"]: t for t in world["traces"]}
    assert countries["US"]["size"] == [US_CONFIRMED_2020_09_10]


def test_the_category_filter_offers_the_datas_values(
    de_page: Any, stack: Settings, tmp_path: Path
) -> None:
    page = de_page
    page.goto(server_url(stack) + DASHBOARD)
    wait_for_charts(page)
    category = page.locator("fieldset.filter[data-type=category]")
    select = category.locator("select")
    # The list holds every country of the dataset (12), the six saved ones still selected.
    expect(select.locator("option")).to_have_count(12, timeout=30_000)
    saved = {"US", "Italy", "India", "Brazil", "Spain", "United Kingdom"}
    assert set(select.evaluate("s => [...s.selectedOptions].map(o => o.value)")) == saved
    # Search narrows the list; France and Germany are added to the mortality chart.
    category.locator("input.value-search").fill("an")
    shown = select.evaluate("s => [...s.options].filter(o => !o.hidden).map(o => o.value)")
    assert "France" in shown and "Germany" in shown and "Italy" not in shown
    select.select_option([*sorted(saved), "France", "Germany"])
    page.evaluate("document.body.dataset.charts = 'loading'")
    page.click("#apply-filters")
    _world, mortality = by_kind(wait_for_charts(page))
    assert {t["name"] for t in mortality["traces"]} == saved | {"France", "Germany"}
    screenshot(page, "category-filter", tmp_path)
    # Select all selects what the search shows; clear empties the selection.
    category.locator("input.value-search").fill("germ")
    category.locator("button.select-none").click()
    category.locator("button.select-all").click()
    assert select.evaluate("s => [...s.selectedOptions].map(o => o.value)") == ["Germany"]


def test_a_click_toggles_one_country_and_the_filters_live_in_the_address(
    de_page: Any, stack: Settings
) -> None:
    page = de_page
    page.goto(server_url(stack) + DASHBOARD)
    wait_for_charts(page)
    category = page.locator("fieldset.filter[data-type=category]")
    select = category.locator("select")
    expect(select.locator("option")).to_have_count(12, timeout=30_000)
    saved = {"US", "Italy", "India", "Brazil", "Spain", "United Kingdom"}
    # A plain click adds France and takes Italy away; the other choices stay. (Playwright
    # does not click an <option>: the press a click starts with is sent to it as Chromium does.)
    press = """(s, value) => [...s.options].find(o => o.value === value)
        .dispatchEvent(new MouseEvent('mousedown', {bubbles: true, cancelable: true}))"""
    select.evaluate(press, "France")
    select.evaluate(press, "Italy")
    wanted = (saved - {"Italy"}) | {"France"}
    assert set(select.evaluate("s => [...s.selectedOptions].map(o => o.value)")) == wanted
    set_time_filter(page, "2020-06-01T00:00", "2020-06-02T00:00")
    _world, mortality = by_kind(wait_for_charts(page))
    assert {t["name"] for t in mortality["traces"]} == wanted
    assert "filters=" in page.url
    # A reload (or the link, opened elsewhere) draws the same figures.
    page.reload()
    _world, mortality = by_kind(wait_for_charts(page))
    assert {t["name"] for t in mortality["traces"]} == wanted
    assert set(select.evaluate("s => [...s.selectedOptions].map(o => o.value)")) == wanted
    start = page.locator("fieldset.filter[data-type=time_range] input[name=start]")
    assert start.input_value() == "2020-06-01T00:00"
    # A mangled address falls back to the dashboard's saved filters.
    page.goto(server_url(stack) + DASHBOARD + "?filters=%5Bnot-json")
    _world, mortality = by_kind(wait_for_charts(page))
    assert {t["name"] for t in mortality["traces"]} == saved
