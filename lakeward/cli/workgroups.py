"""``lakeward workgroup``: thin commands over the SQL service's workgroups.

They act as the stack's root credential, or as the IAM user whose keys are in
``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY``; each asks the permission the
Athena API asks (``athena:CreateWorkGroup`` ... on the workgroup's ARN) and is
audited. They work on the stack's state directly, so a server running over it
sees a change at its next query.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from lakeward.cli._common import DataDir, access_for, out, settings_for

if TYPE_CHECKING:  # the SQL service loads duckdb and pyarrow: only when a command runs
    from lakeward.query.service import QueryService

workgroup_app = typer.Typer(help="SQL workgroups: engine, limits, output.", no_args_is_help=True)

Name = Annotated[str, typer.Argument(help="Workgroup name")]
Engine = Annotated[str | None, typer.Option(help="duckdb or spark")]
Output = Annotated[str | None, typer.Option("--output-location", help="Results go under this")]
Timeout = Annotated[float | None, typer.Option("--timeout", help="Seconds before a query fails")]
MaxConcurrent = Annotated[int | None, typer.Option(help="Queries running at once")]
MaxQueued = Annotated[int | None, typer.Option(help="Queries waiting at once")]
PerPrincipal = Annotated[
    int | None, typer.Option(help="Queries one user or role may have queued or running")
]
Cutoff = Annotated[
    int | None, typer.Option("--bytes-scanned-cutoff", help="A query scanning more fails")
]
Description = Annotated[str | None, typer.Option(help="Free text")]


@contextmanager
def _service(data_dir: Path | None) -> Iterator[QueryService]:
    from lakeward.query.service import QueryService

    service = QueryService(settings_for(data_dir), access=access_for(data_dir))
    try:
        yield service
    finally:
        service.close()


def _settings(**given: Any) -> dict[str, Any]:
    renamed = {"timeout": "timeout_seconds"}
    return {renamed.get(k, k): v for k, v in given.items() if v is not None}


@workgroup_app.command("create")
def create(
    name: Name,
    data_dir: DataDir = None,
    engine: Engine = None,
    output_location: Output = None,
    enforce: Annotated[bool, typer.Option(help="Ignore a client's own OutputLocation")] = True,
    timeout: Timeout = None,
    max_concurrent: MaxConcurrent = None,
    max_queued: MaxQueued = None,
    max_per_principal: PerPrincipal = None,
    bytes_scanned_cutoff: Cutoff = None,
    description: Description = None,
) -> None:
    """Create a workgroup (athena:CreateWorkGroup)."""
    from lakeward.query.model import WorkGroup

    fields = _settings(
        engine=engine,
        output_location=output_location,
        timeout=timeout,
        max_concurrent=max_concurrent,
        max_queued=max_queued,
        max_per_principal=max_per_principal,
        bytes_scanned_cutoff=bytes_scanned_cutoff,
        description=description,
    )
    with _service(data_dir) as service:
        service.create_work_group(WorkGroup(name=name, enforce_configuration=enforce, **fields))
    out.print(f"created workgroup {name}")


@workgroup_app.command("update")
def update(
    name: Name,
    data_dir: DataDir = None,
    engine: Engine = None,
    output_location: Output = None,
    enforce: Annotated[
        bool | None, typer.Option("--enforce/--no-enforce", help="Ignore a client's OutputLocation")
    ] = None,
    timeout: Timeout = None,
    max_concurrent: MaxConcurrent = None,
    max_queued: MaxQueued = None,
    max_per_principal: PerPrincipal = None,
    no_max_per_principal: Annotated[
        bool, typer.Option("--no-max-per-principal", help="Remove the limit per principal")
    ] = False,
    bytes_scanned_cutoff: Cutoff = None,
    no_bytes_scanned_cutoff: Annotated[
        bool, typer.Option("--no-bytes-scanned-cutoff", help="Remove the cutoff")
    ] = False,
    state: Annotated[str | None, typer.Option(help="ENABLED or DISABLED")] = None,
    description: Description = None,
) -> None:
    """Change a workgroup's settings; the others stay (athena:UpdateWorkGroup)."""
    changes = _settings(
        engine=engine,
        output_location=output_location,
        enforce_configuration=enforce,
        timeout=timeout,
        max_concurrent=max_concurrent,
        max_queued=max_queued,
        max_per_principal=max_per_principal,
        bytes_scanned_cutoff=bytes_scanned_cutoff,
        state=state,
        description=description,
    )
    if no_max_per_principal:
        changes["max_per_principal"] = None
    if no_bytes_scanned_cutoff:
        changes["bytes_scanned_cutoff"] = None
    with _service(data_dir) as service:
        service.update_work_group(name, **changes)
    out.print(f"updated workgroup {name}")


@workgroup_app.command("delete")
def delete(
    name: Name,
    data_dir: DataDir = None,
    recursive: Annotated[bool, typer.Option(help="Delete its named queries too")] = False,
) -> None:
    """Delete a workgroup; its query history stays (athena:DeleteWorkGroup)."""
    with _service(data_dir) as service:
        service.delete_work_group(name, recursive=recursive)
    out.print(f"deleted workgroup {name}")


@workgroup_app.command("list")
def list_(data_dir: DataDir = None) -> None:
    """The workgroups you may see, with their engine and limits."""
    with _service(data_dir) as service:
        groups = service.list_work_groups()
    table = Table("name", "state", "engine", "running", "queued", "per principal", "timeout s")
    for g in groups:
        per_principal = "-" if g.max_per_principal is None else str(g.max_per_principal)
        table.add_row(
            g.name,
            g.state,
            g.engine,
            str(g.max_concurrent),
            str(g.max_queued),
            per_principal,
            f"{g.timeout_seconds:g}",
        )
    out.print(table)


@workgroup_app.command("get")
def get(name: Name, data_dir: DataDir = None) -> None:
    """One workgroup's settings, as JSON (athena:GetWorkGroup)."""
    with _service(data_dir) as service:
        group = service.get_work_group(name)
    values = asdict(group)
    values["created"] = group.created.isoformat() if group.created else None
    out.print_json(json.dumps(values))
