"""Erasure requests, their transitions and per-target progress, in the index database.

Tables (prefixed ``erasure_``, migrated under their own component so they
share the index's database, SQLite or PostgreSQL):

* ``erasure_requests`` -- one row per request: state, user ids, who asked,
  the report's digest, approval and notification bookkeeping;
* ``erasure_transitions`` -- every state change, with who made it and why;
* ``erasure_targets`` -- the places a request purges, each with its status and
  the executor's outcome, so that a restarted worker resumes where it stopped;
* ``erasure_link_uses`` -- approval links already used (single use);
* ``erasure_leases`` -- which worker is taking a request's steps, until when.

Every state change is a compare-and-set on the current state inside one
transaction, so two workers (or a worker and an approver) never both act.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import (
    Boolean,
    Column,
    DateTime,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    delete,
    insert,
    select,
    update,
)
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError

from lakeward.access.schema import open_engine, run_migrations, writer
from lakeward.errors import InvalidRequest, ResourceNotFound

# States of a request. Terminal ones end it; the worker acts on the others.
REQUESTED = "REQUESTED"
REPORT_READY = "REPORT_READY"
AWAITING_APPROVAL = "AWAITING_APPROVAL"
APPROVED = "APPROVED"
REJECTED = "REJECTED"
EXPIRED = "EXPIRED"
PURGING = "PURGING"
VERIFYING = "VERIFYING"
COMPLETED = "COMPLETED"
FAILED = "FAILED"
STOPPED = "STOPPED"
STATES = (REQUESTED, REPORT_READY, AWAITING_APPROVAL, APPROVED, REJECTED, EXPIRED,
          PURGING, VERIFYING, COMPLETED, FAILED, STOPPED)  # fmt: skip
TERMINAL = (REJECTED, EXPIRED, COMPLETED, FAILED, STOPPED)
PENDING = (REQUESTED, REPORT_READY, AWAITING_APPROVAL)
"""Before approval: a new request for the same user joins one of these."""

# Target statuses
TODO = "todo"
DONE = "done"
ERROR = "error"

metadata = MetaData()
COMPONENT = "erasure-requests"
_PG_LOCK_KEY = 0x6C616B65_72657173  # "lakereqs"

requests_table = Table(
    "erasure_requests",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("state", String(24), nullable=False, index=True),
    Column("user_ids", Text, nullable=False),  # JSON list
    Column("requester", Text, nullable=False),
    Column("contact", Text),  # the data subject's address for the outcome email
    Column("reason", Text, nullable=False, default=""),
    Column("dry_run", Boolean, nullable=False, default=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    Column("report_digest", String(64)),
    Column("approval_expires_at", DateTime(timezone=True)),
    Column("approval_sent_at", DateTime(timezone=True)),
    Column("next_attempt_at", DateTime(timezone=True)),
    Column("attempts", Integer, nullable=False, default=0),
    Column("last_error", Text),
    Column("decided_by", Text),
    Column("stop_requested", Boolean, nullable=False, default=False),
    Column("outcome_sent_at", DateTime(timezone=True)),
)

transitions = Table(
    "erasure_transitions",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("request_id", String(32), nullable=False, index=True),
    Column("from_state", String(24)),
    Column("to_state", String(24), nullable=False),
    Column("at", DateTime(timezone=True), nullable=False),
    Column("actor", Text, nullable=False),
    Column("note", Text, nullable=False, default=""),
)

targets_table = Table(
    "erasure_targets",
    metadata,
    Column("request_id", String(32), primary_key=True),
    Column("seq", Integer, primary_key=True),
    Column("target", Text, nullable=False),  # JSON of executors.Target
    Column("status", String(16), nullable=False),
    Column("outcome", Text),  # JSON of executors.Outcome, or the error
    Column("updated_at", DateTime(timezone=True), nullable=False),
    Index("erasure_targets_status", "request_id", "status"),
)

link_uses = Table(
    "erasure_link_uses",
    metadata,
    Column("nonce", String(64), primary_key=True),
    Column("request_id", String(32), nullable=False),
    Column("used_at", DateTime(timezone=True), nullable=False),
)


leases = Table(
    "erasure_leases",
    metadata,
    Column("request_id", String(32), primary_key=True),
    Column("owner", Text, nullable=False),  # host:pid:token of the worker
    Column("until", DateTime(timezone=True), nullable=False),
)


def _v1(conn: Connection) -> None:
    metadata.create_all(conn, tables=[requests_table, transitions, targets_table, link_uses])


def _v2(conn: Connection) -> None:
    leases.create(conn, checkfirst=True)


MIGRATIONS: list[Callable[[Connection], None]] = [_v1, _v2]
LEASE_SECONDS = 120.0


def now() -> datetime:
    return datetime.now(UTC)


def worker_name() -> str:
    """This process as a lease owner: ``host:pid:token``."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


