"""Fixtures giving the same Storage API on a file:// lake and on an s3:// lake (moto)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from storage_helpers import RawPut, Recorder, new_root_bucket, s3_client, s3_settings

from lakeward.config import Settings
from lakeward.storage import Storage, load_storage
from lakeward.storage.local import LocalStorage
from lakeward.storage.s3 import S3Storage


@pytest.fixture(params=["file", "s3"])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Storage:
    if request.param == "file":
        return load_storage(Settings(data_dir=tmp_path))
    request.getfixturevalue("isolated_aws")
    endpoint: str = request.getfixturevalue("s3_endpoint")
    root_bucket = new_root_bucket(endpoint)
    return load_storage(s3_settings(tmp_path, endpoint, f"s3://{root_bucket}/lake"))


@pytest.fixture
def raw_put(storage: Storage, request: pytest.FixtureRequest) -> RawPut:
    """Write an object behind the storage layer's back, as Spark does."""
    if isinstance(storage, LocalStorage):
        base = storage.base

        def put_file(bucket: str, key: str, data: bytes) -> None:
            path = base / bucket / key
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)

        return put_file

    assert isinstance(storage, S3Storage)
    client = s3_client(request.getfixturevalue("s3_endpoint"))

    def put_object(bucket: str, key: str, data: bytes) -> None:
        client.put_object(
            Bucket=storage.root_bucket, Key=f"{storage.base_prefix}{bucket}/{key}", Body=data
        )

    return put_object


@pytest.fixture
def recorder(storage: Storage) -> Iterator[Recorder]:
    listener = Recorder()
    unsubscribe = storage.subscribe(listener)
    yield listener
    unsubscribe()
