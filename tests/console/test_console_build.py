"""Building in the console from scratch, and the query editor, in Chromium.

A data source, a dataset from custom SQL with conversions and a computed
field, and an analysis with a bar chart, all through the pages' forms; then
a query in the editor, paged through, and its CSV downloaded.
"""

from __future__ import annotations

import csv
import json
import re
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from lakeward.config import Settings
from tests.console.conftest import Offline
from tests.console.console_helpers import (
    password_of,
    screenshot,
    server_url,
    sign_in,
    write_sql,
)
from tests.helpers import bi_api, lakeward

pytestmark = pytest.mark.spark

DATASET_SQL = """SELECT country, CAST("date" AS varchar) AS day,
       CAST(sum(confirmed) AS bigint) AS confirmed, CAST(sum(deaths) AS bigint) AS deaths
FROM covid_cases
WHERE country IN ('Italy', 'Spain', 'Germany')
  AND "date" BETWEEN DATE '2020-09-01' AND DATE '2020-09-10'
GROUP BY country, "date\""""


@pytest.fixture
def de_page(page: Any, stack: Settings) -> Any:
    sign_in(page, server_url(stack), "de_user", password_of(stack, "DataEngineerUserCreds"))
    return page


def test_a_dataset_and_a_visual_built_from_scratch(
    de_page: Any, stack: Settings, browser: Any, offline: Offline
) -> None:
    page, base = de_page, server_url(stack)
    suffix = uuid.uuid4().hex[:6]
    source_id, dataset_id, analysis_id = f"src-{suffix}", f"ds-{suffix}", f"an-{suffix}"

    page.goto(base + "/console/datasets")
    page.fill("input[name=id]", source_id)
    page.fill("input[name=name]", f"Metastore {suffix}")
    page.select_option("select[name=catalog]", "demo_hive_metastore")
    page.click("text=Create and validate")
    assert "created and validated" in page.locator(".flash.done").inner_text()

    page.click("text=New dataset")
    page.fill("input[name=id]", dataset_id)
    page.fill("input[name=name]", f"Deaths per million {suffix}")
    page.select_option("select[name=data_source_id]", source_id)
    page.fill("textarea[name=sql]", DATASET_SQL)
    operations = [
        ("convert", "day", "date", "yyyy-MM-dd"),
        ("computed", "mortality", "deaths / confirmed", ""),
    ]
    for row, (kind, a, b, c) in enumerate(operations):
        page.select_option(f"select[name=op_kind_{row}]", kind)
        page.fill(f"input[name=op_a_{row}]", a)
        page.fill(f"input[name=op_b_{row}]", b)
        if c:
            page.fill(f"input[name=op_c_{row}]", c)
    # Each box is named for its operation; one the operation does not take is not offered.
    names = page.locator("tr:has(select[name=op_kind_1]) .arg-name").all_inner_texts()
    assert names == ["new field", "expression, e.g. deaths / confirmed", ""], names
    assert page.locator("input[name=op_c_1]").is_disabled()
    assert page.locator("input[name=op_a_0]").get_attribute("aria-label") == "operation 1: field"
    # A conversion that fails on rows is reported with their count and examples.
    page.select_option("select[name=op_kind_2]", "convert")
    page.fill("input[name=op_a_2]", "country")
    page.fill("input[name=op_b_2]", "integer")
    page.click("button[value=preview]")
    issue = page.locator(".preview .flash.error").inner_text()
    assert "30 row(s) of country" in issue, issue
    assert any(name in issue for name in ("Italy", "Spain", "Germany")), issue
    page.select_option("select[name=op_kind_2]", "")
    page.click("button[value=preview]")
    assert page.locator(".preview .flash.error").count() == 0
    preview = page.locator("#preview-table")
    assert preview.locator("th").all_inner_texts()[:2] == ["country\nstring", "day\ndate"]
    assert "30 rows" in page.locator(".preview h2").inner_text()  # 3 countries x 10 days
    page.fill("input[name=refresh_interval_minutes]", "2")
    page.click("button[value=create]")
    assert "refresh_interval_minutes" in page.locator(".flash.error").inner_text()
    page.fill("input[name=refresh_interval_minutes]", "1440")  # the form kept the rest
    page.click("button[value=create]")
    assert f"/console/datasets/{dataset_id}?done=" in page.url
    extract = page.locator("#extract").inner_text()
    assert "COMPLETED" in extract and "30" in extract
    scheduled = page.locator("#extract tr", has_text="Next scheduled refresh").inner_text()
    assert re.search(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}", scheduled), scheduled

    page.click("text=New analysis")
    page.fill("input[name=id]", analysis_id)
    page.fill("input[name=name]", f"Mortality {suffix}")
    page.select_option("select[name=type]", "bar")
    page.fill("input[name=title]", "Deaths on 2020-09-10")
    page.select_option("select[name=x]", "country")
    page.select_option("select[name=y]", "deaths")
    page.select_option("select[name=time_field]", "day")
    page.fill("input[name=time_start]", "2020-09-10T00:00")
    page.fill("input[name=time_end]", "2020-09-11T00:00")
    page.click("text=Create analysis")
    assert page.url.endswith(f"/console/analyses/{analysis_id}")
    page.wait_for_selector("body[data-charts=ready]", timeout=60_000)
    bars = page.evaluate("document.querySelector('.visual .chart').data")
    assert len(bars) == 1 and bars[0]["type"] == "bar"
    deaths = dict(zip(bars[0]["x"], bars[0]["y"], strict=True))
    assert deaths["Italy"] == 35_587  # the JHU figure for 2020-09-10
    assert set(deaths) == {"Italy", "Spain", "Germany"}

    # A second visual, a table, added on the analysis's page.
    page.click("summary:text('Add a visual')")
    added = page.locator("form[action$='/visuals']")
    added.locator("select[name=type]").select_option("table")
    added.locator("input[name=title]").fill("Italy's days")
    # The table's columns picked with the field buttons, in the order clicked; a second
    # click takes one out again.
    chips = added.locator(".field-list:has(input[name=columns]) .chip")
    for name in ("day", "confirmed", "deaths", "confirmed", "mortality"):
        chips.filter(has_text=name).click()
    assert added.locator("input[name=columns]").input_value() == "day, deaths, mortality"
    added.locator("select[name=category_field]").select_option("country")
    added.locator("input[name=category_values]").fill("Italy")
    added.locator("button[type=submit]").click()
    assert "added visual v2" in page.locator(".flash.done").inner_text()
    page.wait_for_selector("body[data-charts=ready]", timeout=60_000)
    rows = page.locator(".visual[data-visual=v2] tbody tr")
    assert rows.count() == 10  # Italy on 2020-09-01 .. 2020-09-10
    assert page.locator(".visual[data-visual=v2] th").all_inner_texts() == [
        "day", "deaths", "mortality"]  # fmt: skip

    page.click("form[action$='/publish'] button[type=submit]")
    page.wait_for_url(f"**/console/dashboards/{analysis_id}?done=*")
    page.wait_for_selector("body[data-charts=ready]", timeout=60_000)

    try:
        # Shared with the salesperson, the dashboard opens for them, but without its data:
        # they may not use the catalog it reads, and sharing does not widen that.
        page.click("summary:text('Sharing')")
        page.fill("input[name=principal]", "user/sales_user")
        page.click("form.inline button:text('Share')")
        assert "sharing of" in page.locator(".flash.done").inner_text()
        # ...which the one sharing is told at once, not left to find out.
        warning = page.locator(".flash.warning").inner_text()
        assert "sales_user may not use the catalog demo_hive_metastore" in warning, warning
        other = browser.new_context()
        try:
            sales = other.new_page()
            sales.route("**/*", offline.route)
            sign_in(sales, base, "sales_user", password_of(stack, "SalesUserCreds"))
            sales.goto(f"{base}/console/dashboards/{analysis_id}")
            sales.wait_for_selector("body[data-charts=failed]", timeout=60_000)
            notes = sales.locator(".visual .visual-note").all_inner_texts()
            assert len(notes) == 2 and all("may not use" in n for n in notes), notes
            assert sales.evaluate("document.querySelector('.visual .chart').data") is None
            assert "35587" not in sales.content() and "35,587" not in sales.content()
        finally:
            other.close()
    finally:  # the session's stack is the next tests' too: the salesperson sees nothing
        with bi_api(stack, "de_user") as de:
            de.delete(f"/dashboards/{analysis_id}").raise_for_status()


