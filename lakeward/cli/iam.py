"""``lakeward iam``, ``lakeward secrets`` and ``lakeward audit``: thin commands over ``IamService``.

The CLI acts as the stack's root credential, or, when ``AWS_ACCESS_KEY_ID``
and ``AWS_SECRET_ACCESS_KEY`` are set, as the IAM user those keys belong to.
Every command asks for its permission and is audited like an API call.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from lakeward.cli._common import DataDir, access_for, out, print_warnings
from lakeward.errors import InvalidRequest

if TYPE_CHECKING:  # the IAM core loads sqlalchemy: only when a command runs
    from lakeward.access.iam import IamService

iam_app = typer.Typer(help="Users, groups, roles, policies and access keys.", no_args_is_help=True)
secrets_app = typer.Typer(help="The secrets store.", no_args_is_help=True)

User = Annotated[str, typer.Option("--user", help="User name")]
Group = Annotated[str, typer.Option("--group", help="Group name")]
Role = Annotated[str, typer.Option("--role", help="Role name")]
Policy = Annotated[str, typer.Option("--policy", help="Managed policy name")]


def iam_for(data_dir: Path | None) -> IamService:
    from lakeward.access.iam import IamService

    return IamService(access_for(data_dir))


def _read_document(text: str) -> str:
    """A policy given inline as JSON, or as @file / a path to a file."""
    path = Path(text.removeprefix("@"))
    if not text.lstrip().startswith("{") and path.is_file():
        return path.read_text()
    return text


def _warnings(document: str | dict[str, Any]) -> list[str]:
    from lakeward.access.policy import parse_policy, policy_warnings

    return policy_warnings(parse_policy(document))


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
    iam_for(data_dir).create_user(user, secret)
    out.print(f"created user {user}")


@iam_app.command("reset-password")
def reset_password(user: User, data_dir: DataDir = None) -> None:
    """Give a user a new console password (prompted), which must meet the password policy."""
    secret = typer.prompt("new password", hide_input=True, confirmation_prompt=True)
    iam_for(data_dir).reset_password(user, secret)
    out.print(f"reset the console password of {user}")


@iam_app.command("delete-user")
def delete_user(user: User, data_dir: DataDir = None) -> None:
    iam_for(data_dir).delete_user(user)
    out.print(f"deleted user {user}")


@iam_app.command("list-users")
def list_users(data_dir: DataDir = None) -> None:
    for found in iam_for(data_dir).list_users():
        out.print(found.name)


@iam_app.command("create-group")
def create_group(group: Group, data_dir: DataDir = None) -> None:
    iam_for(data_dir).create_group(group)
    out.print(f"created group {group}")


@iam_app.command("delete-group")
def delete_group(group: Group, data_dir: DataDir = None) -> None:
    iam_for(data_dir).delete_group(group)
    out.print(f"deleted group {group}")


@iam_app.command("list-groups")
def list_groups(data_dir: DataDir = None) -> None:
    for found in iam_for(data_dir).list_groups():
        out.print(found.name)


@iam_app.command("add-user-to-group")
def add_user_to_group(user: User, group: Group, data_dir: DataDir = None) -> None:
    iam_for(data_dir).add_user_to_group(user, group)
    out.print(f"added {user} to {group}")


@iam_app.command("remove-user-from-group")
def remove_user_from_group(user: User, group: Group, data_dir: DataDir = None) -> None:
    iam_for(data_dir).remove_user_from_group(user, group)
    out.print(f"removed {user} from {group}")


TrustPolicy = Annotated[
    str | None,
    typer.Option(
        "--trust-policy",
        help="Who may assume the role (sts:AssumeRole): a trust policy's JSON, or @file. "
        "Default: whoever the account's own policies allow sts:AssumeRole on it",
    ),
]


@iam_app.command("create-role")
def create_role(
    role: Role,
    trust_policy: TrustPolicy = None,
    max_session: Annotated[
        int, typer.Option("--max-session", help="Longest session AssumeRole grants, in seconds")
    ] = 3600,
    data_dir: DataDir = None,
) -> None:
    """Create a role: a set of policies that services act as and users may assume."""
    document = None if trust_policy is None else _read_document(trust_policy)
    iam_for(data_dir).create_role(role, document, max_session)
    out.print(f"created role {role}")


@iam_app.command("update-assume-role-policy")
def update_assume_role_policy(
    role: Role,
    trust_policy: Annotated[
        str, typer.Option("--trust-policy", help="The trust policy's JSON, or @file")
    ],
    data_dir: DataDir = None,
) -> None:
    """Replace who may assume the role."""
    iam_for(data_dir).update_assume_role_policy(role, _read_document(trust_policy))
    out.print(f"updated the trust policy of role {role}")


@iam_app.command("get-role")
def get_role(role: Role, data_dir: DataDir = None) -> None:
    """The role's trust policy and longest session, as JSON."""
    trust, longest = iam_for(data_dir).role_trust(role)
    out.print_json(
        data={"RoleName": role, "AssumeRolePolicyDocument": trust, "MaxSessionDuration": longest}
    )


