"""Erasure requests: file one, the list, a request's report and history, approve or reject.

Thin over ``ErasureWorkflow``, which authorizes each call as the REST API's
does: the list ``erasure:ListRequests``, a request with its report and
history ``erasure:GetRequest`` (requests name the users to erase), a decision
``erasure:Approve`` on ``arn:lakeward:erasure:::request/<id>``, a new request
``erasure:CreateRequest``; a request's report and certificate are read as the
request is (``erasure:GetRequest``). A decision
needs an explicit confirmation (a checkbox the server checks, and a dialog in
the browser).
"""

from typing import Annotated

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import HTMLResponse, Response

from lakeward.access.arns import erasure_request_arn
from lakeward.access.sessions import Session
from lakeward.erasure.requests import AWAITING_APPROVAL
from lakeward.erasure.shapes import view_request
from lakeward.erasure.workflow import LIST_ACTION, REQUEST_ACTION, REQUEST_FILES, ErasureWorkflow
from lakeward.errors import InvalidRequest, ResourceNotFound
from lakeward.http.console.base import PREFIX, Console, NavItem, redirect, signed_in

# A request names at most this many data subjects from the console (the API takes lists).
_MOST_IDS = 1000

NAV = NavItem(
    "erasure", "Erasure requests", f"{PREFIX}/erasure", LIST_ACTION, erasure_request_arn("*")
)


def workflow_of(request: Request) -> ErasureWorkflow:
    flow = getattr(request.app.state, "erasure_workflow", None)
    if not isinstance(flow, ErasureWorkflow):
        raise ResourceNotFound("the erasure workflow is not running in this server")
    return flow


def erasure_router(console: Console) -> APIRouter:
    router = APIRouter(prefix=f"{PREFIX}/erasure", include_in_schema=False)
    Signed = Annotated[Session, Depends(signed_in(console))]
    Flow = Annotated[ErasureWorkflow, Depends(workflow_of)]

    @router.get("")
    def requests(request: Request, session: Signed, flow: Flow, state: str = "") -> HTMLResponse:
        found = flow.list_requests([state] if state else None)
        return console.render(
            request, "erasure_list.html", session, title="Erasure requests", page=NAV.key,
            requests=found, state=state,
            may_request=console.may(session.user, REQUEST_ACTION, erasure_request_arn("*")),
        )  # fmt: skip

    @router.post("")
    def file_request(
        session: Signed,
        flow: Flow,
        user_ids: Annotated[str, Form(max_length=100_000)],
        contact: Annotated[str, Form(max_length=320)] = "",
        reason: Annotated[str, Form(max_length=1000)] = "",
        dry_run: Annotated[str, Form()] = "",
    ) -> Response:
        """A new request for the ids (one a line, or separated by commas), or the pending
        one it joins; the requester is the signed-in user."""
        ids = [i.strip() for line in user_ids.splitlines() for i in line.split(",") if i.strip()]
        if not ids or len(ids) > _MOST_IDS:
            return redirect("/erasure", error=f"name 1 to {_MOST_IDS} user ids, one a line")
        try:
            created, joined = flow.request(
                ids, session.user, contact=contact or None, reason=reason, dry_run=bool(dry_run)
            )
        except InvalidRequest as exc:
            return redirect("/erasure", error=exc.message)
        said = "joined the pending request" if joined else "filed; its report is being made"
        return redirect(f"/erasure/{created.id}", done=said)

    @router.get("/{request_id}")
    def detail(request: Request, request_id: str, session: Signed, flow: Flow) -> HTMLResponse:
        view = view_request(flow, request_id)
        return console.render(
            request, "erasure_request.html", session, title=f"Erasure request {request_id}",
            page=NAV.key, item=view.request, history=view.history, report=view.report,
            certified=view.certified, awaiting=view.request.state == AWAITING_APPROVAL,
        )  # fmt: skip

    @router.get("/{request_id}/files/{name}")
    def request_file(request_id: str, name: str, session: Signed, flow: Flow) -> Response:
        """The report (HTML, JSON) or the certificate, as kept in the lake."""
        if name not in REQUEST_FILES:
            raise ResourceNotFound(f"a request has no file {name!r}: {', '.join(REQUEST_FILES)}")
        data = flow.request_file(request_id, name)
        if data is None:
            raise ResourceNotFound(f"erasure request {request_id} has no {name} yet")
        disposition = "inline" if name.endswith(".html") else "attachment"
        headers = {
            "Content-Disposition": f'{disposition}; filename="{request_id}-{name}"',
            "Cache-Control": "no-store",
            "X-Content-Type-Options": "nosniff",
            "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'",
        }
        return Response(data, media_type=REQUEST_FILES[name], headers=headers)

    @router.post("/{request_id}/{decision}")
    def decide(
        request_id: str,
        decision: str,
        session: Signed,
        flow: Flow,
        confirm: Annotated[str, Form()] = "",
        note: Annotated[str, Form(max_length=1000)] = "",
    ) -> Response:
        if decision not in ("approve", "reject"):
            raise ResourceNotFound(f"no decision {decision!r}: approve or reject")
        if confirm != "yes":
            return redirect(
                f"/erasure/{request_id}", error=f"tick the confirmation to {decision} the request"
            )
        try:
            if decision == "approve":
                done = flow.approve(request_id, session.user)
            else:
                done = flow.reject(request_id, session.user, note)
        except InvalidRequest as exc:
            return redirect(f"/erasure/{request_id}", error=exc.message)
        return redirect(f"/erasure/{request_id}", done=f"the request is now {done.state}")

    return router
