"""Benchmark of the SQL service: the seed query through the Athena API, Spark and DuckDB.

    .venv/bin/python bench/query.py [--snapshot HEAD] [--data-dir DIR] [--runs 200]

In one run it

1. waits until no other benchmark runs (``bench/etl.py``; both would skew each other),
   then brings up a throw-away stack (``lakeward up`` in a temporary data dir, on
   ports the OS picks), or uses the running stack of ``--data-dir``. Before each
   phase it waits (up to ``--quiet-wait`` s) for the rest of the machine to be idle;
2. measures the DuckDB floor: the seed query on DuckDB in this process over the same
   Parquet files (``read_parquet`` of the table's location, as the metastore gives it),
   fetching every row as Arrow (and, for reference, with a new connection per query,
   and as Python tuples);
3. measures the seed query end to end through the Athena-compatible API with boto3
   (StartQueryExecution, GetQueryExecution every ``--poll-ms``, then every page of
   GetQueryResults): warm-up runs, then ``--runs`` runs in the primary (DuckDB)
   workgroup. Result reuse is not asked for, so every run executes. Each API call's
   client-side time is split into before the request leaves (validation,
   serialization, SigV4 signing), the HTTP round trip (the server's whole handling)
   and after (botocore parsing the JSON). Then the same with a raw client (requests
   signed as botocore signs them, answers read with ``json.loads``): the service
   without the SDK's parsing;
4. runs ``--clients`` threads, each with its own boto3 client, running the seed query
   end to end for ``--duration`` s: queries/s, errors, latency; then the same with
   raw clients;
5. profiles the service in this process (a ``QueryService`` and ``AccessControl``
   over the same stack, the Athena request handler called with signed requests, as
   the server calls it): every phase of a query timed by wrapping lakeward's
   functions (in this process only), printed as a tree in ms per query;
6. measures the seed query in a workgroup whose engine is Spark, created in the
   stack's state DB, which the server reads per request (it runs last: the Spark JVM
   it starts inside the server would otherwise share the machine with the rest);
7. prints the comparison table against the targets and, if it started the stack,
   stops it and deletes its data (unless ``--keep``).

API clients are made with retries off, so that an error the server answers is counted
rather than hidden by botocore retrying it. For every phase the CPU used by the
benchmark, the server, the metastore and the rest of the machine is printed (the
machine is shared; read the numbers with it). ``--snapshot REV`` measures lakeward/ as
committed at REV (exported to a temporary dir), not the working tree others may be
editing.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from _common import (  # noqa: E402 - beside this script
    TICK,
    Summary,
    free_port,
    machine_busy,
    ms,
    other_benchmarks,
    percentile,
    process_table,
    say,
    tree_ticks,
    wait_for_other_benchmarks,
)

if TYPE_CHECKING:
    from lakeward.config import Settings

# lakeward is imported inside functions only: with --snapshot this process re-executes
# itself on a snapshot of the code before importing any of it (a
# half-saved edit in the working tree must not break or skew the run).

SEED_WHERE = (
    "country = 'US' OR country = 'Italy' OR country = 'India' OR country = 'Brazil' "
    "OR country = 'Spain' OR country = 'United Kingdom'"
)
CATALOG, DATABASE, TABLE = "demo_hive_metastore", "default", "covid_confirmed_cases"
SEED_QUERY = f"SELECT * FROM {CATALOG}.{DATABASE}.{TABLE} WHERE {SEED_WHERE}"
SPARK_WORKGROUP = "spark"
# The JHU files as the test suite finds them: ../shared/data/jhu_csse beside the repository.
DEFAULT_SOURCE = str(Path(__file__).resolve().parents[2] / "shared" / "data" / "jhu_csse")
DONE = ("SUCCEEDED", "FAILED", "CANCELLED")

TARGET_API_P50 = 0.050  # s
TARGET_SPARK_RATIO = 10.0  # Spark-path p50 / API p50, at least
TARGET_FLOOR_GAP = 0.010  # s, API p50 minus DuckDB floor p50, at most
TARGET_QPS = 50.0  # with --clients clients, and no errors

# A pattern that matches the other benchmark's command line but not the pgrep
# (or a shell loop) that searches for it.
OTHER_BENCHMARKS = r"bench/[e]tl\.py"


@dataclass
class CpuUse:
    wall: float = 0.0
    cores: dict[str, float] = field(default_factory=dict)  # group -> cores used on average

    def __str__(self) -> str:
        return "cpu (cores): " + ", ".join(f"{k} {v:.2f}" for k, v in self.cores.items())


@contextmanager
def cpu_meter(groups: dict[str, list[int]]) -> Iterator[CpuUse]:
    """CPU use of each group of process trees, and of everything else, during the block."""
    use = CpuUse()
    busy0, table0 = machine_busy(), process_table()
    before = {name: tree_ticks(table0, pids) for name, pids in groups.items()}
    clock = time.perf_counter()
    yield use
    use.wall = time.perf_counter() - clock
    busy1, table1 = machine_busy(), process_table()
    ours = 0.0
    for name, pids in groups.items():
        after = tree_ticks(table1, pids)
        ticks = sum(t - before[name].get(pid, 0) for pid, t in after.items()) / TICK
        use.cores[name] = ticks / use.wall
        ours += ticks
    use.cores["rest of machine"] = max((busy1 - busy0) / TICK - ours, 0.0) / use.wall


# --- other benchmarks -------------------------------------------------------------------


QUIET_CORES = 0.3  # the rest of the machine counts as quiet below this


def wait_for_quiet(groups: dict[str, list[int]], limit: float) -> float:
    """Wait up to ``limit`` s until no other benchmark runs and the rest of the machine
    uses less than QUIET_CORES for 3 s; returns what it used last."""
    clock = time.monotonic()
    while True:
        with cpu_meter(groups) as use:
            time.sleep(3)
        rest = use.cores["rest of machine"]
        waited = time.monotonic() - clock
        quiet = rest < QUIET_CORES and not other_benchmarks(OTHER_BENCHMARKS)
        if quiet:
            if waited > 4:
                say(f"  (waited {waited:.0f} s for the rest of the machine to quiet down)")
            return rest
        if waited >= limit:
            say(
                f"  (the rest of the machine is still busy after {waited:.0f} s: "
                f"{rest:.2f} cores; measuring anyway)"
            )
            return rest


# --- the stack --------------------------------------------------------------------------


def lakeward_command(*args: str, env: dict[str, str] | None = None, log: Path) -> float:
    """Run ``lakeward ARGS``; its output goes to ``log``. Returns the wall time."""
    clock = time.perf_counter()
    with log.open("a") as out:
        done = subprocess.run(
            [sys.executable, "-m", "lakeward", *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            # Not the repository: "-m" would put it first on sys.path, ahead of a snapshot.
            cwd=log.parent,
            check=False,
        )
    if done.returncode != 0:
        tail = log.read_text().splitlines()[-30:]
        raise SystemExit(f"lakeward {' '.join(args)} failed:\n" + "\n".join(tail))
    return time.perf_counter() - clock


@dataclass
class StackUnderTest:
    data_dir: Path
    settings: Settings
    owned: bool  # started by this run: stop it and delete it at the end
    log: Path

    @property
    def endpoint(self) -> str:
        return f"http://{self.settings.server.host}:{self.settings.server.port}"

    def pids(self) -> dict[str, list[int]]:
        from lakeward.process import ManagedProcess

        run = self.data_dir / "run"
        server = ManagedProcess("server", run).pid()
        metastore = ManagedProcess("metastore-1", run).pid()
        return {
            "server": [server] if server else [],
            "metastore": [metastore] if metastore else [],
        }


def bring_up(source: str, work: Path) -> StackUnderTest:
    from lakeward.config import load_settings

    data_dir = work / "stack"
    taken: set[int] = set()
    env = dict(os.environ)
    env["LAKEWARD_METASTORE__PORT"] = str(free_port(taken))
    env["LAKEWARD_SERVER__PORT"] = str(free_port(taken))
    log = work / "lakeward.log"
    say(f"lakeward up --data-dir {data_dir} --covid-source {source} (log: {log})")
    wall = lakeward_command(
        "up", "--data-dir", str(data_dir), "--covid-source", source, env=env, log=log
    )
    say(f"  stack up in {wall:.1f} s")
    return StackUnderTest(data_dir, load_settings(data_dir=data_dir), True, log)


def attach(data_dir: Path, work: Path) -> StackUnderTest:
    from lakeward.config import load_settings

    settings = load_settings(data_dir=data_dir)
    if settings.server.port is None or settings.api.access_key_id is None:
        raise SystemExit(f"{data_dir} holds no stack that is up; start it with lakeward up")
    return StackUnderTest(data_dir, settings, False, work / "lakeward.log")


def table_files(settings: Settings) -> tuple[str, list[str]]:
    """The seed table's location (from the metastore) and its Parquet files."""
    from lakeward.metastore.client import MetastoreClient
    from lakeward.metastore.uris import metastore_uris
    from lakeward.storage.paths import lake_uri, local_path

    with MetastoreClient(metastore_uris(settings)) as client:
        location = client.table(DATABASE, TABLE).location
    root = local_path(lake_uri(settings, location))  # its public s3:// name, on this machine
    if root is None:
        raise SystemExit(f"{TABLE} is at {location}; the DuckDB floor reads local tables only")
    files = sorted(
        str(p)
        for p in root.rglob("*")
        if p.is_file()
        and not any(part.startswith(("_", ".")) for part in p.relative_to(root).parts)
    )
    return location, files


