"""``lakeward erasure request|status|list|approve|reject|stop|worker|vacuum``.

Thin commands over ``lakeward.erasure.workflow``: a request is recorded and a
worker (``lakeward erasure worker``, or the server) takes its steps. Commands
act as the caller the environment names, authorized like API calls.
"""

from __future__ import annotations

import json
import signal
import threading
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from lakeward.access import current_principal
from lakeward.cli._common import DataDir, erasure_workflow, out, print_pairs

if TYPE_CHECKING:  # the erasure core loads pyarrow: only when a command runs
    from lakeward.erasure.requests import Request
    from lakeward.erasure.workflow import ErasureWorkflow

Output = Annotated[str, typer.Option(help="text or json")]


def _show(flow: ErasureWorkflow, current: Request, output: str, full: bool = False) -> None:
    from lakeward.erasure.shapes import request_json

    if output == "json":
        typer.echo(json.dumps(request_json(flow, current, full), indent=2, ensure_ascii=False))
        return
    print_pairs({"request_id": current.id, "state": current.state,
            "user_ids": ", ".join(current.user_ids), "requester": current.requester,
            "dry_run": str(current.dry_run).lower()})  # fmt: skip
    if current.last_error:
        print_pairs({"last_error": current.last_error})
    if not full:
        return
    history = Table("at", "state", "by", "note", title="history", title_justify="left")
    for t in flow.store.history(current.id):
        history.add_row(t.at.strftime("%Y-%m-%d %H:%M:%S"), t.to_state, t.actor, t.note)
    out.print(history)
    rows = flow.store.targets(current.id)
    places = Table("layer", "status", "removed", "remaining", title="places",
                   title_justify="left")  # fmt: skip
    places.add_column("location", overflow="fold")
    for row in rows:
        o = row.outcome or {}
        places.add_row(row.target["layer"], o.get("action") or row.status,
                       str(o.get("removed", "")), str(o.get("remaining", "")),
                       row.target["uri"])  # fmt: skip
    out.print(places)


def _output(output: str) -> str:
    if output not in ("text", "json"):
        raise typer.BadParameter("must be text or json", param_hint="--output")
    return output


def request(
    user_ids: Annotated[list[str], typer.Argument(help="User ids to erase (taken literally)")],
    data_dir: DataDir = None,
    requester: Annotated[
        str | None, typer.Option(help="Who asks", show_default="the caller")
    ] = None,
    contact: Annotated[str | None, typer.Option(help="The data subject's email")] = None,
    reason: Annotated[str, typer.Option(help="Why, for the report")] = "",
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Make the report only")] = False,
    output: Output = "text",
) -> None:
    """Ask for the erasure of users' data (joins a pending request for the same users)."""
    flow = erasure_workflow(data_dir)
    try:
        current, joined = flow.request(
            user_ids, requester or current_principal.get() or "cli", contact=contact,
            reason=reason, dry_run=dry_run,
        )  # fmt: skip
        _show(flow, current, _output(output))
        if output == "text":
            print_pairs({"joined": str(joined).lower()})
    finally:
        flow.close()


def status(request_id: str, data_dir: DataDir = None, output: Output = "text") -> None:
    """A request's state, its history and the places it purges."""
    flow = erasure_workflow(data_dir)
    try:
        _show(flow, flow.get_request(request_id), _output(output), full=True)
    finally:
        flow.close()


def list_requests(
    data_dir: DataDir = None,
    state: Annotated[str | None, typer.Option(help="Only requests in this state")] = None,
) -> None:
    """Recent erasure requests, newest first."""
    flow = erasure_workflow(data_dir)
    try:
        table = Table("request", "state", "users", "requester", "created")
        for r in flow.list_requests([state] if state else None):
            table.add_row(r.id, r.state, str(len(r.user_ids)), r.requester,
                          r.created_at.strftime("%Y-%m-%d %H:%M:%S"))  # fmt: skip
        out.print(table)
    finally:
        flow.close()


def _decide(data_dir: Path | None, request_id: str, action: str, note: str = "") -> None:
    flow = erasure_workflow(data_dir)
    try:
        actor = current_principal.get() or "cli"
        if action == "approve":
            current = flow.approve(request_id, actor)
        elif action == "reject":
            current = flow.reject(request_id, actor, note)
        else:
            current = flow.stop(request_id, actor)
        _show(flow, current, "text")
    finally:
        flow.close()


def approve(request_id: str, data_dir: DataDir = None) -> None:
    """Approve a request waiting for approval (needs erasure:Approve)."""
    _decide(data_dir, request_id, "approve")


def reject(request_id: str, data_dir: DataDir = None,
           note: Annotated[str, typer.Option(help="Why")] = "") -> None:  # fmt: skip
    """Reject a request waiting for approval (needs erasure:Approve)."""
    _decide(data_dir, request_id, "reject", note)


def stop(request_id: str, data_dir: DataDir = None) -> None:
    """Stop a request; a running purge stops after the objects in progress."""
    _decide(data_dir, request_id, "stop")


def worker(
    data_dir: DataDir = None,
    once: Annotated[
        bool, typer.Option("--once", help="Take the steps possible now, then exit")
    ] = False,
    poll: Annotated[float, typer.Option(help="Seconds between looks for work")] = 1.0,
) -> None:
    """Run the erasure workflow's steps: reports, approval emails, purges, verification."""
    flow = erasure_workflow(data_dir)
    try:
        if once:
            print_pairs({"steps": flow.run_pending()})
            return
        stopping = threading.Event()

        def on_signal(_signum: int, _frame: FrameType | None) -> None:
            stopping.set()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        flow.run_forever(stopping, poll)
    finally:
        flow.close()


def vacuum(
    data_dir: DataDir = None,
    prefix: Annotated[str, typer.Option(help="<bucket>/<key prefix> to compact")] = "",
) -> None:
    """Drop the ``{}`` placeholders purges leave in JSON-lines objects, and re-index them."""
    from lakeward.erasure.vacuum import vacuum as run_vacuum

    flow = erasure_workflow(data_dir)
    try:
        result = run_vacuum(flow.index, prefix)
        print_pairs({"objects_compacted": result.objects,
                     "placeholders_dropped": result.placeholders,
                     "bytes_before": result.bytes_before, "bytes_after": result.bytes_after,
                     "bytes_reclaimed": result.bytes_before - result.bytes_after,
                     "objects_changed_meanwhile": len(result.skipped)})  # fmt: skip
    finally:
        flow.close()


def register(app: typer.Typer) -> None:
    """Add the request workflow's commands to ``lakeward erasure``."""
    app.command("request")(request)
    app.command("status")(status)
    app.command("list")(list_requests)
    app.command("approve")(approve)
    app.command("reject")(reject)
    app.command("stop")(stop)
    app.command("worker")(worker)
    app.command("vacuum")(vacuum)
