"""What every console page shares: who is signed in, CSRF, navigation, rendering.

Pages are Jinja2 templates rendered with autoescape on, so any name a user or a
data set supplies (a table, a country) reaches the browser as text. Responses
carry a Content-Security-Policy that allows only this server: scripts come
from ``/console/static`` and ``/console/assets``, never inline.

Every state-changing request must carry the session's CSRF secret, as the
``csrf_token`` form field or the ``X-CSRF-Token`` header (fetch calls).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapi import Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from jinja2 import Environment, FileSystemLoader, select_autoescape

from lakeward.access.control import AccessControl, Identity
from lakeward.access.sessions import CSRF_HEADER, SESSION_COOKIE, Session, Sessions
from lakeward.errors import AccessDenied, LakewardError, Unauthenticated
from lakeward.http.errors import error_body
from lakeward.http.sessions import SAFE_METHODS, session_dependency

PREFIX = "/console"
TEMPLATES = Path(__file__).parent / "templates"
STATIC = Path(__file__).parent / "static"
CSRF_FIELD = "csrf_token"

# Only this server, for everything. Plotly sets inline style attributes and
# injects its own stylesheet, hence 'unsafe-inline' for styles (never scripts).
CSP = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data: blob:",
        "font-src 'self' data:",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}


@dataclass(frozen=True)
class NavItem:
    """A page group in the navigation; shown when ``action`` on ``resource`` is allowed."""

    key: str
    title: str
    path: str
    action: str
    resource: str
    # Also shown when this says so (BI objects reach users through shares, not policies).
    shown: Callable[[str], bool] | None = None
    # Only shown when this says so too (a page of no use without some other permission).
    requires: Callable[[str], bool] | None = None


@dataclass
class Console:
    """The console's shared state: access control, sessions, templates, navigation."""

    access: AccessControl
    sessions: Sessions
    nav: list[NavItem] = field(default_factory=list)
    env: Environment = field(init=False)

    def __post_init__(self) -> None:
        self.env = Environment(
            loader=FileSystemLoader(TEMPLATES),
            autoescape=select_autoescape(["html"], default=True),
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.env.globals["prefix"] = PREFIX
        self.env.filters["q"] = lambda value: quote(str(value), safe="")

    # -- who is asking ------------------------------------------------------

    def check_csrf(self, session: Session, given: str | None) -> None:
        try:
            self.sessions.check_csrf(session, given)
        except AccessDenied:
            # A page's form, not an API call: say what the user can do about it.
            raise AccessDenied(
                "the form is out of date or forged (CSRF token); reload the page"
            ) from None

    async def csrf_from(self, request: Request, session: Session) -> None:
        given = request.headers.get(CSRF_HEADER)
        if given is None and request.headers.get("content-type", "").startswith(
            ("application/x-www-form-urlencoded", "multipart/form-data")
        ):
            form = await request.form()
            value = form.get(CSRF_FIELD)
            given = value if isinstance(value, str) else None
        self.check_csrf(session, given)

    def may(self, user: str, action: str, resource: str) -> bool:
        """Whether the user's policies allow it (no audit record: for showing links only)."""
        return self.access.decide(Identity(user), action, resource).allowed

    def visible_nav(self, user: str) -> list[NavItem]:
        return [
            n
            for n in self.nav
            if (self.may(user, n.action, n.resource) or (n.shown is not None and n.shown(user)))
            and (n.requires is None or n.requires(user))
        ]

    # -- rendering ----------------------------------------------------------

    def render(
        self,
        request: Request,
        template: str,
        session: Session | None,
        status: int = 200,
        **context: Any,
    ) -> HTMLResponse:
        page = self.env.get_template(template).render(
            request=request,
            user=session.user if session else None,
            csrf=session.csrf if session else "",
            nav=self.visible_nav(session.user) if session else [],
            **context,
        )
        return HTMLResponse(page, status_code=status, headers=SECURITY_HEADERS)

    def error_page(self, request: Request, exc: LakewardError) -> Response:
        if (
            isinstance(exc, Unauthenticated)
            and request.method in SAFE_METHODS
            and not wants_json(request)
        ):
            target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            return RedirectResponse(
                f"{PREFIX}/login?next={quote(target, safe='')}", status_code=303
            )
        session = None
        with contextlib.suppress(LakewardError):
            session = self.sessions.verify(request.cookies.get(SESSION_COOKIE))
        if wants_json(request):
            return JSONResponse(
                error_body(exc),
                status_code=exc.http_status,
                headers=SECURITY_HEADERS,
            )
        return self.render(
            request, "error.html", session, status=exc.http_status, title="Error", error=exc
        )


def wants_json(request: Request) -> bool:
    return request.url.path.startswith(
        f"{PREFIX}/api/"
    ) or "application/json" in request.headers.get("accept", "")


def redirect(path: str, **params: str) -> RedirectResponse:
    query = "&".join(f"{k}={quote(v, safe='')}" for k, v in params.items() if v)
    return RedirectResponse(f"{PREFIX}{path}" + (f"?{query}" if query else ""), status_code=303)


def signed_in(console: Console) -> Callable[[Request], Awaitable[Session]]:
    """A dependency: the request's session, its CSRF secret (header or form field) checked."""
    return session_dependency(console.sessions, console.csrf_from)
