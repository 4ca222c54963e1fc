"""The one session check of console callers: the cookie, CSRF on state changes, who is asking.

    Signed = Annotated[Session, Depends(session_dependency(sessions))]

Used by the sign-in API (``/auth``), the BI API (``/api/bi``) and the console's
pages; the console passes its own CSRF check, which also reads the token from a
form field.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import Request
from starlette.concurrency import run_in_threadpool

from lakeward.access import current_principal, current_source
from lakeward.access.sessions import CSRF_HEADER, SESSION_COOKIE, Session, Sessions

SAFE_METHODS = ("GET", "HEAD", "OPTIONS")

CsrfCheck = Callable[[Request, Session], Awaitable[None]]
"""Raises ``AccessDenied`` unless the request carries the session's CSRF secret."""


def header_csrf(sessions: Sessions) -> CsrfCheck:
    """The CSRF secret in the ``X-CSRF-Token`` header (what fetch calls send)."""

    async def check(request: Request, session: Session) -> None:
        sessions.check_csrf(session, request.headers.get(CSRF_HEADER))

    return check


def session_dependency(
    sessions: Sessions, csrf: CsrfCheck | None = None
) -> Callable[[Request], Awaitable[Session]]:
    """A dependency: the request's session, its CSRF secret checked on a state change.

    The caller becomes the session's user, from the console, for the route that
    follows. Async on purpose: a plain function dependency runs in a worker
    thread, and the principal it set would not reach the route.
    """
    check = csrf or header_csrf(sessions)

    async def signed_in(request: Request) -> Session:
        # verify reads the revoked sessions from the IAM database: off the event loop.
        session = await run_in_threadpool(sessions.verify, request.cookies.get(SESSION_COOKIE))
        if request.method not in SAFE_METHODS:
            await check(request, session)
        current_principal.set(session.user)
        current_source.set("console")
        return session

    return signed_in
