"""The chaos scenario: metastore nodes killed under load, clients must not notice.

Used by bench/metastore.py (which reports its figures) and by
tests/metastore/test_chaos.py (which asserts on it), as ``bench._chaos``. One run:

* a covid table from the real JHU files (confirmed cases of a few countries,
  one partition per country, Parquet) registered through lakeward's client;
* client threads for ``duration`` seconds: get_table, list partitions, and
  DuckDB reads through the SQL service's catalog connector and engine; plus a
  Spark session in a process of its own (Spark admits one context per process)
  reading the table through the metastore;
* ``kill -9`` of the node the clients are using, ``kills`` times, ``gap``
  seconds apart, each followed by ``lakeward metastore heal``.

Every operation is recorded with the node that answered it; a read's result is
compared with what the CSV holds.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from bench._harness import ROOT, lakeward
from lakeward.config import Settings
from lakeward.metastore.client import MetastoreClient
from lakeward.metastore.tables import Column, PartitionInfo, TableInfo
from lakeward.metastore.uris import metastore_uris
from lakeward.query.catalogs.hive import HiveCatalog
from lakeward.query.engines.base import Limits, ResolvedTable
from lakeward.query.engines.duckdb import DuckDbEngine
from lakeward.query.model import TableRef
from lakeward.stack import Stack

DATABASE, TABLE = "chaos", "covid_confirmed"
COUNTRIES = ("Italy", "Spain", "Germany", "France", "Japan", "Canada", "Brazil", "India")
CONFIRMED_CSV = "time_series_covid19_confirmed_global.csv"

Totals = dict[str, tuple[int, int]]  # country -> (rows, sum of confirmed)


def expected_totals(jhu_dir: Path) -> Totals:
    """Rows and confirmed cases per country, straight from the CSV's cells."""
    totals: dict[str, list[int]] = {c: [0, 0] for c in COUNTRIES}
    with open(jhu_dir / CONFIRMED_CSV, newline="") as handle:
        for row in csv.reader(handle):
            if row[1] in totals:
                cells = row[4:]
                totals[row[1]][0] += len(cells)
                totals[row[1]][1] += sum(int(float(v)) for v in cells)
    return {c: (n, s) for c, (n, s) in totals.items()}


def register_covid_table(uris: list[str], jhu_dir: Path, lake: Path) -> TableInfo:
    """Write the countries' confirmed cases as Parquet, one directory per country,
    and register the table and its partitions through lakeward's client."""
    with open(jhu_dir / CONFIRMED_CSV, newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader)
        days = [datetime.strptime(d, "%m/%d/%y").date() for d in header[4:]]
        by_country: dict[str, list[list[str]]] = {c: [] for c in COUNTRIES}
        for row in reader:
            if row[1] in by_country:
                by_country[row[1]].append(row)
    location = lake / TABLE
    for country, rows in by_country.items():
        province: list[str | None] = []
        day: list[date] = []
        confirmed: list[int] = []
        for row in rows:
            for when, value in zip(days, row[4:], strict=True):
                province.append(row[0] or None)
                day.append(when)
                confirmed.append(int(float(value)))
        part = location / f"country={country}"
        part.mkdir(parents=True, exist_ok=True)
        pq.write_table(
            pa.table(
                {
                    "province_state": pa.array(province, pa.string()),
                    "date": pa.array(day, pa.date32()),
                    "confirmed": pa.array(confirmed, pa.int64()),
                }
            ),
            part / "part-0.parquet",
        )
    table = TableInfo(
        database=DATABASE,
        name=TABLE,
        location=location.as_uri(),
        columns=[
            Column("province_state", "string"),
            Column("date", "date"),
            Column("confirmed", "bigint"),
        ],  # fmt: skip
        partition_keys=[Column("country", "string")],
        parameters={"lakeward.source": CONFIRMED_CSV},
    )
    with MetastoreClient(uris) as client:
        client.create_database(DATABASE, lake.as_uri())
        client.put_external_table(table)
        client.add_partitions(
            DATABASE,
            TABLE,
            [PartitionInfo([c], f"{table.location}/country={c}") for c in COUNTRIES],
        )
    return table


@dataclass
class Op:
    kind: str
    start: float
    end: float
    node: str | None  # the metastore node that answered, if the operation called one
    error: str | None = None


@dataclass
class Kill:
    at: float
    uri: str


