"""What every ``lakeward`` command shares: the options, the consoles, the caller, the printers.

Kept free of the service cores (and so of sqlalchemy, pyarrow, duckdb):
``lakeward --help`` imports every command module, and each command imports
what it needs when it runs.
"""

from __future__ import annotations

import hmac
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

if TYPE_CHECKING:
    from lakeward.access.control import AccessControl
    from lakeward.config import Settings
    from lakeward.erasure.service import ErasureIndexService
    from lakeward.erasure.workflow import ErasureWorkflow

out = Console()
err = Console(stderr=True)

DataDir = Annotated[
    Path | None,
    typer.Option(
        "--data-dir",
        help="The stack's data dir",
        show_default="./.lakeward, or LAKEWARD_DATA_DIR",
    ),
]
ConfigFile = Annotated[
    Path | None,
    typer.Option("--config", help="Stack file", show_default="./lakeward.toml if present"),
]


def settings_for(
    data_dir: Path | None, config: Path | None = None, overrides: dict[str, Any] | None = None
) -> Settings:
    from lakeward.config import load_settings

    return load_settings(data_dir=data_dir, config_file=config, overrides=overrides)


def access_for(data_dir: Path | None) -> AccessControl:
    """Access control of the stack, acting as the caller the environment names.

    The root credential, or, when ``AWS_ACCESS_KEY_ID`` and
    ``AWS_SECRET_ACCESS_KEY`` are set, the IAM user those keys belong to.
    """
    from lakeward.access import ROOT, current_principal, current_source
    from lakeward.access.control import AccessControl
    from lakeward.errors import AccessDenied

    access = AccessControl(settings_for(data_dir))
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


def erasure_service(data_dir: Path | None) -> ErasureIndexService:
    """The erasure index service of the stack, authorizing as the caller the environment names."""
    from lakeward.erasure.service import ErasureIndexService

    access = access_for(data_dir)
    return ErasureIndexService(settings_for(data_dir), access=access)


def erasure_workflow(data_dir: Path | None) -> ErasureWorkflow:
    """The erasure workflow of the stack (with its own index service), as the caller."""
    from lakeward.erasure.service import ErasureIndexService
    from lakeward.erasure.workflow import ErasureWorkflow

    settings = settings_for(data_dir)
    access = access_for(data_dir)
    index = ErasureIndexService(settings, access=access)
    return ErasureWorkflow(settings, index=index, access=access, owns_index=True)


def print_pairs(pairs: dict[str, Any]) -> None:
    """``key = value`` lines, keys aligned; values printed as they are (no markup)."""
    width = max(len(k) for k in pairs)
    for key, value in pairs.items():
        out.print(f"{key:<{width}} = {value}", highlight=False, markup=False, soft_wrap=True)


def print_warnings(warnings: list[str]) -> None:
    for warning in warnings:
        out.print(f"[yellow]warning:[/] {warning}", highlight=False)
