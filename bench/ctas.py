"""Benchmark of CREATE TABLE AS on the two engines: covid_cases into a Parquet table
partitioned by country, written by the DuckDB engine and by the Spark engine, in one run.

    .venv/bin/python bench/ctas.py [--data-dir DIR] [--runs 5] [--copies 1,8] [--keep]

In one run it

1. brings up a throw-away stack (``lakeward up`` on the JHU files in a temporary data
   dir, on ports the OS picks), or uses the running stack of ``--data-dir``;
2. opens the SQL service in this process over the stack's metastore and lake, with a
   state directory of its own and two workgroups, ``bench-duckdb`` and ``bench-spark``
   (the same service the server runs; its CTAS is the server's);
3. for each size in ``--copies`` (covid_cases once, or that many copies of its rows,
   ``UNION ALL``), runs one warm-up CTAS on each engine (the Spark session starts
   then: reported apart), then ``--runs`` CTAS on each, alternating which engine goes
   first in each round, timing each from its start to SUCCEEDED as a client polling
   every 20 ms sees it;
4. checks every table it made: its row count (read back through the DuckDB workgroup)
   is the source's, it has a partition per country, and the two engines' tables have
   the same columns, partition keys and storage descriptor;
5. drops the tables and deletes their files, then prints per size the rounds side by
   side, the medians, and the ratio Spark / DuckDB.

The machine is shared with other work: read the figures with that in mind (the medians
are the figures to compare; the load average is printed with them).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # lakeward, and bench._harness, from this checkout

from bench._harness import JHU_DIR, lakeward  # noqa: E402

DATABASE = "bench_ctas"
ENGINES = ("duckdb", "spark")
COLUMNS = "province_state, lat, lon, date, confirmed, deaths, recovered, country"


def source_sql(copies: int) -> str:
    """covid_cases ``copies`` times over: as many rows per country and day as copies."""
    one = f"SELECT {COLUMNS} FROM default.covid_cases"
    return " UNION ALL ".join([one] * copies)


def ctas_sql(table: str, copies: int) -> str:
    return (
        f"CREATE TABLE {DATABASE}.{table} WITH (format = 'PARQUET', "
        f"write_compression = 'SNAPPY', partitioned_by = ARRAY['country']) "
        f"AS {source_sql(copies)}"
    )


def wait(service: Any, execution_id: str, timeout: float = 3600) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        execution = service.get_query_execution(execution_id)
        if execution.state.done:
            return execution
        if time.monotonic() > deadline:
            raise SystemExit(f"{execution_id} did not finish in {timeout:.0f} s")
        time.sleep(0.02)


def run_sql(service: Any, sql: str, workgroup: str = "bench-duckdb") -> tuple[float, Any]:
    began = time.monotonic()
    execution = wait(service, service.start_query_execution(sql, workgroup=workgroup))
    took = time.monotonic() - began
    if execution.state.value != "SUCCEEDED":
        raise SystemExit(f"{sql[:120]}... {execution.state.value}: {execution.state_change_reason}")
    return took, execution


def scalar(service: Any, sql: str) -> str | None:
    _, execution = run_sql(service, sql)
    page = service.get_query_results(execution.id)
    return page.rows[1][0] if execution.statement_type.value == "DML" else page.rows[0][0]


class Bench:
    def __init__(self, data_dir: Path, work: Path) -> None:
        from lakeward.config import load_settings
        from lakeward.query.model import WorkGroup
        from lakeward.query.service import QueryService

        stack = load_settings(data_dir=data_dir, env={})
        # A state directory of its own over the stack's metastore and lake.
        lake = stack.lake.model_copy(update={"root": stack.lake_root})
        self.settings = stack.model_copy(update={"data_dir": work, "lake": lake})
        self.service = QueryService(self.settings, owner=True)  # registers the catalog
        for engine in ENGINES:
            self.service.put_work_group(WorkGroup(name=f"bench-{engine}", engine=engine))
        run_sql(self.service, f"CREATE DATABASE IF NOT EXISTS {DATABASE}")
        self.made: list[str] = []

    def ctas(self, engine: str, copies: int) -> float:
        table = f"t_{engine}_{uuid.uuid4().hex[:8]}"
        took, _ = run_sql(self.service, ctas_sql(table, copies), f"bench-{engine}")
        self.made.append(table)
        return took

    def check(self, copies: int) -> str:
        """Every table made for this size holds the source's rows, in the same layout."""
        client = self.service.catalogs.catalog("demo_hive_metastore")
        expected = scalar(self.service, f"SELECT count(*) FROM ({source_sql(copies)})")
        countries = scalar(self.service, "SELECT count(DISTINCT country) FROM covid_cases")
        shapes = set()
        for table in self.made:
            rows = scalar(self.service, f"SELECT count(*) FROM {DATABASE}.{table}")
            if rows != expected:
                raise SystemExit(f"{table} holds {rows} rows, not {expected}")
            info = client.table(DATABASE, table)
            parts = len(client.partitions(DATABASE, table))
            if str(parts) != countries:
                raise SystemExit(f"{table} has {parts} partitions, not {countries}")
            shapes.add(
                (
                    tuple((c.name, c.type) for c in info.columns),
                    tuple((c.name, c.type) for c in info.partition_keys),
                    info.input_format,
                    info.serde,
                )
            )
        if len(shapes) != 1:
            raise SystemExit(f"the engines made tables of different definitions: {shapes}")
        return f"{len(self.made)} tables of {expected} rows in {countries} partitions"

    def drop(self) -> None:
        from lakeward.storage.paths import lake_place

        client = self.service.catalogs.catalog("demo_hive_metastore")
        for table in self.made:
            location = client.table(DATABASE, table).location
            run_sql(self.service, f"DROP TABLE {DATABASE}.{table}")
            place = lake_place(self.settings, location)
            if place is not None:
                self.service.storage.delete_prefix(place[0], place[1].rstrip("/") + "/")
        self.made.clear()

    def close(self) -> None:
        self.drop()
        run_sql(self.service, f"DROP DATABASE IF EXISTS {DATABASE}")
        self.service.close()


