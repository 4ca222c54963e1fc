"""The query editor: run, cancel, history, saved queries, paged results, CSV download.

The history is the signed-in user's own executions, or everyone's in the
workgroup when a policy allows ``lakeward:ReadOthersQueryExecutions`` (the
SQL service decides, as for ``ListQueryExecutions`` in the API).

The page is rendered here; a small script (static/query.js) starts a query,
polls its state and pages through its results with the JSON calls below.
Every call is the SQL service's own, with its checks: the console adds none of
its own rules and cannot go around them.
"""

from collections.abc import Iterator
from typing import Annotated

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import HTMLResponse, Response, StreamingResponse
from pydantic import BaseModel, Field

from lakeward.access.arns import s3_arn, workgroup_arn
from lakeward.access.sessions import Session
from lakeward.errors import InvalidRequest
from lakeward.http.console.base import PREFIX, Console, NavItem, redirect, signed_in
from lakeward.query.catalogs import DEFAULT_CATALOG
from lakeward.query.metadata import DEFAULT_WORKGROUP, MAX_QUERY_LENGTH
from lakeward.query.model import QueryExecution, StatementType
from lakeward.query.service import QueryService
from lakeward.storage.paths import lake_place

NAV = NavItem(
    "query",
    "Query editor",
    f"{PREFIX}/query",
    "athena:StartQueryExecution",
    workgroup_arn(DEFAULT_WORKGROUP),
)
PAGE_SIZE = 50
HISTORY = 25


class RunQuery(BaseModel):
    sql: str = Field(min_length=1, max_length=MAX_QUERY_LENGTH)
    database: str = Field(default="default", min_length=1, max_length=128)


def execution_view(execution: QueryExecution) -> dict[str, object]:
    stats = execution.statistics
    return {
        "id": execution.id,
        "state": execution.state.value,
        "done": execution.state.done,
        "reason": execution.state_change_reason,
        "query": execution.query,
        "submitted": execution.submitted.isoformat(timespec="seconds"),
        "runtime_ms": stats.total_execution_ms,
        "scanned_bytes": stats.data_scanned_bytes,
        "statement_type": execution.statement_type.value,
        "substatement_type": execution.substatement_type,
    }


def query_router(console: Console, service: QueryService) -> APIRouter:
    router = APIRouter(prefix=PREFIX, include_in_schema=False)
    Signed = Annotated[Session, Depends(signed_in(console))]

    def history() -> list[QueryExecution]:
        ids, _ = service.list_query_executions(DEFAULT_WORKGROUP, max_results=HISTORY)
        found, _missing = service.batch_get_query_execution(ids)
        return sorted(found, key=lambda e: e.submitted, reverse=True)

    @router.get("/query")
    def editor(
        request: Request, session: Signed, saved: str = "", sql: str = "", execution: str = ""
    ) -> HTMLResponse:
        console.access.authorize(NAV.action, NAV.resource)
        text, database, shown = sql, "default", ""
        if saved:
            text = service.get_named_query(saved).query
        elif execution:
            past = service.get_query_execution(execution)
            text, database, shown = past.query, past.database, past.id
        ids, _ = service.list_named_queries(DEFAULT_WORKGROUP, max_results=50)
        named = [service.get_named_query(i) for i in ids]
        return console.render(
            request,
            "query.html",
            session,
            title="Query editor",
            page=NAV.key,
            sql=text,
            database=database,
            execution=shown,
            history=history(),
            saved=sorted(named, key=lambda n: n.name.lower()),
            page_size=PAGE_SIZE,
            catalog=DEFAULT_CATALOG,
        )

    @router.post("/query/saved")
    def save(
        session: Signed,
        name: Annotated[str, Form(min_length=1, max_length=128)],
        sql: Annotated[str, Form(min_length=1, max_length=MAX_QUERY_LENGTH)],
        description: Annotated[str, Form(max_length=1024)] = "",
    ) -> Response:
        named_id = service.create_named_query(name.strip(), "default", sql, None, description)
        return redirect("/query", saved=named_id)

    @router.post("/api/query")
    def run(body: RunQuery, session: Signed) -> dict[str, str]:
        return {"id": service.start_query_execution(body.sql, database=body.database)}

    @router.get("/api/query/history")
    def history_now(session: Signed) -> list[dict[str, object]]:
        """The history list again, for the editor to refresh after a run."""
        return [execution_view(e) for e in history()]

    @router.get("/api/query/{execution_id}")
    def state(execution_id: str, session: Signed) -> dict[str, object]:
        return execution_view(service.get_query_execution(execution_id))

    @router.post("/api/query/{execution_id}/cancel")
    def cancel(execution_id: str, session: Signed) -> dict[str, object]:
        service.stop_query_execution(execution_id)
        return execution_view(service.get_query_execution(execution_id))

    @router.get("/api/query/{execution_id}/results")
    def results(execution_id: str, session: Signed, token: str = "") -> dict[str, object]:
        execution = service.get_query_execution(execution_id)
        # The first page of a SELECT starts with the labels row, which counts in the page.
        labels = execution.statement_type == StatementType.DML and not token
        page = service.get_query_results(
            execution_id, token or None, PAGE_SIZE + (1 if labels else 0)
        )
        return {
            "columns": [{"name": c.name, "type": c.type} for c in page.columns],
            "rows": page.rows[1:] if labels else page.rows,
            "next_token": page.next_token,
        }

    @router.get("/query/{execution_id}/download")
    def download(execution_id: str, session: Signed) -> Response:
        execution = service.get_query_execution(execution_id)
        if not execution.state.done or execution.state.value != "SUCCEEDED":
            raise InvalidRequest(f"query {execution_id} has no result ({execution.state.value})")
        place = lake_place(service.settings, execution.output_location)
        if place is None:
            raise InvalidRequest(f"the result of query {execution_id} is outside the lake")
        bucket, key = place
        console.access.authorize("s3:GetObject", s3_arn(bucket, key))
        stream = service.storage.open(bucket, key)

        def chunks() -> Iterator[bytes]:
            with stream:
                while chunk := stream.read(256 * 1024):
                    yield chunk

        return StreamingResponse(
            chunks(),
            media_type="text/csv",
            headers={"Content-Disposition": f'attachment; filename="{execution_id}.csv"'},
        )

    return router
