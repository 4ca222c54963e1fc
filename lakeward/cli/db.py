"""``lakeward db``: managed database instances, thin commands over ``lakeward.databases``.

Like ``lakeward iam``, each command asks for its permission (``rds:*`` actions
on ``arn:lakeward:rds:::db:NAME``) as the caller the environment names, and is
audited.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from lakeward.access.arns import db_arn, secret_arn
from lakeward.cli._common import DataDir, access_for, out
from lakeward.databases.base import ENGINES, Endpoint
from lakeward.databases.classes import CLASSES, DEFAULT_CLASS
from lakeward.errors import InvalidRequest

if TYPE_CHECKING:  # the instances' registry loads sqlalchemy: only when a command runs
    from lakeward.databases import InstanceInfo, Instances

db_app = typer.Typer(
    help="Managed database instances (the RDS analogue): PostgreSQL, MySQL, MariaDB.",
    no_args_is_help=True,
)
Name = Annotated[str, typer.Argument(help="Instance name (lower-case letters, digits, -)")]
AsJson = Annotated[bool, typer.Option("--json", help="Print JSON")]


def _instances(data_dir: Path | None, action: str, name: str) -> Instances:
    from lakeward.databases import Instances

    access = access_for(data_dir)
    access.authorize(f"rds:{action}", db_arn(name))
    return Instances(access.settings, secrets=access.secrets)


def _as_dict(info: InstanceInfo) -> dict[str, Any]:
    data = asdict(info)
    data["endpoint"] = str(info.endpoint)
    for key in ("created", "next_maintenance"):
        data[key] = data[key].isoformat() if data[key] else None
    data["log"] = str(info.log) if info.log else None
    return data


def _print(infos: list[InstanceInfo], as_json: bool) -> None:
    if as_json:
        print(json.dumps([_as_dict(i) for i in infos], indent=2))
        return
    if not infos:
        out.print("no database instances; create one with: lakeward db create NAME --engine ENGINE")
        return
    table = Table(
        "name", "engine", "server", "class", "endpoint", "status", "pending", "maintenance window"
    )
    for info in infos:
        pending = ", ".join(f"{k}={v}" for k, v in info.pending_modifications.items())
        if info.next_maintenance:
            pending += f" (at {info.next_maintenance:%a %Y-%m-%d %H:%M} UTC)"
        colour = {"available": "green", "failed": "red", "stopped": "dim"}.get(
            info.status, "yellow"
        )
        table.add_row(
            info.name, f"{info.engine} {info.engine_version}", info.server,
            info.instance_class or "external", str(info.endpoint),
            f"[{colour}]{info.status}[/]", pending or "-", info.maintenance_window,
        )  # fmt: skip
    out.print(table)
    for info in infos:
        if info.status_reason:
            out.print(f"{info.name}: {info.status_reason}", highlight=False)
        if info.log and info.status == "failed":
            out.print(f"{info.name}: server log {info.log}", highlight=False)


@db_app.command("create")
def create(
    name: Name,
    engine: Annotated[str, typer.Option(help=f"One of {', '.join(ENGINES)}")],
    engine_version: Annotated[
        str | None, typer.Option(help="Major or full version (default: newest installed)")
    ] = None,
    instance_class: Annotated[
        str, typer.Option(help=f"One of {', '.join(CLASSES)}")
    ] = DEFAULT_CLASS,
    port: Annotated[int | None, typer.Option(help="Port (default: the next free one)")] = None,
    endpoint: Annotated[
        str | None, typer.Option(help="HOST:PORT of an existing server to register instead")
    ] = None,
    master_username: Annotated[
        str | None, typer.Option(help="Master user (default: postgres / admin)")
    ] = None,
    master_password: Annotated[
        str | None,
        typer.Option(
            envvar="LAKEWARD_DB_MASTER_PASSWORD",
            help="With --endpoint: the master user's password (default: prompted)",
        ),
    ] = None,
    data_dir: DataDir = None,
    as_json: AsJson = False,
) -> None:
    """Create a local database server instance, or register an existing server (--endpoint)."""
    if endpoint is None and master_password is not None:
        raise InvalidRequest("--master-password is for --endpoint; a new instance's is generated")
    if endpoint is not None:
        Endpoint.parse(endpoint)  # a bad one is reported before any prompt
        if not master_username:
            raise InvalidRequest(f"--endpoint {endpoint} needs --master-username")
    if endpoint is not None and master_password is None:
        if not sys.stdin.isatty():
            raise InvalidRequest(
                f"give the password of {master_username} at {endpoint} with --master-password "
                "or LAKEWARD_DB_MASTER_PASSWORD (there is no terminal to ask on)"
            )
        master_password = typer.prompt(
            f"password of {master_username} at {endpoint}",
            hide_input=True,
            default="",
            show_default=False,
        )
    instances = _instances(data_dir, "CreateDBInstance", name)
    info = instances.create(
        name, engine, engine_version, instance_class, endpoint,
        port=port, master_username=master_username, master_password=master_password,
    )  # fmt: skip
    _print([info], as_json)


@db_app.command("describe")
def describe(
    name: Annotated[str | None, typer.Argument(help="Instance name (default: all)")] = None,
    data_dir: DataDir = None,
    as_json: AsJson = False,
) -> None:
    """Show instances: engine, version, class, endpoint, status, pending modifications."""
    instances = _instances(data_dir, "DescribeDBInstances", name or "*")
    _print(instances.describe(name), as_json)


@db_app.command("modify")
def modify(
    name: Name,
    instance_class: Annotated[str, typer.Option(help=f"One of {', '.join(CLASSES)}")],
    apply_immediately: Annotated[
        bool,
        typer.Option(
            "--apply-immediately",
            help="Restart with the new class now (a short interruption) instead of at the "
            "next maintenance window",
        ),
    ] = False,
    data_dir: DataDir = None,
    as_json: AsJson = False,
) -> None:
    """Change an instance's class, now or at the next maintenance window."""
    instances = _instances(data_dir, "ModifyDBInstance", name)
    _print([instances.modify(name, instance_class, apply_immediately)], as_json)


