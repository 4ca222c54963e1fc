"""The soak scenario: a mixed workload against a running server for a while, processes
killed and paused at random meanwhile, then the invariants a user relies on, checked.

Used by bench/soak.py (runs of any length, with their figures) and tests/test_soak.py
(a short run with a fixed seed, asserting that every invariant held), as ``bench._soak``.

Clients are real boto3 clients, one per thread, each with its own connections: Athena's
for SELECTs whose answer is known, CTAS, INSERT and views over the stack's covid table,
and S3's for objects put through lakeward's S3 endpoint, people's records among them
(erased through approval by another thread: bench/_soak_people.py). The
fault thread kills (SIGKILL) or pauses (SIGSTOP, then SIGCONT) one of the server's
processes every few seconds, by a seeded random choice, and measures how long the
server then takes to answer again. Every execution and every answered call is recorded;
``check`` then says, for each invariant, "held" or what broke it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
import re
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench._soak_console import SESSIONS, ConsoleReport, ConsoleSessions
from bench._soak_iam import IamChanges, IamReport
from bench._soak_people import People, PeopleReport
from lakeward.config import Settings
from lakeward.http.supervisor import read_record
from lakeward.http.worker import WORKER_HEADER
from lakeward.metastore.node import MetastoreNode
from lakeward.process import children, is_running, port_is_free
from lakeward.stack import Stack

TABLE = "covid_confirmed_cases"
COUNTRIES = ("Italy", "Spain", "France", "Germany", "Japan", "Brazil", "India", "Canada")
DONE = ("SUCCEEDED", "FAILED", "CANCELLED")
SERVER_FAULTS = ("worker_kill", "worker_pause", "supervisor_kill", "server_kill")
METASTORE_FAULT = "metastore_kill"
DISK_FAULT = "disk_full"
DISK_LEFT_FREE = (0, 1, 4)
"""MiB the disk fault leaves free on the server's state file system, by random choice."""
WORKLOAD = (
    ("select", 5),
    ("ctas", 2),
    ("insert", 2),
    ("view", 1),
    ("s3_put", 2),
    ("people_put", 2),
)
"""Statement kinds (and S3 puts) and their weights in each client's random choice."""
SERVER_KILLS = ("worker_kill", "supervisor_kill", "server_kill")
ALONE_AFTER = 20.0
"""A kill "alone" came this many seconds or more after the server's last: the processes
that replace the killed ones (a standby, a spare worker) had time to be built."""
WINDOW = 600.0
"""Seconds of each window the summary gives rates for (runs of two windows or more)."""
STUCK_AFTER = 300.0
"""Seconds a client waits for an execution to end before it goes on without it."""
CALL_PATIENCE = 90.0
"""Seconds a client keeps retrying one call through faults before it records an error."""


@dataclass
class Statement:
    """One statement a client ran, and what became of it."""

    kind: str  # select | ctas | insert | view
    sql: str
    country: str
    table: str | None = None  # the table a CTAS made, or a view
    execution_id: str | None = None
    state: str | None = None
    reason: str | None = None
    update_count: int | None = None
    wrong_answer: str | None = None  # a SUCCEEDED SELECT whose rows are not the known ones
    error: str | None = None  # no answer within CALL_PATIENCE, or a refusal to start
    ended: float | None = None  # seconds into the run when its client was done with it


@dataclass
class Put:
    """One S3 PutObject a client made through lakeward's S3 endpoint."""

    key: str
    sha256: str
    size: int
    acknowledged: bool = False
    error: str | None = None


@dataclass
class Fault:
    kind: str
    at: float  # seconds into the run
    pid: int
    back_after: float | None = None  # seconds until the server answered again (kills)


@dataclass
class Report:
    seconds: float = 0.0
    statements: list[Statement] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    puts: list[Put] = field(default_factory=list)
    answered: list[tuple[str, str]] = field(default_factory=list)  # request id, call: outcome
    bodiless: list[str] = field(default_factory=list)  # answers that lacked their body
    harness: list[str] = field(default_factory=list)  # faults the harness failed to inject
    samples: list[tuple[float, int, int]] = field(default_factory=list)  # t, rss kB, fds
    invariants: dict[str, str] = field(default_factory=dict)
    people: PeopleReport = field(default_factory=PeopleReport)  # bench/_soak_people.py
    iam: IamReport = field(default_factory=IamReport)  # bench/_soak_iam.py
    console: ConsoleReport = field(default_factory=ConsoleReport)  # bench/_soak_console.py

    def per_minute(self) -> dict[str, float]:
        """SUCCEEDED statements per minute, by kind."""
        done = Counter(s.kind for s in self.statements if s.state == "SUCCEEDED")
        done["s3_put"] = sum(1 for p in self.puts if p.acknowledged)
        done["people_put"] = sum(1 for o in self.people.objects if o.acknowledged)
        done["erasure"] = sum(1 for e in self.people.erasures if e.state == "COMPLETED")
        done["dashboard"] = self.console.renders
        minutes = max(self.seconds, 1.0) / 60
        kinds = [*(k for k, _ in WORKLOAD), "erasure", "dashboard"]
        return {kind: done[kind] / minutes for kind in kinds}


