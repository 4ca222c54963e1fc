"""A long query history costs nothing on the path of the next query.

Executions accumulate (every query ever run is kept for ListQueryExecutions), but
the statements a query's path runs on the state database look for the few
unfinished executions only: none of them may read through the history.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import event, insert

from lakeward.query.model import QueryExecution, QueryState, StatementType
from lakeward.query.presence import orphan_reason
from lakeward.query.service import QueryService
from lakeward.query.store import execution_row, executions
from tests.query.support import run

HISTORY = 2000


def test_no_statement_on_a_querys_path_reads_through_the_history(
    memory_service: QueryService,
) -> None:
    service = memory_service
    start = datetime.now(UTC) - timedelta(days=30)
    ended = [
        QueryExecution(
            id=str(uuid.uuid4()),
            query="SELECT 1",
            statement_type=StatementType.DML,
            workgroup="primary",
            catalog="awsdatacatalog",
            database="default",
            output_location="s3://lake/query-results/x.csv",
            state=QueryState.SUCCEEDED,
            submitted=start + timedelta(seconds=i),
            completed=start + timedelta(seconds=i + 1),
        )
        for i in range(HISTORY)
    ]
    with service.store.engine.begin() as conn:
        rows = [{**execution_row(e), "owner": service.presence.id} for e in ended]
        conn.execute(insert(executions), rows)
    ran: list[tuple[str, Any]] = []

    def note(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        if "query_executions" in statement and not statement.startswith("EXPLAIN"):
            ran.append((statement, parameters))

    engine = service.store.engine
    event.listen(engine, "before_cursor_execute", note)
    try:
        assert run(service, "SELECT 42 AS answer")[1] == [["42"]]
        service.store.stop_requests(service.presence.id)  # every 50 ms while queries run
        service.store.fail_orphans(orphan_reason)  # every few seconds
    finally:
        event.remove(engine, "before_cursor_execute", note)
    assert len(ran) >= 4  # admission, record, RUNNING, the end, the looks above
    with engine.connect() as conn:
        for statement, parameters in ran:
            plan = conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", parameters).all()
            for step in (row[-1] for row in plan if "query_executions" in row[-1]):
                # By its id, or among the unfinished ones: never all of a workgroup's or
                # a process's executions (SEARCH by workgroup), nor every one (SCAN).
                assert "(id=?)" in step or "(state=?" in step, f"{statement}: {step}"
