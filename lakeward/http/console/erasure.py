"""Erasure requests: the list, a request's report and history, approve or reject.

Thin over ``ErasureWorkflow``, which authorizes each call as the REST API's
does: the list ``erasure:ListRequests``, a request with its report and
history ``erasure:GetRequest`` (requests name the users to erase), a decision
``erasure:Approve`` on ``arn:lakeward:erasure:::request/<id>``. A decision
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
from lakeward.erasure.workflow import LIST_ACTION, ErasureWorkflow
from lakeward.errors import InvalidRequest, ResourceNotFound
from lakeward.http.console.base import PREFIX, Console, NavItem, redirect, signed_in

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
        )  # fmt: skip

    @router.get("/{request_id}")
    def detail(request: Request, request_id: str, session: Signed, flow: Flow) -> HTMLResponse:
        view = view_request(flow, request_id)
        return console.render(
            request, "erasure_request.html", session, title=f"Erasure request {request_id}",
            page=NAV.key, item=view.request, history=view.history, report=view.report,
            awaiting=view.request.state == AWAITING_APPROVAL,
        )  # fmt: skip

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
