"""Console sign-in on the running server: cookies, CSRF, lockout, nothing secret in logs."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from lakeward.config import Settings
from tests.helpers import lakeward

pytestmark = pytest.mark.spark


def password_of(stack: Settings, secret: str) -> str:
    value = json.loads(lakeward("secrets", "get", secret, data_dir=stack.data_dir).stdout)
    return str(value["password"])


def url(stack: Settings) -> str:
    return f"http://{stack.server.host}:{stack.server.port}"


def test_login_session_csrf_logout(stack: Settings) -> None:
    password = password_of(stack, "DataEngineerUserCreds")
    with httpx.Client(base_url=url(stack)) as client:
        response = client.post("/auth/login", json={"username": "de_user", "password": password})
        assert response.status_code == 200
        cookie = response.headers.get_list("set-cookie")[0].lower()
        assert "lakeward_session=" in cookie and "httponly" in cookie
        assert "samesite=strict" in cookie and "max-age=28800" in cookie
        csrf = response.json()["csrf_token"]
        assert client.get("/auth/whoami").json() == {"user": "de_user"}
        refused = client.post("/auth/logout")  # no CSRF token: refused
        assert refused.status_code == 403 and "X-CSRF-Token" in refused.text
        assert client.post("/auth/logout", headers={"X-CSRF-Token": "forged"}).status_code == 403
        assert client.post("/auth/logout", headers={"X-CSRF-Token": csrf}).status_code == 200
        assert client.get("/auth/whoami").status_code == 401
    forged = httpx.get(f"{url(stack)}/auth/whoami", cookies={"lakeward_session": "e30.forged"})
    assert forged.status_code == 401


def test_wrong_passwords_lock_the_account(stack: Settings) -> None:
    password = password_of(stack, "SalesUserCreds")
    with httpx.Client(base_url=url(stack)) as client:
        unknown = client.post("/auth/login", json={"username": "nobody", "password": "x"})
        wrong = client.post("/auth/login", json={"username": "sales_user", "password": "x"})
        assert unknown.status_code == wrong.status_code == 401
        assert unknown.json()["error"]["message"] == wrong.json()["error"]["message"]
        for _ in range(4):
            client.post("/auth/login", json={"username": "sales_user", "password": "x"})
        locked = client.post("/auth/login", json={"username": "sales_user", "password": password})
        assert locked.status_code == 403 and "too many failed logins" in locked.text
        malformed = client.post(
            "/auth/login", content=b"{", headers={"content-type": "application/json"}
        )
        assert malformed.status_code == 422 and "Traceback" not in malformed.text


def test_no_secret_reaches_the_logs(stack: Settings) -> None:
    password = password_of(stack, "DataEngineerUserCreds")
    secret = json.loads(
        lakeward("secrets", "get", "DataEngineerUserCreds", data_dir=stack.data_dir).stdout
    )["secret_access_key"]
    for log in Path(stack.data_dir / "run").glob("*.log"):
        text = log.read_text(errors="replace")
        assert password not in text and secret not in text, log