def test_a_dataset_made_with_the_pickers(de_page: Any, stack: Settings, tmp_path: Path) -> None:
    page, base = de_page, server_url(stack)
    warnings: list[str] = []
    page.on("console", lambda message: warnings.append(message.text))
    suffix = uuid.uuid4().hex[:6]
    page.goto(base + "/console/datasets/new")
    # The id is made from the name as it is typed.
    page.fill("#dataset-name", f"Deaths by country {suffix}")
    assert page.locator("#dataset-id").input_value() == f"deaths-by-country-{suffix}"
    # Catalog (through the data source) -> database -> table, from what de_user may use.
    page.select_option("#data-source", "demo_hive_metastore")
    expect(page.locator("#database-picker option:checked")).to_have_text("default")
    expect(page.locator("#table-picker option", has_text="covid_deaths")).to_have_count(1)
    page.select_option("#table-picker", "default.covid_deaths")
    assert page.locator("input[name=source_kind][value=table]").is_checked()
    screenshot(page, "dataset-pickers", tmp_path)
    # Every pattern the forms carry is one the browser can use (Chromium warns otherwise).
    page.fill("#dataset-id", "not valid!")
    assert page.evaluate("document.getElementById('dataset-id').checkValidity()") is False
    assert page.evaluate("document.getElementById('dataset-id').validationMessage") == (
        "Id: letters, digits, - and _, starting with a letter or digit"
    )
    page.fill("#dataset-id", "")  # left empty, the server makes it from the name
    page.select_option("select[name=import_mode]", "DIRECT_QUERY")  # no extract to wait for
    page.click("button[value=create]")
    page.wait_for_selector(".flash.done, .flash.error", timeout=120_000)
    assert page.locator(".flash").first.inner_text() == (
        f"dataset deaths-by-country-{suffix} created"
    )
    assert page.locator("h1").inner_text() == f"Deaths by country {suffix}"
    for path in ("/console/datasets", f"/console/analyses/new/deaths-by-country-{suffix}"):
        page.goto(base + path)
        invalid = page.evaluate(
            "[...document.querySelectorAll('input[pattern]')].filter(i => {"
            " try { new RegExp('^(?:' + i.pattern + ')$', 'v'); return false; }"
            " catch (e) { return true; } }).map(i => i.name)"
        )
        assert invalid == [], (path, invalid)
    assert not [w for w in warnings if "pattern" in w.lower()], warnings


