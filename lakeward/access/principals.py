"""The IAM principal store: users, access keys, groups, roles and their policies.

A SQLite file in the data dir by default, PostgreSQL when given a
``postgresql://`` URL (SQLAlchemy Core; the tables and migrations are in
``schema``; passwords and access keys in ``credentials``). Names follow IAM's
rules, and so do the refusals: a group still in use, a policy still attached, a
third access key, the last administrator.

``policies_for_user`` is read on every request, so it is one query, and every
change that can alter a decision bumps ``generation()``: callers cache the
policies and compare one number to know when to read them again, whichever
process made the change.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

from argon2 import PasswordHasher, Type
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from sqlalchemy import (
    Select,
    delete,
    func,
    insert,
    literal_column,
    select,
    union_all,
    update,
)
from sqlalchemy.engine import Connection

from lakeward.access.credentials import CredentialOperations
from lakeward.access.generation import GenerationReader
from lakeward.access.policy import parse_policy
from lakeward.access.policy_versions import PolicyVersionOperations, add_first_version
from lakeward.access.schema import (
    ATTACHMENTS,
    INLINE,
    PRINCIPALS,
    generation,
    group_members,
    groups,
    migrate,
    policies,
    require_principal,
    role_trust,
    roles,
    users,
)
from lakeward.access.trust import TrustPolicy, account_trust, parse_trust_policy
from lakeward.errors import ConfigError, InvalidRequest, ResourceNotFound
from lakeward.sqlstate import as_utc, open_engine, writer

# A user with one of these managed policies (directly or through a group) is an
# administrator; the last one cannot be removed, or nobody could manage IAM.
ADMIN_POLICIES = frozenset({"AdministratorAccess"})

# IAM's bounds for a role's MaxSessionDuration, and its default (one hour).
MIN_SESSION_SECONDS = 900
DEFAULT_SESSION_SECONDS = 3600
MAX_SESSION_SECONDS = 12 * 3600

_NAME = re.compile(r"[A-Za-z0-9+=,.@_-]+")
_TABLES = {**PRINCIPALS, "policy": policies}


class User(NamedTuple):
    name: str
    created: datetime
    has_password: bool


class Group(NamedTuple):
    name: str
    created: datetime


class Role(NamedTuple):
    name: str
    description: str
    created: datetime


class ManagedPolicy(NamedTuple):
    name: str
    document: dict[str, Any]
    description: str
    attachment_count: int


class Principals(CredentialOperations, PolicyVersionOperations):
    """Users, groups, roles and policies; passwords and access keys in credentials.py, the
    policies' versions in policy_versions.py."""

    def __init__(
        self,
        url_or_path: str | Path,
        *,
        secret_key: bytes,
        is_admin: Callable[[str], bool] | None = None,
        password_hasher: PasswordHasher | None = None,
    ) -> None:
        if len(secret_key) != 32:
            raise ConfigError(f"the access-key encryption key is {len(secret_key)} bytes, not 32")
        # argon2id; by default with RFC 9106's low-memory parameters. Hashes made with
        # other parameters are redone at the next successful login.
        self._hasher = password_hasher or PasswordHasher()
        if self._hasher.type is not Type.ID:
            raise ConfigError("passwords are hashed with argon2id; the hasher given uses another")
        self._aead = AESGCM(secret_key)
        self._is_admin = is_admin
        self.engine = open_engine(url_or_path)
        migrate(self.engine)
        self._writer = writer(self.engine)
        self._generation = GenerationReader(self.engine)
        self._dummy_hash: str | None = None
        self.local_changes = 0  # changes made through this object (see ``_change``)
        self._usage: dict[str, datetime] = {}
        self._usage_lock = threading.Lock()
        self._usage_flushed = time.monotonic()

    def close(self) -> None:
        self.flush_key_usage()
        self._generation.close()
        self.engine.dispose()

    def generation(self) -> int:
        """The IAM generation now (see ``access/generation.py`` for how it is read)."""
        return self._generation.read()

    # -- users ----------------------------------------------------------------

    def create_user(self, name: str, password: str | None = None) -> User:
        _check_name("user", name)
        hashed = None if password is None else self._hash(password)
        now = datetime.now(UTC)
        with self._change() as conn:
            _refuse_existing(conn, "user", name)
            conn.execute(insert(users).values(name=name, password_hash=hashed, created=now))
        return User(name, now, hashed is not None)

    def delete_user(self, name: str) -> None:
        with self._change() as conn:
            require_principal(conn, "user", name)
            with self._keeping_an_admin(conn, f"user {name} is the last administrator"):
                conn.execute(delete(users).where(users.c.name == name))

    def get_user(self, name: str) -> User:
        with self.engine.connect() as conn:
            row = conn.execute(select(users).where(users.c.name == name)).first()
        if row is None:
            raise ResourceNotFound(f"user {name} does not exist")
        return _user(row)

    def list_users(self) -> list[User]:
        with self.engine.connect() as conn:
            return [_user(row) for row in conn.execute(select(users).order_by(users.c.name))]

    # -- groups ---------------------------------------------------------------

    def create_group(self, name: str) -> None:
        _check_name("group", name)
        with self._change() as conn:
            _refuse_existing(conn, "group", name)
            conn.execute(insert(groups).values(name=name, created=datetime.now(UTC)))

    def delete_group(self, name: str) -> None:
        """Refused while the group has members or policies: that would change their access."""
        with self._change() as conn:
            require_principal(conn, "group", name)
            uses = [
                ("members", _names(conn, group_members, "group_name", name, "user_name")),
                ("attached policies", _names(conn, ATTACHMENTS["group"], "principal", name)),
                ("inline policies", _names(conn, INLINE["group"], "principal", name, "name")),
            ]
            for what, found in uses:
                if found:
                    raise InvalidRequest(f"group {name} still has {what}: {', '.join(found)}")
            conn.execute(delete(groups).where(groups.c.name == name))

    def add_user_to_group(self, user: str, group: str) -> None:
        with self._change() as conn:
            require_principal(conn, "group", group)
            require_principal(conn, "user", user)
            if user not in _names(conn, group_members, "group_name", group, "user_name"):
                conn.execute(insert(group_members).values(group_name=group, user_name=user))

    def remove_user_from_group(self, user: str, group: str) -> None:
        with self._change() as conn:
            require_principal(conn, "group", group)
            require_principal(conn, "user", user)
            with self._keeping_an_admin(conn, f"user {user} is the last administrator"):
                gone = delete(group_members).where(
                    group_members.c.group_name == group, group_members.c.user_name == user
                )
                if conn.execute(gone).rowcount == 0:
                    raise ResourceNotFound(f"user {user} is not in group {group}")

    def list_groups(self) -> list[Group]:
        with self.engine.connect() as conn:
            rows = conn.execute(select(groups).order_by(groups.c.name)).all()
        return [Group(r.name, as_utc(r.created)) for r in rows]

    def groups_of(self, user: str) -> list[str]:
        with self.engine.connect() as conn:
            require_principal(conn, "user", user)
            return _names(conn, group_members, "user_name", user, "group_name")

    def members_of(self, group: str) -> list[str]:
        with self.engine.connect() as conn:
            require_principal(conn, "group", group)
            return _names(conn, group_members, "group_name", group, "user_name")

    # -- roles ----------------------------------------------------------------

    def create_role(
        self,
        name: str,
        description: str = "",
        trust_policy: str | Mapping[str, Any] | None = None,
        max_session_seconds: int = DEFAULT_SESSION_SECONDS,
    ) -> None:
        """A role; ``trust_policy`` says who may assume it (by default, whoever the
        account's own policies allow ``sts:AssumeRole`` on it)."""
        _check_name("role", name)
        trust = _trust_text(trust_policy)
        _check_max_session(max_session_seconds)
        with self._change() as conn:
            _refuse_existing(conn, "role", name)
            values = {"name": name, "description": description, "created": datetime.now(UTC)}
            conn.execute(insert(roles).values(**values))
            conn.execute(
                insert(role_trust).values(
                    role=name, document=trust, max_session_seconds=max_session_seconds
                )
            )

    def update_assume_role_policy(self, role: str, document: str | Mapping[str, Any]) -> None:
        """Replace the role's trust policy (IAM's UpdateAssumeRolePolicy)."""
        trust = _trust_text(document)
        with self._change() as conn:
            require_principal(conn, "role", role)
            found = conn.execute(select(role_trust.c.role).where(role_trust.c.role == role))
            if found.first() is None:
                conn.execute(
                    insert(role_trust).values(
                        role=role, document=trust, max_session_seconds=DEFAULT_SESSION_SECONDS
                    )
                )
            else:
                change = update(role_trust).where(role_trust.c.role == role)
                conn.execute(change.values(document=trust))

    def role_trust(self, role: str) -> tuple[TrustPolicy, int]:
        """The role's trust policy and the longest session it grants, in seconds."""
        with self.engine.connect() as conn:
            require_principal(conn, "role", role)
            row = conn.execute(select(role_trust).where(role_trust.c.role == role)).first()
        if row is None:  # made before roles had trust policies: the account's default
            return parse_trust_policy(account_trust()), DEFAULT_SESSION_SECONDS
        return parse_trust_policy(row.document), int(row.max_session_seconds)

    def delete_role(self, name: str) -> None:
        """Its attachments and inline policies go with it (foreign keys cascade)."""
        with self._change() as conn:
            if conn.execute(delete(roles).where(roles.c.name == name)).rowcount == 0:
                raise ResourceNotFound(f"role {name} does not exist")

    def list_roles(self) -> list[Role]:
        with self.engine.connect() as conn:
            rows = conn.execute(select(roles).order_by(roles.c.name)).all()
        return [Role(r.name, r.description, as_utc(r.created)) for r in rows]

    # -- managed policies -----------------------------------------------------

    def create_policy(
        self, name: str, document: str | Mapping[str, Any], description: str = ""
    ) -> ManagedPolicy:
        _check_name("policy", name, 128)
        source = _validated(document)
        moment = datetime.now(UTC)
        with self._change() as conn:
            _refuse_existing(conn, "policy", name)
            values = {"name": name, "document": source, "description": description}
            conn.execute(insert(policies).values(**values, created=moment))
            add_first_version(conn, name, source, moment)
        return ManagedPolicy(name, json.loads(source), description, 0)

    def get_policy(self, name: str) -> ManagedPolicy:
        with self.engine.connect() as conn:
            row = conn.execute(_policy_query().where(policies.c.name == name)).first()
        if row is None:
            raise ResourceNotFound(f"policy {name} does not exist")
        return ManagedPolicy(row.name, json.loads(row.document), row.description, row.attachments)

    def list_policies(self) -> list[ManagedPolicy]:
        with self.engine.connect() as conn:
            rows = conn.execute(_policy_query().order_by(policies.c.name)).all()
        return [
            ManagedPolicy(r.name, json.loads(r.document), r.description, r.attachments)
            for r in rows
        ]

    def attached_policies(self, kind: str, principal: str) -> list[str]:
        """The managed policies attached to a user, group or role, by name."""
        with self.engine.connect() as conn:
            require_principal(conn, kind, principal)
            return _names(conn, ATTACHMENTS[kind], "principal", principal, "policy_name")

    def attachments_of(self, policy: str) -> list[str]:
        """Where a managed policy is attached: ``user/ana``, ``group/Admins``..."""
        with self.engine.connect() as conn:
            require_principal(conn, "policy", policy)
            return _attachments(conn, policy)

    def delete_policy(self, name: str) -> None:
        with self._change() as conn:
            require_principal(conn, "policy", name)
            attached = _attachments(conn, name)
            if attached:
                raise InvalidRequest(f"policy {name} is still attached to: {', '.join(attached)}")
            conn.execute(delete(policies).where(policies.c.name == name))

    def attach_user_policy(self, user: str, policy: str) -> None:
        self._attach("user", user, policy)

    def detach_user_policy(self, user: str, policy: str) -> None:
        self._detach("user", user, policy)

    def attach_group_policy(self, group: str, policy: str) -> None:
        self._attach("group", group, policy)

    def detach_group_policy(self, group: str, policy: str) -> None:
        self._detach("group", group, policy)

    def attach_role_policy(self, role: str, policy: str) -> None:
        self._attach("role", role, policy)

    def detach_role_policy(self, role: str, policy: str) -> None:
        self._detach("role", role, policy)

    def _attach(self, kind: str, principal: str, policy: str) -> None:
        table = ATTACHMENTS[kind]
        with self._change() as conn:
            require_principal(conn, kind, principal)
            require_principal(conn, "policy", policy)
            if policy not in _names(conn, table, "principal", principal):
                conn.execute(insert(table).values(principal=principal, policy_name=policy))

    def _detach(self, kind: str, principal: str, policy: str) -> None:
        table = ATTACHMENTS[kind]
        with self._change() as conn:
            require_principal(conn, kind, principal)
            with self._keeping_an_admin(conn, f"{kind} {principal} holds the last administrator"):
                gone = delete(table).where(
                    table.c.principal == principal, table.c.policy_name == policy
                )
                if conn.execute(gone).rowcount == 0:
                    raise ResourceNotFound(f"policy {policy} is not attached to {kind} {principal}")

    # -- inline policies ------------------------------------------------------

    def put_user_policy(self, user: str, name: str, document: str | Mapping[str, Any]) -> None:
        self._put_inline("user", user, name, document)

    def put_group_policy(self, group: str, name: str, document: str | Mapping[str, Any]) -> None:
        self._put_inline("group", group, name, document)

    def put_role_policy(self, role: str, name: str, document: str | Mapping[str, Any]) -> None:
        self._put_inline("role", role, name, document)

    def delete_user_policy(self, user: str, name: str) -> None:
        self._delete_inline("user", user, name)

    def delete_group_policy(self, group: str, name: str) -> None:
        self._delete_inline("group", group, name)

    def delete_role_policy(self, role: str, name: str) -> None:
        self._delete_inline("role", role, name)

    def _put_inline(
        self, kind: str, principal: str, name: str, document: str | Mapping[str, Any]
    ) -> None:
        _check_name("policy", name, 128)
        source = _validated(document)
        table = INLINE[kind]
        with self._change() as conn:
            require_principal(conn, kind, principal)
            conn.execute(delete(table).where(table.c.principal == principal, table.c.name == name))
            conn.execute(insert(table).values(principal=principal, name=name, document=source))

    def _delete_inline(self, kind: str, principal: str, name: str) -> None:
        table = INLINE[kind]
        with self._change() as conn:
            require_principal(conn, kind, principal)
            gone = delete(table).where(table.c.principal == principal, table.c.name == name)
            if conn.execute(gone).rowcount == 0:
                raise ResourceNotFound(f"{kind} {principal} has no inline policy {name}")

    # -- what applies ---------------------------------------------------------

    def policies_for_user(self, user: str) -> list[tuple[str, dict[str, Any]]]:
        """Managed and inline policies, the user's own and its groups'; [] for an unknown user."""
        member = group_members.c.user_name == user
        via_group = group_members.c.group_name
        group_attached = ATTACHMENTS["group"]
        group_inline = INLINE["group"]
        return self._applying(
            _managed("user").where(ATTACHMENTS["user"].c.principal == user),
            _managed("group")
            .join(group_members, via_group == group_attached.c.principal)
            .where(member),
            _inline("user").where(INLINE["user"].c.principal == user),
            _inline("group")
            .join(group_members, via_group == group_inline.c.principal)
            .where(member),
        )

    def policies_for_role(self, role: str) -> list[tuple[str, dict[str, Any]]]:
        return self._applying(
            _managed("role").where(ATTACHMENTS["role"].c.principal == role),
            _inline("role").where(INLINE["role"].c.principal == role),
        )

    def _applying(self, *parts: Select[Any]) -> list[tuple[str, dict[str, Any]]]:
        with self.engine.connect() as conn:
            rows = conn.execute(union_all(*parts)).all()
        found: dict[str, str] = {}  # a managed policy reached twice counts once
        for kind, owner, name, document in rows:
            found[name if kind == "" else f"{kind}/{owner}/{name}"] = document
        managed = sorted(n for n in found if "/" not in n)
        inline = sorted(n for n in found if "/" in n)
        return [(n, json.loads(found[n])) for n in managed + inline]

    # -- internals ------------------------------------------------------------

    @contextmanager
    def _change(self) -> Iterator[Connection]:
        """A write transaction that bumps the generation, first of all.

        Bumping first also serializes writers on the generation row (PostgreSQL
        row lock, SQLite write lock), so the checks made inside hold until commit.
        """
        try:
            with self._writer.begin() as conn:
                bump = update(generation).where(generation.c.id == 1)
                conn.execute(bump.values(value=generation.c.value + 1))
                yield conn
        finally:
            # Seen by this process's caches without a read, even mid-request.
            self.local_changes += 1

    @contextmanager
    def _keeping_an_admin(self, conn: Connection, refusal: str) -> Iterator[None]:
        """Run a change; undo it (by raising) if it removed the last administrator."""
        before = self._any_admin(conn)
        yield
        if before and not self._any_admin(conn):
            raise InvalidRequest(f"{refusal}; make another user an administrator first")

    def _any_admin(self, conn: Connection) -> bool:
        direct = ATTACHMENTS["user"]
        via = ATTACHMENTS["group"]
        by_policy = union_all(
            select(direct.c.principal).where(direct.c.policy_name.in_(ADMIN_POLICIES)),
            select(group_members.c.user_name)
            .join(via, via.c.principal == group_members.c.group_name)
            .where(via.c.policy_name.in_(ADMIN_POLICIES)),
        )
        if conn.execute(by_policy.limit(1)).first() is not None:
            return True
        if self._is_admin is None:
            return False
        return any(self._is_admin(name) for name in conn.execute(select(users.c.name)).scalars())


