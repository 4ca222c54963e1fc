"""Iceberg tables in the console, in Chromium: marked as such beside tables and views in the
catalog pages and the editor's schema browser, their snapshots listed with a query as of
each, and a dataset built on one.

The table is made and changed with SQL through boto3, as its owner would.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import boto3
import pytest
from playwright.sync_api import expect

from lakeward.config import Settings
from tests.console.console_helpers import password_of, screenshot, server_url, sign_in
from tests.query.support import api_ok, credentials, endpoint

pytestmark = pytest.mark.spark

CATALOG = "demo_hive_metastore"


@pytest.fixture
def de_page(page: Any, stack: Settings) -> Any:
    sign_in(page, server_url(stack), "de_user", password_of(stack, "DataEngineerUserCreds"))
    return page


@pytest.fixture(scope="module")
def visits(stack: Settings) -> tuple[str, str]:
    """An Iceberg table with three snapshots (two inserts, a delete), and a view."""
    athena = boto3.client("athena", endpoint_url=endpoint(stack), **credentials(stack))
    name = f"visits_{uuid.uuid4().hex[:6]}"
    place = f"s3://{stack.lake.data_bucket}/iceberg/{name}"
    api_ok(
        athena,
        f"CREATE TABLE {name} (user_id bigint, country string) LOCATION '{place}' "
        "TBLPROPERTIES ('table_type'='ICEBERG')",
    )
    api_ok(athena, f"INSERT INTO {name} VALUES (1, 'Italy'), (2, 'Peru'), (3, 'Chad')")
    api_ok(athena, f"INSERT INTO {name} VALUES (4, 'Italy'), (5, 'Fiji')")
    api_ok(athena, f"DELETE FROM {name} WHERE user_id = 2")
    api_ok(athena, f"CREATE VIEW {name}_italy AS SELECT * FROM {name} WHERE country = 'Italy'")
    return name, f"{name}_italy"


def test_iceberg_tables_and_views_are_marked_and_snapshots_listed(
    de_page: Any, stack: Settings, visits: tuple[str, str], tmp_path: Path
) -> None:
    page, base = de_page, server_url(stack)
    table, view = visits
    page.goto(f"{base}/console/catalogs/{CATALOG}/default")
    kinds = {
        name: page.locator("tr", has=page.locator(f"a:text-is('{name}')")).locator(".tag")
        for name in (table, view, "covid_cases")
    }
    expect(kinds[table]).to_have_text("Iceberg")
    expect(kinds[view]).to_have_text("view")
    expect(kinds["covid_cases"]).to_have_text("table")

    page.click(f"a:text-is('{table}')")
    expect(page.locator("h1 .tag")).to_have_text("Iceberg")
    snapshots = page.locator("table.snapshots tbody tr")
    expect(snapshots).to_have_count(3)
    newest = snapshots.first.locator("td").all_inner_texts()
    # The DELETE rewrote the file holding user 2 (copy-on-write): its rows out, two back in.
    assert (newest[2], newest[3], newest[4], newest[5]) == ("overwrite", "2", "3", "4")
    oldest = snapshots.last.locator("td").all_inner_texts()
    assert (oldest[2], oldest[3], oldest[5]) == ("append", "3", "3")
    screenshot(page, "catalog-iceberg-table", tmp_path)

    # Each snapshot opens the editor with a query as of it, which answers its rows.
    snapshots.last.locator("a:text('Query as of this snapshot')").click()
    assert f"FOR VERSION AS OF {oldest[1]}" in page.locator("#sql").input_value()
    page.click("#run")  # waits until the page's script has made it run queries
    page.wait_for_selector(".status.ok", timeout=60_000)
    assert page.locator("#result-table tbody tr").count() == 3

    # The editor's schema browser marks them too.
    item = page.locator("#schema .schema-table", has=page.locator(f"summary a:text-is('{table}')"))
    expect(item.locator(".tag")).to_have_text("Iceberg", timeout=30_000)
    marked = page.locator("#schema .schema-table", has=page.locator(f"summary a:text-is('{view}')"))
    expect(marked.locator(".tag")).to_have_text("view")


def test_a_dataset_is_built_on_an_iceberg_table(
    de_page: Any, stack: Settings, visits: tuple[str, str]
) -> None:
    page = de_page
    table, _ = visits
    dataset_id = f"visits-{uuid.uuid4().hex[:6]}"
    made = page.evaluate(
        "([body]) => lakeward.call('POST', '/api/bi/datasets', body)",
        [{"id": dataset_id, "name": f"Visits {dataset_id}", "data_source_id": CATALOG,
          "table": f"default.{table}"}],
    )  # fmt: skip
    assert made["extract"]["status"] == "COMPLETED", made
    assert made["extract"]["row_count"] == 4  # the current snapshot's rows
    page.goto(f"{server_url(stack)}/console/datasets/{dataset_id}")
    expect(page.locator("#extract tr", has_text="Rows")).to_contain_text("4")
    countries = page.locator("#preview-table tbody tr td:nth-child(2)").all_inner_texts()
    assert sorted(countries) == ["Chad", "Fiji", "Italy", "Italy"]
