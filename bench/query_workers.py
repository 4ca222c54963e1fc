"""Benchmark of the SQL service's server processes: 8 boto3 clients, workers=1 against N.

    .venv/bin/python bench/query_workers.py --data-dir DIR [--workers 1,2] [--clients 8]
        [--duration 20] [--kill] [--poll-waits 0,1000] [--json FILE]

On the running stack of ``--data-dir`` (``lakeward up``; its server is restarted for
each worker count and left with the stack's own count at the end), for each count
in ``--workers``:

1. restarts the server with ``server.workers`` set to it and waits until every
   worker serves;
2. runs ``--clients`` client processes (one boto3 client each, in processes of
   their own so that the clients' parsing is not capped by one GIL) for
   ``--duration`` s: each runs the small query (10 rows) end to end —
   StartQueryExecution, GetQueryExecution every 5 ms until done, GetQueryResults —
   as often as it can, with boto3's retries off;
3. reports queries/s, errors, latency p50/p90, which workers answered, and the
   server's CPU per query (supervisor and workers, from /proc).

With ``--poll-waits`` each count runs once per ``server.poll_wait_ms`` given (0: a
poll answers at once, as Athena's; the default lets a poll wait for its query's end).

With ``--kill`` the last count runs once more, and halfway through worker 1 is
killed with -9: the run reports the errors the clients saw, the time until the
supervisor put a new worker in its place and until that worker answered.

Then it prints the counts side by side with the ratio to the first.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import signal
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import percentile, say, tree_cpu  # noqa: E402

SMALL_QUERY = (
    "SELECT country, sum(confirmed) AS confirmed "
    "FROM demo_hive_metastore.default.covid_confirmed_cases "
    "WHERE date = DATE '2021-06-01' GROUP BY country ORDER BY confirmed DESC LIMIT 10"
)
DONE = ("SUCCEEDED", "FAILED", "CANCELLED")


@dataclass
class ClientRun:
    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    workers: dict[str, int] = field(default_factory=dict)


@dataclass
class Round:
    workers: int
    poll_wait_ms: int | None
    queries: int
    seconds: float
    errors: int
    p50_ms: float
    p90_ms: float
    server_cpu_s: float
    answered_by: int  # distinct worker processes that answered
    killed: int | None = None  # pid of the worker killed halfway (--kill)
    replaced_s: float | None = None  # kill -> the supervisor's new worker in its place
    serving_s: float | None = None  # kill -> the new worker answering a request

    @property
    def qps(self) -> float:
        return self.queries / self.seconds

    @property
    def cpu_ms_per_query(self) -> float:
        return 1000 * self.server_cpu_s / max(self.queries, 1)


def _client(args: tuple[dict[str, str], float, float]) -> dict[str, Any]:
    """One client process: the small query end to end until ``until`` (wall clock)."""
    import boto3
    from botocore.config import Config

    config, start_at, until = args
    client = boto3.client(
        "athena",
        endpoint_url=config["endpoint"],
        region_name=config["region"],
        aws_access_key_id=config["key"],
        aws_secret_access_key=config["secret"],
        config=Config(retries={"total_max_attempts": 1}, read_timeout=120),
    )
    run = ClientRun()
    while time.time() < start_at - 1:
        time.sleep(0.01)
    # The connection, made just before the clock starts: one idle for the server's
    # keep-alive timeout (5 s) may be closed as the first request goes out.
    client.list_work_groups()
    while time.time() < start_at:
        time.sleep(0.01)
    while time.time() < until:
        clock = time.perf_counter()
        try:
            started = client.start_query_execution(QueryString=SMALL_QUERY)
            execution_id = started["QueryExecutionId"]
            while True:
                status = client.get_query_execution(QueryExecutionId=execution_id)
                state = status["QueryExecution"]["Status"]["State"]
                if state in DONE:
                    break
                time.sleep(0.005)
            if state != "SUCCEEDED":
                raise RuntimeError(f"{state}: {status['QueryExecution']['Status']}")
            page = client.get_query_results(QueryExecutionId=execution_id)
            if len(page["ResultSet"]["Rows"]) != 11:
                raise RuntimeError(f"{len(page['ResultSet']['Rows'])} rows, not 1 + 10")
        except Exception as exc:
            run.errors.append(f"{type(exc).__name__}: {exc}"[:300])
            continue
        run.latencies.append(time.perf_counter() - clock)
        worker = page["ResponseMetadata"]["HTTPHeaders"].get("x-lakeward-worker", "?")
        run.workers[worker] = run.workers.get(worker, 0) + 1
    return asdict(run)


def restart_server(
    data_dir: Path, workers: int | None, poll_wait_ms: int | None = None
) -> tuple[Any, int]:
    """The stack's server, restarted with ``workers``; (settings, supervisor pid)."""
    from lakeward.config import load_settings
    from lakeward.http.supervisor import read_workers, worker_count
    from lakeward.stack import Stack, write_state

    settings = load_settings(data_dir=data_dir)
    settings = settings.model_copy(
        update={
            "server": settings.server.model_copy(
                update={"workers": workers, "poll_wait_ms": poll_wait_ms}
            )
        }
    )
    stack = Stack(settings)
    stack.server_process.stop()
    write_state(settings)
    stack.start_server()
    deadline = time.monotonic() + 180
    while not (
        len(read_workers(settings)) == worker_count(settings)
        and all(w["state"] == "running" for w in read_workers(settings))
    ):
        if time.monotonic() > deadline:
            raise SystemExit(f"the server's {workers} workers did not all start in 180 s")
        time.sleep(0.2)
    pid = stack.server_process.pid()
    assert pid is not None
    return settings, pid


