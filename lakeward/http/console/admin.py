"""Administration: users, groups, policies, secret names and the audit log.

Each page and each change is authorized with the same IAM actions and
resources as the ``lakeward iam`` commands (``iam:CreateUser`` on
``arn:lakeward:iam:::user/<name>``, ...), so the console grants nothing the
command line would not.
"""

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import HTMLResponse, Response

from lakeward.access.policy import parse_policy
from lakeward.access.sessions import Session
from lakeward.errors import InvalidRequest, LakewardError
from lakeward.http.console.base import PREFIX, Console, NavItem, redirect, signed_in

AUDIT_ARN = "arn:lakeward:audit:::log"
SECRETS_ARN = "arn:lakeward:secretsmanager:::secret:*"


def iam_arn(kind: str, name: str) -> str:
    return f"arn:lakeward:iam:::{kind}/{name}"


NAV = NavItem("admin", "Administration", f"{PREFIX}/admin", "iam:ListUsers", iam_arn("user", "*"))
SECTIONS = [
    ("users", "Users", "iam:ListUsers", iam_arn("user", "*")),
    ("groups", "Groups", "iam:ListGroups", iam_arn("group", "*")),
    ("policies", "Policies", "iam:ListPolicies", iam_arn("policy", "*")),
    ("secrets", "Secrets", "secretsmanager:ListSecrets", SECRETS_ARN),
    ("audit", "Audit log", "audit:Query", AUDIT_ARN),
]


def admin_router(console: Console) -> APIRouter:
    router = APIRouter(prefix=f"{PREFIX}/admin", include_in_schema=False)
    Signed = Annotated[Session, Depends(signed_in(console))]
    access = console.access
    principals = access.principals

    def page(request: Request, session: Signed, section: str, **context: Any) -> HTMLResponse:
        sections = [s for s in SECTIONS if console.may(session.user, s[2], s[3])]
        return console.render(
            request,
            f"admin_{section}.html",
            session,
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
        access.authorize("iam:ListUsers", iam_arn("user", "*"))
        found = [(u, principals.groups_of(u.name)) for u in principals.list_users()]
        groups = [g.name for g in principals.list_groups()]
        return page(request, session, "users", users=found, groups=groups)

    @router.post("/users")
    def create_user(
        request: Request,
        session: Signed,
        name: Annotated[str, Form(min_length=1, max_length=64)],
        password: Annotated[str, Form(max_length=1024)] = "",
    ) -> Response:
        access.authorize("iam:CreateUser", iam_arn("user", name))
        return change(
            request,
            session,
            "users",
            f"created user {name}",
            lambda: principals.create_user(name, password or None),
        )

    @router.post("/users/{name}/groups")
    def add_to_group(
        request: Request, name: str, session: Signed, group: Annotated[str, Form(min_length=1)]
    ) -> Response:
        access.authorize("iam:AddUserToGroup", iam_arn("group", group))
        return change(
            request,
            session,
            "users",
            f"added {name} to {group}",
            lambda: principals.add_user_to_group(name, group),
        )

    @router.get("/groups")
    def groups(request: Request, session: Signed) -> HTMLResponse:
        access.authorize("iam:ListGroups", iam_arn("group", "*"))
        found = [(g, principals.members_of(g.name)) for g in principals.list_groups()]
        policies = [p.name for p in principals.list_policies()]
        return page(request, session, "groups", groups=found, policies=policies)

    @router.post("/groups/{name}/policies")
    def attach_group_policy(
        request: Request,
        name: str,
        session: Signed,
        policy: Annotated[str, Form(min_length=1)],
        detach: Annotated[str, Form()] = "",
    ) -> Response:
        verb = "Detach" if detach else "Attach"
        access.authorize(f"iam:{verb}GroupPolicy", iam_arn("group", name))
        work = principals.detach_group_policy if detach else principals.attach_group_policy
        done = f"{verb.lower()}ed {policy} {'from' if detach else 'to'} {name}"
        return change(request, session, "groups", done, lambda: work(name, policy))

    @router.get("/policies")
    def policies(request: Request, session: Signed) -> HTMLResponse:
        access.authorize("iam:ListPolicies", iam_arn("policy", "*"))
        found = [
            (p, json.dumps(p.document, indent=2, sort_keys=False))
            for p in principals.list_policies()
        ]
        return page(request, session, "policies", policies=found)

    @router.post("/policies")
    def create_policy(
        request: Request,
        session: Signed,
        name: Annotated[str, Form(min_length=1, max_length=128)],
        document: Annotated[str, Form(min_length=2, max_length=131072)],
        description: Annotated[str, Form(max_length=1000)] = "",
    ) -> Response:
        access.authorize("iam:CreatePolicy", iam_arn("policy", name))

        def work() -> None:
            try:
                parsed = parse_policy(document).source
            except LakewardError as exc:
                raise InvalidRequest(f"policy {name}: {exc.message}") from None
            except ValueError as exc:
                raise InvalidRequest(
                    f"policy {name}: not a valid policy document ({exc})"
                ) from None
            principals.create_policy(name, parsed, description)

        return change(request, session, "policies", f"created policy {name}", work)

    @router.get("/secrets")
    def secrets(request: Request, session: Signed) -> HTMLResponse:
        access.authorize("secretsmanager:ListSecrets", SECRETS_ARN)
        return page(request, session, "secrets", secrets=access.secrets.list())

    @router.get("/audit")
    def audit(
        request: Request,
        session: Signed,
        user: str = "",
        decision: str = "",
        hours: int = 24,
        limit: int = 200,
    ) -> HTMLResponse:
        access.authorize("audit:Query", AUDIT_ARN)
        if not 1 <= hours <= 24 * 366:
            raise InvalidRequest("hours: between 1 and 8784")
        records = access.audit.query(
            principal=iam_arn("user", user) if user else None,
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
