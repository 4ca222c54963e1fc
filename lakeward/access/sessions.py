"""Console sessions: signed, expiring tokens with a CSRF secret inside.

A session is a token ``<payload>.<signature>`` (HMAC-SHA256 under a key
derived from the master key), carried in an HttpOnly, SameSite=Strict cookie.
Its payload holds the user, the expiry and a CSRF secret that state-changing
requests must echo in the ``X-CSRF-Token`` header (the double-submit pattern:
another site can make the browser send the cookie, but cannot read the secret).
Logging out revokes the session id until it would have expired anyway; the
server keeps revocations in the IAM database (``RevokedSessions``), so that a
signed-out cookie stays refused after a restart and in every server process.
Resetting a user's password ends every session of theirs issued before it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import threading
import time
from dataclasses import dataclass

from sqlalchemy import delete, exists, insert, select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError

from lakeward.access.schema import revoked_sessions, session_cutoffs
from lakeward.errors import AccessDenied, Unauthenticated
from lakeward.sqlstate import writer

SESSION_COOKIE = "lakeward_session"
CSRF_COOKIE = "lakeward_csrf"
CSRF_HEADER = "x-csrf-token"
LIFETIME = 8 * 3600


@dataclass(frozen=True)
class Session:
    user: str
    session_id: str
    csrf: str
    expires: float
    issued: float = 0.0  # absent from tokens made before it was kept: as old as can be


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class RevokedSessions:
    """Signed-out session ids, in the IAM database (``iam_revoked_sessions``)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def add(self, session_id: str, expires: float, now: float) -> None:
        """Record a revocation, and drop those whose sessions have expired anyway."""
        table = revoked_sessions
        try:
            with writer(self._engine).begin() as conn:
                conn.execute(delete(table).where(table.c.expires <= now))
                if not conn.execute(
                    select(exists().where(table.c.session_id == session_id))
                ).scalar():
                    conn.execute(insert(table).values(session_id=session_id, expires=expires))
        except IntegrityError:
            pass  # another process revoked the same session at the same moment

    def end_all(self, user: str, now: float) -> None:
        """End every session of ``user`` issued until now (their password was reset)."""
        table = session_cutoffs
        with writer(self._engine).begin() as conn:
            conn.execute(delete(table).where(table.c.user == user))
            conn.execute(insert(table).values(user=user, since=now))

    def ended(self, session: Session) -> bool:
        """Signed out, or issued before its user's sessions were all ended."""
        revoked, cutoffs = revoked_sessions, session_cutoffs
        with self._engine.connect() as conn:
            found = conn.execute(select(
                exists().where(revoked.c.session_id == session.session_id)
                | exists().where(cutoffs.c.user == session.user, cutoffs.c.since >= session.issued)
            ))  # fmt: skip
            return bool(found.scalar())


class Sessions:
    def __init__(
        self, key: bytes, lifetime: float = LIFETIME, revoked: RevokedSessions | None = None
    ) -> None:
        """``revoked``: where sign-outs are kept; without it, in this object only."""
        self._key = key
        self.lifetime = lifetime
        self._store = revoked
        self._revoked: dict[str, float] = {}
        self._lock = threading.Lock()

    def issue(self, user: str, now: float | None = None) -> tuple[str, Session]:
        now = time.time() if now is None else now
        session = Session(
            user, secrets.token_urlsafe(16), secrets.token_urlsafe(24), now + self.lifetime, now
        )
        payload = _b64(json.dumps(session.__dict__, separators=(",", ":")).encode())
        return f"{payload}.{self._sign(payload)}", session

    def _sign(self, payload: str) -> str:
        return _b64(hmac.new(self._key, payload.encode(), hashlib.sha256).digest())

    def verify(self, token: str | None, now: float | None = None) -> Session:
        """The session a cookie carries; ``AccessDenied`` if missing, forged, expired or revoked."""
        if not token or "." not in token:
            raise Unauthenticated("not signed in")
        payload, _, signature = token.rpartition(".")
        if not hmac.compare_digest(signature, self._sign(payload)):
            raise Unauthenticated("the session is not valid; sign in again")
        try:
            session = Session(**json.loads(_unb64(payload)))
        except (ValueError, TypeError):
            raise Unauthenticated("the session is not valid; sign in again") from None
        now = time.time() if now is None else now
        if session.expires <= now:
            raise Unauthenticated("the session has expired; sign in again")
        with self._lock:
            revoked = session.session_id in self._revoked
        if revoked or (self._store is not None and self._store.ended(session)):
            raise Unauthenticated("the session has ended; sign in again")
        return session

    def check_csrf(self, session: Session, header: str | None) -> None:
        if not header or not hmac.compare_digest(header.encode(), session.csrf.encode()):
            raise AccessDenied("missing or wrong X-CSRF-Token for this session")

    def revoke(self, session: Session) -> None:
        now = time.time()
        if self._store is not None:
            self._store.add(session.session_id, session.expires, now)
        with self._lock:
            self._revoked = {k: v for k, v in self._revoked.items() if v > now}
            self._revoked[session.session_id] = session.expires
