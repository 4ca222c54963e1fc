"""Erasure requests over HTTP, and the pages approval links open.

REST (SigV4-signed like every REST route, authorized by the workflow):

* ``POST /erasure/requests`` ``{"user_ids": [...], "requester", "contact", "reason", "dry_run"}``
* ``GET /erasure/requests``, ``GET /erasure/requests/{id}`` (with history and targets)
* ``POST /erasure/requests/{id}/approve|reject|stop``

Approval pages (the link in the email is the credential):

* ``GET /erasure/approval/{id}?token=...`` shows the request and a confirmation
  form; it never changes anything;
* ``POST /erasure/approval/{id}`` (form field ``token``) applies the decision.
  If the browser also carries a console session, its user must be allowed
  ``erasure:Approve``.
"""

from __future__ import annotations

import contextlib
import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, FileSystemLoader, select_autoescape
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from lakeward.access.sessions import SESSION_COOKIE, Sessions
from lakeward.erasure.approval import APPROVE
from lakeward.erasure.requests import AWAITING_APPROVAL
from lakeward.erasure.shapes import request_json
from lakeward.erasure.workflow import ErasureWorkflow
from lakeward.errors import InvalidRequest, LakewardError, LinkRefused
from lakeward.http.console.base import TEMPLATES
from lakeward.http.rest import SignedRequest, signed_request
from lakeward.http.sigv4 import Credentials


class NewRequest(BaseModel):
    user_ids: list[str] = Field(min_length=1, max_length=1000)
    requester: str | None = Field(default=None, max_length=320)
    contact: str | None = Field(default=None, max_length=320)
    reason: str = Field(default="", max_length=2000)
    dry_run: bool = False


_PAGES = Environment(
    loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["html"]), auto_reload=False
)


def _page(title: str, status: int = 200, **content: Any) -> HTMLResponse:
    """An approval page (console template ``approval.html``), never cached."""
    body = _PAGES.get_template("approval.html").render(title=title, **content)
    return HTMLResponse(body, status_code=status, headers={"Cache-Control": "no-store"})


def erasure_requests_router(
    flow: ErasureWorkflow, credentials: Credentials, sessions: Sessions | None = None
) -> APIRouter:
    router = APIRouter(prefix="/erasure", tags=["erasure"])

    async def signed(request: Request) -> SignedRequest:
        return await signed_request(
            request, credentials, source="erasure-api", request_id=str(uuid.uuid4())
        )

    async def caller(request: Request) -> str:
        return (await signed(request)).principal

    @router.post("/requests", status_code=201)
    async def create(request: Request) -> dict[str, Any]:
        """Ask for the erasure of some user ids (joins a pending request for them)."""
        call = await signed(request)  # reads the body, which the signature covers
        principal = call.principal
        try:
            body = NewRequest.model_validate_json(call.body)
        except ValueError as exc:
            raise InvalidRequest(f"invalid erasure request: {exc}") from None
        current, joined = await run_in_threadpool(
            flow.request, body.user_ids, body.requester or principal,
            contact=body.contact, reason=body.reason, dry_run=body.dry_run,
        )  # fmt: skip
        return request_json(flow, current) | {"joined": joined}

    @router.get("/requests")
    async def listing(request: Request, state: str | None = None) -> list[dict[str, Any]]:
        await caller(request)
        found = await run_in_threadpool(flow.list_requests, [state] if state else None)
        return [request_json(flow, r) for r in found]

    @router.get("/requests/{request_id}")
    async def status(request_id: str, request: Request) -> dict[str, Any]:
        await caller(request)
        current = await run_in_threadpool(flow.get_request, request_id)
        return await run_in_threadpool(request_json, flow, current, True)

    @router.post("/requests/{request_id}/{action}")
    async def act(request_id: str, action: str, request: Request) -> dict[str, Any]:
        principal = await caller(request)
        handlers = {"approve": flow.approve, "reject": flow.reject, "stop": flow.stop}
        if action not in handlers:
            raise InvalidRequest(f"unknown action {action!r}: approve, reject or stop")
        current = await run_in_threadpool(handlers[action], request_id, principal)
        return request_json(flow, current)

    def signed_in(request: Request) -> str | None:
        if sessions is None or SESSION_COOKIE not in request.cookies:
            return None
        return sessions.verify(request.cookies[SESSION_COOKIE]).user

    @router.get("/approval/{request_id}", response_class=HTMLResponse)
    async def confirm_page(request_id: str, token: Annotated[str, Query()] = "") -> HTMLResponse:
        """The page an approval link opens: the request, and a form to confirm."""
        try:
            current, claims = await run_in_threadpool(flow.check_link, request_id, token)
        except LinkRefused as exc:
            return _refused(flow, request_id, exc)
        except LakewardError as exc:
            return _page("Erasure request", exc.http_status, error=exc.message)
        if current.state != AWAITING_APPROVAL:
            return _page(f"Erasure request {request_id}", state=f"This request is {current.state}.")
        verb = "Approve" if claims.decision == APPROVE else "Reject"
        text = await run_in_threadpool(flow.report_text, request_id)
        return _page(
            f"{verb} erasure request {request_id}?",
            user_ids=current.user_ids,
            report=text,
            request_id=request_id,
            token=token,
            verb=verb,
        )

    @router.post("/approval/{request_id}", response_class=HTMLResponse)
    async def decide(
        request_id: str, request: Request, token: Annotated[str, Form()] = ""
    ) -> HTMLResponse:
        try:
            principal = signed_in(request)
            current = await run_in_threadpool(flow.decide_by_link, request_id, token, principal)
        except LinkRefused as exc:
            return _refused(flow, request_id, exc)
        except LakewardError as exc:
            return _page("Erasure request", exc.http_status, error=exc.message)
        return _page(f"Erasure request {request_id}", state=f"The request is now {current.state}.")

    return router


def _refused(flow: ErasureWorkflow, request_id: str, exc: LinkRefused) -> HTMLResponse:
    state = ""
    with contextlib.suppress(LakewardError):
        state = f"The request is {flow.store.get(request_id).state}."
    return _page("Approval link refused", exc.http_status, error=exc.message, state=state)


__all__ = ["erasure_requests_router"]