@dataclass
class ChaosReport:
    ops: list[Op]
    kills: list[Kill]
    wrong: list[str]  # reads whose result differs from the CSV's
    spark: list[dict[str, object]] = field(default_factory=list)
    heal_errors: list[str] = field(default_factory=list)

    @property
    def failures(self) -> list[str]:
        local = [f"{op.kind}: {op.error}" for op in self.ops if op.error]
        remote = [f"spark: {s['error']}" for s in self.spark if "error" in s]
        return local + remote + self.wrong

    def counts(self) -> Counter[str]:
        counts = Counter(op.kind for op in self.ops if not op.error)
        counts["spark"] = sum(1 for s in self.spark if "error" not in s)
        return counts

    def failover(self) -> list[float]:
        """Per kill and client thread: seconds from the kill to its next call that succeeded
        on another node."""
        latencies = []
        by_thread: dict[str, list[Op]] = {}
        for op in self.ops:
            if op.node is not None:
                by_thread.setdefault(op.kind, []).append(op)
        for kill in self.kills:
            for ops in by_thread.values():
                after = [
                    op.end
                    for op in ops
                    if op.end > kill.at and op.error is None and op.node != kill.uri
                ]
                if after:
                    latencies.append(min(after) - kill.at)
        return latencies

    def spark_stall(self) -> float:
        """Longest Spark query that was running at a kill (seconds)."""
        spans = [
            float(s["end"]) - float(s["start"])  # type: ignore[arg-type]
            for s in self.spark
            for k in self.kills
            if "end" in s and float(s["start"]) <= k.at <= float(s["end"])  # type: ignore[arg-type]
        ]
        return max(spans, default=0.0)

    def summary(self) -> str:
        latencies = sorted(self.failover())
        counts = ", ".join(f"{k} {v}" for k, v in sorted(self.counts().items()))
        lines = [
            f"operations: {counts}; failed: {len(self.failures)}",
            f"kills: {', '.join(k.uri for k in self.kills)}",
        ]
        if latencies:
            p50, worst = statistics.median(latencies) * 1000, latencies[-1] * 1000
            lines.append(
                "failover latency (kill -> next successful call on another node, "
                f"{len(latencies)} thread-kills): p50 {p50:.1f} ms, max {worst:.1f} ms"
            )
        durations = [
            float(s["end"]) - float(s["start"])  # type: ignore[arg-type]
            for s in self.spark
            if "end" in s
        ]
        if durations:
            lines.append(
                f"spark: {len(durations)} queries, p50 {statistics.median(durations):.2f} s; "
                f"longest across a kill {self.spark_stall():.2f} s"
            )
        return "\n".join(lines)


SPARK_READER = """
import json, sys, time
from pathlib import Path
from lakeward.config import load_settings
from lakeward.spark import build_session
data_dir, countries, stop = sys.argv[1], sys.argv[2].split(","), Path(sys.argv[3])
spark = build_session(load_settings(data_dir=data_dir, env={}), "chaos-reader")
i = 0
while not stop.exists():
    country = countries[i % len(countries)]
    i += 1
    start = time.time()
    try:
        rows, total = spark.sql(
            "SELECT count(*), sum(confirmed) FROM chaos.covid_confirmed "
            f"WHERE country = '{country}'"
        ).collect()[0]
        record = {"country": country, "rows": rows, "sum": total}
    except Exception as exc:
        record = {"country": country, "error": str(exc)[-800:]}
    print(json.dumps({"start": start, "end": time.time(), **record}), flush=True)
"""


class SparkReader:
    """A Spark session in its own process, querying the table until told to stop."""

    def __init__(self, settings: Settings, work: Path) -> None:
        self.stop_file = work / "spark.stop"
        self.out = work / "spark.jsonl"
        self.process = subprocess.Popen(
            [sys.executable, "-c", SPARK_READER, str(settings.data_dir), ",".join(COUNTRIES),
             str(self.stop_file)],
            stdout=open(self.out, "w"),  # noqa: SIM115 - the child owns it
            stderr=open(work / "spark.log", "w"),  # noqa: SIM115
            cwd=ROOT,
        )  # fmt: skip

    def records(self) -> list[dict[str, object]]:
        lines = self.out.read_text().splitlines() if self.out.exists() else []
        return [json.loads(line) for line in lines if line.startswith("{")]

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not self.records():
            if self.process.poll() is not None or time.monotonic() > deadline:
                log = (self.out.parent / "spark.log").read_text()[-3000:]
                raise AssertionError(f"the Spark reader did not start:\n{log}")
            time.sleep(0.5)

    def finish(self) -> list[dict[str, object]]:
        self.stop_file.touch()
        try:
            self.process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        return self.records()


