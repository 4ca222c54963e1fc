"""``lakeward erasure ...`` and ``lakeward demo-data ...``: thin commands over the erasure core.

``erasure_app`` holds the data-subject commands (``find``, and the request
workflow's); ``index_app`` (``lakeward erasure index ...``) the index's
maintenance commands. Commands act as the caller the environment names (see
``lakeward.cli._common.access_for``) and are authorized like API calls.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from lakeward.cli._common import DataDir, erasure_service, err, out
from lakeward.cli.erasure_index import register as register_index_commands
from lakeward.cli.erasure_purge import register as register_purge_commands

if TYPE_CHECKING:  # the erasure core loads pyarrow: only when a command needs it
    from lakeward.erasure.service import UserFindings

erasure_app = typer.Typer(
    help="Right to erasure: where each user's data is, and its purge.", no_args_is_help=True
)
index_app = typer.Typer(help="The erasure index metastore.", no_args_is_help=True)
erasure_app.add_typer(index_app, name="index")
demo_app = typer.Typer(help="Generated data to try lakeward on.", no_args_is_help=True)


@erasure_app.command("find")
def find(
    user_ids: Annotated[list[str], typer.Argument(help="User ids (taken literally)")],
    data_dir: DataDir = None,
    output: Annotated[str, typer.Option(help="table or json")] = "table",
) -> None:
    """Every location holding each user's data, across storage layers, with record counts."""
    from lakeward.erasure.shapes import findings_json

    if output not in ("table", "json"):
        raise typer.BadParameter("must be table or json", param_hint="--output")
    service = erasure_service(data_dir)
    try:
        found = service.find(user_ids)
        if not any(f.holdings for f in found) and service.store.is_empty():
            err.print(
                "note: the erasure index is empty; register datasets and index them "
                "(lakeward erasure index build, or lakeward demo-data gdpr)"
            )
    finally:
        service.close()
    if output == "json":
        document = [findings_json(f) for f in found]
        typer.echo(json.dumps(document, indent=2, ensure_ascii=False))
        return
    for findings in found:
        _print_findings(findings)


def _print_findings(findings: UserFindings) -> None:
    if not findings.holdings:
        out.print(f"{findings.user_id}: no data found in the index", highlight=False, markup=False)
        return
    title = f"{findings.user_id}: {findings.records} records in {len(findings.holdings)} places"
    table = Table(title=title, title_justify="left")
    table.add_column("layer")
    table.add_column("records", justify="right")
    # Locations are printed whole (folded, never cut): they are what a purge acts on.
    table.add_column("location", overflow="fold")
    for h in findings.holdings:
        table.add_row(h.layer, "whole object" if h.records is None else str(h.records), h.location)
    out.print(table, markup=False)


@demo_app.command("gdpr")
def demo_gdpr(
    data_dir: DataDir = None,
    records: Annotated[int, typer.Option(min=1, help="Review records to generate")] = 10_000,
    seed: Annotated[int, typer.Option(help="Same seed, same bytes")] = 0,
    gzipped: Annotated[bool, typer.Option("--gzip", help="Also write gzip variants")] = False,
    prefix: Annotated[str, typer.Option(help="Key prefix in the data bucket")] = "gdpr/",
    database_url: Annotated[
        str | None,
        typer.Option(
            help="Database of the relational tables", show_default="SQLite in the data dir"
        ),
    ] = None,
    index: Annotated[bool, typer.Option(help="Index the datasets once written")] = True,
) -> None:
    """Generate a multi-user lake (reviews, clickstream, media, a database) and register it."""
    from lakeward.erasure.demo import create_demo
    from lakeward.progress import RichProgress

    service = erasure_service(data_dir)
    try:
        with RichProgress() as progress:
            report = create_demo(
                service, records=records, seed=seed, gzipped=gzipped, prefix=prefix,
                database_url=database_url, index=index, progress=progress,
            )  # fmt: skip
    finally:
        service.close()
    table = Table("dataset", "objects")
    for dataset, count in report.objects.items():
        table.add_row(dataset, f"{count:,}")
    for name, rows in report.relational_rows.items():
        table.add_row(f"{name} (table)", f"{rows:,} rows")
    out.print(table)
    out.print(
        f"{report.records:,} reviews ({report.records_without_id:,} without a user id) "
        f"of {report.users:,} users, {report.bytes_written:,} bytes; "
        f"registered {len(report.datasets)} indexed datasets"
        + ("" if index else " (not indexed yet: lakeward erasure index build)"),
        highlight=False,
    )


register_purge_commands(erasure_app)
register_index_commands(index_app)
