"""``lakeward demo-data gdpr``'s generator: deterministic, and the same records in every format."""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import re
import sqlite3
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakeward.config import load_settings
from lakeward.erasure.demo import DemoReport, generate
from lakeward.storage import load_storage


def make(tmp_path: Path, name: str, seed: int, records: int = 1200) -> tuple[DemoReport, Path]:
    settings = load_settings(data_dir=tmp_path / name, env={})
    report, _ = generate(settings, load_storage(settings), records=records, seed=seed,
                         gzipped=True)  # fmt: skip
    return report, tmp_path / name / "lake" / "lakeward-data" / "gdpr"


def digests(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def lakes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[DemoReport, Path]]:
    tmp = tmp_path_factory.mktemp("demo")
    return {"a": make(tmp, "a", 1), "again": make(tmp, "again", 1), "other": make(tmp, "other", 2)}


def test_same_seed_same_bytes(lakes: dict[str, tuple[DemoReport, Path]]) -> None:
    first, again = digests(lakes["a"][1]), digests(lakes["again"][1])
    assert first == again
    assert len(first) > 30


def test_other_seed_other_data(lakes: dict[str, tuple[DemoReport, Path]]) -> None:
    first, other = digests(lakes["a"][1]), digests(lakes["other"][1])
    reviews = [k for k in first if k.startswith("reviews/")]
    assert reviews and all(first[k] != other.get(k) for k in reviews)
    assert {k for k in first if "clickstream" in k} != {k for k in other if "clickstream" in k}


def test_formats_hold_the_same_records(lakes: dict[str, tuple[DemoReport, Path]]) -> None:
    report, root = lakes["a"]
    parts = sorted(p.parent for p in (root / "reviews" / "jsonl").rglob("part-00000.jsonl"))
    assert len(parts) == 3  # at least three day partitions, even for a small lake
    assert all(re.search(r"year=\d{4}/month=\d{2}/day=\d{2}$", p.as_posix()) for p in parts)
    total = anonymous = multiline = 0
    for part in parts:
        rel = part.relative_to(root / "reviews" / "jsonl")
        lines = (part / "part-00000.jsonl").read_bytes().splitlines()
        records = [json.loads(line) for line in lines]
        gz = gzip.decompress((root / "reviews/jsonl-gz" / rel / "part-00000.jsonl.gz").read_bytes())
        assert gz.splitlines() == lines
        text = (root / "reviews/csv" / rel / "part-00000.csv").read_bytes()
        rows = list(csv.DictReader(io.StringIO(text.decode(), newline="")))
        table = pq.read_table(root / "reviews/parquet" / rel / "part-00000.parquet")
        assert len(records) == len(rows) == table.num_rows
        for record, row, pq_row in zip(records, rows, table.to_pylist(), strict=True):
            assert record.get("user_id", "") == row["user_id"] == (pq_row["user_id"] or "")
            assert record["review_id"] == row["review_id"] == pq_row["review_id"]
            assert record["text"] == row["text"] == pq_row["text"]
            assert record["votes"] == pq_row["votes"]
            assert str(pq_row["helpfulness"]) == row["helpfulness"]
            assert pq_row["date"].strftime("%Y-%m-%d %H:%M:%S") == record["date"] == row["date"]
        total += len(records)
        anonymous += sum("user_id" not in r for r in records)
        multiline += sum("\n" in r["text"] for r in rows)  # quoted newlines in the CSV
        ids = [r["user_id"] for r in records if "user_id" in r]
        assert all(len(i) == 22 for i in ids)
    assert total == report.records == 1200
    assert anonymous == report.records_without_id > 0
    assert multiline > 0


def test_parquet_types(lakes: dict[str, tuple[DemoReport, Path]]) -> None:
    _, root = lakes["a"]
    schema = pq.read_schema(next((root / "reviews" / "parquet").rglob("*.parquet")))
    assert schema.field("date").type == pa.timestamp("us")
    assert schema.field("helpfulness").type == pa.decimal128(5, 2)
    assert pa.types.is_struct(schema.field("votes").type)


def test_clickstream_media_and_tables(lakes: dict[str, tuple[DemoReport, Path]]) -> None:
    report, root = lakes["a"]
    names = [p.name for p in (root / "clickstream").iterdir()]
    assert "unattributed.csv" in names
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{22}-\d{8}T\d{6}\.csv", n) for n in names
               if n != "unattributed.csv")  # fmt: skip
    sidecars = list((root / "media").glob("*.meta.json"))
    assert sidecars and all(Path(str(s).removesuffix(".meta.json")).is_file() for s in sidecars)
    db = root.parent.parent.parent / "erasure" / "demo-app.db"
    with sqlite3.connect(db) as conn:
        profiles = conn.execute("SELECT count(*) FROM user_profiles").fetchone()[0]
        guests = conn.execute("SELECT count(*) FROM orders WHERE user_id IS NULL").fetchone()[0]
    assert report.relational_rows["user_profiles"] == profiles > 0 and guests > 0
