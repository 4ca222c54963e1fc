"""Benchmark of the covid ETL: the real JHU files, then 10x/30x/100x the rows, Spark vs DuckDB.

    .venv/bin/python bench/etl.py [--source DIR] [--scales 10,30,100] [--keep]

In one run it

1. starts a throw-away stack (its own data dir under a temporary dir, its own
   metastore on a free port) and runs ``CovidEtl`` on the real files, printing
   the wall time split into Spark start, read, transform, write and register;
2. for every scale, writes synthetic inputs in the JHU layout (the real rows
   repeated, Province/State renamed "<orig> #k"; not timed) and measures side
   by side the Spark job (``CovidEtl.run`` with the SparkSession of step 1, so
   Spark starts once) and the same transform done by DuckDB in this process;
   both outputs are checked to agree;
3. prints the comparison table and the targets, then stops the metastore and
   deletes everything it wrote (unless ``--keep``).

Rows/s = output rows of the three measure tables plus covid_cases, divided by
transform + write time (Spark: ``report.timings``; DuckDB: its whole run, CSV
read to last Parquet file). For every timed phase the CPU the rest of the
machine used is printed too (the machine is shared; read the numbers with it).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import free_port, process_table, say, tree_ticks  # noqa: E402 - beside this script
from _duckdb_etl import VARIANTS, DuckResult, compare_outputs, run_duckdb  # noqa: E402
from _jhu_synth import make_synthetic  # noqa: E402

from lakeward.config import Settings, load_settings  # noqa: E402
from lakeward.ingest.covid import CovidEtl  # noqa: E402
from lakeward.ingest.reports import EtlReport  # noqa: E402
from lakeward.metastore.node import MetastoreNode  # noqa: E402
from lakeward.progress import Progress, Step  # noqa: E402

# The JHU files as the test suite finds them: ../shared/data/jhu_csse beside the repository.
DEFAULT_SOURCE = str(Path(__file__).resolve().parents[2] / "shared" / "data" / "jhu_csse")
DEFAULT_SCALES = "10,30,100"
DEFAULT_DRIVER_MEMORY = "6g"
TARGET_FULL_WALL = 30.0  # s, real files, including Spark start
TARGET_RATE = 1_000_000  # output rows/s of the Spark job at 100x
TARGET_RATIO = 0.5  # Spark rows/s at least half of DuckDB's


_TICK = os.sysconf("SC_CLK_TCK")


def _machine_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs."""
    with open("/proc/stat") as handle:
        fields = [int(x) for x in handle.readline().split()[1:9]]
    user, nice, system, idle, iowait, irq, softirq, steal = fields
    return user + nice + system + irq + softirq + steal, sum(fields)


def _our_ticks(extra: list[int]) -> dict[int, int]:
    """CPU jiffies of this process, its descendants (the Spark JVM) and ``extra`` pids."""
    return tree_ticks(process_table(), [os.getpid(), *extra])


@dataclass
class CpuUse:
    wall: float = 0.0
    ours: float = 0.0  # cores used on average by this benchmark (and its metastore)
    others: float = 0.0  # cores used on average by everything else

    def __str__(self) -> str:
        return f"cpu: ours {self.ours:.2f} cores, rest of machine {self.others:.2f} cores"


@contextmanager
def cpu_meter(extra_pids: list[int]) -> Iterator[CpuUse]:
    use = CpuUse()
    busy0, total0 = _machine_ticks()
    ours0 = _our_ticks(extra_pids)
    clock = time.perf_counter()
    yield use
    use.wall = time.perf_counter() - clock
    busy1, total1 = _machine_ticks()
    ours1 = _our_ticks(extra_pids)
    ours = sum(t - ours0.get(pid, 0) for pid, t in ours1.items()) / _TICK
    busy = (busy1 - busy0) / _TICK
    use.ours = ours / use.wall
    use.others = max(busy - ours, 0.0) / use.wall


QUIET_CORES = 0.3  # the rest of the machine counts as quiet below this


def wait_for_quiet(pids: list[int], limit: float) -> None:
    """Wait up to ``limit`` s until the rest of the machine uses < QUIET_CORES for 3 s."""
    if limit <= 0:
        return
    clock = time.perf_counter()
    while True:
        with cpu_meter(pids) as use:
            time.sleep(3)
        waited = time.perf_counter() - clock
        if use.others < QUIET_CORES:
            if waited > 4:
                say(f"  (waited {waited:.0f} s for the rest of the machine to quiet down)")
            return
        if waited >= limit:
            say(
                f"  (rest of the machine still busy after {waited:.0f} s: {use.others:.2f} cores;"
                " measuring anyway)"
            )
            return


