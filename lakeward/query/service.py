"""The SQL service: asynchronous query executions over catalogs, engines and the lake.

A query is checked and planned when it is started (refusals come back at
once), then queued; a worker runs it on its workgroup's engine, writes the
result to the lake (``<output>/<id>.csv`` and ``.csv.metadata``) and records
the outcome. Results outlive the request that started them: a client may stop
waiting and come back later.
"""

from __future__ import annotations

import errno
import functools
import logging
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from sqlalchemy.exc import IntegrityError

from lakeward.access import AllowAll, Authorizer, current_principal
from lakeward.access.arns import catalog_arn, workgroup_arn
from lakeward.config import Settings
from lakeward.errors import InvalidRequest, LakewardError, TooManyRequests
from lakeward.metastore.uris import metastore_uris
from lakeward.query import results
from lakeward.query.athena_errors import athena_reason, error_kind
from lakeward.query.catalogs import (
    DEFAULT_CATALOG,
    URIS_PARAMETER,
    Catalogs,
    Loader,
    load_catalog,
)
from lakeward.query.deadlines import Deadlines
from lakeward.query.engines import load_engine
from lakeward.query.engines.base import Engine, EngineResult
from lakeward.query.journal import ROLLED_BACK_ELSEWHERE, Journal
from lakeward.query.metadata import (
    DEFAULT_WORKGROUP,
    MAX_QUERY_LENGTH,
    MetadataOperations,
    PreparedOperations,
    output_location_of,
)
from lakeward.query.model import (
    DataCatalog,
    QueryExecution,
    QueryState,
    ResultPage,
    StatementType,
    WorkGroup,
)
from lakeward.query.owners import check_reader
from lakeward.query.planner import Planner, Run, oldest_start
from lakeward.query.prepared import PreparedStatements, bound_statement
from lakeward.query.presence import Presence, orphan_reason
from lakeward.query.sql.queries import Statement
from lakeward.query.statements import catalogs_used, parse_statement, substatement_type
from lakeward.query.statements.base import Command, Context
from lakeward.query.store import Store, execution_row, insert_execution
from lakeward.query.translate.query import check_translatable
from lakeward.query.workgroups import WorkGroups
from lakeward.sqlstate import persisted
from lakeward.storage import Storage, load_storage
from lakeward.storage.paths import lake_place

log = logging.getLogger(__name__)

MAX_QUEUED = 1000
RECENT = 1024  # finished executions kept in memory for their last polls and pages
INTERRUPT_AGAIN = 1.0
"""Seconds between interrupts of an execution asked to stop that has not yet ended."""
POLL_WAITERS = 16  # polls waiting at once for their query's end; the next are answered at once
_CAP_RECHECK_SECONDS = 0.1  # how often a query waiting for its workgroup's cap looks again


def _now() -> datetime:
    return datetime.now(UTC)


def _ms(seconds: float) -> int:
    return int(seconds * 1000)


class _Execution(Run):
    """A run of this process, with the statement it runs."""

    def __init__(
        self,
        statement: Statement | Command,
        group: WorkGroup,
        principal: str,
        execution: QueryExecution,
    ) -> None:
        super().__init__(group, principal, execution)
        self.statement = statement


