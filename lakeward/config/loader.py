"""Resolving a stack's settings from its layers (see the package docstring).

Every value remembers where it came from, so that a bad one is reported with
its key and its file and line, or its variable, or its flag.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import (
    ValidationError,
)

from lakeward.config.sections import (
    DEFAULT_DATA_DIR,
    ENV_CONFIG,
    ENV_COVID_SOURCE,
    ENV_DATA_DIR,
    ENV_PREFIX,
    STACK_FILE_NAME,
    STATE_FILE_NAME,
    Settings,
)
from lakeward.errors import ConfigError


class _Layers:
    """A nested dict of raw values plus, per dotted key, where each came from."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}
        self.origins: dict[str, str] = {}

    def set(self, dotted: str, value: Any, origin: str) -> None:
        node = self.values
        *parents, leaf = dotted.split(".")
        for part in parents:
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
        node[leaf] = value
        self.origins[dotted] = origin

    def merge(self, data: Mapping[str, Any], origin_of: Any, prefix: str = "") -> None:
        for key, value in data.items():
            dotted = f"{prefix}{key}"
            # Spark's conf is a free-form map: keep it whole, don't recurse into it.
            if isinstance(value, Mapping) and dotted != "spark.conf":
                self.merge(value, origin_of, dotted + ".")
            else:
                self.set(dotted, value, origin_of(dotted))

    def origin(self, loc: tuple[int | str, ...]) -> str:
        dotted = ".".join(str(p) for p in loc)
        while dotted:
            if dotted in self.origins:
                return self.origins[dotted]
            dotted = dotted.rpartition(".")[0]
        return "the defaults"


def _toml_line(text: str, dotted: str) -> int | None:
    """The line of ``key = ...`` for a dotted key in a TOML text (tables and dotted keys)."""
    *section, leaf = dotted.split(".")
    current: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        header = re.match(r"^\[\s*([^\]]+?)\s*\]", stripped)
        if header:
            current = [p.strip().strip('"') for p in header.group(1).split(".")]
            continue
        match = re.match(r"^([A-Za-z0-9_.\"-]+)\s*=", stripped)
        if match:
            key = current + [p.strip().strip('"') for p in match.group(1).split(".")]
            if key == section + [leaf] or key == section:
                return number
    return None


def _read_stack_file(path: Path, layers: _Layers) -> None:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read the stack file {path}: {exc.strerror}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None

    def origin_of(dotted: str) -> str:
        line = _toml_line(text, dotted)
        return f"{path} line {line}" if line else str(path)

    if "data_dir" in data:
        raise ConfigError(
            f"data_dir: set the data dir with --data-dir or {ENV_DATA_DIR}, "
            f"not in the stack file ({origin_of('data_dir')})"
        )
    layers.merge(data, origin_of)


def _read_env(env: Mapping[str, str], layers: _Layers) -> None:
    sections = {n for n, f in Settings.model_fields.items() if n != "data_dir"}
    if env.get(ENV_COVID_SOURCE):
        layers.set(
            "covid.source", env[ENV_COVID_SOURCE], f"environment variable {ENV_COVID_SOURCE}"
        )
    for name, value in sorted(env.items()):
        if not name.startswith(ENV_PREFIX) or "__" not in name:
            continue
        section, _, key = name[len(ENV_PREFIX) :].lower().partition("__")
        if section not in sections:
            raise ConfigError(
                f"environment variable {name}: unknown section {section!r} "
                f"(known: {', '.join(sorted(sections))})"
            )
        parsed: Any = value
        if section == "spark" and key == "conf":
            try:
                parsed = json.loads(value)
            except json.JSONDecodeError:
                raise ConfigError(
                    f"environment variable {name}: must be a JSON object of Spark settings"
                ) from None
        layers.set(f"{section}.{key}", parsed, f"environment variable {name}")


def resolve_data_dir(flag: str | Path | None, env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    chosen = flag or env.get(ENV_DATA_DIR) or DEFAULT_DATA_DIR
    return Path(chosen).expanduser().absolute()


def load_settings(
    data_dir: str | Path | None = None,
    config_file: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
) -> Settings:
    """Resolve the settings of the stack in ``data_dir`` (see the module docstring).

    ``overrides`` maps dotted keys (``covid.source``) to values given as flags;
    ``None`` values are ignored.
    """
    env = os.environ if env is None else env
    directory = resolve_data_dir(data_dir, env)
    layers = _Layers()

    state = directory / STATE_FILE_NAME
    if state.is_file():
        try:
            stored = json.loads(state.read_text(encoding="utf-8")).get("settings", {})
        except (OSError, json.JSONDecodeError) as exc:
            raise ConfigError(f"{state}: the stack's state file is unreadable ({exc})") from None
        layers.merge(stored, lambda _k: f"{state} (settings of the running stack)")

    config_path = config_file or env.get(ENV_CONFIG)
    if config_path:
        _read_stack_file(Path(config_path), layers)
    elif Path(STACK_FILE_NAME).is_file():
        _read_stack_file(Path(STACK_FILE_NAME).absolute(), layers)

    _read_env(env, layers)
    for dotted, value in (overrides or {}).items():
        if value is not None:
            layers.set(dotted, value, f"flag --{dotted.rpartition('.')[2].replace('_', '-')}")

    try:
        return Settings(data_dir=directory, **layers.values)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            key = ".".join(str(p) for p in error["loc"])
            message = error["msg"].removeprefix("Value error, ")
            if error["type"] == "extra_forbidden":
                message = "unknown setting"
            problems.append(f"{key}: {message} (from {layers.origin(error['loc'])})")
        raise ConfigError("invalid settings:\n  " + "\n  ".join(problems)) from None
