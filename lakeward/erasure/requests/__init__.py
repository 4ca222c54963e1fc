"""Erasure requests, their transitions and per-target progress, in the index database.

Tables (prefixed ``erasure_``, migrated under their own component so they
share the index's database, SQLite or PostgreSQL; schema.py):

* ``erasure_requests`` -- one row per request: state, user ids, who asked,
  the report's digest, approval and notification bookkeeping;
* ``erasure_transitions`` -- every state change, with who made it and why;
* ``erasure_targets`` -- the places a request purges, each with its status and
  the executor's outcome, so that a restarted worker resumes where it stopped;
* ``erasure_link_uses`` -- approval links already used (single use);
* ``erasure_leases`` -- which worker is taking a request's steps, until when.

Every state change is a compare-and-set on the current state inside one
transaction (store.py), so two workers (or a worker and an approver) never both
act. The records and states are in model.py.
"""

from lakeward.erasure.requests.model import (
    APPROVED,
    AWAITING_APPROVAL,
    COMPLETED,
    DONE,
    ERROR,
    EXPIRED,
    FAILED,
    PENDING,
    PURGING,
    REJECTED,
    REPORT_READY,
    REQUESTED,
    STOPPED,
    TERMINAL,
    TODO,
    VERIFYING,
    Request,
    TargetRow,
    Transition,
    worker_name,
)
from lakeward.erasure.requests.store import (
    RequestStore,
)

__all__ = [
    "APPROVED",
    "AWAITING_APPROVAL",
    "COMPLETED",
    "DONE",
    "ERROR",
    "EXPIRED",
    "FAILED",
    "PENDING",
    "PURGING",
    "REJECTED",
    "REPORT_READY",
    "REQUESTED",
    "Request",
    "RequestStore",
    "STOPPED",
    "TERMINAL",
    "TODO",
    "TargetRow",
    "Transition",
    "VERIFYING",
    "worker_name",
]
