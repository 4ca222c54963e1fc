"""A signed-out session stays refused: after a restart, in another server process, on PostgreSQL."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from lakeward import sqlstate
from lakeward.access import schema
from lakeward.access.control import AccessControl
from lakeward.access.sessions import (
    CSRF_HEADER,
    SESSION_COOKIE,
    RevokedSessions,
    Session,
    Sessions,
)
from lakeward.config import Settings, load_settings
from lakeward.errors import Unauthenticated
from lakeward.http.app import create_app

PASSWORD = "correct horse battery staple"


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    data_dir = tmp_path_factory.mktemp("revocation") / "data"
    settings = load_settings(data_dir=data_dir, env={})
    AccessControl(settings).principals.create_user("ana", password=PASSWORD)
    return settings


@contextmanager
def server(settings: Settings) -> Iterator[TestClient]:
    """A fresh server over the stack's data dir (what a restart, or another process, gives)."""
    with TestClient(create_app(settings)) as client:
        yield client


def test_a_signed_out_cookie_is_refused_after_a_restart(settings: Settings) -> None:
    with server(settings) as first, server(settings) as other:
        login = first.post("/auth/login", json={"username": "ana", "password": PASSWORD})
        assert login.status_code == 200
        cookie = login.cookies[SESSION_COOKIE]
        csrf = login.json()["csrf_token"]
        other.cookies.set(SESSION_COOKIE, cookie)
        assert other.get("/auth/whoami").json() == {"user": "ana"}
        out = first.post("/auth/logout", headers={CSRF_HEADER: csrf})
        assert out.status_code == 200
        # The other process learns of the sign-out at once.
        refused = other.get("/auth/whoami")
        assert refused.status_code == 401 and "the session has ended" in refused.text
        assert other.get("/api/bi/dashboards").status_code == 401

    with server(settings) as restarted:
        restarted.cookies.set(SESSION_COOKIE, cookie)
        refused = restarted.get("/auth/whoami")
        assert refused.status_code == 401 and "the session has ended" in refused.text
        page = restarted.get("/console/", follow_redirects=False)
        assert page.status_code == 303 and "/console/login" in page.headers["location"]
        # A new sign-in works as before.
        restarted.post("/auth/login", json={"username": "ana", "password": PASSWORD})
        assert restarted.get("/auth/whoami").json() == {"user": "ana"}


def test_revocations_are_shared_and_pruned(db: str | Path) -> None:
    engine = sqlstate.open_engine(db)
    schema.migrate(engine)
    sessions = Sessions(b"k" * 32, lifetime=3600, revoked=RevokedSessions(engine))
    token, session = sessions.issue("ana")
    _short_token, short = sessions.issue("ana", now=time.time() - 3599.5)
    sessions.revoke(short)
    sessions.revoke(session)
    sessions.revoke(session)  # twice changes nothing
    elsewhere = Sessions(b"k" * 32, lifetime=3600, revoked=RevokedSessions(engine))
    with pytest.raises(Unauthenticated, match="the session has ended"):
        elsewhere.verify(token)

    time.sleep(0.6)  # the short session has now expired: the next sign-out prunes it
    _other_token, other = sessions.issue("bob")
    sessions.revoke(other)
    with engine.connect() as conn:
        kept = {r.session_id for r in conn.execute(select(schema.revoked_sessions))}
    assert kept == {session.session_id, other.session_id}
    engine.dispose()


def test_a_version_1_database_gains_the_table(tmp_path: Path) -> None:
    engine = sqlstate.open_engine(tmp_path / "old.db")
    sqlstate.migrate(engine, schema.COMPONENT, schema.MIGRATIONS[:1], label="access")
    assert schema.migrate(engine) == 1
    revoked = RevokedSessions(engine)
    now = time.time()
    revoked.add("s1", now + 60, now)
    assert revoked.ended(Session("ana", "s1", "c", now + 60, now))
    assert not revoked.ended(Session("ana", "s2", "c", now + 60, now))
    engine.dispose()


def test_a_password_reset_ends_the_users_sessions(settings: Settings) -> None:
    """The sessions of a user whose password was reset (say, after it leaked) end at once,
    in every server process; other users' do not, and the new password signs in."""
    from lakeward.access.iam import IamService

    access = AccessControl(settings)
    access.principals.create_user("carl", password=PASSWORD)
    with server(settings) as first, server(settings) as other:
        carl = first.post("/auth/login", json={"username": "carl", "password": PASSWORD})
        ana = other.post("/auth/login", json={"username": "ana", "password": PASSWORD})
        assert carl.status_code == ana.status_code == 200
        carl_cookie, ana_cookie = carl.cookies[SESSION_COOKIE], ana.cookies[SESSION_COOKIE]
        first.cookies.clear()
        other.cookies.clear()
        other.cookies.set(SESSION_COOKIE, carl_cookie)
        assert other.get("/auth/whoami").json() == {"user": "carl"}

        IamService(access).reset_password("carl", "A new passphrase, 2nd")

        refused = other.get("/auth/whoami")
        assert refused.status_code == 401 and "the session has ended" in refused.text
        other.cookies.set(SESSION_COOKIE, ana_cookie)
        assert other.get("/auth/whoami").json() == {"user": "ana"}
        again = first.post(
            "/auth/login", json={"username": "carl", "password": "A new passphrase, 2nd"}
        )
        assert again.status_code == 200
        first.cookies.set(SESSION_COOKIE, again.cookies[SESSION_COOKIE])
        assert first.get("/auth/whoami").json() == {"user": "carl"}
