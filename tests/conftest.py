"""Shared fixtures: a real stack (metastore + server + ETL of the real JHU files).

Tests that need Java, Spark or the JHU data skip with a reason on a developer's
machine that lacks them; under CI=true they fail instead, so that nothing is
silently left untested.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from lakeward.config import Settings, load_settings
from tests.helpers import JHU_DIR, lakeward, need, need_java


@pytest.fixture(scope="session")
def jhu_dir() -> Path:
    need((JHU_DIR / "time_series_covid19_confirmed_global.csv").is_file(),
         f"the JHU CSSE files are not at {JHU_DIR}")  # fmt: skip
    return JHU_DIR


@pytest.fixture(scope="session")
def stack_dir(tmp_path_factory: pytest.TempPathFactory, jhu_dir: Path) -> Iterator[Path]:
    """A stack brought up with ``lakeward up`` on the real JHU files, for the session."""
    need_java()
    data_dir = tmp_path_factory.mktemp("stack") / "data"
    result = lakeward("up", "--covid-source", str(jhu_dir), data_dir=data_dir, timeout=900)
    (data_dir / "up.stdout").write_text(result.stdout)
    yield data_dir
    lakeward("down", data_dir=data_dir, check=False, timeout=120)


@pytest.fixture(scope="session")
def stack(stack_dir: Path) -> Settings:
    """The settings of the running session stack, as any command would load them."""
    return load_settings(data_dir=stack_dir, env={})


@pytest.fixture(scope="session")
def spark(stack: Settings) -> Iterator[object]:
    """An in-process SparkSession wired to the session stack."""
    from lakeward.spark import build_session

    session = build_session(stack, "lakeward-tests")
    yield session
    session.stop()
