"""``lakeward bi``: thin commands over the BI service (list, validate, refresh, series).

Like ``lakeward iam``, the commands act as the stack's root credential, or as
the IAM user whose keys are in ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``,
and every call is authorized and audited as in the console.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from lakeward.cli._common import DataDir, access_for, out
from lakeward.errors import InvalidRequest, LakewardError

if TYPE_CHECKING:  # the BI and query cores load duckdb and sqlglot: only when a command runs
    from lakeward.bi.service import BiService

bi_app = typer.Typer(help="BI data sources, datasets, extracts and dashboards.",
                     no_args_is_help=True)  # fmt: skip


@contextmanager
def _service(data_dir: Path | None) -> Iterator[tuple[BiService, str]]:
    from lakeward.access import current_principal
    from lakeward.bi.service import BiService
    from lakeward.query.service import QueryService

    access = access_for(data_dir)
    queries = QueryService(access.settings, access=access)
    service = BiService(access.settings, access, queries)
    try:
        yield service, current_principal.get()
    finally:
        service.close()
        queries.close()


@bi_app.command("list")
def list_objects(data_dir: DataDir = None) -> None:
    """Data sources, datasets (with their extracts) and dashboards you may see."""
    with _service(data_dir) as (service, who):
        table = Table("kind", "id", "name", "state")
        for source in service.list_data_sources(who):
            table.add_row("data source", source.id, source.name, source.status)
        for dataset in service.list_datasets(who):
            extract = service.get_extract(who, dataset.id)
            state: str = dataset.spec.import_mode
            if dataset.spec.import_mode == "SPICE":
                state += f" {extract.status} {extract.row_count:,} rows {extract.size_bytes:,} B"
            table.add_row("dataset", dataset.id, dataset.spec.name, state)
        for dashboard in service.list_dashboards(who):
            table.add_row("dashboard", dashboard.id, dashboard.name, f"v{dashboard.version}")
        out.print(table)


@bi_app.command("validate")
def validate(
    data_source: Annotated[str, typer.Option("--data-source", help="Data source id")],
    data_dir: DataDir = None,
) -> None:
    """Run the data source's test query as the BI role."""
    with _service(data_dir) as (service, who):
        checked = service.validate_data_source(who, data_source)
    if checked.status != "VALID":
        raise LakewardError(f"{data_source} is not valid: {checked.status_message}")
    out.print(f"{data_source}: valid ({checked.status_message})", highlight=False)


@bi_app.command("refresh")
def refresh(
    dataset: Annotated[str, typer.Option("--dataset", help="Dataset id")],
    data_dir: DataDir = None,
) -> None:
    """Import a dataset into its extract now."""
    with _service(data_dir) as (service, who):
        extract = service.refresh_extract(who, dataset)
    out.print(
        f"{dataset}: {extract.row_count:,} rows, {extract.size_bytes:,} bytes in "
        f"{extract.duration_ms} ms -> {extract.uri}",
        highlight=False,
    )
    for issue in extract.issues:
        out.print(
            f"[yellow]warning:[/] {issue.field}: {issue.operation} failed on "
            f"{issue.failed_rows:,} row(s), e.g. {', '.join(map(repr, issue.examples))}",
            highlight=False,
        )


@bi_app.command("series")
def series(
    dashboard: Annotated[str, typer.Option("--dashboard", help="Dashboard id")],
    visual: Annotated[str, typer.Option("--visual", help="Visual id")],
    mode: Annotated[str, typer.Option(help="auto, extract or live")] = "auto",
    filters: Annotated[str, typer.Option(help="JSON list of filters")] = "[]",
    data_dir: DataDir = None,
) -> None:
    """Print what a dashboard's visual shows, as JSON."""
    try:
        parsed = json.loads(filters)
    except json.JSONDecodeError as exc:
        raise InvalidRequest(f"--filters: not valid JSON ({exc.msg})") from None
    if not isinstance(parsed, list):
        raise InvalidRequest("--filters: give a JSON list of filter objects")
    if mode not in ("auto", "extract", "live"):
        raise InvalidRequest(f"--mode: auto, extract or live, not {mode!r}")
    with _service(data_dir) as (service, who):
        result = service.dashboard_series(who, dashboard, visual, parsed, mode)  # type: ignore[arg-type]
    out.print_json(json.dumps(result.to_json()))
