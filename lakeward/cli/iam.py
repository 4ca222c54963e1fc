"""``lakeward iam``, ``lakeward secrets`` and ``lakeward audit``: thin commands over access control.

The CLI acts as the stack's root credential, or, when ``AWS_ACCESS_KEY_ID``
and ``AWS_SECRET_ACCESS_KEY`` are set, as the IAM user those keys belong to.
Every command asks for its permission and is audited like an API call.
"""

from __future__ import annotations

import hmac
import json
import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from lakeward.access import ROOT, current_principal, current_source
from lakeward.access.control import AccessControl
from lakeward.access.policy import parse_policy, policy_warnings
from lakeward.config import load_settings
from lakeward.errors import AccessDenied, InvalidRequest

iam_app = typer.Typer(help="Users, groups, roles, policies and access keys.", no_args_is_help=True)
secrets_app = typer.Typer(help="The secrets store.", no_args_is_help=True)
out = Console()

DataDir = Annotated[Path | None, typer.Option("--data-dir", help="The stack's data dir")]
User = Annotated[str, typer.Option("--user", help="User name")]
Group = Annotated[str, typer.Option("--group", help="Group name")]
Role = Annotated[str, typer.Option("--role", help="Role name")]
Policy = Annotated[str, typer.Option("--policy", help="Managed policy name")]


def access_for(data_dir: Path | None) -> AccessControl:
    """Access control of the stack, acting as the caller the environment names."""
    access = AccessControl(load_settings(data_dir=data_dir))
    current_source.set("cli")
    key_id = os.environ.get("AWS_ACCESS_KEY_ID")
    if key_id:
        secret = access.secret_for(key_id)
        given = os.environ.get("AWS_SECRET_ACCESS_KEY", "")
        if secret is None or not hmac.compare_digest(secret.encode(), given.encode()):
            raise AccessDenied("AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY are not valid here")
        current_principal.set(key_id)
    else:
        current_principal.set(ROOT)
    return access


def _arn(kind: str, name: str) -> str:
    return f"arn:lakeward:iam:::{kind}/{name}"


def _run(
    data_dir: Path | None, action: str, resource: str, work: Callable[[AccessControl], Any]
) -> Any:
    access = access_for(data_dir)
    access.authorize(f"iam:{action}", resource)
    return work(access)


def _document(text: str) -> dict[str, Any]:
    """A policy given inline as JSON, or as @file / a path to a file."""
    path = Path(text.removeprefix("@"))
    if not text.lstrip().startswith("{") and path.is_file():
        text = path.read_text()
    return parse_policy(text).source


@iam_app.command("create-user")
def create_user(
    user: User,
    data_dir: DataDir = None,
    password: Annotated[bool, typer.Option(help="Prompt for a console password")] = False,
) -> None:
    """Create a user (optionally with a console password)."""
    secret = (
        typer.prompt("password", hide_input=True, confirmation_prompt=True) if password else None
    )
    _run(
        data_dir, "CreateUser", _arn("user", user), lambda a: a.principals.create_user(user, secret)
    )
    out.print(f"created user {user}")


@iam_app.command("delete-user")
def delete_user(user: User, data_dir: DataDir = None) -> None:
    _run(data_dir, "DeleteUser", _arn("user", user), lambda a: a.principals.delete_user(user))
    out.print(f"deleted user {user}")


@iam_app.command("list-users")
def list_users(data_dir: DataDir = None) -> None:
    users = _run(data_dir, "ListUsers", _arn("user", "*"), lambda a: a.principals.list_users())
    for found in users:
        out.print(found.name)


@iam_app.command("create-group")
def create_group(group: Group, data_dir: DataDir = None) -> None:
    _run(data_dir, "CreateGroup", _arn("group", group), lambda a: a.principals.create_group(group))
    out.print(f"created group {group}")


@iam_app.command("delete-group")
def delete_group(group: Group, data_dir: DataDir = None) -> None:
    _run(data_dir, "DeleteGroup", _arn("group", group), lambda a: a.principals.delete_group(group))
    out.print(f"deleted group {group}")


@iam_app.command("list-groups")
def list_groups(data_dir: DataDir = None) -> None:
    groups = _run(data_dir, "ListGroups", _arn("group", "*"), lambda a: a.principals.list_groups())
    for found in groups:
        out.print(found.name)


@iam_app.command("add-user-to-group")
def add_user_to_group(user: User, group: Group, data_dir: DataDir = None) -> None:
    _run(
        data_dir,
        "AddUserToGroup",
        _arn("group", group),
        lambda a: a.principals.add_user_to_group(user, group),
    )
    out.print(f"added {user} to {group}")


@iam_app.command("remove-user-from-group")
def remove_user_from_group(user: User, group: Group, data_dir: DataDir = None) -> None:
    _run(
        data_dir,
        "RemoveUserFromGroup",
        _arn("group", group),
        lambda a: a.principals.remove_user_from_group(user, group),
    )
    out.print(f"removed {user} from {group}")


