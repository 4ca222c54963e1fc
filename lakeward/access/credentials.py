"""Credentials of IAM users: console passwords (argon2id, lockout) and access keys.

Passwords are hashed with argon2id; failed logins lock a user out for a time that
doubles with each lockout in a row. Access key secrets are sealed with AES-GCM under
a key derived from the stack's master key, the key id bound in. ``Principals``
(principals.py) takes these operations; they share its database and writer.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import math
import secrets
import threading
import time
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, NamedTuple

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from sqlalchemy import bindparam, delete, func, insert, or_, select, update
from sqlalchemy.engine import Connection, Engine

from lakeward.access.schema import access_keys, require_principal, role_sessions, users
from lakeward.errors import AccessDenied, ConfigError, InvalidRequest, ResourceNotFound
from lakeward.sqlstate import as_utc

MAX_ACCESS_KEYS = 2  # IAM's limit: enough to rotate without a gap
LOCKOUT_AFTER = 5  # consecutive failed logins
LOCKOUT_FIRST = 30  # seconds; doubles with each lockout in a row
LOCKOUT_MAX = 3600
# AWS's prefix for temporary access key ids: tools tell them from long-term keys by it.
SESSION_KEY_PREFIX = "ASIA"
USAGE_FLUSH_SECONDS = 60.0  # how long key usage may wait in memory before it is written


class AccessKey(NamedTuple):
    key_id: str
    status: str  # "Active" or "Inactive", as IAM says it
    created: datetime
    last_used: datetime | None


class RoleSession(NamedTuple):
    """Temporary credentials as issued: the only time the secret and token are seen."""

    key_id: str
    secret: str
    token: str
    role: str
    session_name: str
    issued: datetime
    expires: datetime


class StoredSession(NamedTuple):
    role: str
    session_name: str
    secret: str
    token_hash: str
    expires: datetime

    def accepts(self, token: str | None) -> bool:
        return token is not None and hmac.compare_digest(_token_hash(token), self.token_hash)


def _token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class CredentialOperations:
    """Passwords and access keys of the users in ``Principals``' database."""

    engine: Engine
    _writer: Engine
    _hasher: PasswordHasher
    _aead: AESGCM
    _dummy_hash: str | None
    _usage: dict[str, datetime]
    _usage_lock: threading.Lock
    _usage_flushed: float

    if TYPE_CHECKING:

        def _change(self) -> AbstractContextManager[Connection]: ...

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
        now = as_utc(now or datetime.now(UTC))
        with self.engine.connect() as conn:
            query = select(users.c.password_hash, users.c.locked_until).where(users.c.name == name)
            row = conn.execute(query).first()
        if row is not None and row.locked_until is not None:
            wait = (as_utc(row.locked_until) - now).total_seconds()
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

    def create_access_key(self, user: str) -> tuple[str, str]:
        """A new active key: (key id, secret). The secret is only ever returned here."""
        key_id = "AKLW" + base64.b32encode(secrets.token_bytes(10)).decode()  # 16 characters
        secret = secrets.token_urlsafe(30)  # 40 characters
        with self._change() as conn:
            require_principal(conn, "user", user)
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
            require_principal(conn, "user", user)
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

    # -- temporary credentials (sts:AssumeRole) ------------------------------

    def issue_role_session(self, role: str, session_name: str, seconds: int) -> RoleSession:
        """New temporary credentials for ``role``, valid ``seconds`` from now.

        Issuing changes no permission, so it does not bump the IAM generation.
        """
        key_id = SESSION_KEY_PREFIX + base64.b32encode(secrets.token_bytes(10)).decode()
        secret = secrets.token_urlsafe(30)
        token = base64.b64encode(secrets.token_bytes(96)).decode()
        issued = datetime.now(UTC).replace(microsecond=0)
        expires = issued + timedelta(seconds=seconds)
        with self._writer.begin() as conn:
            require_principal(conn, "role", role)
            conn.execute(delete(role_sessions).where(role_sessions.c.expires <= issued))
            conn.execute(
                insert(role_sessions).values(
                    key_id=key_id,
                    role=role,
                    session_name=session_name,
                    secret=self._seal(key_id, secret),
                    token_hash=_token_hash(token),
                    issued=issued,
                    expires=expires,
                )
            )
        return RoleSession(key_id, secret, token, role, session_name, issued, expires)

    def lookup_role_session(self, key_id: str) -> StoredSession | None:
        """The session whose temporary key this is (expired or not), else None."""
        with self.engine.connect() as conn:
            row = conn.execute(
                select(role_sessions).where(role_sessions.c.key_id == key_id)
            ).first()
        if row is None:
            return None
        return StoredSession(
            row.role,
            row.session_name,
            self._open(key_id, row.secret),
            row.token_hash,
            as_utc(row.expires),
        )

    def revoke_role_sessions(self, role: str) -> int:
        """End every session of ``role`` at once; how many there were."""
        with self._change() as conn:
            require_principal(conn, "role", role)
            gone = delete(role_sessions).where(role_sessions.c.role == role)
            return int(conn.execute(gone).rowcount or 0)

    def mark_key_used(self, key_id: str, when: datetime) -> None:
        """Note a key's use; written in batches, as this comes with every request."""
        when = as_utc(when)
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
    used = None if row.last_used is None else as_utc(row.last_used)
    return AccessKey(row.key_id, "Active" if row.active else "Inactive", as_utc(row.created), used)
