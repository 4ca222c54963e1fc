"""The index metastore: where each user's records are (schema, store, lookups)."""

from lakeward.erasure.index.store import (
    DeadLetter,
    Holding,
    IndexedObject,
    IndexStatus,
    IndexStore,
    LocationEntry,
    ObjectRow,
    pad_sequencer,
)

__all__ = [
    "DeadLetter",
    "Holding",
    "IndexStatus",
    "IndexStore",
    "IndexedObject",
    "LocationEntry",
    "ObjectRow",
    "pad_sequencer",
]
