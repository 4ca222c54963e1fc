"""lakeward.sqlstate: versioned migrations per component, on SQLite and PostgreSQL."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import Column, Integer, MetaData, Table, inspect, select, text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import OperationalError

from lakeward import sqlstate
from lakeward.errors import ConfigError
from lakeward.query.model import DataCatalog, WorkGroup
from lakeward.query.store import COMPONENT as QUERY_COMPONENT
from lakeward.query.store import Store

metadata = MetaData()
things = Table("things", metadata, Column("id", Integer, primary_key=True))
calls: list[str] = []


def v1(conn: Connection) -> None:
    calls.append("v1")
    metadata.create_all(conn, tables=[things])


def v2(conn: Connection) -> None:
    calls.append("v2")
    conn.execute(text("ALTER TABLE things ADD COLUMN name VARCHAR(20)"))


def test_steps_run_once_and_upgrade_a_database_step_by_step(db: str | Path) -> None:
    calls.clear()
    engine = sqlstate.open_engine(db)
    assert sqlstate.migrate(engine, "things", [v1], label="things") == 0
    assert sqlstate.migrate(engine, "things", [v1], label="things") == 1  # nothing to do
    assert calls == ["v1"]
    assert sqlstate.migrate(engine, "things", [v1, v2], label="things") == 1
    assert calls == ["v1", "v2"]
    with engine.connect() as conn:
        assert {c["name"] for c in inspect(conn).get_columns("things")} == {"id", "name"}
        assert conn.execute(select(sqlstate.schema_version.c.version)).scalar() == 2
    engine.dispose()


def test_a_newer_database_is_refused_by_name(db: str | Path) -> None:
    engine = sqlstate.open_engine(db)
    sqlstate.migrate(engine, "things", [v1, v2], label="things")
    with pytest.raises(ConfigError, match="things database .* schema version 2, newer"):
        sqlstate.migrate(engine, "things", [v1], label="things")
    engine.dispose()


def test_a_store_made_before_versions_is_adopted_with_its_rows(db: str | Path) -> None:
    # The query store's tables as an earlier lakeward made them: create_all, no version.
    engine = sqlstate.open_engine(db)
    from lakeward.query import store as query_store

    with sqlstate.writer(engine).begin() as conn:
        query_store.metadata.create_all(conn)
        conn.execute(
            query_store.catalogs.insert().values(
                name="old", type="HIVE", description="kept", parameters="{}"
            )
        )
    engine.dispose()
    store = Store(db)
    assert [c.name for c in store.catalogs()] == ["old"]
    with store.engine.connect() as conn:
        row = conn.execute(
            select(sqlstate.schema_version.c.version).where(
                sqlstate.schema_version.c.component == QUERY_COMPONENT
            )
        ).scalar()
    assert row == len(query_store.MIGRATIONS)
    store.engine.dispose()


def test_executions_of_a_v2_store_gain_who_started_them(db: str | Path) -> None:
    # The executions table as version 2 made it: no started_by column.
    engine = sqlstate.open_engine(db)
    from lakeward.query import store as query_store

    sqlstate.migrate(engine, QUERY_COMPONENT, query_store.MIGRATIONS[:2], label="query")
    with sqlstate.writer(engine).begin() as conn:
        conn.execute(text("DROP INDEX ix_query_executions_started_by"))
        conn.execute(text("ALTER TABLE query_executions DROP COLUMN started_by"))
    engine.dispose()
    store = Store(db)
    with store.engine.connect() as conn:
        columns = {c["name"] for c in inspect(conn).get_columns("query_executions")}
    assert "started_by" in columns
    assert store.execution_ids(None, 0, 10, started_by="nobody") == []
    store.engine.dispose()


def test_executions_of_a_v7_store_gain_their_indexes_by_state(db: str | Path) -> None:
    # The executions table as version 7 made it: found by workgroup and owner only.
    engine = sqlstate.open_engine(db)
    from lakeward.query import store as query_store

    sqlstate.migrate(engine, QUERY_COMPONENT, query_store.MIGRATIONS[:7], label="query")
    with sqlstate.writer(engine).begin() as conn:
        for index in query_store.BY_STATE:
            conn.execute(text(f"DROP INDEX {index.name}"))
    engine.dispose()
    store = Store(db)
    with store.engine.connect() as conn:
        found = inspect(conn).get_indexes("query_executions")
    indexes = {index["name"]: index["column_names"] for index in found}
    assert indexes["ix_query_executions_state_workgroup"] == ["state", "workgroup"]
    assert indexes["ix_query_executions_state_owner"] == ["state", "owner"]
    store.engine.dispose()


def test_the_query_store_keeps_catalogs_and_workgroups_on_both_backends(db: str | Path) -> None:
    from datetime import UTC, datetime

    store = Store(db)
    assert store.put_catalog(DataCatalog("lake", "HIVE", "the lake", {"uris": "thrift://x"}))
    assert not store.put_catalog(DataCatalog("lake", "HIVE", "again", {}))
    created = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
    store.put_workgroup(WorkGroup(name="analysts", created=created, description="BI"))
    (group,) = [g for g in store.workgroups() if g.name == "analysts"]
    assert group.created == created and group.created.tzinfo is not None
    assert store.delete_catalog("lake") and store.catalogs() == []
    store.engine.dispose()


def test_a_write_held_off_by_a_lock_is_tried_again_and_a_missing_table_is_not(
    tmp_path: Path,
) -> None:
    """``persisted`` waits out what passes (another process holding SQLite's write lock
    past the busy timeout) and raises at once what waiting cannot mend: an execution
    saved into a database whose table is gone must not hang its thread for minutes."""
    import threading

    engine = sqlstate.open_engine(tmp_path / "state.db")
    metadata.create_all(engine, tables=[things])
    holder = sqlite3.connect(tmp_path / "state.db", timeout=0, check_same_thread=False)
    holder.execute("BEGIN EXCLUSIVE")
    impatient = sqlite3.connect(tmp_path / "state.db", timeout=0)
    tries: list[int] = []

    def write() -> int:
        tries.append(1)
        try:
            impatient.execute("INSERT INTO things (id) VALUES (1)")
            impatient.commit()
        except sqlite3.OperationalError as e:
            raise OperationalError("INSERT INTO things", {}, e) from e
        return len(tries)

    releaser = threading.Timer(0.5, holder.rollback)
    releaser.start()
    assert sqlstate.persisted(write, "a thing") > 1
    assert impatient.execute("SELECT id FROM things").fetchall() == [(1,)]

    def into_nowhere() -> None:
        tries.append(1)
        try:
            impatient.execute("INSERT INTO gone (id) VALUES (1)")
        except sqlite3.OperationalError as e:
            raise OperationalError("INSERT INTO gone", {}, e) from e

    tries.clear()
    with pytest.raises(OperationalError, match="no such table: gone"):
        sqlstate.persisted(into_nowhere, "a thing in no table")
    assert len(tries) == 1
