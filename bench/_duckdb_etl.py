"""The covid ETL's transform done by DuckDB in one process: the benchmark's baseline.

Same output as ``lakeward.ingest.transform`` for well-formed input (DuckDB
does no quarantine: the synthetic inputs have no bad rows):

* ``covid_confirmed_cases``, ``covid_deaths``, ``covid_recovered``: one row per
  location and day with ``province_state, country, lat, lon, date, <measure>,
  new_<measure>``; ``new_<measure>`` is the change since the previous day,
  null on the first day; recovered is null after 2021-08-04;
* ``covid_cases``: the full outer join of the three on province_state
  (null-safe), country and date, with confirmed, deaths, recovered and the
  first non-null lat/lon.

Variants:

* ``list`` (the default): each row's counts are read into a list and
  unnested, the daily change being a difference within the list; the measure
  tables are materialised (one row per location and day) and covid_cases is
  their full outer join on province_state, country and date;
* ``unpivot``: the same with DuckDB's UNPIVOT and a ``lag()`` window (slower);
* ``locjoin``: the measure tables stay one row per location with a list until
  they are written, and covid_cases joins locations (hundreds of rows per
  scale unit) before unnesting: the strategy of lakeward's Spark transform.

DuckDB runs with its own defaults (threads = number of cores).
"""

from __future__ import annotations

import csv
import time
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path

import duckdb

# (column, file, table, tracked until)
MEASURES = (
    ("confirmed", "time_series_covid19_confirmed_global.csv", "covid_confirmed_cases", None),
    ("deaths", "time_series_covid19_deaths_global.csv", "covid_deaths", None),
    ("recovered", "time_series_covid19_recovered_global.csv", "covid_recovered", date(2021, 8, 4)),
)
COMBINED = "covid_cases"
TABLES = (*(m[2] for m in MEASURES), COMBINED)


@dataclass
class DuckResult:
    seconds: float
    rows: dict[str, int]  # table -> rows written
    steps: dict[str, float] = field(default_factory=dict)
    threads: str = ""
    memory_limit: str = ""

    @property
    def total_rows(self) -> int:
        return sum(self.rows.values())