def test_query_editor_runs_and_pages(de_page: Any, stack: Settings, tmp_path: Path) -> None:
    page, base = de_page, server_url(stack)
    page.goto(base + "/console/query")
    write_sql(
        page,
        'SELECT country, "date", confirmed, deaths FROM covid_cases\n'
        "WHERE country = 'Italy' AND province_state IS NULL\nORDER BY \"date\" LIMIT 120",
    )
    page.click("#run")
    page.wait_for_selector(".status.ok", timeout=60_000)
    expect(page.locator("#page-info")).to_have_text("rows 1–50")
    # The history shows the run at once, without reloading the page.
    expect(page.locator(".history li").first).to_contain_text("SELECT country", timeout=10_000)
    assert page.locator(".history li .meta").first.inner_text().startswith("SUCCEEDED")
    headers = page.locator("#result-table thead th").all_inner_texts()
    assert headers == ["country", "date", "confirmed", "deaths"]
    first = page.locator("#result-table tbody tr").first.locator("td").all_inner_texts()
    assert first[:2] == ["Italy", "2020-01-22"]
    screenshot(page, "query-editor", tmp_path)

    page.click("#next")
    expect(page.locator("#page-info")).to_have_text("rows 51–100")
    assert page.locator("#result-table tbody tr").count() == 50
    page.click("#next")
    expect(page.locator("#page-info")).to_have_text("rows 101–120")
    assert page.locator("#next").is_disabled()
    page.click("#prev")
    expect(page.locator("#page-info")).to_have_text("rows 51–100")

    with page.expect_download() as download:
        page.click("#download")
    lines = Path(download.value.path()).read_text().splitlines()
    assert lines[0] == '"country","date","confirmed","deaths"' and len(lines) == 121

    # The query is in the history, and can be saved and opened again.
    page.click("details.save summary")
    page.fill("#save-form input[name=name]", "Italy, first 120 days")
    page.click("#save-form button[type=submit]")
    page.click(".saved a:text('Italy, first 120 days')")
    assert 'ORDER BY "date" LIMIT 120' in page.locator("#sql").input_value()
    assert page.locator(".history li").first.inner_text().startswith("SELECT country")


