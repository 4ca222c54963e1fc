"""Erasure requests as records: their states, transitions and per-target progress."""

from __future__ import annotations

import json
import os
import secrets
import socket
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from lakeward.sqlstate import as_utc_or_none

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


def now() -> datetime:
    return datetime.now(UTC)


def worker_name() -> str:
    """This process as a lease owner: ``host:pid:token``."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


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
            data[name] = as_utc_or_none(data[name])
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