@iam_app.command("create-role")
def create_role(role: Role, data_dir: DataDir = None) -> None:
    _run(data_dir, "CreateRole", _arn("role", role), lambda a: a.principals.create_role(role))
    out.print(f"created role {role}")


@iam_app.command("list-roles")
def list_roles(data_dir: DataDir = None) -> None:
    roles = _run(data_dir, "ListRoles", _arn("role", "*"), lambda a: a.principals.list_roles())
    for found in roles:
        out.print(found.name)


@iam_app.command("create-policy")
def create_policy(
    policy: Policy,
    document: Annotated[str, typer.Option(help="Policy JSON, or @file")],
    data_dir: DataDir = None,
) -> None:
    """Create a managed policy; unknown actions are accepted with a warning."""
    parsed = _document(document)
    _run(
        data_dir,
        "CreatePolicy",
        _arn("policy", policy),
        lambda a: a.principals.create_policy(policy, parsed),
    )
    for warning in policy_warnings(parse_policy(parsed)):
        out.print(f"[yellow]warning:[/] {warning}", highlight=False)
    out.print(f"created policy {policy}")


@iam_app.command("delete-policy")
def delete_policy(policy: Policy, data_dir: DataDir = None) -> None:
    _run(
        data_dir,
        "DeletePolicy",
        _arn("policy", policy),
        lambda a: a.principals.delete_policy(policy),
    )
    out.print(f"deleted policy {policy}")


@iam_app.command("list-policies")
def list_policies(data_dir: DataDir = None) -> None:
    found = _run(
        data_dir, "ListPolicies", _arn("policy", "*"), lambda a: a.principals.list_policies()
    )
    table = Table("policy", "attachments", "description")
    for item in found:
        table.add_row(item.name, str(item.attachment_count), item.description)
    out.print(table)


@iam_app.command("get-policy")
def get_policy(policy: Policy, data_dir: DataDir = None) -> None:
    found = _run(
        data_dir, "GetPolicy", _arn("policy", policy), lambda a: a.principals.get_policy(policy)
    )
    print(json.dumps(found.document, indent=2))


@iam_app.command("validate-policy")
def validate_policy(document: Annotated[str, typer.Option(help="Policy JSON, or @file")]) -> None:
    """Check a policy document; list unknown actions and other warnings."""
    text = document
    path = Path(document.removeprefix("@"))
    if not document.lstrip().startswith("{") and path.is_file():
        text = path.read_text()
    warnings = policy_warnings(parse_policy(text))
    for warning in warnings:
        out.print(f"[yellow]warning:[/] {warning}", highlight=False)
    out.print("valid" + (f", {len(warnings)} warning(s)" if warnings else ""))


def _attach(kind: str, action: str, name: str, policy: str, data_dir: Path | None) -> None:
    def work(access: AccessControl) -> None:
        getattr(access.principals, f"{action.lower()}_{kind}_policy")(name, policy)

    _run(data_dir, f"{action}{kind.capitalize()}Policy", _arn(kind, name), work)
    verb = "attached" if action == "Attach" else "detached"
    out.print(f"{verb} {policy} {'to' if verb == 'attached' else 'from'} {kind} {name}")


@iam_app.command("attach-user-policy")
def attach_user_policy(user: User, policy: Policy, data_dir: DataDir = None) -> None:
    _attach("user", "Attach", user, policy, data_dir)


@iam_app.command("detach-user-policy")
def detach_user_policy(user: User, policy: Policy, data_dir: DataDir = None) -> None:
    _attach("user", "Detach", user, policy, data_dir)


@iam_app.command("attach-group-policy")
def attach_group_policy(group: Group, policy: Policy, data_dir: DataDir = None) -> None:
    _attach("group", "Attach", group, policy, data_dir)


@iam_app.command("detach-group-policy")
def detach_group_policy(group: Group, policy: Policy, data_dir: DataDir = None) -> None:
    _attach("group", "Detach", group, policy, data_dir)


@iam_app.command("attach-role-policy")
def attach_role_policy(role: Role, policy: Policy, data_dir: DataDir = None) -> None:
    _attach("role", "Attach", role, policy, data_dir)


@iam_app.command("detach-role-policy")
def detach_role_policy(role: Role, policy: Policy, data_dir: DataDir = None) -> None:
    _attach("role", "Detach", role, policy, data_dir)


@iam_app.command("create-access-key")
def create_access_key(user: User, data_dir: DataDir = None) -> None:
    """Create an access key; its secret is shown this once."""
    key_id, secret = _run(
        data_dir,
        "CreateAccessKey",
        _arn("user", user),
        lambda a: a.principals.create_access_key(user),
    )
    out.print(f"access_key_id     = {key_id}\nsecret_access_key = {secret}", highlight=False)


@iam_app.command("list-access-keys")
def list_access_keys(user: User, data_dir: DataDir = None) -> None:
    keys = _run(
        data_dir,
        "ListAccessKeys",
        _arn("user", user),
        lambda a: a.principals.list_access_keys(user),
    )
    table = Table("key id", "status", "created", "last used")
    for key in keys:
        table.add_row(
            key.key_id,
            key.status,
            f"{key.created:%Y-%m-%d %H:%M}",
            f"{key.last_used:%Y-%m-%d %H:%M}" if key.last_used else "never",
        )
    out.print(table)