# --- the stack ------------------------------------------------------------------------


ETL_SOURCES = ("lakeward/ingest", "lakeward/spark.py", "lakeward/progress.py")


def etl_code_digest() -> str:
    """A digest of the ETL's code as it is on disk now (commits or not)."""
    repo = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for entry in ETL_SOURCES:
        path = repo / entry
        for file in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            digest.update(file.read_bytes())
    return digest.hexdigest()[:12]


def lakeward_version() -> str:
    """The commit of the lakeward code measured, and whether its ETL code had local changes."""
    repo = Path(__file__).resolve().parent.parent
    try:
        commit = subprocess.run(
            ["git", "-C", str(repo), "log", "-1", "--format=%h %s"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(repo), "status", "--porcelain", "--", *ETL_SOURCES],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    changed = " + uncommitted changes to the ETL code" if dirty else ""
    return f"{commit}{changed} (ETL code digest {etl_code_digest()})"


def lakeward_cli(*args: str) -> None:
    command = [sys.executable, "-m", "lakeward", *args]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stdout}\n{done.stderr}")


def start_stack(data_dir: Path, driver_memory: str) -> Settings:
    """A stack of its own: ports pinned in a config file, metastore started, ours checked."""
    metastore_port = free_port()
    server_port = free_port()
    while server_port == metastore_port:
        server_port = free_port()
    config = data_dir.parent / "lakeward.toml"
    config.write_text(
        f"[metastore]\nport = {metastore_port}\n\n[server]\nport = {server_port}\n\n"
        f'[spark]\ndriver_memory = "{driver_memory}"\n'
        # The transform's cost, with no server: Spark reads and writes the lake's files
        # (bench/spark_lake.py measures the same ETL through the S3 endpoint).
        'lake_access = "direct"\n'
    )
    lakeward_cli("metastore", "start", "--data-dir", str(data_dir), "--config", str(config))
    settings = load_settings(data_dir=data_dir, overrides={"spark.driver_memory": driver_memory})
    check_metastore(settings)
    return settings


def check_metastore(settings: Settings) -> None:
    """Our metastore process is alive and answers (not some other stack's on our port)."""
    status = MetastoreNode(settings).status()
    if status.pid is None or not status.healthy:
        raise RuntimeError(f"the benchmark's metastore is not running; see {status.log}")


def metastore_pid(settings: Settings) -> list[int]:
    pid = MetastoreNode(settings).process.pid()
    return [pid] if pid else []


# --- Spark runs -------------------------------------------------------------------------


class TimedProgress(Progress):
    """Records the wall time of every step CovidEtl reports."""

    def __init__(self) -> None:
        self.steps: list[tuple[str, float]] = []
        self.windows: list[tuple[str, float, float]] = []  # step, start, end (epoch s)

    @contextmanager
    def step(self, description: str, total: float | None = None) -> Iterator[Step]:
        clock, start = time.perf_counter(), time.time()
        try:
            yield Step()
        finally:
            self.steps.append((short(description), time.perf_counter() - clock))
            self.windows.append((short(description), start, time.time()))


def short(text: str) -> str:
    return text.replace("time_series_covid19_", "").replace("_global.csv", "")


@dataclass
class JobGroup:
    """Spark jobs of one step and action, from Spark's status store."""

    step: str
    action: str
    jobs: int = 0
    wall: float = 0.0
    task: float = 0.0  # summed task run time, s
    cpu: float = 0.0
    gc: float = 0.0
    tasks: int = 0
    input_mb: float = 0.0
    output_mb: float = 0.0
    shuffle_mb: float = 0.0
    spill_mb: float = 0.0
    intervals: list[tuple[float, float]] = field(default_factory=list)  # epoch s


def _option(value: Any) -> Any:
    return value.get() if value.isDefined() else None


def _each(seq: Any) -> Iterator[Any]:
    """The items of a Java or Scala collection seen through py4j."""
    items = seq.iterator()
    while items.hasNext():
        yield items.next()


