"""Purge executors on a real file:// lake: other users' data byte-identical, the ids' gone."""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import threading
from pathlib import Path

import pytest
import sqlalchemy as sa

from lakeward.erasure.executors import Executors, Target
from lakeward.erasure.indexers import csv_records
from lakeward.errors import ObjectChangedSincePlan
from lakeward.storage.local import LocalStorage

BUCKET = "lake"
GONE = "u-gone"
OTHERS = ["u-a", "u-b", "u-c"]


@pytest.fixture
def storage(tmp_path: Path) -> LocalStorage:
    store = LocalStorage((tmp_path / "lake").as_uri(), "us-east-1")
    store.ensure_bucket(BUCKET)
    return store


def reviews(n: int) -> list[dict[str, object]]:
    users = [GONE, *OTHERS]
    return [
        {"user_id": users[i % 4], "review_id": f"r{i}", "stars": i % 5, "text": f"nice ✓ {i}"}
        for i in range(n)
    ]


def jsonl(records: list[dict[str, object]]) -> bytes:
    return b"".join(json.dumps(r, ensure_ascii=False).encode() + b"\n" for r in records)


def target_of(storage: LocalStorage, layer: str, key: str, **extra: object) -> Target:
    info = storage.stat(BUCKET, key)
    return Target(layer, info.uri, BUCKET, key, info.etag, info.size, **extra)  # type: ignore[arg-type]


@pytest.mark.parametrize("gz", [False, True])
def test_json_lines_become_placeholders_and_other_lines_stay_identical(
    storage: LocalStorage, gz: bool
) -> None:
    plain = jsonl(reviews(40))
    key = "reviews/part-0.jsonl" + (".gz" if gz else "")
    storage.put(BUCKET, key, gzip.compress(plain) if gz else plain)
    lines = plain.split(b"\n")
    gone = [n for n, line in enumerate(lines, 1) if line and json.loads(line)["user_id"] == GONE]
    target = target_of(
        storage, "jsonl", key, positions=tuple(gone), compression="gzip" if gz else None
    )

    outcome = Executors(storage).purge(target, [GONE])

    after = storage.get(BUCKET, key)
    after_lines = (gzip.decompress(after) if gz else after).split(b"\n")
    assert outcome.action == "rewritten" and outcome.removed == len(gone) == 10
    assert len(after_lines) == len(lines)
    for number, (old, new) in enumerate(zip(lines, after_lines, strict=True), 1):
        assert new == (b"{}" if number in gone else old)
    assert outcome.after_etag == hashlib.md5(after).hexdigest()
    assert Executors(storage).count(target, [GONE]) == 0


def test_json_lines_refuse_a_position_holding_another_user(storage: LocalStorage) -> None:
    storage.put(BUCKET, "r.jsonl", jsonl(reviews(8)))
    before = storage.get(BUCKET, "r.jsonl")
    target = target_of(storage, "jsonl", "r.jsonl", positions=(1, 2))  # line 2 is u-a's
    with pytest.raises(ObjectChangedSincePlan, match="line 2"):
        Executors(storage).purge(target, [GONE])
    assert storage.get(BUCKET, "r.jsonl") == before


def test_a_changed_object_is_never_overwritten_and_is_replanned(storage: LocalStorage) -> None:
    storage.put(BUCKET, "r.jsonl", jsonl(reviews(8)))
    stale = target_of(storage, "jsonl", "r.jsonl", positions=(1, 5))
    newer = jsonl(reviews(12))  # a writer replaced the object after the report
    storage.put(BUCKET, "r.jsonl", newer)
    executors = Executors(storage)
    with pytest.raises(ObjectChangedSincePlan):
        executors.purge(stale, [GONE])
    assert storage.get(BUCKET, "r.jsonl") == newer

    def replan(t: Target) -> Target:
        fresh = storage.stat(t.bucket, t.key)
        return Target(t.layer, t.uri, t.bucket, t.key, fresh.etag, fresh.size)

    [(_, outcome)] = list(executors.run([stale], [GONE], replan=replan))
    assert not isinstance(outcome, Exception)
    assert outcome.removed == 3 and "re-planned" in outcome.note
    assert executors.count(stale, [GONE]) == 0


