"""Workgroups a user manages, and the limits checked when a query starts (SQLite and PostgreSQL).

The limits are counted in the state database, so they hold across server
processes: several processes racing for the last slots get exactly the cap.
"""

from __future__ import annotations

import multiprocessing
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest

from lakeward.access import AllowAll
from lakeward.errors import InvalidRequest, TooManyRequests
from lakeward.query.model import NamedQuery, QueryExecution, QueryState, StatementType, WorkGroup
from lakeward.query.store import Store
from lakeward.query.workgroups import WorkGroups

LAKE = "file:///srv/lake"


def groups(db: str | Path) -> WorkGroups:
    store = Store(db)
    store.put_workgroup(WorkGroup(name="primary", created=datetime.now(UTC)))
    return WorkGroups(store, AllowAll(), LAKE)


def record(store: Store, execution_id: str, workgroup: str, state: QueryState) -> None:
    store.add_execution(
        QueryExecution(
            id=execution_id,
            query="SELECT 1",
            statement_type=StatementType.DML,
            workgroup=workgroup,
            catalog="c",
            database="d",
            output_location=f"{LAKE}/r/{execution_id}.csv",
            state=state,
            submitted=datetime.now(UTC),
        )
    )


def test_create_update_delete_persist(db: str | Path) -> None:
    made = groups(db).create(
        WorkGroup(
            name="analysts",
            engine="spark",
            output_location=f"{LAKE}/data/analysts",
            timeout_seconds=60,
            max_concurrent=2,
            max_queued=5,
            max_per_principal=1,
            bytes_scanned_cutoff=50_000_000,
        )
    )
    assert made.created is not None
    again = groups(db)  # another process over the same database
    assert again.get("analysts") == made
    assert [g.name for g in again.listed()] == ["analysts", "primary"]
    changed = again.update("analysts", max_per_principal=None, engine="duckdb", state="DISABLED")
    assert changed.max_per_principal is None
    assert (changed.engine, changed.state) == ("duckdb", "DISABLED")
    assert changed.max_concurrent == 2 and changed.bytes_scanned_cutoff == 50_000_000
    assert groups(db).find("analysts") == changed
    again.delete("analysts")
    with pytest.raises(InvalidRequest, match="WorkGroup analysts is not found"):
        groups(db).get("analysts")


@pytest.mark.parametrize(
    ("group", "message"),
    [
        (WorkGroup(name="w", engine="trino"), "engine must be one of duckdb, spark"),
        (WorkGroup(name="w", bytes_scanned_cutoff=0), "Cutoff.* must be positive, not 0"),
        (WorkGroup(name="w", max_concurrent=0), "max concurrent queries must be between 1"),
        (WorkGroup(name="w", max_per_principal=0), "max queries per principal must be"),
        (WorkGroup(name="w", timeout_seconds=0), "timeout must be between"),
        (WorkGroup(name="w", output_location="file:///etc"), "/etc is not in the lake"),
    ],
)
def test_bad_settings_are_refused_naming_them(
    db: str | Path, group: WorkGroup, message: str
) -> None:
    workgroups = groups(db)
    with pytest.raises(InvalidRequest, match=message):
        workgroups.create(group)
    assert [g.name for g in workgroups.listed()] == ["primary"]  # nothing half-made


def test_delete_refusals(db: str | Path) -> None:
    workgroups = groups(db)
    with pytest.raises(InvalidRequest, match="primary workgroup cannot be deleted"):
        workgroups.delete("primary")
    workgroups.create(WorkGroup(name="team"))
    workgroups.store.add_named_query(NamedQuery("n1", "daily", "default", "SELECT 1", "team"), None)
    with pytest.raises(InvalidRequest, match="holds 1 named queries"):
        workgroups.delete("team")
    record(workgroups.store, "running-one", "team", QueryState.RUNNING)
    with pytest.raises(InvalidRequest, match="1 queries queued or running"):
        workgroups.delete("team", recursive=True)
    workgroups.store.save_execution(_ended(workgroups.store, "running-one"))
    workgroups.delete("team", recursive=True)
    assert workgroups.store.named_query("n1") is None
    assert workgroups.store.execution("running-one") is not None  # the history stays