def _worker_alive(owner: str) -> bool:
    """False only when the owner is known to be gone: a process of this host that has exited."""
    host, _, rest = owner.partition(":")
    pid = rest.partition(":")[0]
    if host != socket.gethostname() or not pid.isdigit():
        return True  # another host's worker: its lease runs out on its own
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _aware(moment: datetime | None) -> datetime | None:
    if moment is None:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Request:
    id: str
    state: str
    user_ids: list[str]
    requester: str
    contact: str | None
    reason: str
    dry_run: bool
    created_at: datetime
    updated_at: datetime
    report_digest: str | None
    approval_expires_at: datetime | None
    approval_sent_at: datetime | None
    next_attempt_at: datetime | None
    attempts: int
    last_error: str | None
    decided_by: str | None
    stop_requested: bool
    outcome_sent_at: datetime | None

    @classmethod
    def from_row(cls, row: Any) -> Request:
        data = dict(row._mapping)
        data["user_ids"] = json.loads(data["user_ids"])
        for name in ("created_at", "updated_at", "approval_expires_at", "approval_sent_at",
                     "next_attempt_at", "outcome_sent_at"):  # fmt: skip
            data[name] = _aware(data[name])
        return cls(**data)

    def as_dict(self) -> dict[str, Any]:
        data = dict(self.__dict__)
        for name, value in data.items():
            if isinstance(value, datetime):
                data[name] = value.isoformat()
        return data


@dataclass(frozen=True)
class Transition:
    from_state: str | None
    to_state: str
    at: datetime
    actor: str
    note: str


@dataclass(frozen=True)
class TargetRow:
    seq: int
    target: dict[str, Any]
    status: str
    outcome: dict[str, Any] | None


