"""The SQL service's figures beside DuckDB alone and beside a previous revision, in one run.

    .venv/bin/python bench/query.py --side-by-side --snapshot REV [--data-dir DIR]
        [--runs 40] [--raw-runs 40] [--analytic-runs 5] [--poll-ms 20]

One stack (``lakeward up`` of the working tree, or ``--data-dir``) holds the
metastore, the lake and the covid tables. Beside its server, a second server
runs lakeward/ as committed at REV (``git archive`` into a temporary dir, first on
``PYTHONPATH``) over the same data dir, on its own port. Every workload then
runs on both servers in turn, run by run (A, B, A, B...), so both see the same
machine; DuckDB alone runs the same SQL over the same Parquet files in this
process (``read_parquet`` views named as the tables, one connection, Arrow).

Workloads:

- small: an aggregate of one date (10 rows), boto3, polled every ``--poll-ms``, and
  again polled every second, as PyAthena polls by default;
- seed: the seed query (22,860 rows, 23 pages), boto3 and a raw client;
- analytic: joins, windows and aggregates over the covid tables that take
  50 ms - 2 s in DuckDB alone, boto3 polled every 20 ms, results of one page.

``--history N`` first puts N finished executions in each server's state database,
as a stack that has served for a while holds them.

The server's CPU per query is read from /proc for each server's process tree (its
supervisor and workers): run by run for every workload, and for the small result
also in blocks, each server alone for a block of runs (``measure_cpu_blocks``).
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import free_port, percentile, say, tree_cpu

CATALOG = "demo_hive_metastore.default"
SMALL = (
    f"SELECT country, sum(confirmed) AS confirmed FROM {CATALOG}.covid_confirmed_cases "
    "WHERE date = DATE '2021-06-01' GROUP BY country ORDER BY confirmed DESC LIMIT 10"
)
ANALYTIC = {
    "fatality by country and month (2-way join)": f"""
        SELECT c.country, date_trunc('month', c.date) AS month,
               sum(c.new_confirmed) AS cases, sum(d.new_deaths) AS deaths
        FROM {CATALOG}.covid_confirmed_cases c
        JOIN {CATALOG}.covid_deaths d
          ON c.country = d.country AND c.date = d.date
         AND coalesce(c.province_state, '') = coalesce(d.province_state, '')
        GROUP BY 1, 2 ORDER BY deaths DESC LIMIT 500""",
    "three measures joined, top ratios (3-way join)": f"""
        SELECT c.country, max(c.confirmed) AS confirmed, max(d.deaths) AS deaths,
               max(r.recovered) AS recovered,
               CAST(max(d.deaths) AS double) / nullif(max(c.confirmed), 0) AS fatality
        FROM {CATALOG}.covid_confirmed_cases c
        JOIN {CATALOG}.covid_deaths d
          ON c.country = d.country AND c.date = d.date
         AND coalesce(c.province_state, '') = coalesce(d.province_state, '')
        LEFT JOIN {CATALOG}.covid_recovered r
          ON c.country = r.country AND c.date = r.date
         AND coalesce(c.province_state, '') = coalesce(r.province_state, '')
        GROUP BY c.country ORDER BY fatality DESC NULLS LAST LIMIT 100""",
    "week over week growth (self-join on date)": f"""
        SELECT a.country, a.date, sum(a.confirmed) AS now, sum(b.confirmed) AS week_before
        FROM {CATALOG}.covid_confirmed_cases a
        JOIN {CATALOG}.covid_confirmed_cases b
          ON a.country = b.country AND a.lat = b.lat AND a.lon = b.lon
         AND b.date = a.date - INTERVAL '7' DAY
        WHERE a.date >= DATE '2021-01-01'
        GROUP BY a.country, a.date
        ORDER BY (sum(a.confirmed) - sum(b.confirmed)) DESC LIMIT 200""",
    "7-day averages, peak per country (window + join)": f"""
        WITH daily AS (
          SELECT c.country, c.date, sum(c.new_confirmed) AS cases, sum(d.new_deaths) AS deaths
          FROM {CATALOG}.covid_confirmed_cases c
          JOIN {CATALOG}.covid_deaths d
            ON c.country = d.country AND c.date = d.date
           AND coalesce(c.province_state, '') = coalesce(d.province_state, '')
          GROUP BY 1, 2),
        smooth AS (
          SELECT country, date,
                 avg(cases) OVER (PARTITION BY country ORDER BY date
                                  ROWS BETWEEN 6 PRECEDING AND CURRENT ROW) AS cases7,
                 avg(deaths) OVER (PARTITION BY country ORDER BY date
                                   ROWS BETWEEN 6 PRECEDING AND CURRENT ROW) AS deaths7
          FROM daily)
        SELECT country, max(cases7) AS peak_cases, max(deaths7) AS peak_deaths
        FROM smooth GROUP BY country ORDER BY peak_cases DESC LIMIT 100""",
    "countries ranked per month (join + rank)": f"""
        SELECT * FROM (
          SELECT c.country, date_trunc('month', c.date) AS month,
                 sum(c.new_confirmed) + sum(d.new_deaths) AS total,
                 rank() OVER (PARTITION BY date_trunc('month', c.date)
                              ORDER BY sum(c.new_confirmed) DESC) AS place
          FROM {CATALOG}.covid_confirmed_cases c
          JOIN {CATALOG}.covid_deaths d
            ON c.country = d.country AND c.date = d.date
           AND coalesce(c.province_state, '') = coalesce(d.province_state, '')
          GROUP BY 1, 2) ranked
        WHERE place <= 3 ORDER BY month, place""",
}


@dataclass
class Server:
    name: str  # "new" (the working tree) or "old" (the snapshot)
    endpoint: str
    pid: int
    process: subprocess.Popen[bytes] | None = None  # started here (the snapshot's)


@dataclass
class Figures:
    times: dict[str, list[float]] = field(default_factory=dict)  # workload@server -> seconds
    cpu: dict[str, float] = field(default_factory=dict)  # workload@server -> CPU s / query

    def add(self, key: str, seconds: float) -> None:
        self.times.setdefault(key, []).append(seconds)

    def p50(self, key: str) -> float:
        return percentile(self.times[key], 50)


def export(revision: str, repo: Path) -> tuple[str, Path]:
    commit = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--verify", f"{revision}^{{commit}}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    target = Path(tempfile.mkdtemp(prefix="lakeward-bench-old-"))
    archive = subprocess.Popen(
        ["git", "-C", str(repo), "archive", commit, "lakeward"], stdout=subprocess.PIPE
    )
    subprocess.run(["tar", "-x", "-C", str(target)], stdin=archive.stdout, check=True)
    if archive.wait() != 0:
        raise SystemExit(f"git archive {commit} failed")
    return commit, target


def own_state(code: Path, data_dir: Path, work: Path) -> Path:
    """The data dir the old server runs on: the stack's own, unless the SQL service's state
    database is at a schema newer than the old code knows (it would refuse to open it).
    Then a data dir of links to the stack's, but for ``query/``, where the old server makes
    a state database of its own (its catalogs are copied over once it serves:
    ``copy_catalogs``)."""
    env = {**os.environ, "PYTHONPATH": str(code)}
    known = subprocess.run(
        [sys.executable, "-c", "from lakeward.query import store; print(len(store.MIGRATIONS))"],
        env=env,
        cwd=str(code),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    database = sqlite3.connect(data_dir / "query" / "service.db")
    try:
        (current,) = database.execute(
            "SELECT version FROM schema_version WHERE component = 'query'"
        ).fetchone()
    finally:
        database.close()
    if current <= int(known):
        return data_dir
    own = work / "old-data"
    own.mkdir()
    for entry in data_dir.iterdir():
        if entry.name != "query":
            (own / entry.name).symlink_to(entry)
    say(f"the old code knows state schema {known.strip()}, the stack's is at {current}: its")
    say(f"  server keeps its own state database in {own / 'query'} (catalogs copied)")
    return own


def add_history(database: Path, count: int) -> None:
    """``count`` finished executions in a state database, as a month of use leaves them."""
    if count <= 0:
        return
    import uuid
    from datetime import UTC, datetime, timedelta

    from sqlalchemy import create_engine, insert

    from lakeward.query.model import QueryExecution, QueryState, StatementType
    from lakeward.query.store import execution_row, executions

    start = datetime.now(UTC) - timedelta(days=30)
    engine = create_engine(f"sqlite:///{database}")
    rows = [
        execution_row(
            QueryExecution(
                id=str(uuid.uuid4()),
                query=SMALL,
                statement_type=StatementType.DML,
                workgroup="primary",
                catalog="awsdatacatalog",
                database="default",
                output_location="s3://lakeward-data/query-results/primary/old.csv",
                state=QueryState.SUCCEEDED,
                submitted=start + timedelta(seconds=i),
                completed=start + timedelta(seconds=i + 1),
            )
        )
        for i in range(count)
    ]
    with engine.begin() as conn:
        conn.execute(insert(executions), rows)
    engine.dispose()
    say(f"{count:,} finished executions added to {database}")


def copy_catalogs(new: Any, old: Any) -> None:
    """The new server's data catalogs, made on the old server where it lacks them."""
    have = {c["CatalogName"] for c in old.list_data_catalogs()["DataCatalogsSummary"]}
    for summary in new.list_data_catalogs()["DataCatalogsSummary"]:
        if summary["CatalogName"] in have:
            continue
        catalog = new.get_data_catalog(Name=summary["CatalogName"])["DataCatalog"]
        old.create_data_catalog(
            Name=catalog["Name"],
            Type=catalog["Type"],
            Description=catalog.get("Description", ""),
            Parameters=catalog.get("Parameters", {}),
        )


