"""Every route of the server answers a refusal in its family's one error shape.

The app's routes are walked (included routers too), and each is called as a
stranger would: without credentials, a session or a body. Four families:

* the Athena API (``POST /``): Athena's ``{"__type", "Message"}``, so botocore raises
  its own exception classes;
* lakeward's JSON routes (``/api/bi``, ``/auth``, ``/erasure``, ``/events``,
  ``/console/api``): ``{"error": {"type", "message"}}``, ``type`` a class of
  lakeward.errors;
* console pages: a GET goes to the sign-in page, anything else gets the console's
  error page (or, signing in, the form with the message);
* approval pages (the emailed links): an HTML page.

A route added without a family fails here until it is given one.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from lakeward import errors
from lakeward.config import load_settings
from lakeward.http.app import create_app

PUBLIC = {
    ("GET", "/openapi.json"),
    ("GET", "/docs"),
    ("GET", "/docs/oauth2-redirect"),
    ("GET", "/health"),
    ("GET", "/"),
    ("GET", "/console/login"),
    ("GET", "/console/assets/{digest}/{name:path}"),
}
# A public route whose placeholders must name something that exists.
CONCRETE = {"/console/assets/{digest}/{name:path}": "/console/assets/0/console.css"}
ERROR_CLASSES = {
    name
    for name, value in vars(errors).items()
    if isinstance(value, type) and issubclass(value, errors.LakewardError)
}


def walk(routes: list[Any], prefix: str = "") -> Iterator[tuple[str, str]]:
    for route in routes:
        if hasattr(route, "original_router"):  # an included router
            yield from walk(route.original_router.routes, prefix + route.include_context.prefix)
        elif getattr(route, "methods", None):
            for method in sorted(route.methods - {"HEAD"}):
                yield method, prefix + route.path


@pytest.fixture(scope="module")
def app_and_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, TestClient]]:
    settings = load_settings(data_dir=tmp_path_factory.mktemp("shape") / "data", env={})
    app = create_app(settings)
    with TestClient(app) as client:
        yield app, client


def family(method: str, path: str) -> str:
    if (method, path) in PUBLIC:
        return "public"
    if path == "/":
        return "athena"
    if path.startswith("/erasure/approval/"):
        return "approval page"
    if path.startswith("/console/") and not path.startswith("/console/api/"):
        return "console page"
    return "json"


def assert_json_error(response: Any, where: str) -> None:
    assert response.headers["content-type"].startswith("application/json"), where
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"type", "message"}, (where, body)
    assert body["error"]["type"] in ERROR_CLASSES, (where, body)
    assert body["error"]["message"], where


def test_every_route_refuses_a_stranger_in_its_familys_shape(
    app_and_client: tuple[Any, TestClient],
) -> None:
    app, client = app_and_client
    # POST / (Athena, Glue, STS) is answered ahead of the routes (athena.AwsApiDispatch).
    routes = sorted(set(walk(app.routes)) | {("POST", "/")})
    assert len(routes) > 80  # the walk reached the included routers
    seen = set()
    for method, path in routes:
        kind = family(method, path)
        seen.add(kind)
        where = f"{method} {path}"
        url = CONCRETE.get(path) or re.sub(r"\{[^}]+\}", "x", path)
        response = client.request(method, url, follow_redirects=False)
        if kind == "public":
            assert response.status_code < 400, where
        elif kind == "athena":
            assert response.status_code == 400, where
            assert response.headers["content-type"] == "application/x-amz-json-1.1", where
            body = response.json()
            assert {"__type", "Message"} <= set(body), (where, body)
            assert body["__type"].endswith("Exception"), (where, body)
        elif kind == "approval page":
            assert response.status_code == 404, where
            assert response.headers["content-type"].startswith("text/html"), where
        elif kind == "console page" and path.startswith("/console/assets/"):
            assert response.status_code == 404, where  # no such asset: the console's page
            assert '<p class="flash error" role="alert">' in response.text, where
        elif kind == "console page" and method == "GET":
            assert response.status_code == 303, where
            assert response.headers["location"].startswith("/console/login?next="), where
        elif kind == "console page":
            assert response.status_code in (401, 403, 404), where
            assert response.headers["content-type"].startswith("text/html"), where
            # The console's error page, or (signing in) the form with its message.
            assert '<p class="flash error" role="alert">' in response.text, where
        else:
            assert 400 <= response.status_code < 500, where
            assert_json_error(response, where)
    assert seen == {"public", "athena", "approval page", "console page", "json"}


def test_a_malformed_body_gets_the_same_shape(app_and_client: tuple[Any, TestClient]) -> None:
    _app, client = app_and_client
    missing = client.post("/auth/login")  # FastAPI's own validation, in lakeward's shape
    assert missing.status_code == 422
    assert_json_error(missing, "POST /auth/login")
    assert missing.json()["error"]["type"] == "InvalidRequest"
    too_large = client.post(
        "/api/bi/datasets", content=b" " * (1_048_576 + 1), headers={"x-csrf-token": "x"}
    )
    assert too_large.status_code in (401, 413)
    assert_json_error(too_large, "POST /api/bi/datasets")
