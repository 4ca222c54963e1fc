"""Where the SQL service keeps its state: catalogs, workgroups, executions, named queries.

A SQLite file in the data dir by default (SQLAlchemy Core, so another database
can take its place). Results themselves live in the lake, not here.

Several server processes share this state: each execution names the process
that runs it (``owner``, a row of ``query_processes`` kept fresh by its
heartbeat), a stop asked of another process is a flag on the execution that
the owner polls for, and the executions of a process that is gone are failed
by whichever process notices first (``fail_orphans``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import (
    Boolean,
    Column,
    DateTime,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    bindparam,
    delete,
    insert,
    inspect,
    select,
    text,
    update,
)
from sqlalchemy.engine import Connection, Engine

from lakeward.query.athena_errors import SYSTEM_ERROR
from lakeward.query.model import (
    DataCatalog,
    NamedQuery,
    QueryExecution,
    QueryState,
    QueryStatistics,
    StatementType,
    WorkGroup,
)
from lakeward.sqlstate import as_utc, as_utc_or_none, migrate, open_engine, writer

metadata = MetaData()
COMPONENT = "query"  # its row in sqlstate's schema_version

catalogs = Table(
    "data_catalogs",
    metadata,
    Column("name", String(128), primary_key=True),
    Column("type", String(16), nullable=False),
    Column("description", Text, nullable=False, default=""),
    Column("parameters", Text, nullable=False, default="{}"),
)

workgroups = Table(
    "workgroups",
    metadata,
    Column("name", String(128), primary_key=True),
    Column("description", Text, nullable=False, default=""),
    Column("state", String(16), nullable=False),
    Column("output_location", Text),
    Column("enforce_configuration", Boolean, nullable=False),
    Column("bytes_scanned_cutoff", Integer),
    Column("engine", String(16), nullable=False),
    Column("timeout_seconds", Float, nullable=False),
    Column("max_concurrent", Integer, nullable=False),
    Column("created", DateTime(timezone=True)),
    # Added by the "workgroups" component's migrations (query/workgroups.py).
    Column("max_queued", Integer, nullable=False, default=100),
    Column("max_per_principal", Integer),
)

executions = Table(
    "query_executions",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("query", Text, nullable=False),
    Column("statement_type", String(16), nullable=False),
    Column("workgroup", String(128), nullable=False, index=True),
    Column("catalog", String(128), nullable=False),
    Column("database", String(128), nullable=False),
    Column("output_location", Text, nullable=False),
    Column("state", String(16), nullable=False),
    Column("state_change_reason", Text),
    Column("submitted", DateTime(timezone=True), nullable=False, index=True),
    Column("completed", DateTime(timezone=True)),
    Column("statistics", Text, nullable=False, default="{}"),
    Column("engine", String(16), nullable=False),
    Column("client_request_token", String(128), unique=True),
    # Added in v2: the process running the execution, and a stop asked of it.
    Column("owner", String(128), index=True),
    Column("stop_requested", Boolean, nullable=False, default=False),
    # Added in v3: the principal who started it (whose history it is in).
    Column("started_by", String(256), index=True),
    # Added in v5: Athena's SubstatementType (a client's rowcount of a write depends on it).
    Column("substatement_type", String(64)),
    # Added in v6: a failure's AthenaError (category, type, retryable).
    Column("error_category", Integer),
    Column("error_type", Integer),
    Column("retryable", Boolean),
    # Added in v7: the result reuse the execution asked for (MaxAgeInMinutes).
    Column("reuse_max_age_minutes", Integer),
)

# Added in v8: the cap's, stop and orphan looks seek unfinished executions, however many ended.
BY_STATE = (
    Index("ix_query_executions_state_workgroup", executions.c.state, executions.c.workgroup),
    Index("ix_query_executions_state_owner", executions.c.state, executions.c.owner),
)

processes = Table(
    "query_processes",
    metadata,
    Column("id", String(128), primary_key=True),  # host:pid:random (see process_id)
    Column("pid", Integer, nullable=False),
    Column("host", String(255), nullable=False),
    Column("started", DateTime(timezone=True), nullable=False),
    Column("heartbeat", DateTime(timezone=True), nullable=False),
)

writes = Table(
    "query_writes",
    metadata,
    # Added in v4: the writes in flight (CTAS, INSERT INTO, UNLOAD), so that the files and
    # the table a write left behind when its process died are removed (query/journal.py).
    Column("execution_id", String(36), primary_key=True),
    Column("owner", String(128), nullable=False, index=True),
    Column("staging", Text, nullable=False),  # the local directory its files are staged in
    Column("location", Text, nullable=False),  # the table's (or UNLOAD's) place in the lake
    Column("objects", Text, nullable=False, default="[]"),  # [[bucket, key]] it publishes
    Column("created_table", String(512)),  # catalog.database.table a CTAS registers
)

_UNFINISHED = (QueryState.QUEUED.value, QueryState.RUNNING.value)

# The statements of every query's path, built once: SQLAlchemy then finds their compiled
# form by a key it keeps with them, instead of building and keying each one anew.
_BY_ID = select(executions).where(executions.c.id == bindparam("by_id"))
_BY_TOKEN = select(executions).where(executions.c.client_request_token == bindparam("by_token"))
_INSERT = insert(executions)
_EXECUTION_FIELDS = tuple(f.name for f in fields(QueryExecution))
# Read every 50 ms while a process runs queries (presence.py).
_STOPS_ASKED = select(executions.c.id).where(
    executions.c.owner == bindparam("owner"),
    executions.c.stop_requested.is_(True),
    executions.c.state.in_(_UNFINISHED),
)
# An end state is never overwritten (the columns to set are the parameters' keys).
SAVE_UNFINISHED = update(executions).where(
    executions.c.id == bindparam("saved_id"), executions.c.state.in_(_UNFINISHED)
)

named_queries = Table(
    "named_queries",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("name", String(128), nullable=False),
    Column("database", String(128), nullable=False),
    Column("query", Text, nullable=False),
    Column("workgroup", String(128), nullable=False),
    Column("description", Text, nullable=False, default=""),
    Column("client_request_token", String(128), unique=True),
)


class Store:
    def __init__(self, url_or_path: str | Path) -> None:
        self.engine: Engine = open_engine(url_or_path)
        migrate(self.engine, COMPONENT, MIGRATIONS, label="SQL service")
        self._writer = writer(self.engine)

    # -- catalogs -----------------------------------------------------------

    def catalogs(self) -> list[DataCatalog]:
        with self.engine.connect() as conn:
            rows = conn.execute(select(catalogs).order_by(catalogs.c.name)).mappings().all()
        return [
            DataCatalog(r["name"], r["type"], r["description"], json.loads(r["parameters"]))
            for r in rows
        ]

    def put_catalog(self, catalog: DataCatalog) -> bool:
        """Insert a catalog; False if one of that name exists."""
        with self._writer.begin() as conn:
            if conn.execute(select(catalogs.c.name).where(catalogs.c.name == catalog.name)).first():
                return False
            conn.execute(
                insert(catalogs).values(
                    name=catalog.name,
                    type=catalog.type,
                    description=catalog.description,
                    parameters=json.dumps(catalog.parameters),
                )
            )
        return True

    def replace_catalog(self, catalog: DataCatalog) -> None:
        with self._writer.begin() as conn:
            conn.execute(
                update(catalogs)
                .where(catalogs.c.name == catalog.name)
                .values(
                    type=catalog.type,
                    description=catalog.description,
                    parameters=json.dumps(catalog.parameters),
                )
            )

    def delete_catalog(self, name: str) -> bool:
        with self._writer.begin() as conn:
            deleted: int = conn.execute(delete(catalogs).where(catalogs.c.name == name)).rowcount
        return deleted > 0

    # -- workgroups ---------------------------------------------------------

    def workgroups(self) -> list[WorkGroup]:
        with self.engine.connect() as conn:
            rows = conn.execute(select(workgroups).order_by(workgroups.c.name)).mappings().all()
        return [WorkGroup(**{**r, "created": as_utc_or_none(r["created"])}) for r in rows]

    def put_workgroup(self, group: WorkGroup) -> None:
        values = asdict(group)
        with self._writer.begin() as conn:
            conn.execute(delete(workgroups).where(workgroups.c.name == group.name))
            conn.execute(insert(workgroups).values(**values))

    # -- executions ---------------------------------------------------------

    def add_execution(self, execution: QueryExecution, owner: str | None = None) -> None:
        """Record an execution; ``owner`` is the process that will run it (None: done already)."""
        with self._writer.begin() as conn:
            insert_execution(conn, execution, owner)

    def save_execution(self, execution: QueryExecution) -> None:
        """Record an execution's progress, unless it has ended already.

        An execution another process failed (its owner was taken for dead)
        keeps that outcome: the record never goes back from an end state.
        """
        row = execution_row(execution)
        with self._writer.begin() as conn:
            conn.execute(SAVE_UNFINISHED, {**row, "saved_id": execution.id})

    def save_with_write(self, execution: QueryExecution) -> bool:
        """Record a finished execution and forget its committed write, in one transaction.

        Both or neither: False, with nothing changed, if the write is no longer in
        flight or the execution has ended already (another process, taking this one
        for dead, rolled the write back or failed the execution).
        """
        row = execution_row(execution)
        with self._writer.connect() as conn, conn.begin() as transaction:
            forgotten = conn.execute(delete(writes).where(writes.c.execution_id == execution.id))
            saved = conn.execute(
                update(executions)
                .where(executions.c.id == execution.id, executions.c.state.in_(_UNFINISHED))
                .values(**row)
            )
            if forgotten.rowcount == 1 and saved.rowcount == 1:
                return True
            transaction.rollback()
            return False

    def execution(self, execution_id: str) -> QueryExecution | None:
        with self.engine.connect() as conn:
            row = conn.execute(_BY_ID, {"by_id": execution_id}).first()
        return _execution(row._mapping) if row else None

    def execution_by_token(self, token: str) -> QueryExecution | None:
        with self.engine.connect() as conn:
            row = conn.execute(_BY_TOKEN, {"by_token": token}).first()
        return _execution(row._mapping) if row else None

    def execution_ids(
        self, workgroup: str | None, offset: int, limit: int, started_by: str | None = None
    ) -> list[str]:
        """Newest first; only those ``started_by`` started when given."""
        query = select(executions.c.id).order_by(executions.c.submitted.desc(), executions.c.id)
        if workgroup:
            query = query.where(executions.c.workgroup == workgroup)
        if started_by is not None:
            query = query.where(executions.c.started_by == started_by)
        with self.engine.connect() as conn:
            return [r[0] for r in conn.execute(query.offset(offset).limit(limit))]

    def reusable(
        self, query_text: str, catalog: str, database: str, workgroup: str, since: datetime
    ) -> QueryExecution | None:
        """The newest successful run of the same query since ``since`` that ran for itself."""
        query = (
            select(executions)
            .where(
                executions.c.query == query_text,
                executions.c.catalog == catalog,
                executions.c.database == database,
                executions.c.workgroup == workgroup,
                executions.c.state == QueryState.SUCCEEDED.value,
                executions.c.submitted >= since,
            )
            .order_by(executions.c.submitted.desc())
        )
        with self.engine.connect() as conn:
            for row in conn.execute(query):
                found = _execution(row._mapping)
                if not found.statistics.result_reused:
                    return found
        return None

    # -- processes and their executions -------------------------------------

    def register_process(self, process: str, pid: int, host: str) -> None:
        now = datetime.now(UTC)
        with self._writer.begin() as conn:
            conn.execute(delete(processes).where(processes.c.id == process))
            conn.execute(
                insert(processes).values(id=process, pid=pid, host=host, started=now, heartbeat=now)
            )

    def heartbeat(self, process: str) -> bool:
        """False if the process is not registered (another one took it for dead)."""
        with self._writer.begin() as conn:
            beat = update(processes).where(processes.c.id == process)
            changed: int = conn.execute(beat.values(heartbeat=datetime.now(UTC))).rowcount
        return changed > 0

    def live_processes(self) -> list[tuple[str, int, str, datetime]]:
        """(id, pid, host, heartbeat) of each process that runs queries."""
        with self.engine.connect() as conn:
            rows = conn.execute(select(processes).order_by(processes.c.started)).mappings().all()
        return [(r["id"], r["pid"], r["host"], as_utc(r["heartbeat"])) for r in rows]

    def end_process(self, process: str) -> None:
        """Forget a process; its unfinished executions become orphans (``fail_orphans``)."""
        with self._writer.begin() as conn:
            conn.execute(delete(processes).where(processes.c.id == process))

    def reword_failures(self, owner: str, reason: str, better: str) -> None:
        """Give the executions of ``owner`` that failed with ``reason`` the ``better`` one."""
        with self._writer.begin() as conn:
            conn.execute(
                update(executions)
                .where(
                    executions.c.owner == owner,
                    executions.c.state == QueryState.FAILED.value,
                    executions.c.state_change_reason == reason,
                )
                .values(state_change_reason=better)
            )

    def fail_orphans(self, reason_of: Callable[[str | None], str]) -> list[str]:
        """Fail every unfinished execution whose owner is no longer a live process.

        ``reason_of(owner)`` words the StateChangeReason; returns the ids failed.
        """
        orphaned = executions.c.state.in_(_UNFINISHED) & (
            executions.c.owner.is_(None) | executions.c.owner.not_in(select(processes.c.id))
        )
        with self.engine.connect() as conn:  # a read first: most looks find nothing
            found = conn.execute(select(executions.c.id, executions.c.owner).where(orphaned)).all()
        if not found:
            return []
        failed = []
        with self._writer.begin() as conn:
            for execution_id, owner in found:
                changed: int = conn.execute(
                    update(executions)
                    .where(executions.c.id == execution_id, executions.c.state.in_(_UNFINISHED))
                    .values(
                        state=QueryState.FAILED.value,
                        state_change_reason=reason_of(owner),
                        completed=datetime.now(UTC),
                        error_category=SYSTEM_ERROR.category,
                        error_type=SYSTEM_ERROR.type,
                        retryable=SYSTEM_ERROR.retryable,
                    )
                ).rowcount
                if changed:  # not ended meanwhile by its owner
                    failed.append(execution_id)
        return failed

    def request_stop(self, execution_id: str) -> bool:
        """Ask the owner of an unfinished execution to stop it; False if it has ended."""
        with self._writer.begin() as conn:
            changed: int = conn.execute(
                update(executions)
                .where(executions.c.id == execution_id, executions.c.state.in_(_UNFINISHED))
                .values(stop_requested=True)
            ).rowcount
        return changed > 0

    def stop_requests(self, owner: str) -> list[str]:
        """The unfinished executions of ``owner`` that someone asked to stop."""
        with self.engine.connect() as conn:
            return [r[0] for r in conn.execute(_STOPS_ASKED, {"owner": owner})]

    # -- writes in flight ---------------------------------------------------

    def begin_write(self, execution_id: str, owner: str, staging: str, location: str) -> None:
        with self._writer.begin() as conn:
            conn.execute(
                insert(writes).values(
                    execution_id=execution_id, owner=owner, staging=staging, location=location
                )
            )

    def note_write(
        self,
        execution_id: str,
        *,
        objects: list[tuple[str, str]] | None = None,
        created_table: str | None = None,
    ) -> None:
        """Record what a write is about to change, before it changes it."""
        values: dict[str, Any] = {}
        if objects is not None:
            values["objects"] = json.dumps(objects)
        if created_table is not None:
            values["created_table"] = created_table
        with self._writer.begin() as conn:
            conn.execute(update(writes).where(writes.c.execution_id == execution_id).values(values))

    def end_write(self, execution_id: str) -> bool:
        """The write was rolled back: nothing of it is left to undo.

        False if it was not in flight: another process rolled it back, taking its
        process for dead.
        """
        with self._writer.begin() as conn:
            gone = delete(writes).where(writes.c.execution_id == execution_id)
            ended: int = conn.execute(gone).rowcount
        return ended > 0

    def write_in_flight(self, execution_id: str) -> bool:
        """Whether the write of ``execution_id`` is journaled (not rolled back)."""
        query = select(writes.c.execution_id).where(writes.c.execution_id == execution_id)
        with self.engine.connect() as conn:
            return conn.execute(query).first() is not None

    def orphan_writes(self) -> list[dict[str, Any]]:
        """The writes whose process is no longer a live one (see ``fail_orphans``)."""
        query = select(writes).where(writes.c.owner.not_in(select(processes.c.id)))
        with self.engine.connect() as conn:
            rows = conn.execute(query).mappings().all()
        return [
            {**row, "objects": [tuple(o) for o in json.loads(row["objects"] or "[]")]}
            for row in rows
        ]

    # -- named queries ------------------------------------------------------

    def add_named_query(self, named: NamedQuery, token: str | None) -> str:
        with self._writer.begin() as conn:
            if token:
                query = select(named_queries.c.id).where(
                    named_queries.c.client_request_token == token
                )
                existing = conn.execute(query).first()
                if existing:
                    return str(existing[0])
            conn.execute(insert(named_queries).values(**asdict(named), client_request_token=token))
        return named.id

    def named_query(self, named_query_id: str) -> NamedQuery | None:
        query = select(named_queries).where(named_queries.c.id == named_query_id)
        with self.engine.connect() as conn:
            row = conn.execute(query).mappings().first()
        if row is None:
            return None
        return NamedQuery(**{k: v for k, v in row.items() if k != "client_request_token"})

    def update_named_query(
        self, named_query_id: str, name: str, query: str, description: str
    ) -> None:
        change = update(named_queries).where(named_queries.c.id == named_query_id)
        with self._writer.begin() as conn:
            conn.execute(change.values(name=name, query=query, description=description))

    def delete_named_query(self, named_query_id: str) -> None:
        with self._writer.begin() as conn:
            conn.execute(delete(named_queries).where(named_queries.c.id == named_query_id))

    def named_query_ids(self, workgroup: str | None, offset: int, limit: int) -> list[str]:
        query = select(named_queries.c.id).order_by(named_queries.c.name, named_queries.c.id)
        if workgroup:
            query = query.where(named_queries.c.workgroup == workgroup)
        with self.engine.connect() as conn:
            return [r[0] for r in conn.execute(query.offset(offset).limit(limit))]


def insert_execution(conn: Connection, execution: QueryExecution, owner: str | None) -> None:
    conn.execute(_INSERT, {**execution_row(execution), "owner": owner})


def execution_row(execution: QueryExecution) -> dict[str, Any]:
    # Its fields one level deep, and the statistics' plain values: asdict copies deeply.
    row = {name: getattr(execution, name) for name in _EXECUTION_FIELDS}
    row["statistics"] = json.dumps(vars(execution.statistics))
    row["state"] = execution.state.value
    row["statement_type"] = execution.statement_type.value
    return row


def _execution(row: Any) -> QueryExecution:
    values = dict(row)
    values.pop("owner", None)
    values.pop("stop_requested", None)
    values["statistics"] = QueryStatistics(**json.loads(values["statistics"]))
    values["state"] = QueryState(values["state"])
    values["statement_type"] = StatementType(values["statement_type"])
    values["submitted"] = as_utc_or_none(values["submitted"])
    values["completed"] = as_utc_or_none(values["completed"])
    return QueryExecution(**values)


def _create_v1(conn: Connection) -> None:
    metadata.create_all(conn)  # also adopts the tables of a database made before versions


def _processes_v2(conn: Connection) -> None:
    """Executions name their process; processes announce themselves (several servers)."""
    columns = {c["name"] for c in inspect(conn).get_columns(executions.name)}
    if "owner" not in columns:
        conn.execute(text("ALTER TABLE query_executions ADD COLUMN owner VARCHAR(128)"))
        conn.execute(
            text(
                "ALTER TABLE query_executions "
                "ADD COLUMN stop_requested BOOLEAN NOT NULL DEFAULT FALSE"
            )
        )
        conn.execute(text("CREATE INDEX ix_query_executions_owner ON query_executions (owner)"))
    processes.create(conn, checkfirst=True)


def _started_by_v3(conn: Connection) -> None:
    """Executions record who started them: each user's history is their own."""
    if "started_by" not in {c["name"] for c in inspect(conn).get_columns(executions.name)}:
        conn.execute(text("ALTER TABLE query_executions ADD COLUMN started_by VARCHAR(256)"))
        conn.execute(
            text("CREATE INDEX ix_query_executions_started_by ON query_executions (started_by)")
        )