@iam_app.command("revoke-role-sessions")
def revoke_role_sessions(role: Role, data_dir: DataDir = None) -> None:
    """End every temporary credential of the role now (those from sts:AssumeRole)."""
    count = iam_for(data_dir).revoke_role_sessions(role)
    out.print(f"revoked {count} session(s) of role {role}")


@iam_app.command("list-roles")
def list_roles(data_dir: DataDir = None) -> None:
    for found in iam_for(data_dir).list_roles():
        out.print(found.name)


@iam_app.command("create-policy")
def create_policy(
    policy: Policy,
    document: Annotated[str, typer.Option(help="Policy JSON, or @file")],
    data_dir: DataDir = None,
) -> None:
    """Create a managed policy; unknown actions are accepted with a warning."""
    from lakeward.access.policy import parse_policy

    parsed = parse_policy(_read_document(document)).source
    iam_for(data_dir).create_policy(policy, parsed)
    print_warnings(_warnings(parsed))
    out.print(f"created policy {policy}")


Version = Annotated[str, typer.Option("--version", help="Policy version: v1, v2...")]


@iam_app.command("create-policy-version")
def create_policy_version(
    policy: Policy,
    document: Annotated[str, typer.Option(help="Policy JSON, or @file")],
    set_as_default: Annotated[bool, typer.Option(help="Make it the version that applies")] = False,
    data_dir: DataDir = None,
) -> None:
    """A new version of a managed policy's document (at most five are kept)."""
    made = iam_for(data_dir).create_policy_version(policy, _read_document(document), set_as_default)
    print_warnings(_warnings(made.document))
    out.print(
        f"created {made.version_id} of {policy}" + (", the default" if set_as_default else "")
    )


@iam_app.command("list-policy-versions")
def list_policy_versions(policy: Policy, data_dir: DataDir = None) -> None:
    table = Table("version", "default", "created")
    for found in iam_for(data_dir).list_policy_versions(policy):
        shown = found.created.strftime("%Y-%m-%d %H:%M:%S")
        table.add_row(found.version_id, "yes" if found.is_default else "", shown)
    out.print(table)


@iam_app.command("set-default-policy-version")
def set_default_policy_version(policy: Policy, version: Version, data_dir: DataDir = None) -> None:
    """Make a kept version the one that applies (an edit undone, or redone)."""
    iam_for(data_dir).set_default_policy_version(policy, version)
    out.print(f"{version} of {policy} applies now")


@iam_app.command("delete-policy-version")
def delete_policy_version(policy: Policy, version: Version, data_dir: DataDir = None) -> None:
    iam_for(data_dir).delete_policy_version(policy, version)
    out.print(f"deleted {version} of {policy}")


@iam_app.command("delete-policy")
def delete_policy(policy: Policy, data_dir: DataDir = None) -> None:
    iam_for(data_dir).delete_policy(policy)
    out.print(f"deleted policy {policy}")


@iam_app.command("list-policies")
def list_policies(data_dir: DataDir = None) -> None:
    table = Table("policy", "attachments", "description")
    for item in iam_for(data_dir).list_policies():
        table.add_row(item.name, str(item.attachment_count), item.description)
    out.print(table)