@iam_app.command("update-access-key")
def update_access_key(
    user: User,
    key_id: Annotated[str, typer.Option("--key-id")],
    active: Annotated[bool, typer.Option("--active/--inactive")],
    data_dir: DataDir = None,
) -> None:
    _run(
        data_dir,
        "UpdateAccessKey",
        _arn("user", user),
        lambda a: a.principals.update_access_key(key_id, active),
    )
    out.print(f"{key_id} is now {'active' if active else 'inactive'}")


@iam_app.command("delete-access-key")
def delete_access_key(
    user: User, key_id: Annotated[str, typer.Option("--key-id")], data_dir: DataDir = None
) -> None:
    _run(
        data_dir,
        "DeleteAccessKey",
        _arn("user", user),
        lambda a: a.principals.delete_access_key(key_id),
    )
    out.print(f"deleted {key_id}")


@iam_app.command("simulate")
def simulate(
    user: User,
    action: Annotated[str, typer.Option(help="e.g. athena:StartQueryExecution")],
    resource: Annotated[str, typer.Option(help="e.g. arn:lakeward:athena:::datacatalog/x")],
    data_dir: DataDir = None,
) -> None:
    """Would USER be allowed ACTION on RESOURCE? Names the statement that decides."""
    from lakeward.access.control import Identity

    decision = _run(
        data_dir,
        "SimulatePrincipalPolicy",
        _arn("user", user),
        lambda a: a.decide(Identity(user), action, resource),
    )
    colour = "green" if decision.allowed else "red"
    by = f" (by {decision.statement})" if decision.statement else ""
    out.print(f"[{colour}]{decision.decision}[/]{by}", highlight=False)
    if not decision.allowed:
        raise typer.Exit(1)


@secrets_app.command("get")
def secrets_get(name: str, data_dir: DataDir = None) -> None:
    """Print a secret's value (JSON), if you may read it."""
    access = access_for(data_dir)
    access.authorize(
        "secretsmanager:GetSecretValue", f"arn:lakeward:secretsmanager:::secret:{name}"
    )
    print(json.dumps(access.secrets.get(name).value, indent=2))


@secrets_app.command("put")
def secrets_put(
    name: str,
    value: Annotated[str, typer.Option(help="A JSON object")],
    data_dir: DataDir = None,
) -> None:
    """Store a new version of a secret."""
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as exc:
        raise InvalidRequest(f"--value: not JSON ({exc})") from None
    if not isinstance(parsed, dict):
        raise InvalidRequest("--value: must be a JSON object")
    access = access_for(data_dir)
    access.authorize(
        "secretsmanager:PutSecretValue", f"arn:lakeward:secretsmanager:::secret:{name}"
    )
    out.print(f"stored {name} version {access.secrets.put(name, parsed)}")


@secrets_app.command("list")
def secrets_list(data_dir: DataDir = None) -> None:
    """Secret names (never values)."""
    access = access_for(data_dir)
    access.authorize("secretsmanager:ListSecrets", "arn:lakeward:secretsmanager:::secret:*")
    table = Table("name", "description", "last changed")
    for info in access.secrets.list():
        table.add_row(info.name, info.description, f"{info.last_changed:%Y-%m-%d %H:%M}")
    out.print(table)


def audit(
    data_dir: DataDir = None,
    user: Annotated[str | None, typer.Option(help="Only this user's decisions")] = None,
    since: Annotated[str | None, typer.Option(help="ISO time, e.g. 2026-11-22T10:00")] = None,
    decision: Annotated[
        str | None, typer.Option(help="allowed, explicitDeny or implicitDeny")
    ] = None,
    limit: Annotated[int, typer.Option(help="At most this many records")] = 100,
    verify: Annotated[bool, typer.Option(help="Check the log's hash chain")] = False,
) -> None:
    """Query the audit log of access decisions."""
    access = access_for(data_dir)
    access.authorize("audit:Query", "arn:lakeward:audit:::log")
    if verify:
        result = access.audit.verify()
        state = "intact" if result.ok else f"ALTERED at record {result.first_bad_id}"
        out.print(f"audit log {state}: {result.checked} records checked")
        if not result.ok:
            raise typer.Exit(1)
        return
    start = None
    if since:
        try:
            start = datetime.fromisoformat(since)
        except ValueError:
            raise InvalidRequest(f"--since: {since!r} is not an ISO time") from None
        start = start if start.tzinfo else start.replace(tzinfo=UTC)
    principal = f"arn:lakeward:iam:::user/{user}" if user else None
    records = access.audit.query(principal=principal, since=start, decision=decision, limit=limit)
    table = Table("time", "principal", "action", "resource", "decision", "statement", "source")
    for r in records:
        table.add_row(
            f"{r.time:%Y-%m-%d %H:%M:%S}",
            r.principal.rsplit("/", 1)[-1],
            r.action,
            r.resource,
            r.decision,
            r.statement or "",
            r.source,
        )
    out.print(table)