def _ended(store: Store, execution_id: str) -> QueryExecution:
    execution = store.execution(execution_id)
    assert execution is not None
    execution.state = QueryState.SUCCEEDED
    return execution


def test_workgroup_and_principal_limits(db: str | Path) -> None:
    workgroups = groups(db)
    group = workgroups.create(
        WorkGroup(name="shared", max_concurrent=2, max_queued=1, max_per_principal=2)
    )
    for execution_id in ("a1", "a2"):
        workgroups.admit(execution_id, group, "alice")
        record(workgroups.store, execution_id, "shared", QueryState.RUNNING)
    with pytest.raises(TooManyRequests, match="alice has 2 queries queued or running in Work"):
        workgroups.admit("a3", group, "alice")
    workgroups.admit("b1", group, "bob")  # alice's limit is hers only
    with pytest.raises(TooManyRequests, match=r"WorkGroup shared has 3 queries .* \(2 running"):
        workgroups.admit("b2", group, "bob")
    # An admission whose execution is not recorded yet counts too (b1 has no row).
    workgroups.store.save_execution(_ended(workgroups.store, "a1"))
    workgroups.admit("a3", group, "alice")  # a1 ended: its slot is free again
    other = workgroups.create(WorkGroup(name="other", max_concurrent=1, max_queued=0))
    workgroups.admit("c1", other, "alice")  # limits are per workgroup


def _race(db: str, execution_id: str, start: multiprocessing.synchronize.Event) -> bool:
    store = Store(db)
    workgroups = WorkGroups(store, AllowAll(), LAKE)
    group = workgroups.find("race")
    start.wait()
    try:
        workgroups.admit(execution_id, group, "p" + execution_id)
    except TooManyRequests:
        return False
    finally:
        store.engine.dispose()
    return True


def test_processes_racing_for_the_last_slots_get_exactly_the_cap(db: str | Path) -> None:
    workgroups = groups(db)
    workgroups.create(WorkGroup(name="race", max_concurrent=2, max_queued=1))
    context = multiprocessing.get_context("spawn")
    start = context.Manager().Event()
    with context.Pool(6) as pool:
        pending = [pool.apply_async(_race, (str(db), uuid.uuid4().hex, start)) for _ in range(6)]
        start.set()
        admitted = [p.get(timeout=60) for p in pending]
    assert sum(admitted) == 3


def _start(db: str, execution_id: str, start: multiprocessing.synchronize.Event) -> bool:
    store = Store(db)
    workgroups = WorkGroups(store, AllowAll(), LAKE)
    group = workgroups.find("race-running")
    start.wait()
    try:
        return workgroups.start_running(execution_id, group)
    finally:
        store.engine.dispose()


def test_processes_racing_to_run_get_exactly_the_concurrency_cap(db: str | Path) -> None:
    workgroups = groups(db)
    workgroups.create(WorkGroup(name="race-running", max_concurrent=2, max_queued=10))
    ids = [uuid.uuid4().hex for _ in range(6)]
    for execution_id in ids:
        record(workgroups.store, execution_id, "race-running", QueryState.QUEUED)
    record(workgroups.store, "elsewhere", "primary", QueryState.RUNNING)  # another workgroup's
    context = multiprocessing.get_context("spawn")
    start = context.Manager().Event()
    with context.Pool(6) as pool:
        pending = [pool.apply_async(_start, (str(db), i, start)) for i in ids]
        start.set()
        started = [p.get(timeout=60) for p in pending]
    assert sum(started) == 2
    states = {i: workgroups.store.execution(i).state for i in ids}  # type: ignore[union-attr]
    assert sorted(s.value for s in states.values()) == ["QUEUED"] * 4 + ["RUNNING"] * 2
    # One ends: the next waiting one may run, and only one.
    first = next(i for i, started_here in zip(ids, started, strict=True) if started_here)
    workgroups.store.save_execution(_ended(workgroups.store, first))
    waiting = [i for i, s in states.items() if s is QueryState.QUEUED]
    assert [workgroups.start_running(i, workgroups.find("race-running")) for i in waiting] == [
        True, False, False, False,
    ]  # fmt: skip
