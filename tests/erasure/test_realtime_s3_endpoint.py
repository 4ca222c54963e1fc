"""The erasure index follows objects written through the S3 endpoint in real time: an
``aws s3 cp``-style put of a reviews file is indexed, its delete removes it, as the
event-driven design of the architecture lakeward reproduces has it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from lakeward.access.control import AccessControl
from lakeward.config import Settings
from lakeward.erasure.service import ErasureIndexService
from lakeward.http import create_app
from lakeward.storage import load_storage
from tests.erasure.realtime_helpers import BUCKET, eventually, lake_settings
from tests.helpers import s3_client, serving

KEY = "gdpr/reviews/json/year=2024/month=11/day=28/reviews 1.jsonl"


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    settings = lake_settings(tmp_path / "data", f"sqlite:///{tmp_path / 'index.db'}")
    load_storage(settings).ensure_bucket(BUCKET)
    return settings


@pytest.fixture
def url(settings: Settings) -> Iterator[str]:
    with serving(create_app(settings), lifespan="on") as served:  # with the indexer
        yield served


def test_an_upload_over_s3_is_indexed_and_its_delete_unindexed(
    settings: Settings, url: str
) -> None:
    access = AccessControl(settings)
    access.principals.create_user("ingest")
    writes = {"Effect": "Allow", "Action": ["s3:PutObject", "s3:DeleteObject"], "Resource": "*"}
    policy = {"Version": "2012-10-17", "Statement": [writes]}
    access.principals.create_policy("LakeWrites", json.dumps(policy))
    access.principals.attach_user_policy("ingest", "LakeWrites")
    key_id, secret = access.principals.create_access_key("ingest")
    s3 = s3_client(url, key_id, secret)
    s3.put_object(Bucket=BUCKET, Key=KEY, Body=b'{"user_id": "u-17"}\n{"user_id": "u-42"}\n')
    service = ErasureIndexService(settings)
    uri = load_storage(settings).uri(BUCKET, KEY)

    def holdings(user: str) -> dict[str, tuple[int, ...]]:
        (found,) = service.find([user])
        return {h.location: h.positions for h in found.holdings}

    eventually(lambda: holdings("u-42") == {uri: (2,)}, what="the put to be indexed")
    s3.delete_object(Bucket=BUCKET, Key=KEY)
    eventually(lambda: holdings("u-42") == {}, what="the delete to be unindexed")
