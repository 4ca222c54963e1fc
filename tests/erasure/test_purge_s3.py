"""The purge executors on an s3:// lake (moto's standalone server): same results, and a
conditional write that refuses an object changed since the plan."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakeward.erasure.executors import Executors, Target
from lakeward.errors import ObjectChangedSincePlan
from lakeward.storage import Storage, load_storage
from tests.storage.storage_helpers import new_root_bucket, s3_settings

BUCKET = "lakeward-data"
GONE = "u-gone"
USERS = [GONE, "u-a", "u-b", "u-c"]


@pytest.fixture
def storage(s3_endpoint: str, tmp_path: Path, isolated_aws: None) -> Storage:
    root = f"s3://{new_root_bucket(s3_endpoint)}/lake"
    return load_storage(s3_settings(tmp_path, s3_endpoint, root))


def target(storage: Storage, layer: str, key: str, **extra: object) -> Target:
    info = storage.stat(BUCKET, key)
    return Target(layer, info.uri, BUCKET, key, info.etag, info.size, **extra)  # type: ignore[arg-type]


def test_every_object_executor_on_s3(storage: Storage) -> None:
    lines = [json.dumps({"user_id": USERS[i % 4], "n": i}).encode() for i in range(20)]
    plain = b"\n".join(lines) + b"\n"
    storage.put(BUCKET, "r/a.jsonl.gz", gzip.compress(plain))
    storage.put(BUCKET, "r/a.csv", b"user_id,n\n" + b"".join(
        f"{USERS[i % 4]},{i}\n".encode() for i in range(20)))  # fmt: skip
    sink = io.BytesIO()
    pq.write_table(pa.table({"user_id": USERS * 5, "n": list(range(20))}), sink, compression="zstd")
    storage.put(BUCKET, "r/a.parquet", sink.getvalue())
    storage.put(BUCKET, f"clicks/{GONE}-20240101T000000.csv", b"ts\n1\n")
    executors = Executors(storage)
    plan = [
        target(storage, "jsonl", "r/a.jsonl.gz", positions=(1, 5, 9, 13, 17), compression="gzip"),
        target(storage, "csv", "r/a.csv"),
        target(storage, "parquet", "r/a.parquet"),
        target(storage, "filename", f"clicks/{GONE}-20240101T000000.csv"),
    ]
    outcomes = {t.key: o for t, o in executors.run(plan, [GONE], workers=2)}

    assert not any(isinstance(o, Exception) for o in outcomes.values()), outcomes
    after = gzip.decompress(storage.get(BUCKET, "r/a.jsonl.gz")).split(b"\n")
    assert after[:-1] == [b"{}" if i % 4 == 0 else line for i, line in enumerate(lines)]
    assert GONE.encode() not in storage.get(BUCKET, "r/a.csv")
    table = pq.read_table(io.BytesIO(storage.get(BUCKET, "r/a.parquet")))
    assert table.column("user_id").to_pylist() == [u for u in USERS * 5 if u != GONE]
    assert not storage.exists(BUCKET, f"clicks/{GONE}-20240101T000000.csv")
    assert all(executors.count(t, [GONE]) == 0 for t in plan)


def test_an_object_written_after_the_plan_is_not_overwritten_on_s3(storage: Storage) -> None:
    storage.put(BUCKET, "r/b.csv", b"user_id,n\nu-gone,1\nu-a,2\n")
    planned = target(storage, "csv", "r/b.csv")
    storage.put(BUCKET, "r/b.csv", b"user_id,n\nu-gone,1\nu-a,2\nu-b,3\n")  # a newer write
    with pytest.raises(ObjectChangedSincePlan):
        Executors(storage).purge(planned, [GONE])
    assert storage.get(BUCKET, "r/b.csv") == b"user_id,n\nu-gone,1\nu-a,2\nu-b,3\n"


def test_an_object_uploaded_in_parts_is_purged(storage: Storage, s3_endpoint: str) -> None:
    from lakeward.storage.s3 import S3Storage
    from tests.storage.storage_helpers import s3_client

    assert isinstance(storage, S3Storage)
    lines = [json.dumps({"user_id": USERS[i % 4], "pad": "x" * 200, "n": i}).encode()
             for i in range(30_000)]  # fmt: skip
    data = b"\n".join(lines) + b"\n"
    client = s3_client(s3_endpoint)
    key = f"{storage.base_prefix}{BUCKET}/r/big.jsonl"
    upload = client.create_multipart_upload(Bucket=storage.root_bucket, Key=key)
    part = 5 * 1024 * 1024
    parts = []
    for number, start in enumerate(range(0, len(data), part), 1):
        done = client.upload_part(
            Bucket=storage.root_bucket,
            Key=key,
            PartNumber=number,
            UploadId=upload["UploadId"],
            Body=data[start : start + part],
        )
        parts.append({"PartNumber": number, "ETag": done["ETag"]})  # fmt: skip
    client.complete_multipart_upload(Bucket=storage.root_bucket, Key=key,
                                     UploadId=upload["UploadId"],
                                     MultipartUpload={"Parts": parts})  # fmt: skip
    planned = target(storage, "jsonl", "r/big.jsonl", positions=(1, 5, 9))
    assert "-" in (planned.etag or "")  # not an MD5: the eTag of a multipart upload

    outcome = Executors(storage).purge(planned, [GONE])

    after = storage.get(BUCKET, "r/big.jsonl").split(b"\n")
    assert outcome.removed == 3 and after[:12:4] == [b"{}", b"{}", b"{}"]
    assert after[1:4] == lines[1:4] and after[12] == lines[12]