def measure(bench: Bench, copies: int, runs: int) -> dict[str, Any]:
    warm = {engine: bench.ctas(engine, copies) for engine in ENGINES}
    rounds: list[dict[str, float]] = []
    for n in range(runs):
        order = ENGINES if n % 2 == 0 else ENGINES[::-1]
        rounds.append({engine: bench.ctas(engine, copies) for engine in order})
    checked = bench.check(copies)
    bench.drop()
    return {"copies": copies, "warm": warm, "rounds": rounds, "checked": checked}


def report(figures: dict[str, Any]) -> None:
    copies, rounds = figures["copies"], figures["rounds"]
    print(f"\ncovid_cases x{copies} -> Parquet partitioned by country ({figures['checked']})")
    print(f"first CTAS (s): duckdb {figures['warm']['duckdb']:.2f}, "
          f"spark {figures['warm']['spark']:.2f} (the Spark session starts in it)")  # fmt: skip
    print(f"{'round':>5} {'duckdb s':>9} {'spark s':>9} {'spark/duckdb':>13}")
    for n, r in enumerate(rounds, 1):
        print(f"{n:>5} {r['duckdb']:>9.2f} {r['spark']:>9.2f} {r['spark'] / r['duckdb']:>12.2f}x")
    duck = statistics.median(r["duckdb"] for r in rounds)
    spark = statistics.median(r["spark"] for r in rounds)
    print(f"{'p50':>5} {duck:>9.2f} {spark:>9.2f} {spark / duck:>12.2f}x")
    low = (min(r["duckdb"] for r in rounds), min(r["spark"] for r in rounds))
    print(f"{'min':>5} {low[0]:>9.2f} {low[1]:>9.2f} {low[1] / low[0]:>12.2f}x")
    print(f"load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, help="use this running stack")
    parser.add_argument("--runs", type=int, default=5, help="CTAS per engine and size")
    parser.add_argument("--copies", default="1,8", help="sizes, in copies of covid_cases")
    parser.add_argument("--keep", action="store_true", help="leave the stack it started")
    args = parser.parse_args()
    started_here = args.data_dir is None
    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="lakeward-bench-ctas-")) / "data"
    work = Path(tempfile.mkdtemp(prefix="lakeward-bench-ctas-state-"))
    if started_here:
        print(f"bringing up a stack in {data_dir} (ETL of the JHU files) ...", flush=True)
        began = time.monotonic()
        lakeward("up", "--covid-source", str(JHU_DIR), data_dir=data_dir, timeout=1200)
        print(f"stack up in {time.monotonic() - began:.0f} s", flush=True)
    bench = None
    try:
        bench = Bench(data_dir, work)
        for copies in (int(c) for c in args.copies.split(",")):
            report(measure(bench, copies, args.runs))
    finally:
        if bench is not None:
            bench.close()
        shutil.rmtree(work, ignore_errors=True)
        if started_here and not args.keep:
            lakeward("down", data_dir=data_dir, timeout=300)
            shutil.rmtree(data_dir.parent, ignore_errors=True)


if __name__ == "__main__":
    main()
