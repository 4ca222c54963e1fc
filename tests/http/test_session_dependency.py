"""One session check for /auth, /api/bi and the console: cookie, CSRF, and who is asking."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from lakeward.access.control import AccessControl
from lakeward.access.sessions import CSRF_HEADER, SESSION_COOKIE
from lakeward.config import load_settings
from lakeward.http.app import create_app

PASSWORD = "correct horse battery staple"


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    settings = load_settings(data_dir=tmp_path_factory.mktemp("sessions") / "data", env={})
    AccessControl(settings).principals.create_user("ana", password=PASSWORD)
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def signed_in(client: TestClient) -> str:
    login = client.post("/auth/login", json={"username": "ana", "password": PASSWORD})
    assert login.status_code == 200
    return str(login.json()["csrf_token"])


def test_every_router_refuses_a_missing_or_forged_cookie(client: TestClient) -> None:
    client.cookies.clear()
    assert client.get("/auth/whoami").status_code == 401
    assert client.get("/api/bi/dashboards").status_code == 401
    page = client.get("/console/", follow_redirects=False)
    assert page.status_code == 303 and "/console/login" in page.headers["location"]
    client.cookies.set(SESSION_COOKIE, "e30.forged")
    assert client.get("/auth/whoami").status_code == 401
    assert client.get("/api/bi/dashboards").status_code == 401


def test_state_changes_need_the_csrf_secret(client: TestClient) -> None:
    csrf = signed_in(client)
    body = {"id": "src", "name": "Source", "catalog": "nowhere"}
    missing = client.post("/api/bi/data-sources", json=body)
    assert missing.status_code == 403 and "X-CSRF-Token" in missing.text
    forged = client.post("/api/bi/data-sources", json=body, headers={CSRF_HEADER: "forged"})
    assert forged.status_code == 403
    # The console also takes the secret from a form field, and says so in its own words.
    form = client.post("/console/logout", data={"csrf_token": "forged"}, follow_redirects=False)
    assert form.status_code == 403 and "CSRF token" in form.text
    assert client.get("/auth/whoami").json() == {"user": "ana"}
    out = client.post("/console/logout", data={"csrf_token": csrf}, follow_redirects=False)
    assert out.status_code == 303
    assert client.get("/auth/whoami").status_code == 401


def test_bi_decisions_are_the_session_users_from_the_console(client: TestClient) -> None:
    csrf = signed_in(client)
    body = {"id": "src", "name": "Source", "catalog": "nowhere"}
    denied = client.post("/api/bi/data-sources", json=body, headers={CSRF_HEADER: csrf})
    assert denied.status_code == 403
    settings = client.app.state.settings  # type: ignore[attr-defined]
    records = AccessControl(settings).audit.query(principal="arn:lakeward:iam:::user/ana")
    assert records and records[-1].source == "console"


def test_a_browser_at_the_root_meets_the_console_and_the_athena_api_stays(
    client: TestClient,
) -> None:
    page = client.get("/", follow_redirects=False)
    assert page.status_code == 307 and page.headers["location"] == "/console/"
    assert client.get("/").url.path.startswith("/console/")  # the sign-in page, as HTML
    unsigned = client.post("/", headers={"x-amz-target": "AmazonAthena.ListWorkGroups"})
    assert unsigned.status_code == 400 and "__type" in unsigned.json()
