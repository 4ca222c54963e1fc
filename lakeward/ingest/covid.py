"""The COVID-19 ETL: JHU CSSE time series -> raw zone -> Parquet -> Hive tables.

Run it with ``lakeward etl covid``, or as an ordinary PySpark application::

    spark-submit --master spark://host:7077 lakeward/ingest/covid.py --data-dir DIR

How a run stays safe to repeat and to kill:

* every table of a run is written to a fresh version directory
  ``covid_data/parquet/<table>/<version>/``; nothing a reader uses is touched;
* only when every table is written does the run point the tables at the new
  versions, one ``alter_table`` each (atomic in the metastore);
* a failed or killed run therefore leaves the previous tables as they were;
  its partial output is removed by the next successful run, which keeps the
  current and the previous version of each table (a reader that resolved the
  previous location a moment ago can still read it).
"""

from __future__ import annotations

import argparse
import fcntl
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, TypeVar

from lakeward.config import Settings, load_settings
from lakeward.errors import LakewardError, StackError
from lakeward.ingest import transform
from lakeward.ingest.fetch import fetched, first_line
from lakeward.ingest.jhu import (
    COMBINED_TABLE,
    LOCATION_COLUMNS,
    MEASURES,
    QUARANTINE_TABLE,
    Header,
    Measure,
    parse_header,
)
from lakeward.ingest.reports import EtlReport, MeasureReport
from lakeward.metastore.client import MetastoreClient
from lakeward.metastore.tables import Column, TableInfo
from lakeward.metastore.uris import metastore_uris
from lakeward.progress import Progress
from lakeward.query import formats
from lakeward.storage import Storage, load_storage
from lakeward.storage.paths import catalog_uri, data_uri, warehouse_uri

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

T = TypeVar("T")

RAW_PREFIX = "covid_data/csv"
PARQUET_PREFIX = "covid_data/parquet"
RUNS_PREFIX = "covid_data/runs"


def raw_key(measure: Measure) -> str:
    """Where a measure's file is kept: a directory of its own, the location of its table."""
    return f"{RAW_PREFIX}/{measure.name}/{measure.file_name}"


def raw_table(measure: Measure) -> str:
    return f"covid_raw_{measure.name}"


def raw_columns(header: Header) -> list[Column]:
    """A raw table's columns: the location's, then one per date column (d_2020_01_22), in
    the file's order; a date header that is not a date is kept as text, by position."""
    columns = [
        Column("province_state", "string", "Province/State"),
        Column("country_region", "string", "Country/Region"),
        Column("lat", "double", "Lat"),
        Column("long", "double", "Long"),
    ]
    for position, (text, day) in enumerate(
        zip(header.columns[len(LOCATION_COLUMNS) :], header.dates, strict=True),
        start=len(LOCATION_COLUMNS) + 1,
    ):
        if day is None:
            columns.append(Column(f"column_{position}", "string", text))
        else:
            columns.append(Column(f"d_{day:%Y_%m_%d}", "bigint", text))
    return columns


def new_run_id() -> str:
    return f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}"


