"""The behaviour every lake backend must share, run on file:// and on s3:// (moto)."""

from __future__ import annotations

import hashlib
import io
import os
from datetime import UTC, datetime, timedelta

import pytest
from storage_helpers import BUCKET, RawPut, Recorder, failing_stream

from lakeward.errors import InvalidKey, ObjectNotFound, StorageError
from lakeward.storage import Storage


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def test_put_get_round_trip_of_bytes_and_streams(storage: Storage) -> None:
    small = b"country,date,confirmed\nItaly,2020-03-01,1694\n"
    big = os.urandom(2 * 1024 * 1024 + 123)  # more than one 1 MiB chunk

    info = storage.put(BUCKET, "raw/small.csv", small)
    assert storage.get(BUCKET, "raw/small.csv") == small
    assert info.sha256 == hashlib.sha256(small).hexdigest()
    assert info.etag == md5(small)
    assert info.size == len(small)
    assert (
        info.uri == storage.uri(BUCKET, "raw/small.csv") == f"{storage.root}/{BUCKET}/raw/small.csv"
    )

    info = storage.put(BUCKET, "raw/big.bin", io.BytesIO(big))
    assert info.sha256 == hashlib.sha256(big).hexdigest()
    assert info.size == len(big)
    with storage.open(BUCKET, "raw/big.bin") as stream:
        assert stream.read(10) == big[:10]
        assert stream.read() == big[10:]

    assert storage.put(BUCKET, "empty", b"").size == 0
    assert storage.get(BUCKET, "empty") == b""


def test_put_replaces_an_object(storage: Storage) -> None:
    storage.put(BUCKET, "k", b"old")
    storage.put(BUCKET, "k", b"new content")
    assert storage.get(BUCKET, "k") == b"new content"
    assert storage.stat(BUCKET, "k").size == len(b"new content")


def test_metadata_is_kept_with_the_object_and_replaced_with_it(storage: Storage) -> None:
    written = {
        "Content-Type": "text/csv",
        "Content-Encoding": "gzip",
        "Cache-Control": "no-cache",
        "Expires": "Thu, 01 Dec 2044 16:00:00 GMT",
        "x-amz-meta-source": "jhu",
    }
    storage.put(BUCKET, "meta/a.csv", b"a,b\n", written)
    assert storage.metadata(BUCKET, "meta/a.csv") == written
    # A rewrite that must match the object's eTag (an erasure's) keeps its metadata.
    storage.put_if_match(BUCKET, "meta/a.csv", b"a\n", storage.stat(BUCKET, "meta/a.csv").etag)
    assert storage.metadata(BUCKET, "meta/a.csv") == written
    # A plain put replaces the object whole: metadata included.
    storage.put(BUCKET, "meta/a.csv", b"new")
    assert storage.metadata(BUCKET, "meta/a.csv") == {}
    with pytest.raises(ObjectNotFound):
        storage.metadata(BUCKET, "meta/missing")


def test_stat_fields(storage: Storage) -> None:
    data = b"some bytes " * 1000
    written = storage.put(BUCKET, "dir/obj.txt", data)
    info = storage.stat(BUCKET, "dir/obj.txt")

    assert (info.bucket, info.key, info.size) == (BUCKET, "dir/obj.txt", len(data))
    assert info.etag == md5(data) == written.etag
    assert info.uri == storage.uri(BUCKET, "dir/obj.txt")
    assert info.last_modified.utcoffset() == timedelta(0)
    assert abs(info.last_modified - datetime.now(UTC)) < timedelta(minutes=5)
    # S3 keeps the SHA-256 as metadata; the file backend does not store it.
    assert info.sha256 in (None, hashlib.sha256(data).hexdigest())
    assert storage.exists(BUCKET, "dir/obj.txt")
    assert not storage.exists(BUCKET, "dir/other.txt")
    assert not storage.exists(BUCKET, "dir")  # a prefix is not an object


def test_list_is_recursive_sorted_and_prefix_filtered(storage: Storage) -> None:
    keys = ["b/2", "a/1", "a-b", "a/b/c", "ab", "c d/e=f", "a/b/a"]
    for key in keys:
        storage.put(BUCKET, key, key.encode())

    listed = list(storage.list(BUCKET))
    assert [i.key for i in listed] == sorted(keys)
    # "a-b" sorts before "a/1": S3 orders whole keys, not directories first.
    assert [i.key for i in listed][:3] == ["a-b", "a/1", "a/b/a"]
    for info in listed:
        assert info.size == len(info.key.encode())
        assert info.etag == md5(info.key.encode())
        assert info.bucket == BUCKET
        assert info.uri == storage.uri(BUCKET, info.key)

    assert [i.key for i in storage.list(BUCKET, "a/")] == ["a/1", "a/b/a", "a/b/c"]
    assert [i.key for i in storage.list(BUCKET, "a")] == ["a-b", "a/1", "a/b/a", "a/b/c", "ab"]
    assert [i.key for i in storage.list(BUCKET, "a/b/")] == ["a/b/a", "a/b/c"]
    assert [i.key for i in storage.list(BUCKET, "c d/")] == ["c d/e=f"]
    assert list(storage.list(BUCKET, "zzz/")) == []
    assert list(storage.list("lakeward-empty")) == []


