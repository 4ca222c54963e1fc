"""Parquet rewrites keep the file's layout; Delta and Iceberg deletes leave no old files."""

from __future__ import annotations

import decimal
import hashlib
import io
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakeward.erasure.executors import Executors, Target
from lakeward.errors import ObjectChangedSincePlan
from lakeward.storage.local import LocalStorage

BUCKET = "lake"
GONE = "u-gone"
USERS = [GONE, "u-a", "u-b", "u-c"]


@pytest.fixture
def storage(tmp_path: Path) -> LocalStorage:
    store = LocalStorage((tmp_path / "lake").as_uri(), "us-east-1")
    store.ensure_bucket(BUCKET)
    return store


def table(n: int = 400) -> pa.Table:
    start = datetime(2024, 1, 1, tzinfo=UTC)
    moments = [start + timedelta(seconds=i, microseconds=i) for i in range(n)]
    schema = pa.schema(
        [
            pa.field("user_id", pa.string(), nullable=False),
            pa.field("stars", pa.int8()),
            pa.field("at_ms", pa.timestamp("ms", tz="UTC")),
            pa.field("at_us", pa.timestamp("us")),
            pa.field("at_ns", pa.timestamp("ns", tz="UTC")),
            pa.field("price", pa.decimal128(9, 2)),
            pa.field("big", pa.decimal128(38, 10)),
            pa.field(
                "business",
                pa.struct([("id", pa.string()), ("geo", pa.struct([("lat", pa.float64())]))]),
            ),
            pa.field("tags", pa.list_(pa.string())),
        ],
        metadata={b"origin": b"generator v3", b"owner": b"reviews"},
    )
    return pa.table(
        {
            "user_id": [USERS[i % 4] for i in range(n)],
            "stars": [i % 5 for i in range(n)],
            "at_ms": [m.replace(microsecond=0) for m in moments],
            "at_us": [m.replace(tzinfo=None) for m in moments],
            "at_ns": pa.array([int(m.timestamp() * 1e9) + 7 for m in moments], pa.int64()).cast(
                pa.timestamp("ns", tz="UTC")
            ),
            "price": [decimal.Decimal(i) / 100 for i in range(n)],
            "big": [decimal.Decimal(f"{i}.0123456789") for i in range(n)],
            "business": [{"id": f"b{i % 7}", "geo": {"lat": i / 3}} for i in range(n)],
            "tags": [[f"t{i % 3}"] * (i % 3) for i in range(n)],
        },
        schema=schema,
    )


def write(data: pa.Table, **options: Any) -> bytes:
    sink = io.BytesIO()
    pq.write_table(data, sink, **options)
    return sink.getvalue()


def footprint(data: bytes) -> dict[str, Any]:
    """Everything about a Parquet file's layout that a rewrite must keep."""
    meta = pq.ParquetFile(pa.BufferReader(data)).metadata
    columns = [meta.schema.column(i) for i in range(meta.num_columns)]
    chunks = [meta.row_group(0).column(i) for i in range(meta.num_columns)]
    return {
        "arrow": pq.ParquetFile(pa.BufferReader(data)).schema_arrow,
        "parquet_schema": str(meta.schema).split("\n", 1)[1],
        "physical": [(c.path, c.physical_type, str(c.logical_type)) for c in columns],
        "codecs": [(c.path_in_schema, c.compression) for c in chunks],
        "dictionary": [(c.path_in_schema, "RLE_DICTIONARY" in c.encodings) for c in chunks],
        "kv": {k: v for k, v in (meta.metadata or {}).items() if k != b"ARROW:schema"},
        "version": meta.format_version,
    }


CASES = {
    "snappy-v2.6": {"row_group_size": 100},
    "per-column codecs": {
        "row_group_size": 64,
        "compression": {"user_id": "zstd", "text": "gzip", "business.id": "brotli"},
        "use_dictionary": ["user_id"],
    },
    "int96 + decimals as integers + v1": {
        "row_group_size": 150,
        "use_deprecated_int96_timestamps": True,
        "store_decimal_as_integer": True,
        "version": "1.0",
        "compression": "gzip",
    },
    "no arrow schema": {"store_schema": False, "compression": "none"},
}