def last_job_id(spark: Any) -> int:
    jobs = spark._jsc.sc().statusStore().jobsList(spark._jvm.java.util.ArrayList())
    return max((j.jobId() for j in _each(jobs)), default=-1)


def _union(intervals: list[tuple[float, float]], start: float, end: float) -> float:
    """Length of the union of ``intervals`` clipped to [start, end]."""
    total, reach = 0.0, start
    for a, b in sorted(intervals):
        a, b = max(a, reach), min(b, end)
        if b > a:
            total += b - a
            reach = b
    return total


@dataclass
class StageRow:
    """One stage that ran, for the timeline."""

    stage: int
    step: str
    action: str
    start: float  # epoch s
    end: float
    tasks: int
    task: float  # summed task run time, s
    cpu: float
    input_mb: float
    output_mb: float
    shuffle_read_mb: float
    shuffle_write_mb: float


def spark_jobs(spark: Any, after: int) -> tuple[list[JobGroup], list[StageRow]]:
    """Jobs with id > ``after``, grouped by step (the job group's description) and action,
    and the stages they ran.

    A job started outside any step (e.g. covid_cases' row count) carries the
    description its thread last had, or none: its action tells it apart.
    """
    jvm = spark._jvm
    store = spark._jsc.sc().statusStore()
    no_quantiles = spark.sparkContext._gateway.new_array(jvm.double, 0)
    stages: dict[int, list[float]] = {}
    stage_list = store.stageList(
        jvm.java.util.ArrayList(), False, False, no_quantiles, jvm.java.util.ArrayList()
    )
    times: dict[int, tuple[float, float, float]] = {}  # stage -> start, end, shuffle read MB
    for s in _each(stage_list):
        began, ended = _option(s.submissionTime()), _option(s.completionTime())
        if began is not None and ended is not None:
            times[s.stageId()] = (
                began.getTime() / 1e3,
                ended.getTime() / 1e3,
                s.shuffleReadBytes() / 1e6,
            )
        row = stages.setdefault(s.stageId(), [0.0] * 8)
        values = (
            s.executorRunTime() / 1e3,
            s.executorCpuTime() / 1e9,
            s.jvmGcTime() / 1e3,
            s.numCompleteTasks(),
            s.inputBytes() / 1e6,
            s.outputBytes() / 1e6,
            s.shuffleWriteBytes() / 1e6,
            (s.memoryBytesSpilled() + s.diskBytesSpilled()) / 1e6,
        )
        for i, v in enumerate(values):
            row[i] += v
    groups: dict[tuple[str, str], JobGroup] = {}
    timeline: list[StageRow] = []
    for job in _each(store.jobsList(jvm.java.util.ArrayList())):
        if job.jobId() <= after:
            continue
        submitted, completed = _option(job.submissionTime()), _option(job.completionTime())
        if submitted is None or completed is None:
            continue
        begin, finish = submitted.getTime() / 1e3, completed.getTime() / 1e3
        step = short(_option(job.description()) or "(no step)")
        action = job.name().split(" at ")[0]
        group = groups.setdefault((step, action), JobGroup(step, action))
        group.jobs += 1
        group.wall += finish - begin
        group.intervals.append((begin, finish))
        for stage_id in str(job.stageIds().mkString(",")).split(","):
            row = stages.get(int(stage_id)) if stage_id else None
            if row is None:
                continue
            if int(stage_id) in times and row[3] > 0:
                a, b, read = times[int(stage_id)]
                timeline.append(
                    StageRow(int(stage_id), step, action, a, b, int(row[3]), row[0], row[1],
                             row[4], row[5], read, row[6])
                )  # fmt: skip
            group.task += row[0]
            group.cpu += row[1]
            group.gc += row[2]
            group.tasks += int(row[3])
            group.input_mb += row[4]
            group.output_mb += row[5]
            group.shuffle_mb += row[6]
            group.spill_mb += row[7]
    timeline.sort(key=lambda r: (r.start, r.stage))
    return list(groups.values()), timeline


@dataclass
class SparkRun:
    scale: int
    wall: float  # CovidEtl.run, end to end
    timings: dict[str, float]
    rows: int
    measure_rows: dict[str, int]
    combined_rows: int
    tables: dict[str, str]
    steps: list[tuple[str, float]]
    windows: list[tuple[str, float, float]]
    jobs: list[JobGroup]
    stages: list[StageRow]
    cpu: CpuUse
    started: float  # epoch s

    @property
    def seconds(self) -> float:
        return self.timings["transform"] + self.timings["write"]


