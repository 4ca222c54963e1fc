"""``IndexStore``: the index metastore on SQLite or PostgreSQL.

    store = IndexStore("sqlite:///idx.db")           # or a path, or postgresql://...
    store.replace_object(indexed, sequencer="0055AED6DCD90281E5")
    store.find(["user-1"])  # {"user-1": [Holding(layer="lake", location="s3://...", ...)]}

Ordering. ``replace_object`` and ``remove_object`` may be called with events
out of order and more than once: each source row keeps the sequencer of the
last change applied (S3's rule: compare sequencers of one key as hex strings
left-padded to the same width), and a change whose sequencer is not newer is
ignored. Without sequencers (a batch build, a file watcher) a replace with the
eTag already stored is ignored as a duplicate. A removal leaves a tombstone
row (``deleted``), so an older create arriving after it changes nothing.

Every change of one source is one transaction: its old entries go in the
same transaction that writes the new ones, so a lookup never sees a mix.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import (
    BigInteger,
    CompoundSelect,
    String,
    Text,
    cast,
    delete,
    func,
    insert,
    null,
    select,
    union_all,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from lakeward.erasure.index import schema
from lakeward.erasure.index.model import (
    SEQUENCER_WIDTH,
    DeadLetter,
    Holding,
    IndexedObject,
    IndexStatus,
    LocationEntry,
    ObjectRow,
    pad_sequencer,
)
from lakeward.erasure.index.schema import (
    counters,
    datasets,
    dead_letters,
    locations,
    objects,
    open_index_engine,
    records,
    writer,
)
from lakeward.erasure.mappers import (
    LAKE_LAYER,
    DatasetMapper,
    RelationalMapper,
    mapper_from_spec,
    mapper_to_spec,
)
from lakeward.sqlstate import as_utc

_INSERT_RECORDS = "INSERT INTO erasure_records (user_id, object_id, position) VALUES (?, ?, ?)"
_COPY_RECORDS = "COPY erasure_records (user_id, object_id, position) FROM STDIN"


def _now() -> datetime:
    return datetime.now(UTC)


def _touched_since(row: Any, as_of: datetime | None) -> bool:
    return as_of is not None and row.indexed_at is not None and as_utc(row.indexed_at) > as_of


def _row(r: Any) -> ObjectRow:
    return ObjectRow(
        uri=r.uri,
        dataset=r.dataset,
        etag=r.etag,
        sequencer=r.sequencer,
        indexed_at=as_utc(r.indexed_at),
        records=r.records,
        records_without_id=r.records_without_id,
        deleted=r.deleted,
    )


class IndexStore:
    """The index metastore. Thread-safe; several processes may share one database."""

    def __init__(self, url_or_path: str | Path) -> None:
        self.engine = open_index_engine(url_or_path)
        self._writer = writer(self.engine)
        # Lookups are single statements: on PostgreSQL, autocommit spares the BEGIN and
        # ROLLBACK round trips that would double a lookup's time.
        self._reader = (
            self.engine.execution_options(isolation_level="AUTOCOMMIT")
            if self.engine.dialect.name == "postgresql"
            else self.engine
        )

    def close(self) -> None:
        self.engine.dispose()

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    # -- changes -------------------------------------------------------------

    def replace_object(self, indexed: IndexedObject, sequencer: str | None = None) -> bool:
        """Make ``indexed`` the source's entries; False when ignored as stale or a duplicate."""
        return self.replace_objects([(indexed, sequencer)])[0]

    def replace_objects(self, items: Sequence[tuple[IndexedObject, str | None]]) -> list[bool]:
        """``replace_object`` for several sources in one transaction (one commit per burst)."""
        written = [False] * len(items)
        # Locked in URI order, so that two writers of overlapping sets cannot deadlock.
        order = sorted(range(len(items)), key=lambda n: items[n][0].uri)
        with self._writer.begin() as conn:
            for n in order:
                indexed, sequencer = items[n]
                written[n] = self._replace(conn, indexed, pad_sequencer(sequencer))
        return written

    def _replace(self, conn: Connection, indexed: IndexedObject, seq: str | None) -> bool:
        current = self._lock_source(conn, indexed.uri, indexed.dataset)
        if not _newer(seq, indexed.etag, current):
            return False
        self._clear(conn, current.id)
        conn.execute(
            update(objects)
            .where(objects.c.id == current.id)
            .values(
                dataset=indexed.dataset,
                etag=indexed.etag,
                sequencer=max(filter(None, (seq, current.sequencer)), default=None),
                indexed_at=_now(),
                records=indexed.records,
                records_without_id=indexed.records_without_id,
                deleted=False,
            )
        )
        self._insert_entries(conn, current.id, indexed)
        return True

    def remove_object(
        self, uri: str, sequencer: str | None = None, as_of: datetime | None = None
    ) -> bool:
        """Drop a source's entries (the object was deleted); False when stale or unknown,
        or written since ``as_of`` (see ``bulk_load``)."""
        seq = pad_sequencer(sequencer)
        with self._writer.begin() as conn:
            current = conn.execute(
                select(objects).where(objects.c.uri == uri).with_for_update()
            ).first()
            if current is not None and _touched_since(current, as_of):
                return False
            if current is None:
                if seq is None:
                    return False
                # Remember the removal, so a create with an older sequencer arriving later is
                # recognised as stale.
                self._lock_source(conn, uri, "")
                conn.execute(
                    update(objects).where(objects.c.uri == uri).values(deleted=True, sequencer=seq)
                )
                return True
            if seq is not None and current.sequencer is not None and seq <= current.sequencer:
                return False
            if current.deleted and seq is None:
                return False
            self._clear(conn, current.id)
            conn.execute(
                update(objects)
                .where(objects.c.id == current.id)
                .values(
                    deleted=True,
                    etag=None,
                    records=0,
                    records_without_id=0,
                    indexed_at=_now(),
                    sequencer=seq or current.sequencer,
                )
            )
        return True

    def bulk_load(self, batch: Iterable[IndexedObject], as_of: datetime | None = None) -> int:
        """Replace the entries of many sources in one transaction; returns the entries written.

        The fast path of batch builds: no sequencer checks (the caller read the
        objects as they are now); COPY on PostgreSQL, executemany batches on SQLite.
        ``as_of``: when the caller began reading the lake; a source the realtime indexer
        wrote or removed since is newer news than the caller's read, and is left as it is.
        """
        written = 0
        with self._writer.begin() as conn:
            for indexed in batch:
                current = self._lock_source(conn, indexed.uri, indexed.dataset, as_of)
                if _touched_since(current, as_of):
                    continue
                self._clear(conn, current.id)
                conn.execute(
                    update(objects)
                    .where(objects.c.id == current.id)
                    .values(
                        dataset=indexed.dataset,
                        etag=indexed.etag,
                        indexed_at=_now(),
                        records=indexed.records,
                        records_without_id=indexed.records_without_id,
                        deleted=False,
                    )
                )
                written += self._insert_entries(conn, current.id, indexed)
        return written

    def _lock_source(
        self, conn: Connection, uri: str, dataset: str, as_of: datetime | None = None
    ) -> Any:
        """The source's row, created if missing (as of ``as_of``, so that a row made now
        does not count as written since), locked for the rest of the transaction."""
        dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
        conn.execute(
            dialect.insert(objects)
            .values(
                uri=uri,
                dataset=dataset,
                indexed_at=as_of or _now(),
                records=0,
                records_without_id=0,
                deleted=True,
            )  # fmt: skip
            .on_conflict_do_nothing(index_elements=["uri"])
        )
        return conn.execute(select(objects).where(objects.c.uri == uri).with_for_update()).one()

    @staticmethod
    def _clear(conn: Connection, object_id: int) -> None:
        conn.execute(delete(records).where(records.c.object_id == object_id))
        conn.execute(delete(locations).where(locations.c.object_id == object_id))

    @staticmethod
    def _insert_entries(conn: Connection, object_id: int, indexed: IndexedObject) -> int:
        if indexed.locations:
            conn.execute(
                insert(locations),
                [
                    {
                        "user_id": e.user_id,
                        "object_id": object_id,
                        "layer": e.layer,
                        "location": e.location,
                        "records": e.records,
                    }  # fmt: skip
                    for e in indexed.locations
                ],
            )
        rows = ((user_id, object_id, position) for user_id, position in indexed.entries)
        if conn.dialect.name == "postgresql" and len(indexed.entries) > 100:
            cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
            with cursor.copy(_COPY_RECORDS) as copy:
                for row in rows:
                    copy.write_row(row)
        elif indexed.entries:
            # Plain tuples through the driver's executemany: SQLAlchemy's per-row
            # parameter processing would cost more than the insert itself.
            sql = (
                _INSERT_RECORDS.replace("?", "%s")
                if conn.dialect.name != "sqlite"
                else _INSERT_RECORDS
            )
            conn.exec_driver_sql(sql, list(rows))
        return len(indexed.entries) + len(indexed.locations)

    # -- lookups -------------------------------------------------------------

    def find(self, user_ids: Sequence[str]) -> dict[str, list[Holding]]:
        """Every place holding each user's data, grouped by object (every id gets a key).

        One query (record and object-level entries in a UNION ALL) per 500 ids:
        a lookup is one round trip to the database.
        """
        wanted = list(dict.fromkeys(user_ids))
        found: dict[str, list[Holding]] = {u: [] for u in wanted}
        with self._reader.connect() as conn:
            for start in range(0, len(wanted), 500):
                chunk = wanted[start : start + 500]
                positions: dict[tuple[str, str], list[int]] = {}
                meta: dict[tuple[str, str], tuple[str, str | None]] = {}
                for user_id, uri, dataset, etag, position, layer, location, count in conn.execute(
                    _lookup(chunk)
                ):
                    if layer is None:
                        positions.setdefault((user_id, uri), []).append(position)
                        meta[(user_id, uri)] = (dataset, etag)
                    else:
                        found[user_id].append(Holding(layer, dataset, location, count, (), etag))
                for (user_id, uri), spots in positions.items():
                    dataset, etag = meta[(user_id, uri)]
                    spots.sort()
                    found[user_id].append(
                        Holding(LAKE_LAYER, dataset, uri, len(spots), tuple(spots), etag)
                    )
        for holdings in found.values():
            holdings.sort(key=lambda h: (h.layer != LAKE_LAYER, h.layer, h.location))
        return found

    def is_empty(self) -> bool:
        """Whether nothing was ever indexed here (no source, live or removed)."""
        with self.engine.connect() as conn:
            return conn.execute(select(objects.c.id).limit(1)).first() is None

    def object(self, uri: str) -> ObjectRow | None:
        """The index's row of a source (a tombstone when ``deleted``), or None."""
        with self.engine.connect() as conn:
            row = conn.execute(select(objects).where(objects.c.uri == uri)).first()
        return _row(row) if row is not None else None

    def objects(self, dataset: str | None = None, uri_prefix: str = "") -> Iterator[ObjectRow]:
        """Live sources, in URI order, optionally of one dataset and under a URI prefix."""
        query = select(objects).where(objects.c.deleted.is_(False)).order_by(objects.c.uri)
        if dataset is not None:
            query = query.where(objects.c.dataset == dataset)
        if uri_prefix:
            query = query.where(objects.c.uri.startswith(uri_prefix, autoescape=True))
        with self.engine.connect() as conn:
            rows = conn.execute(query).fetchall()
        return (_row(r) for r in rows)

    def entries_for_object(self, uri: str) -> tuple[list[tuple[str, int]], list[LocationEntry]]:
        """A source's (user id, position) entries in position order, and its object-level ones."""
        with self.engine.connect() as conn:
            object_id = conn.execute(select(objects.c.id).where(objects.c.uri == uri)).scalar()
            if object_id is None:
                return [], []
            entries = conn.execute(
                select(records.c.user_id, records.c.position)
                .where(records.c.object_id == object_id)
                .order_by(records.c.position, records.c.user_id)
            ).fetchall()
            spots = conn.execute(
                select(
                    locations.c.user_id,
                    locations.c.location,
                    locations.c.records,
                    locations.c.layer,
                )  # fmt: skip
                .where(locations.c.object_id == object_id)
                .order_by(locations.c.user_id, locations.c.location)
            ).fetchall()
        return [(u, p) for u, p in entries], [LocationEntry(*s) for s in spots]

    # -- dead letters, counters, status -------------------------------------

    def add_dead_letter(self, source: str, reason: str) -> None:
        """Record a source (object URI, or ``event``) that could not be indexed, and why."""
        with self._writer.begin() as conn:
            conn.execute(insert(dead_letters).values(source=source, reason=reason, at=_now()))

    def dead_letters(self, limit: int = 100) -> list[DeadLetter]:
        """The most recent dead letters, newest first."""
        query = select(dead_letters).order_by(dead_letters.c.id.desc()).limit(limit)
        with self.engine.connect() as conn:
            return [DeadLetter(r.source, r.reason, as_utc(r.at)) for r in conn.execute(query)]

    def count(self, name: str, by: int = 1) -> None:
        """Add to a named event counter (``events``, ``ignored_outside_prefixes``, ...)."""
        self.count_all({name: by})

    def count_all(self, amounts: Mapping[str, int]) -> None:
        """Add to several counters in one transaction (one commit for a batch's outcomes)."""
        if not amounts:
            return
        dialect = postgresql if self.dialect == "postgresql" else sqlite
        statement = dialect.insert(counters)
        statement = statement.on_conflict_do_update(
            index_elements=["name"], set_={"value": counters.c.value + statement.excluded.value}
        )
        with self._writer.begin() as conn:
            conn.execute(statement, [{"name": n, "value": v} for n, v in sorted(amounts.items())])

    def counters(self) -> dict[str, int]:
        with self.engine.connect() as conn:
            return {n: v for n, v in conn.execute(select(counters.c.name, counters.c.value))}

    def status(self) -> IndexStatus:
        live = objects.c.deleted.is_(False)
        with self.engine.connect() as conn:
            count, without_id, last = conn.execute(
                select(
                    func.count(),
                    func.coalesce(func.sum(objects.c.records_without_id), 0),
                    func.max(objects.c.indexed_at),
                ).where(live)  # fmt: skip
            ).one()
            record_entries = conn.execute(select(func.count()).select_from(records)).scalar()
            location_entries = conn.execute(select(func.count()).select_from(locations)).scalar()
            letters = conn.execute(select(func.count()).select_from(dead_letters)).scalar()
        return IndexStatus(
            objects=int(count),
            record_entries=int(record_entries or 0),
            location_entries=int(location_entries or 0),
            records_without_id=int(without_id),
            dead_letters=int(letters or 0),
            last_indexed_at=as_utc(last) if last else None,
            counters=self.counters(),
            recent_dead_letters=self.dead_letters(10),
        )

    # -- registered data mappers --------------------------------------------

    def register_dataset(self, mapper: DatasetMapper | RelationalMapper) -> None:
        """Register (or replace) a data mapper, so every process of the stack indexes it."""
        kind, spec = mapper_to_spec(mapper)
        with self._writer.begin() as conn:
            conn.execute(delete(datasets).where(datasets.c.name == mapper.name))
            conn.execute(
                insert(datasets).values(
                    name=mapper.name, kind=kind, spec=json.dumps(spec), registered_at=_now()
                )
            )

    def registered(self) -> list[DatasetMapper | RelationalMapper]:
        with self.engine.connect() as conn:
            rows = conn.execute(select(datasets).order_by(datasets.c.name)).fetchall()
        return [mapper_from_spec(r.kind, json.loads(r.spec)) for r in rows]

    def users(self) -> Counter[str]:
        """Every indexed user id with its number of entries (for checks and tests)."""
        totals: Counter[str] = Counter()
        with self.engine.connect() as conn:
            for table in (records, locations):
                query = select(table.c.user_id, func.count()).group_by(table.c.user_id)
                for user_id, n in conn.execute(query):
                    totals[user_id] += n
        return totals