# --- the API, timed ---------------------------------------------------------------------


def make_client(settings: Settings, endpoint: str) -> Any:
    import boto3
    from botocore.config import Config

    return boto3.client(
        "athena",
        endpoint_url=endpoint,
        region_name=settings.api.region,
        aws_access_key_id=settings.api.access_key_id,
        aws_secret_access_key=settings.api.secret_access_key,
        config=Config(
            retries={"total_max_attempts": 1},
            connect_timeout=10,
            read_timeout=600,
        ),
    )


@dataclass
class CallTimes:
    calls: int = 0
    before: float = 0.0  # client: validation, serialization, signing
    wire: float = 0.0  # HTTP round trip: sending, the server's handling, reading the body
    after: float = 0.0  # client: botocore parsing the response


class TimedClient:
    """A boto3 Athena client whose every call's time is split at the HTTP request."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.times: dict[str, CallTimes] = defaultdict(CallTimes)
        self._sent = self._received = 0.0
        client.meta.events.register("before-send.athena", self._before_send)
        client.meta.events.register("before-parse.athena", self._before_parse)

    def _before_send(self, **_: Any) -> None:
        self._sent = time.perf_counter()

    def _before_parse(self, **_: Any) -> None:
        self._received = time.perf_counter()

    def call(self, operation: str, **kwargs: Any) -> Any:
        start = time.perf_counter()
        result = getattr(self.client, operation)(**kwargs)
        end = time.perf_counter()
        times = self.times[operation]
        times.calls += 1
        times.before += self._sent - start
        times.wire += self._received - self._sent
        times.after += end - self._received
        return result

    def reset(self) -> None:
        self.times.clear()


class RawApiError(Exception):
    """An error answer of the API to the raw client: its ``__type`` and message."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


_OPERATION_NAMES = {
    "start_query_execution": "StartQueryExecution",
    "get_query_execution": "GetQueryExecution",
    "get_query_results": "GetQueryResults",
}


