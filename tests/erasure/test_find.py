"""Find through the real command line and over HTTP (signed, authorized) on a generated lake."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from fastapi.testclient import TestClient

from lakeward.access.control import AccessControl
from lakeward.config import Settings, load_settings
from lakeward.erasure import IndexStore
from lakeward.http.app import create_app
from tests.helpers import lakeward

KEY, SECRET = "AKIDERASURETEST1", "erasure-test-secret-0123"
ODD = ["o'brien\"; DROP TABLE erasure_records;--", "ユーザー", "../../x", "a/b", "%"]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data_dir = tmp_path_factory.mktemp("find") / "data"
    lakeward("demo-data", "gdpr", "--records", "1500", "--seed", "5", data_dir=data_dir)
    return data_dir


@pytest.fixture(scope="module")
def heavy_user(data_dir: Path) -> str:
    """The user with the most index entries (data in several objects and tables)."""
    store = IndexStore(data_dir / "erasure" / "index.db")
    user = store.users().most_common(1)[0][0]
    store.close()
    return user


def find_json(data_dir: Path, *ids: str) -> list[dict[str, object]]:
    result = lakeward("erasure", "find", "--output", "json", *ids, data_dir=data_dir)
    document: list[dict[str, object]] = json.loads(result.stdout)
    return document


@pytest.fixture(scope="module")
def heavy_json(data_dir: Path, heavy_user: str) -> dict[str, object]:
    [found] = find_json(data_dir, heavy_user)
    return found


def test_find_json_lists_every_layer_with_counts(
    data_dir: Path, heavy_user: str, heavy_json: dict[str, object]
) -> None:
    found = heavy_json
    assert found["user_id"] == heavy_user
    locations = found["locations"]
    assert isinstance(locations, list)
    layers = {loc["layer"] for loc in locations}
    assert layers == {"lake", "database"}
    lake_root = (data_dir / "lake").resolve().as_uri()
    for loc in locations:
        if loc["layer"] == "lake":
            assert loc["location"].startswith(f"{lake_root}/lakeward-data/gdpr/")
            if not loc["whole_object"]:
                assert loc["records"] == len(loc["positions"]) > 0
        else:
            assert loc["location"] in ("gdpr_app.user_profiles.user_id", "gdpr_app.orders.user_id")
            assert loc["records"] >= 1
    assert found["records"] == sum(loc["records"] or 1 for loc in locations)
    datasets = {loc["dataset"] for loc in locations}
    assert {"gdpr_reviews_jsonl", "gdpr_reviews_csv", "gdpr_reviews_parquet"} <= datasets


def test_find_table_prints_whole_locations(
    data_dir: Path, heavy_user: str, heavy_json: dict[str, object]
) -> None:
    result = lakeward("erasure", "find", heavy_user, "nobody-at-all", data_dir=data_dir)
    flat = "".join(result.stdout.split())
    locations = heavy_json["locations"]
    assert isinstance(locations, list)
    for loc in locations:
        assert "".join(loc["location"].split()) in flat
    assert "nobody-at-all: no data found in the index" in result.stdout


def test_odd_ids_are_looked_up_literally(data_dir: Path) -> None:
    found = find_json(data_dir, *ODD)
    assert [f["user_id"] for f in found] == ODD
    assert all(f["locations"] == [] for f in found)
    assert not (data_dir.parent / "x").exists()


def test_cli_errors_are_plain(data_dir: Path) -> None:
    empty = lakeward("erasure", "find", "", data_dir=data_dir, check=False)
    assert empty.returncode == 1 and "error: a user id is empty" in empty.stderr
    assert "Traceback" not in empty.stderr
    wrong = lakeward("erasure", "find", "x", "--output", "xml", data_dir=data_dir, check=False)
    assert wrong.returncode == 2 and "must be table or json" in wrong.stderr


def test_find_on_an_empty_index_says_so(tmp_path: Path) -> None:
    result = lakeward("erasure", "find", "someone", data_dir=tmp_path / "data")
    assert "someone: no data found in the index" in result.stdout
    assert "the erasure index is empty" in " ".join(result.stderr.split())


@pytest.fixture(scope="module")
def settings(data_dir: Path) -> Settings:
    return load_settings(
        data_dir=data_dir,
        env={},
        overrides={"api.access_key_id": KEY, "api.secret_access_key": SECRET},
    )


@pytest.fixture(scope="module")
def client(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def get(client: TestClient, user_id: str, key: str = KEY, secret: str = SECRET) -> httpx.Response:
    url = f"http://testserver/erasure/users/{quote(user_id, safe='')}"
    request = AWSRequest(method="GET", url=url)
    SigV4Auth(Credentials(key, secret), "athena", "us-east-1").add_auth(request)
    return client.get(url, headers=dict(request.headers.items()))


def test_http_find_matches_the_cli(
    client: TestClient, heavy_user: str, heavy_json: dict[str, object]
) -> None:
    response = get(client, heavy_user)
    assert response.status_code == 200
    assert response.json() == heavy_json


def test_http_odd_ids(client: TestClient) -> None:
    for odd in ODD:
        response = get(client, odd)
        assert response.status_code == 200, odd
        assert response.json() == {"user_id": odd, "records": 0, "locations": []}


def test_http_requires_a_signature(client: TestClient) -> None:
    unsigned = client.get("/erasure/users/someone")
    assert unsigned.status_code == 401
    assert unsigned.json()["error"]["type"] == "Unauthenticated"
    forged = get(client, "someone", secret="not-the-secret-at-all")
    assert forged.status_code == 403


def test_http_find_is_authorized_per_user(
    client: TestClient, settings: Settings, heavy_user: str
) -> None:
    access = AccessControl(settings)
    access.principals.create_user("dpo")
    key, secret = access.principals.create_access_key("dpo")
    denied = get(client, heavy_user, key, secret)
    assert denied.status_code == 403
    assert "erasure:Find" in denied.json()["error"]["message"]
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Action": "erasure:Find",
                "Resource": f"arn:lakeward:erasure:::user/{heavy_user}",
            }
        ],
    }
    access.principals.put_user_policy("dpo", "find-one", policy)
    assert get(client, heavy_user, key, secret).status_code == 200
    assert get(client, "someone-else", key, secret).status_code == 403
