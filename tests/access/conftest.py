"""Backends the access stores are tested on: SQLite, and PostgreSQL on 127.0.0.1:5432.

The PostgreSQL runs use a throwaway database per test module (user postgres,
trust auth), one schema per test; they skip without a server, and fail under
CI=true.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import need

PG_SERVER = "host=127.0.0.1 port=5432 user=postgres"


@pytest.fixture(scope="module")
def postgres_db() -> Iterator[str]:
    """A fresh PostgreSQL database for this module, dropped afterwards."""
    try:
        import psycopg
    except ImportError:
        need(False, "psycopg is not installed: pip install 'psycopg[binary]'")
    name = f"lakeward_test_{uuid.uuid4().hex[:12]}"
    try:
        admin = psycopg.connect(PG_SERVER, dbname="postgres", autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as e:
        need(False, f"no PostgreSQL server at 127.0.0.1:5432: {e}")
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    yield name
    with psycopg.connect(PG_SERVER, dbname="postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str | Path:
    """Where a store lives: a SQLite file, or a schema of its own in PostgreSQL."""
    if request.param == "sqlite":
        return tmp_path / "state.db"
    import psycopg

    dbname = request.getfixturevalue("postgres_db")
    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_SERVER, dbname=dbname, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    return f"postgresql+psycopg://postgres@127.0.0.1:5432/{dbname}?options=-csearch_path%3D{schema}"
