"""``POST /events/s3`` through the real application: S3 and MinIO notifications index objects.

The objects are in the lake before the server starts (so neither the storage
events nor the watcher have seen them): only the posted notifications can get
them indexed. One case runs against an s3:// lake on moto's standalone server.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus

import boto3
import pytest
from fastapi.testclient import TestClient

from lakeward.access.control import AccessControl
from lakeward.config import Settings
from lakeward.erasure.realtime import RealtimeIndexer
from lakeward.erasure.realtime.webhook import MAX_BODY_BYTES, webhook_token
from lakeward.erasure.service import ErasureIndexService
from lakeward.http import create_app
from lakeward.storage import load_storage
from tests.erasure.realtime_helpers import BUCKET, eventually, lake_settings

KEY = "gdpr/reviews/json/year=2024/month=05/day=01/part 1.jsonl"
GONE = "gdpr/reviews/json/year=2024/month=05/day=01/part-2.jsonl"


def record(name: str, bucket: str, key: str, **obj: Any) -> dict[str, Any]:
    return {
        "eventVersion": "2.1",
        "eventSource": "aws:s3" if not name.startswith("s3:") else "minio:s3",
        "eventName": name,
        "s3": {"bucket": {"name": bucket}, "object": {"key": quote_plus(key, safe="/"), **obj}},
    }


def holdings(service: ErasureIndexService, user: str) -> dict[str, tuple[int, ...]]:
    (found,) = service.find([user])
    return {h.location: h.positions for h in found.holdings}


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return lake_settings(tmp_path / "data", f"sqlite:///{tmp_path / 'index.db'}")


@pytest.fixture
def server(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[TestClient, dict[str, str]]]:
    # The server's indexer without its file watcher: the test deletes files, and
    # only the posted notifications may tell the indexer about it.
    def without_watcher(cls: type[RealtimeIndexer], s: Settings) -> RealtimeIndexer:
        return cls(ErasureIndexService(s), watch=False)

    monkeypatch.setattr(RealtimeIndexer, "for_settings", classmethod(without_watcher))
    storage = load_storage(settings)
    storage.put(BUCKET, KEY, b'{"user_id": "h1"}\n{"user_id": "h2"}\n')
    storage.put(BUCKET, GONE, b'{"user_id": "h3"}\n')
    token = webhook_token(AccessControl(settings).secrets)
    with TestClient(create_app(settings)) as client:
        yield client, {"Authorization": f"Bearer {token}"}


def test_posted_events_index_and_remove_objects(
    settings: Settings, server: tuple[TestClient, dict[str, str]]
) -> None:
    client, auth = server
    service = ErasureIndexService(settings)
    storage = load_storage(settings)
    uri, gone_uri = storage.uri(BUCKET, KEY), storage.uri(BUCKET, GONE)

    # AWS's shape, with the key form-encoded as S3 sends it ("part+1.jsonl").
    aws = {"Records": [record("ObjectCreated:Put", BUCKET, KEY, size=36, sequencer="00A1")]}
    response = client.post("/events/s3", json=aws, headers=auth)
    assert response.status_code == 202, response.text
    assert response.json()["accepted"] == 1
    # MinIO's webhook shape for the second object.
    minio = {
        "EventName": "s3:ObjectCreated:Put",
        "Key": f"{BUCKET}/{GONE}",
        "Records": [record("s3:ObjectCreated:Put", BUCKET, GONE, sequencer="00A2")],
    }
    assert client.post("/events/s3", json=minio, headers=auth).status_code == 202
    eventually(lambda: holdings(service, "h2") == {uri: (2,)}, what="the AWS event")
    eventually(lambda: holdings(service, "h3") == {gone_uri: (1,)}, what="the MinIO event")

    # The object is deleted; its removal comes through an SNS subscription's envelope.
    storage.delete(BUCKET, GONE)
    inner = {"Records": [record("ObjectRemoved:Delete", BUCKET, GONE, sequencer="00A3")]}
    envelope = {"Type": "Notification", "MessageId": "m1", "Message": json.dumps(inner)}
    assert client.post("/events/s3", json=envelope, headers=auth).status_code == 202
    eventually(lambda: holdings(service, "h3") == {}, what="the removal")
    assert holdings(service, "h1") == {uri: (1,)}

    # Outside the indexed prefixes: accepted, ignored and counted.
    outside = {"Records": [record("ObjectCreated:Put", BUCKET, "raw/x.jsonl")]}
    assert client.post("/events/s3", json=outside, headers=auth).status_code == 202
    eventually(lambda: service.store.counters().get("realtime_outside", 0) == 1, what="count")


def test_unauthenticated_oversized_and_malformed_posts_are_refused(
    settings: Settings, server: tuple[TestClient, dict[str, str]]
) -> None:
    client, auth = server
    service = ErasureIndexService(settings)
    event = {"Records": [record("ObjectCreated:Put", BUCKET, KEY)]}
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic !!"}):
        response = client.post("/events/s3", json=event, headers=headers)
        assert response.status_code == 401
        assert response.json()["error"]["type"] == "Unauthenticated"
    # An SNS subscription's https://user:<token>@host/events/s3 arrives as Basic auth.
    token = auth["Authorization"].removeprefix("Bearer ")
    basic = client.post("/events/s3", json={"Records": []}, auth=("sns", token))
    assert basic.status_code == 202

    big = b'{"Records": [' + b" " * MAX_BODY_BYTES + b"]}"
    response = client.post("/events/s3", content=big, headers=auth)
    assert response.status_code == 413
    assert response.json()["error"]["type"] == "PayloadTooLarge"
    # Without a Content-Length (chunked), the limit holds while reading.
    chunks = (b" " * 65536 for _ in range(MAX_BODY_BYTES // 65536 + 2))
    assert client.post("/events/s3", content=chunks, headers=auth).status_code == 413

    response = client.post("/events/s3", content=b"{not json", headers=auth)
    assert response.status_code == 400
    assert response.json()["reasons"][0].startswith("the body is not JSON")
    half = {
        "Records": [record("ObjectCreated:Put", BUCKET, KEY), {"eventName": "ObjectCreated:Put"}]
    }
    response = client.post("/events/s3", json=half, headers=auth)
    assert (response.status_code, response.json()["malformed"]) == (202, 1)
    letters = [d.reason for d in service.store.dead_letters() if d.source == "event"]
    assert any(r.startswith("the body is not JSON") for r in letters)
    assert any(r.startswith("the record has no s3.bucket.name") for r in letters)
    # The good record of the half-bad post was indexed all the same.
    storage_uri = load_storage(settings).uri(BUCKET, KEY)
    eventually(lambda: holdings(service, "h1") == {storage_uri: (1,)}, what="the good record")


def test_events_of_a_real_bucket_index_an_s3_lake(
    tmp_path: Path, s3_endpoint: str, isolated_aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")  # fmt: skip
    client.create_bucket(Bucket="events-lake")
    lake = {
        "root": "s3://events-lake/prefix",
        "s3_endpoint_url": s3_endpoint,
        "s3_region": "us-east-1",
        "s3_access_key_id": "testing",
        "s3_secret_access_key": "testing",
    }
    settings = lake_settings(tmp_path / "data", f"sqlite:///{tmp_path / 'index.db'}", lake=lake)
    # Written straight to the bucket, as any S3 client would: the key is the physical one.
    physical = f"prefix/{BUCKET}/{KEY}"
    client.put_object(Bucket="events-lake", Key=physical, Body=b'{"user_id": "s1"}\n')
    token = webhook_token(AccessControl(settings).secrets)
    service = ErasureIndexService(settings)
    with TestClient(create_app(settings)) as http:
        auth = {"Authorization": f"Bearer {token}"}
        created = {"Records": [record("ObjectCreated:Put", "events-lake", physical)]}
        assert http.post("/events/s3", json=created, headers=auth).status_code == 202
        uri = f"s3://events-lake/prefix/{BUCKET}/{KEY}"
        eventually(lambda: holdings(service, "s1") == {uri: (1,)}, what="the s3:// object")
        client.delete_object(Bucket="events-lake", Key=physical)
        removed = {"Records": [record("ObjectRemoved:Delete", "events-lake", physical)]}
        assert http.post("/events/s3", json=removed, headers=auth).status_code == 202
        eventually(lambda: holdings(service, "s1") == {}, what="the s3:// removal")


def test_a_rotated_token_replaces_the_old_one(
    settings: Settings, server: tuple[TestClient, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    client, old = server
    monkeypatch.setattr("lakeward.http.events.TOKEN_TTL", 0.0)  # no waiting for the re-read
    new = webhook_token(AccessControl(settings).secrets, rotate=True)
    empty = {"Records": []}
    assert client.post("/events/s3", json=empty, headers=old).status_code == 401
    bearer = {"Authorization": f"Bearer {new}"}
    assert client.post("/events/s3", json=empty, headers=bearer).status_code == 202
