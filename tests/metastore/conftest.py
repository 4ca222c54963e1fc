"""Database servers the metastore is tested on: PostgreSQL on 127.0.0.1:5432 and
MariaDB on 127.0.0.1:3306 (trust auth / root without a password, as in CI).

Each fixture makes a throwaway database and drops it afterwards; without the
server the test skips, and under CI=true it fails.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager

import pytest

from lakeward.process import free_port, port_is_free
from tests.helpers import PG_SERVER, need

ENGINES = ["postgres", "mariadb"]


def free_ports(count: int) -> int:
    """The first of ``count`` consecutive free ports, away from the defaults other stacks take."""
    start = random.randrange(20_000, 40_000)
    while True:
        first = free_port("127.0.0.1", start)
        if all(port_is_free("127.0.0.1", p) for p in range(first, first + count)):
            return first
        start = first + count


@contextmanager
def _postgres_database() -> Iterator[str]:
    import psycopg

    name = f"lakeward_ms_{uuid.uuid4().hex[:10]}"
    try:
        admin = psycopg.connect(PG_SERVER, dbname="postgres", autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        need(False, f"no PostgreSQL server at 127.0.0.1:5432: {exc}")
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    finally:
        with psycopg.connect(PG_SERVER, dbname="postgres", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


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


def metastore_env(engine: str, url: str, nodes: int) -> dict[str, str]:
    """The environment of a stack with ``nodes`` metastore nodes over the database at ``url``."""
    return {
        "LAKEWARD_METASTORE__BACKEND": engine,
        "LAKEWARD_METASTORE__URL": url,
        "LAKEWARD_METASTORE__NODES": str(nodes),
        "LAKEWARD_METASTORE__HEAP": "384m",  # several JVMs share a small machine
        "LAKEWARD_METASTORE__PORT": str(free_ports(nodes)),
    }


def fresh_database(engine: str) -> AbstractContextManager[str]:
    """A new, empty database on the engine's server (its URL), dropped on exit."""
    return _postgres_database() if engine == "postgres" else _mariadb_database()


@pytest.fixture
def postgres_url() -> Iterator[str]:
    with _postgres_database() as url:
        yield url


@pytest.fixture
def mariadb_url() -> Iterator[str]:
    with _mariadb_database() as url:
        yield url
