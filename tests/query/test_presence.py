"""Executions shared by several server processes: owners, stops, orphans (query/presence.py).

On both state backends; a real process stands for a server process that dies.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import MetaData, Table, text

from lakeward import sqlstate
from lakeward.query import store as query_store
from lakeward.query.model import QueryExecution, QueryState, StatementType
from lakeward.query.presence import STOP_POLL, Presence, end_process
from lakeward.query.store import Store


def _execution(execution_id: str, state: QueryState = QueryState.RUNNING) -> QueryExecution:
    return QueryExecution(
        id=execution_id,
        query="SELECT 1",
        statement_type=StatementType.DML,
        workgroup="primary",
        catalog="c",
        database="d",
        output_location=f"file:///lake/{execution_id}.csv",
        state=state,
        submitted=datetime.now(UTC),
    )


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_stop_asked_elsewhere_reaches_the_owner_only(db: str | Path) -> None:
    store = Store(db)
    stopped: list[str] = []
    runner = Presence(store, stopped.append, running_since=lambda: 0.0)
    runner.start()
    other = Presence(store, stopped.append, running_since=lambda: None)
    other.start()
    try:
        store.add_execution(_execution("q1"), owner=runner.id)
        store.add_execution(_execution("q2"), owner=other.id)
        assert store.stop_requests(runner.id) == []
        assert store.request_stop("q1")
        assert store.stop_requests(runner.id) == ["q1"]
        assert store.stop_requests(other.id) == []
        finished = _execution("q1", QueryState.CANCELLED)
        store.save_execution(finished)
        assert store.stop_requests(runner.id) == []  # ended: nothing left to stop
        assert not store.request_stop("q1")
    finally:
        other.close()
        runner.close()
        store.engine.dispose()


def test_stops_are_looked_for_once_an_execution_has_run_a_while(db: str | Path) -> None:
    """Short queries, one after another, cost no look for stops; a longer one is
    looked at every STOP_POLL, and its stop is acted on."""
    store = Store(db)
    looks: list[str] = []
    looked_for = store.stop_requests

    def counted(process: str) -> list[str]:
        looks.append(process)
        return looked_for(process)

    store.stop_requests = counted  # type: ignore[method-assign]
    # Each look, the running execution has just started (as when short queries follow
    # one another), until it is made to have run a while.
    started: list[float | None] = [None]
    stopped: list[str] = []
    runner = Presence(store, stopped.append, running_since=lambda: started[0] or time.monotonic())
    runner.start()
    try:
        store.add_execution(_execution("q1"), owner=runner.id)
        store.request_stop("q1")
        for _ in range(10):
            runner.wake()
            time.sleep(STOP_POLL)
        assert looks == [] and stopped == []
        started[0] = time.monotonic() - STOP_POLL  # one that has run on
        runner.wake()
        deadline = time.monotonic() + 10
        while not stopped and time.monotonic() < deadline:
            time.sleep(0.01)
        assert stopped and set(stopped) == {"q1"}
    finally:
        runner.close()
        store.engine.dispose()


def test_the_executions_of_a_dead_process_fail_with_a_reason_and_stay_failed(
    db: str | Path,
) -> None:
    store = Store(db)
    pid = _dead_pid()
    dead = f"{socket.gethostname()}:{pid}:deadbeef"
    store.register_process(dead, pid, socket.gethostname())
    live = Presence(store, lambda _id: None, running_since=lambda: None)
    live.start()  # reaps at once: the dead pid is on this host
    try:
        store.add_execution(_execution("mine"), owner=live.id)
        store.add_execution(_execution("done", QueryState.SUCCEEDED), owner=dead)
        assert [p[0] for p in store.live_processes()] == [live.id]
        store.add_execution(_execution("orphan"), owner=dead)
        assert live.reap() == ["orphan"]
        orphan = store.execution("orphan")
        assert orphan is not None and orphan.state == QueryState.FAILED
        assert f"pid {pid} on {socket.gethostname()}" in (orphan.state_change_reason or "")
        assert orphan.completed is not None
        # The dead process's last write (had it got that far) does not undo the failure.
        store.save_execution(_execution("orphan", QueryState.SUCCEEDED))
        assert store.execution("orphan").state == QueryState.FAILED  # type: ignore[union-attr]
        assert store.execution("mine").state == QueryState.RUNNING  # type: ignore[union-attr]
        assert store.execution("done").state == QueryState.SUCCEEDED  # type: ignore[union-attr]
    finally:
        live.close()
        store.engine.dispose()


def test_a_supervisor_ends_a_worker_with_the_cause(db: str | Path) -> None:
    store = Store(db)
    worker = f"{socket.gethostname()}:{os.getpid()}:w1"
    store.register_process(worker, os.getpid(), socket.gethostname())
    store.add_execution(_execution("q"), owner=worker)
    assert end_process(store, worker, "was killed by signal 9") == ["q"]
    reason = store.execution("q").state_change_reason  # type: ignore[union-attr]
    assert reason is not None and "was killed by signal 9" in reason
    store.engine.dispose()


def test_the_cause_is_given_even_when_another_process_found_the_worker_gone_first(
    db: str | Path,
) -> None:
    """A sibling's look can fail a dead worker's queries before its supervisor, which knows
    how it ended, gets to them: the supervisor's cause still reaches the reason."""
    store = Store(db)
    pid = _dead_pid()
    worker = f"{socket.gethostname()}:{pid}:w1"
    store.register_process(worker, pid, socket.gethostname())
    sibling = Presence(store, lambda _id: None, running_since=lambda: None)
    sibling.start()
    try:
        store.add_execution(_execution("q"), owner=worker)
        assert sibling.reap() == ["q"]
        assert end_process(store, worker, "was killed by signal 9") == []
        failed = store.execution("q")
        assert failed is not None and failed.state == QueryState.FAILED
        assert failed.state_change_reason == (
            f"the server process running the query (pid {pid} on {socket.gethostname()}) "
            "was killed by signal 9; run it again"
        )
    finally:
        sibling.close()
        store.engine.dispose()


def test_a_version_1_database_gains_owners(db: str | Path) -> None:
    engine = sqlstate.open_engine(db)
    sqlstate.migrate(engine, query_store.COMPONENT, query_store.MIGRATIONS[:1], label="query")
    with sqlstate.writer(engine).begin() as conn:
        conn.execute(text("DROP TABLE query_processes"))
        conn.execute(text("DROP INDEX ix_query_executions_owner"))
        for index in query_store.BY_STATE:  # added in version 8
            conn.execute(text(f"DROP INDEX {index.name}"))
        if conn.dialect.name == "sqlite":  # SQLite of this age drops columns one at a time
            conn.execute(text("ALTER TABLE query_executions DROP COLUMN stop_requested"))
            conn.execute(text("ALTER TABLE query_executions DROP COLUMN owner"))
        else:
            conn.execute(
                text("ALTER TABLE query_executions DROP COLUMN stop_requested, DROP COLUMN owner")
            )
        as_of_v1 = Table("query_executions", MetaData(), autoload_with=conn)
        conn.execute(as_of_v1.insert().values(query_store.execution_row(_execution("old"))))
    engine.dispose()
    store = Store(db)
    assert store.execution("old") is not None
    store.register_process("h:1:x", 1, "h")
    store.add_execution(_execution("new"), owner="h:1:x")
    assert store.request_stop("new") and store.stop_requests("h:1:x") == ["new"]
    store.engine.dispose()