def spark_run(
    settings: Settings, source: Path, scale: int, spark: Any | None, pids: list[int]
) -> tuple[SparkRun, Any]:
    """One CovidEtl run; returns it and the SparkSession it used."""
    check_metastore(settings)
    progress = TimedProgress()
    after = last_job_id(spark) if spark is not None else -1
    with cpu_meter(pids) as cpu:
        clock, started = time.perf_counter(), time.time()
        report: EtlReport = CovidEtl(settings, progress).run(str(source), spark=spark)
        wall = time.perf_counter() - clock
    if spark is None:
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession()
        if spark is None:
            from lakeward.spark import build_session

            spark = build_session(settings, "lakeward-covid-etl")  # the running one
    try:
        jobs, stages = spark_jobs(spark, after)
    except Exception as exc:  # Spark internals; the timings stand without them
        say(f"  (Spark job details unavailable: {exc})")
        jobs, stages = [], []
    measure_rows = {m.table: m.output_rows for m in report.measures}
    run = SparkRun(
        scale=scale,
        wall=wall,
        timings=dict(report.timings),
        rows=sum(measure_rows.values()) + report.combined_rows,
        measure_rows=measure_rows,
        combined_rows=report.combined_rows,
        tables={t: local_path(u) for t, u in report.tables.items()},
        steps=progress.steps,
        windows=progress.windows,
        jobs=jobs,
        stages=stages,
        started=started,
        cpu=cpu,
    )
    return run, spark


def local_path(uri: str) -> str:
    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme == "file" else uri


def print_stages(run: SparkRun) -> None:
    say("  stage timeline (start/end: s since the run began; task s: summed task time):")
    say(
        f"    {'stage':>5} {'step':<28} {'action':<16} {'start':>6} {'end':>6} {'tasks':>5} "
        f"{'task s':>7} {'cpu s':>7} {'in MB':>7} {'out MB':>7} {'shufR MB':>8} {'shufW MB':>8}"
    )
    for r in run.stages:
        say(
            f"    {r.stage:>5} {r.step:<28} {r.action:<16} {r.start - run.started:>6.1f} "
            f"{r.end - run.started:>6.1f} {r.tasks:>5} {r.task:>7.2f} {r.cpu:>7.2f} "
            f"{r.input_mb:>7.1f} {r.output_mb:>7.1f} {r.shuffle_read_mb:>8.1f} "
            f"{r.shuffle_write_mb:>8.1f}"
        )


def print_spark_run(run: SparkRun, label: str) -> None:
    t = run.timings
    say(
        f"Spark {label}: wall {run.wall:.1f} s = spark_start {t['spark_start']:.1f} + "
        f"read {t['read']:.1f} + transform {t['transform']:.1f} + write {t['write']:.1f} + "
        f"register {t['register']:.1f} (+ {run.wall - sum(t.values()):.1f} other); "
        f"output rows {run.rows:,}"
    )
    say(f"  {run.cpu}")
    say("  steps (wall s): " + ", ".join(f"{name} {s:.2f}" for name, s in run.steps))
    for phase, prefix in (("transform", "parse "), ("write", "write ")):
        windows = [(a, b) for name, a, b in run.windows if name.startswith(prefix)]
        if windows:
            covered = _union(windows, min(a for a, _ in windows), max(b for _, b in windows))
            say(
                f"  {phase} {t[phase]:.2f} s: its {len(windows)} steps (side by side if they "
                f"overlap) span {covered:.2f} s, summed {sum(b - a for a, b in windows):.2f} s; "
                f"{t[phase] - covered:.2f} s outside them"
            )
    if not run.jobs:
        return
    say("  Spark jobs by step and action (job s: summed job wall; task s: summed task time):")
    say(
        f"    {'step':<28} {'action':<8} {'jobs':>4} {'job s':>7} {'task s':>7} {'cpu s':>7} "
        f"{'gc s':>6} {'tasks':>5} {'in MB':>7} {'out MB':>7} {'shuf MB':>7} {'spill MB':>8}"
    )
    for g in run.jobs:
        say(
            f"    {g.step:<28} {g.action:<8} {g.jobs:>4} {g.wall:>7.2f} {g.task:>7.2f} "
            f"{g.cpu:>7.2f} {g.gc:>6.2f} {g.tasks:>5} {g.input_mb:>7.1f} {g.output_mb:>7.1f} "
            f"{g.shuffle_mb:>7.1f} {g.spill_mb:>8.1f}"
        )
    outside = []
    for name, start, end in run.windows:
        if name.startswith(("parse ", "write ")):
            own = [i for g in run.jobs if g.step == name for i in g.intervals]
            outside.append(f"{name} {end - start - _union(own, start, end):.2f}")
    say(
        "  time in a step while none of its Spark jobs runs (driver side, s): " + ", ".join(outside)
    )


