"""The IAM principal store: users, access keys, groups, roles and their policies.

A SQLite file in the data dir by default, PostgreSQL when given a
``postgresql://`` URL (SQLAlchemy Core; the tables and migrations are in
``schema``). Names follow IAM's rules, and so do the refusals: a group still
in use, a policy still attached, a third access key, the last administrator.

``policies_for_user`` is read on every request, so it is one query, and every
change that can alter a decision bumps ``generation()``: callers cache the
policies and compare one number to know when to read them again, whichever
process made the change.
"""

from __future__ import annotations

import base64
import json
import math
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple

from argon2 import PasswordHasher, Type
from argon2.exceptions import InvalidHashError, VerificationError
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from sqlalchemy import (
    Select,
    bindparam,
    delete,
    func,
    insert,
    literal_column,
    or_,
    select,
    union_all,
    update,
)
from sqlalchemy.engine import Connection

from lakeward.access.policy import parse_policy
from lakeward.access.schema import (
    ATTACHMENTS,
    INLINE,
    PRINCIPALS,
    access_keys,
    generation,
    group_members,
    groups,
    migrate,
    open_engine,
    policies,
    roles,
    users,
    writer,
)
from lakeward.errors import AccessDenied, ConfigError, InvalidRequest, ResourceNotFound

# A user with one of these managed policies (directly or through a group) is an
# administrator; the last one cannot be removed, or nobody could manage IAM.
ADMIN_POLICIES = frozenset({"AdministratorAccess"})
MAX_ACCESS_KEYS = 2  # IAM's limit: enough to rotate without a gap
LOCKOUT_AFTER = 5  # consecutive failed logins
LOCKOUT_FIRST = 30  # seconds; doubles with each lockout in a row
LOCKOUT_MAX = 3600
USAGE_FLUSH_SECONDS = 60.0  # how long key usage may wait in memory before it is written

_NAME = re.compile(r"[A-Za-z0-9+=,.@_-]+")
_TABLES = {**PRINCIPALS, "policy": policies}


class User(NamedTuple):
    name: str
    created: datetime
    has_password: bool


class AccessKey(NamedTuple):
    key_id: str
    status: str  # "Active" or "Inactive", as IAM says it
    created: datetime
    last_used: datetime | None


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


