"""What the index stores and answers: entries of one source, holdings, rows, status."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from lakeward.erasure.mappers import LAKE_LAYER

SEQUENCER_WIDTH = 32


def pad_sequencer(sequencer: str | None) -> str | None:
    """A sequencer in its stored form: upper-case hex, left-padded so string order is numeric."""
    if not sequencer:
        return None
    return sequencer.upper().rjust(SEQUENCER_WIDTH, "0")


@dataclass(frozen=True)
class LocationEntry:
    """An object-level entry: the user's data is at ``location`` (``records`` None: all of it)."""

    user_id: str
    location: str
    records: int | None = None
    layer: str = LAKE_LAYER


@dataclass
class IndexedObject:
    """What an indexer read from one source, ready to replace its entries in the index."""

    uri: str
    dataset: str
    etag: str | None
    records: int = 0
    """Records read (lines, CSV records, rows, or objects for object-level datasets)."""
    records_without_id: int = 0
    entries: list[tuple[str, int]] = field(default_factory=list)
    """(user id, position) record-level entries."""
    locations: list[LocationEntry] = field(default_factory=list)


@dataclass(frozen=True)
class Holding:
    """One place holding a user's data, as ``find`` returns it."""

    layer: str  # "lake" or "database"
    dataset: str
    location: str  # a full object URI, or database.table.column
    records: int | None  # None: the whole object belongs to the user
    positions: tuple[int, ...]  # record positions; empty for object-level entries
    etag: str | None  # of the object when it was indexed


@dataclass(frozen=True)
class ObjectRow:
    uri: str
    dataset: str
    etag: str | None
    sequencer: str | None
    indexed_at: datetime
    records: int
    records_without_id: int
    deleted: bool


@dataclass(frozen=True)
class DeadLetter:
    source: str
    reason: str
    at: datetime


@dataclass(frozen=True)
class IndexStatus:
    objects: int
    record_entries: int
    location_entries: int
    records_without_id: int
    dead_letters: int
    last_indexed_at: datetime | None
    counters: dict[str, int]
    recent_dead_letters: list[DeadLetter]
