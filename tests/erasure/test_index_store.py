"""The index metastore on SQLite and PostgreSQL: ordering, duplicates, tombstones, bulk loads,
dead letters, registered mappers, and lookups that use the user index."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from lakeward.config import ErasureDataset, load_settings
from lakeward.erasure import DatasetMapper, IndexedObject, IndexStore, LocationEntry
from lakeward.erasure.index.store import pad_sequencer
from lakeward.erasure.mappers import RelationalMapper, merge_mappers

URI = "s3://bucket/data/part-0.jsonl"


@pytest.fixture
def store(request: pytest.FixtureRequest, db: str | Path) -> IndexStore:
    """The index store on each backend of the shared ``db`` fixture."""
    created = IndexStore(db)
    request.addfinalizer(created.close)
    return created


def version(etag: str, *entries: tuple[str, int], uri: str = URI) -> IndexedObject:
    return IndexedObject(uri, "reviews", etag, records=len(entries), entries=list(entries))


def positions(store: IndexStore, user: str) -> list[tuple[str, tuple[int, ...]]]:
    return [(h.location, h.positions) for h in store.find([user])[user]]


def test_newer_sequencer_replaces_entries_in_one_go(store: IndexStore) -> None:
    assert store.replace_object(version("e1", ("alice", 1), ("bob", 2)), "0A")
    assert store.replace_object(version("e2", ("bob", 1), ("carol", 2)), "0B")
    assert positions(store, "alice") == []
    assert positions(store, "bob") == [(URI, (1,))]
    assert store.object(URI).etag == "e2"  # type: ignore[union-attr]


def test_older_or_equal_sequencer_is_ignored(store: IndexStore) -> None:
    assert store.replace_object(version("e2", ("bob", 5)), "00000000B")
    # Shorter hex is padded: "0C" > "0B" though it sorts lower as plain text of unequal width.
    assert not store.replace_object(version("e1", ("alice", 1)), "0A")
    assert not store.replace_object(version("e1", ("alice", 1)), "0B")
    assert positions(store, "bob") == [(URI, (5,))]
    assert store.replace_object(version("e3", ("dan", 1)), "0C")
    assert positions(store, "dan") == [(URI, (1,))]


def test_duplicate_without_sequencer_is_ignored(store: IndexStore) -> None:
    assert store.replace_object(version("e1", ("alice", 1)))
    assert not store.replace_object(version("e1", ("alice", 1)))
    assert store.replace_object(version("e2", ("alice", 3)))
    assert positions(store, "alice") == [(URI, (3,))]


def test_removal_leaves_a_tombstone_that_outranks_older_creates(store: IndexStore) -> None:
    assert store.replace_object(version("e1", ("alice", 1)), "10")
    assert store.remove_object(URI, "12")
    assert positions(store, "alice") == []
    assert not store.replace_object(version("e1", ("alice", 1)), "11")  # late create
    assert not store.remove_object(URI, "12")  # duplicate delete
    assert positions(store, "alice") == []
    row = store.object(URI)
    assert row is not None and row.deleted
    assert [r.uri for r in store.objects()] == []
    assert store.replace_object(version("e3", ("alice", 2)), "13")
    assert positions(store, "alice") == [(URI, (2,))]


def test_delete_arriving_before_its_create(store: IndexStore) -> None:
    assert store.remove_object(URI, "20")
    assert not store.replace_object(version("e1", ("alice", 1)), "1F")
    assert positions(store, "alice") == []
    assert not store.remove_object("s3://bucket/unknown")  # nothing known, no sequencer


def test_find_groups_by_object_with_counts(store: IndexStore) -> None:
    other = "s3://bucket/data/part-1.jsonl"
    store.replace_object(version("e1", ("alice", 4), ("alice", 2), ("bob", 3)))
    store.replace_object(version("e2", ("alice", 7), uri=other))
    click = "s3://bucket/clicks/alice-1.csv"
    clicks = IndexedObject(
        click, "clicks", "e3", records=1, locations=[LocationEntry("alice", click)]
    )
    table = IndexedObject("app.orders.user_id", "orders", None, records=9)
    table.locations.append(LocationEntry("alice", "app.orders.user_id", 3, "database"))
    store.replace_object(clicks)
    store.replace_object(table)
    found = store.find(["alice", "nobody"])
    assert found["nobody"] == []
    summary = [(h.layer, h.location, h.records, h.positions) for h in found["alice"]]
    assert summary == [
        ("lake", "s3://bucket/clicks/alice-1.csv", None, ()),
        ("lake", URI, 2, (2, 4)),
        ("lake", other, 1, (7,)),
        ("database", "app.orders.user_id", 3, ()),
    ]
    assert found["alice"][1].etag == "e1"


def test_bulk_load_many_entries(store: IndexStore) -> None:
    objects = [
        IndexedObject(f"s3://b/k/{n}.jsonl", "reviews", f"e{n}", records=5000,
                      entries=[(f"user-{i % 700}", i + 1) for i in range(5000)])
        for n in range(4)
    ]  # fmt: skip
    assert store.bulk_load(objects) == 20_000
    assert store.status().record_entries == 20_000
    # Loading again replaces, never duplicates.
    assert store.bulk_load(objects[:1]) == 5000
    assert store.status().record_entries == 20_000
    found = store.find(["user-5"])["user-5"]
    assert [len(h.positions) for h in found] == [8, 8, 8, 8]
    entries, spots = store.entries_for_object("s3://b/k/0.jsonl")
    assert entries[:2] == [("user-0", 1), ("user-1", 2)] and spots == []


def test_lookup_uses_the_user_index(store: IndexStore) -> None:
    store.replace_object(version("e1", ("alice", 1)))
    with store.engine.connect() as conn:
        if store.dialect == "sqlite":
            plan = conn.execute(
                text("EXPLAIN QUERY PLAN SELECT * FROM erasure_records WHERE user_id = 'alice'")
            ).fetchall()
            assert "erasure_records_user" in " ".join(str(row) for row in plan)
        else:
            conn.execute(text("SET enable_seqscan = off"))
            plan = conn.execute(
                text("EXPLAIN SELECT * FROM erasure_records WHERE user_id = 'alice'")
            ).fetchall()
            assert "erasure_records_user" in " ".join(str(row) for row in plan)


def test_dead_letters_counters_and_status(store: IndexStore) -> None:
    store.add_dead_letter("s3://b/bad.jsonl", "line 2: not JSON")
    store.add_dead_letter("event", "no Records")
    store.count("events", 3)
    store.count("events")
    store.count("ignored_outside_prefixes")
    store.replace_object(
        IndexedObject(URI, "reviews", "e1", records=3, records_without_id=2, entries=[("a", 1)])
    )
    status = store.status()
    assert status.counters == {"events": 4, "ignored_outside_prefixes": 1}
    assert status.dead_letters == 2
    assert [d.source for d in status.recent_dead_letters] == ["event", "s3://b/bad.jsonl"]
    assert status.objects == 1 and status.records_without_id == 2
    assert status.last_indexed_at is not None and status.last_indexed_at.tzinfo is not None


def test_registered_mappers_merge_with_settings(store: IndexStore, tmp_path: Path) -> None:
    store.register_dataset(DatasetMapper("clicks", "b", "clicks/", "filename", "none", ("id",)))
    store.register_dataset(DatasetMapper("shared", "b", "old/", "jsonl", "auto", ("$.u",)))
    store.register_dataset(RelationalMapper("orders", "sqlite:///x.db", "orders", "uid", "app"))
    store.register_dataset(DatasetMapper("clicks", "b", "clicks2/", "filename", "none", ("id",)))
    settings = load_settings(data_dir=tmp_path, env={})
    settings.erasure.datasets = [
        ErasureDataset(name="shared", prefix="b/new/", format="csv", id_columns=["tenant", "u"])
    ]
    mappers = merge_mappers(settings, store.registered())
    assert {m.name: m.key_prefix for m in mappers.datasets} == {
        "shared": "new/",  # the settings win
        "clicks": "clicks2/",  # registering again replaces
    }
    assert mappers.dataset("shared").id_columns == ("tenant", "u")
    assert mappers.relational[0].location == "app.orders.uid"
    assert mappers.dataset_for("b", "clicks2/x-1.csv") == mappers.dataset("clicks")
    assert mappers.dataset_for("b", "elsewhere/x.csv") is None


def test_sequencers_compare_as_numbers() -> None:
    assert pad_sequencer("FF") > pad_sequencer("0A")  # type: ignore[operator]
    assert pad_sequencer("100") > pad_sequencer("FF")  # type: ignore[operator]
    assert pad_sequencer("") is None
