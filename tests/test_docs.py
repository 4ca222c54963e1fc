"""Every command and every setting is documented: named in README.md or a page of docs/.

A command counts as named when ``lakeward <group> <command>`` is written out
(``lakeward iam create-user``), so that a reader searching the docs for the
command finds it. A setting counts when its dotted key is written
(``metastore.heap``), or its key appears under its ``[section]`` in a TOML
example, or in a table of a page about that section.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
import typer.main
from pydantic import BaseModel

from lakeward.cli import app
from lakeward.config import Settings

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def command_paths(command: click.Command, path: tuple[str, ...] = ()) -> Iterator[str]:
    subcommands = getattr(command, "commands", None)
    if subcommands:
        for name, sub in subcommands.items():
            yield from command_paths(sub, (*path, name))
    else:
        yield " ".join(path)


def setting_keys(model: type[BaseModel], prefix: str = "") -> Iterator[str]:
    for name, field in model.model_fields.items():
        annotation: Any = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            yield from setting_keys(annotation, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}"


def _texts() -> list[str]:
    return [page.read_text() for page in PAGES]


def _named_command(texts: list[str], path: str) -> bool:
    words = r"\s+".join(map(re.escape, ["lakeward", *path.split()]))
    pattern = re.compile(rf"{words}(?![\w-])")
    return any(pattern.search(text) for text in texts)


def _toml_sections(text: str) -> Iterator[tuple[str, str]]:
    """``(section, key)`` of every ``key = ...`` line under a ``[section]`` in TOML examples."""
    for block in re.findall(r"```toml\n(.*?)```", text, re.S):
        section = ""
        for line in block.splitlines():
            header = re.match(r"^\[\[?\s*([\w.]+)\s*\]\]?", line.strip())
            if header:
                section = header.group(1)
                continue
            key = re.match(r"^([a-z_][a-z0-9_]*)\s*=", line.strip())
            if key:
                yield section, key.group(1)


def _named_setting(texts: list[str], dotted: str) -> bool:
    section, _, leaf = dotted.rpartition(".")
    for text in texts:
        if re.search(rf"(?<![\w.]){re.escape(dotted)}(?![\w])", text):
            return True
        if section and (section, leaf) in set(_toml_sections(text)):
            return True
        about_section = f"[{section}]" in text or f"`{section}." in text
        table_rows = [line for line in text.splitlines() if line.startswith("|")]
        if section and about_section and any(f"`{leaf}`" in row for row in table_rows):
            return True
    return False


def test_the_walks_find_every_command_and_setting() -> None:
    commands = list(command_paths(typer.main.get_command(app)))
    assert "iam create-user" in commands and "erasure index build" in commands
    assert len(commands) >= 60
    keys = list(setting_keys(Settings))
    assert "metastore.heap" in keys and "erasure.smtp_host" in keys
    assert len(keys) >= 40


@pytest.mark.parametrize("path", list(command_paths(typer.main.get_command(app))))
def test_every_command_is_named_in_the_docs(path: str) -> None:
    assert _named_command(_texts(), path), f"`lakeward {path}` is in no page of README.md/docs/"


@pytest.mark.parametrize("key", list(setting_keys(Settings)))
def test_every_setting_is_named_in_the_docs(key: str) -> None:
    assert _named_setting(_texts(), key), f"setting {key} is in no page of README.md/docs/"