class RawClient:
    """The same API calls without botocore: signed as botocore signs them, sent over
    one keep-alive connection, answers read with ``json.loads``. What the service
    and HTTP cost, without the SDK's response parsing."""

    def __init__(self, settings: Settings, endpoint: str) -> None:
        import urllib3
        from botocore.auth import SigV4Auth
        from botocore.credentials import Credentials

        parsed = urlparse(endpoint)
        self.url = endpoint.rstrip("/") + "/"
        self.pool = urllib3.HTTPConnectionPool(
            parsed.hostname, parsed.port, maxsize=1, timeout=urllib3.Timeout(10, 600)
        )
        self.signer = SigV4Auth(
            Credentials(settings.api.access_key_id, settings.api.secret_access_key),
            "athena",
            settings.api.region,
        )
        self.times: dict[str, CallTimes] = defaultdict(CallTimes)

    def call(self, operation: str, **payload: Any) -> Any:
        from botocore.awsrequest import AWSRequest

        start = time.perf_counter()
        name = _OPERATION_NAMES[operation]
        if name == "StartQueryExecution":
            payload.setdefault("ClientRequestToken", str(uuid.uuid4()))  # as botocore does
        body = json.dumps(payload).encode()
        request = AWSRequest(
            method="POST",
            url=self.url,
            data=body,
            headers={
                "Content-Type": "application/x-amz-json-1.1",
                "X-Amz-Target": f"AmazonAthena.{name}",
            },
        )
        self.signer.add_auth(request)
        sent = time.perf_counter()
        response = self.pool.urlopen(
            "POST", "/", body=body, headers=dict(request.headers.items()), retries=False
        )
        received = time.perf_counter()
        data = json.loads(response.data)
        end = time.perf_counter()
        times = self.times[operation]
        times.calls += 1
        times.before += sent - start
        times.wire += received - sent
        times.after += end - received
        if response.status != 200:
            raise RawApiError(str(data.get("__type")), str(data.get("Message")))
        return data

    def reset(self) -> None:
        self.times.clear()


Client = TimedClient | RawClient


class QueryFailedError(Exception):
    pass


@dataclass
class ApiRun:
    total: float  # start to last page
    to_done: float  # start to the poll that saw the final state
    first_page: float  # start to the first page of results
    paging: float  # every page of GetQueryResults
    polls: int
    pages: int
    rows: int
    statistics: dict[str, Any]


def run_seed(client: Client, workgroup: str | None, poll: float) -> ApiRun:
    """The seed query end to end: start, poll until done, page every result."""
    start = time.perf_counter()
    request: dict[str, Any] = {"QueryString": SEED_QUERY}
    if workgroup:
        request["WorkGroup"] = workgroup
    execution_id = client.call("start_query_execution", **request)["QueryExecutionId"]
    polls = 0
    while True:
        execution = client.call("get_query_execution", QueryExecutionId=execution_id)
        polls += 1
        status = execution["QueryExecution"]["Status"]
        if status["State"] in DONE:
            break
        time.sleep(poll)
    done = time.perf_counter()
    if status["State"] != "SUCCEEDED":
        raise QueryFailedError(f"{status['State']}: {status.get('StateChangeReason', '')}")
    rows = pages = 0
    token = None
    while True:
        paging: dict[str, Any] = {"QueryExecutionId": execution_id, "MaxResults": 1000}
        if token:
            paging["NextToken"] = token
        page = client.call("get_query_results", **paging)
        pages += 1
        if pages == 1:
            first_page = time.perf_counter()
        rows += len(page["ResultSet"]["Rows"])
        token = page.get("NextToken")
        if not token:
            break
    end = time.perf_counter()
    return ApiRun(
        total=end - start,
        to_done=done - start,
        first_page=first_page - start,
        paging=end - done,
        polls=polls,
        pages=pages,
        rows=rows - 1,  # the first row of a SELECT's results holds the column labels
        statistics=execution["QueryExecution"].get("Statistics", {}),
    )


@dataclass
class ApiResult:
    name: str
    latency: Summary
    to_done: Summary
    first_page: Summary
    paging: Summary
    polls_per_query: float
    pages_per_query: float
    rows: int
    reused: int  # runs whose result was reused (must be 0)
    server: dict[str, float]  # medians of the execution's statistics, ms
    client: dict[str, dict[str, float]]  # operation -> ms per query: before, wire, after
    cpu: dict[str, float]
    first: float | None = None  # the first run (Spark: includes starting the session)


def measure_api(
    name: str,
    client: Client,
    workgroup: str | None,
    runs: int,
    warmup: int,
    poll: float,
    groups: dict[str, list[int]],
    expected_rows: int | None,
) -> ApiResult:
    first = None
    for i in range(warmup):
        clock = time.perf_counter()
        run = run_seed(client, workgroup, poll)
        if i == 0:
            first = time.perf_counter() - clock
            say(f"  first run {ms(first)} ({run.rows} rows, {run.pages} pages)")
    client.reset()
    measured: list[ApiRun] = []
    with cpu_meter(groups) as cpu:
        for _ in range(runs):
            measured.append(run_seed(client, workgroup, poll))
    wrong = [r.rows for r in measured if expected_rows is not None and r.rows != expected_rows]
    if wrong:
        raise SystemExit(f"{name}: {len(wrong)} runs returned {wrong[0]} rows, not {expected_rows}")
    stats_keys = {
        "TotalExecutionTimeInMillis": "total",
        "QueryQueueTimeInMillis": "queue",
        "QueryPlanningTimeInMillis": "planning (incl. engine up to first batch)",
        "EngineExecutionTimeInMillis": "engine (incl. result write)",
        "ServiceProcessingTimeInMillis": "service processing",
    }
    server = {
        label: percentile([float(r.statistics.get(key, 0)) for r in measured], 50)
        for key, label in stats_keys.items()
    }
    reused = sum(
        1
        for r in measured
        if r.statistics.get("ResultReuseInformation", {}).get("ReusedPreviousResult")
    )
    per_query = {
        operation: {
            "calls": t.calls / runs,
            "client before send": t.before * 1000 / runs,
            "HTTP round trip": t.wire * 1000 / runs,
            "client parse": t.after * 1000 / runs,
        }
        for operation, t in client.times.items()
    }
    return ApiResult(
        name=name,
        latency=Summary.of([r.total for r in measured]),
        to_done=Summary.of([r.to_done for r in measured]),
        first_page=Summary.of([r.first_page for r in measured]),
        paging=Summary.of([r.paging for r in measured]),
        polls_per_query=sum(r.polls for r in measured) / runs,
        pages_per_query=sum(r.pages for r in measured) / runs,
        rows=measured[0].rows,
        reused=reused,
        server=server,
        client=per_query,
        cpu=cpu.cores,
        first=first,
    )


