"""The tables of erasure requests and their migrations (see the package docstring)."""

from __future__ import annotations

from collections.abc import Callable

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
)
from sqlalchemy.engine import Connection

# States of a request. Terminal ones end it; the worker acts on the others.

metadata = MetaData()
COMPONENT = "erasure-requests"

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