def jhu_deaths(jhu_dir: Path, day: str, countries: list[str]) -> dict[str, int]:
    """Each country's deaths on ``day`` (JHU's m/d/yy), summed over its provinces, from
    the JHU file itself."""
    totals = dict.fromkeys(countries, 0)
    with open(jhu_dir / "time_series_covid19_deaths_global.csv", newline="") as f:
        for row in csv.DictReader(f):
            if row["Country/Region"] in totals:
                totals[row["Country/Region"]] += int(row[day])
    return totals


def test_a_query_result_charted_from_the_editor(
    de_page: Any, stack: Settings, jhu_dir: Path, tmp_path: Path
) -> None:
    """Run a query, "Chart this result": the query becomes a dataset (its source over the
    editor's catalog, its database kept), then the first chart of an analysis."""
    page, base = de_page, server_url(stack)
    suffix = uuid.uuid4().hex[:6]
    page.goto(base + "/console/query")
    write_sql(page, "SHOW TABLES")
    page.click("#run")
    page.wait_for_selector(".status.ok", timeout=60_000)
    assert page.locator("#chart-result").is_hidden()  # only a SELECT's result is charted
    sql = (
        "SELECT country, CAST(sum(deaths) AS bigint) AS deaths FROM covid_cases\n"
        "WHERE \"date\" = DATE '2020-09-10' AND country IN ('Italy', 'Spain', 'Germany')\n"
        "GROUP BY country"
    )
    write_sql(page, sql)
    page.click("#run")
    page.wait_for_selector(".status.ok", timeout=60_000)
    page.click("#chart-result")
    page.wait_for_url("**/console/datasets/new?*")
    assert page.locator("textarea[name=sql]").input_value() == sql
    assert page.locator("input[name=source_kind][value=sql]").is_checked()
    assert page.locator("#data-source").input_value() == "demo_hive_metastore"
    expect(page.locator("#database-picker option:checked")).to_have_text("default")
    page.fill("#dataset-name", f"Deaths on 2020-09-10 {suffix}")
    page.select_option("select[name=import_mode]", "DIRECT_QUERY")
    page.click("button[value=create]")
    page.wait_for_url(f"**/console/analyses/new/deaths-on-2020-09-10-{suffix}?done=*")
    assert page.locator(".flash.done").inner_text() == (
        f"dataset deaths-on-2020-09-10-{suffix} created"
    )
    page.fill("input[name=name]", f"Charted {suffix}")
    page.select_option("select[name=type]", "bar")
    page.select_option("select[name=x]", "country")
    page.select_option("select[name=y]", "deaths")
    page.click("text=Create analysis")
    page.wait_for_url(f"**/console/analyses/charted-{suffix}")
    page.wait_for_selector("body[data-charts=ready]", timeout=60_000)
    bars = page.evaluate("document.querySelector('.visual .chart').data")
    deaths = dict(zip(bars[0]["x"], bars[0]["y"], strict=True))
    assert deaths == jhu_deaths(jhu_dir, "9/10/20", ["Italy", "Spain", "Germany"]), deaths
    screenshot(page, "query-charted", tmp_path)


