"""What the benchmarks and the tests share to drive lakeward: the real command, the
JHU files, and databases of their own on the machine's PostgreSQL and MariaDB servers.

Imported as ``bench._harness`` (the repository's root on ``sys.path``: pytest puts it
there, the scripts beside this one insert it), so that bench/ never imports from tests/.
It knows nothing of pytest: a missing server or driver raises ``Unavailable``, which a
benchmark reports and tests/helpers.py turns into a skip (a failure under CI=true).
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
JHU_DIR = ROOT.parent / "shared" / "data" / "jhu_csse"
PG_SERVER = "host=127.0.0.1 port=5432 user=postgres"
"""The PostgreSQL server databases are created on (trust auth)."""
MARIADB_SERVER = {"host": "127.0.0.1", "port": 3306, "user": "root", "password": ""}


class Unavailable(Exception):
    """A server or driver the caller needs is not there (the message says which)."""


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


@contextmanager
def postgres_database() -> Iterator[str]:
    """A new, empty PostgreSQL database on 127.0.0.1:5432 (its name), dropped on exit."""
    try:
        import psycopg
    except ImportError:
        raise Unavailable("psycopg is not installed: pip install 'psycopg[binary]'") from None
    name = f"lakeward_test_{uuid.uuid4().hex[:12]}"
    try:
        admin = psycopg.connect(PG_SERVER, dbname="postgres", autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        raise Unavailable(f"no PostgreSQL server at 127.0.0.1:5432: {exc}") from None
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
    try:
        import pymysql
    except ImportError:
        raise Unavailable("PyMySQL is not installed: pip install pymysql") from None

    name = f"lakeward_ms_{uuid.uuid4().hex[:10]}"
    try:
        admin = pymysql.connect(**MARIADB_SERVER, autocommit=True, connect_timeout=5)
    except pymysql.err.OperationalError as exc:
        raise Unavailable(f"no MariaDB server at 127.0.0.1:3306: {exc}") from None
    with admin.cursor() as cursor:
        cursor.execute(f"CREATE DATABASE `{name}`")
    admin.close()
    try:
        yield f"mariadb://root@127.0.0.1:3306/{name}"
    finally:
        admin = pymysql.connect(**MARIADB_SERVER, autocommit=True)
        with admin.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS `{name}`")
        admin.close()


def fresh_database(engine: str) -> AbstractContextManager[str]:
    """A new, empty database on the engine's server (its URL), dropped on exit."""
    return _postgres_url() if engine == "postgres" else _mariadb_database()
