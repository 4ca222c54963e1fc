"""Benchmark of managed database instances: lifecycle steps, and the interruption of a class
change applied immediately, PostgreSQL against MariaDB.

    .venv/bin/python bench/databases.py [--rounds 3] [--rows 100000] [--json FILE]

Each round, for each engine in turn (so that the shared machine's load falls on both alike),
through the ``Instances`` service in this process:

1. create a local instance (init tool, config, first start, master user) and load ``--rows``
   rows into a database of it;
2. change its class with ``apply_immediately=True`` while a client thread connects and runs
   ``SELECT 1`` every 20 ms: the interruption is the longest time between two successful
   queries around the restart, with the number of failed attempts;
3. stop, start;
4. delete with a final snapshot (the dump of the rows), and the snapshot's size.

It prints the median of each step per engine and the ratio MariaDB / PostgreSQL.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lakeward.access.secrets import open_secret_store
from lakeward.config import load_settings
from lakeward.databases import Instances

ENGINES = {"postgres": "PostgreSQL", "mysql": "MariaDB"}


def login(instances: Instances, name: str) -> dict[str, Any]:
    master, endpoint = instances.credentials(name), instances.endpoint(name)
    return {"host": endpoint.host, "port": endpoint.port, "user": master.username,
            "password": master.password}  # fmt: skip


def connect(login: dict[str, Any], engine: str, database: str) -> Any:
    if engine == "postgres":
        import psycopg

        return psycopg.connect(**login, dbname=database, connect_timeout=2, autocommit=True)
    import pymysql  # type: ignore[import-untyped]

    return pymysql.connect(**login, database=database, connect_timeout=2, autocommit=True)


def execute(conn: Any, sql: str) -> None:
    cursor = conn.cursor()
    cursor.execute(sql)
    cursor.close()


def load_rows(instances: Instances, name: str, engine: str, rows: int) -> None:
    instances.connection_url(name, "bench")  # creates the database
    conn = connect(login(instances, name), engine, "bench")
    execute(conn, "CREATE TABLE t (id INT PRIMARY KEY, label VARCHAR(40))")
    if engine == "postgres":
        execute(conn, f"INSERT INTO t SELECT i, 'row ' || i FROM generate_series(1, {rows}) i")
    else:  # MariaDB's sequence engine
        execute(conn, f"INSERT INTO t SELECT seq, CONCAT('row ', seq) FROM seq_1_to_{rows}")
    conn.close()


def interruption(
    credentials: dict[str, Any], engine: str, change: Callable[[], object]
) -> tuple[float, float, int]:
    """Run ``change`` while a client polls; (change seconds, longest gap seconds, failures)."""
    successes: list[float] = []
    failures = 0
    done = threading.Event()

    def poll() -> None:
        nonlocal failures
        while True:
            try:
                conn = connect(credentials, engine, "bench")
                execute(conn, "SELECT 1")
                conn.close()
                successes.append(time.perf_counter())
                if done.is_set():
                    return
            except Exception:
                failures += 1
            time.sleep(0.02)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    time.sleep(0.3)
    started = time.perf_counter()
    change()
    took = time.perf_counter() - started
    done.set()
    poller.join(timeout=60)
    # The longest wait between two successful queries from just before the change on.
    pairs = zip(successes, successes[1:], strict=False)
    gap = max((b - a for a, b in pairs if b >= started), default=0.0)
    return took, gap, failures


def one_round(data_dir: Path, engine: str, index: int, rows: int) -> dict[str, float]:
    settings = load_settings(data_dir=data_dir, env={})
    instances = Instances(settings, open_secret_store(settings))
    name = f"bench-{engine}-{index}"
    result: dict[str, float] = {}

    started = time.perf_counter()
    instances.create(name, engine)
    result["create (s)"] = time.perf_counter() - started
    load_rows(instances, name, engine, rows)

    took, gap, failures = interruption(
        login(instances, name), engine, lambda: instances.modify(name, "db.medium", True)
    )
    result["modify now (s)"] = took
    result["interruption (s)"] = gap
    result["failed queries"] = failures

    for step, action in (("stop (s)", instances.stop), ("start (s)", instances.start)):
        started = time.perf_counter()
        action(name)
        result[step] = time.perf_counter() - started

    snapshot = data_dir / f"{name}.sql"
    started = time.perf_counter()
    instances.delete(name, snapshot)
    result["snapshot + delete (s)"] = time.perf_counter() - started
    result["snapshot (MB)"] = snapshot.stat().st_size / 1e6
    snapshot.unlink()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    base = Path(tempfile.mkdtemp(prefix="lakeward-bench-db-"))
    if os.geteuid() == 0:
        base.chmod(0o711)  # the servers run as postgres / mysql and must reach the data dir
    data_dir = base / "data"
    runs: dict[str, list[dict[str, float]]] = {engine: [] for engine in ENGINES}
    try:
        for index in range(args.rounds):
            for engine in ENGINES:
                runs[engine].append(one_round(data_dir, engine, index, args.rows))
    finally:
        settings = load_settings(data_dir=data_dir, env={})
        instances = Instances(settings, open_secret_store(settings))
        try:
            instances.stop_all()
            for name in instances.registry.load():
                instances.delete(name, None)
        finally:
            shutil.rmtree(base, ignore_errors=True)

    steps = list(runs["postgres"][0])
    medians = {e: {s: statistics.median(r[s] for r in runs[e]) for s in steps} for e in ENGINES}
    print(f"{args.rounds} rounds, {args.rows:,} rows, load average {os.getloadavg()[0]:.1f}")
    print(f"{'step':<24}{'PostgreSQL':>12}{'MariaDB':>12}{'MariaDB/PG':>12}")
    for step in steps:
        pg, maria = medians["postgres"][step], medians["mysql"][step]
        ratio = f"{maria / pg:.2f}" if pg else "-"
        print(f"{step:<24}{pg:>12.2f}{maria:>12.2f}{ratio:>12}")
    if args.json:
        args.json.write_text(json.dumps({"runs": runs, "medians": medians}, indent=2))


if __name__ == "__main__":
    main()