@pytest.mark.parametrize("options", CASES.values(), ids=CASES.keys())
def test_parquet_rewrite_keeps_schema_types_codecs_metadata_and_row_groups(
    storage: LocalStorage, options: dict[str, Any]
) -> None:
    source = table()
    raw = write(source, **options)
    storage.put(BUCKET, "reviews/part-0.parquet", raw)
    info = storage.stat(BUCKET, "reviews/part-0.parquet")
    target = Target("parquet", info.uri, BUCKET, info.key, info.etag, info.size)

    outcome = Executors(storage).purge(target, [GONE])

    after = storage.get(BUCKET, info.key)
    assert outcome.removed == 100 and outcome.action == "rewritten"
    assert footprint(after) == footprint(raw)
    before_groups = pq.ParquetFile(pa.BufferReader(raw)).metadata
    after_groups = pq.ParquetFile(pa.BufferReader(after)).metadata
    assert after_groups.num_row_groups == before_groups.num_row_groups
    start = 0
    for i in range(before_groups.num_row_groups):
        # Each group keeps exactly its rows of other users: one output group per source group.
        rows = before_groups.row_group(i).num_rows
        others = sum(1 for r in range(start, start + rows) if USERS[r % 4] != GONE)
        assert after_groups.row_group(i).num_rows == others
        start += rows
    kept = pq.read_table(pa.BufferReader(after))
    expected = pq.read_table(pa.BufferReader(raw)).filter(
        pa.compute.not_equal(source.column("user_id"), GONE)
    )
    assert kept.equals(expected)  # values, to the nanosecond and the last decimal digit


def test_parquet_ids_inside_a_struct(storage: LocalStorage) -> None:
    data = pa.table({"who": [{"id": u} for u in USERS * 3], "n": list(range(12))})
    storage.put(BUCKET, "nested.parquet", write(data))
    info = storage.stat(BUCKET, "nested.parquet")
    target = Target("parquet", info.uri, BUCKET, info.key, info.etag, id_columns=("$.who.id",))
    assert Executors(storage).purge(target, [GONE]).removed == 3
    assert pq.read_table(io.BytesIO(storage.get(BUCKET, info.key))).column("n").to_pylist() == [
        n for n in range(12) if n % 4
    ]


def test_parquet_changed_object_is_refused_and_left_as_it_is(storage: LocalStorage) -> None:
    raw = write(table())
    storage.put(BUCKET, "r.parquet", raw)
    info = storage.stat(BUCKET, "r.parquet")
    stale = Target("parquet", info.uri, BUCKET, info.key, info.etag, info.size)
    for newer in (write(table(40)), b"not parquet at all"):  # readable or not: a change
        storage.put(BUCKET, "r.parquet", newer)
        with pytest.raises(ObjectChangedSincePlan, match="changed since the report"):
            Executors(storage).purge(stale, [GONE])
        assert storage.get(BUCKET, "r.parquet") == newer
    storage.put(BUCKET, "r.parquet", raw)
    outcome = Executors(storage).purge(stale, [GONE])
    assert outcome.before_sha256 == hashlib.sha256(raw).hexdigest()
    assert outcome.after_sha256 == hashlib.sha256(storage.get(BUCKET, "r.parquet")).hexdigest()


def test_delta_delete_then_vacuum_leaves_no_old_file(storage: LocalStorage, tmp_path: Path) -> None:
    from deltalake import DeltaTable, write_deltalake

    location = tmp_path / "delta" / "reviews"
    data = pa.table({"user_id": USERS * 25, "n": list(range(100))})
    for start in range(0, 100, 25):
        write_deltalake(str(location), data.slice(start, 25), mode="append")
    files_before = {p for p in location.rglob("*.parquet")}
    target = Target("delta", location.as_uri())
    executors = Executors(storage)
    assert executors.count(target, [GONE]) == 25

    outcome = executors.purge(target, [GONE])

    assert outcome.removed == 25 and executors.count(target, [GONE]) == 0
    superseded = [r for r in outcome.retained if r["kind"] == "superseded file"]
    assert len(superseded) == 4 and all(r["state"] == "removed" for r in superseded)
    assert not any(p.exists() for p in files_before)
    assert DeltaTable(str(location)).to_pyarrow_table().num_rows == 75


def test_iceberg_delete_expire_and_orphans(storage: LocalStorage, tmp_path: Path) -> None:
    from pyiceberg.catalog.sql import SqlCatalog

    url = f"sqlite:///{tmp_path / 'iceberg.db'}"
    warehouse = tmp_path / "warehouse"
    warehouse.mkdir()
    catalog = SqlCatalog("lakeward", uri=url, warehouse=warehouse.as_uri())
    catalog.create_namespace("lake")
    data = pa.table({"user_id": USERS * 25, "n": pa.array(range(100), pa.int64())})
    table = catalog.create_table("lake.reviews", schema=data.schema)
    for start in range(0, 100, 50):
        table.append(data.slice(start, 50))
    files_before = {p for p in warehouse.rglob("*.parquet")}
    target = Target("iceberg", "lake.reviews", connection=url)
    executors = Executors(storage)

    outcome = executors.purge(target, [GONE])

    assert outcome.removed == 25 and executors.count(target, [GONE]) == 0
    reloaded = catalog.load_table("lake.reviews")
    assert len(reloaded.snapshots()) == 1
    assert reloaded.scan().to_arrow().num_rows == 75
    remaining = {p for p in warehouse.rglob("*.parquet")}
    old_with_user = [p for p in files_before if p not in remaining]
    assert old_with_user and all(not p.exists() for p in old_with_user)
    for path in remaining:  # no file left holds the user's rows
        assert GONE not in pq.read_table(path).column("user_id").to_pylist()
