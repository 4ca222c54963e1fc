"""``lakeward metastore``: start, stop, heal and fail over the metastore nodes."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from lakeward.cli._common import ConfigFile, DataDir, out, settings_for

if TYPE_CHECKING:
    from lakeward.config import Settings

metastore_app = typer.Typer(help="The Hive Metastore nodes of the stack.", no_args_is_help=True)


def _settings(
    data_dir: Path | None, config: Path | None = None, nodes: int | None = None
) -> Settings:
    return settings_for(data_dir, config, overrides={"metastore.nodes": nodes})


@metastore_app.command("start")
def start(
    data_dir: DataDir = None,
    config: ConfigFile = None,
    nodes: Annotated[
        int | None, typer.Option("--nodes", help="Number of nodes", show_default="metastore.nodes")
    ] = None,
) -> None:
    """Start the metastore nodes (creating the schema on first start)."""
    from lakeward.metastore.uris import metastore_uris
    from lakeward.progress import RichProgress
    from lakeward.stack import Stack, pin_settings

    settings = pin_settings(_settings(data_dir, config, nodes))
    with RichProgress() as progress:
        Stack(settings, progress).start_metastore()
    out.print(f"metastore serving at {', '.join(metastore_uris(settings))}", highlight=False)


@metastore_app.command("stop")
def stop(data_dir: DataDir = None) -> None:
    """Stop the metastore nodes."""
    from lakeward.stack import Stack

    for name, stopped in Stack(_settings(data_dir)).stop_metastore().items():
        out.print(f"{name}: {'stopped' if stopped else 'was not running'}")


@metastore_app.command("status")
def status(data_dir: DataDir = None) -> None:
    """Show each metastore node's health over Thrift."""
    from lakeward.stack import Stack

    settings = _settings(data_dir)
    nodes = Stack(settings).metastore_nodes()
    table = Table("node", "uri", "pid", "healthy", "preferred", "log")
    statuses = [n.status() for n in nodes]
    for index, s in enumerate(statuses, start=1):
        preferred = "yes" if settings.metastore.preferred_node == index else ""
        healthy = "yes" if s.healthy else "no"
        table.add_row(s.name, s.uri, str(s.pid or "-"), healthy, preferred, str(s.log))
    out.print(table)
    if not statuses or not all(s.healthy for s in statuses):
        raise typer.Exit(1)


@metastore_app.command("heal")
def heal(data_dir: DataDir = None) -> None:
    """Restart the nodes that are dead or do not answer."""
    from lakeward.progress import RichProgress
    from lakeward.stack import Stack

    settings = _settings(data_dir)
    with RichProgress() as progress:
        restarted = Stack(settings, progress).start_metastore(heal=True)
    out.print(f"restarted: {', '.join(restarted)}" if restarted else "every node is healthy")


@metastore_app.command("failover")
def failover(
    node: Annotated[int, typer.Option("--node", help="The node clients use first (1..N)")],
    data_dir: DataDir = None,
) -> None:
    """Pin clients to node N: it comes first in every client's list of nodes."""
    from lakeward.stack import Stack

    uris = Stack(_settings(data_dir)).failover(node)
    out.print(f"clients now use {uris[0]} first (then {', '.join(uris[1:]) or 'no other'})")