def _lookup(user_ids: list[str]) -> CompoundSelect[Any]:
    """Record entries (layer NULL) and object-level entries of live sources, for some ids."""
    live = objects.c.deleted.is_(False)
    record_rows = (
        select(
            records.c.user_id, objects.c.uri, objects.c.dataset, objects.c.etag,
            records.c.position, cast(null(), String(32)).label("layer"),
            cast(null(), Text).label("location"), cast(null(), BigInteger).label("records"),
        )
        .join(objects, objects.c.id == records.c.object_id)
        .where(records.c.user_id.in_(user_ids), live)
    )  # fmt: skip
    location_rows = (
        select(
            locations.c.user_id, objects.c.uri, objects.c.dataset, objects.c.etag,
            cast(null(), BigInteger).label("position"), locations.c.layer,
            locations.c.location, locations.c.records,
        )
        .join(objects, objects.c.id == locations.c.object_id)
        .where(locations.c.user_id.in_(user_ids), live)
    )  # fmt: skip
    return union_all(record_rows, location_rows)


def _newer(seq: str | None, etag: str | None, current: Any) -> bool:
    """Whether a change with ``seq``/``etag`` supersedes the stored row ``current``."""
    if seq is not None and current.sequencer is not None:
        return bool(seq > current.sequencer)
    if current.deleted:
        return True
    return etag is None or etag != current.etag


__all__ = [
    "SEQUENCER_WIDTH",
    "DeadLetter",
    "Holding",
    "IndexStatus",
    "IndexStore",
    "IndexedObject",
    "LocationEntry",
    "ObjectRow",
    "pad_sequencer",
    "schema",
]