def _lit(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _header_dates(path: Path) -> list[date]:
    with open(path, encoding="utf-8-sig", newline="") as handle:
        header = next(csv.reader([handle.readline()]))
    return [datetime.strptime(h.strip(), "%m/%d/%y").date() for h in header[4:]]


def _reader(path: Path, dates: list[date]) -> str:
    """read_csv with every column typed: no sniffing; date columns named by ISO date."""
    columns = {
        "province_state": "VARCHAR",
        "country": "VARCHAR",
        "lat": "DOUBLE",
        "lon": "DOUBLE",
        **{d.isoformat(): "BIGINT" for d in dates},
    }
    spec = "{" + ", ".join(f"{_lit(k)}: {_lit(v)}" for k, v in columns.items()) + "}"
    return (
        f"read_csv({_lit(str(path))}, header = true, auto_detect = false, delim = ',', "
        f"quote = '\"', escape = '\"', columns = {spec})"
    )


def _days(dates: list[date]) -> str:
    return "[" + ", ".join(f"DATE '{d.isoformat()}'" for d in dates) + "]"


def _locations_sql(path: Path, dates: list[date], until: date | None) -> str:
    """One row per location: its counts as a list ``c`` (null where untracked)."""
    n = len(dates)
    counts = "[" + ", ".join(_ident(d.isoformat()) for d in dates) + "]"
    tracked = n if until is None else sum(1 for d in dates if d <= until)
    masked = "v"
    if tracked < n:
        masked = (
            f"list_transform(generate_series(1, {n}), "
            f"lambda i: CASE WHEN i <= {tracked} THEN v[i] END)"
        )
    return f"""
        SELECT province_state, country, lat, lon, {masked} AS c
        FROM (SELECT province_state, country, lat, lon, {counts} AS v
              FROM {_reader(path, dates)})
    """


def _unnest_sql(name: str, locations: str, dates: list[date]) -> str:
    """Location rows with a counts list -> one row per location and day."""
    change = (
        f"list_transform(generate_series(1, {len(dates)}), "
        "lambda i: CASE WHEN i > 1 THEN c[i] - c[i - 1] END)"
    )
    return f"""
        SELECT province_state, country, lat, lon,
               unnest({_days(dates)}) AS date, unnest(c) AS {name}, unnest({change}) AS new_{name}
        FROM ({locations})
    """


def _measure_sql_list(name: str, path: Path, dates: list[date], until: date | None) -> str:
    return _unnest_sql(name, _locations_sql(path, dates, until), dates)


def _measure_sql_unpivot(name: str, path: Path, dates: list[date], until: date | None) -> str:
    value = "v" if until is None else f"CASE WHEN d <= DATE '{until.isoformat()}' THEN v END"
    return f"""
        SELECT province_state, country, lat, lon, d AS date, {name},
               {name} - lag({name}) OVER (PARTITION BY province_state, country ORDER BY d)
                 AS new_{name}
        FROM (
            SELECT province_state, country, lat, lon, d, {value} AS {name}
            FROM (SELECT province_state, country, lat, lon, CAST(d AS DATE) AS d, v
                  FROM (UNPIVOT (FROM {_reader(path, dates)})
                        ON COLUMNS(* EXCLUDE (province_state, country, lat, lon))
                        INTO NAME d VALUE v))
        )
    """


COMBINED_SQL = """
    SELECT coalesce(c.province_state, d.province_state, r.province_state) AS province_state,
           coalesce(c.country, d.country, r.country) AS country,
           coalesce(c.lat, d.lat, r.lat) AS lat,
           coalesce(c.lon, d.lon, r.lon) AS lon,
           coalesce(c.date, d.date, r.date) AS date,
           c.confirmed, d.deaths, r.recovered
    FROM confirmed c
    FULL OUTER JOIN deaths d
      ON c.province_state IS NOT DISTINCT FROM d.province_state
     AND c.country = d.country AND c.date = d.date
    FULL OUTER JOIN recovered r
      ON coalesce(c.province_state, d.province_state) IS NOT DISTINCT FROM r.province_state
     AND coalesce(c.country, d.country) = r.country
     AND coalesce(c.date, d.date) = r.date
"""


def _combined_by_location_sql(dates: list[date]) -> str:
    """covid_cases from the location tables: join hundreds of locations, then unnest.

    A missing measure's list is null, which unnest pads with nulls.
    """
    return f"""
        SELECT coalesce(c.province_state, d.province_state, r.province_state) AS province_state,
               coalesce(c.country, d.country, r.country) AS country,
               coalesce(c.lat, d.lat, r.lat) AS lat,
               coalesce(c.lon, d.lon, r.lon) AS lon,
               unnest({_days(dates)}) AS date,
               unnest(c.c) AS confirmed, unnest(d.c) AS deaths, unnest(r.c) AS recovered
        FROM confirmed c
        FULL OUTER JOIN deaths d
          ON c.province_state IS NOT DISTINCT FROM d.province_state AND c.country = d.country
        FULL OUTER JOIN recovered r
          ON coalesce(c.province_state, d.province_state) IS NOT DISTINCT FROM r.province_state
         AND coalesce(c.country, d.country) = r.country
    """


VARIANTS = ("list", "unpivot", "locjoin")


def run_duckdb(source: Path, out_dir: Path, variant: str = "list") -> DuckResult:
    """Read the three CSVs in ``source``, write four Parquet files to ``out_dir``; timed.

    ``list`` and ``unpivot`` materialise each measure table (one row per
    location and day) and build covid_cases by joining those on location and
    day; ``locjoin`` keeps one row per location with its counts as a list,
    unnests when writing, and joins the locations (as lakeward's Spark
    transform does).
    """
    if variant not in VARIANTS:
        raise ValueError(f"unknown DuckDB variant {variant!r}; one of {', '.join(VARIANTS)}")
    out_dir.mkdir(parents=True, exist_ok=True)
    steps: dict[str, float] = {}
    parquet = "(FORMAT parquet, COMPRESSION snappy)"
    start = time.perf_counter()
    con = duckdb.connect()  # in memory, default settings (threads = cores)
    try:
        all_dates: list[date] = []
        for name, file_name, table, until in MEASURES:
            path = source / file_name
            dates = _header_dates(path)
            if variant == "locjoin" and all_dates and dates != all_dates:
                raise ValueError("the locjoin variant needs the same dates in every file")
            all_dates = dates
            target = _lit(str(out_dir / f"{table}.parquet"))
            clock = time.perf_counter()
            if variant == "locjoin":
                con.execute(f"CREATE TEMP TABLE {name} AS {_locations_sql(path, dates, until)}")
                steps[f"read {table}"] = time.perf_counter() - clock
                clock = time.perf_counter()
                con.execute(f"COPY ({_unnest_sql(name, name, dates)}) TO {target} {parquet}")
                steps[f"unnest+write {table}"] = time.perf_counter() - clock
                continue
            build = _measure_sql_list if variant == "list" else _measure_sql_unpivot
            con.execute(f"CREATE TEMP TABLE {name} AS {build(name, path, dates, until)}")
            steps[f"transform {table}"] = time.perf_counter() - clock
            clock = time.perf_counter()
            con.execute(f"COPY {name} TO {target} {parquet}")
            steps[f"write {table}"] = time.perf_counter() - clock
        clock = time.perf_counter()
        target = _lit(str(out_dir / f"{COMBINED}.parquet"))
        combined = _combined_by_location_sql(all_dates) if variant == "locjoin" else COMBINED_SQL
        con.execute(f"COPY ({combined}) TO {target} {parquet}")
        steps[f"join+write {COMBINED}"] = time.perf_counter() - clock
        seconds = time.perf_counter() - start
        threads, memory = con.execute(
            "SELECT current_setting('threads'), current_setting('memory_limit')"
        ).fetchone()
    finally:
        con.close()
    rows = {table: parquet_rows(out_dir / f"{table}.parquet") for table in TABLES}
    return DuckResult(seconds, rows, steps, str(threads), str(memory))


def parquet_rows(path: Path | str) -> int:
    """Rows in a Parquet file or glob, from the footers."""
    con = duckdb.connect()
    try:
        (count,) = con.execute(
            f"SELECT sum(num_rows) FROM parquet_file_metadata({_lit(str(path))})"
        ).fetchone()
    finally:
        con.close()
    return int(count or 0)


def _summary_sql(table: str, source: str) -> str:
    if table == COMBINED:
        values = "sum(confirmed), sum(deaths), sum(recovered), count(recovered)"
    else:
        name = next(m[0] for m in MEASURES if m[2] == table)
        values = f"sum({name}), sum(new_{name}), count({name}), count(new_{name})"
    return (
        f"SELECT count(*), count(DISTINCT (province_state, country)), min(date), max(date), "
        f"sum(round(lat * 1e6)::HUGEINT), sum(round(lon * 1e6)::HUGEINT), {values} "
        f"FROM read_parquet({_lit(source)})"
    )


def compare_outputs(spark_dirs: dict[str, str], duck_dir: Path, full: bool) -> list[str]:
    """Differences between Spark's and DuckDB's tables; empty when they agree.

    Always compares counts and sums per table; with ``full`` also every row
    (EXCEPT ALL both ways), which is cheap only at small scales.
    """
    problems = []
    con = duckdb.connect()
    try:
        for table in TABLES:
            spark_glob = f"{spark_dirs[table]}/*.parquet"
            duck_file = str(duck_dir / f"{table}.parquet")
            a = con.execute(_summary_sql(table, spark_glob)).fetchone()
            b = con.execute(_summary_sql(table, duck_file)).fetchone()
            if a != b:
                problems.append(f"{table}: summaries differ: Spark {a} vs DuckDB {b}")
                continue
            if full:
                for left, right, label in (
                    (spark_glob, duck_file, "only in Spark"),
                    (duck_file, spark_glob, "only in DuckDB"),
                ):
                    (extra,) = con.execute(
                        f"SELECT count(*) FROM (SELECT * FROM read_parquet({_lit(left)}) "
                        f"EXCEPT ALL SELECT * FROM read_parquet({_lit(right)}))"
                    ).fetchone()
                    if extra:
                        problems.append(f"{table}: {extra} rows {label}")
    finally:
        con.close()
    return problems