@iam_app.command("get-policy")
def get_policy(policy: Policy, data_dir: DataDir = None) -> None:
    found = iam_for(data_dir).get_policy(policy)
    print(json.dumps(found.document, indent=2))


@iam_app.command("validate-policy")
def validate_policy(document: Annotated[str, typer.Option(help="Policy JSON, or @file")]) -> None:
    """Check a policy document; list unknown actions and other warnings."""
    warnings = _warnings(_read_document(document))
    print_warnings(warnings)
    out.print("valid" + (f", {len(warnings)} warning(s)" if warnings else ""))


def _attach(kind: str, action: str, name: str, policy: str, data_dir: Path | None) -> None:
    iam = iam_for(data_dir)
    (iam.attach_policy if action == "Attach" else iam.detach_policy)(kind, name, policy)
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
    key_id, secret = iam_for(data_dir).create_access_key(user)
    out.print(f"access_key_id     = {key_id}\nsecret_access_key = {secret}", highlight=False)


@iam_app.command("list-access-keys")
def list_access_keys(user: User, data_dir: DataDir = None) -> None:
    table = Table("key id", "status", "created", "last used")
    for key in iam_for(data_dir).list_access_keys(user):
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
    iam_for(data_dir).update_access_key(user, key_id, active)
    out.print(f"{key_id} is now {'active' if active else 'inactive'}")


@iam_app.command("delete-access-key")
def delete_access_key(
    user: User, key_id: Annotated[str, typer.Option("--key-id")], data_dir: DataDir = None
) -> None:
    iam_for(data_dir).delete_access_key(user, key_id)
    out.print(f"deleted {key_id}")


@iam_app.command("simulate")
def simulate(
    user: User,
    action: Annotated[str, typer.Option(help="e.g. athena:StartQueryExecution")],
    resource: Annotated[str, typer.Option(help="e.g. arn:lakeward:athena:::datacatalog/x")],
    data_dir: DataDir = None,
) -> None:
    """Would USER be allowed ACTION on RESOURCE? Names the statement that decides."""
    decision = iam_for(data_dir).simulate(user, action, resource)
    colour = "green" if decision.allowed else "red"
    by = f" (by {decision.statement})" if decision.statement else ""
    out.print(f"[{colour}]{decision.decision}[/]{by}", highlight=False)
    if not decision.allowed:
        raise typer.Exit(1)


@secrets_app.command("get")
def secrets_get(name: str, data_dir: DataDir = None) -> None:
    """Print a secret's value (JSON), if you may read it."""
    print(json.dumps(iam_for(data_dir).get_secret(name), indent=2))


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
    out.print(f"stored {name} version {iam_for(data_dir).put_secret(name, parsed)}")


@secrets_app.command("list")
def secrets_list(data_dir: DataDir = None) -> None:
    """Secret names (never values)."""
    table = Table("name", "description", "last changed")
    for info in iam_for(data_dir).list_secrets():
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
    verify: Annotated[
        bool, typer.Option(help="Check the log's hash chain, archive segments included")
    ] = False,
    seal: Annotated[
        int | None,
        typer.Option(help="Seal the records older than this many days into archive segments"),
    ] = None,
) -> None:
    """Query the audit log of access decisions."""
    iam = iam_for(data_dir)
    if verify:
        result = iam.audit_verify()
        state = "intact" if result.ok else f"ALTERED at record {result.first_bad_id}"
        out.print(f"audit log {state}: {result.checked} records checked")
        if result.problem:
            out.print(result.problem)
        if not result.ok:
            raise typer.Exit(1)
        return
    if seal is not None:
        if seal < 0:
            raise InvalidRequest(f"--seal: {seal} is not a number of days")
        segments = iam.audit_seal(timedelta(days=seal))
        for segment in segments:
            out.print(f"records {segment.first_id}-{segment.last_id} sealed in {segment.name}")
        if not segments:
            out.print(f"no record older than {seal} days left to seal")
        return
    start = None
    if since:
        try:
            start = datetime.fromisoformat(since)
        except ValueError:
            raise InvalidRequest(f"--since: {since!r} is not an ISO time") from None
        start = start if start.tzinfo else start.replace(tzinfo=UTC)
    records = iam.audit_query(user=user, since=start, decision=decision, limit=limit)
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
