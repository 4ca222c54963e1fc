"""Who sees what in the console, and the protections of its pages.

Sign-in and sign-out, CSRF on forms and JSON calls, escaping of names that
hold markup, the Content-Security-Policy, and the salesperson, who is refused
the catalog's tables and the COVID dashboard and dataset, by URL too.
"""

from __future__ import annotations

import json
import re
import uuid
from contextlib import closing
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError

from lakeward.config import Settings
from tests.console.conftest import Offline
from tests.console.console_helpers import password_of, server_url, sign_in, write_sql
from tests.helpers import lakeward

pytestmark = pytest.mark.spark

MARKUP = "<script>window.__pwned=1</script><img src=x onerror=window.__pwned=2>"


def boto3_athena(stack: Settings, secret: str) -> Any:
    import boto3

    creds = json.loads(lakeward("secrets", "get", secret, data_dir=stack.data_dir).stdout)
    return boto3.client(
        "athena", endpoint_url=server_url(stack), region_name="us-east-1",
        aws_access_key_id=creds["access_key_id"],
        aws_secret_access_key=creds["secret_access_key"],
    )  # fmt: skip


def de_client(stack: Settings) -> tuple[httpx.Client, str]:
    """A signed-in HTTP client (through the sign-in form) and its CSRF token."""
    client = httpx.Client(base_url=server_url(stack), follow_redirects=False)
    form = client.get("/console/login")
    token = re.search(r'name="csrf_token" value="([^"]+)"', form.text)
    assert token is not None
    password = password_of(stack, "DataEngineerUserCreds")
    signed = client.post(
        "/console/login",
        data={"username": "de_user", "password": password, "csrf_token": token.group(1)},
    )
    assert signed.status_code == 303, signed.text
    return client, client.cookies["lakeward_csrf"]


def test_every_page_loads_offline_for_the_data_engineer(
    page: Any, offline: Offline, stack: Settings
) -> None:
    base = server_url(stack)
    sign_in(page, base, "de_user", password_of(stack, "DataEngineerUserCreds"))
    pages = [
        "/console/dashboards",
        "/console/dashboards/covid-19-cases",
        "/console/datasets",
        "/console/datasets/covid-19",
        "/console/datasets/new",
        "/console/query",
        "/console/catalogs",
        "/console/catalogs/demo_hive_metastore",
        "/console/catalogs/demo_hive_metastore/default",
        "/console/catalogs/demo_hive_metastore/default/covid_cases",
    ]
    for path in pages:
        response = page.goto(base + path)
        assert response.status == 200, path
        page.wait_for_load_state("networkidle")
        csp = response.headers["content-security-policy"]
        assert "http" not in csp and "script-src 'self'" in csp, csp
        assert page.locator(".flash.error").count() == 0, (path, page.content()[:500])
    nav = page.locator("header nav a").all_inner_texts()
    assert nav == ["Dashboards", "Datasets", "Query editor", "Data catalogs"]
    assert offline.blocked == []
    tables = page.goto(base + "/console/catalogs/demo_hive_metastore/default")
    assert tables is not None
    assert page.locator("table.tables td a", has_text="covid_cases").count() == 1


def test_the_salesperson_is_refused(page: Any, stack: Settings) -> None:
    base = server_url(stack)
    # The data engineer runs a query whose text the salesperson must not read.
    marker = f"marker_{uuid.uuid4().hex[:8]}"
    client, csrf = de_client(stack)
    with closing(client):
        started = client.post(
            "/console/api/query", json={"sql": f"SELECT 1 AS {marker}"},
            headers={"X-CSRF-Token": csrf},
        )  # fmt: skip
        assert started.status_code == 200, started.text
        de_execution = started.json()["id"]
        assert marker in client.get("/console/query").text  # in the engineer's own history
    sign_in(page, base, "sales_user", password_of(stack, "SalesUserCreds"))
    # The salesperson lands on a home page of what they may use: no query editor (they may
    # use no catalog), no datasets, no administration.
    assert page.locator("h1").inner_text() == "Welcome, sales_user"
    # (Dashboards too when another test has shared one with them.)
    cards = page.locator(".home-pages .card strong").all_inner_texts()
    assert "Data catalogs" in cards and not {"Query editor", "Administration"} & set(cards)
    nav = page.locator("header nav a").all_inner_texts()
    assert nav == cards
    # Their history holds none of the engineer's SQL, in the console or through the API.
    page.goto(base + "/console/query")
    assert page.locator(".history li").all_inner_texts() == ["No queries yet."]
    assert marker not in page.content()
    sales = boto3_athena(stack, "SalesUserCreds")
    assert de_execution not in sales.list_query_executions(WorkGroup="primary")["QueryExecutionIds"]
    with pytest.raises(ClientError) as refused:
        sales.get_query_execution(QueryExecutionId=de_execution)
    assert "lakeward:ReadOthersQueryExecutions" in str(refused.value)
    # The datasets page (reached through shares) offers no building on a catalog they
    # may not use.
    page.goto(base + "/console/datasets")
    assert page.locator("#no-catalog").count() == 1
    assert page.locator("a:text('New dataset')").count() == 0
    assert page.locator("form[action$='/data-sources']").count() == 0
    page.goto(base + "/console/catalogs/demo_hive_metastore")
    assert page.locator("td.empty").inner_text() == "No database you may use in this catalog."
    page.goto(base + "/console/catalogs/demo_hive_metastore/default")
    assert page.locator("table.tables td a").count() == 0
    # A dashboard, analysis or dataset not shared with them is, on its page, not there (its
    # existence not told); a table of a catalog they may not use is refused by name.
    for path in (
        "/console/dashboards/covid-19-cases",
        "/console/datasets/covid-19",
        "/console/analyses/covid-19-cases",
    ):
        response = page.goto(base + path)
        assert response.status == 404, path
        assert "or it is not shared with you" in page.locator(".flash.error").inner_text()
        assert "Confirmed" not in page.content()
    response = page.goto(base + "/console/catalogs/demo_hive_metastore/default/covid_cases")
    assert response.status == 403
    assert "not authorized" in page.locator(".flash.error").inner_text() or "may not" in (
        page.locator(".flash.error").inner_text()
    )
    assert "Confirmed" not in page.content()
    page.goto(base + "/console/dashboards")  # (other tests may share dashboards with them)
    assert page.locator(".card", has_text="COVID-19 cases").count() == 0
    # The chart data API refuses too, from the salesperson's own session.
    status = page.evaluate(
        "fetch('/api/bi/dashboards/covid-19-cases/visuals/map/series').then(r => r.status)"
    )
    assert status == 403
    # And the query editor cannot read the tables either.
    page.goto(base + "/console/query")
    write_sql(page, "SELECT count(*) FROM covid_cases")
    page.click("#run")
    page.wait_for_selector(".status.failed")
    assert "not authorized" in page.locator("#status").inner_text()


