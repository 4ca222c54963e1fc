"""Administration: users, groups, policies, secret names and the audit log.

Thin over ``IamService``, which the ``lakeward iam`` commands use too: each
page and each change is authorized with the same IAM actions and resources
(``iam:CreateUser`` on ``arn:lakeward:iam:::user/<name>``, ...), so the
console grants nothing the command line would not.
"""

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import HTMLResponse, Response

from lakeward.access.arns import AUDIT_LOG, iam_arn, secret_arn
from lakeward.access.iam import IamService
from lakeward.access.sessions import Session
from lakeward.errors import InvalidRequest
from lakeward.http.console.base import PREFIX, Console, NavItem, redirect, signed_in

NAV = NavItem("admin", "Administration", f"{PREFIX}/admin", "iam:ListUsers", iam_arn("user", "*"))
SECTIONS = [
    ("users", "Users", "iam:ListUsers", iam_arn("user", "*")),
    ("groups", "Groups", "iam:ListGroups", iam_arn("group", "*")),
    ("policies", "Policies", "iam:ListPolicies", iam_arn("policy", "*")),
    ("secrets", "Secrets", "secretsmanager:ListSecrets", secret_arn("*")),
    ("audit", "Audit log", "audit:Query", AUDIT_LOG),
]


def admin_router(console: Console) -> APIRouter:
    router = APIRouter(prefix=f"{PREFIX}/admin", include_in_schema=False)
    Signed = Annotated[Session, Depends(signed_in(console))]
    access = console.access
    iam = IamService(access)

    def page(
        request: Request, session: Signed, section: str, status: int = 200, **context: Any
    ) -> HTMLResponse:
        sections = [s for s in SECTIONS if console.may(session.user, s[2], s[3])]
        return console.render(
            request,
            f"admin_{section}.html",
            session,
            status,
            title=dict((s[0], s[1]) for s in SECTIONS)[section],
            page=NAV.key,
            section=section,
            sections=sections,
            **context,
        )

    def change(
        request: Request, session: Session, section: str, done: str, work: Callable[[], object]
    ) -> Response:
        """Make a change; on a refusal of the input, show the page again with the message."""
        try:
            work()
        except InvalidRequest as exc:
            return redirect(f"/admin/{section}", error=exc.message)
        return redirect(f"/admin/{section}", done=done)

    @router.get("")
    def index(session: Signed) -> Response:
        for key, _title, action, resource in SECTIONS:
            if console.may(session.user, action, resource):
                return redirect(f"/admin/{key}")
        access.authorize(NAV.action, NAV.resource)  # refused, and audited
        return redirect("/")

    @router.get("/users")
    def users(request: Request, session: Signed) -> HTMLResponse:
        found = iam.user_overview()
        return page(request, session, "users", users=found.users, groups=found.groups)

    @router.post("/users")
    def create_user(
        request: Request,
        session: Signed,
        name: Annotated[str, Form(min_length=1, max_length=64)],
        password: Annotated[str, Form(max_length=1024)] = "",
    ) -> Response:
        return change(
            request,
            session,
            "users",
            f"created user {name}",
            lambda: iam.create_user(name, password or None),
        )

    @router.post("/users/{name}/groups")
    def add_to_group(
        request: Request, name: str, session: Signed, group: Annotated[str, Form(min_length=1)]
    ) -> Response:
        return change(
            request,
            session,
            "users",
            f"added {name} to {group}",
            lambda: iam.add_user_to_group(name, group),
        )

    @router.post("/users/{name}/groups/remove")
    def remove_from_group(
        request: Request, name: str, session: Signed, group: Annotated[str, Form(min_length=1)]
    ) -> Response:
        return change(
            request,
            session,
            "users",
            f"removed {name} from {group}",
            lambda: iam.remove_user_from_group(name, group),
        )

    @router.post("/users/{name}/password")
    def reset_password(
        request: Request,
        name: str,
        session: Signed,
        password: Annotated[str, Form(min_length=1, max_length=1024)],
    ) -> Response:
        return change(request, session, "users", f"reset the console password of {name}",
                      lambda: iam.reset_password(name, password))  # fmt: skip

    @router.post("/users/{name}/delete")
    def delete_user(request: Request, name: str, session: Signed) -> Response:
        return change(request, session, "users", f"deleted user {name}",
                      lambda: iam.delete_user(name))  # fmt: skip

    @router.post("/groups")
    def create_group(
        request: Request, session: Signed, name: Annotated[str, Form(min_length=1, max_length=128)]
    ) -> Response:
        return change(request, session, "groups", f"created group {name}",
                      lambda: iam.create_group(name))  # fmt: skip

    @router.post("/groups/{name}/delete")
    def delete_group(request: Request, name: str, session: Signed) -> Response:
        return change(request, session, "groups", f"deleted group {name}",
                      lambda: iam.delete_group(name))  # fmt: skip

    @router.get("/groups")
    def groups(request: Request, session: Signed) -> HTMLResponse:
        found = iam.group_overview()
        return page(request, session, "groups", groups=found.groups, policies=found.policies)

    @router.post("/groups/{name}/policies")
    def attach_group_policy(
        request: Request,
        name: str,
        session: Signed,
        policy: Annotated[str, Form(min_length=1)],
        detach: Annotated[str, Form()] = "",
    ) -> Response:
        verb = "Detach" if detach else "Attach"
        work = iam.detach_policy if detach else iam.attach_policy
        done = f"{verb.lower()}ed {policy} {'from' if detach else 'to'} {name}"
        return change(request, session, "groups", done, lambda: work("group", name, policy))

    @router.get("/policies")
    def policies(request: Request, session: Signed) -> HTMLResponse:
        return policies_page(request, session)

    def policies_page(
        request: Request, session: Signed, status: int = 200, **form: Any
    ) -> HTMLResponse:
        found = [
            (
                p,
                json.dumps(p.document, indent=2, sort_keys=False),
                attached,
                iam.list_policy_versions(p.name),
            )
            for p, attached in iam.policy_overview()
        ]
        return page(request, session, "policies", status=status, policies=found, **form)

    @router.post("/policies/{name}/versions")
    def edit_policy(
        request: Request,
        name: str,
        session: Signed,
        document: Annotated[str, Form(min_length=2, max_length=131072)],
        apply: Annotated[str, Form()] = "",
    ) -> Response:
        """An edit is a new version; it applies at once unless left as a draft."""
        try:
            made = iam.create_policy_version(name, document, set_as_default=bool(apply))
        except InvalidRequest as exc:
            edit = {"policy": name, "document": document}
            return policies_page(request, session, 400, refusal=exc.message, edit=edit)
        said = "which applies now" if apply else "kept without applying it"
        return redirect("/admin/policies", done=f"saved {made.version_id} of {name}, {said}")

    @router.post("/policies/{name}/versions/{version}/default")
    def set_default_version(request: Request, name: str, version: str, session: Signed) -> Response:
        return change(request, session, "policies", f"{version} of {name} applies now",
                      lambda: iam.set_default_policy_version(name, version))  # fmt: skip

    @router.post("/policies/{name}/versions/{version}/delete")
    def delete_version(request: Request, name: str, version: str, session: Signed) -> Response:
        return change(request, session, "policies", f"deleted {version} of {name}",
                      lambda: iam.delete_policy_version(name, version))  # fmt: skip

    @router.post("/policies")
    def create_policy(
        request: Request,
        session: Signed,
        name: Annotated[str, Form(min_length=1, max_length=128)],
        document: Annotated[str, Form(min_length=2, max_length=131072)],
        description: Annotated[str, Form(max_length=1000)] = "",
    ) -> Response:
        try:
            iam.create_policy(name, document, description)
        except InvalidRequest as exc:
            # The form again as it was written: a mistake in a long document costs no retyping.
            draft = {"name": name, "description": description, "document": document}
            return policies_page(request, session, 400, refusal=exc.message, draft=draft)
        return redirect("/admin/policies", done=f"created policy {name}")

    @router.get("/secrets")
    def secrets(request: Request, session: Signed) -> HTMLResponse:
        return page(request, session, "secrets", secrets=iam.list_secrets())

    @router.get("/audit")
    def audit(
        request: Request,
        session: Signed,
        user: str = "",
        decision: str = "",
        hours: int = 24,
        limit: int = 200,
    ) -> HTMLResponse:
        if not 1 <= hours <= 24 * 366:
            # The permission first, as on every page: a bad filter tells a refused caller nothing.
            iam.access.authorize("audit:Query", AUDIT_LOG)
            raise InvalidRequest("hours: between 1 and 8784")
        records = iam.audit_query(
            user=user or None,
            since=datetime.now(UTC) - timedelta(hours=hours),
            decision=decision or None,
            limit=limit,
        )
        return page(
            request,
            session,
            "audit",
            records=list(reversed(records)),
            filters={"user": user, "decision": decision, "hours": hours, "limit": limit},
        )

    return router