def run_chaos(
    settings: Settings,
    totals: Totals,
    duration: float = 30.0,
    threads: int = 16,
    kills: int = 2,
    first_kill: float = 5.0,
    gap: float = 10.0,
    heal_delay: float = 2.0,
    spark: SparkReader | None = None,
    env: dict[str, str] | None = None,
) -> ChaosReport:
    """Run the scenario on the stack of ``settings``; ``heal_delay`` s after each kill,
    ``lakeward metastore heal`` restarts the node (on a shared machine the restarting
    JVM's start competes for CPU with the failover being measured; in the field the
    nodes run on machines of their own)."""
    uris = metastore_uris(settings)
    nodes = {n.uri: n for n in Stack(settings).metastore_nodes()}
    ops: list[Op] = []
    wrong: list[str] = []
    stop = threading.Event()
    tables = MetastoreClient(uris)
    partitions = MetastoreClient(uris)
    connector = HiveCatalog(uris)  # as the SQL service has it
    engine = DuckDbEngine()
    ref = TableRef("chaos_catalog", DATABASE, TABLE)

    def get_table() -> str | None:
        tables.table(DATABASE, TABLE)
        return tables.answered_by

    def list_partitions() -> str | None:
        found = sorted(p.values[0] for p in partitions.partitions(DATABASE, TABLE))
        if found != sorted(COUNTRIES):
            wrong.append(f"partitions: {found}")
        return partitions.answered_by

    def duckdb_read(country: str) -> None:
        info = connector.table(DATABASE, TABLE)
        resolved = ResolvedTable(ref, info.location, info.columns, info.partition_keys)
        sql = (
            f"SELECT count(*), sum(confirmed) FROM {engine.table_name(ref)} "
            f"WHERE country = '{country}'"
        )
        result = engine.execute(uuid.uuid4().hex, sql, [resolved], Limits("256MB", threads=1))
        got = [tuple(r.values()) for b in result.batches for r in b.to_pylist()]
        if got != [totals[country]]:
            wrong.append(f"duckdb {country}: {got} != {[totals[country]]}")

    def worker(index: int) -> None:
        role = index % 3
        kind = ("get_table", "partitions", "duckdb")[role] + f"-{index}"
        turn = 0
        while not stop.is_set():
            start = time.time()
            node: str | None = None
            error = None
            try:
                if role == 0:
                    node = get_table()
                elif role == 1:
                    node = list_partitions()
                else:
                    duckdb_read(COUNTRIES[turn % len(COUNTRIES)])
            except Exception as exc:  # every failure is counted, none may happen
                error = f"{type(exc).__name__}: {exc}"
            ops.append(Op(kind, start, time.time(), node, error))
            turn += 1

    heal_errors: list[str] = []
    heals: list[threading.Thread] = []

    def heal() -> None:
        result = lakeward("metastore", "heal", data_dir=settings.data_dir, env=env, check=False)
        if result.returncode != 0:
            # The message comes first, the node's log tail after it: keep both ends.
            text = result.stderr
            heal_errors.append(text if len(text) <= 4000 else text[:2000] + "\n…\n" + text[-2000:])

    workers = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    started = time.monotonic()
    for thread in workers:
        thread.start()
    killed: list[Kill] = []
    for k in range(kills):
        _sleep_until(started + first_kill + k * gap, stop)
        victim = nodes[tables.current_uri]  # the node every client of these URIs uses
        pid = victim.process.pid()
        if pid is None:
            raise AssertionError(f"{victim.uri} is not running; cannot kill it")
        killed.append(Kill(time.time(), victim.uri))
        os.kill(pid, signal.SIGKILL)
        # Restart it, one heal after the other (a heal started while one runs would race).
        previous = heals[-1] if heals else None
        healer = threading.Thread(target=_after, args=(previous, heal_delay, heal))
        healer.start()
        heals.append(healer)
    _sleep_until(started + duration, stop)
    stop.set()
    for thread in workers:
        thread.join()
    spark_records = spark.finish() if spark is not None else []
    for healer in heals:
        healer.join()
    for client in (tables, partitions, connector):
        client.close()
    engine.close()
    for record in spark_records:
        if "error" not in record:
            country = str(record["country"])
            if (record["rows"], record["sum"]) != totals[country]:
                wrong.append(f"spark {country}: {record}")
    return ChaosReport(ops, killed, wrong, spark_records, heal_errors)


def _after(previous: threading.Thread | None, delay: float, then: Callable[[], None]) -> None:
    time.sleep(delay)
    if previous is not None:
        previous.join()
    then()


def _sleep_until(moment: float, stop: threading.Event) -> None:
    stop.wait(max(0.0, moment - time.monotonic()))