def print_api(result: ApiResult) -> None:
    say(f"  end to end      {result.latency.line()}")
    say(f"  start -> done   {result.to_done.line()}")
    say(f"  first page      {result.first_page.line()}")
    say(f"  paging          {result.paging.line()}")
    say(
        f"  {result.rows} rows, {result.pages_per_query:.1f} pages and "
        f"{result.polls_per_query:.1f} GetQueryExecution polls per query; "
        f"results reused: {result.reused}"
    )
    say(
        "  server statistics (median ms): "
        + ", ".join(f"{k} {v:.0f}" for k, v in result.server.items())
    )
    say("  client-side split, ms per query: calls, before send / HTTP round trip / parse")
    for operation, t in result.client.items():
        say(
            f"    {operation:<24} {t['calls']:5.1f} calls  {t['client before send']:7.2f}"
            f" / {t['HTTP round trip']:7.2f} / {t['client parse']:7.2f}"
        )
    say(f"  {CpuUse(cores=result.cpu)}")


# --- the DuckDB floor -------------------------------------------------------------------


@dataclass
class FloorResult:
    name: str
    latency: Summary
    rows: int
    cpu: dict[str, float]


def measure_floor(
    files: list[str], runs: int, warmup: int, groups: dict[str, list[int]]
) -> list[FloorResult]:
    """The seed query straight on DuckDB over the table's files, three ways."""
    import duckdb

    listed = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
    sql = f"SELECT * FROM read_parquet([{listed}]) WHERE {SEED_WHERE}"

    def arrow(con: duckdb.DuckDBPyConnection | None) -> int:
        assert con is not None
        return con.sql(sql).to_arrow_table().num_rows

    def fresh(_: duckdb.DuckDBPyConnection | None) -> int:
        with duckdb.connect(":memory:") as con:
            return con.sql(sql).to_arrow_table().num_rows

    def tuples(con: duckdb.DuckDBPyConnection | None) -> int:
        assert con is not None
        return len(con.sql(sql).fetchall())

    variants: list[tuple[str, Callable[[duckdb.DuckDBPyConnection | None], int]]] = [
        ("DuckDB floor (one connection, Arrow)", arrow),
        ("DuckDB, new connection per query, Arrow", fresh),
        ("DuckDB, one connection, Python tuples", tuples),
    ]
    results = []
    con = duckdb.connect(":memory:")
    for name, run in variants:
        for _ in range(warmup):
            run(con)
        times = []
        with cpu_meter(groups) as cpu:
            for _ in range(runs):
                clock = time.perf_counter()
                rows = run(con)
                times.append(time.perf_counter() - clock)
        results.append(FloorResult(name, Summary.of(times), rows, cpu.cores))
    con.close()
    return results


# --- concurrency ------------------------------------------------------------------------


@dataclass
class ConcurrencyResult:
    kind: str
    clients: int
    duration: float
    queries: int
    qps: float
    errors: dict[str, int]
    latency: Summary
    cpu: dict[str, float]


def measure_concurrency(
    stack: StackUnderTest,
    kind: str,
    clients: int,
    duration: float,
    poll: float,
    groups: dict[str, list[int]],
    expected_rows: int,
) -> ConcurrencyResult:
    timed: list[Client] = [
        TimedClient(make_client(stack.settings, stack.endpoint))
        if kind == "boto3"
        else RawClient(stack.settings, stack.endpoint)
        for _ in range(clients)
    ]
    for client in timed:  # each opens its connection and loads its models, uncounted
        run_seed(client, None, poll)
    latencies: list[list[float]] = [[] for _ in range(clients)]
    errors: list[Counter[str]] = [Counter() for _ in range(clients)]
    ends = [0.0] * clients
    barrier = threading.Barrier(clients + 1)
    deadline = 0.0

    def worker(index: int) -> None:
        from botocore.exceptions import ClientError

        barrier.wait()
        while time.perf_counter() < deadline:
            clock = time.perf_counter()
            try:
                run = run_seed(timed[index], None, poll)
            except ClientError as exc:
                error = exc.response.get("Error", {})
                errors[index][f"{error.get('Code')}: {error.get('Message', '')[:80]}"] += 1
                continue
            except (QueryFailedError, RawApiError) as exc:
                errors[index][str(exc)[:100]] += 1
                continue
            except Exception as exc:  # noqa: BLE001 - counted and shown, never hidden
                errors[index][f"{type(exc).__name__}: {str(exc)[:80]}"] += 1
                continue
            if run.rows != expected_rows:
                errors[index][f"{run.rows} rows instead of {expected_rows}"] += 1
                continue
            latencies[index].append(time.perf_counter() - clock)
        ends[index] = time.perf_counter()

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(clients)]
    for thread in threads:
        thread.start()
    with cpu_meter(groups) as cpu:
        start = time.perf_counter()
        deadline = start + duration
        barrier.wait()
        for thread in threads:
            thread.join()
    elapsed = max(ends) - start
    every = [x for per in latencies for x in per]
    total_errors: Counter[str] = Counter()
    for counter in errors:
        total_errors.update(counter)
    return ConcurrencyResult(
        kind=kind,
        clients=clients,
        duration=elapsed,
        queries=len(every),
        qps=len(every) / elapsed,
        errors=dict(total_errors),
        latency=Summary.of(every),
        cpu=cpu.cores,
    )


# --- the in-process profile -------------------------------------------------------------