def kill_one(settings: Any, delay: float, into: dict[str, Any]) -> None:
    """After ``delay`` s, kill -9 worker 1; time its replacement and its first answer."""
    import httpx

    from lakeward.http.supervisor import read_workers

    time.sleep(delay)
    victim = int(read_workers(settings)[0]["pid"])
    clock = time.perf_counter()
    os.kill(victim, signal.SIGKILL)
    into["killed"] = victim
    while int(read_workers(settings)[0]["pid"]) == victim:
        time.sleep(0.01)
    into["replaced_s"] = time.perf_counter() - clock
    new = str(read_workers(settings)[0]["pid"])
    url = f"http://{settings.server.host}:{settings.server.port}/health"
    while True:  # new connections until one lands on the new worker and it answers
        try:
            answer = httpx.get(url, headers={"Connection": "close"}, timeout=10)
        except httpx.HTTPError:
            continue
        if answer.headers.get("x-lakeward-worker") == new:
            into["serving_s"] = time.perf_counter() - clock
            return


def measure(
    data_dir: Path,
    workers: int,
    poll_wait_ms: int | None,
    clients: int,
    duration: float,
    kill: bool,
) -> Round:
    settings, supervisor = restart_server(data_dir, workers, poll_wait_ms)
    config = {
        "endpoint": f"http://{settings.server.host}:{settings.server.port}",
        "region": settings.api.region,
        "key": settings.api.access_key_id or "",
        "secret": settings.api.secret_access_key or "",
    }
    context = multiprocessing.get_context("spawn")
    with context.Pool(clients) as pool:
        # Warm-up: every client's first queries (imports, connections, the engines' caches).
        warm = time.time() + 3
        pool.map(_client, [(config, time.time(), warm)] * clients)
        start_at = time.time() + 5  # the clients' own start-up before the clock
        pending = pool.map_async(_client, [(config, start_at, start_at + duration)] * clients)
        while time.time() < start_at:
            time.sleep(0.01)
        cpu_before = tree_cpu(supervisor)
        killing: dict[str, Any] = {}
        killer = threading.Thread(target=kill_one, args=(settings, duration / 2, killing))
        if kill:
            killer.start()
        runs = [ClientRun(**r) for r in pending.get()]
        server_cpu = tree_cpu(supervisor) - cpu_before
        if kill:
            killer.join()
    latencies = [t for r in runs for t in r.latencies]
    answered = {w for r in runs for w in r.workers}
    errors = [e for r in runs for e in r.errors]
    for error in errors[:5]:
        say(f"    error: {error}")
    return Round(
        workers=workers,
        poll_wait_ms=poll_wait_ms,
        queries=len(latencies),
        seconds=duration,
        errors=len(errors),
        p50_ms=1000 * percentile(latencies, 50) if latencies else 0.0,
        p90_ms=1000 * percentile(latencies, 90) if latencies else 0.0,
        server_cpu_s=server_cpu,
        answered_by=len(answered),
        **killing,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--workers", default="1,2", help="worker counts, comma-separated")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument(
        "--kill", action="store_true", help="also: the last count again, a worker killed halfway"
    )
    parser.add_argument(
        "--poll-waits", default="", help="server.poll_wait_ms values, comma-separated"
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    from lakeward.config import load_settings

    kept = load_settings(data_dir=args.data_dir).server
    counts = [int(c) for c in args.workers.split(",")]
    waits: list[int | None] = [int(w) for w in args.poll_waits.split(",") if w] or [None]
    rounds = []
    plan = [(count, wait, False) for count in counts for wait in waits]
    plan += [(counts[-1], waits[-1], True)] if args.kill else []
    try:
        for count, wait, kill in plan:
            say(
                f"workers={count}, poll_wait_ms={wait}: {args.clients} boto3 client processes, "
                f"{args.duration:g} s" + (", worker 1 killed with -9 halfway" if kill else "")
            )
            result = measure(args.data_dir, count, wait, args.clients, args.duration, kill)
            say(
                f"  {result.qps:.1f} queries/s, {result.errors} errors, p50 {result.p50_ms:.0f} ms,"
                f" p90 {result.p90_ms:.0f} ms, server CPU {result.cpu_ms_per_query:.0f} ms per "
                f"query, answered by {result.answered_by} worker(s)"
            )
            if result.killed:
                say(
                    f"  killed pid {result.killed}: replaced after {result.replaced_s:.2f} s, "
                    f"the new worker answering after {result.serving_s:.2f} s"
                )
            rounds.append(result)
    finally:
        restart_server(args.data_dir, kept.workers, kept.poll_wait_ms)  # the stack as it was
    base = rounds[0]
    say()
    say("| workers | poll_wait_ms | queries/s | ratio | errors | p50 ms | p90 ms | CPU ms/query |")
    say("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rounds:
        label = f"{r.workers}{' (kill)' if r.killed else ''}"
        wait = "default" if r.poll_wait_ms is None else str(r.poll_wait_ms)
        say(
            f"| {label} | {wait} | {r.qps:.1f} | {r.qps / base.qps:.2f}x | {r.errors} | "
            f"{r.p50_ms:.0f} | {r.p90_ms:.0f} | {r.cpu_ms_per_query:.0f} |"
        )
    if args.json:
        args.json.write_text(json.dumps([{**asdict(r), "qps": r.qps} for r in rounds], indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