# --- DuckDB runs ----------------------------------------------------------------------


@dataclass
class DuckRun:
    scale: int
    variant: str
    result: DuckResult
    cpu: CpuUse

    @property
    def seconds(self) -> float:
        return self.result.seconds

    @property
    def rows(self) -> int:
        return self.result.total_rows


def duck_run(source: Path, out_dir: Path, scale: int, variant: str, pids: list[int]) -> DuckRun:
    shutil.rmtree(out_dir, ignore_errors=True)
    with cpu_meter(pids) as cpu:
        result = run_duckdb(source, out_dir, variant)
    return DuckRun(scale, variant, result, cpu)


def print_duck_run(run: DuckRun, label: str) -> None:
    r = run.result
    say(
        f"DuckDB '{run.variant}' {label}: {r.seconds:.1f} s, output rows {r.total_rows:,} "
        f"(threads={r.threads}, memory_limit={r.memory_limit}: DuckDB's defaults)"
    )
    say(f"  {run.cpu}")
    say("  steps (wall s): " + ", ".join(f"{k} {v:.2f}" for k, v in r.steps.items()))


def measure_duckdb(
    source: Path,
    out_dir: Path,
    scale: int,
    variant: str,
    spark: SparkRun,
    args: Any,
    pids: list[int],
) -> DuckRun:
    """The fastest of ``--repeat`` DuckDB runs, its output checked against Spark's."""
    best = None
    for attempt in range(args.repeat):
        wait_for_quiet(pids, args.quiet_wait)
        run = duck_run(source, out_dir, scale, variant, pids)
        print_duck_run(run, f"{scale}x" + (f" run {attempt + 1}" if args.repeat > 1 else ""))
        problems = compare_outputs(spark.tables, out_dir, full=scale == 1)
        if problems:
            say("  outputs DIFFER from Spark's: " + "; ".join(problems))
        else:
            say(
                "  outputs: same as Spark's "
                + ("(every row compared)" if scale == 1 else "(row counts, keys and sums)")
            )
        if best is None or run.seconds < best.seconds:
            best = run
    assert best is not None
    shutil.rmtree(out_dir, ignore_errors=True)
    return best


# --- the report -----------------------------------------------------------------------


@dataclass
class Row:
    scale: int
    rows: int
    spark_s: float
    spark_rate: float
    spark_rate_with_start: float
    duck_s: float
    duck_rate: float
    spark_others: float
    duck_others: float
    spark_growth: float | None = None
    duck_growth: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def ratio(self) -> float:
        return self.spark_rate / self.duck_rate


def rows_of(
    measured: list[tuple[SparkRun, dict[str, DuckRun]]], variant: str, spark_start: float
) -> list[Row]:
    rows: list[Row] = []
    for s, ducks in measured:
        d = ducks[variant]
        row = Row(
            scale=s.scale,
            rows=s.rows,
            spark_s=s.seconds,
            spark_rate=s.rows / s.seconds,
            spark_rate_with_start=s.rows / (spark_start + s.seconds),
            duck_s=d.seconds,
            duck_rate=d.rows / d.seconds,
            spark_others=s.cpu.others,
            duck_others=d.cpu.others,
        )
        if d.rows != s.rows:
            row.notes.append(f"DuckDB wrote {d.rows:,} rows, Spark {s.rows:,}")
        if rows:
            row.spark_growth = row.spark_rate / rows[-1].spark_rate
            row.duck_growth = row.duck_rate / rows[-1].duck_rate
        rows.append(row)
    return rows