class Principals:
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
        self._dummy_hash: str | None = None
        self._usage: dict[str, datetime] = {}
        self._usage_lock = threading.Lock()
        self._usage_flushed = time.monotonic()

    def close(self) -> None:
        self.flush_key_usage()
        self.engine.dispose()

    def generation(self) -> int:
        query = select(generation.c.value).where(generation.c.id == 1)
        with self.engine.connect() as conn:
            return int(conn.execute(query).scalar_one())

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
            _require(conn, "user", name)
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

    def set_password(self, name: str, password: str | None) -> None:
        """Set (or with None, remove) the password; this also lifts a lockout."""
        hashed = None if password is None else self._hash(password)
        with self._writer.begin() as conn:
            found = conn.execute(
                update(users)
                .where(users.c.name == name)
                .values(password_hash=hashed, failed_logins=0, lockouts=0, locked_until=None)
            )
            if found.rowcount == 0:
                raise ResourceNotFound(f"user {name} does not exist")

    def check_password(self, name: str, password: str, *, now: datetime | None = None) -> bool:
        now = _as_utc(now or datetime.now(UTC))
        with self.engine.connect() as conn:
            query = select(users.c.password_hash, users.c.locked_until).where(users.c.name == name)
            row = conn.execute(query).first()
        if row is not None and row.locked_until is not None:
            wait = (_as_utc(row.locked_until) - now).total_seconds()
            if wait > 0:
                raise AccessDenied(f"too many failed logins; try again in {math.ceil(wait)} s")
        stored = None if row is None else row.password_hash
        # Without a hash of its own, verify against a dummy one all the same, so the
        # time taken does not tell whether the user exists.
        ok = self._verify(stored or self._dummy(), password) and stored is not None
        values: dict[str, Any] = {"failed_logins": 0, "lockouts": 0, "locked_until": None}
        if ok and self._hasher.check_needs_rehash(stored or ""):
            values["password_hash"] = self._hasher.hash(password)  # the parameters were raised
        with self._writer.begin() as conn:
            if ok:
                conn.execute(update(users).where(users.c.name == name).values(**values))
            else:
                # Unknown users go through the same (empty) update, for the same timing.
                _record_failure(conn, name, now)
        return ok

    # -- access keys ----------------------------------------------------------

    def create_access_key(self, user: str) -> tuple[str, str]:
        """A new active key: (key id, secret). The secret is only ever returned here."""
        key_id = "AKLW" + base64.b32encode(secrets.token_bytes(10)).decode()  # 16 characters
        secret = secrets.token_urlsafe(30)  # 40 characters
        with self._change() as conn:
            _require(conn, "user", user)
            owned = select(func.count()).where(access_keys.c.user_name == user)
            if conn.execute(owned).scalar_one() >= MAX_ACCESS_KEYS:
                raise InvalidRequest(
                    f"user {user} already has {MAX_ACCESS_KEYS} access keys, the most allowed; "
                    "delete one first"
                )
            row = {"key_id": key_id, "user_name": user, "secret": self._seal(key_id, secret)}
            conn.execute(insert(access_keys).values(**row, active=True, created=datetime.now(UTC)))
        return key_id, secret

    def list_access_keys(self, user: str) -> list[AccessKey]:
        self.flush_key_usage()
        query = (
            select(access_keys)
            .where(access_keys.c.user_name == user)
            .order_by(access_keys.c.created, access_keys.c.key_id)
        )
        with self.engine.connect() as conn:
            _require(conn, "user", user)
            rows = conn.execute(query).all()
        return [_access_key(row) for row in rows]

    def update_access_key(self, key_id: str, active: bool) -> None:
        with self._change() as conn:
            change = update(access_keys).where(access_keys.c.key_id == key_id)
            if conn.execute(change.values(active=active)).rowcount == 0:
                raise ResourceNotFound(f"access key {key_id} does not exist")

    def delete_access_key(self, key_id: str) -> None:
        with self._change() as conn:
            gone = delete(access_keys).where(access_keys.c.key_id == key_id)
            if conn.execute(gone).rowcount == 0:
                raise ResourceNotFound(f"access key {key_id} does not exist")

    def lookup_key(self, key_id: str) -> tuple[str, str] | None:
        """(user name, secret) of an active key, else None."""
        query = (
            select(access_keys.c.user_name, access_keys.c.secret)
            .join(users, users.c.name == access_keys.c.user_name)
            .where(access_keys.c.key_id == key_id, access_keys.c.active.is_(True))
        )
        with self.engine.connect() as conn:
            row = conn.execute(query).first()
        return None if row is None else (row.user_name, self._open(key_id, row.secret))

    def mark_key_used(self, key_id: str, when: datetime) -> None:
        """Note a key's use; written in batches, as this comes with every request."""
        when = _as_utc(when)
        with self._usage_lock:
            previous = self._usage.get(key_id)
            self._usage[key_id] = when if previous is None else max(previous, when)
            due = time.monotonic() - self._usage_flushed >= USAGE_FLUSH_SECONDS
        if due:
            self.flush_key_usage()

    def flush_key_usage(self) -> None:
        with self._usage_lock:
            pending, self._usage = self._usage, {}
            self._usage_flushed = time.monotonic()
        if not pending:
            return
        later = or_(access_keys.c.last_used.is_(None), access_keys.c.last_used < bindparam("when"))
        change = (
            update(access_keys)
            .where(access_keys.c.key_id == bindparam("key"), later)
            .values(last_used=bindparam("when"))
        )
        with self._writer.begin() as conn:
            conn.execute(change, [{"key": k, "when": w} for k, w in pending.items()])

    # -- groups ---------------------------------------------------------------

    def create_group(self, name: str) -> None:
        _check_name("group", name)
        with self._change() as conn:
            _refuse_existing(conn, "group", name)
            conn.execute(insert(groups).values(name=name, created=datetime.now(UTC)))

    def delete_group(self, name: str) -> None:
        """Refused while the group has members or policies: that would change their access."""
        with self._change() as conn:
            _require(conn, "group", name)
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
            _require(conn, "group", group)
            _require(conn, "user", user)
            if user not in _names(conn, group_members, "group_name", group, "user_name"):
                conn.execute(insert(group_members).values(group_name=group, user_name=user))

    def remove_user_from_group(self, user: str, group: str) -> None:
        with self._change() as conn:
            _require(conn, "group", group)
            _require(conn, "user", user)
            with self._keeping_an_admin(conn, f"user {user} is the last administrator"):
                gone = delete(group_members).where(
                    group_members.c.group_name == group, group_members.c.user_name == user
                )
                if conn.execute(gone).rowcount == 0:
                    raise ResourceNotFound(f"user {user} is not in group {group}")

    def list_groups(self) -> list[Group]:
        with self.engine.connect() as conn:
            rows = conn.execute(select(groups).order_by(groups.c.name)).all()
        return [Group(r.name, _as_utc(r.created)) for r in rows]

    def groups_of(self, user: str) -> list[str]:
        with self.engine.connect() as conn:
            _require(conn, "user", user)
            return _names(conn, group_members, "user_name", user, "group_name")

    def members_of(self, group: str) -> list[str]:
        with self.engine.connect() as conn:
            _require(conn, "group", group)
            return _names(conn, group_members, "group_name", group, "user_name")

    # -- roles ----------------------------------------------------------------

    def create_role(self, name: str, description: str = "") -> None:
        _check_name("role", name)
        with self._change() as conn:
            _refuse_existing(conn, "role", name)
            values = {"name": name, "description": description, "created": datetime.now(UTC)}
            conn.execute(insert(roles).values(**values))

    def delete_role(self, name: str) -> None:
        """Its attachments and inline policies go with it (foreign keys cascade)."""
        with self._change() as conn:
            if conn.execute(delete(roles).where(roles.c.name == name)).rowcount == 0:
                raise ResourceNotFound(f"role {name} does not exist")

    def list_roles(self) -> list[Role]:
        with self.engine.connect() as conn:
            rows = conn.execute(select(roles).order_by(roles.c.name)).all()
        return [Role(r.name, r.description, _as_utc(r.created)) for r in rows]

    # -- managed policies -----------------------------------------------------

    def create_policy(
        self, name: str, document: str | Mapping[str, Any], description: str = ""
    ) -> ManagedPolicy:
        _check_name("policy", name, 128)
        source = _validated(document)
        with self._change() as conn:
            _refuse_existing(conn, "policy", name)
            values = {"name": name, "document": source, "description": description}
            conn.execute(insert(policies).values(**values, created=datetime.now(UTC)))
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

    def delete_policy(self, name: str) -> None:
        with self._change() as conn:
            _require(conn, "policy", name)
            attached = [
                f"{kind}/{principal}"
                for kind, table in ATTACHMENTS.items()
                for principal in _names(conn, table, "policy_name", name, "principal")
            ]
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
            _require(conn, kind, principal)
            _require(conn, "policy", policy)
            if policy not in _names(conn, table, "principal", principal):
                conn.execute(insert(table).values(principal=principal, policy_name=policy))

    def _detach(self, kind: str, principal: str, policy: str) -> None:
        table = ATTACHMENTS[kind]
        with self._change() as conn:
            _require(conn, kind, principal)
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
            _require(conn, kind, principal)
            conn.execute(delete(table).where(table.c.principal == principal, table.c.name == name))
            conn.execute(insert(table).values(principal=principal, name=name, document=source))

    def _delete_inline(self, kind: str, principal: str, name: str) -> None:
        table = INLINE[kind]
        with self._change() as conn:
            _require(conn, kind, principal)
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
        with self._writer.begin() as conn:
            bump = update(generation).where(generation.c.id == 1)
            conn.execute(bump.values(value=generation.c.value + 1))
            yield conn

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

    def _hash(self, password: str) -> str:
        if not isinstance(password, str) or not password:
            raise InvalidRequest("a password must be a non-empty string")
        return self._hasher.hash(password)

    def _verify(self, hashed: str, password: str) -> bool:
        try:
            return self._hasher.verify(hashed, password)
        except (VerificationError, InvalidHashError):
            return False

    def _dummy(self) -> str:
        if self._dummy_hash is None:
            self._dummy_hash = self._hasher.hash(secrets.token_urlsafe(30))
        return self._dummy_hash

    def _seal(self, key_id: str, secret: str) -> bytes:
        # The key id is bound in as associated data: a sealed secret copied onto
        # another key's row does not open.
        nonce = secrets.token_bytes(12)
        return nonce + self._aead.encrypt(nonce, secret.encode(), key_id.encode())

    def _open(self, key_id: str, sealed: bytes) -> str:
        try:
            return self._aead.decrypt(sealed[:12], sealed[12:], key_id.encode()).decode()
        except InvalidTag:
            raise ConfigError(
                f"the secret of access key {key_id} does not decrypt: the encryption key "
                "differs from the one it was stored with"
            ) from None


