"""Real-time index updates from the lake's own storage events and from the file watcher.

Each test checks what ``find`` answers (and the index's entries per object)
against a clean build of the same lake, on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import random
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from lakeward.erasure.index.store import IndexStore
from lakeward.erasure.realtime import RealtimeIndexer, read_status
from lakeward.erasure.service import ErasureIndexService
from lakeward.errors import ObjectNotFound
from lakeward.storage import load_storage
from lakeward.storage.local import LocalStorage
from tests.erasure.realtime_helpers import (
    BUCKET,
    eventually,
    index_url,
    lake_settings,
    object_for,
    snapshot,
    users,
    write_lake,
)

JSON_KEY = "gdpr/reviews/json/year=2024/month=02/day=01/part-0.jsonl"


@pytest.fixture
def service(db: str | Path, tmp_path: Path) -> Iterator[ErasureIndexService]:
    settings = lake_settings(tmp_path / "data", index_url(db))
    service = ErasureIndexService(settings, storage=load_storage(settings))
    service.storage.ensure_bucket(BUCKET)
    yield service
    service.close()


def clean_build(service: ErasureIndexService, tmp_path: Path) -> dict[str, object]:
    """What a from-scratch rebuild of the lake gives (always on SQLite)."""
    store = IndexStore(tmp_path / f"clean-{random.random()}.db")
    ErasureIndexService(service.settings, store=store, storage=service.storage).reindex()
    state = snapshot(store)
    store.close()
    return state


def positions(service: ErasureIndexService, user: str) -> dict[str, tuple[int, ...]]:
    (found,) = service.find([user])
    return {h.location: h.positions for h in found.holdings}


def test_writes_overwrites_and_deletes_through_storage(
    service: ErasureIndexService, tmp_path: Path
) -> None:
    storage = service.storage
    with RealtimeIndexer(service, watch=False) as indexer:
        storage.put(
            BUCKET, JSON_KEY, b'{"user_id": "u1"}\n\n{"user_id": "u2"}\n{"user_id": "u1"}\n'
        )
        assert indexer.wait_idle()
        uri = storage.uri(BUCKET, JSON_KEY)
        assert positions(service, "u1") == {uri: (1, 4)}
        assert positions(service, "u2") == {uri: (3,)}

        # Replaced: the old entries go in the same update that writes the new ones.
        storage.put(BUCKET, JSON_KEY, b'{"user_id": "u2"}\n{"stars": 5}\n')
        assert indexer.wait_idle()
        assert positions(service, "u1") == {}
        assert positions(service, "u2") == {uri: (1,)}
        row = service.store.object(uri)
        assert row is not None and (row.records, row.records_without_id) == (2, 1)

        storage.delete(BUCKET, JSON_KEY)
        assert indexer.wait_idle()
        assert positions(service, "u2") == {}

        # Outside every indexed prefix: ignored, and counted.
        storage.put(BUCKET, "raw/other/file.jsonl", b'{"user_id": "u9"}\n')
        assert indexer.wait_idle()
        assert positions(service, "u9") == {}
        assert service.store.counters()["realtime_outside"] == 1

        # Every format, then the whole index equals a clean build of the lake.
        write_lake(storage)
        assert indexer.wait_idle()
    assert snapshot(service.store) == clean_build(service, tmp_path)
    status = read_status(service.settings.data_dir / "erasure" / "realtime.json")
    assert status is None  # this indexer was given no status file


def test_unparseable_objects_go_to_dead_letters_and_indexing_goes_on(
    service: ErasureIndexService,
) -> None:
    storage = service.storage
    bad = "gdpr/reviews/json/year=2024/month=02/day=02/bad.jsonl"
    with RealtimeIndexer(service, watch=False) as indexer:
        storage.put(BUCKET, bad, b'{"user_id": "u1"}\n{"user_id": oops}\n')
        storage.put(
            BUCKET, "gdpr/reviews/json/year=2024/month=02/day=02/bad2.jsonl.gz", b"not gzip"
        )
        storage.put(BUCKET, JSON_KEY, b'{"user_id": "u3"}\n')
        assert indexer.wait_idle()
    letters = {d.source: d.reason for d in service.store.dead_letters()}
    assert "line 2: not JSON" in letters[storage.uri(BUCKET, bad)]
    assert (
        "not valid gzip" in letters[storage.uri(BUCKET, bad.replace("bad.jsonl", "bad2.jsonl.gz"))]
    )
    assert positions(service, "u3") == {storage.uri(BUCKET, JSON_KEY): (1,)}
    assert positions(service, "u1") == {}


def test_storm_of_duplicate_and_reordered_events_ends_as_a_clean_build(
    service: ErasureIndexService, tmp_path: Path
) -> None:
    storage = service.storage
    rng = random.Random(11)
    ids = users(rng, 40)
    keys = [
        f"gdpr/reviews/json/year=2024/month=03/day={d:02d}/part-{n}.jsonl"
        for d in range(1, 6)
        for n in range(8)
    ]
    keys += [f"gdpr/reviews/csv/year=2024/month=03/day=01/part-{n}.csv.gz" for n in range(10)]
    keys += [f"gdpr/reviews/parquet/year=2024/month=03/day=01/part-{n}.parquet" for n in range(10)]
    recorded: list[dict[str, object]] = []
    lock = threading.Lock()

    def record(notification: dict[str, object]) -> None:
        with lock:
            recorded.append(notification)

    def writer(seed: int) -> None:
        local = random.Random(seed)
        for _ in range(420):
            key = local.choice(keys)
            if local.random() < 0.25 and storage.exists(BUCKET, key):
                with contextlib.suppress(ObjectNotFound):  # another writer was first
                    storage.delete(BUCKET, key)
            else:
                storage.put(BUCKET, key, object_for(local, ids, key))

    unsubscribe = storage.subscribe(record)
    with RealtimeIndexer(service, watch=False) as indexer:
        # Live: four writers race each other while the indexer follows their events.
        threads = [threading.Thread(target=writer, args=(seed,)) for seed in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        unsubscribe()
        # Then the same events again, duplicated and shuffled: a storm of 10,000.
        replay = recorded + rng.sample(recorded, len(recorded) // 2)
        replay += rng.choices(recorded, k=10_000 - len(replay) - len(recorded))
        rng.shuffle(replay)
        assert len(recorded) + len(replay) >= 10_000
        for notification in replay:
            indexer.on_storage_event(notification)
        assert indexer.wait_idle(120)
    assert snapshot(service.store) == clean_build(service, tmp_path)
    counters = service.store.counters()
    assert counters["realtime_stale"] > 0  # old news was recognised by its sequencer


def test_plain_file_writes_are_seen_by_the_watcher(
    service: ErasureIndexService, tmp_path: Path
) -> None:
    storage = service.storage
    assert isinstance(storage, LocalStorage)
    directory = storage.base / BUCKET / "gdpr/reviews/json/year=2024/month=04/day=01"
    directory.mkdir(parents=True)
    target = directory / "part-0.jsonl.gz"
    uri = storage.uri(BUCKET, "gdpr/reviews/json/year=2024/month=04/day=01/part-0.jsonl.gz")
    with RealtimeIndexer(service, watch=True) as indexer:
        # Another program writes in place, in several chunks.
        with open(target, "wb") as out:
            out.write(gzip.compress(b'{"user_id": "w1"}\n{"user_id": "w2"}\n'))
        eventually(lambda: positions(service, "w2") == {uri: (2,)}, what="the write")
        # ... replaces it by renaming a temporary file over it.
        temp = directory / ".part-0.tmp"
        temp.write_bytes(gzip.compress(b'{"user_id": "w3"}\n'))
        os.replace(temp, target)
        eventually(lambda: positions(service, "w3") == {uri: (1,)}, what="the rename")
        assert positions(service, "w1") == {}
        # ... moves a file in from outside the lake.
        outside = tmp_path / "incoming.jsonl"
        outside.write_bytes(b'{"user_id": "w4"}\n')
        moved = directory / "part-1.jsonl"
        os.rename(outside, moved)
        eventually(lambda: positions(service, "w4") != {}, what="the move")
        # ... moves in a whole directory written elsewhere (as `mv staging/day=02 ...` does).
        staged = tmp_path / "day=02"
        staged.mkdir()
        (staged / "part-0.jsonl").write_bytes(b'{"user_id": "w5"}\n')
        os.rename(staged, directory.parent / "day=02")
        eventually(lambda: positions(service, "w5") != {}, what="the directory moved in")
        # ... and deletes.
        target.unlink()
        eventually(lambda: positions(service, "w3") == {}, what="the delete")
        assert indexer.wait_idle()
    assert snapshot(service.store) == clean_build(service, tmp_path)


def test_index_status_command_shows_lag_counts_and_dead_letters(tmp_path: Path) -> None:
    from lakeward.stack import write_state
    from tests.helpers import lakeward

    data_dir = tmp_path / "data"
    settings = lake_settings(data_dir, None)  # the default index: SQLite in the data dir
    write_state(settings)  # what a command run on this data dir loads
    service = ErasureIndexService(settings)
    storage = service.storage
    storage.ensure_bucket(BUCKET)
    status_file = data_dir / "erasure" / "realtime.json"
    with RealtimeIndexer(service, watch=False, status_path=status_file) as indexer:
        storage.put(BUCKET, JSON_KEY, b'{"user_id": "s1"}\n{"user_id": "s2"}\n')
        storage.put(BUCKET, JSON_KEY.replace("part-0", "bad"), b"{oops\n")
        storage.put(BUCKET, "elsewhere/x.jsonl", b"{}\n")
        assert indexer.wait_idle()
    service.close()

    result = lakeward("erasure", "index", "status", "--output", "json", data_dir=data_dir)
    document = json.loads(result.stdout)
    assert (document["objects"], document["record_entries"], document["dead_letters"]) == (2, 2, 1)
    assert "line 1: not JSON" in document["recent_dead_letters"][0]["reason"]
    assert document["counters"]["realtime_outside"] == 1
    assert document["counters"]["realtime_indexed"] == 1
    realtime = document["realtime"]
    assert realtime["running"] is False and realtime["pending"] == 0
    assert 0 < realtime["lag_p50_seconds"] <= realtime["lag_p95_seconds"]
    text = lakeward("erasure", "index", "status", data_dir=data_dir).stdout
    assert "lag (last / p50 / p95)" in text and "dead letters" in text


def test_the_servers_indexer_catches_up_with_what_changed_while_none_ran(
    service: ErasureIndexService, tmp_path: Path
) -> None:
    """Objects written, replaced or deleted while no indexer ran (a supervisor killed
    with events in its queue, say) are indexed once the server's background starts."""
    from lakeward.access.control import AccessControl
    from lakeward.http.background import Background
    from lakeward.query.service import QueryService

    storage = service.storage
    keys = write_lake(storage, seed=3, per_format=2)
    service.reindex()
    # With no indexer running: one object added, one replaced, one deleted.
    rng = random.Random(11)
    ids = users(rng, 5)
    storage.put(BUCKET, JSON_KEY, object_for(rng, ids, JSON_KEY))
    replaced = next(k for k in keys if k.endswith(".jsonl"))
    storage.put(BUCKET, replaced, object_for(rng, ids, replaced))
    storage.delete(BUCKET, keys[-1])
    expected = clean_build(service, tmp_path)
    assert snapshot(service.store) != expected

    settings = service.settings
    access = AccessControl(settings)
    queries = QueryService(settings, access=access, owner=True)
    background = Background(settings, access, queries, catch_up=True)
    background.start()
    try:
        eventually(lambda: snapshot(service.store) == expected, what="the index caught up")
    finally:
        background.stop()
        queries.close()


