"""Sign-in and sign-out pages, and the console's home.

The sign-in form has its own CSRF token before any session exists (a random
value in a cookie that the form must echo), so another site cannot sign a
browser in to an account of its choosing.
"""

import hmac
import secrets
from typing import Annotated

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from lakeward.access.arns import iam_arn
from lakeward.access.seed import DATA_PROTECTION_GROUP as DPO_GROUP
from lakeward.access.sessions import SESSION_COOKIE, Session
from lakeward.errors import AccessDenied, LakewardError
from lakeward.http.auth import close_session, open_session
from lakeward.http.console.base import CSRF_FIELD, PREFIX, Console, redirect, signed_in

LOGIN_CSRF_COOKIE = "lakeward_login_csrf"
PAGE_SUMMARIES = {
    "dashboards": "Dashboards shared with you, and your analyses.",
    "datasets": "Data sources and datasets: build a dataset from a table or a query.",
    "query": "Run SQL on the catalogs you may use; your saved queries and history.",
    "catalogs": "Browse catalogs, databases and tables with their columns.",
    "erasure": "Erasure requests: read their reports, approve or reject them.",
    "admin": "Users, groups, policies, secret names and the audit log.",
}


def _local(target: str | None) -> str:
    """Only a console path may be the target after sign-in (no open redirect)."""
    if target and target.startswith(PREFIX + "/") and not target.startswith("//"):
        return target
    return PREFIX + "/"


def signin_router(console: Console) -> APIRouter:
    router = APIRouter(prefix=PREFIX, include_in_schema=False)
    Signed = Annotated[Session, Depends(signed_in(console))]

    def login_form(
        request: Request, next_path: str, error: str = "", username: str = "", status: int = 200
    ) -> HTMLResponse:
        token = secrets.token_urlsafe(24)
        response = console.render(
            request,
            "login.html",
            None,
            status=status,
            title="Sign in",
            login_csrf=token,
            next_path=next_path,
            error=error,
            username=username,
        )
        response.set_cookie(
            LOGIN_CSRF_COOKIE,
            token,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path=f"{PREFIX}/login",
        )
        return response

    @router.get("/login")
    def login_page(request: Request, next: str = "") -> Response:
        try:
            console.sessions.verify(request.cookies.get(SESSION_COOKIE))
            return RedirectResponse(_local(next), status_code=303)
        except LakewardError:
            return login_form(request, _local(next))

    @router.post("/login")
    def login(
        request: Request,
        username: Annotated[str, Form(max_length=64)] = "",
        password: Annotated[str, Form(max_length=1024)] = "",
        next: Annotated[str, Form()] = "",
        csrf_token: Annotated[str, Form(alias=CSRF_FIELD)] = "",
    ) -> Response:
        expected = request.cookies.get(LOGIN_CSRF_COOKIE, "")
        if not expected or not hmac.compare_digest(expected.encode(), csrf_token.encode()):
            return login_form(
                request, _local(next), "The sign-in form expired; try again.", username, 403
            )
        if not username or not password:
            return login_form(
                request, _local(next), "Enter a user name and a password.", username, 400
            )
        try:
            ok = console.access.principals.check_password(username, password)
        except AccessDenied as exc:  # locked after too many failures
            return login_form(request, _local(next), exc.message, username, 403)
        if not ok:
            # One message whatever was wrong, so that it does not tell which users exist.
            return login_form(request, _local(next), "Wrong user name or password.", username, 401)
        response = RedirectResponse(_local(next), status_code=303)
        open_session(console.sessions, username, response, request.url.scheme == "https")
        response.delete_cookie(LOGIN_CSRF_COOKIE, path=f"{PREFIX}/login")
        return response

    @router.post("/logout")
    def logout(session: Signed) -> Response:
        response = redirect("/login")
        close_session(console.sessions, session, response)
        return response

    @router.get("/")
    def home(request: Request, session: Signed) -> Response:
        # Every user lands here: the pages their policies open, each with what it is for.
        pages = [
            (item, PAGE_SUMMARIES.get(item.key, "")) for item in console.visible_nav(session.user)
        ]
        shown = {item.key for item, _summary in pages}
        # An administrator reaches the erasure approvals by joining the data-protection group.
        join = (
            "erasure" not in shown
            and "admin" in shown
            and console.may(session.user, "iam:AddUserToGroup", iam_arn("group", DPO_GROUP))
        )
        return console.render(
            request, "home.html", session, title="Home", pages=pages,
            join_group=DPO_GROUP if join else "",
        )  # fmt: skip

    return router
