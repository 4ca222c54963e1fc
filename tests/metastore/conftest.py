"""Database servers the metastore is tested on: PostgreSQL on 127.0.0.1:5432 and
MariaDB on 127.0.0.1:3306 (trust auth / root without a password, as in CI).

Each fixture makes a throwaway database and drops it afterwards; without the
server the test skips, and under CI=true it fails.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from lakeward.process import free_port, port_is_free
from tests.helpers import fresh_database

ENGINES = ["postgres", "mariadb"]


def free_ports(count: int) -> int:
    """The first of ``count`` consecutive free ports, away from the defaults other stacks take."""
    start = random.randrange(20_000, 40_000)
    while True:
        first = free_port("127.0.0.1", start)
        if all(port_is_free("127.0.0.1", p) for p in range(first, first + count)):
            return first
        start = first + count


def metastore_env(engine: str, url: str, nodes: int) -> dict[str, str]:
    """The environment of a stack with ``nodes`` metastore nodes over the database at ``url``."""
    return {
        "LAKEWARD_METASTORE__BACKEND": engine,
        "LAKEWARD_METASTORE__URL": url,
        "LAKEWARD_METASTORE__NODES": str(nodes),
        "LAKEWARD_METASTORE__HEAP": "384m",  # several JVMs share a small machine
        "LAKEWARD_METASTORE__PORT": str(free_ports(nodes)),
    }


@pytest.fixture
def postgres_url() -> Iterator[str]:
    with fresh_database("postgres") as url:
        yield url


@pytest.fixture
def mariadb_url() -> Iterator[str]:
    with fresh_database("mariadb") as url:
        yield url
