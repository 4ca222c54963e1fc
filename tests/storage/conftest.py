"""Fixtures giving the same Storage API on a file:// lake and on an s3:// lake (moto)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from moto.server import ThreadedMotoServer
from storage_helpers import RawPut, Recorder, new_root_bucket, s3_client, s3_settings

from lakeward.config import Settings
from lakeward.storage import Storage, load_storage
from lakeward.storage.local import LocalStorage
from lakeward.storage.s3 import S3Storage


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """A moto S3 server on a free port of 127.0.0.1, for the whole session."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def isolated_aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # A developer's own AWS profile or endpoint must not leak into the tests.
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))


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
