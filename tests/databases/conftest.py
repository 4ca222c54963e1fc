"""Local database instances made by ``lakeward db create``, shared per test module.

Instances need the server binaries (PostgreSQL 15's initdb, MariaDB's
mariadbd); registration tests need the machine's servers on 127.0.0.1:5432
(user postgres, trust) and 127.0.0.1:3306 (root, no password). Without them the
tests skip; under CI=true they fail.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from lakeward.access.secrets import open_secret_store
from lakeward.config import Settings, load_settings
from lakeward.databases import InstanceInfo, Instances, load_engine
from tests.helpers import lakeward, need


def need_engine(engine: str) -> None:
    eng = load_engine(engine)
    need(bool(eng.installed()), eng.missing_binaries())


@pytest.fixture(scope="module")
def db_data_dir() -> Iterator[Path]:
    """A data dir the server accounts can reach when the tests run as root.

    As root, servers run as postgres / mysql, which cannot enter pytest's
    private temp dirs (mode 700); a dir of our own under /tmp lets them through.
    """
    base = Path(tempfile.mkdtemp(prefix="lakeward-db-test-"))
    if os.geteuid() == 0:
        base.chmod(0o711)
    data_dir = base / "data"
    yield data_dir
    settings = load_settings(data_dir=data_dir, env={})
    instances = Instances(settings, open_secret_store(settings))
    try:
        instances.stop_all()  # first, so that no server outlives the tests if a delete fails
        for name in instances.registry.load():
            instances.delete(name, final_snapshot=None)
    finally:
        shutil.rmtree(base, ignore_errors=True)


@dataclass
class Created:
    """An instance made with ``lakeward db create`` for a module's tests."""

    name: str
    engine: str
    data_dir: Path
    _credentials: dict[str, Any] = field(default_factory=dict)

    @property
    def settings(self) -> Settings:
        return load_settings(data_dir=self.data_dir, env={})

    def cli(self, *args: str, check: bool = True, env: dict[str, str] | None = None) -> Any:
        return lakeward("db", *args, data_dir=self.data_dir, check=check, env=env)

    def describe(self) -> dict[str, Any]:
        """``lakeward db describe NAME --json``."""
        found: list[dict[str, Any]] = json.loads(self.cli("describe", self.name, "--json").stdout)
        return found[0]

    def instances(self) -> Instances:
        """The instances service of this data dir, as the CLI builds it."""
        settings = self.settings
        return Instances(settings, open_secret_store(settings))

    def info(self) -> InstanceInfo:
        """The same through the service, without a process start."""
        return self.instances().describe(self.name)[0]

    def credentials(self) -> dict[str, Any]:
        if not self._credentials:  # they do not change: ask once
            self._credentials = json.loads(self.cli("credentials", self.name, "--json").stdout)
        return self._credentials


def create_instance(data_dir: Path, name: str, engine: str, *args: str) -> Created:
    need_engine(engine)
    created = Created(name, engine, data_dir)
    created.cli("create", name, "--engine", engine, *args)
    return created
