"""``lakeward erasure index build|status|webhook``: keeping the erasure index current.

Thin commands over ``lakeward.erasure.batch`` (the Spark build), the index
store's status with the server's real-time indexer figures, and the webhook's
token for S3/MinIO event notifications.
"""

from __future__ import annotations

import json
import time
from typing import Annotated, Any

import typer
from rich.table import Table

from lakeward.cli._common import DataDir, access_for, erasure_service, out, settings_for


def build(
    data_dir: DataDir = None,
    prefix: Annotated[
        str, typer.Option(help="Only datasets and objects under <bucket>/<key prefix>")
    ] = "",
) -> None:
    """Index the lake's existing objects on Spark (resumable: unchanged objects are skipped).

    Authorized as ``erasure:BuildIndex`` on ``arn:lakeward:erasure:::index``.
    """
    from lakeward.erasure.batch import BatchIndexBuild
    from lakeward.progress import RichProgress

    service = erasure_service(data_dir)
    try:
        with RichProgress() as progress:
            report = BatchIndexBuild(service, progress).run(prefix)
    finally:
        service.close()
    rate = report.records / report.seconds if report.seconds else 0.0
    out.print(
        f"{report.objects:,} objects: {report.indexed:,} indexed, {report.unchanged:,} unchanged, "
        f"{report.removed:,} gone from the lake; {report.records:,} records, "
        f"{report.entries:,} entries in {report.seconds:.1f}s ({rate:,.0f} records/s, "
        f"Spark {report.spark_seconds:.1f}s)",
        highlight=False,
    )
    for uri, reason in report.dead_letters:
        out.print(f"[yellow]dead letter:[/] {uri}: {reason}", highlight=False)


def _age(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:,.0f} ms"


def status(
    data_dir: DataDir = None,
    output: Annotated[str, typer.Option(help="text or json")] = "text",
) -> None:
    """Counts, the real-time indexer's lag and pending events, and the dead letters."""
    from lakeward.erasure.realtime import read_status
    from lakeward.erasure.service import ErasureIndexService

    if output not in ("text", "json"):
        raise typer.BadParameter("must be text or json", param_hint="--output")
    settings = settings_for(data_dir)
    service = ErasureIndexService(settings)
    try:
        index = service.status()
    finally:
        service.close()
    live = read_status(settings.data_dir / "erasure" / "realtime.json")
    running = live is not None and live.is_live()
    document: dict[str, Any] = {
        "objects": index.objects,
        "record_entries": index.record_entries,
        "location_entries": index.location_entries,
        "records_without_id": index.records_without_id,
        "last_indexed_at": index.last_indexed_at.isoformat() if index.last_indexed_at else None,
        "counters": index.counters,
        "dead_letters": index.dead_letters,
        "recent_dead_letters": [
            {"source": d.source, "reason": d.reason, "at": d.at.isoformat()}
            for d in index.recent_dead_letters
        ],
        "realtime": {
            "running": running,
            "pending": live.pending if live else None,
            "lag_last_seconds": live.lag_last if live else None,
            "lag_p50_seconds": live.lag_p50 if live else None,
            "lag_p95_seconds": live.lag_p95 if live else None,
            "watching": live.watching if live else None,
            "updated_seconds_ago": round(time.time() - live.updated_at, 1) if live else None,
        },
    }
    if output == "json":
        out.print_json(json.dumps(document))
        return
    table = Table("", "", show_header=False)
    table.add_row("objects indexed", f"{index.objects:,}")
    table.add_row("record entries", f"{index.record_entries:,}")
    table.add_row("object-level entries", f"{index.location_entries:,}")
    table.add_row("records without id", f"{index.records_without_id:,}")
    table.add_row("last indexed", document["last_indexed_at"] or "never")
    if live is None:
        table.add_row("real-time indexer", "never ran (it runs in the server: lakeward up)")
    else:
        state = "running" if running else "stopped"
        watching = f"watching {live.watching}" if live.watching else "no file watcher"
        table.add_row("real-time indexer", f"{state}, pid {live.pid}, {watching}")
        table.add_row("pending events", f"{live.pending:,}")
        table.add_row(
            "lag (last / p50 / p95)",
            f"{_age(live.lag_last)} / {_age(live.lag_p50)} / {_age(live.lag_p95)}",
        )
    for name, value in sorted(index.counters.items()):
        table.add_row(name.replace("_", " "), f"{value:,}")
    table.add_row("dead letters", f"{index.dead_letters:,}")
    out.print(table)
    for letter in index.recent_dead_letters:
        out.print(
            f"[yellow]{letter.at:%Y-%m-%d %H:%M:%S}[/] {letter.source}: {letter.reason}",
            highlight=False,
        )


def webhook(
    data_dir: DataDir = None,
    rotate: Annotated[bool, typer.Option(help="Replace the token (the old one stops working)")] = (
        False
    ),
) -> None:
    """Print the token and URL of POST /events/s3, and how to point MinIO or S3 at it.

    Authorized as ``erasure:GetWebhookToken`` (and ``erasure:RotateWebhookToken`` with
    ``--rotate``) on ``arn:lakeward:erasure:::webhook``.
    """
    from lakeward.erasure.realtime.webhook import token_for_caller
    from lakeward.stack import SERVER_PORT

    settings = settings_for(data_dir)
    access = access_for(data_dir)
    token = token_for_caller(access, access.secrets, rotate=rotate)
    host, port = settings.server.host, settings.server.port or SERVER_PORT
    url = f"http://{host}:{port}/events/s3"
    out.print(f"url   = {url}\ntoken = {token}", highlight=False)
    out.print(
        "\nMinIO:\n"
        f'  mc admin config set ALIAS notify_webhook:lakeward endpoint="{url}" '
        f'auth_token="{token}"\n'
        "  mc admin service restart ALIAS\n"
        "  mc event add ALIAS/BUCKET arn:minio:sqs::lakeward:webhook --event put,delete\n"
        "AWS S3 (through an SNS topic with an HTTPS subscription):\n"
        f"  endpoint https://lakeward:{token}@<public host>/events/s3",
        highlight=False,
        soft_wrap=True,
    )


def register(index_app: typer.Typer) -> None:
    index_app.command("build")(build)
    index_app.command("status")(status)
    index_app.command("webhook")(webhook)