def test_a_second_run_over_a_purged_object_changes_nothing(storage: LocalStorage) -> None:
    storage.put(BUCKET, "r.jsonl", jsonl(reviews(8)))
    executors = Executors(storage)
    executors.purge(target_of(storage, "jsonl", "r.jsonl", positions=(1, 5)), [GONE])
    purged = storage.get(BUCKET, "r.jsonl")
    again = executors.purge(target_of(storage, "jsonl", "r.jsonl", positions=(1, 5)), [GONE])
    assert again.action == "unchanged" and storage.get(BUCKET, "r.jsonl") == purged


def test_csv_records_removed_others_byte_identical(storage: LocalStorage) -> None:
    header = "user_id,review_id,text\r\n"
    rows = [
        f'{u},r{i},"line one\r\nline ""two"", {i}"\r\n' if i % 3 == 0 else f"{u},r{i},plain {i}\r\n"
        for i, u in enumerate([GONE, *OTHERS] * 5)
    ]
    storage.put(BUCKET, "r.csv", (header + "".join(rows)).encode())
    target = target_of(storage, "csv", "r.csv")

    outcome = Executors(storage).purge(target, [GONE])

    after = storage.get(BUCKET, "r.csv").decode()
    kept = [r for r in rows if not r.startswith(GONE + ",")]
    assert after == header + "".join(kept)
    assert outcome.removed == 5
    assert all(rec["user_id"] != GONE for _, rec in csv_records(after.encode()))
    parsed = list(csv.DictReader(io.StringIO(after, newline="")))
    assert len(parsed) == 15


def test_file_name_objects_are_deleted_only_when_unchanged(storage: LocalStorage) -> None:
    storage.put(BUCKET, f"clicks/{GONE}-1700000000.csv", b"a,b\n1,2\n")
    target = target_of(storage, "filename", f"clicks/{GONE}-1700000000.csv")
    storage.put(BUCKET, f"clicks/{GONE}-1700000000.csv", b"a,b\n1,3\n")
    with pytest.raises(ObjectChangedSincePlan):
        Executors(storage).purge(target, [GONE])
    fresh = target_of(storage, "filename", f"clicks/{GONE}-1700000000.csv")
    assert Executors(storage).purge(fresh, [GONE]).action == "deleted"
    assert not storage.exists(BUCKET, fresh.key)
    assert Executors(storage).purge(fresh, [GONE]).action == "missing"


def test_relational_rows_deleted_in_one_statement(storage: LocalStorage, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'shop.db'}"
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE orders (id INTEGER PRIMARY KEY, user_id TEXT)"))
        for i, u in enumerate([GONE, *OTHERS, "o'brien; DROP TABLE orders"] * 3):
            conn.execute(sa.text("INSERT INTO orders VALUES (:i, :u)"), {"i": i, "u": u})
    target = Target("relational", "shop.orders.user_id", connection=url)
    executors = Executors(storage)
    ids = [GONE, "o'brien; DROP TABLE orders"]
    assert executors.count(target, ids) == 6
    outcome = executors.purge(target, ids)
    assert outcome.removed == 6 and executors.count(target, ids) == 0
    with engine.connect() as conn:
        assert conn.scalar(sa.text("SELECT count(*) FROM orders")) == 9
    executors.close()
    engine.dispose()


def test_the_pool_stops_starting_targets_once_stopped(storage: LocalStorage) -> None:
    keys = [f"r/{i}.jsonl" for i in range(20)]
    for key in keys:
        storage.put(BUCKET, key, jsonl(reviews(8)))
    targets = [target_of(storage, "jsonl", k) for k in keys]
    stop = threading.Event()
    done = []
    for target, outcome in Executors(storage).run(targets, [GONE], workers=2, stop=stop):
        assert not isinstance(outcome, Exception)
        done.append(target.key)
        stop.set()
    assert 1 <= len(done) <= 2  # what was running finishes; nothing new starts
    untouched = [k for k in keys if k not in done]
    assert all(storage.get(BUCKET, k) == jsonl(reviews(8)) for k in untouched)
