"""What is particular to each backend: atomic files on file://, the layout and errors on s3://."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from botocore.config import Config
from storage_helpers import BUCKET, failing_stream, new_root_bucket, s3_client, s3_settings

from lakeward.config import LakeSettings, Settings
from lakeward.errors import ConfigError, ObjectNotFound, StorageError
from lakeward.storage import load_storage, s3
from lakeward.storage.base import TEMP_PREFIX
from lakeward.storage.local import LocalStorage
from lakeward.storage.s3 import S3Storage


@pytest.fixture
def local(tmp_path: Path) -> LocalStorage:
    storage = load_storage(Settings(data_dir=tmp_path))
    assert isinstance(storage, LocalStorage)
    return storage


def all_files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_default_lake_is_a_directory_of_the_data_dir(tmp_path: Path, local: LocalStorage) -> None:
    assert local.root == (tmp_path / "lake").resolve().as_uri()
    local.put(BUCKET, "raw/a.csv", b"a")
    assert (tmp_path / "lake" / BUCKET / "raw" / "a.csv").read_bytes() == b"a"


@pytest.mark.parametrize("error", [OSError(5, "Input/output error"), RuntimeError("boom")])
def test_failed_write_keeps_the_old_object_and_leaves_no_temp_file(
    local: LocalStorage, error: BaseException
) -> None:
    local.put(BUCKET, "t/obj", b"old content")
    # Fail after more than one chunk, so that part of the data was written.
    with pytest.raises(StorageError if isinstance(error, OSError) else RuntimeError):
        local.put(BUCKET, "t/obj", failing_stream(1536 * 1024, error))
    with pytest.raises(StorageError if isinstance(error, OSError) else RuntimeError):
        local.put(BUCKET, "t/new/deeper/obj", failing_stream(1536 * 1024, error))

    assert local.get(BUCKET, "t/obj") == b"old content"
    assert all_files(local.base) == [f"{BUCKET}/t/obj"]
    # The directories made for the failed write are gone too.
    assert not (local.base / BUCKET / "t" / "new").exists()


def test_temporary_files_are_invisible(local: LocalStorage) -> None:
    local.put(BUCKET, "d/real", b"r")
    (local.base / BUCKET / "d" / f"{TEMP_PREFIX}abc").write_bytes(b"in flight")
    assert [i.key for i in local.list(BUCKET)] == ["d/real"]
    assert local.delete_prefix(BUCKET, "d/") == 1


def test_delete_prunes_empty_directories_up_to_the_bucket(local: LocalStorage) -> None:
    local.put(BUCKET, "a/b/c/one", b"1")
    local.put(BUCKET, "a/two", b"2")
    local.delete(BUCKET, "a/b/c/one")
    assert not (local.base / BUCKET / "a" / "b").exists()
    assert (local.base / BUCKET / "a" / "two").is_file()
    local.delete_prefix(BUCKET, "a/")
    assert (local.base / BUCKET).is_dir()
    assert list((local.base / BUCKET).iterdir()) == []


def test_stat_computes_the_md5_of_files_written_elsewhere(local: LocalStorage) -> None:
    data = os.urandom(3 * 1024 * 1024 + 7)
    path = local.base / BUCKET / "spark" / "part-0000.parquet"
    path.parent.mkdir(parents=True)
    path.write_bytes(data)
    info = local.stat(BUCKET, "spark/part-0000.parquet")
    assert info.etag == hashlib.md5(data).hexdigest()
    assert info.size == len(data)


def test_an_object_cannot_also_be_a_prefix_on_files(local: LocalStorage) -> None:
    local.put(BUCKET, "a/b", b"object")
    with pytest.raises(StorageError, match="a/b is an object, so it cannot also be a prefix"):
        local.put(BUCKET, "a/b/c", b"x")
    with pytest.raises(StorageError, match="there are objects under a/"):
        local.put(BUCKET, "a", b"x")
    with pytest.raises(ObjectNotFound):
        local.get(BUCKET, "a/b/c")
    assert all_files(local.base) == [f"{BUCKET}/a/b"]


def test_file_root_must_be_absolute_and_local() -> None:
    with pytest.raises(ConfigError, match="not a local file:// URI"):
        LocalStorage("file://otherhost/lake", "us-east-1")


@pytest.mark.usefixtures("isolated_aws")
def test_s3_layout_and_metadata(tmp_path: Path, s3_endpoint: str) -> None:
    root_bucket = new_root_bucket(s3_endpoint)
    storage = load_storage(s3_settings(tmp_path, s3_endpoint, f"s3://{root_bucket}/lake/v1/"))
    assert isinstance(storage, S3Storage)
    assert storage.uri(BUCKET, "raw/x") == f"s3://{root_bucket}/lake/v1/{BUCKET}/raw/x"

    storage.put(BUCKET, "raw/x", b"payload")
    head = s3_client(s3_endpoint).head_object(Bucket=root_bucket, Key=f"lake/v1/{BUCKET}/raw/x")
    assert head["Metadata"]["sha256"] == hashlib.sha256(b"payload").hexdigest()
    assert storage.stat(BUCKET, "raw/x").sha256 == hashlib.sha256(b"payload").hexdigest()


@pytest.mark.usefixtures("isolated_aws")
def test_s3_lake_without_prefix(tmp_path: Path, s3_endpoint: str) -> None:
    root_bucket = new_root_bucket(s3_endpoint)
    storage = load_storage(s3_settings(tmp_path, s3_endpoint, f"s3://{root_bucket}"))
    storage.put(BUCKET, "k", b"v")
    keys = s3_client(s3_endpoint).list_objects_v2(Bucket=root_bucket)["Contents"]
    assert [k["Key"] for k in keys] == [f"{BUCKET}/k"]
    assert [i.key for i in storage.list(BUCKET)] == ["k"]


@pytest.mark.usefixtures("isolated_aws")
def test_s3_missing_root_bucket_is_a_plain_error_until_ensured(
    tmp_path: Path, s3_endpoint: str
) -> None:
    storage = load_storage(s3_settings(tmp_path, s3_endpoint, "s3://lake-not-created-yet/x"))
    with pytest.raises(StorageError) as caught:
        storage.put(BUCKET, "k", b"v")
    assert str(caught.value) == (
        f"could not write s3://lake-not-created-yet/x/{BUCKET}/k: "
        "the bucket lake-not-created-yet does not exist"
    )
    with pytest.raises(StorageError, match="does not exist"):
        list(storage.list(BUCKET))
    storage.ensure_bucket(BUCKET)
    storage.ensure_bucket(BUCKET)
    storage.put(BUCKET, "k", b"v")
    assert storage.get(BUCKET, "k") == b"v"


@pytest.mark.usefixtures("isolated_aws")
def test_s3_unreachable_endpoint_is_a_plain_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No retries: they would only make the test slow.
    monkeypatch.setattr(
        s3, "_client_config", lambda path_style: Config(retries={"max_attempts": 1})
    )
    # Port 9 (discard) on loopback refuses connections at once.
    lake = LakeSettings(
        root="s3://lake/x",
        s3_endpoint_url="http://127.0.0.1:9",
        s3_access_key_id="k",
        s3_secret_access_key="s",
    )
    storage = S3Storage.from_settings(Settings(data_dir=tmp_path, lake=lake))
    with pytest.raises(StorageError, match="cannot reach the S3 endpoint http://127.0.0.1:9"):
        storage.get(BUCKET, "k")


def test_s3_settings_are_checked() -> None:
    with pytest.raises(ConfigError, match="set both or neither"):
        S3Storage("s3://lake", access_key_id="only-the-id")
    with pytest.raises(ConfigError, match=r"must be s3://<bucket>\[/<prefix>\]"):
        S3Storage("s3:///no-bucket")