@db_app.command("delete")
def delete(
    name: Name,
    final_snapshot: Annotated[
        Path | None, typer.Option(help="Dump every database into this new SQL file first")
    ] = None,
    skip_final_snapshot: Annotated[
        bool, typer.Option("--skip-final-snapshot", help="Delete without a final dump")
    ] = False,
    data_dir: DataDir = None,
) -> None:
    """Delete an instance: its server and data (a registered server is only forgotten)."""
    if final_snapshot is not None and skip_final_snapshot:
        raise InvalidRequest("give --final-snapshot FILE or --skip-final-snapshot, not both")
    if final_snapshot is None and not skip_final_snapshot:
        raise InvalidRequest(
            f"deleting {name} deletes its data: give --final-snapshot FILE to dump it first, "
            "or --skip-final-snapshot"
        )
    instances = _instances(data_dir, "DeleteDBInstance", name)
    instances.delete(name, final_snapshot)
    kept = f"; final snapshot in {final_snapshot}" if final_snapshot else ""
    out.print(f"deleted database instance {name}{kept}", highlight=False)


@db_app.command("credentials")
def credentials(name: Name, data_dir: DataDir = None, as_json: AsJson = False) -> None:
    """Print the master user and password of an instance (from the secrets store)."""
    from lakeward.databases import Instances

    access = access_for(data_dir)
    access.authorize("secretsmanager:GetSecretValue", secret_arn(f"databases/{name}/master"))
    instances = Instances(access.settings, secrets=access.secrets)
    master = instances.credentials(name)
    endpoint = instances.endpoint(name)
    values = {
        "username": master.username,
        "password": master.password,
        "host": endpoint.host,
        "port": endpoint.port,
    }
    if as_json:
        print(json.dumps(values, indent=2))
        return
    for key, value in values.items():
        out.print(f"{key:<8} = {value}", highlight=False)


@db_app.command("start")
def start(name: Name, data_dir: DataDir = None) -> None:
    """Start a stopped instance."""
    info = _instances(data_dir, "StartDBInstance", name).start(name)
    out.print(f"{name}: {info.status} at {info.endpoint}", highlight=False)


@db_app.command("stop")
def stop(name: Name, data_dir: DataDir = None) -> None:
    """Stop an instance (its data is kept)."""
    info = _instances(data_dir, "StopDBInstance", name).stop(name)
    out.print(f"{name}: {info.status}", highlight=False)


@db_app.command("maintain")
def maintain(
    name: Annotated[str | None, typer.Argument(help="Instance name (default: all)")] = None,
    data_dir: DataDir = None,
) -> None:
    """Apply pending modifications whose maintenance window has come."""
    instances = _instances(data_dir, "ApplyPendingMaintenanceAction", name or "*")
    applied = instances.maintain(name)
    out.print(
        f"applied pending modifications to: {', '.join(applied)}" if applied else "nothing due",
        highlight=False,
    )