class CovidEtl:
    """One ETL of the three JHU global time series into the stack's lake and metastore."""

    def __init__(
        self,
        settings: Settings,
        progress: Progress | None = None,
        storage: Storage | None = None,
    ) -> None:
        self.settings = settings
        self.progress = progress or Progress()
        self.storage = storage or load_storage(settings)
        self.bucket = settings.lake.data_bucket
        self.database = settings.covid.database
        self._combined_rows = 0

    def run(self, source: str | None = None, spark: SparkSession | None = None) -> EtlReport:
        source = source or self.settings.covid.source
        run_id = new_run_id()
        timings: dict[str, float] = {}
        with self._exclusive(), MetastoreClient(metastore_uris(self.settings)) as metastore:
            clock = time.perf_counter()
            if spark is None:
                from lakeward.spark import build_session

                with self.progress.step("start Spark"):
                    spark = build_session(self.settings, "lakeward-covid-etl")
            timings["spark_start"] = time.perf_counter() - clock

            clock = time.perf_counter()
            headers, reports = self._stage_raw(source)
            timings["read"] = time.perf_counter() - clock

            clock = time.perf_counter()
            parsed = self._parse(spark, headers, reports)
            timings["transform"] = time.perf_counter() - clock
            try:
                clock = time.perf_counter()
                report = EtlReport(run_id=run_id, measures=reports)
                locations = self._write(spark, run_id, headers, parsed, report)
                timings["write"] = time.perf_counter() - clock

                clock = time.perf_counter()
                previous = self._register(metastore, locations, run_id, headers)
                timings["register"] = time.perf_counter() - clock
            finally:
                for frame in parsed.values():
                    frame.unpersist()
            report.tables = locations
            report.timings = timings
            self._finish(report, previous)
        return report

    @contextmanager
    def _exclusive(self) -> Iterator[None]:
        lock_path = self.settings.data_dir / "run" / "covid-etl.lock"
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        with open(lock_path, "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise StackError(
                    "another covid ETL run of this stack is in progress; wait for it to finish"
                ) from None
            yield

    def _stage_raw(self, source: str) -> tuple[dict[str, Header], list[MeasureReport]]:
        """Check every header, then keep the files unchanged in the raw zone."""
        names = [m.file_name for m in MEASURES]
        with fetched(source, names, self.progress, what="covid source") as paths:
            headers = {
                m.name: parse_header(m.file_name, first_line(paths[m.file_name])) for m in MEASURES
            }
            reports = []
            self.storage.ensure_bucket(self.bucket)
            with self.progress.step("store raw files", total=len(MEASURES)) as step:
                for measure in MEASURES:
                    with open(paths[measure.file_name], "rb") as data:
                        info = self.storage.put(self.bucket, raw_key(measure), data)
                    # Kept directly under the raw zone before each measure had a directory
                    # (its table's location): the copy there is stale.
                    former = f"{RAW_PREFIX}/{measure.file_name}"
                    if self.storage.exists(self.bucket, former):
                        self.storage.delete(self.bucket, former)
                    reports.append(
                        MeasureReport(
                            measure=measure.name,
                            table=measure.table,
                            source=str(paths[measure.file_name])
                            if not source.startswith("http")
                            else f"{source.rstrip('/')}/{measure.file_name}",
                            raw_uri=info.uri,
                            size=info.size,
                            sha256=info.sha256 or "",
                            bad_date_columns=[c.header for c in headers[measure.name].bad_columns],
                        )
                    )
                    step.advance()
        return headers, reports

    def _parse(
        self, spark: SparkSession, headers: dict[str, Header], reports: list[MeasureReport]
    ) -> dict[str, DataFrame]:
        def parse(
            measure: Measure, report: MeasureReport
        ) -> tuple[DataFrame, transform.ParseStats]:
            header = headers[measure.name]
            with self.progress.spark_job(spark.sparkContext, f"parse {measure.file_name}"):
                frame = transform.parse_lines(
                    spark, catalog_uri(self.settings, report.raw_uri), header, measure
                )
                frame = frame.persist()
                stats = transform.parse_stats(frame)
            report.rows_read = stats.rows
            report.rows_loaded = stats.good
            report.rows_quarantined = stats.bad
            report.rows_without_coordinates = stats.no_coordinates
            report.output_rows = stats.good * len(header.good_dates)
            report.untracked_values = stats.good * transform.untracked_columns(header, measure)
            return frame, stats

        jobs = [partial(parse, m, r) for m, r in zip(MEASURES, reports, strict=True)]
        results = _concurrently(jobs)
        self._combined_rows = transform.combined_row_count([st for _f, st in results], headers)
        return {m.name: frame for m, (frame, _st) in zip(MEASURES, results, strict=True)}

    def _write(
        self,
        spark: SparkSession,
        run_id: str,
        headers: dict[str, Header],
        parsed: dict[str, DataFrame],
        report: EtlReport,
    ) -> dict[str, str]:
        def write(table: str, frame: DataFrame) -> str:
            location = self._name(f"{PARQUET_PREFIX}/{table}/v{run_id}")
            with self.progress.spark_job(spark.sparkContext, f"write {table}"):
                frame.write.mode("errorifexists").parquet(location)
            return location

        frames = {
            **{
                m.table: transform.measure_rows(parsed[m.name], headers[m.name], m)
                for m in MEASURES
            },
            COMBINED_TABLE: transform.combined_rows(parsed, headers),
            QUARANTINE_TABLE: transform.quarantine_rows(
                spark, run_id, parsed, headers, report.measures
            ),
        }
        written = _concurrently([partial(write, t, f) for t, f in frames.items()])
        report.combined_rows = self._combined_rows
        report.quarantined = sum(r.rows_quarantined for r in report.measures) + sum(
            len(h.bad_columns) for h in headers.values()
        )
        return {table: str(location) for table, location in zip(frames, written, strict=True)}

    def _register(
        self,
        metastore: MetastoreClient,
        locations: dict[str, str],
        run_id: str,
        headers: dict[str, Header],
    ) -> dict[str, str]:
        """Point every table at its new version, and the raw tables at the files just kept;
        return the locations the tables had before."""
        if self.database not in metastore.databases():
            metastore.create_database(
                self.database,
                catalog_uri(self.settings, f"{warehouse_uri(self.settings)}/{self.database}.db"),
            )
        schemas = transform.table_schemas()
        previous = {}
        with self.progress.step("register tables", total=len(locations)) as step:
            for table, location in locations.items():
                if metastore.table_exists(self.database, table):
                    previous[table] = metastore.table(self.database, table).location
                metastore.put_external_table(
                    TableInfo(
                        database=self.database,
                        name=table,
                        location=location,
                        columns=[Column(n, t, c) for n, t, c in schemas[table]],
                        parameters={
                            "lakeward.run_id": run_id,
                            "comment": transform.TABLE_COMMENTS[table],
                        },
                    )
                )
                step.advance()
        with self.progress.step("register raw tables", total=len(MEASURES)) as step:
            for measure in MEASURES:
                raw = self._raw_table(measure, headers[measure.name], run_id)
                metastore.put_external_table(raw)
                step.advance()
        return previous

    def _name(self, key: str) -> str:
        """The name of a place in the data bucket, as Spark and the metastore see it
        (``s3://``: Spark reaches the lake through s3a)."""
        return catalog_uri(self.settings, data_uri(self.settings, key))

    def _raw_table(self, measure: Measure, header: Header, run_id: str) -> TableInfo:
        """The raw zone's file of a measure as an external CSV table, as Athena users
        declare one: OpenCSVSerde (province names hold commas inside quotes), the header
        line skipped, one column per date."""
        location = self._name(f"{RAW_PREFIX}/{measure.name}")
        return TableInfo(
            database=self.database,
            name=raw_table(measure),
            location=location,
            columns=raw_columns(header),
            parameters={
                "skip.header.line.count": "1",
                # Empty Lat/Long (a few locations have none) read as NULL, not as a failure.
                "use.null.for.invalid.data": "true",
                "classification": "csv",
                "lakeward.run_id": run_id,
                "comment": f"the JHU CSSE {measure.name} file as fetched (raw zone)",
            },
            input_format=formats.TEXT_INPUT,
            output_format=formats.TEXT_OUTPUT,
            serde=formats.OPEN_CSV_SERDE,
            serde_parameters={"separatorChar": ",", "quoteChar": '"'},
        )

    def _finish(self, report: EtlReport, previous: dict[str, str]) -> None:
        """Drop versions no table uses any more, announce the new files, keep the report.

        The version each table had until now stays: a reader that looked the
        table up a moment ago may still be reading it.
        """
        for table, location in report.tables.items():
            prefix = f"{PARQUET_PREFIX}/{table}/"
            versions = self.storage.children(self.bucket, prefix)
            current = _version_of(location)
            keep = {current, _version_of(previous.get(table, ""))}
            for version in versions:
                if version not in keep:
                    self.storage.delete_prefix(self.bucket, f"{prefix}{version}/")
            self.storage.announce(self.bucket, f"{prefix}{current}/")
        self.storage.put(
            self.bucket, f"{RUNS_PREFIX}/{report.run_id}.json", report.to_json().encode()
        )


def main(argv: list[str] | None = None) -> int:
    """Entry point under spark-submit."""
    parser = argparse.ArgumentParser(description="lakeward covid ETL (PySpark application)")
    parser.add_argument("--data-dir", help="the stack's data dir (default ./.lakeward)")
    parser.add_argument("--source", help="directory or URL of the JHU CSSE files")
    args = parser.parse_args(argv)
    try:
        settings = load_settings(data_dir=args.data_dir)
        report = CovidEtl(settings).run(args.source)
    except LakewardError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    print(report.to_json())
    return 0


def _concurrently(jobs: Sequence[Callable[[], T]]) -> list[T]:
    """Run Spark actions side by side: each is small next to Spark's per-job
    overhead, so running them together keeps every core busy."""
    with ThreadPoolExecutor(max_workers=len(jobs), thread_name_prefix="etl") as pool:
        return list(pool.map(lambda job: job(), jobs))


def _version_of(location: str) -> str:
    return location.rstrip("/").rsplit("/", 1)[-1]


if __name__ == "__main__":
    sys.exit(main())
