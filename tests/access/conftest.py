"""Backends the access stores are tested on: SQLite, and PostgreSQL on 127.0.0.1:5432.

The PostgreSQL runs use the module's throwaway database (``postgres_db`` in
tests/conftest.py; user postgres, trust auth), one schema per test; they skip
without a server, and fail under CI=true.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from tests.helpers import PG_SERVER, pg_url


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
    return pg_url(dbname, schema)