class RequestStore:
    """Requests and their progress. Thread-safe; processes may share the database."""

    def __init__(self, url_or_path: str | Path) -> None:
        self.engine: Engine = open_engine(url_or_path)
        run_migrations(self.engine, COMPONENT, MIGRATIONS, _PG_LOCK_KEY, "erasure requests")
        self._writer = writer(self.engine)

    def close(self) -> None:
        self.engine.dispose()

    # -- requests ------------------------------------------------------------

    def create_or_join(
        self, user_ids: Sequence[str], requester: str, contact: str | None, reason: str,
        dry_run: bool,
    ) -> tuple[Request, bool]:  # fmt: skip
        """A new request, or the pending one of the same users that it joins (True)."""
        wanted = list(dict.fromkeys(user_ids))
        with self._writer.begin() as conn:
            if not dry_run:
                for row in conn.execute(
                    select(requests_table).where(
                        requests_table.c.state.in_(PENDING), requests_table.c.dry_run.is_(False)
                    )
                ):
                    held = json.loads(row.user_ids)
                    if set(held) & set(wanted):
                        return self._join(conn, Request.from_row(row), wanted, requester), True
            request_id = secrets.token_hex(8)
            moment = now()
            conn.execute(
                insert(requests_table).values(
                    id=request_id,
                    state=REQUESTED,
                    user_ids=json.dumps(wanted),
                    requester=requester,
                    contact=contact,
                    reason=reason,
                    dry_run=dry_run,
                    created_at=moment,
                    updated_at=moment,
                    attempts=0,
                    stop_requested=False,
                )  # fmt: skip
            )
            self._log(conn, request_id, None, REQUESTED, requester, reason)
        return self.get(request_id), False

    def _join(self, conn: Connection, pending: Request, wanted: list[str], actor: str) -> Request:
        added = [u for u in wanted if u not in pending.user_ids]
        if not added:
            self._log(conn, pending.id, pending.state, pending.state, actor, "asked again")
            return pending
        # New ids change the report: it is made again and earlier links stop working.
        conn.execute(
            update(requests_table)
            .where(requests_table.c.id == pending.id)
            .values(
                user_ids=json.dumps(pending.user_ids + added),
                state=REQUESTED,
                report_digest=None,
                approval_sent_at=None,
                updated_at=now(),
            )  # fmt: skip
        )
        note = f"joined by {len(added)} more user id(s)"
        self._log(conn, pending.id, pending.state, REQUESTED, actor, note)
        row = conn.execute(select(requests_table).where(requests_table.c.id == pending.id)).one()
        return Request.from_row(row)

    def get(self, request_id: str) -> Request:
        with self.engine.connect() as conn:
            row = conn.execute(
                select(requests_table).where(requests_table.c.id == request_id)
            ).first()
        if row is None:
            raise ResourceNotFound(f"no erasure request {request_id!r}")
        return Request.from_row(row)

    def recent(self, states: Sequence[str] | None = None, limit: int = 100) -> list[Request]:
        query = select(requests_table).order_by(requests_table.c.created_at.desc()).limit(limit)
        if states:
            query = query.where(requests_table.c.state.in_(states))
        with self.engine.connect() as conn:
            return [Request.from_row(r) for r in conn.execute(query)]

    def active(self) -> list[Request]:
        """Requests the worker may have work on, oldest first."""
        query = (
            select(requests_table)
            .where(requests_table.c.state.not_in(TERMINAL))
            .order_by(requests_table.c.created_at)
        )
        with self.engine.connect() as conn:
            return [Request.from_row(r) for r in conn.execute(query)]

    def unsent_outcomes(self) -> list[Request]:
        query = select(requests_table).where(
            requests_table.c.state.in_((COMPLETED, FAILED, STOPPED, REJECTED, EXPIRED)),
            requests_table.c.outcome_sent_at.is_(None),
            requests_table.c.dry_run.is_(False),
        )
        with self.engine.connect() as conn:
            return [Request.from_row(r) for r in conn.execute(query)]

    def move(
        self, request_id: str, expected: str | Sequence[str], to_state: str, actor: str,
        note: str = "", *, user_ids: Sequence[str] | None = None, **values: Any,
    ) -> Request:  # fmt: skip
        """Change the state if it is still ``expected`` (and, if given, the request still
        names exactly ``user_ids``); else ``InvalidRequest``."""
        allowed = [expected] if isinstance(expected, str) else list(expected)
        with self._writer.begin() as conn:
            row = conn.execute(
                select(requests_table).where(requests_table.c.id == request_id).with_for_update()
            ).first()
            if row is None:
                raise ResourceNotFound(f"no erasure request {request_id!r}")
            if row.state not in allowed:
                raise InvalidRequest(
                    f"erasure request {request_id} is {row.state}, not {' or '.join(allowed)}"
                )
            if user_ids is not None and json.loads(row.user_ids) != list(user_ids):
                raise InvalidRequest(f"erasure request {request_id} was joined meanwhile")
            conn.execute(
                update(requests_table)
                .where(requests_table.c.id == request_id)
                .values(state=to_state, updated_at=now(), **values)
            )
            self._log(conn, request_id, row.state, to_state, actor, note)
        return self.get(request_id)

    def update(self, request_id: str, **values: Any) -> None:
        """Bookkeeping that is not a state change (notification times, errors)."""
        with self._writer.begin() as conn:
            conn.execute(
                update(requests_table)
                .where(requests_table.c.id == request_id)
                .values(updated_at=now(), **values)
            )

    def history(self, request_id: str) -> list[Transition]:
        query = (
            select(transitions)
            .where(transitions.c.request_id == request_id)
            .order_by(transitions.c.id)
        )
        with self.engine.connect() as conn:
            return [
                Transition(r.from_state, r.to_state, _aware(r.at) or now(), r.actor, r.note)
                for r in conn.execute(query)
            ]

    @staticmethod
    def _log(conn: Connection, request_id: str, from_state: str | None, to_state: str,
             actor: str, note: str) -> None:  # fmt: skip
        conn.execute(
            insert(transitions).values(
                request_id=request_id,
                from_state=from_state,
                to_state=to_state,
                at=now(),
                actor=actor,
                note=note,
            )  # fmt: skip
        )

    # -- targets -------------------------------------------------------------

    def set_targets(self, request_id: str, targets: Sequence[dict[str, Any]]) -> None:
        """Replace a request's targets (a report made again replaces the plan)."""
        with self._writer.begin() as conn:
            conn.execute(delete(targets_table).where(targets_table.c.request_id == request_id))
            if targets:
                conn.execute(
                    insert(targets_table),
                    [
                        {
                            "request_id": request_id,
                            "seq": i,
                            "target": json.dumps(t),
                            "status": TODO,
                            "updated_at": now(),
                        }  # fmt: skip
                        for i, t in enumerate(targets)
                    ],
                )

    def targets(self, request_id: str, status: str | None = None) -> list[TargetRow]:
        query = (
            select(targets_table)
            .where(targets_table.c.request_id == request_id)
            .order_by(targets_table.c.seq)
        )
        if status is not None:
            query = query.where(targets_table.c.status == status)
        with self.engine.connect() as conn:
            return [
                TargetRow(
                    r.seq,
                    json.loads(r.target),
                    r.status,
                    json.loads(r.outcome) if r.outcome else None,
                )  # fmt: skip
                for r in conn.execute(query)
            ]

    def finish_target(self, request_id: str, seq: int, status: str,
                      outcome: dict[str, Any]) -> bool:  # fmt: skip
        return self.finish_targets(request_id, [(seq, status, outcome)])

    def finish_targets(
        self, request_id: str, results: Sequence[tuple[int, str, dict[str, Any]]]
    ) -> bool:
        """Record targets' outcomes in one transaction; returns whether a stop was asked."""
        moment = now()
        with self._writer.begin() as conn:
            for seq, status, outcome in results:
                conn.execute(
                    update(targets_table)
                    .where(targets_table.c.request_id == request_id, targets_table.c.seq == seq)
                    .values(status=status, outcome=json.dumps(outcome), updated_at=moment)
                )
            stop = conn.execute(
                select(requests_table.c.stop_requested).where(requests_table.c.id == request_id)
            ).scalar()
        return bool(stop)

    # -- worker leases -------------------------------------------------------

    def claim(self, request_id: str, owner: str, seconds: float = LEASE_SECONDS) -> bool:
        """Take (or extend) the lease on a request's steps; False while another worker holds it.

        A lease is taken over when it has run out, or when its worker is known to
        be dead (on this host, its process is gone), so that a worker restarted
        after a crash goes on at once.
        """
        moment = now()
        until = moment + timedelta(seconds=seconds)
        try:
            with self._writer.begin() as conn:
                row = conn.execute(
                    select(leases).where(leases.c.request_id == request_id).with_for_update()
                ).first()
                if row is None:
                    conn.execute(insert(leases).values(request_id=request_id, owner=owner,
                                                       until=until))  # fmt: skip
                    return True
                held = row.owner != owner and (_aware(row.until) or moment) > moment
                if held and _worker_alive(row.owner):
                    return False
                conn.execute(
                    update(leases)
                    .where(leases.c.request_id == request_id)
                    .values(owner=owner, until=until)
                )
        except IntegrityError:
            return False  # another worker inserted it first
        return True

    def release(self, request_id: str, owner: str) -> None:
        with self._writer.begin() as conn:
            conn.execute(
                delete(leases).where(leases.c.request_id == request_id, leases.c.owner == owner)
            )

    # -- approval links ------------------------------------------------------

    def use_link(self, nonce: str, request_id: str) -> bool:
        """Mark a link used; False when it was used before (a replay)."""
        try:
            with self._writer.begin() as conn:
                conn.execute(
                    insert(link_uses).values(nonce=nonce, request_id=request_id, used_at=now())
                )
        except IntegrityError:
            return False
        return True
