"""Console sign-in: password login, session cookies, CSRF, sign-out."""

from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response
from pydantic import BaseModel, Field

from lakeward.access.control import AccessControl
from lakeward.access.keys import derive_key, load_master_key
from lakeward.access.sessions import (
    CSRF_COOKIE,
    SESSION_COOKIE,
    RevokedSessions,
    Session,
    Sessions,
)
from lakeward.errors import Unauthenticated
from lakeward.http.sessions import session_dependency


class Login(BaseModel):
    username: str = Field(min_length=1, max_length=64)
    password: str = Field(min_length=1, max_length=1024)


def load_sessions(access: AccessControl) -> Sessions:
    """The server's session keeper; sign-outs are kept in the IAM database."""
    return Sessions(
        derive_key(load_master_key(access.settings.data_dir), "sessions"),
        revoked=RevokedSessions(access.principals.engine),
    )


def open_session(sessions: Sessions, user: str, response: Response, secure: bool) -> Session:
    """Issue a session for a signed-in user and set its cookies on the response."""
    token, session = sessions.issue(user)
    for name, value, httponly in (
        (SESSION_COOKIE, token, True),
        (CSRF_COOKIE, session.csrf, False),
    ):
        response.set_cookie(
            name,
            value,
            max_age=int(sessions.lifetime),
            httponly=httponly,
            samesite="strict",
            secure=secure,
            path="/",
        )
    return session


def close_session(sessions: Sessions, session: Session, response: Response) -> None:
    sessions.revoke(session)
    response.delete_cookie(SESSION_COOKIE, path="/")
    response.delete_cookie(CSRF_COOKIE, path="/")


def auth_router(access: AccessControl, sessions: Sessions | None = None) -> APIRouter:
    sessions = sessions or load_sessions(access)
    router = APIRouter(prefix="/auth", tags=["auth"])

    session_of = session_dependency(sessions)

    @router.post("/login")
    def login(body: Login, request: Request, response: Response) -> dict[str, str]:
        """Sign in with a console password; sets the session cookie."""
        if not access.principals.check_password(body.username, body.password):
            # One message whatever was wrong, so that it does not tell which users exist.
            raise Unauthenticated("wrong user name or password")
        session = open_session(sessions, body.username, response, request.url.scheme == "https")
        return {"user": session.user, "csrf_token": session.csrf}

    @router.get("/whoami")
    def whoami(session: Annotated[Session, Depends(session_of)]) -> dict[str, str]:
        return {"user": session.user}

    @router.post("/logout")
    def logout(
        session: Annotated[Session, Depends(session_of)], response: Response
    ) -> dict[str, str]:
        close_session(sessions, session, response)
        return {"user": session.user, "signed_out": "true"}

    return router