def _check_name(kind: str, name: str, longest: int = 64) -> None:
    if not isinstance(name, str) or len(name) > longest or not _NAME.fullmatch(name):
        raise InvalidRequest(
            f"invalid {kind} name {name!r}: use 1 to {longest} letters, digits or +=,.@_-"
        )


def _require(conn: Connection, kind: str, name: str) -> None:
    table = _TABLES[kind]
    if conn.execute(select(table.c.name).where(table.c.name == name)).first() is None:
        raise ResourceNotFound(f"{kind} {name} does not exist")


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


def _validated(document: str | Mapping[str, Any]) -> str:
    """The document as JSON text, after the policy language has accepted it."""
    return json.dumps(parse_policy(document).source)


def _record_failure(conn: Connection, name: str, now: datetime) -> None:
    failed = update(users).where(users.c.name == name)
    conn.execute(failed.values(failed_logins=users.c.failed_logins + 1))
    query = select(users.c.failed_logins, users.c.lockouts).where(users.c.name == name)
    row = conn.execute(query).first()
    if row is None or row.failed_logins < LOCKOUT_AFTER:
        return
    lockouts = row.lockouts + 1
    backoff = min(LOCKOUT_FIRST * 2 ** min(lockouts - 1, 16), LOCKOUT_MAX)
    conn.execute(
        failed.values(
            failed_logins=0, lockouts=lockouts, locked_until=now + timedelta(seconds=backoff)
        )
    )


def _access_key(row: Any) -> AccessKey:
    used = None if row.last_used is None else _as_utc(row.last_used)
    return AccessKey(row.key_id, "Active" if row.active else "Inactive", _as_utc(row.created), used)


def _user(row: Any) -> User:
    return User(row.name, _as_utc(row.created), row.password_hash is not None)


def _as_utc(value: datetime) -> datetime:
    # SQLite hands datetimes back without their zone; a naive time given to us is UTC.
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