def start_old_server(code: Path, data_dir: Path, log: Path) -> Server:
    port = free_port()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(code), env.get("PYTHONPATH")) if p)
    command = [sys.executable, "-m", "lakeward", "serve", "--data-dir", str(data_dir)]
    with log.open("ab") as out:
        process = subprocess.Popen(
            [*command, "--port", str(port)],
            env=env,
            cwd=str(code),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    import urllib.error
    import urllib.request

    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the old server exited; see {log}")
        try:
            urllib.request.urlopen(endpoint + "/health", timeout=2)  # noqa: S310 - local
            break
        except urllib.error.HTTPError:
            break  # it answers
        except OSError:
            time.sleep(0.5)
    else:
        raise SystemExit(f"the old server did not start; see {log}")
    return Server("old", endpoint, process.pid, process)


def run_query(client: Any, sql: str, poll: float) -> int:
    """Start, poll, page: the rows of the result (labels row excluded)."""
    execution_id = client.call("start_query_execution", QueryString=sql)["QueryExecutionId"]
    while True:
        status = client.call("get_query_execution", QueryExecutionId=execution_id)
        state = status["QueryExecution"]["Status"]
        if state["State"] in ("SUCCEEDED", "FAILED", "CANCELLED"):
            break
        time.sleep(poll)
    if state["State"] != "SUCCEEDED":
        raise SystemExit(f"{state['State']}: {state.get('StateChangeReason')}\n{sql}")
    rows, token = 0, None
    while True:
        paging: dict[str, Any] = {"QueryExecutionId": execution_id, "MaxResults": 1000}
        if token:
            paging["NextToken"] = token
        page = client.call("get_query_results", **paging)
        rows += len(page["ResultSet"]["Rows"])
        token = page.get("NextToken")
        if not token:
            return rows - 1


def duckdb_alone(settings: Any) -> tuple[Any, Callable[[str], int]]:
    """DuckDB in this process, the covid tables as views over the same Parquet files."""
    import duckdb
    import sqlglot

    from lakeward.metastore.client import MetastoreClient
    from lakeward.metastore.uris import metastore_uris
    from lakeward.storage.paths import lake_uri, local_path

    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute("ATTACH ':memory:' AS demo_hive_metastore")
    with MetastoreClient(metastore_uris(settings)) as client:
        for name in ("covid_confirmed_cases", "covid_deaths", "covid_recovered"):
            # The public s3:// name, read where the lake keeps it on this machine.
            location = str(local_path(lake_uri(settings, client.table("default", name).location)))
            con.execute(
                f"CREATE VIEW demo_hive_metastore.main.{name} AS "
                f"SELECT * FROM read_parquet('{location.rstrip('/')}/**/*.parquet')"
            )

    def run(sql: str) -> int:
        translated = sqlglot.transpile(sql.replace(".default.", ".main."), "trino", "duckdb")[0]
        return int(con.sql(translated).to_arrow_table().num_rows)

    return con, run


def measure(
    figures: Figures,
    key: str,
    servers: list[Server],
    clients: dict[str, Any],
    sql: str,
    runs: int,
    warmup: int,
    poll: float,
    floor: Callable[[str], int],
) -> None:
    """Runs of ``sql`` on DuckDB alone and each server in turn; times and CPU per query."""
    expected = floor(sql)
    for _ in range(warmup):
        for server in servers:
            assert run_query(clients[server.name], sql, poll) == expected, (server.name, sql)
    cpu = {s.name: 0.0 for s in servers}
    for _ in range(runs):
        start = time.perf_counter()
        floor(sql)
        figures.add(f"{key}@duckdb", time.perf_counter() - start)
        for server in servers:
            used = tree_cpu(server.pid)
            start = time.perf_counter()
            rows = run_query(clients[server.name], sql, poll)
            figures.add(f"{key}@{server.name}", time.perf_counter() - start)
            cpu[server.name] += tree_cpu(server.pid) - used
            assert rows == expected, (server.name, rows, expected)
    for name, seconds in cpu.items():
        figures.cpu[f"{key}@{name}"] = seconds / runs


BLOCK_SETTLE = 0.5
"""Seconds a server is left before and after its block of runs, for what follows a query
in the background (the lake watcher's settle, the index's update) to land in its block."""


def measure_cpu_blocks(
    servers: list[Server], clients: dict[str, Any], sql: str, runs: int, poll: float, rounds: int
) -> dict[str, float]:
    """Server CPU per query with each server alone: ``runs`` queries on one, then on the
    other, ``rounds`` times. Run by run in turn, what a server does in the background
    after a query (the lake watcher and the erasure index see every query's result
    files) is counted in the other server's run that follows; here it stays in its own
    block."""
    used = {s.name: 0.0 for s in servers}
    for _ in range(rounds):
        for server in servers:
            time.sleep(BLOCK_SETTLE)
            before = tree_cpu(server.pid)
            for _ in range(runs):
                run_query(clients[server.name], sql, poll)
            time.sleep(BLOCK_SETTLE)
            used[server.name] += tree_cpu(server.pid) - before
    return {name: seconds / (runs * rounds) for name, seconds in used.items()}


def side_by_side(args: Any, stack: Any, work: Path) -> dict[str, Any]:
    from query import RawClient, TimedClient, make_client

    repo = Path(__file__).resolve().parent.parent
    commit, code = export(args.snapshot, repo)
    say(f"previous code: {commit[:12]} (lakeward/ exported to {code})")
    new_pid = stack.pids()["server"][0]
    servers = [Server("new", stack.endpoint, new_pid)]
    old_data = own_state(code, stack.data_dir, work)
    old = start_old_server(code, old_data, work / "old-server.log")
    servers.append(old)
    for data_dir in {stack.data_dir, old_data}:
        add_history(data_dir / "query" / "service.db", args.history)
    if old_data != stack.data_dir:
        copy_catalogs(
            make_client(stack.settings, stack.endpoint), make_client(stack.settings, old.endpoint)
        )
    say(f"servers: new {stack.endpoint} (pid {new_pid}), old {old.endpoint} (pid {old.pid})")
    poll = args.poll_ms / 1000
    figures = Figures()
    try:
        con, floor = duckdb_alone(stack.settings)
        boto = {s.name: TimedClient(make_client(stack.settings, s.endpoint)) for s in servers}
        raw = {s.name: RawClient(stack.settings, s.endpoint) for s in servers}
        from query import SEED_QUERY

        say(f"\n== small result (10 rows), boto3, {args.runs} runs, poll {args.poll_ms:g} ms")
        measure(figures, "small", servers, boto, SMALL, args.runs, 3, poll, floor)
        say("\n== small result, boto3 polled every 1 s as PyAthena polls by default, 10 runs")
        measure(figures, "small, 1 s poll", servers, boto, SMALL, 10, 1, 1.0, floor)
        say(f"\n== seed query (22,860 rows, 23 pages), raw client, {args.raw_runs} runs")
        measure(figures, "seed-raw", servers, raw, SEED_QUERY, args.raw_runs, 2, poll, floor)
        say(f"\n== seed query, boto3, {args.raw_runs} runs")
        measure(figures, "seed-boto3", servers, boto, SEED_QUERY, args.raw_runs, 2, poll, floor)
        say(f"\n== small result, server CPU in blocks of {args.runs} runs, 2 rounds")
        blocks = {
            f"poll {args.poll_ms:g} ms": measure_cpu_blocks(
                servers, boto, SMALL, args.runs, poll, 2
            ),
            "poll 1 s": measure_cpu_blocks(servers, boto, SMALL, 10, 1.0, 2),
        }
        analytic_poll = 0.02
        for name, sql in ANALYTIC.items():
            say(f"\n== analytic: {name}, boto3 polled every 20 ms, {args.analytic_runs} runs")
            key = f"analytic: {name}"
            measure(figures, key, servers, boto, sql, args.analytic_runs, 1, analytic_poll, floor)
        con.close()
    finally:
        if old.process is not None:
            old.process.terminate()
            old.process.wait(timeout=30)
        shutil.rmtree(code, ignore_errors=True)
    lines = table(figures) + [
        "",
        "| small result, server CPU per query, each server alone | new | old | new / old |",
        "|---|---:|---:|---:|",
    ]
    for name, cpu in blocks.items():
        lines.append(
            f"| {name} | {cpu['new'] * 1000:.1f} ms | {cpu['old'] * 1000:.1f} ms | "
            f"{cpu['new'] / cpu['old']:.2f}x |"
        )
    for line in lines:
        say(line)
    return {
        "previous": commit,
        "times": figures.times,
        "cpu": figures.cpu,
        "cpu_blocks": blocks,
        "table": lines,
    }


def table(figures: Figures) -> list[str]:
    workloads = sorted({k.split("@")[0] for k in figures.times}, key=_order)
    lines = [
        "",
        "| workload | DuckDB alone p50 | new p50 | new / DuckDB | old p50 | old / DuckDB | "
        "new CPU/query | old CPU/query |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for workload in workloads:
        floor, new, old = (figures.p50(f"{workload}@{s}") for s in ("duckdb", "new", "old"))
        lines.append(
            f"| {workload} | {floor * 1000:.1f} ms | {new * 1000:.1f} ms | {new / floor:.2f}x | "
            f"{old * 1000:.1f} ms | {old / floor:.2f}x | "
            f"{figures.cpu[workload + '@new'] * 1000:.0f} ms | "
            f"{figures.cpu[workload + '@old'] * 1000:.0f} ms |"
        )
    analytic = [w for w in workloads if w.startswith("analytic")]
    if analytic:
        total = {
            s: sum(figures.p50(f"{w}@{s}") for w in analytic) for s in ("duckdb", "new", "old")
        }
        lines.append(
            f"| analytic, sum of p50s | {total['duckdb'] * 1000:.0f} ms | "
            f"{total['new'] * 1000:.0f} ms | {total['new'] / total['duckdb']:.2f}x | "
            f"{total['old'] * 1000:.0f} ms | {total['old'] / total['duckdb']:.2f}x | | |"
        )
    return lines


def _order(workload: str) -> tuple[int, str]:
    rank = {"small": 0, "small, 1 s poll": 1, "seed-raw": 2, "seed-boto3": 3}
    return rank.get(workload, 4), workload
