"""Workgroups a user manages, and the limits they put on who may start how many queries.

A workgroup names an engine (DuckDB or Spark SQL), where results go, a
timeout, a bytes-scanned cutoff and three limits:

- ``max_concurrent``: executions running at once; the rest wait, QUEUED;
- ``max_queued``: executions waiting at once; beyond ``max_concurrent +
  max_queued`` executions QUEUED or RUNNING, StartQueryExecution is refused;
- ``max_per_principal``: executions one principal may have QUEUED or RUNNING
  in the workgroup, so one client cannot take every engine slot.

The last two are checked when a query is started (``admit``), against the
state database, so they hold however many server processes share it. Each
admitted execution leaves a row in ``query_admissions`` (who started it, in
which workgroup); the count joins it to the execution's state, so an
execution that ended, or that a dead process left behind and another failed,
stops counting at once. Admissions are serialized per database (SQLite's
write lock; on PostgreSQL a lock on the workgroup's row), so two processes
cannot both take the last slot.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import (
    Column,
    DateTime,
    MetaData,
    String,
    Table,
    and_,
    bindparam,
    delete,
    func,
    insert,
    inspect,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.engine import Connection

from lakeward.access import Authorizer
from lakeward.access.arns import workgroup_arn
from lakeward.errors import InvalidRequest, TooManyRequests
from lakeward.query.model import QueryState, WorkGroup
from lakeward.query.store import Store, executions, named_queries, workgroups
from lakeward.sqlstate import migrate, writer
from lakeward.storage.paths import local_path, place_in

COMPONENT = "workgroups"  # its row in sqlstate's schema_version
ENGINES = ("duckdb", "spark")
# An admission whose execution was never recorded (its process died in between)
# stops counting after this long.
UNRECORDED_GRACE = timedelta(seconds=60)

_UNFINISHED = (QueryState.QUEUED.value, QueryState.RUNNING.value)

metadata = MetaData()
admissions = Table(
    "query_admissions",
    metadata,
    Column("execution_id", String(36), primary_key=True),
    Column("workgroup", String(128), nullable=False, index=True),
    Column("principal", String(256), nullable=False),
    Column("admitted", DateTime(timezone=True), nullable=False),
)


# The admission's statements, built once (see store.py).
_joined = admissions.outerjoin(executions, executions.c.id == admissions.c.execution_id)
_counting = or_(
    executions.c.state.in_(_UNFINISHED),
    and_(executions.c.id.is_(None), admissions.c.admitted > bindparam("unrecorded_since")),
)
_ACTIVE = select(func.count()).select_from(_joined).where(_counting)
_ACTIVE_IN_GROUP = _ACTIVE.where(admissions.c.workgroup == bindparam("group"))
_ACTIVE_OF_PRINCIPAL = _ACTIVE_IN_GROUP.where(admissions.c.principal == bindparam("principal"))
_ADMIT = insert(admissions)
_ENDED = (
    select(executions.c.id)
    .where(executions.c.id == admissions.c.execution_id)
    .where(executions.c.state.not_in(_UNFINISHED))
    .exists()
)
_RECORDED = select(executions.c.id).where(executions.c.id == admissions.c.execution_id).exists()
# The admissions that no longer count: the table holds the live ones only.
_FORGET_FINISHED = delete(admissions).where(
    _ENDED | (~_RECORDED & (admissions.c.admitted <= bindparam("unrecorded_since")))
)
_RUNNING_IN_GROUP = (
    select(func.count())
    .select_from(executions)
    .where(
        executions.c.workgroup == bindparam("group"),
        executions.c.state == QueryState.RUNNING.value,
    )
)
_START_RUNNING = update(executions).where(  # the columns to set are the parameters' keys
    executions.c.id == bindparam("started_id"), executions.c.state == QueryState.QUEUED.value
)


def check(group: WorkGroup, lake_root: str) -> None:
    """Refuse a workgroup lakeward cannot honour, naming the setting at fault."""
    where = f"workgroup {group.name}"
    location = group.output_location
    place = None if location is None else place_in(lake_root, location)
    if location is not None and place is None:
        raise InvalidRequest(f"{where}: the output location {location} is not in the lake")
    local = local_path(lake_root)
    named_s3 = location is not None and location.startswith("s3://")
    # An embedded lake's S3 name must name one of its buckets (its file:// places are in it).
    if place is not None and local is not None and named_s3 and not (local / place[0]).is_dir():
        raise InvalidRequest(
            f"{where}: the output location {location} is not in the lake: "
            f"it has no bucket {place[0]}"
        )
    if group.engine not in ENGINES:
        raise InvalidRequest(f"{where}: engine must be one of {', '.join(ENGINES)}")
    if group.state not in ("ENABLED", "DISABLED"):
        raise InvalidRequest(f"{where}: state must be ENABLED or DISABLED")
    if not 0 < group.timeout_seconds <= 7 * 24 * 3600:
        raise InvalidRequest(f"{where}: the timeout must be between 1 s and 7 days")
    for name, value, low in (
        ("max concurrent queries", group.max_concurrent, 1),
        ("max queued queries", group.max_queued, 0),
        ("max queries per principal", group.max_per_principal, 1),
    ):
        if value is not None and not low <= value <= 10_000:
            raise InvalidRequest(f"{where}: {name} must be between {low} and 10000, not {value}")
    # The API holds it to Athena's minimum (10,000,000) through Athena's model.
    cutoff = group.bytes_scanned_cutoff
    if cutoff is not None and cutoff < 1:
        raise InvalidRequest(f"{where}: BytesScannedCutoffPerQuery must be positive, not {cutoff}")


class WorkGroups:
    """The workgroup operations and the admission check, over the SQL service's store."""

    def __init__(self, store: Store, access: Authorizer, lake_root: str) -> None:
        self.store = store
        self.access = access
        self.lake_root = lake_root
        migrate(store.engine, COMPONENT, MIGRATIONS, label="SQL service workgroups")
        self._writer = writer(store.engine)

    # -- what users call ----------------------------------------------------

    def listed(self) -> list[WorkGroup]:
        """Every workgroup, as Athena lists them: ``athena:ListWorkGroups``, an action on
        no resource (only a statement on ``*`` grants it), allows the whole list."""
        self.access.authorize("athena:ListWorkGroups", "*")
        return self.store.workgroups()

    def get(self, name: str) -> WorkGroup:
        self.access.authorize("athena:GetWorkGroup", workgroup_arn(name))
        return self.find(name)

    def find(self, name: str) -> WorkGroup:
        """The workgroup, unchecked (the caller authorizes what it does with it)."""
        for group in self.store.workgroups():
            if group.name == name:
                return group
        raise InvalidRequest(f"WorkGroup {name} is not found.")

    def create(self, group: WorkGroup) -> WorkGroup:
        self.access.authorize("athena:CreateWorkGroup", workgroup_arn(group.name))
        check(group, self.lake_root)
        group = replace(group, created=datetime.now(UTC))
        with self._writer.begin() as conn:
            existing = select(workgroups.c.name).where(workgroups.c.name == group.name)
            if conn.execute(existing).first():
                raise InvalidRequest(f"WorkGroup is already created: {group.name}")
            conn.execute(insert(workgroups).values(**asdict(group)))
        return group

    def update(self, name: str, **changes: Any) -> WorkGroup:
        """Change the named settings (``WorkGroup``'s fields) and keep the others."""
        self.access.authorize("athena:UpdateWorkGroup", workgroup_arn(name))
        fixed = {"name", "created"} & set(changes)
        unknown = set(changes) - set(WorkGroup.__dataclass_fields__) | fixed
        if unknown:
            raise InvalidRequest(f"workgroup {name}: cannot change {', '.join(sorted(unknown))}")
        group = replace(self.find(name), **changes)
        check(group, self.lake_root)
        self.store.put_workgroup(group)
        return group

    def delete(self, name: str, *, recursive: bool = False) -> None:
        """Delete a workgroup; its named queries too with ``recursive``, as Athena does.

        Its query history stays (results live in the lake); a workgroup with
        queries still QUEUED or RUNNING is refused.
        """
        self.access.authorize("athena:DeleteWorkGroup", workgroup_arn(name))
        if name == "primary":
            raise InvalidRequest("The primary workgroup cannot be deleted.")
        self.find(name)
        with self._writer.begin() as conn:
            active = conn.execute(
                select(func.count())
                .select_from(executions)
                .where(executions.c.workgroup == name, executions.c.state.in_(_UNFINISHED))
            ).scalar_one()
            if active:
                raise InvalidRequest(
                    f"WorkGroup {name} has {active} queries queued or running; stop them first"
                )
            named = conn.execute(
                select(func.count())
                .select_from(named_queries)
                .where(named_queries.c.workgroup == name)
            ).scalar_one()
            if named and not recursive:
                raise InvalidRequest(
                    f"WorkGroup {name} is not empty: it holds {named} named queries "
                    "(RecursiveDeleteOption deletes them with it)"
                )
            conn.execute(delete(named_queries).where(named_queries.c.workgroup == name))
            conn.execute(delete(workgroups).where(workgroups.c.name == name))

    # -- the admission check ------------------------------------------------

    def admit(
        self,
        execution_id: str,
        group: WorkGroup,
        principal: str,
        record: Callable[[Connection], object] | None = None,
    ) -> None:
        """Count ``execution_id`` against ``group``'s limits, or raise ``TooManyRequests``.

        ``record`` records the execution in the same transaction (one commit for both);
        without it, call it before the execution is recorded: the count includes
        executions admitted but not recorded yet (for ``UNRECORDED_GRACE``).
        """
        now = datetime.now(UTC)
        with self._writer.begin() as conn:
            if conn.dialect.name == "postgresql":
                # SQLite's writer holds the database's write lock already.
                row = select(workgroups.c.name).where(workgroups.c.name == group.name)
                conn.execute(row.with_for_update())
            since = {"unrecorded_since": now - UNRECORDED_GRACE}
            conn.execute(_FORGET_FINISHED, since)
            in_group = conn.execute(_ACTIVE_IN_GROUP, {**since, "group": group.name}).scalar_one()
            cap = group.max_concurrent + group.max_queued
            if in_group >= cap:
                raise TooManyRequests(
                    f"WorkGroup {group.name} has {in_group} queries queued or running, its limit "
                    f"({group.max_concurrent} running + {group.max_queued} queued); retry later"
                )
            if group.max_per_principal is not None:
                mine = conn.execute(
                    _ACTIVE_OF_PRINCIPAL, {**since, "group": group.name, "principal": principal}
                ).scalar_one()
                if mine >= group.max_per_principal:
                    raise TooManyRequests(
                        f"{principal} has {mine} queries queued or running in WorkGroup "
                        f"{group.name}, its limit per principal ({group.max_per_principal}); "
                        "retry when one has finished"
                    )
            conn.execute(
                _ADMIT,
                {
                    "execution_id": execution_id,
                    "workgroup": group.name,
                    "principal": principal,
                    "admitted": now,
                },
            )
            if record is not None:
                record(conn)

    def start_running(
        self, execution_id: str, group: WorkGroup, values: Mapping[str, Any] | None = None
    ) -> bool:
        """Mark a QUEUED execution RUNNING if fewer than ``group.max_concurrent`` run.

        The count is of the workgroup's RUNNING executions in the state database,
        whichever process runs them, so the cap holds across server processes.
        False when the workgroup is full: the caller waits and asks again. An
        execution no longer QUEUED (stopped meanwhile) is left as it is.
        ``values``: the rest of its record as it starts, saved in the same commit.
        """
        in_group = {"group": group.name}
        # A read first: a full workgroup's waiters do not queue on the write lock.
        with self.store.engine.connect() as conn:
            if conn.execute(_RUNNING_IN_GROUP, in_group).scalar_one() >= group.max_concurrent:
                return False
        with self._writer.begin() as conn:
            if conn.dialect.name == "postgresql":
                row = select(workgroups.c.name).where(workgroups.c.name == group.name)
                conn.execute(row.with_for_update())
            if conn.execute(_RUNNING_IN_GROUP, in_group).scalar_one() >= group.max_concurrent:
                return False
            started = {**(values or {}), "state": QueryState.RUNNING.value}
            conn.execute(_START_RUNNING, {**started, "started_id": execution_id})
        return True


def _add_limits_v1(conn: Connection) -> None:
    # Databases made before workgroups had these limits lack their columns.
    have = {c["name"] for c in inspect(conn).get_columns("workgroups")}
    if "max_queued" not in have:
        conn.execute(text("ALTER TABLE workgroups ADD COLUMN max_queued INTEGER DEFAULT 100"))
        conn.execute(text("UPDATE workgroups SET max_queued = 100"))
    if "max_per_principal" not in have:
        conn.execute(text("ALTER TABLE workgroups ADD COLUMN max_per_principal INTEGER"))
    metadata.create_all(conn)


MIGRATIONS = [_add_limits_v1]