def _check_name(kind: str, name: str, longest: int = 64) -> None:
    if not isinstance(name, str) or len(name) > longest or not _NAME.fullmatch(name):
        raise InvalidRequest(
            f"invalid {kind} name {name!r}: use 1 to {longest} letters, digits or +=,.@_-"
        )


def _refuse_existing(conn: Connection, kind: str, name: str) -> None:
    table = _TABLES[kind]
    if conn.execute(select(table.c.name).where(table.c.name == name)).first() is not None:
        raise InvalidRequest(f"{kind} {name} already exists")


def _names(
    conn: Connection, table: Any, key: str, value: str, column: str = "policy_name"
) -> list[str]:
    query = select(table.c[column]).where(table.c[key] == value).order_by(table.c[column])
    return list(conn.execute(query).scalars())


def _managed(kind: str) -> Select[Any]:
    table = ATTACHMENTS[kind]
    return select(
        literal_column("''").label("kind"),
        table.c.principal,
        policies.c.name,
        policies.c.document,
    ).join(policies, policies.c.name == table.c.policy_name)


def _inline(kind: str) -> Select[Any]:
    table = INLINE[kind]
    return select(literal_column(f"'{kind}'"), table.c.principal, table.c.name, table.c.document)


def _policy_query() -> Select[Any]:
    counts = [
        select(func.count()).where(t.c.policy_name == policies.c.name).scalar_subquery()
        for t in ATTACHMENTS.values()
    ]
    return select(policies, (counts[0] + counts[1] + counts[2]).label("attachments"))


def _trust_text(document: str | Mapping[str, Any] | None) -> str:
    """A trust policy as JSON text, after it has been checked."""
    return json.dumps(parse_trust_policy(account_trust() if document is None else document).source)


def _check_max_session(seconds: int) -> None:
    if not MIN_SESSION_SECONDS <= seconds <= MAX_SESSION_SECONDS:
        raise InvalidRequest(
            f"max session duration: {seconds} s is outside {MIN_SESSION_SECONDS} to "
            f"{MAX_SESSION_SECONDS} s (IAM's bounds for MaxSessionDuration)"
        )


def _validated(document: str | Mapping[str, Any]) -> str:
    """The document as JSON text, after the policy language has accepted it."""
    return json.dumps(parse_policy(document).source)


def _user(row: Any) -> User:
    return User(row.name, as_utc(row.created), row.password_hash is not None)


def _attachments(conn: Connection, policy: str) -> list[str]:
    return [
        f"{kind}/{principal}"
        for kind, table in ATTACHMENTS.items()
        for principal in _names(conn, table, "policy_name", policy, "principal")
    ]