def test_schema_browser_and_completion(de_page: Any, stack: Settings, tmp_path: Path) -> None:
    page, base = de_page, server_url(stack)
    page.goto(base + "/console/query")
    # The tables de_user may query, each with its columns.
    table = page.locator(
        "#schema .schema-table", has=page.locator("summary a:text-is('covid_cases')")
    )
    expect(table).to_have_count(1, timeout=30_000)
    table.locator("summary").click()
    assert "country" in table.locator("li a").all_inner_texts()
    # Completion: table names, then column names, as they are typed.
    write_sql(page, "")
    hints = page.locator(".CodeMirror-hints li")
    page.keyboard.type("SELECT coun")
    expect(hints.first).to_have_text("country")
    page.keyboard.press("Tab")
    page.keyboard.type(" FROM covid_ca")
    expect(hints.first).to_have_text("covid_cases")
    screenshot(page, "query-completion", tmp_path)
    page.keyboard.press("Enter")
    assert page.locator("#sql").input_value() == "SELECT country FROM covid_cases"
    expect(page.locator(".CodeMirror-hints")).to_have_count(0)


def test_the_editor_highlights_indents_and_runs_on_ctrl_enter(
    de_page: Any, stack: Settings
) -> None:
    page, base = de_page, server_url(stack)
    page.goto(base + "/console/query")
    write_sql(page, "")
    page.keyboard.type("SELECT country FROM covid_cases")
    page.keyboard.press("Escape")
    page.keyboard.press("Enter")
    page.keyboard.press("Tab")  # Tab indents (two spaces), in place of leaving the editor
    page.keyboard.type("WHERE country = 'Italy' LIMIT 5")
    page.keyboard.press("Escape")
    text = "SELECT country FROM covid_cases\n  WHERE country = 'Italy' LIMIT 5"
    assert page.locator("#sql").input_value() == text
    # Keywords, strings and numbers each in their own style, as Trino's grammar has them.
    code = page.locator(".sql-box .CodeMirror-code")
    assert code.locator(".cm-keyword").all_inner_texts() == ["SELECT", "FROM", "WHERE", "LIMIT"]
    assert code.locator(".cm-string").all_inner_texts() == ["'Italy'"]
    assert code.locator(".cm-number").all_inner_texts() == ["5"]
    page.keyboard.press("Control+Enter")
    page.wait_for_selector(".status.ok", timeout=60_000)
    assert page.locator("#result-table tbody td").all_inner_texts() == ["Italy"] * 5


def test_query_tabs_keep_their_text_and_results(de_page: Any, stack: Settings) -> None:
    page, base = de_page, server_url(stack)
    page.goto(base + "/console/query")
    first = page.locator(".query-tab.active [role=tab]").inner_text()
    write_sql(page, "SELECT 'first' AS tab")
    page.click("#run")
    page.wait_for_selector(".status.ok", timeout=60_000)

    page.click("#new-tab")
    second = page.locator(".query-tab.active [role=tab]").inner_text()
    assert second != first and page.locator("#sql").input_value() == ""
    assert page.locator("#results").is_hidden()
    write_sql(page, "SELECT 'second' AS tab")
    page.click("#run")
    expect(page.locator("#result-table tbody td")).to_have_text(["second"], timeout=60_000)

    # Each tab keeps its text and shows its own last result, after a reload as well.
    page.click(f".query-tab [role=tab]:text-is('{first}')")
    assert page.locator("#sql").input_value() == "SELECT 'first' AS tab"
    expect(page.locator("#result-table tbody td")).to_have_text(["first"], timeout=30_000)
    page.reload()
    expect(page.locator(".query-tab.active [role=tab]")).to_have_text(first)
    assert page.locator("#sql").input_value() == "SELECT 'first' AS tab"
    expect(page.locator("#result-table tbody td")).to_have_text(["first"], timeout=30_000)

    # A run opened from the history comes into the tab that holds it.
    page.locator(".history li a", has_text="SELECT 'second' AS tab").first.click()
    expect(page.locator(".query-tab.active [role=tab]")).to_have_text(second)
    expect(page.locator("#result-table tbody td")).to_have_text(["second"], timeout=30_000)

    # Closing a tab leaves the others as they were.
    page.get_by_role("button", name=f"Close {second}").click()
    expect(page.locator(".query-tab [role=tab]")).to_have_text([first])
    assert page.locator("#sql").input_value() == "SELECT 'first' AS tab"