class Phases:
    """Wall time of wrapped functions, by their chain of wrapped callers (per thread)."""

    def __init__(self) -> None:
        self.seconds: dict[tuple[str, ...], float] = defaultdict(float)
        self.calls: dict[tuple[str, ...], int] = defaultdict(int)
        self._local = threading.local()
        self._lock = threading.Lock()
        self._undo: list[tuple[Any, str, Any]] = []

    def _stack(self) -> list[str]:
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack

    @contextmanager
    def timed(self, label: str) -> Iterator[None]:
        stack = self._stack()
        stack.append(label)
        path = tuple(stack)
        clock = time.perf_counter()
        try:
            yield
        finally:
            elapsed = time.perf_counter() - clock
            stack.pop()
            with self._lock:
                self.seconds[path] += elapsed
                self.calls[path] += 1

    def wrap(self, owner: Any, name: str, label: str) -> None:
        """Time every call of ``owner.name`` (a dict entry, a module's or a class's function)."""
        space = owner if isinstance(owner, dict) else vars(owner)
        if name not in space:  # the code moved on: say so, profile the rest
            say(f"  (profile: {getattr(owner, '__name__', 'a table')}.{name} not found; skipped)")
            return
        original = space[name]

        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            with self.timed(label):
                return original(*args, **kwargs)

        self._set(owner, name, timed)
        self._undo.append((owner, name, original))

    @staticmethod
    def _set(owner: Any, name: str, value: Any) -> None:
        if isinstance(owner, dict):
            owner[name] = value
        else:
            setattr(owner, name, value)

    def restore(self) -> None:
        while self._undo:
            owner, name, original = self._undo.pop()
            self._set(owner, name, original)

    def reset(self) -> None:
        with self._lock:
            self.seconds.clear()
            self.calls.clear()


def instrument(phases: Phases) -> None:
    """Wrap the functions a query goes through, in this process only."""
    from lakeward.access.audit import AuditLog
    from lakeward.access.control import AccessControl
    from lakeward.http import athena
    from lakeward.http.athena import shapes
    from lakeward.query import pages, planner, results, service
    from lakeward.query.engines import duckdb as engine
    from lakeward.query.engines.duckdb import pool
    from lakeward.query.store import Store
    from lakeward.storage import base, local

    wraps: list[tuple[Any, str, str]] = [
        (service.QueryService, "_execute", "worker thread: the query's execution"),
        (planner.Planner, "plan", "plan: the tables (metastore, cached), SQL for the engine"),
        (service, "parse_statement", "parse and check the SQL (sqlglot)"),
        (service, "check_translatable", "check the engine can run it (kept per text)"),
        (AccessControl, "authorize", "authorize (decide, then append to the audit log)"),
        (AccessControl, "secret_for", "look up the access key's secret"),
        (AccessControl, "decide", "policy decision"),
        (AuditLog, "append", "audit log: append and commit"),
        (Store, "workgroups", "state DB: read workgroups"),
        (Store, "catalogs", "state DB: read catalogs"),
        (Store, "add_execution", "state DB: insert execution"),
        (Store, "save_execution", "state DB: update execution"),
        (Store, "execution", "state DB: read execution"),
        (engine.DuckDbEngine, "execute", "DuckDB engine.execute (until the first batch)"),
        (engine.DuckDbEngine, "_open", "new DuckDB connection"),
        (engine.DuckDbEngine, "_source", "list the table's files"),
        (pool, "lock_down", "lock the connection down (SETs)"),
        (engine, "_checked_statement", "check the statement (extract_statements)"),
        (engine.DuckDbEngine, "_create_view", "create the view (DESCRIBE of read_parquet)"),
        (engine, "bytes_scanned", "bytes scanned (EXPLAIN FORMAT json, partitions)"),
        (engine, "_next_batch", "DuckDB: run and fetch Arrow batches"),
        (engine.DuckDbEngine, "_close", "close the connection, remove its spill dir"),
        (results, "write_results", "write the result to the lake (CSV + metadata)"),
        (results, "_csv_lines", "CSV lines (Arrow compute)"),
        (results, "column_texts", "values to text (Arrow compute)"),
        (pages, "row_fragments", "rows as GetQueryResults JSON (Arrow compute)"),
        (pool.ConnectionPool, "take", "a pooled DuckDB connection, or a new one"),
        (pool.ConnectionPool, "give", "clean the connection and pool it"),
        (shapes, "query_results", "GetQueryResults answer around the stored rows"),
        (local.LocalStorage, "_put", "storage put (temp file, digests, fsync, rename)"),
        (base.Digests, "update", "md5 + sha256 of the bytes"),
        (local, "_sync_directory", "fsync the directory"),
        (results, "read_page", "read a page (result cache)"),
        (athena, "verify", "SigV4 verify"),
        (athena.OPERATIONS, "StartQueryExecution", "handler StartQueryExecution"),
        (athena.OPERATIONS, "GetQueryExecution", "handler GetQueryExecution"),
        (athena.OPERATIONS, "GetQueryResults", "handler GetQueryResults"),
        (shapes, "query_execution", "QueryExecution to Athena's shape"),
        (athena, "_respond", "JSON-encode the response"),
    ]
    for owner, name, label in wraps:
        phases.wrap(owner, name, label)


