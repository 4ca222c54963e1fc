"""The audit log: every authorization decision, append-only and hash-chained.

Three layers keep the log from being rewritten through lakeward:

- lakeward has no code path that updates or deletes a record;
- the database refuses UPDATE and DELETE on the table (SQLite triggers;
  PostgreSQL triggers, TRUNCATE included);
- every row stores ``sha256(previous row's hash + canonical JSON of the row)``,
  so a change made behind lakeward's back (the triggers dropped with the
  sqlite3 CLI, say) breaks the chain at that row and ``verify`` names it. A
  deleted row breaks the chain at the row after it.

The chain is not keyed: whoever can write the database and recompute every
later hash can still rewrite history, and cutting rows off the end leaves no
trace. Copying the head hash (``verify().head``) somewhere else now and then
closes both gaps.

The log does not grow without bound: ``seal`` moves the oldest records into
sealed archive segments, gzipped JSON Lines files named after their first and
last ids, each written whole before its row in ``audit_segments`` (its records'
count, the hash before its first record and its last one, the file's SHA-256)
and the deletion of its records commit together. The triggers let a record
leave the table only once a segment holds it, and refuse any change to a
segment's row. ``verify`` chains through every segment's file, then the table.

``append`` is on the path of every request. It commits before returning, so a
decision is on record before it is acted on and nothing waits in a buffer;
threads that append at the same time share one transaction (group commit). On
SQLite and PostgreSQL the commit does not wait for the disk (WAL with
synchronous=NORMAL; synchronous_commit=off): a record survives lakeward dying,
though the last moments before a power cut or a database crash may be lost.
On SQLite an append is the driver's own INSERT on a pooled connection
(``audit_tables.SqliteAppender``): SQLAlchemy's per-statement work was most of its CPU.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import (
    insert,
    select,
    text,
)
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError, OperationalError

from lakeward.access.audit_tables import (
    COMPONENT,
    MIGRATIONS,
    POSTGRES_TRIGGERS,
    SQLITE_TRIGGERS,
    SqliteAppender,
    audit_log,
    audit_segments,
)
from lakeward.errors import InvalidRequest, StorageError, Unavailable
from lakeward.sqlstate import as_utc, migrate, open_engine, writer

DECISIONS = ("allowed", "explicitDeny", "implicitDeny")
GENESIS = "0" * 64  # the "previous hash" of the first row
MAX_QUERY_LIMIT = 100_000
SEGMENT_RECORDS = 100_000  # records in one archive segment at most
_MAX_TRIES = 100  # appends that lose the race to other processes, in a row


_TEXT_FIELDS = ("principal", "action", "resource", "source", "statement", "request_id")
_OPTIONAL_FIELDS = ("statement", "request_id")
_FIELDS = tuple(c.name for c in audit_log.columns if c.name != "hash")


@dataclass(frozen=True, kw_only=True)
class AuditRecord:
    principal: str
    action: str
    resource: str
    decision: str  # one of DECISIONS
    source: str  # where the request came in: "athena-api", "cli", ...
    statement: str | None = None  # the policy statement that decided, if one did
    request_id: str | None = None
    time: datetime = field(default_factory=lambda: datetime.now(UTC))
    id: int | None = field(default=None, compare=False)  # set by the log

    def __post_init__(self) -> None:
        # Checked here, before the record joins a batch, so that one bad record
        # cannot fail the other threads' records committed with it.
        if self.decision not in DECISIONS:
            raise ValueError(f"decision {self.decision!r} is not one of {', '.join(DECISIONS)}")
        for name in _TEXT_FIELDS:
            value = getattr(self, name)
            if value is None and name in _OPTIONAL_FIELDS:
                continue
            if not isinstance(value, str):
                raise TypeError(f"audit record field {name} must be a str, not {value!r}")
            if "\x00" in value:
                # PostgreSQL text cannot hold NUL; a request must not be able to
                # keep its own decision out of the log that way.
                object.__setattr__(self, name, value.replace("\x00", "\ufffd"))
        # Naive times would be stored as if UTC; refuse rather than guess.
        object.__setattr__(self, "time", _as_utc(self.time, "time"))


@dataclass(frozen=True)
class VerifyResult:
    ok: bool
    checked: int  # rows read, the bad one included
    first_bad_id: int | None
    head: str = GENESIS  # hash of the last good row read: an anchor to keep elsewhere
    problem: str | None = None  # what is wrong, when an archive segment is


@dataclass(frozen=True)
class Segment:
    """A sealed archive segment: records ``first_id``..``last_id`` in the file ``name``."""

    first_id: int
    last_id: int
    records: int
    prev_hash: str
    last_hash: str
    name: str
    sha256: str
    sealed_at: datetime


class _Pending:
    __slots__ = ("records", "done", "error")

    def __init__(self, records: Sequence[AuditRecord]) -> None:
        self.records = records
        self.done = False
        self.error: BaseException | None = None


class AuditLog:
    def __init__(self, url_or_path: str | Path, archive: Path | None = None) -> None:
        """``archive``: the directory of sealed segments (``seal`` needs one)."""
        # A commit returns before the disk has it: NORMAL skips SQLite's fsync per commit
        # in WAL mode (3 ms of every request here) and synchronous_commit=off
        # PostgreSQL's WAL flush (1.5 ms); a committed record survives lakeward dying,
        # and only a power cut or a server crash can take the last commits, never
        # corrupt the chain.
        self.engine: Engine = open_engine(
            url_or_path,
            sqlite_pragmas=("synchronous=NORMAL",),
            postgres_settings=("synchronous_commit = off",),
        )
        dialect = self.engine.dialect.name
        migrate(self.engine, COMPONENT, MIGRATIONS, label="audit")
        self._writer = writer(self.engine)
        with self._writer.begin() as conn:
            if dialect == "sqlite":
                statements = SQLITE_TRIGGERS
            elif dialect == "postgresql":
                statements = POSTGRES_TRIGGERS
            else:
                statements = []  # only the hash chain guards other databases
            for statement in statements:
                conn.execute(text(statement))
        # Guards the queue and the "a writer is at work" flag; the writer itself
        # runs outside it, so appenders queue up while a batch commits.
        self._cond = threading.Condition()
        self._queue: list[_Pending] = []
        self._writing = False
        # The newest (id, hash), cached: a stale one shows itself as a clash of
        # primary keys, so no lock or read is needed before each append.
        self._head: tuple[int, str] | None = None
        self._appender = SqliteAppender(self.engine) if dialect == "sqlite" else None
        self.archive = archive

    def close(self) -> None:
        # append returns only once committed, so nothing is left to flush.
        self.engine.dispose()

    def __enter__(self) -> AuditLog:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def append(self, record: AuditRecord) -> None:
        self.append_all([record])

    def append_all(self, records: Sequence[AuditRecord]) -> None:
        """Add ``records``, in order, all in one commit; returns once it is committed."""
        if not records:
            return
        mine = _Pending(records)
        with self._cond:
            self._queue.append(mine)
            # Whoever finds no writer at work becomes it and commits everything
            # queued meanwhile, its own record and the waiters' together.
            while not mine.done and self._writing:
                self._cond.wait()
            if mine.done:
                if mine.error is not None:
                    raise mine.error
                return
            self._writing = True
            batch, self._queue = self._queue, []
        error: BaseException | None = None
        try:
            self._write(batch)
        except OperationalError as e:  # its disk full, a lock held too long: it passes
            error = Unavailable(f"the audit log could not record the call ({e.orig}), so it "
                                "was not done; try it again shortly")  # fmt: skip
        except BaseException as e:
            error = e
        with self._cond:
            for pending in batch:
                pending.done, pending.error = True, error
            self._writing = False
            self._cond.notify_all()
        if error is not None:
            raise error

    def query(
        self,
        principal: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        action: str | None = None,
        decision: str | None = None,
        limit: int = 1000,
    ) -> list[AuditRecord]:
        """The newest ``limit`` records matching, oldest first; ``since <= time < until``."""
        if not 1 <= limit <= MAX_QUERY_LIMIT:
            raise InvalidRequest(f"limit must be between 1 and {MAX_QUERY_LIMIT}, not {limit}")
        if decision is not None and decision not in DECISIONS:
            raise InvalidRequest(f"decision must be one of {', '.join(DECISIONS)}")
        query = select(audit_log).order_by(audit_log.c.id.desc()).limit(limit)
        if principal is not None:
            query = query.where(audit_log.c.principal == principal)
        if action is not None:
            query = query.where(audit_log.c.action == action)
        if decision is not None:
            query = query.where(audit_log.c.decision == decision)
        if since is not None:
            query = query.where(audit_log.c.time >= _as_utc(since, "since", InvalidRequest))
        if until is not None:
            query = query.where(audit_log.c.time < _as_utc(until, "until", InvalidRequest))
        with self.engine.connect() as conn:
            rows = conn.execute(query).mappings().all()
        return [_record(row) for row in reversed(rows)]

    def verify(self) -> VerifyResult:
        """Recompute the chain from the first record, through the sealed segments' files
        and then the table; report the first record (or segment) that does not fit."""
        prev, checked = GENESIS, 0
        for segment in self.segments():
            bad = self._verify_segment(segment, prev)
            checked += bad.checked
            if not bad.ok:
                return VerifyResult(False, checked, bad.first_bad_id, bad.head, bad.problem)
            prev = segment.last_hash
        with self.engine.connect() as conn:
            for row in _rows_in_order(conn):
                checked += 1
                if row["hash"] != _chain_hash(prev, _record(row)):
                    return VerifyResult(False, checked, row["id"], prev)
                prev = row["hash"]
        return VerifyResult(True, checked, None, prev)

    def segments(self) -> list[Segment]:
        """The sealed archive segments, oldest first."""
        with self.engine.connect() as conn:
            rows = conn.execute(select(audit_segments).order_by(audit_segments.c.first_id))
            return [
                Segment(**{**row, "sealed_at": as_utc(row["sealed_at"])}) for row in rows.mappings()
            ]

    def seal(self, older_than: timedelta, now: datetime | None = None) -> list[Segment]:
        """Move the records older than ``older_than`` into sealed segments; the new ones.

        Each segment's file is written whole (a temporary file, synced, renamed) before
        its records leave the table, in the one transaction that records the segment.
        Two processes sealing at once write the same file; one records it.
        """
        if self.archive is None:
            raise InvalidRequest("the audit log has no archive directory to seal segments in")
        before = _as_utc(now or datetime.now(UTC), "now") - older_than
        sealed: list[Segment] = []
        while segment := self._seal_one(before):
            sealed.append(segment)
        return sealed

    # -- internals ----------------------------------------------------------

    def _seal_one(self, before: datetime) -> Segment | None:
        assert self.archive is not None
        with self.engine.connect() as conn:
            through, prev = conn.execute(
                select(audit_segments.c.last_id, audit_segments.c.last_hash)
                .order_by(audit_segments.c.last_id.desc())
                .limit(1)
            ).first() or (0, GENESIS)
            oldest = conn.execute(
                select(audit_log.c.time)
                .where(audit_log.c.id > through)
                .order_by(audit_log.c.id)
                .limit(1)
            ).scalar()
            if oldest is None or as_utc(oldest) >= before:
                return None  # the common case, each minute: one row read
            lines: list[bytes] = []
            last_hash: str = prev
            for row in _rows_in_order(conn, after=through):
                record = _record(row)
                if record.time >= before or len(lines) == SEGMENT_RECORDS:
                    break
                if row["id"] != through + len(lines) + 1 or row["hash"] != _chain_hash(
                    last_hash, record
                ):
                    # Sealing must never hide an alteration behind a fresh file's hash.
                    raise StorageError(
                        f"the audit log's record {row['id']} does not fit its chain; "
                        "nothing was sealed (see `lakeward audit --verify`)"
                    )
                lines.append(_segment_line(record, row["hash"]))
                last_hash = row["hash"]
        if not lines:
            return None
        first_id, last_id = through + 1, through + len(lines)
        name = f"audit-{first_id:012d}-{last_id:012d}.jsonl.gz"
        # mtime=0: the same records make the same bytes, whoever seals them.
        data = gzip.compress(b"".join(lines), mtime=0)
        _write_whole(self.archive / name, data)
        segment = Segment(
            first_id=first_id,
            last_id=last_id,
            records=len(lines),
            prev_hash=prev,
            last_hash=last_hash,
            name=name,
            sha256=hashlib.sha256(data).hexdigest(),
            sealed_at=datetime.now(UTC),
        )
        try:
            with self._writer.begin() as conn:
                conn.execute(insert(audit_segments).values(**segment.__dict__))
                conn.execute(audit_log.delete().where(audit_log.c.id <= last_id))
        except IntegrityError:
            return self._seal_one(before)  # another process sealed these first
        return segment

    def _verify_segment(self, segment: Segment, prev: str) -> VerifyResult:
        """One segment's file against its row and the chain so far (``checked``: its
        records read)."""
        where = self.archive / segment.name if self.archive else Path(segment.name)
        if segment.prev_hash != prev:
            problem = f"archive segment {segment.name} does not follow the records before it"
            return VerifyResult(False, 0, segment.first_id, prev, problem)
        # Read in pieces, twice (its digest, then its records): a segment is too big to hold.
        try:
            with where.open("rb") as file:
                digest = hashlib.file_digest(file, "sha256").hexdigest()
        except OSError as exc:
            problem = f"archive segment {where} cannot be read: {exc.strerror or exc}"
            return VerifyResult(False, 0, segment.first_id, prev, problem)
        if digest != segment.sha256:
            problem = f"archive segment {where} is not the file that was sealed"
            return VerifyResult(False, 0, segment.first_id, prev, problem)
        checked, expected_id = 0, segment.first_id
        try:
            with gzip.open(where, "rb") as lines:
                for line in lines:
                    values = json.loads(line)
                    stored = values.pop("hash")
                    values["time"] = datetime.fromisoformat(values["time"])
                    record = AuditRecord(**values)
                    checked += 1
                    if record.id != expected_id or stored != _chain_hash(prev, record):
                        return VerifyResult(False, checked, expected_id, prev)
                    prev, expected_id = stored, expected_id + 1
        except (OSError, EOFError) as exc:  # replaced since its digest was read
            problem = f"archive segment {where} cannot be read: {exc}"
            return VerifyResult(False, checked, expected_id, prev, problem)
        if checked != segment.records or prev != segment.last_hash:
            problem = f"archive segment {where} does not hold the records it was sealed with"
            return VerifyResult(False, checked, segment.first_id, prev, problem)
        return VerifyResult(True, checked, None, prev)

    def _write(self, batch: list[_Pending]) -> None:
        for _ in range(_MAX_TRIES):
            if self._head is None:
                self._head = self._read_head()
            last_id, prev = self._head
            rows = []
            queued = [record for pending in batch for record in pending.records]
            for offset, queued_record in enumerate(queued, start=1):
                record = _with_id(queued_record, last_id + offset)
                prev = _chain_hash(prev, record)
                rows.append({**_columns(record), "hash": prev})
            try:
                if self._appender is not None:
                    self._appender.insert(rows)
                else:
                    with self._writer.begin() as conn:
                        conn.execute(insert(audit_log), rows)
            except IntegrityError:
                # Another process appended since we last looked: our first id is
                # taken (ids have no gaps). Chain onto its rows instead.
                self._head = self._read_head()
                if self._head[0] == last_id:
                    raise  # not a race: something else is wrong
                continue
            except BaseException:
                # After a database crash the cached head may name commits that were
                # lost; read it afresh rather than chain onto them.
                self._head = None
                raise
            self._head = (last_id + len(rows), prev)
            return
        raise StorageError(f"could not append to the audit log in {_MAX_TRIES} tries")

    def _read_head(self) -> tuple[int, str]:
        newest = select(audit_log.c.id, audit_log.c.hash).order_by(audit_log.c.id.desc())
        with self.engine.connect() as conn:
            head = conn.execute(newest.limit(1)).first()
        return (head[0], head[1]) if head else (0, GENESIS)


def _rows_in_order(conn: Connection, page: int = 5000, after: int = 0) -> Iterator[Any]:
    # Keyset pages: constant memory however long the log is.
    last = after
    while True:
        query = select(audit_log).order_by(audit_log.c.id).limit(page)
        if last:
            query = query.where(audit_log.c.id > last)
        rows = conn.execute(query).mappings().all()
        yield from rows
        if len(rows) < page:
            return
        last = rows[-1]["id"]


def _segment_line(record: AuditRecord, hash_: str) -> bytes:
    values = _columns(record)
    values["time"] = record.time.isoformat(timespec="microseconds")
    values["hash"] = hash_
    return json.dumps(values, sort_keys=True, ensure_ascii=False).encode() + b"\n"


def _write_whole(path: Path, data: bytes) -> None:
    """``data`` at ``path``, never half there: written beside it, synced, renamed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    with open(partial, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.replace(partial, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def _columns(record: AuditRecord) -> dict[str, Any]:
    return {
        "id": record.id,
        "time": record.time,
        "principal": record.principal,
        "action": record.action,
        "resource": record.resource,
        "decision": record.decision,
        "statement": record.statement,
        "request_id": record.request_id,
        "source": record.source,
    }


def _chain_hash(prev: str, record: AuditRecord) -> str:
    values = _columns(record)
    values["time"] = record.time.isoformat(timespec="microseconds")
    canonical = json.dumps(values, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256((prev + canonical).encode()).hexdigest()


def _with_id(record: AuditRecord, record_id: int) -> AuditRecord:
    values = _columns(record)
    values["id"] = record_id
    return AuditRecord(**values)


def _record(row: Any) -> AuditRecord:
    values = {name: row[name] for name in _FIELDS}
    values["time"] = as_utc(row["time"])
    return AuditRecord(**values)


def _as_utc(value: datetime, what: str, error: type[Exception] = ValueError) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise error(f"{what} must be a timezone-aware datetime")
    return value.astimezone(UTC)