def test_the_schema_browser_shows_a_new_view_without_a_reload(
    de_page: Any, stack: Settings
) -> None:
    page, base = de_page, server_url(stack)
    name = f"italy_{uuid.uuid4().hex[:6]}"
    iam = {"data_dir": stack.data_dir}
    lakeward("iam", "attach-user-policy", "--user", "de_user",
             "--policy", "DataEngineerDDLPolicy", **iam)  # fmt: skip
    try:
        page.goto(base + "/console/query")
        entry = page.locator(
            "#schema .schema-table", has=page.locator(f"summary a:text-is('{name}')")
        )
        write_sql(page, f"CREATE VIEW {name} AS SELECT country, deaths FROM covid_deaths")
        page.click("#run")
        page.wait_for_selector(".status.ok", timeout=60_000)
        # Listed, marked as a view, and the editor still holds the statement.
        expect(entry).to_have_count(1, timeout=15_000)
        expect(entry.locator(".tag")).to_have_text("view")
        assert page.locator("#sql").input_value().startswith(f"CREATE VIEW {name}")
        write_sql(page, f"DROP VIEW {name}")
        page.click("#run")
        expect(entry).to_have_count(0, timeout=60_000)
    finally:
        lakeward("iam", "detach-user-policy", "--user", "de_user",
                 "--policy", "DataEngineerDDLPolicy", **iam)  # fmt: skip


def test_result_numbers_are_grouped_with_every_digit(de_page: Any, stack: Settings) -> None:
    page, base = de_page, server_url(stack)
    page.goto(base + "/console/query")
    write_sql(
        page,
        "SELECT sum(deaths) AS deaths, DECIMAL '12345678901234567890.25' AS big, 0.5 AS half, "
        "'1234' AS text FROM covid_deaths WHERE country = 'Italy' AND date = DATE '2020-09-10'",
    )
    page.click("#run")
    page.wait_for_selector(".status.ok", timeout=60_000)
    cells = page.locator("#result-table tbody td")
    # The JHU figure for Italy on 2020-09-10, grouped as the browser's locale (en-US) groups.
    assert cells.all_inner_texts() == ["35,587", "12,345,678,901,234,567,890.25", "0.5", "1234"]
    assert cells.first.get_attribute("title") == "35587"
    assert cells.nth(3).get_attribute("class") is None  # a string stays as it is


def test_sql_errors_in_athenas_words(de_page: Any, stack: Settings) -> None:
    page, base = de_page, server_url(stack)
    page.goto(base + "/console/query")
    write_sql(page, "SELECT no_such_column FROM covid_cases")
    page.click("#run")
    page.wait_for_selector(".status.failed", timeout=60_000)
    worded = "COLUMN_NOT_FOUND: line 1:8: Column 'no_such_column' cannot be resolved"
    assert page.locator("#status").inner_text() == f"FAILED: {worded}"
    expect(page.locator(".history li").first).to_contain_text("no_such_column")
    assert page.locator(".history li .meta").first.inner_text().startswith("FAILED")
    # The API says the same, to a boto3 client of the same user.
    import boto3

    creds = json.loads(
        lakeward("secrets", "get", "DataEngineerUserCreds", data_dir=stack.data_dir).stdout
    )
    athena = boto3.client(
        "athena", endpoint_url=base, region_name="us-east-1",
        aws_access_key_id=creds["access_key_id"],
        aws_secret_access_key=creds["secret_access_key"],
    )  # fmt: skip
    execution_id = athena.start_query_execution(
        QueryString="SELECT no_such_column FROM covid_cases",
        QueryExecutionContext={"Database": "default"},
    )["QueryExecutionId"]
    while True:
        status = athena.get_query_execution(QueryExecutionId=execution_id)["QueryExecution"]
        if status["Status"]["State"] in ("SUCCEEDED", "FAILED", "CANCELLED"):
            break
        time.sleep(0.05)
    assert status["Status"]["StateChangeReason"] == worded


def test_a_running_query_is_cancelled(de_page: Any, stack: Settings) -> None:
    page, base = de_page, server_url(stack)
    page.goto(base + "/console/query")
    write_sql(page, "SELECT count(*) FROM covid_cases a CROSS JOIN covid_cases b")
    page.click("#run")
    expect(page.locator("#status")).to_have_text(re.compile("RUNNING"), timeout=60_000)
    page.click("#cancel")
    expect(page.locator("#status")).to_have_text(re.compile("^CANCELLED"), timeout=60_000)
    assert page.locator("#results").is_hidden()