class InProcessApi:
    """The Athena request handler over a QueryService in this process, with signed requests."""

    def __init__(self, settings: Settings, endpoint: str, phases: Phases) -> None:
        from botocore.credentials import Credentials
        from botocore.parsers import create_parser

        from lakeward.access.control import AccessControl
        from lakeward.http import athena
        from lakeward.http.sigv4 import ReplayGuard
        from lakeward.query.service import QueryService

        # As create_app wires them: the access control authenticates the keys (SigV4)
        # and decides (and audits) every call the service makes.
        self.athena = athena
        self.access = AccessControl(settings)
        self.service = QueryService(settings, access=self.access)
        self.guard = ReplayGuard()
        self.handle_takes_request_id = "request_id" in inspect.signature(athena._handle).parameters
        self.endpoint = endpoint
        self.host = urlparse(endpoint).netloc
        self.region = settings.api.region
        self.credentials = Credentials(settings.api.access_key_id, settings.api.secret_access_key)
        self.model = make_client(settings, endpoint).meta.service_model
        self.parser = create_parser("json")
        self.phases = phases

    def call(self, operation: str, payload: dict[str, Any]) -> dict[str, Any]:
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        phases = self.phases
        with phases.timed("client: serialize and SigV4-sign the request"):
            body = json.dumps(payload).encode()
            request = AWSRequest(
                method="POST",
                url=self.endpoint + "/",
                data=body,
                headers={
                    "Content-Type": "application/x-amz-json-1.1",
                    "X-Amz-Target": f"AmazonAthena.{operation}",
                },
            )
            SigV4Auth(self.credentials, "athena", self.region).add_auth(request)
            headers = {k.lower(): v for k, v in request.headers.items()}
            headers["host"] = self.host
        with phases.timed(f"server: {operation} request"):
            extra = (str(uuid.uuid4()),) if self.handle_takes_request_id else ()
            result = self.athena._handle(
                self.service, self.access, self.guard, headers, "/", "", body, *extra
            )
            response = self.athena._respond(200, result, "bench")
        with phases.timed("client: botocore parses the response"):
            shape = self.model.operation_model(operation).output_shape
            parsed: dict[str, Any] = self.parser.parse(
                {"body": response.body, "headers": {}, "status_code": 200}, shape
            )
        return parsed

    def run_seed(self, poll: float) -> int:
        started = self.call(
            "StartQueryExecution",
            {"QueryString": SEED_QUERY, "ClientRequestToken": str(uuid.uuid4())},
        )
        execution_id = started["QueryExecutionId"]
        while True:
            execution = self.call("GetQueryExecution", {"QueryExecutionId": execution_id})
            state = execution["QueryExecution"]["Status"]["State"]
            if state in DONE:
                break
            time.sleep(poll)
        if state != "SUCCEEDED":
            raise QueryFailedError(str(execution["QueryExecution"]["Status"]))
        rows, token = 0, None
        while True:
            request: dict[str, Any] = {"QueryExecutionId": execution_id, "MaxResults": 1000}
            if token:
                request["NextToken"] = token
            page = self.call("GetQueryResults", request)
            rows += len(page["ResultSet"]["Rows"])
            token = page.get("NextToken")
            if not token:
                return rows - 1

    def close(self) -> None:
        self.service.close()


@dataclass
class ProfileLine:
    path: list[str]
    ms_per_query: float
    calls_per_query: float
    self_ms: float  # less the wrapped calls inside it


@dataclass
class ProfileResult:
    runs: int
    wall: Summary  # end to end, in process (no HTTP transport)
    lines: list[ProfileLine]


def measure_profile(api: InProcessApi, runs: int, warmup: int, poll: float) -> ProfileResult:
    phases = api.phases
    for _ in range(warmup):
        api.run_seed(poll)
    instrument(phases)
    try:
        api.run_seed(poll)  # once with the wrappers in place, uncounted
        phases.reset()
        walls = []
        for _ in range(runs):
            clock = time.perf_counter()
            api.run_seed(poll)
            walls.append(time.perf_counter() - clock)
    finally:
        phases.restore()
    children: dict[tuple[str, ...], float] = defaultdict(float)
    for path, seconds in phases.seconds.items():
        if len(path) > 1:
            children[path[:-1]] += seconds
    lines = [
        ProfileLine(
            list(path),
            seconds * 1000 / runs,
            phases.calls[path] / runs,
            (seconds - children.get(path, 0.0)) * 1000 / runs,
        )
        for path, seconds in phases.seconds.items()
    ]
    # Depth-first, each level by time spent, largest first.
    totals = {tuple(line.path): line.ms_per_query for line in lines}

    def order(line: ProfileLine) -> list[float]:
        path = tuple(line.path)
        return [-totals.get(path[: i + 1], 0.0) for i in range(len(path))]

    lines.sort(key=lambda line: (order(line), line.path))
    return ProfileResult(runs, Summary.of(walls), lines)


def print_profile(profile: ProfileResult) -> None:
    say(f"  in-process end to end (no HTTP transport): {profile.wall.line()}")
    say("  ms per query (calls per query), inclusive; [self] = less the phases listed under it")
    for line in profile.lines:
        indent = "  " * (len(line.path) - 1)
        own = f"  [self {line.self_ms:.2f}]" if line.self_ms < line.ms_per_query - 0.005 else ""
        say(
            f"    {indent}{line.path[-1]:<{62 - len(indent)}} {line.ms_per_query:8.2f}"
            f" ({line.calls_per_query:5.1f}){own}"
        )


# --- the report -------------------------------------------------------------------------


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def report(
    api: ApiResult,
    raw: ApiResult | None,
    floors: list[FloorResult],
    concurrency: list[ConcurrencyResult],
    spark: ApiResult | str | None,
) -> list[str]:
    floor = floors[0]
    lines = [
        "| measurement | runs | p50 | p90 | p99 | mean |",
        "|---|---:|---:|---:|---:|---:|",
    ]

    def row(name: str, s: Summary) -> str:
        return f"| {name} | {s.n} | {ms(s.p50)} | {ms(s.p90)} | {ms(s.p99)} | {ms(s.mean)} |"

    lines.append(row("API (boto3), DuckDB workgroup, end to end", api.latency))
    lines.append(row("- start to SUCCEEDED seen", api.to_done))
    lines.append(row("- start to first page", api.first_page))
    lines.append(row(f"- paging ({api.pages_per_query:.0f} pages)", api.paging))
    if raw is not None:
        lines.append(row("API (raw HTTP, json.loads), DuckDB workgroup", raw.latency))
    if isinstance(spark, ApiResult):
        lines.append(row("API (boto3), Spark workgroup, end to end", spark.latency))
    for f in floors:
        lines.append(row(f.name, f.latency))
    for c in concurrency:
        lines.append(row(f"API, {c.clients} concurrent {c.kind} clients", c.latency))
    lines.append("")
    lines.append("| ratio / target | value | target | |")
    lines.append("|---|---:|---:|---|")
    p50 = api.latency.p50
    lines.append(
        f"| API p50 | {ms(p50)} | <= {ms(TARGET_API_P50)} | {verdict(p50 <= TARGET_API_P50)} |"
    )
    gap = p50 - floor.latency.p50
    lines.append(
        f"| API p50 / DuckDB floor p50 | {p50 / floor.latency.p50:.1f}x (+{ms(gap)}) "
        f"| <= +{ms(TARGET_FLOOR_GAP)} | {verdict(gap <= TARGET_FLOOR_GAP)} |"
    )
    if isinstance(spark, ApiResult):
        ratio = spark.latency.p50 / p50
        lines.append(
            f"| Spark-path p50 / API p50 | {ratio:.2f}x | >= {TARGET_SPARK_RATIO:.0f}x "
            f"| {verdict(ratio >= TARGET_SPARK_RATIO)} |"
        )
    else:
        lines.append(f"| Spark-path p50 / API p50 | {spark or 'not measured'} | >= 10x | |")
    for c in concurrency:
        errors = sum(c.errors.values())
        ok = c.qps >= TARGET_QPS and errors == 0
        lines.append(
            f"| {c.clients} {c.kind} clients: queries/s, errors | {c.qps:.1f}/s, "
            f"{errors} errors | >= {TARGET_QPS:.0f}/s, 0 errors | {verdict(ok)} |"
        )
    parse = api.client.get("get_query_results", {}).get("client parse", 0.0)
    lines.append("")
    lines.append(
        f"botocore parsing the {api.pages_per_query:.0f} pages alone: {parse:.0f} ms per query "
        f"(client CPU, mean), {parse / max(api.latency.mean * 1000, 1e-9):.0%} of the mean."
    )
    return lines


