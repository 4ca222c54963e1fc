"""The erasure workflow: request, report, approval, purge, verification, certificate.

    flow = ErasureWorkflow(settings)
    request, joined = flow.request(["user-1"], requester="dpo@example.com")
    flow.run_pending()          # what a worker does: every step that can be taken now

A request moves REQUESTED → REPORT_READY → AWAITING_APPROVAL → APPROVED |
REJECTED | EXPIRED → PURGING → VERIFYING → COMPLETED | FAILED, or STOPPED when
stopped. Every step reads its state from the database, does work that is safe
to repeat, and records its result with a compare-and-set on the state, so a
worker killed anywhere (``kill -9``) resumes correctly when started again:
the report is made again, an object whose rewrite finished before the kill
shows a new eTag and is re-planned (finding nothing left to remove), a target
whose rewrite did not finish is done again. The steps themselves are in worker.py.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from lakeward.access import AllowAll, Authorizer
from lakeward.access.arns import erasure_request_arn
from lakeward.config import Settings
from lakeward.erasure import approval
from lakeward.erasure.executors import Executors
from lakeward.erasure.requests import (
    APPROVED,
    AWAITING_APPROVAL,
    PENDING,
    PURGING,
    REJECTED,
    STOPPED,
    TERMINAL,
    Request,
    RequestStore,
    worker_name,
)
from lakeward.erasure.service import ErasureIndexService, check_user_ids, index_location
from lakeward.erasure.worker import WorkflowSteps
from lakeward.errors import (
    InvalidRequest,
    LinkRefused,
)

log = logging.getLogger(__name__)

APPROVE_ACTION = "erasure:Approve"
REQUEST_ACTION = "erasure:CreateRequest"
# Requests name data subjects (ids, a contact address): reading them is a permission of its own.
LIST_ACTION = "erasure:ListRequests"
GET_ACTION = "erasure:GetRequest"
# What is kept of a request in the lake: its report's renderings and, once done, its certificate.
REQUEST_FILES = {
    "report.json": "application/json",
    "report.html": "text/html",
    "certificate.json": "application/json",
}


class ErasureWorkflow(WorkflowSteps):
    """Erasure requests as users see them (file, list, decide, stop); the steps in worker.py."""

    def __init__(
        self,
        settings: Settings,
        *,
        index: ErasureIndexService | None = None,
        access: Authorizer | None = None,
        owns_index: bool | None = None,
    ) -> None:
        """``owns_index``: close ``index`` with the workflow (default: only one it made)."""
        self.settings = settings
        self._owns_index = index is None if owns_index is None else owns_index
        self.index = index or ErasureIndexService(settings)
        self.store = RequestStore(index_location(settings))
        self.access: Authorizer = access or AllowAll()
        self.executors = Executors(self.index.storage, self.index.settings)
        self.signer = approval.LinkSigner.for_settings(settings)
        self.bucket = settings.lake.data_bucket
        self.worker = worker_name()

    def close(self) -> None:
        self.executors.close()
        self.store.close()
        if self._owns_index:
            self.index.close()

    # -- requests --------------------------------------------------------------

    def request(self, user_ids: Sequence[str], requester: str, *, contact: str | None = None,
                reason: str = "", dry_run: bool = False) -> tuple[Request, bool]:  # fmt: skip
        """A new request for ``user_ids``, or the pending one it joins (True)."""
        ids = check_user_ids(list(user_ids))
        self.access.authorize(REQUEST_ACTION, erasure_request_arn("*"))
        if not requester:
            raise InvalidRequest("say who asks for the erasure (requester)")
        return self.store.create_or_join(ids, requester, contact, reason, dry_run)

    def list_requests(self, states: Sequence[str] | None = None) -> list[Request]:
        """The most recent requests (in ``states`` when given), for a caller who may list them."""
        self.access.authorize(LIST_ACTION, erasure_request_arn("*"))
        return self.store.recent(list(states) if states else None)

    def get_request(self, request_id: str) -> Request:
        """One request, for a caller who may read it."""
        self.access.authorize(GET_ACTION, erasure_request_arn(request_id))
        return self.store.get(request_id)

    def request_file(self, request_id: str, name: str) -> bytes | None:
        """A request's report or certificate, for a caller who may read the request."""
        if name not in REQUEST_FILES:
            raise InvalidRequest(f"no file {name!r} of a request: {', '.join(REQUEST_FILES)}")
        self.get_request(request_id)
        return self.saved_file(request_id, name)

    def approve(self, request_id: str, actor: str) -> Request:
        self.access.authorize(APPROVE_ACTION, erasure_request_arn(request_id))
        return self.store.move(request_id, AWAITING_APPROVAL, APPROVED, actor, decided_by=actor)

    def reject(self, request_id: str, actor: str, note: str = "") -> Request:
        self.access.authorize(APPROVE_ACTION, erasure_request_arn(request_id))
        return self.store.move(request_id, AWAITING_APPROVAL, REJECTED, actor, note,
                               decided_by=actor)  # fmt: skip

    def stop(self, request_id: str, actor: str) -> Request:
        """Stop a request: before its purge at once; during it, once running objects finish."""
        self.access.authorize(APPROVE_ACTION, erasure_request_arn(request_id))
        current = self.store.get(request_id)
        if current.state in (*PENDING, APPROVED):
            return self.store.move(
                request_id, current.state, STOPPED, actor, "stopped before purge"
            )
        if current.state == PURGING:
            self.store.update(request_id, stop_requested=True)
            return self.store.get(request_id)
        raise InvalidRequest(f"erasure request {request_id} is {current.state}: nothing to stop")

    def check_link(self, request_id: str, token: str) -> tuple[Request, approval.LinkClaims]:
        """A link's request and claims, for the confirmation page (changes nothing)."""
        current = self.store.get(request_id)
        claims = self.signer.verify(token, request_id, current.report_digest)
        return current, claims

    def decide_by_link(self, request_id: str, token: str, principal: str | None) -> Request:
        """Apply the decision a link carries; ``LinkRefused`` (logged) when it is not good.

        A signed-in ``principal`` must also be allowed ``erasure:Approve``; that is
        checked before the link is spent.
        """
        try:
            current, claims = self.check_link(request_id, token)
        except LinkRefused as exc:
            self._refused(request_id, principal, exc)
            raise
        if principal is not None:
            self.access.authorize(
                APPROVE_ACTION, erasure_request_arn(request_id), principal=principal
            )
        if not self.store.use_link(claims.nonce, request_id):
            replayed = LinkRefused("this approval link was used already")
            self._refused(request_id, principal, replayed)
            raise replayed
        if current.state != AWAITING_APPROVAL:
            raise InvalidRequest(f"erasure request {request_id} is {current.state} already")
        actor = f"{principal} (link)" if principal else f"approval link {claims.nonce[:8]}"
        target = APPROVED if claims.decision == approval.APPROVE else REJECTED
        return self.store.move(request_id, AWAITING_APPROVAL, target, actor, "by approval link",
                               decided_by=actor)  # fmt: skip

    def _refused(self, request_id: str, principal: str | None, exc: LinkRefused) -> None:
        log.warning("approval link for erasure request %s refused: %s", request_id, exc)
        self._audit_refusal(request_id, principal, exc.message)

    def _audit_refusal(self, request_id: str, principal: str | None, reason: str) -> None:
        audit = getattr(self.access, "audit", None)
        if audit is None:
            return
        from lakeward.access.audit import AuditRecord

        audit.append(AuditRecord(principal=principal or "anonymous",
                                 action="erasure:UseApprovalLink",
                                 resource=erasure_request_arn(request_id), decision="explicitDeny",
                                 source="approval-link", statement=reason))  # fmt: skip


__all__ = [
    "APPROVE_ACTION",
    "GET_ACTION",
    "LIST_ACTION",
    "REQUEST_ACTION",
    "TERMINAL",
    "ErasureWorkflow",
]
