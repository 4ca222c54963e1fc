"""The console at a phone's width (390 px) and a laptop's (1280 px): nothing runs off the
side, Sign out is on screen, the editor and the charts keep their size. Each page is also
saved as a screenshot at both widths (docs/images under ``make screenshots``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lakeward.config import Settings
from tests.console.conftest import Offline
from tests.console.console_helpers import check_page, password_of, server_url, sign_in

pytestmark = pytest.mark.spark

PAGES = {
    "home": "/console/",
    "dashboards": "/console/dashboards",
    "dashboard": "/console/dashboards/covid-19-cases",
    "datasets": "/console/datasets",
    "query": "/console/query",
    "catalogs": "/console/catalogs",
    "catalog": "/console/catalogs/demo_hive_metastore",
    "database": "/console/catalogs/demo_hive_metastore/default",
    "table": "/console/catalogs/demo_hive_metastore/default/covid_cases",
    "dataset": "/console/datasets/covid-19",
    "dataset-new": "/console/datasets/new",
    "dataset-edit": "/console/datasets/covid-19/edit",
    "analysis-new": "/console/analyses/new/covid-19",
    "not-found": "/console/no-such-page",
}


@pytest.mark.parametrize("width", [390, 1280])
def test_every_page_fits_the_window(
    browser: Any, offline: Offline, stack: Settings, tmp_path: Path, width: int
) -> None:
    context = browser.new_context(viewport={"width": width, "height": 844})
    page = context.new_page()
    page.route("**/*", offline.route)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    base = server_url(stack)
    page.goto(base + "/console/login")
    check_page(page, width, "login", tmp_path, signed_in=False)
    sign_in(page, base, "de_user", password_of(stack, "DataEngineerUserCreds"))
    try:
        for name, path in PAGES.items():
            page.goto(base + path)
            if name == "dashboard":
                page.wait_for_selector("body[data-charts=ready]", timeout=60_000)
                for chart in page.locator(".visual .chart").all():
                    box = chart.bounding_box()
                    assert box is not None and box["width"] <= width and box["height"] >= 250
            if name == "query":
                editor = page.locator(".sql-box .CodeMirror").bounding_box()
                run = page.locator("#run").bounding_box()
                assert editor is not None and editor["width"] >= min(width - 40, 600)
                assert run is not None and run["x"] + run["width"] <= width
            check_page(page, width, name, tmp_path)
        # An analysis of one's own (its page has the visual and sharing forms), then gone.
        page.goto(base + PAGES["analysis-new"])
        page.fill("input[name=name]", f"Layout at {width} px")
        page.select_option("select[name=type]", "bar")
        page.select_option("select[name=x]", "country")
        page.select_option("select[name=y]", "deaths")
        page.click("text=Create analysis")
        page.wait_for_url("**/console/analyses/layout-at-*")
        page.wait_for_selector("body[data-charts=ready]", timeout=60_000)
        check_page(page, width, "analysis", tmp_path)
        page.click("summary:text('Rename or delete the analysis')")
        page.once("dialog", lambda dialog: dialog.accept())
        page.click("button:text('Delete analysis')")
        assert "deleted" in page.locator(".flash.done").inner_text()
    finally:
        context.close()
    assert errors == [] and offline.blocked == []