def machine() -> str:
    try:
        model = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
    except (OSError, StopIteration):
        model = platform.processor() or "unknown CPU"
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{os.cpu_count()} cores ({model}), {memory:.0f} GiB, Python {platform.python_version()}"


def lakeward_version() -> str:
    """The code measured: the snapshot's commit, or the working tree's and whether it has
    uncommitted changes under lakeward/."""
    import lakeward

    snapshot = os.environ.get(SNAPSHOT_ENV)
    repo = Path(__file__).resolve().parent.parent
    commit = snapshot.split()[0] if snapshot else "HEAD"
    try:
        done = subprocess.run(
            ["git", "-C", str(repo), "log", "-1", "--format=%h %s", commit],
            capture_output=True,
            text=True,
            check=True,
        )
        dirty = subprocess.run(
            ["git", "-C", str(repo), "status", "--porcelain", "--", "lakeward"],
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return f"unknown ({Path(lakeward.__file__).parent})"
    described = done.stdout.strip()[:80]
    if snapshot:
        return f"snapshot of {described} ({Path(lakeward.__file__).parent})"
    changed = " + uncommitted changes under lakeward/" if dirty.stdout.strip() else ""
    return f"working tree at {described}{changed}"


SNAPSHOT_ENV = "LAKEWARD_BENCH_SNAPSHOT"  # "<commit> <dir>" in the re-executed process


def run_on_snapshot(revision: str) -> None:
    """Export lakeward/ at ``revision`` and re-execute this script with it first on the path."""
    from _query_side import export

    commit, target = export(revision, Path(__file__).resolve().parent.parent)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(target), env.get("PYTHONPATH")) if p)
    env[SNAPSHOT_ENV] = f"{commit} {target}"
    say(f"running on a snapshot of {commit[:12]} in {target}")
    script = str(Path(__file__).resolve())
    os.execve(sys.executable, [sys.executable, script, *sys.argv[1:]], env)


