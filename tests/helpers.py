"""Helpers shared by the tests: prerequisites, and running the real command."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
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


# -- databases on the machine's servers, one per test or module ----------------------


@contextmanager
def postgres_database() -> Iterator[str]:
    """A new, empty PostgreSQL database on 127.0.0.1:5432 (its name), dropped on exit.

    Skips without a server (fails under CI=true).
    """
    try:
        import psycopg
    except ImportError:
        need(False, "psycopg is not installed: pip install 'psycopg[binary]'")
    name = f"lakeward_test_{uuid.uuid4().hex[:12]}"
    try:
        admin = psycopg.connect(PG_SERVER, dbname="postgres", autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        need(False, f"no PostgreSQL server at 127.0.0.1:5432: {exc}")
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield name
    finally:
        with psycopg.connect(PG_SERVER, dbname="postgres", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def _postgres_url() -> Iterator[str]:
    with postgres_database() as name:
        yield f"postgresql://postgres@127.0.0.1:5432/{name}"


@contextmanager
def _mariadb_database() -> Iterator[str]:
    import pymysql

    name = f"lakeward_ms_{uuid.uuid4().hex[:10]}"
    server = {"host": "127.0.0.1", "port": 3306, "user": "root", "password": ""}
    try:
        admin = pymysql.connect(**server, autocommit=True, connect_timeout=5)
    except pymysql.err.OperationalError as exc:
        need(False, f"no MariaDB server at 127.0.0.1:3306: {exc}")
    with admin.cursor() as cursor:
        cursor.execute(f"CREATE DATABASE `{name}`")
    admin.close()
    try:
        yield f"mariadb://root@127.0.0.1:3306/{name}"
    finally:
        admin = pymysql.connect(**server, autocommit=True)
        with admin.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS `{name}`")
        admin.close()


def fresh_database(engine: str) -> AbstractContextManager[str]:
    """A new, empty database on the engine's server (its URL), dropped on exit."""
    return _postgres_url() if engine == "postgres" else _mariadb_database()