class _Calls:
    """A client's calls, retried through faults, every answer's request id recorded."""

    def __init__(
        self, settings: Settings, report: Report, lock: threading.Lock, service: str = "athena"
    ) -> None:
        import boto3
        from botocore.config import Config

        self.client = boto3.client(
            service,
            endpoint_url=settings.server_url,
            region_name=settings.api.region,
            aws_access_key_id=settings.api.access_key_id,
            aws_secret_access_key=settings.api.secret_access_key,
            config=Config(
                retries={"max_attempts": 1},
                connect_timeout=3,
                read_timeout=30,
                s3={"addressing_style": "path"},
            ),
        )
        self.report, self.lock, self.service = report, lock, service
        self.raw: tuple[int, str, str, bytes] | None = None  # the last answer as it came
        if service == "athena":  # reading S3's raw answer would consume a streamed body
            self.client.meta.events.register("after-call.athena", self._keep_raw)

    def _keep_raw(self, http_response: Any, **_: Any) -> None:
        """The status, the answering worker, the announced length and the body's start."""
        headers = http_response.headers
        self.raw = (
            http_response.status_code,
            f"worker {headers.get(WORKER_HEADER, '?')}",
            f"length {headers.get('content-length', '?')}",
            http_response.content[:300],
        )

    def __call__(self, operation: str, **params: Any) -> dict[str, Any]:
        from botocore.exceptions import BotoCoreError, ClientError

        deadline = time.monotonic() + CALL_PATIENCE
        while True:
            try:
                response: dict[str, Any] = getattr(self.client, operation)(**params)
            except ClientError as exc:
                self._answered(operation, exc.response)
                code = exc.response.get("Error", {}).get("Code", "")
                if code in ("ThrottlingException", "TooManyRequestsException"):
                    time.sleep(0.2)
                    continue
                # The server's failure (its disk full, say): an SDK tries it again.
                status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
                if status >= 500 and time.monotonic() < deadline:
                    time.sleep(0.2)
                    continue
                raise
            except BotoCoreError:  # no answer: the process that had the call died
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
                continue
            self._answered(operation, response)
            # Every Athena answer has a body; some of S3's have only headers.
            if self.service == "athena" and set(response) == {"ResponseMetadata"}:
                with self.lock:
                    self.report.bodiless.append(f"{operation}: {self.raw}")
                continue
            return response

    def _answered(self, operation: str, response: dict[str, Any]) -> None:
        """Record an answer, but not a server error's: a call does nothing before its
        decision is in the audit log, so one that failed there did nothing to record."""
        metadata = response.get("ResponseMetadata", {})
        request_id = metadata.get("RequestId")
        outcome = response.get("Error", {}).get("Code", "answered")
        with self.lock:
            if request_id and metadata.get("HTTPStatusCode", 200) < 500:
                self.report.answered.append((request_id, f"{operation}: {outcome}"))