def table_lines(rows: list[Row]) -> list[str]:
    head = (
        "| scale | output rows | Spark s | Spark Mrows/s | Spark Mrows/s incl. start | "
        "DuckDB s | DuckDB Mrows/s | Spark/DuckDB rows/s | Spark rows/s growth | "
        "DuckDB rows/s growth | other load (Spark / DuckDB), cores |"
    )
    lines = [head, "|" + "---|" * head.count(" | ") + "---|"]

    def growth(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}x"

    for r in rows:
        lines.append(
            f"| {r.scale}x | {r.rows:,} | {r.spark_s:.1f} | {r.spark_rate / 1e6:.2f} | "
            f"{r.spark_rate_with_start / 1e6:.2f} | {r.duck_s:.1f} | {r.duck_rate / 1e6:.2f} | "
            f"{r.ratio:.2f} | {growth(r.spark_growth)} | {growth(r.duck_growth)} | "
            f"{r.spark_others:.2f} / {r.duck_others:.2f} |"
        )
    return lines


def verdict(ok: bool) -> str:
    return "MET" if ok else "MISSED"


def target_lines(first: SparkRun, rows: list[Row]) -> list[str]:
    lines = []
    wall = first.wall
    over = (
        f"{wall - TARGET_FULL_WALL:.1f} s ({wall / TARGET_FULL_WALL:.2f}x) over"
        if (wall > TARGET_FULL_WALL)
        else f"{TARGET_FULL_WALL - wall:.1f} s under"
    )
    lines.append(
        f"- full JHU ETL under {TARGET_FULL_WALL:.0f} s wall including Spark start: "
        f"{verdict(wall <= TARGET_FULL_WALL)} ({wall:.1f} s; {over})"
    )
    big = next((r for r in rows if r.scale == 100), rows[-1] if rows else None)
    if big is None or big.scale == 1:
        lines.append("- 100x targets: not measured (no scaled run)")
        return lines
    label = f"{big.scale}x" + (
        "" if big.scale == 100 else " (largest scale run; target is at 100x)"
    )
    rate = big.spark_rate
    lines.append(
        f"- {label}: Spark at least {TARGET_RATE / 1e6:.0f} M output rows/s: "
        f"{verdict(rate >= TARGET_RATE)} ({rate / 1e6:.2f} M rows/s, "
        f"{rate / TARGET_RATE:.2f}x the target)"
    )
    lines.append(
        f"- {label}: Spark within 2x of DuckDB rows/s: {verdict(big.ratio >= TARGET_RATIO)} "
        f"(Spark/DuckDB = {big.ratio:.2f}; DuckDB is {1 / big.ratio:.2f}x faster)"
    )
    return lines