def test_a_catch_up_pass_does_not_undo_what_the_realtime_indexer_wrote_meanwhile(
    service: ErasureIndexService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server's catch-up pass reads the lake while the realtime indexer applies events:
    an object it read before a newer version was indexed, one it read before its removal,
    and one deleted before its listing and written again after, all stay as the realtime
    indexer left them, and the index ends as a clean build of the lake says."""
    import lakeward.erasure.service as service_module

    storage = service.storage
    keys = write_lake(storage, seed=5, per_format=2)
    service.reindex()
    jsonl = [k for k in keys if k.endswith(".jsonl")]
    replaced, removed, reborn = jsonl[0], jsonl[1], jsonl[2]
    rng = random.Random(13)
    ids = users(rng, 5)
    storage.delete(BUCKET, reborn)  # gone before the pass lists the lake
    real_read = service_module.read_object
    raced: list[str] = []

    def read_then_race(storage_: object, mapper: object, bucket: str, key: str, *rest: object):  # type: ignore[no-untyped-def]
        read = real_read(storage_, mapper, bucket, key, *rest)  # type: ignore[arg-type]
        if raced and raced[-1] == "racing":  # the realtime indexer's own read
            return read
        raced.append("racing")
        if key == replaced:  # a newer version, written and indexed before this read loads
            storage.put(BUCKET, replaced, object_for(rng, ids, replaced))
            service.index_object(BUCKET, replaced)
        elif key == removed:  # deleted, and its removal indexed, before this read loads
            storage.delete(BUCKET, removed)
            service.remove_object(BUCKET, removed)
            # And the object deleted before the listing, written again and indexed.
            storage.put(BUCKET, reborn, object_for(rng, ids, reborn))
            service.index_object(BUCKET, reborn)
        raced[-1] = key
        return read

    monkeypatch.setattr(service_module, "read_object", read_then_race)
    # Every object re-read: none is skipped as unchanged.
    with service.store._writer.begin() as conn:  # noqa: SLF001 - the test's own reset
        from sqlalchemy import text

        conn.execute(text("UPDATE erasure_objects SET etag = NULL"))
    service.reindex()
    monkeypatch.undo()
    assert {replaced, removed} <= set(raced)
    assert snapshot(service.store) == clean_build(service, tmp_path)


def test_an_update_the_full_index_database_turns_away_is_applied_once_there_is_room(
    service: ErasureIndexService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index's database full for a while (SQLITE_FULL, "database or disk is full"):
    the batch of events waits and is applied then, instead of being dropped until the
    next catch-up pass."""
    import sqlite3

    from sqlalchemy.exc import OperationalError

    scratch = sqlite3.connect(":memory:")
    scratch.execute("CREATE TABLE t (x TEXT)")
    scratch.execute("PRAGMA max_page_count = 2")
    try:  # a real SQLITE_FULL, as a full disk gives it
        scratch.execute("INSERT INTO t VALUES (?)", ("x" * 100_000,))
        pytest.fail("the capped database took the row")
    except sqlite3.OperationalError as e:
        full = e
    assert full.sqlite_errorname == "SQLITE_FULL"
    apply = RealtimeIndexer._apply_batch
    refusals: list[int] = []

    def full_twice(self: RealtimeIndexer, batch: list[object]) -> None:
        if len(refusals) < 2:
            refusals.append(len(batch))
            raise OperationalError("INSERT INTO erasure_records", {}, full)
        apply(self, batch)  # type: ignore[arg-type]

    monkeypatch.setattr(RealtimeIndexer, "_apply_batch", full_twice)
    storage = service.storage
    with RealtimeIndexer(service, watch=False) as indexer:
        storage.put(BUCKET, JSON_KEY, b'{"user_id": "u1"}\n{"user_id": "u2"}\n')
        assert indexer.wait_idle()
    assert len(refusals) == 2
    assert positions(service, "u2") == {storage.uri(BUCKET, JSON_KEY): (2,)}
