"""The batch build on Spark agrees exactly with the real-time index on the same lake.

One Spark session for the module; files are split into 64 KiB blocks so that
a large JSON lines object is read by several tasks and must be put back in
order. SQLite and PostgreSQL.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from lakeward.config import Settings
from lakeward.erasure.batch import BatchIndexBuild
from lakeward.erasure.realtime import RealtimeIndexer
from lakeward.erasure.service import ErasureIndexService
from tests.erasure.realtime_helpers import (
    BUCKET,
    index_url,
    jsonl,
    lake_settings,
    snapshot,
    users,
    write_lake,
)
from tests.helpers import need_java

BIG = "gdpr/reviews/json/year=2024/month=06/day=01/big.jsonl"


@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    need_java()
    from lakeward.spark import build_session

    settings = Settings(data_dir=tmp_path_factory.mktemp("spark"))
    session = build_session(settings, "lakeward-tests-erasure-batch", hive=False)
    session.conf.set("spark.sql.files.maxPartitionBytes", str(64 * 1024))
    session.conf.set("spark.sql.files.openCostInBytes", "0")
    yield session
    session.stop()


def test_batch_build_equals_the_real_time_index(
    new_db: Callable[[], str | Path], spark: Any, tmp_path: Path
) -> None:
    settings = lake_settings(tmp_path / "data", index_url(new_db()))
    realtime = ErasureIndexService(settings)
    storage = realtime.storage
    storage.ensure_bucket(BUCKET)
    with RealtimeIndexer(realtime, watch=False) as indexer:
        write_lake(storage, seed=3, per_format=4)
        rng = random.Random(5)
        storage.put(BUCKET, BIG, jsonl(rng, users(rng, 50), 4000))  # ~4 blocks
        bad = "gdpr/reviews/json/year=2024/month=06/day=02/bad.jsonl"
        storage.put(BUCKET, bad, b'{"user_id": "u1"}\nnot json\n')
        storage.put(BUCKET, "gdpr/reviews/json/year=2024/month=06/day=02/empty.jsonl", b"")
        # Names Hadoop escapes or globs: a space, a literal "%20", brackets and braces.
        odd = "gdpr/reviews/json/year=2024/month=06/day=03/"
        storage.put(BUCKET, odd + "a b.jsonl", b'{"user_id": "space"}\n')
        storage.put(BUCKET, odd + "a%20b.jsonl", b'\n{"user_id": "percent"}\n')
        storage.put(BUCKET, odd + "c[1]{x}*.jsonl", b'{"user_id": "glob"}\n')
        assert indexer.wait_idle(60)
    expected = snapshot(realtime.store)
    assert len(expected) > 30

    # The batch build, into an index of its own on the same kind of database.
    (tmp_path / "batch").mkdir()
    batch_settings = lake_settings(tmp_path / "batch", index_url(new_db()))
    service = ErasureIndexService(batch_settings, storage=storage)
    report = BatchIndexBuild(service, spark=spark).run()
    assert snapshot(service.store) == expected
    assert report.indexed == len(expected) and report.unchanged == 0
    assert report.spark_seconds > 0
    uri = storage.uri(BUCKET, bad)
    assert [u for u, _reason in report.dead_letters] == [uri]
    assert "line 2: not JSON" in {d.source: d.reason for d in service.store.dead_letters()}[uri]

    # Resumable per object: unchanged objects are skipped, changed and gone ones handled.
    storage.put(BUCKET, BIG, b'{"user_id": "late"}\n')
    storage.delete(BUCKET, bad)
    again = BatchIndexBuild(service, spark=spark).run(prefix=f"{BUCKET}/gdpr/reviews/json/")
    assert (again.indexed, again.removed) == (1, 1)
    assert again.unchanged == again.objects - 1
    (found,) = service.find(["late"])
    assert [(h.location, h.positions) for h in found.holdings] == [(storage.uri(BUCKET, BIG), (1,))]
    service.close()
    realtime.close()