def test_a_session_cannot_be_used_after_sign_out(stack: Settings) -> None:
    client, _csrf = de_client(stack)
    with closing(client):
        stolen = client.cookies["lakeward_session"]
        assert client.get("/console/query").status_code == 200
        page = client.get("/console/query").text
        token = re.search(r'name="csrf_token" value="([^"]+)"', page)
        assert token is not None
        assert (
            client.post("/console/logout", data={"csrf_token": token.group(1)}).status_code == 303
        )
    replay = httpx.get(server_url(stack) + "/console/query", cookies={"lakeward_session": stolen})
    assert replay.status_code == 303 and "/console/login" in replay.headers["location"]
    api = httpx.get(server_url(stack) + "/api/bi/dashboards", cookies={"lakeward_session": stolen})
    assert api.status_code == 401
    editor_api = httpx.get(
        server_url(stack) + "/console/api/query/any", cookies={"lakeward_session": stolen}
    )
    assert (
        editor_api.status_code == 401 and "sign in again" in editor_api.json()["error"]["message"]
    )


def test_state_changes_need_the_csrf_token(stack: Settings) -> None:
    client, csrf = de_client(stack)
    with closing(client):
        form = {"name": "csrf check", "sql": "SELECT 1"}
        assert client.post("/console/query/saved", data=form).status_code == 403
        forged = client.post("/console/query/saved", data={**form, "csrf_token": "forged"})
        assert forged.status_code == 403 and "CSRF" in forged.text
        run = client.post("/console/api/query", json={"sql": "SELECT 1"})
        assert run.status_code == 403
        ok = client.post("/console/api/query", json={"sql": "SELECT 1"},
                         headers={"X-CSRF-Token": csrf})  # fmt: skip
        assert ok.status_code == 200 and ok.json()["id"]
        too_long = client.post(
            "/console/query/saved", data={**form, "name": "x" * 200, "csrf_token": csrf}
        )
        assert too_long.status_code == 400 and "not a valid form: name" in too_long.text
        assert too_long.headers["content-type"].startswith("text/html")
        logout = client.post("/console/logout")
        assert logout.status_code == 403
    # The sign-in form has its own token: a post from elsewhere is refused.
    refused = httpx.post(
        server_url(stack) + "/console/login", data={"username": "de_user", "password": "x"}
    )
    assert refused.status_code == 403 and "expired" in refused.text


def test_markup_in_names_and_values_is_shown_as_text(page: Any, stack: Settings) -> None:
    base = server_url(stack)
    sign_in(page, base, "de_user", password_of(stack, "DataEngineerUserCreds"))
    # A saved query's name...
    page.goto(base + "/console/query")
    write_sql(page, "SELECT 1")
    page.click("details.save summary")
    page.fill("#save-form input[name=name]", MARKUP)
    page.click("#save-form button[type=submit]")
    page.wait_for_load_state()
    assert page.locator(".saved a", has_text="<script>window.__pwned=1</script>").count() >= 1
    # ... and a country name coming out of the data, in a dataset's preview.
    page.goto(base + "/console/datasets/new")
    page.fill("input[name=name]", "markup")
    sql = f"SELECT '{MARKUP}' AS country, 1 AS confirmed"
    page.fill("textarea[name=sql]", sql)
    page.click("button[value=preview]")
    page.wait_for_selector("#preview-table")
    assert page.locator("#preview-table td").first.inner_text() == MARKUP
    assert page.evaluate("window.__pwned") is None