def test_delete_then_reads_name_the_missing_uri(storage: Storage) -> None:
    storage.put(BUCKET, "raw/gone.csv", b"x")
    storage.delete(BUCKET, "raw/gone.csv")
    uri = storage.uri(BUCKET, "raw/gone.csv")

    assert not storage.exists(BUCKET, "raw/gone.csv")
    for read in (storage.get, storage.stat, storage.open, storage.delete):
        with pytest.raises(ObjectNotFound) as caught:
            read(BUCKET, "raw/gone.csv")
        assert uri in str(caught.value)
    assert list(storage.list(BUCKET)) == []


def test_delete_prefix(storage: Storage) -> None:
    for key in ("t/p=1/a", "t/p=1/b", "t/p=2/a", "t2/a", "u"):
        storage.put(BUCKET, key, b"x")
    assert storage.delete_prefix(BUCKET, "t/p=1/") == 2
    assert [i.key for i in storage.list(BUCKET)] == ["t/p=2/a", "t2/a", "u"]
    assert storage.delete_prefix(BUCKET, "t/") == 1
    assert storage.delete_prefix(BUCKET, "nothing/") == 0
    assert storage.delete_prefix(BUCKET, "") == 2
    assert list(storage.list(BUCKET)) == []


def test_failed_put_leaves_no_object(storage: Storage) -> None:
    with pytest.raises(StorageError, match="could not read the data to write"):
        storage.put(BUCKET, "new/obj", failing_stream(1500 * 1024, OSError(5, "I/O error")))
    assert not storage.exists(BUCKET, "new/obj")
    assert list(storage.list(BUCKET)) == []


def test_announce_reports_objects_written_behind_its_back(
    storage: Storage, raw_put: RawPut, recorder: Recorder
) -> None:
    raw_put(BUCKET, "tables/t/part-0001.parquet", b"one")
    raw_put(BUCKET, "tables/t/part-0000.parquet", b"zero")
    raw_put(BUCKET, "tables/other/part-0000.parquet", b"not announced")

    assert storage.announce(BUCKET, "tables/t/") == 2
    records = recorder.records
    assert [r["eventName"] for r in records] == ["ObjectCreated:Put"] * 2
    objects = [r["s3"]["object"] for r in records]
    assert [o["key"] for o in objects] == [
        "tables/t/part-0000.parquet",
        "tables/t/part-0001.parquet",
    ]
    assert [o["size"] for o in objects] == [4, 3]
    assert [o["eTag"] for o in objects] == [md5(b"zero"), md5(b"one")]
    assert objects[0]["sequencer"] < objects[1]["sequencer"]


BAD_KEYS = {
    "": "the key is empty",
    "/abs/key": "must not start with '/'",
    "a/../b": "'..' segment",
    "..": "'..' segment",
    "./a": "'.' or '..' segment",
    "a//b": "empty segment",
    "dir/": "must not end with '/'",
    "x\x00y": "control characters",
    "t/.lakeward-tmp-1": "reserved",
    "k" * 1025: "longer than 1024 bytes",
}


@pytest.mark.parametrize("key", list(BAD_KEYS), ids=lambda k: repr(k[:12]))
def test_invalid_keys_are_refused_clearly(storage: Storage, key: str) -> None:
    for call in (
        lambda: storage.put(BUCKET, key, b"x"),
        lambda: storage.get(BUCKET, key),
        lambda: storage.delete(BUCKET, key),
    ):
        with pytest.raises(InvalidKey, match="invalid object key") as caught:
            call()
        assert BAD_KEYS[key] in str(caught.value)
        # A caller's mistake: a ValueError too, and an HTTP 400.
        assert isinstance(caught.value, ValueError)
        assert caught.value.http_status == 400


def test_invalid_bucket_and_prefix_are_refused(storage: Storage) -> None:
    with pytest.raises(InvalidKey, match="invalid bucket name 'Bad_Bucket'"):
        storage.put("Bad_Bucket", "k", b"x")
    with pytest.raises(InvalidKey, match="invalid key prefix '../up'"):
        list(storage.list(BUCKET, "../up"))
    with pytest.raises(InvalidKey, match="invalid key prefix"):
        storage.delete_prefix(BUCKET, "/abs")


def test_put_refuses_text(storage: Storage) -> None:
    with pytest.raises(TypeError, match="bytes or a binary stream"):
        storage.put(BUCKET, "k", "text")  # type: ignore[arg-type]
    assert not storage.exists(BUCKET, "k")


def test_ensure_bucket_is_idempotent(storage: Storage) -> None:
    storage.ensure_bucket("lakeward-new")
    storage.ensure_bucket("lakeward-new")
    storage.put("lakeward-new", "k", b"x")
    assert storage.get("lakeward-new", "k") == b"x"


def test_buckets_are_the_lakes_own_whatever_holds_them(storage: Storage) -> None:
    assert storage.buckets() == []
    storage.put("zeta-bucket", "a/b.txt", b"1")
    storage.put("alpha-bucket", "c.txt", b"2")
    assert storage.buckets() == ["alpha-bucket", "zeta-bucket"]
