"""Shared by the real-time and batch tests: index databases, mappers, and a small lake.

The lake holds every object format the index knows, with the awkward cases
that make line numbers differ between readers: gzip, CSV records with quoted
newlines, blank lines, records without an id, ``\\r\\n`` line ends, and user ids
with quotes, unicode, path separators and SQL metacharacters.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import random
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from lakeward.config import ErasureDataset, ErasureSettings, Settings
from lakeward.erasure.index.store import IndexStore
from lakeward.storage import Storage

BUCKET = "lakeward-data"
ODD_IDS = ["o'brien\"x", "名前-ユーザー", "a/b\\c", "x'; DROP TABLE erasure_records; --", "%_*"]

DATASETS = [
    ErasureDataset(name="reviews_json", prefix=f"{BUCKET}/gdpr/reviews/json/", format="jsonl"),
    ErasureDataset(name="reviews_csv", prefix=f"{BUCKET}/gdpr/reviews/csv/", format="csv"),
    ErasureDataset(
        name="reviews_parquet",
        prefix=f"{BUCKET}/gdpr/reviews/parquet/",
        format="parquet",
        id_columns=["$.author.user_id"],
    ),
    ErasureDataset(name="clicks", prefix=f"{BUCKET}/gdpr/clicks/", format="filename"),
    ErasureDataset(name="media", prefix=f"{BUCKET}/gdpr/media/", format="sidecar"),
]


def index_url(db: str | Path) -> str:
    """The ``erasure.database_url`` of a place the ``db`` fixture gave: a SQLite file,
    or a schema of its own in PostgreSQL."""
    return f"sqlite:///{db}" if isinstance(db, Path) else db


def lake_settings(data_dir: Path, database_url: str | None, **lake: object) -> Settings:
    erasure = ErasureSettings(database_url=database_url, datasets=DATASETS)
    return Settings.model_validate({"data_dir": data_dir, "erasure": erasure, **lake})


def eventually(check: Callable[[], bool], timeout: float = 20.0, what: str = "") -> None:
    """Wait for a condition another thread (the watcher) makes true."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or check}")
        time.sleep(0.02)


# -- content ------------------------------------------------------------------


def users(rng: random.Random, count: int) -> list[str]:
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    return ["".join(rng.choice(alphabet) for _ in range(22)) for _ in range(count)] + ODD_IDS


def jsonl(rng: random.Random, ids: list[str], rows: int, crlf: bool = False) -> bytes:
    lines = []
    for n in range(rows):
        record: dict[str, object] = {"review_id": f"r{n}", "stars": rng.randint(1, 5)}
        if rng.random() < 0.95:
            record["user_id"] = rng.choice(ids)
        lines.append(json.dumps(record, ensure_ascii=rng.random() < 0.5))
        if rng.random() < 0.05:
            lines.append("")  # a blank line: counted in line numbers, not a record
    end = "\r\n" if crlf else "\n"
    return (end.join(lines) + end).encode()


def csv_bytes(rng: random.Random, ids: list[str], rows: int) -> bytes:
    out = io.StringIO(newline="")
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["review_id", "user_id", "text"])
    for n in range(rows):
        text = rng.choice(["fine", 'said "ok"', "two\nlines", "a, b", "three\nline\nreview"])
        user = rng.choice(ids) if rng.random() < 0.95 else ""
        writer.writerow([f"r{n}", user, text])
    return out.getvalue().encode()


def parquet_bytes(rng: random.Random, ids: list[str], rows: int) -> bytes:
    authors = [{"user_id": rng.choice(ids) if rng.random() < 0.95 else None, "name": "n"}
               for _ in range(rows)]  # fmt: skip
    table = pa.table({"review_id": [f"r{n}" for n in range(rows)], "author": authors})
    sink = io.BytesIO()
    pq.write_table(table, sink, row_group_size=max(1, rows // 3))
    return sink.getvalue()


def object_for(rng: random.Random, ids: list[str], key: str) -> bytes:
    """Content fitting the dataset of ``key``."""
    rows = rng.randint(5, 40)
    if "/json/" in key:
        data = jsonl(rng, ids, rows, crlf=key.endswith("crlf.jsonl"))
        return gzip.compress(data) if key.endswith(".gz") else data
    if "/csv/" in key:
        data = csv_bytes(rng, ids, rows)
        return gzip.compress(data) if key.endswith(".gz") else data
    if "/parquet/" in key:
        return parquet_bytes(rng, ids, rows)
    if "/media/" in key and key.endswith(".meta.json"):
        return json.dumps({"user_ids": rng.sample(ids, 2)}).encode()
    return b"clicks\n"


def lake_keys(rng: random.Random, ids: list[str], per_format: int) -> list[str]:
    keys = []
    for n in range(per_format):
        day = f"year=2024/month=01/day={n % 28 + 1:02d}"
        keys += [
            f"gdpr/reviews/json/{day}/part-{n}.jsonl",
            f"gdpr/reviews/json/{day}/part-{n}.jsonl.gz",
            f"gdpr/reviews/json/{day}/part-{n}-crlf.jsonl",
            f"gdpr/reviews/csv/{day}/part-{n}.csv",
            f"gdpr/reviews/csv/{day}/part-{n}.csv.gz",
            f"gdpr/reviews/parquet/{day}/part-{n}.parquet",
            f"gdpr/clicks/{rng.choice(ids[: -len(ODD_IDS)])}-{1700000000 + n}.csv",
            f"gdpr/media/clip-{n}.mp4.meta.json",
        ]
    return keys


def write_lake(storage: Storage, seed: int = 7, per_format: int = 3) -> list[str]:
    """A small lake with every format; returns the keys written."""
    rng = random.Random(seed)
    ids = users(rng, 30)
    keys = lake_keys(rng, ids, per_format)
    for key in keys:
        storage.put(BUCKET, key, object_for(rng, ids, key))
    return keys


def snapshot(store: IndexStore) -> dict[str, object]:
    """Everything the index says, comparable between two stores."""
    state: dict[str, object] = {}
    for row in store.objects():
        entries, locations = store.entries_for_object(row.uri)
        state[row.uri] = (row.dataset, row.etag, row.records, row.records_without_id,
                          sorted(entries), sorted(locations, key=repr))  # fmt: skip
    return state
