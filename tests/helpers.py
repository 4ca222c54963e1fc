"""Helpers shared by the tests: prerequisites, and running the real command."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
JHU_DIR = ROOT.parent / "shared" / "data" / "jhu_csse"
IN_CI = os.environ.get("CI") == "true"
PG_SERVER = "host=127.0.0.1 port=5432 user=postgres"
"""The PostgreSQL server tests create their own databases on (trust auth)."""


def pg_url(dbname: str, schema: str | None = None) -> str:
    """A SQLAlchemy URL of a database on ``PG_SERVER`` (searching ``schema`` first if given)."""
    url = f"postgresql+psycopg://postgres@127.0.0.1:5432/{dbname}"
    return f"{url}?options=-csearch_path%3D{schema}" if schema else url


def need(condition: bool, reason: str) -> None:
    """Skip (or, in CI, fail) when a prerequisite of the test is missing."""
    if condition:
        return
    if IN_CI:
        pytest.fail(f"required in CI: {reason}")
    pytest.skip(reason)


def need_java() -> None:
    need(
        shutil.which("java") is not None or bool(os.environ.get("JAVA_HOME")),
        "Java 17 is not installed",
    )


def lakeward(*args: str, data_dir: Path, check: bool = True, timeout: float = 600,
             env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """Run the real ``lakeward`` command, as a user would."""
    result = subprocess.run(
        [sys.executable, "-m", "lakeward", *args, "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
        check=False,
    )
    if check and result.returncode != 0:
        raise AssertionError(
            f"lakeward {' '.join(args)} exited {result.returncode}\n"
            f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
        )
    return result


def parse_outputs(stdout: str) -> dict[str, str]:
    pairs = {}
    for line in stdout.splitlines():
        key, sep, value = line.partition(" = ")
        if sep and key.strip().isidentifier():
            pairs[key.strip()] = value.strip()
    return pairs