# --- main -------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, help="use this running stack, not a new one")
    parser.add_argument("--covid-source", default=DEFAULT_SOURCE)
    parser.add_argument("--runs", type=int, default=200, help="API and floor runs")
    parser.add_argument("--raw-runs", type=int, default=50, help="API runs without botocore")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--spark-runs", type=int, default=20)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--duration", type=float, default=20.0, help="s, concurrency phase")
    parser.add_argument("--profile-runs", type=int, default=30)
    parser.add_argument("--poll-ms", type=float, default=5.0)
    parser.add_argument(
        "--skip", default="", help="comma list of: raw,spark,concurrency,raw-concurrency,profile"
    )
    parser.add_argument("--wait-limit", type=float, default=2400.0, help="s to wait for others")
    parser.add_argument(
        "--quiet-wait", type=float, default=300.0, help="s to wait for a quiet machine per phase"
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--keep", action="store_true", help="leave the stack up")
    parser.add_argument(
        "--snapshot",
        metavar="REV",
        help="measure lakeward/ as committed at REV (e.g. HEAD), not the working tree; "
        "with --side-by-side: the previous code, run beside the working tree",
    )
    parser.add_argument(
        "--side-by-side",
        action="store_true",
        help="small, seed and analytic queries on the working tree's server and on "
        "--snapshot's, beside DuckDB alone, in one run (bench/_query_side.py)",
    )
    parser.add_argument("--analytic-runs", type=int, default=5, help="with --side-by-side")
    parser.add_argument(
        "--history",
        type=int,
        default=0,
        help="with --side-by-side: finished executions put in each server's state database "
        "first (a stack that has served for a while)",
    )
    args = parser.parse_args(argv)
    if args.side_by_side:
        return side_by_side(args)
    if args.snapshot and SNAPSHOT_ENV not in os.environ:
        run_on_snapshot(args.snapshot)  # does not return
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    # A section asked for zero runs is skipped: it has no figures to report.
    runs_of = {"raw": args.raw_runs, "spark": args.spark_runs, "profile": args.profile_runs}
    skip |= {section for section, runs in runs_of.items() if runs <= 0}
    if args.runs <= 0:
        raise SystemExit("--runs must be at least 1: the boto3 runs are every comparison's base")
    poll = args.poll_ms / 1000

    say(f"machine: {machine()}")
    say(f"lakeward: {lakeward_version()}")
    wait_for_other_benchmarks(OTHER_BENCHMARKS, args.wait_limit)
    work = Path(tempfile.mkdtemp(prefix="lakeward-bench-query-"))
    stack: StackUnderTest | None = None
    figures: dict[str, Any] = {"machine": machine(), "lakeward": lakeward_version()}
    try:
        stack = attach(args.data_dir, work) if args.data_dir else bring_up(args.covid_source, work)
        pids = stack.pids()
        groups = {"bench": [os.getpid()], **pids}
        say(f"stack: {stack.endpoint}, data dir {stack.data_dir}")
        location, files = table_files(stack.settings)
        say(f"{TABLE}: {location} ({len(files)} Parquet files)")

        def quiet() -> None:
            wait_for_quiet(groups, args.quiet_wait)

        # An in-process service over the stack's state: the Spark workgroup is written
        # to the state DB the server reads, and the profile runs on it.
        phases = Phases()
        inproc = InProcessApi(stack.settings, stack.endpoint, phases)
        from lakeward.query.model import WorkGroup

        inproc.service.put_work_group(WorkGroup(name=SPARK_WORKGROUP, engine="spark"))
        client = TimedClient(make_client(stack.settings, stack.endpoint))
        seen = client.call("get_work_group", WorkGroup=SPARK_WORKGROUP)["WorkGroup"]
        engine = seen["Configuration"]["EngineVersion"]["EffectiveEngineVersion"]
        say(f"workgroup {SPARK_WORKGROUP} as the server sees it: engine {engine}")
        if engine != "spark":
            raise SystemExit("the server does not see the Spark workgroup")

        say("\n== 2. DuckDB floor (in this process, same Parquet files)")
        quiet()
        floors = measure_floor(files, args.runs, args.warmup, groups)
        for f in floors:
            say(f"  {f.name:<42} {f.latency.line()}  [{f.rows} rows]")
        say(f"  {CpuUse(cores=floors[0].cpu)}")
        expected = floors[0].rows

        say(f"\n== 3. API (boto3), primary (DuckDB) workgroup, {args.runs} runs")
        say(f"  poll every {args.poll_ms:g} ms, result reuse off")
        quiet()
        api = measure_api("API", client, None, args.runs, args.warmup, poll, groups, expected)
        print_api(api)

        raw = None
        if "raw" not in skip:
            say(
                f"\n== 3b. API without botocore (raw signed HTTP, json.loads), {args.raw_runs} runs"
            )
            quiet()
            raw_client = RawClient(stack.settings, stack.endpoint)
            raw = measure_api(
                "raw", raw_client, None, args.raw_runs, args.warmup, poll, groups, expected
            )
            print_api(raw)

        concurrency = []
        for kind in ("boto3", "raw"):
            if ("concurrency" if kind == "boto3" else "raw-concurrency") in skip:
                continue
            say(f"\n== 4. {args.clients} concurrent {kind} clients for {args.duration:.0f} s")
            quiet()
            result = measure_concurrency(
                stack, kind, args.clients, args.duration, poll, groups, expected
            )
            concurrency.append(result)
            say(
                f"  {result.queries} queries in {result.duration:.1f} s: "
                f"{result.qps:.2f} queries/s, {sum(result.errors.values())} errors"
            )
            for error, count in result.errors.items():
                say(f"    {count} x {error}")
            say(f"  latency {result.latency.line()}")
            say(f"  {CpuUse(cores=result.cpu)}")

        profile = None
        if "profile" not in skip:
            say(f"\n== 5. profile, in this process, {args.profile_runs} runs")
            quiet()
            with cpu_meter(groups) as cpu:
                profile = measure_profile(inproc, args.profile_runs, args.warmup, poll)
            print_profile(profile)
            say(f"  {cpu}")
        inproc.close()

        spark: ApiResult | str | None = None
        if "spark" not in skip:
            say(f"\n== 6. API (boto3), Spark workgroup, {args.spark_runs} runs")
            quiet()
            try:
                spark = measure_api(
                    "Spark", client, SPARK_WORKGROUP, args.spark_runs, 3, poll, groups, expected
                )
                print_api(spark)
            except QueryFailedError as exc:
                spark = f"failed: {exc}"
                say(f"  {spark}")

        if other_benchmarks(OTHER_BENCHMARKS):
            say("\nWARNING: another benchmark started during this run; the figures are skewed")
        say("\n== comparison")
        table = report(api, raw, floors, concurrency, spark)
        for line in table:
            say(line)
        figures |= {
            "api": asdict(api),
            "raw": asdict(raw) if raw else None,
            "floors": [asdict(f) for f in floors],
            "concurrency": [asdict(c) for c in concurrency],
            "profile": asdict(profile) if profile else None,
            "spark": asdict(spark) if isinstance(spark, ApiResult) else spark,
            "table": table,
        }
        if args.json:
            args.json.write_text(json.dumps(figures, indent=2, default=str))
            say(f"\nfigures written to {args.json}")
    finally:
        if stack is not None and stack.owned and not args.keep:
            say("\nlakeward down")
            try:
                lakeward_command("down", "--data-dir", str(stack.data_dir), log=stack.log)
            except SystemExit as exc:
                say(str(exc))
        if stack is not None and stack.owned and args.keep:
            say(f"\nstack kept: lakeward down --data-dir {stack.data_dir}")
        else:
            shutil.rmtree(work, ignore_errors=True)
        snapshot = os.environ.get(SNAPSHOT_ENV)
        if snapshot and not (stack is not None and stack.owned and args.keep):
            shutil.rmtree(snapshot.split(maxsplit=1)[1], ignore_errors=True)
    return 0


def side_by_side(args: argparse.Namespace) -> int:
    """The working tree's server and --snapshot's side by side (bench/_query_side.py)."""
    import _query_side

    if not args.snapshot:
        raise SystemExit("--side-by-side needs --snapshot REV: the previous code to compare with")
    say(f"machine: {machine()}")
    say(f"lakeward: {lakeward_version()}")
    work = Path(tempfile.mkdtemp(prefix="lakeward-bench-side-"))
    stack = attach(args.data_dir, work) if args.data_dir else bring_up(args.covid_source, work)
    try:
        figures = _query_side.side_by_side(args, stack, work)
        if args.json:
            args.json.write_text(json.dumps(figures, indent=2, default=str))
    finally:
        if stack.owned and not args.keep:
            lakeward_command("down", "--data-dir", str(stack.data_dir), log=stack.log)
            shutil.rmtree(work, ignore_errors=True)
        elif stack.owned:
            say(f"\nstack kept: lakeward down --data-dir {stack.data_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
