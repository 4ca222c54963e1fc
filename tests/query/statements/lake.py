"""The JHU files' confirmed cases as lake tables, for statement tests on the in-memory
catalog (the ``sales`` fixture of this folder's conftest). Not a test module."""

from __future__ import annotations

import csv
import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from lakeward.query.model import QueryState
from lakeward.query.service import QueryService
from tests.query.support import MEMORY, run, wait

DAYS = ("9/8/20", "9/9/20", "9/10/20")
COUNTRIES = ("Italy", "Spain", "US")
SERIES_COUNTRIES = ("France", "Italy", "Spain")


def jhu_rows(jhu_dir: Path) -> list[dict[str, str]]:
    with open(jhu_dir / "time_series_covid19_confirmed_global.csv", newline="") as f:
        return list(csv.DictReader(f))


def jhu_date(day: str) -> datetime.date:
    month, date, year = (int(p) for p in day.split("/"))
    return datetime.date(2000 + year, month, date)


def jhu_cases(jhu_dir: Path) -> pa.Table:
    """Country-level confirmed cases of three countries on three days."""
    rows = [
        (record["Country/Region"], jhu_date(day), int(record[day]))
        for record in jhu_rows(jhu_dir)
        if record["Country/Region"] in COUNTRIES and not record["Province/State"]
        for day in DAYS
    ]
    country, day, confirmed = zip(*rows, strict=True)
    return pa.table({"country": country, "day": pa.array(day, pa.date32()), "confirmed": confirmed})


def jhu_series(jhu_dir: Path) -> pa.Table:
    """Every row of three countries, every day: province_state, country, lat, date, confirmed."""
    records = [r for r in jhu_rows(jhu_dir) if r["Country/Region"] in SERIES_COUNTRIES]
    days = [k for k in records[0] if k.count("/") == 2]
    columns: dict[str, list[object]] = {k: [] for k in ("province_state", "country", "lat")}
    dates: list[datetime.date] = []
    confirmed: list[int] = []
    for record in records:
        for day in days:
            columns["province_state"].append(record["Province/State"] or None)
            columns["country"].append(record["Country/Region"])
            columns["lat"].append(float(record["Lat"]) if record["Lat"] else None)
            dates.append(jhu_date(day))
            confirmed.append(int(record[day]))
    return pa.table(
        {
            **columns,
            "date": pa.array(dates, pa.date32()),
            "confirmed": pa.array(confirmed, pa.int64()),
        }
    )


def put_table(service: QueryService, name: str, table: pa.Table) -> str:
    """``table`` as one Parquet file in a folder of the lake; the folder's location."""
    settings = service.settings
    directory = Path(settings.data_dir) / "lake" / settings.lake.data_bucket / name
    directory.mkdir(parents=True)
    pq.write_table(table, directory / "part-0.parquet")
    return f"{settings.lake_root}/{settings.lake.data_bucket}/{name}/"


def as_analyst(service: QueryService, sql: str) -> tuple[list[str], list[list[str | None]]]:
    return run(service, sql, catalog=MEMORY, database="sales", principal="analyst")


def written_as_analyst(service: QueryService, sql: str) -> int:
    """Run a write as the analyst; the rows it wrote (its UpdateCount: a write answers no row)."""
    execution = wait(
        service,
        service.start_query_execution(sql, catalog=MEMORY, database="sales", principal="analyst"),
    )
    assert execution.state == QueryState.SUCCEEDED, execution.state_change_reason
    page = service.get_query_results(execution.id)
    assert page.rows == [["rows"]]
    return page.update_count