# --- main -----------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", default=DEFAULT_SOURCE, help="dir of the three JHU CSVs")
    parser.add_argument("--scales", default=DEFAULT_SCALES, help="comma-separated row multipliers")
    parser.add_argument("--keep", action="store_true", help="keep the stack and files")
    parser.add_argument("--driver-memory", default=DEFAULT_DRIVER_MEMORY)
    parser.add_argument("--repeat", type=int, default=1, help="runs per scale; the fastest counts")
    parser.add_argument(
        "--duckdb-variant",
        choices=VARIANTS,
        default="list",
        help="the DuckDB baseline (see bench/_duckdb_etl.py)",
    )
    parser.add_argument(
        "--duckdb-also",
        choices=(*VARIANTS, "none"),
        default="locjoin",
        help="a second DuckDB variant measured for reference",
    )
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--stages", action="store_true", help="print every Spark stage run")
    parser.add_argument(
        "--quiet-wait",
        type=float,
        default=120,
        help="before each measurement wait up to this many s for other processes to go idle",
    )
    args = parser.parse_args(argv)
    source = Path(args.source).expanduser().resolve()
    scales = [int(s) for s in args.scales.split(",") if s.strip()]

    root = Path(tempfile.mkdtemp(prefix="lakeward-bench-"))
    data_dir = root / "stack"
    say(
        f"machine: {os.cpu_count()} cores, {platform.platform()}, load average "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    say(
        f"Spark: local[*], driver memory {args.driver_memory}, one session for all runs; "
        f"DuckDB: default settings (threads = cores), variant '{args.duckdb_variant}'"
        + ("" if args.duckdb_also == "none" else f" (and '{args.duckdb_also}' for reference)")
    )
    say(f"work dir: {root}")
    version = lakeward_version()
    digest = etl_code_digest()
    say(f"lakeward measured: {version}")
    spark = None
    settings: Settings | None = None
    results: dict[str, Any] = {
        "scales": scales,
        "driver_memory": args.driver_memory,
        "lakeward": version,
    }
    try:
        clock = time.perf_counter()
        settings = start_stack(data_dir, args.driver_memory)
        say(
            f"metastore started in {time.perf_counter() - clock:.1f} s "
            f"(port {settings.metastore.port}; not part of any measurement)"
        )
        pids = metastore_pid(settings)

        # 1. The real files, Spark started by the run itself; 2. scaled copies, Spark reused.
        variants = [args.duckdb_variant]
        if args.duckdb_also not in ("none", args.duckdb_variant):
            variants.append(args.duckdb_also)
        duck_out = root / "duckdb-out"
        measured: list[tuple[SparkRun, dict[str, DuckRun]]] = []
        first: SparkRun | None = None
        spark_start = 0.0
        for scale in [1, *scales]:
            if scale == 1:
                say("\n== 1x: the real JHU files ==")
                input_dir = source
            else:
                say(f"\n== {scale}x ==")
                input_dir = root / f"synthetic-{scale}x"
                counts = make_synthetic(source, input_dir, scale)
                size = sum(p.stat().st_size for p in input_dir.iterdir()) / 1e6
                rows_in = sum(counts.values())
                say(f"synthetic input: {rows_in:,} data rows, {size:.0f} MB (not timed)")
            best_spark = None
            for attempt in range(1 if scale == 1 else args.repeat):
                wait_for_quiet(pids, args.quiet_wait)
                run, spark = spark_run(settings, input_dir, scale, spark, pids)
                tag = f"{scale}x" + (f" run {attempt + 1}" if args.repeat > 1 else "")
                print_spark_run(run, "1x (cold: includes Spark start)" if scale == 1 else tag)
                if args.stages:
                    print_stages(run)
                if best_spark is None or run.seconds < best_spark.seconds:
                    best_spark = run
            assert best_spark is not None
            if scale == 1:
                first, spark_start = best_spark, best_spark.timings["spark_start"]
            ducks = {
                v: measure_duckdb(input_dir, duck_out, scale, v, best_spark, args, pids)
                for v in variants
            }
            measured.append((best_spark, ducks))
            if scale != 1 and not args.keep:
                shutil.rmtree(input_dir, ignore_errors=True)
        assert first is not None

        # 3. The tables.
        tables = {v: rows_of(measured, v, spark_start) for v in variants}
        rows = tables[args.duckdb_variant]
        say("\n== results ==")
        say(
            "Spark s = transform + write (report.timings); Spark start "
            f"{spark_start:.1f} s counted once, in 'incl. start' and the 1x run; "
            "rows/s growth = rows/s at this scale / rows/s at the previous one (1.00x = linear "
            "cost); other load = CPU cores used by the rest of the machine while measuring."
        )
        for variant, variant_rows in tables.items():
            say(
                f"\nDuckDB variant '{variant}'"
                + (" (the baseline)" if variant == variants[0] else " (for reference)")
                + ":"
            )
            for line in table_lines(variant_rows):
                say(line)
            for row in variant_rows:
                for note in row.notes:
                    say(f"note {row.scale}x: {note}")
        say("\ntargets:")
        for line in target_lines(first, rows):
            say(line)
        for variant in variants[1:]:
            for line in target_lines(first, tables[variant])[2:]:
                say(f"  for reference, against DuckDB '{variant}': {line[2:]}")
        say(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        if etl_code_digest() != digest:
            say(
                "WARNING: the ETL code changed on disk during the run; the run used the code "
                f"as it was at the start ({version}), except modules first imported later"
            )
        results.update(
            spark=[asdict(s) for s, _ in measured],
            duckdb=[{v: asdict(d) for v, d in ducks.items()} for _, ducks in measured],
            tables={v: [{**asdict(r), "ratio": r.ratio} for r in t] for v, t in tables.items()},
            targets=target_lines(first, rows),
        )
        if args.json:
            args.json.write_text(json.dumps(results, indent=2, default=str))
            say(f"results written to {args.json}")
    finally:
        if spark is not None and not args.keep:
            spark.stop()
        if args.keep:
            say(f"\nkept: {root} (stop it with: lakeward down --data-dir {data_dir})")
        else:
            if settings is not None or (data_dir / "stack.json").exists():
                try:
                    lakeward_cli("down", "--data-dir", str(data_dir))
                except RuntimeError as exc:
                    say(f"stopping the stack failed: {exc}")
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