class QueryService(MetadataOperations, PreparedOperations):
    """Implements ``lakeward.query.api.SqlApi``: executions here, the rest in metadata.py."""

    def __init__(
        self,
        settings: Settings,
        storage: Storage | None = None,
        access: Authorizer | None = None,
        *,
        owner: bool = False,
        process: str | None = None,
        catalog_loader: Loader = load_catalog,
    ) -> None:
        """``owner``: this is the stack's server, which registers the stack's catalog.

        ``process`` names this process among those sharing the state (see
        presence.py; a new id if None). Each service runs the queries started
        through it and answers for those of every other process: their state is
        in the store, their results in the lake.

        ``catalog_loader`` makes a registered catalog's backend (``catalogs.load_catalog``).
        """
        self.settings = settings
        self.access: Authorizer = access or AllowAll()
        self.storage = storage or load_storage(settings)
        self.store = Store(settings.data_dir / "query" / "service.db")
        self.prepared = PreparedStatements(self.store.engine)
        self.catalogs = Catalogs(self.store, catalog_loader)
        self.workgroups = WorkGroups(self.store, self.access, settings.lake_root)
        self._engines: dict[str, Engine] = {}
        self._runs: dict[str, _Execution] = {}
        self._recent: OrderedDict[str, QueryExecution] = OrderedDict()  # finished: never change
        self._lock = threading.Lock()
        self._slots: dict[tuple[str, int], threading.Semaphore] = {}
        self._ended = threading.Condition()  # notified when an execution of this process ends
        self._poll_waits = threading.Semaphore(POLL_WAITERS)
        self._closing = False  # set by close(): the executions it stops have not been cancelled
        self._pool = ThreadPoolExecutor(max_workers=32, thread_name_prefix="query")
        self._timeouts = Deadlines("query-timeouts")
        spill = settings.data_dir / "query" / "spill"
        spill.mkdir(parents=True, exist_ok=True)
        self.planner = Planner(settings, self.access, self.catalogs, self.engine, str(spill))
        ran = functools.partial(oldest_start, self._runs)
        self.presence = Presence(self.store, self._stop_here, ran, process, self._roll_back_writes)
        self.journal = Journal(settings, self.storage, self.store, self.presence.id)
        self._bootstrap(owner)

    def _bootstrap(self, owner: bool) -> None:
        if DEFAULT_WORKGROUP not in {g.name for g in self.store.workgroups()}:
            self.store.put_workgroup(
                WorkGroup(
                    name=DEFAULT_WORKGROUP, created=_now(), description="The default workgroup"
                )
            )
        if owner and self.settings.metastore.port is not None:
            self.catalogs.ensure(
                DataCatalog(
                    DEFAULT_CATALOG,
                    "HIVE",
                    "The stack's own Hive Metastore",
                    {URIS_PARAMETER: ",".join(metastore_uris(self.settings))},
                )
            )
        self.presence.start()  # also fails what processes that are gone left unfinished

    def _roll_back_writes(self) -> None:
        """Undo the writes (files, a CTAS's table) of processes that are gone."""
        self.journal.roll_back_orphans(self.catalogs.catalog)

    def close(self, grace: float = 0.0) -> None:
        """Stop; executions still running after ``grace`` s end FAILED, naming the stop."""
        deadline = time.monotonic() + grace
        with self._ended:
            while self._runs and time.monotonic() < deadline:
                self._ended.wait(deadline - time.monotonic())
        self._closing = True
        for execution_id in list(self._runs):
            self._stop_here(execution_id)
            self.store.request_stop(execution_id)  # repeated until it ends (presence.py)
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._timeouts.close()
        self.presence.close()
        for engine in self._engines.values():
            engine.close()

    def engine(self, name: str) -> Engine:
        with self._lock:
            if name not in self._engines:
                self._engines[name] = load_engine(name, self.settings)
            return self._engines[name]

    # -- executions ---------------------------------------------------------

    def start_query_execution(
        self,
        query: str,
        *,
        catalog: str | None = None,
        database: str | None = None,
        workgroup: str | None = None,
        output_location: str | None = None,
        client_request_token: str | None = None,
        reuse_max_age_minutes: int | None = None,
        execution_parameters: list[str] | None = None,
        principal: str | None = None,
    ) -> str:
        principal = principal or current_principal.get()
        if client_request_token:
            known = self.store.execution_by_token(client_request_token)
            if known is not None:  # a retry: the same execution, authorized and audited anew
                self.access.authorize(
                    "athena:StartQueryExecution",
                    workgroup_arn(known.workgroup),
                    principal=principal,
                )
                return known.id
        if not query.strip():
            raise InvalidRequest("QueryString is empty")
        if len(query) > MAX_QUERY_LENGTH:
            raise InvalidRequest(f"QueryString is longer than {MAX_QUERY_LENGTH} characters")
        group = self._work_group(workgroup or DEFAULT_WORKGROUP)
        if group.state != "ENABLED":
            raise InvalidRequest(f"workgroup {group.name} is disabled")
        query = bound_statement(
            query, execution_parameters, self.prepared, group.name, self._authorizer(principal)
        )
        catalog = self.catalogs.canonical(catalog or DEFAULT_CATALOG)
        database = (database or "default").lower()
        try:
            statement = parse_statement(
                query,
                default_catalog=catalog,
                default_database=database,
                catalogs=self.catalogs.names(),
            )
            if isinstance(statement, Command):
                statement.check(group.engine)
            else:
                check_translatable(statement, group.engine)
        except InvalidRequest as refused:
            log.warning("refused a query from %s: %s: %r", principal, refused, query[:500])
            raise
        # The call's decisions, audited in one commit; a refusal before a bad OutputLocation.
        used = sorted(catalogs_used(statement, catalog))
        decisions = [("athena:StartQueryExecution", workgroup_arn(group.name))]
        decisions += [("lakeward:UseCatalog", catalog_arn(name)) for name in used]
        try:
            location = output_location_of(self.settings, self.storage, group, output_location)
        except InvalidRequest:
            self.access.authorize_all(decisions, principal=principal)
            raise
        execution_id = str(uuid.uuid4())
        result_arn = self.planner.lake_arn(f"{location}/{execution_id}.csv")
        if result_arn:
            decisions.append(("s3:PutObject", result_arn))
        identity = self.access.authorize_all(decisions, principal=principal)
        # The limit per principal counts the user or role, not the access key it signed with.
        caller = getattr(identity, "name", None) or principal
        submitted = _now()
        execution = QueryExecution(
            id=execution_id,
            query=query,
            statement_type=statement.statement_type,
            substatement_type=substatement_type(statement),
            workgroup=group.name,
            catalog=catalog,
            database=database,
            output_location="",
            state=QueryState.QUEUED,
            submitted=submitted,
            engine=group.engine,
            client_request_token=client_request_token,
            started_by=principal,
            reuse_max_age_minutes=reuse_max_age_minutes,
        )
        execution.output_location = f"{location}/{execution.id}.csv"
        reused = self._reusable(execution, statement, reuse_max_age_minutes)
        if reused is not None:
            execution.output_location = reused.output_location
            execution.state = QueryState.SUCCEEDED
            execution.completed = _now()
            execution.statistics = replace(
                reused.statistics,
                result_reused=True,
                total_execution_ms=_ms(time.time() - submitted.timestamp()),
            )
            self.store.add_execution(execution)
            log.info("query %s reuses the result of %s", execution.id, reused.id)
            return execution.id
        with self._lock:
            if len(self._runs) >= MAX_QUEUED:
                raise TooManyRequests(f"more than {MAX_QUEUED} queries are queued; retry later")
            self._runs[execution.id] = _Execution(statement, group, principal, execution)
        # Admitted and recorded in one commit.
        record = functools.partial(insert_execution, execution=execution, owner=self.presence.id)
        try:
            self.workgroups.admit(execution.id, group, caller, record=record)
        except BaseException as exc:
            with self._lock:
                self._runs.pop(execution.id, None)
            if not isinstance(exc, IntegrityError):
                raise
            # The same token, started at the same moment in another process.
            known = self.store.execution_by_token(client_request_token or "")
            if known is None:
                raise
            return known.id
        log.info("query %s started by %s: %s", execution.id, principal, query[:200])
        self._pool.submit(self._execute, execution)
        self.presence.wake()
        return execution.id

    def _authorizer(self, principal: str) -> Callable[[str, str], object]:
        return lambda action, resource: self.access.authorize(action, resource, principal=principal)

    def _reusable(
        self, execution: QueryExecution, statement: Statement | Command, max_age: int | None
    ) -> QueryExecution | None:
        # Only a query's result may be reused: a write or DDL must run every time.
        if not max_age or not isinstance(statement, Statement) or statement.kind != "select":
            return None
        if not 0 < max_age <= 10080:
            raise InvalidRequest("MaxAgeInMinutes must be between 1 and 10080")
        since = execution.submitted - timedelta(minutes=max_age)
        return self.store.reusable(
            execution.query, execution.catalog, execution.database, execution.workgroup, since
        )

    def _slot(self, group: WorkGroup) -> threading.Semaphore:
        with self._lock:
            # Keyed by the cap too: a changed cap takes effect for the next queries
            # (those running keep the slot they hold).
            key = (group.name, group.max_concurrent)
            return self._slots.setdefault(key, threading.Semaphore(group.max_concurrent))

    def _execute(self, execution: QueryExecution) -> None:
        run = self._runs[execution.id]
        slot = self._slot(run.group)
        queued_at = time.monotonic()
        while not slot.acquire(timeout=0.2):
            if run.cancelled.is_set():
                self._finish(execution, *self._stopped())
                return
        try:
            # This process's slot bounds its threads; the state database's count of
            # RUNNING executions bounds the workgroup across every server process.
            # An execution ending here wakes the waiters at once; one ending in another
            # process is seen at the next look.
            while not persisted(
                lambda: self._start_running(execution, run.group, queued_at),
                f"execution {execution.id}",
            ):
                with self._ended:
                    self._ended.wait(_CAP_RECHECK_SECONDS)
                if run.cancelled.is_set():
                    break
            if run.cancelled.is_set():
                self._finish(execution, *self._stopped())
                return
            execution.state = QueryState.RUNNING
            timed_out = functools.partial(self._time_out, execution.id)
            self._timeouts.set(execution.id, run.group.timeout_seconds, timed_out)
            try:
                self._run(execution, run)
            finally:
                self._timeouts.clear(execution.id)
        finally:
            slot.release()
            with self._lock:
                self._runs.pop(execution.id, None)
            with self._ended:
                self._ended.notify_all()

    def _start_running(self, execution: QueryExecution, group: WorkGroup, queued_at: float) -> bool:
        """Take a running slot of ``group``; its record RUNNING, with its queue time."""
        execution.statistics.queue_ms = _ms(time.monotonic() - queued_at)
        running = replace(execution, state=QueryState.RUNNING)
        return self.workgroups.start_running(execution.id, group, execution_row(running))

    def _run(self, execution: QueryExecution, run: _Execution) -> None:
        started = time.monotonic()
        try:
            result, scanned = self._result(execution, run)
            bucket, prefix = self._bucket_and_prefix(execution.output_location)
            results.write_results(self.storage, bucket, prefix, execution.id, result)
            execution.statistics.data_scanned_bytes = result.bytes_scanned or scanned
            if result.update_count is not None:
                execution.statistics.update_count = result.update_count
        except Exception as exc:  # the statement's error, or an engine's: the service goes on
            if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:  # the disk's, not ours
                log.warning("query %s failed: %s", execution.id, exc)
            elif not isinstance(exc, LakewardError):
                log.exception("query %s failed", execution.id)
            self._finish(execution, *self._failure(run, exc))
            return
        execution.statistics.engine_execution_ms = _ms(time.monotonic() - started)
        self._finish(execution, QueryState.SUCCEEDED, None)

    def _failure(
        self, run: _Execution, exc: Exception
    ) -> tuple[QueryState, str, BaseException | None]:
        """How an execution whose statement raised ``exc`` ends: its state, its reason and
        the error that classifies it (none when it was stopped or timed out)."""
        if run.cancelled.is_set():
            return *self._stopped(), None
        if run.timed_out.is_set():
            limit = f"timed out after {run.group.timeout_seconds:g} s (the workgroup's limit)"
            return QueryState.FAILED, limit, None
        if isinstance(exc, LakewardError):
            return QueryState.FAILED, exc.message, exc
        return QueryState.FAILED, f"{type(exc).__name__}: {exc}", exc

    def _finish(
        self,
        execution: QueryExecution,
        state: QueryState,
        reason: str | None,
        error: BaseException | None = None,
    ) -> None:
        write = self.journal.committed(execution.id)
        if write is not None and state != QueryState.SUCCEEDED:
            try:  # it failed after its statement (writing its result, say)
                write.roll_back()
            except (LakewardError, OSError):  # the execution still ends
                log.exception("rolling back the write of %s failed", execution.id)
        if state == QueryState.FAILED and reason:
            reason = athena_reason(reason, execution.query, execution.catalog)  # as Athena says
            kind = error_kind(reason, error)
            execution.error_category, execution.error_type = kind.category, kind.type
            execution.retryable = kind.retryable
        execution.state_change_reason = reason
        execution.completed = _now()
        stats = execution.statistics
        stats.total_execution_ms = _ms((execution.completed - execution.submitted).total_seconds())
        stats.service_processing_ms = max(
            0, stats.total_execution_ms - stats.engine_execution_ms - stats.queue_ms
        )
        # Saved before a poll answered from memory can see the state: a client that saw
        # SUCCEEDED finds the execution done in the state database too (result reuse,
        # another process's polls).
        final = _copy(execution)
        final.state = state
        if write is None or state != QueryState.SUCCEEDED:
            persisted(lambda: self.store.save_execution(final), f"execution {execution.id}")
        elif not persisted(lambda: self.store.save_with_write(final), f"execution {execution.id}"):
            # Another process took this one for dead and rolled the write back.
            self._finish(execution, QueryState.FAILED, ROLLED_BACK_ELSEWHERE)
            return
        execution.state = state  # last: a poll answered from memory sees the figures with it
        self._remember(execution)

    def _remember(self, execution: QueryExecution) -> None:
        """Keep a finished execution for its polls and pages (a finished one never changes)."""
        with self._lock:
            self._recent[execution.id] = _copy(execution)
            self._recent.move_to_end(execution.id)
            while len(self._recent) > RECENT:
                self._recent.popitem(last=False)

    def _time_out(self, execution_id: str) -> None:
        run = self._runs.get(execution_id)
        if run is not None:
            run.timed_out.set()
            if run.engine is not None:
                run.engine.interrupt(execution_id)

    def _result(self, execution: QueryExecution, run: _Execution) -> tuple[EngineResult, int]:
        statement = run.statement
        if isinstance(statement, Command):
            context = Context(
                self.settings,
                self.access,
                self.catalogs,
                self.planner,
                self.storage,
                self.journal,
                run,
                self.prepared,
            )
            return statement.run(context), 0
        plan = self.planner.plan(run, statement.target)
        if statement.kind == "explain":
            explained = f"EXPLAIN {plan.sql}"
            return plan.engine.execute(
                execution.id, explained, plan.tables, plan.limits
            ), plan.scanned
        return plan.execute(execution.id), plan.scanned

    def _check_execution(self, execution: QueryExecution, action: str) -> None:
        check_reader(self.access, execution, action)

    def _bucket_and_prefix(self, output_uri: str) -> tuple[str, str]:
        place = lake_place(self.settings, output_uri)
        if place is None:
            raise InvalidRequest(f"the result place {output_uri} is not in the lake")
        bucket, key = place
        return bucket, key.rsplit("/", 1)[0] if "/" in key else ""

    def get_query_execution(self, execution_id: str) -> QueryExecution:
        execution = self._execution(execution_id)
        self._check_execution(execution, "GetQueryExecution")
        if not execution.state.done and self._ended_here(execution_id):
            return self._execution(execution_id)
        return execution

    def _ended_here(self, execution_id: str) -> bool:
        """Wait up to ``server.poll_wait_ms`` for an execution this process runs to end:
        clients poll on a timer, and a short query costs them one poll, not many."""
        if execution_id not in self._runs or not self._poll_waits.acquire(blocking=False):
            return False  # another process runs it, or the HTTP threads are for other calls
        deadline = time.monotonic() + self.settings.server.poll_wait_seconds
        try:
            with self._ended:  # _execute notifies it after taking the run out of _runs
                while execution_id in self._runs:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return False
                    self._ended.wait(remaining)
            return True
        finally:
            self._poll_waits.release()

    def _execution(self, execution_id: str) -> QueryExecution:
        """From memory while this process runs it or once it finished here; else one read."""
        with self._lock:
            run = self._runs.get(execution_id)
            known = _copy(run.execution) if run is not None else self._recent.get(execution_id)
        if known is not None:
            return _copy(known)
        execution = self.store.execution(execution_id)
        if execution is None:
            raise InvalidRequest(f"QueryExecution {execution_id} was not found")
        if execution.state.done:
            self._remember(execution)
        return execution

    def get_query_results(
        self, execution_id: str, next_token: str | None = None, max_results: int = 1000
    ) -> ResultPage:
        execution = self._execution(execution_id)
        self._check_execution(execution, "GetQueryResults")
        if execution.state != QueryState.SUCCEEDED:
            reason = f": {execution.state_change_reason}" if execution.state_change_reason else ""
            raise InvalidRequest(
                f"Query has not yet finished. Current state: {execution.state.value}{reason}"
                if not execution.state.done
                else f"Query did not succeed. Current state: {execution.state.value}{reason}"
            )
        if not 1 <= max_results <= 1000:
            raise InvalidRequest("MaxResults must be between 1 and 1000")
        bucket, prefix = self._bucket_and_prefix(execution.output_location)
        result_id = execution.output_location.rsplit("/", 1)[1].removesuffix(".csv")
        page = results.read_page(
            self.storage,
            bucket,
            prefix,
            result_id,
            next_token,
            max_results,
            include_header=execution.statement_type == StatementType.DML,
        )
        written = execution.statistics.update_count
        return page if written is None else replace(page, update_count=written)

    def stop_query_execution(self, execution_id: str) -> None:
        self._check_execution(self._execution(execution_id), "StopQueryExecution")
        self._stop_here(execution_id)
        # Recorded too: the process running it (this one or another) sees the request
        # within presence.STOP_POLL and repeats it until the execution ends, so a stop
        # that came before the engine had the query is not lost. An execution that has
        # ended has nothing to stop, and Athena says nothing.
        self.store.request_stop(execution_id)

    def _stopped(self) -> tuple[QueryState, str]:
        """How a stopped execution ends: CANCELLED if a user stopped it; FAILED, naming
        the cause, if this process is stopping (its supervisor died, say)."""
        if self._closing:
            return QueryState.FAILED, orphan_reason(self.presence.id, "was stopped")
        return QueryState.CANCELLED, "stopped by the user"

    def _stop_here(self, execution_id: str) -> bool:
        """Stop an execution if this process runs it; False if it does not."""
        run = self._runs.get(execution_id)
        if run is None:
            return False
        run.cancelled.set()
        now = time.monotonic()
        if run.engine is not None and now - run.interrupted >= INTERRUPT_AGAIN:
            run.interrupted = now
            run.engine.interrupt(execution_id)
        return True


def _copy(execution: QueryExecution) -> QueryExecution:
    """A copy the caller may keep: the running one changes as it runs."""
    return replace(execution, statistics=replace(execution.statistics))
