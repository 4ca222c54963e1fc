"""Managed policies' versions, as IAM keeps them: edit a policy, and undo the edit.

A new document is a new version (``v2``, ``v3``...); the default version is the one that
applies, and its document is also the policy's own, so authorization reads one row as
before. At most five versions are kept (IAM's limit): a sixth is refused until one is
deleted. The default version cannot be deleted; a number is never given twice.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from sqlalchemy import func, insert, select, update
from sqlalchemy.engine import Connection, Engine

from lakeward.access.policy import parse_policy
from lakeward.access.schema import policies, policy_versions, require_principal
from lakeward.errors import InvalidRequest, ResourceNotFound
from lakeward.sqlstate import as_utc

MOST_VERSIONS = 5


class PolicyVersion(NamedTuple):
    version_id: str  # "v1", "v2"...
    document: dict[str, Any]
    is_default: bool
    created: datetime


class PolicyVersionOperations:
    """The versions of the managed policies in ``Principals``' database."""

    engine: Engine

    if TYPE_CHECKING:

        def _change(self) -> AbstractContextManager[Connection]: ...

    def list_policy_versions(self, policy: str) -> list[PolicyVersion]:
        """The versions kept, the newest first."""
        with self.engine.connect() as conn:
            require_principal(conn, "policy", policy)
            return list(_versions(conn, policy))

    def get_policy_version(self, policy: str, version_id: str) -> PolicyVersion:
        number = _number(version_id)
        for found in self.list_policy_versions(policy):
            if found.version_id == f"v{number}":
                return found
        raise ResourceNotFound(f"policy {policy} has no version {version_id}")

    def create_policy_version(
        self, policy: str, document: str | Mapping[str, Any], set_as_default: bool = False
    ) -> PolicyVersion:
        source = json.dumps(parse_policy(document).source)
        moment = datetime.now(UTC)
        with self._change() as conn:
            require_principal(conn, "policy", policy)
            kept = list(_versions(conn, policy))
            if len(kept) >= MOST_VERSIONS:
                raise InvalidRequest(
                    f"LimitExceeded: policy {policy} has {MOST_VERSIONS} versions, the most "
                    "kept; delete one before you create another"
                )
            highest = conn.execute(
                select(func.max(policy_versions.c.version)).where(
                    policy_versions.c.policy_name == policy
                )
            ).scalar_one()
            number = (highest or 0) + 1
            if set_as_default:
                _clear_default(conn, policy)
                conn.execute(
                    update(policies).where(policies.c.name == policy).values(document=source)
                )
            conn.execute(
                insert(policy_versions).values(
                    policy_name=policy,
                    version=number,
                    document=source,
                    is_default=set_as_default,
                    created=moment,
                )  # fmt: skip
            )
        return PolicyVersion(f"v{number}", json.loads(source), set_as_default, moment)

    def set_default_policy_version(self, policy: str, version_id: str) -> None:
        """Make a kept version the one that applies (an edit undone, or redone)."""
        number = _number(version_id)
        with self._change() as conn:
            require_principal(conn, "policy", policy)
            document = _document(conn, policy, number, version_id)
            _clear_default(conn, policy)
            conn.execute(_version(policy, number).values(is_default=True))
            conn.execute(
                update(policies).where(policies.c.name == policy).values(document=document)
            )

    def delete_policy_version(self, policy: str, version_id: str) -> None:
        number = _number(version_id)
        with self._change() as conn:
            require_principal(conn, "policy", policy)
            _document(conn, policy, number, version_id)
            default = conn.execute(
                select(policy_versions.c.is_default).where(
                    policy_versions.c.policy_name == policy, policy_versions.c.version == number
                )
            ).scalar_one()
            if default:
                raise InvalidRequest(
                    f"DeleteConflict: {version_id} is the default version of policy {policy}; "
                    "make another the default first"
                )
            # The row stays, without its document: the number is not given again.
            conn.execute(_version(policy, number).values(document=None))


def add_first_version(conn: Connection, policy: str, source: str, moment: datetime) -> None:
    """A new policy's document, as its default version v1."""
    conn.execute(
        insert(policy_versions).values(
            policy_name=policy, version=1, document=source, is_default=True, created=moment
        )
    )


def _versions(conn: Connection, policy: str) -> Iterator[PolicyVersion]:
    rows = conn.execute(
        select(policy_versions)
        .where(policy_versions.c.policy_name == policy, policy_versions.c.document.is_not(None))
        .order_by(policy_versions.c.version.desc())
    ).all()
    for row in rows:
        yield PolicyVersion(
            f"v{row.version}", json.loads(row.document), bool(row.is_default), as_utc(row.created)
        )


def _number(version_id: str) -> int:
    text = version_id.strip().lower()
    if not (text.startswith("v") and text[1:].isdigit() and int(text[1:]) > 0):
        raise InvalidRequest(f"a policy version is v1, v2..., not {version_id!r}")
    return int(text[1:])


def _version(policy: str, number: int) -> Any:
    return update(policy_versions).where(
        policy_versions.c.policy_name == policy, policy_versions.c.version == number
    )


def _apply(conn: Connection, policy: str, document: str) -> None:
    """The default version's document as the policy's own: what authorization reads."""
    conn.execute(update(policies).where(policies.c.name == policy).values(document=document))


def _clear_default(conn: Connection, policy: str) -> None:
    conn.execute(
        update(policy_versions)
        .where(policy_versions.c.policy_name == policy)
        .values(is_default=False)
    )


def _document(conn: Connection, policy: str, number: int, version_id: str) -> str:
    document = conn.execute(
        select(policy_versions.c.document).where(
            policy_versions.c.policy_name == policy, policy_versions.c.version == number
        )
    ).scalar_one_or_none()
    if document is None:
        raise ResourceNotFound(f"policy {policy} has no version {version_id}")
    return str(document)