class Soak:
    def __init__(
        self,
        settings: Settings,
        seed: int,
        clients: int = 4,
        every: float = 6.0,
        disk: Path | None = None,
        stack: Settings | None = None,
    ) -> None:
        """``disk``: the small file system the server's state is on (its data dir), which
        the disk fault fills for a while; None leaves that fault out. ``stack``: the
        settings of the stack whose metastore nodes the server uses (their processes are
        found from its data dir), when the server's state is elsewhere."""
        self.settings, self.disk = settings, disk
        self.stack = stack or settings
        self.seed, self.clients, self.every = seed, clients, every
        self.run_id = f"soak_{seed}_{uuid.uuid4().hex[:6]}"
        self.report = Report()
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.seen: set[int] = set()  # the pids of the server's processes during the run
        self.started = time.monotonic()  # the run's start, once it starts
        self.known: dict[str, tuple[int, int]] = {}  # country -> (rows, confirmed)
        self.log_table = f"{self.run_id}_log"
        self.prefix = f"soak/{self.run_id}/"  # the S3 puts' keys, in the data bucket
        self.people = People(self)
        self.report.people = self.people.report
        self.iam = IamChanges(self)
        self.report.iam = self.iam.report
        self.console = ConsoleSessions(self)
        self.report.console = self.console.report
        metastore_nodes = settings.metastore.nodes if settings.metastore.port else 0
        self.faults = SERVER_FAULTS + ((METASTORE_FAULT,) if metastore_nodes > 1 else ())
        self.faults += (DISK_FAULT,) if disk is not None else ()

    # -- the run ------------------------------------------------------------

    def run(self, seconds: float) -> Report:
        calls = _Calls(self.settings, self.report, self.lock)
        self._prepare(calls)
        started = self.started = time.monotonic()
        threads = [
            threading.Thread(target=self._client, args=(i,), name=f"soak-client-{i}")
            for i in range(self.clients)
        ]
        threads.append(threading.Thread(target=self._fault_loop, args=(started,), name="faults"))
        threads.append(
            threading.Thread(target=self.people.erase_loop, args=(self.seed,), name="erasures")
        )
        threads.append(threading.Thread(target=self.iam.loop, args=(self.seed,), name="iam"))
        threads += [
            threading.Thread(target=self.console.loop, args=(i, self.seed), name=f"console-{i}")
            for i in range(SESSIONS)
        ]
        threads.append(threading.Thread(target=self._sample_loop, args=(started,), name="sample"))
        for thread in threads:
            thread.start()
        self.stopping.wait(seconds)
        self.stopping.set()
        for thread in threads:
            thread.join()
        self.report.seconds = time.monotonic() - started
        return self.report

    def _prepare(self, calls: _Calls) -> None:
        """The known answers, before any fault; the INSERTs' table, empty; the people's
        dataset registered."""
        self.people.prepare()
        self.console.prepare()
        in_list = ", ".join(f"'{c}'" for c in COUNTRIES)
        rows = self._rows(
            calls,
            f"SELECT country, count(*), sum(confirmed) FROM {TABLE} "
            f"WHERE country IN ({in_list}) GROUP BY country",
        )
        self.known = {r[0]: (int(r[1]), int(r[2])) for r in rows}
        missing = set(COUNTRIES) - set(self.known)
        if missing:
            raise RuntimeError(f"the table {TABLE} has no rows for {sorted(missing)}")
        statement = Statement(
            "ctas", f"CREATE TABLE {self.log_table} AS {self._source('Italy')} AND 1 = 0", ""
        )
        self._execute(calls, statement)
        if statement.state != "SUCCEEDED":
            raise RuntimeError(f"cannot create {self.log_table}: {statement.reason}")

    def _source(self, country: str) -> str:
        return (
            f"SELECT province_state, country, date, confirmed FROM {TABLE} "
            f"WHERE country = '{country}'"
        )

    def _client(self, index: int) -> None:
        rng = random.Random(self.seed * 1000 + index)
        calls = _Calls(self.settings, self.report, self.lock)
        s3 = _Calls(self.settings, self.report, self.lock, "s3")
        kinds = [k for k, _ in WORKLOAD]
        weights = [w for _, w in WORKLOAD]
        number = 0
        while not self.stopping.is_set():
            number += 1
            kind = rng.choices(kinds, weights)[0]
            if kind == "s3_put":
                self._put(s3, f"{self.prefix}c{index}_{number}", rng)
                continue
            if kind == "people_put":
                self.people.put(s3, f"c{index}_{number}", rng)
                continue
            country = rng.choice(COUNTRIES)
            statement = self._statement(kind, country, f"c{index}_{number}")
            self._execute(calls, statement, check=True)
            statement.ended = time.monotonic() - self.started
            with self.lock:
                self.report.statements.append(statement)

    def _put(self, s3: _Calls, key: str, rng: random.Random) -> None:
        body = rng.randbytes(rng.randint(1, 256 * 1024))
        put = Put(key, hashlib.sha256(body).hexdigest(), len(body))
        with self.lock:
            self.report.puts.append(put)
        try:
            s3("put_object", Bucket=self.settings.lake.data_bucket, Key=key, Body=body)
            put.acknowledged = True
        except Exception as exc:  # botocore's: no answer within CALL_PATIENCE, or a refusal
            put.error = f"{type(exc).__name__}: {exc}"

    def _statement(self, kind: str, country: str, suffix: str) -> Statement:
        if kind == "select":
            sql = f"SELECT count(*), sum(confirmed) FROM {TABLE} WHERE country = '{country}'"
            return Statement(kind, sql, country)
        if kind == "ctas":
            name = f"{self.run_id}_{suffix}"
            return Statement(kind, f"CREATE TABLE {name} AS {self._source(country)}", country, name)
        if kind == "insert":
            sql = f"INSERT INTO {self.log_table} {self._source(country)}"
            return Statement(kind, sql, country, self.log_table)
        name = f"{self.run_id}_view_{suffix.split('_')[0]}"
        sql = (
            f"CREATE OR REPLACE VIEW {name} AS SELECT count(*) AS n, sum(confirmed) AS total "
            f"FROM ({self._source(country)})"
        )
        return Statement(kind, sql, country, name)

    def _execute(self, calls: _Calls, statement: Statement, check: bool = False) -> None:
        """Run ``statement`` to its end; with ``check``, compare its answer with the known."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            started = calls(
                "start_query_execution",
                QueryString=statement.sql,
                # One token for every attempt: a start retried after its answer was lost
                # is the same execution, not a second one.
                ClientRequestToken=str(uuid.uuid4()),
                QueryExecutionContext={"Database": self.settings.covid.database},
            )
            statement.execution_id = started["QueryExecutionId"]
            status = self._wait(calls, statement.execution_id)
            statement.state, statement.reason = status["State"], status.get("StateChangeReason")
            if check and statement.state == "SUCCEEDED":
                self._check_answer(calls, statement)
        except (BotoCoreError, ClientError) as exc:
            statement.error = f"{type(exc).__name__}: {exc}"

    def _wait(self, calls: _Calls, execution_id: str) -> dict[str, Any]:
        """The execution's status once it ended, or as it is after ``STUCK_AFTER`` s (the
        "no execution stays RUNNING" invariant then names it)."""
        deadline = time.monotonic() + STUCK_AFTER
        while True:
            response = calls("get_query_execution", QueryExecutionId=execution_id)
            status: dict[str, Any] = response["QueryExecution"]["Status"]
            if status["State"] in DONE or time.monotonic() > deadline:
                return status
            time.sleep(0.05)

    def _check_answer(self, calls: _Calls, statement: Statement) -> None:
        assert statement.execution_id is not None
        rows, confirmed = self.known[statement.country]
        if statement.kind in ("select", "view"):
            if statement.kind == "view":
                assert statement.table is not None
                view = Statement("select", f"SELECT n, total FROM {statement.table}", "")
                self._execute(calls, view)
                if view.state != "SUCCEEDED":
                    return  # the view's own query failed (a fault): it names its cause
                answer = self._rows(calls, None, view.execution_id)  # only its client replaces it
                if answer != [[str(rows), str(confirmed)]]:
                    statement.wrong_answer = f"the view gave {answer}, not [[{rows}, {confirmed}]]"
                return
            answer = self._rows(calls, None, statement.execution_id)
            if answer != [[str(rows), str(confirmed)]]:
                statement.wrong_answer = f"{answer}, not [[{rows}, {confirmed}]]"
            return
        result = calls("get_query_results", QueryExecutionId=statement.execution_id)
        statement.update_count = result.get("UpdateCount")
        if statement.update_count != rows:
            statement.wrong_answer = f"UpdateCount {statement.update_count}, not {rows}"

    def _rows(
        self,
        calls: _Calls,
        sql: str | None,
        execution_id: str | None = None,
        header: bool = True,
    ) -> list[Any]:
        """The data rows of ``sql`` run now (or of a finished ``execution_id``), all pages.
        A SELECT's first row names its columns (``header``); a SHOW's does not, as in Athena."""
        if sql is not None:
            for _attempt in range(3):  # a query failed by a fault says "run it again"
                statement = Statement("select", sql, "")
                self._execute(calls, statement)
                if not (statement.reason or "").endswith("run it again"):
                    break
            if statement.state != "SUCCEEDED":
                raise RuntimeError(
                    f"{sql}: {statement.state} {statement.reason or statement.error}"
                )
            execution_id = statement.execution_id
        rows: list[Any] = []
        token: dict[str, str] = {}
        while True:
            page = calls("get_query_results", QueryExecutionId=execution_id, **token)
            data = page["ResultSet"]["Rows"]
            rows += [[c.get("VarCharValue") for c in r["Data"]] for r in data]
            if "NextToken" not in page:
                return rows[1:] if header else rows
            token = {"NextToken": page["NextToken"]}

    # -- faults -------------------------------------------------------------

    def _fault_loop(self, started: float) -> None:
        rng = random.Random(self.seed)
        while not self.stopping.wait(self.every * rng.uniform(0.5, 1.5)):
            kind = rng.choice(self.faults)
            try:
                fault = self._inject(kind, rng, time.monotonic() - started)
            except ProcessLookupError:
                continue  # it died meanwhile (replaced after another fault)
            except Exception as exc:  # the harness's own failure: recorded, the run goes on
                with self.lock:
                    self.report.harness.append(f"{kind}: {type(exc).__name__}: {exc}")
                continue
            if fault is not None:
                with self.lock:
                    self.report.faults.append(fault)

    def _inject(self, kind: str, rng: random.Random, at: float) -> Fault | None:
        if kind == DISK_FAULT:
            return self._fill_disk(rng, at)
        record = read_record(self.settings)
        workers = [int(w["pid"]) for w in record.get("workers", []) if w.get("pid")]
        if kind == METASTORE_FAULT:
            nodes = [n for n in Stack(self.stack).metastore_nodes() if n.process.pid()]
            if len(nodes) < 2:
                return None  # never the last node: the fault is one node, not the metastore
            node = rng.choice(nodes)
            pid = node.process.pid()
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            fault = Fault(kind, at, pid, self._back_after(time.monotonic()))
            self._restart_later(node)
            return fault
        if not workers or "supervisor" not in record:
            return None  # the server is still coming back from the last fault
        if kind == "worker_pause":
            pid = rng.choice(workers)
            os.kill(pid, signal.SIGSTOP)
            self.stopping.wait(rng.uniform(1.0, 4.0))
            os.kill(pid, signal.SIGCONT)
            return Fault(kind, at, pid)
        if kind == "worker_kill":
            victims = [rng.choice(workers)]
        elif kind == "supervisor_kill":
            victims = [int(record["supervisor"])]
        else:  # server_kill: the supervisor and every worker at once
            victims = [int(record["supervisor"]), *workers]
        killed = time.monotonic()
        for pid in victims:
            os.kill(pid, signal.SIGKILL)
        return Fault(kind, at, victims[0], self._back_after(killed))

    def _fill_disk(self, rng: random.Random, at: float) -> Fault:
        """The state's file system filled to a few MiB free (none, at times) for 3-10 s,
        then freed; the time is until a call that writes (a named query saved, and
        deleted) is answered again."""
        assert self.disk is not None
        filler = self.disk / ".soak-filler"
        stats = os.statvfs(self.disk)
        size = stats.f_bavail * stats.f_frsize - rng.choice(DISK_LEFT_FREE) * 2**20
        fd = os.open(filler, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
        try:
            # OSError: the server wrote meanwhile; the disk is full all the same.
            with contextlib.suppress(OSError):
                os.posix_fallocate(fd, 0, max(size, 1))
            self.stopping.wait(rng.uniform(3.0, 10.0))
        finally:
            os.close(fd)
            filler.unlink()
        freed = time.monotonic()
        return Fault(DISK_FAULT, at, 0, self._writes_after(freed))

    def _writes_after(self, since: float) -> float | None:
        """Seconds from ``since`` until the server saves something again (an execution
        started: its audit record and its state written)."""
        calls = _Calls(self.settings, self.report, self.lock)
        deadline = since + 60
        while time.monotonic() < deadline:
            try:
                calls.client.start_query_execution(QueryString="SELECT 1")
            except Exception:  # noqa: BLE001 - refused while the disk is full: try again
                time.sleep(0.1)
                continue
            return time.monotonic() - since
        return None

    def _back_after(self, since: float) -> float | None:
        """Seconds from ``since`` until a new connection's call is answered."""
        import httpx

        deadline = since + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.settings.server_url}/health", timeout=1).status_code == 200:
                    return time.monotonic() - since
            except httpx.HTTPError:
                pass
            time.sleep(0.02)
        return None

    def _restart_later(self, node: MetastoreNode) -> None:
        def restart() -> None:
            from lakeward.errors import StackError

            self.stopping.wait(3.0)  # a while with one node less, as an operator's heal
            for _attempt in range(5):
                if node.process.pid():
                    return  # started again meanwhile (by the heal of an earlier kill)
                try:
                    node.launch()
                    node.wait_ready()
                    return
                except StackError:  # killed again while it started: start it once more
                    time.sleep(1.0)

        threading.Thread(target=restart, name="metastore-heal", daemon=True).start()

    def _sample_loop(self, started: float) -> None:
        """Every server process seen (for ``leftovers``); the keeper's memory and
        descriptors, as it is the one server process no fault replaces."""
        keeper = Stack(self.settings).server_process.pid()
        while not self.stopping.wait(1.0):
            record = read_record(self.settings)
            pids = [record.get("supervisor"), record.get("spare")]
            pids += [w.get("pid") for w in record.get("workers", [])]
            if keeper is not None:  # a standby supervisor and its workers too
                pids += [pid for child in children(keeper) for pid in (child, *children(child))]
            sample = _rss_and_fds(keeper) if keeper is not None else None
            with self.lock:
                self.seen.update(int(pid) for pid in [keeper, *pids] if pid)
                if sample is not None:
                    self.report.samples.append((time.monotonic() - started, *sample))

    # -- the invariants -----------------------------------------------------

    def check(self, settle: float = 120.0) -> dict[str, str]:
        """Each invariant: "held", or what broke it. Run after ``run``."""
        calls = _Calls(self.settings, self.report, self.lock)
        statements = self.report.statements
        results: dict[str, str] = {}

        def verdict(name: str, broken: list[str]) -> None:
            results[name] = (
                "held" if not broken else f"{len(broken)} broken: " + "; ".join(broken[:5])
            )

        verdict(
            "every statement was answered",
            [f"{s.sql[:60]}: {s.error}" for s in statements if s.error],
        )
        verdict(
            "every SUCCEEDED query has its full, right result",
            [f"{s.execution_id}: {s.wrong_answer}" for s in statements if s.wrong_answer],
        )
        verdict(
            "every FAILED or CANCELLED query names a cause",
            [
                f"{s.execution_id} {s.state}"
                for s in statements
                if s.state in ("FAILED", "CANCELLED") and not (s.reason or "").strip()
            ],
        )
        verdict("every fault chosen was injected", self.report.harness)
        verdict("every answer has its body", self.report.bodiless)
        verdict("no execution stays RUNNING", self._stuck(calls, settle))
        verdict("every CTAS is all there with SUCCEEDED, or absent", self._ctas_tables(calls))
        verdict("every INSERT is all there with SUCCEEDED, or absent", self._inserted(calls))
        verdict(
            "every acknowledged S3 put reads back as written, none half-written",
            self._objects(),
        )
        self.people.check(_Calls(self.settings, self.report, self.lock, "s3"), verdict)
        iam = self.report.iam
        verdict("every decision follows the IAM change before it", iam.wrong + iam.errors)
        self.console.check(verdict)
        verdict("every answered API call has its audit record", self._unaudited())
        verdict("the keeper's memory and descriptors are flat after warm-up", self._growth())
        self.report.invariants = results
        return results

    def _growth(self) -> list[str]:
        """The keeper (the one server process no fault replaces) from the end of the
        first quarter of the run (warm-up) to its end: memory within 10 % and 8 MiB,
        descriptors within 2 (a connection open at the moment of a sample)."""
        samples = self.report.samples
        if len(samples) < 4:
            return []
        (_, rss, fds), (_, rss_end, fds_end) = samples[len(samples) // 4], samples[-1]
        grown = []
        if rss_end > rss * 1.1 + 8 * 1024:
            grown.append(f"RSS {rss} -> {rss_end} kB")
        if fds_end > fds + 2:
            grown.append(f"descriptors {fds} -> {fds_end}")
        return grown

    def _stuck(self, calls: _Calls, settle: float) -> list[str]:
        ids = [s.execution_id for s in self.report.statements if s.execution_id]
        deadline = time.monotonic() + settle
        pending = list(ids)
        while pending and time.monotonic() < deadline:
            still = []
            for start in range(0, len(pending), 50):
                batch = calls(
                    "batch_get_query_execution", QueryExecutionIds=pending[start : start + 50]
                )
                still += [
                    e["QueryExecutionId"]
                    for e in batch["QueryExecutions"]
                    if e["Status"]["State"] not in DONE
                ]
            pending = still
            if pending:
                time.sleep(1.0)
        return [f"{i} not done {settle:g} s after the run" for i in pending]

    def _tables(self, calls: _Calls) -> set[str]:
        shown = self._rows(calls, f"SHOW TABLES LIKE '{self.run_id}*'", header=False)
        return {r[0] for r in shown}

    def _ctas_tables(self, calls: _Calls) -> list[str]:
        present = self._tables(calls)
        broken = []
        made = []
        for s in self.report.statements:
            if s.kind != "ctas" or s.table is None:
                continue
            if s.state != "SUCCEEDED" and s.table in present:
                broken.append(f"{s.table} is there, its CTAS {s.state or s.error}")
            elif s.state == "SUCCEEDED" and s.table not in present:
                broken.append(f"{s.table} is absent, its CTAS SUCCEEDED")
            elif s.state == "SUCCEEDED":
                made.append(s)
        for start in range(0, len(made), 50):  # counted 50 tables a query
            batch = made[start : start + 50]
            sql = " UNION ALL ".join(f"SELECT '{s.table}', count(*) FROM {s.table}" for s in batch)
            counts = {name: int(n) for name, n in self._rows(calls, sql)}
            for s in batch:
                if counts[s.table] != self.known[s.country][0]:
                    rows = self.known[s.country][0]
                    broken.append(f"{s.table} has {counts[s.table]} rows, not {rows}")
        return broken

    def _inserted(self, calls: _Calls) -> list[str]:
        expected: Counter[str] = Counter()
        for s in self.report.statements:
            if s.kind == "insert" and s.state == "SUCCEEDED":
                expected[s.country] += self.known[s.country][0]
        rows = self._rows(calls, f"SELECT country, count(*) FROM {self.log_table} GROUP BY country")
        found = {r[0]: int(r[1]) for r in rows}
        return [
            f"{country}: {found.get(country, 0)} rows; the SUCCEEDED INSERTs: {expected[country]}"
            for country in COUNTRIES
            if found.get(country, 0) != expected[country]
        ]

    def _objects(self) -> list[str]:
        s3 = _Calls(self.settings, self.report, self.lock, "s3")
        bucket = self.settings.lake.data_bucket
        found: dict[str, str] = {}
        for page in s3.client.get_paginator("list_objects_v2").paginate(
            Bucket=bucket, Prefix=self.prefix
        ):
            for item in page.get("Contents", []):
                found[item["Key"]] = self._digest(s3, bucket, item["Key"])
        broken = []
        puts = {p.key: p for p in self.report.puts}
        for key, digest in found.items():
            if key not in puts or digest != puts[key].sha256:
                broken.append(f"{key}: not what was put")
        broken += [
            f"{p.key}: acknowledged, absent"
            for p in puts.values()
            if p.acknowledged and p.key not in found
        ]
        broken += [f"{p.key}: {p.error}" for p in puts.values() if p.error]
        return broken

    def _digest(self, s3: _Calls, bucket: str, key: str) -> str:
        """The SHA-256 of an object as a GET reads it; a read cut short is recorded."""
        from botocore.exceptions import BotoCoreError

        for _attempt in range(3):
            response = s3("get_object", Bucket=bucket, Key=key)
            try:
                return hashlib.sha256(response["Body"].read()).hexdigest()
            except BotoCoreError as exc:  # the head came, the body did not
                with self.lock:
                    self.report.bodiless.append(f"get_object {key}: {exc}")
        return "unreadable"

    def _unaudited(self) -> list[str]:
        from sqlalchemy import select

        from lakeward.access.audit_tables import audit_log
        from lakeward.access.control import AccessControl

        # Every request id in the log (an hour's run records more than a query's limit).
        access = AccessControl(self.settings)
        try:
            with access.audit.engine.connect() as conn:
                recorded = set(conn.execute(select(audit_log.c.request_id)).scalars())
        finally:
            access.audit.close()
        return [f"{call} ({i})" for i, call in self.report.answered if i not in recorded]

    def clean_up(self) -> None:
        """Drop what the run made (its tables and views)."""
        names = sorted(self._tables(_Calls(self.settings, self.report, self.lock)))

        def drop(share: list[str]) -> None:  # a run of an hour leaves thousands
            calls = _Calls(self.settings, self.report, self.lock)
            for name in share:
                kind = "VIEW" if name.startswith(f"{self.run_id}_view_") else "TABLE"
                self._execute(calls, Statement("", f"DROP {kind} {name}", ""))

        with ThreadPoolExecutor(self.clients) as pool:
            list(pool.map(drop, [names[i :: self.clients] for i in range(self.clients)]))
        s3 = _Calls(self.settings, self.report, self.lock, "s3")
        for put in self.report.puts:
            s3("delete_object", Bucket=self.settings.lake.data_bucket, Key=put.key)
        self.people.clean_up(s3)


def small_disk(place: Path, mib: int) -> Path | None:
    """``place`` on a file system of its own of ``mib`` MiB (tmpfs), for the disk fault;
    None, having said why, where that cannot be (mounting needs root)."""
    if mib <= 0:
        return None
    if os.geteuid() != 0:
        print("no disk fault: mounting a small file system needs root", flush=True)
        return None
    mount = ["mount", "-t", "tmpfs", "-o", f"size={mib}m,mode=700", "lakeward-soak", str(place)]
    done = subprocess.run(mount, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        print(f"no disk fault: {' '.join(mount)}: {done.stderr.strip()}", flush=True)
        return None
    return place


def unmount(place: Path) -> str | None:
    """Unmount ``small_disk``'s file system; what went wrong, if anything. Files this
    process still has open there (its own database connections) do not count: the file
    system is detached at once and goes when they are closed."""
    holders = sorted(pid for pid in _holders(place) if pid != os.getpid())
    lazy = ["umount", "--lazy", str(place)]
    done = subprocess.run(lazy, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return f"{place} is still mounted: {done.stderr.strip()}"
    return f"processes {holders} held files on {place}" if holders else None


def _holders(place: Path) -> set[int]:
    """The processes with a file open under ``place``."""
    found = set()
    for fd_dir in Path("/proc").glob("[0-9]*/fd"):
        try:
            links = [os.readlink(fd) for fd in fd_dir.iterdir()]
        except OSError:
            continue  # gone, or not ours to read
        if any(link.startswith(f"{place}/") for link in links):
            found.add(int(fd_dir.parent.name))
    return found


def leftovers(settings: Settings, pids: set[int]) -> list[str]:
    """What the server left behind once stopped: processes among ``pids`` still alive,
    its port still answering, temporary directories named after any of ``pids``, writes'
    staging directories."""
    found = [f"process {pid} is still running" for pid in sorted(pids) if is_running(pid)]
    port = settings.server.port or 0
    if not port_is_free(settings.server.host, port):
        found.append(f"port {port} is still taken")
    staging = settings.data_dir / "query" / "staging"  # every write ended: none is left
    found += [f"{entry} is left behind" for entry in sorted(staging.glob("*"))]
    places = [Path(tempfile.gettempdir()), settings.data_dir / "query" / "spill"]
    for place in places:
        for entry in place.glob("*"):
            if entry.name.startswith(("lakeward-", "duckdb-")) and any(
                re.search(rf"-{pid}(-|$)", entry.name) for pid in pids
            ):
                found.append(f"{entry} is left behind")
    return found


def _rss_and_fds(pid: int) -> tuple[int, int] | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None
    rss = next(
        (int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS")), 0
    )
    return rss, fds


def summary(report: Report) -> list[str]:
    """The run's figures, as lines to print."""
    lines = [f"{report.seconds:.0f} s, {len(report.statements)} statements"]
    states = Counter((s.kind, s.state or "no answer") for s in report.statements)
    for (kind, state), n in sorted(states.items()):
        lines.append(f"  {kind:7} {state:10} {n}")
    rates = ", ".join(f"{k} {v:.1f}" for k, v in report.per_minute().items())
    lines.append(f"SUCCEEDED per minute: {rates}")
    if report.seconds >= 2 * WINDOW:
        lines.append(f"SUCCEEDED per minute, by {WINDOW / 60:g}-minute window (queries / writes):")
        windows = range(int(report.seconds // WINDOW))
        done = Counter(
            (int(s.ended // WINDOW), s.kind in ("ctas", "insert"))
            for s in report.statements
            if s.state == "SUCCEEDED" and s.ended is not None
        )
        lines.append(
            "  "
            + ", ".join(
                f"{done[w, False] / (WINDOW / 60):.0f} / {done[w, True] / (WINDOW / 60):.0f}"
                for w in windows
            )  # fmt: skip
        )
    acknowledged = sum(1 for p in report.puts if p.acknowledged)
    lines.append(f"S3 puts: {acknowledged} acknowledged of {len(report.puts)}")
    people = report.people
    acknowledged = sum(1 for o in people.objects if o.acknowledged)
    lines.append(f"people's objects: {acknowledged} acknowledged of {len(people.objects)}")
    ends = Counter(e.state or "not asked" for e in people.erasures)
    times = sorted(e.seconds for e in people.erasures if e.seconds is not None)
    took = ""
    if times:
        took = f"; request to end: median {times[len(times) // 2]:.1f} s, worst {times[-1]:.1f} s"
    lines.append(f"erasures: {dict(ends)}{took}")
    lines.append(
        f"IAM: {report.iam.users} users created, given a policy, deprived of it and deleted; "
        f"{report.iam.decisions} decisions checked"
    )
    lines.append(f"console: {report.console.renders} dashboards opened, every visual's data read")
    by_kind: dict[str, list[Fault]] = {}
    for fault in report.faults:
        by_kind.setdefault(fault.kind, []).append(fault)
    kills = [f.at for f in report.faults if f.kind in SERVER_KILLS]
    for kind, faults in sorted(by_kind.items()):
        backs = sorted(f.back_after for f in faults if f.back_after is not None)
        line = f"fault {kind}: {len(faults)}"
        if backs:
            line += f", answering again in: median {backs[len(backs) // 2]:.2f} s"
            line += f", worst {backs[-1]:.2f} s"
        if kind in SERVER_KILLS:
            alone = [f.back_after for f in faults if f.back_after is not None and not any(
                f.at - ALONE_AFTER <= at < f.at for at in kills)]  # fmt: skip
            if alone:
                line += f"; the {len(alone)} alone: worst {max(alone):.2f} s"
        never = sum(1 for f in faults if f.back_after is None and kind != "worker_pause")
        lines.append(line + (f", {never} never" if never else ""))
    if len(report.samples) > 2:
        first, last = report.samples[len(report.samples) // 4], report.samples[-1]
        lines.append(
            f"keeper, after warm-up -> at the end: RSS {first[1]} -> {last[1]} kB, "
            f"fds {first[2]} -> {last[2]}"
        )
    for name, verdict in report.invariants.items():
        lines.append(f"invariant: {name}: {verdict}")
    return lines