def _writes_v4(conn: Connection) -> None:
    """Writes in flight are journaled, so that a dead process's write is rolled back."""
    writes.create(conn, checkfirst=True)


def _substatement_v5(conn: Connection) -> None:
    """Executions record Athena's SubstatementType."""
    if "substatement_type" not in {c["name"] for c in inspect(conn).get_columns(executions.name)}:
        conn.execute(text("ALTER TABLE query_executions ADD COLUMN substatement_type VARCHAR(64)"))


def _athena_error_v6(conn: Connection) -> None:
    """Failed executions record Athena's error category and type."""
    columns = {c["name"] for c in inspect(conn).get_columns(executions.name)}
    if "error_category" not in columns:
        for column, kind in (
            ("error_category", "INTEGER"),
            ("error_type", "INTEGER"),
            ("retryable", "BOOLEAN"),
        ):
            conn.execute(text(f"ALTER TABLE query_executions ADD COLUMN {column} {kind}"))


def _result_reuse_v7(conn: Connection) -> None:
    """Executions record the result reuse they asked for (Athena echoes it)."""
    columns = {c["name"] for c in inspect(conn).get_columns(executions.name)}
    if "reuse_max_age_minutes" not in columns:
        conn.execute(text("ALTER TABLE query_executions ADD COLUMN reuse_max_age_minutes INTEGER"))


def _by_state_v8(conn: Connection) -> None:
    """The unfinished executions are found by state (see ``BY_STATE``)."""
    for index in BY_STATE:
        index.create(conn, checkfirst=True)


MIGRATIONS = [
    _create_v1,
    _processes_v2,
    _started_by_v3,
    _writes_v4,
    _substatement_v5,
    _athena_error_v6,
    _result_reuse_v7,
    _by_state_v8,
]
