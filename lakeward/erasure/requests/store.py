"""``RequestStore``: requests and their progress, changed by compare-and-set on the state."""

from __future__ import annotations

import json
import os
import secrets
import socket
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import (
    delete,
    insert,
    select,
    update,
)
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError

# States of a request. Terminal ones end it; the worker acts on the others.
from lakeward.erasure.requests.model import (
    COMPLETED,
    EXPIRED,
    FAILED,
    PENDING,
    REJECTED,
    REQUESTED,
    STOPPED,
    TERMINAL,
    TODO,
    Request,
    TargetRow,
    Transition,
    now,
)
from lakeward.erasure.requests.schema import (
    COMPONENT,
    MIGRATIONS,
    leases,
    link_uses,
    requests_table,
    targets_table,
    transitions,
)
from lakeward.errors import InvalidRequest, ResourceNotFound
from lakeward.sqlstate import as_utc_or_none, migrate, open_engine, writer

LEASE_SECONDS = 120.0


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


class RequestStore:
    """Requests and their progress. Thread-safe; processes may share the database."""

    def __init__(self, url_or_path: str | Path) -> None:
        self.engine: Engine = open_engine(url_or_path)
        migrate(self.engine, COMPONENT, MIGRATIONS, label="erasure requests")
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
            # An error belongs to the step it stopped (a mail that would not go): past once
            # the request moves on, so a finished request does not show it as its own.
            values.setdefault("last_error", None)
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
                Transition(r.from_state, r.to_state, as_utc_or_none(r.at) or now(), r.actor, r.note)
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
                held = row.owner != owner and (as_utc_or_none(row.until) or moment) > moment
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
