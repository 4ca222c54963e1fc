"""DDL, views and writes end to end on an in-memory catalog: the statements' logic, the
planner, DuckDB, the journal and access control, without Java or a metastore."""

from __future__ import annotations

import csv
import datetime
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakeward.errors import InvalidRequest
from lakeward.query.model import QueryState
from lakeward.query.service import QueryService
from lakeward.query.statements import PARSERS, parse_statement, parser_for
from lakeward.query.statements.writes.commands import CreateTableAs
from tests.query.support import MEMORY, failure, run, wait

DAYS = ("9/8/20", "9/9/20", "9/10/20")
COUNTRIES = ("Italy", "Spain", "US")
# The JHU files' own figures (../shared/data/jhu_csse/README.md).
ITALY_0910, US_0910 = 283180, 6420040


def as_analyst(service: QueryService, sql: str) -> tuple[list[str], list[list[str | None]]]:
    return run(service, sql, catalog=MEMORY, database="sales", principal="analyst")


def jhu_cases(jhu_dir: Path) -> pa.Table:
    """Country-level confirmed cases of three countries on three days, from the JHU file."""
    rows = []
    with open(jhu_dir / "time_series_covid19_confirmed_global.csv", newline="") as f:
        for record in csv.DictReader(f):
            if record["Country/Region"] in COUNTRIES and not record["Province/State"]:
                for day in DAYS:
                    month, date, year = (int(p) for p in day.split("/"))
                    when = datetime.date(2000 + year, month, date)
                    rows.append((record["Country/Region"], when, int(record[day])))
    country, day, confirmed = zip(*rows, strict=True)
    return pa.table({"country": country, "day": pa.array(day, pa.date32()), "confirmed": confirmed})


def put_table(service: QueryService, name: str, table: pa.Table) -> str:
    settings = service.settings
    directory = Path(settings.data_dir) / "lake" / settings.lake.data_bucket / name
    directory.mkdir(parents=True)
    pq.write_table(table, directory / "part-0.parquet")
    return f"{settings.lake_root}/{settings.lake.data_bucket}/{name}/"


@pytest.fixture
def sales(memory_service: QueryService, jhu_dir: Path) -> QueryService:
    location = put_table(memory_service, "cases", jhu_cases(jhu_dir))
    as_analyst(memory_service, "CREATE DATABASE sales")
    as_analyst(
        memory_service,
        "CREATE EXTERNAL TABLE cases (country string, day date, confirmed bigint) "
        f"STORED AS PARQUET LOCATION '{location}'",
    )
    return memory_service


def test_a_table_made_with_ddl_is_queried_described_and_listed(sales: QueryService) -> None:
    _, rows = as_analyst(
        sales, "SELECT confirmed FROM cases WHERE country = 'Italy' AND day = DATE '2020-09-10'"
    )
    assert rows == [[str(ITALY_0910)]]
    assert as_analyst(sales, "SHOW TABLES")[1] == [["cases"]]
    assert [r[0] for r in as_analyst(sales, f"SHOW DATABASES IN {MEMORY}")[1]] == ["sales"]
    described = [r[0] for r in as_analyst(sales, "DESCRIBE cases")[1]]
    assert described == ["country\tstring", "day\tdate", "confirmed\tbigint"]


def test_ctas_and_insert_write_a_partitioned_table_the_catalog_registers(
    sales: QueryService,
) -> None:
    _, written = as_analyst(
        sales,
        "CREATE TABLE by_country WITH (format = 'PARQUET', partitioned_by = ARRAY['country']) "
        "AS SELECT day, confirmed, country FROM cases WHERE day < DATE '2020-09-10'",
    )
    assert written == [["6"]]
    partitions = [r[0] for r in as_analyst(sales, "SHOW PARTITIONS by_country")[1]]
    assert partitions == [f"country={c}" for c in COUNTRIES]
    _, inserted = as_analyst(
        sales, "INSERT INTO by_country SELECT day, confirmed, country FROM cases "
        "WHERE day = DATE '2020-09-10'"
    )  # fmt: skip
    assert inserted == [["3"]]
    _, rows = as_analyst(
        sales, "SELECT country, max(confirmed) FROM by_country GROUP BY country ORDER BY 1"
    )
    assert dict((c, int(n or 0)) for c, n in rows)["US"] == US_0910
    refused = failure(
        sales,
        "INSERT INTO by_country SELECT day, country, country FROM cases",
        catalog=MEMORY,
        database="sales",
        principal="analyst",
    )
    assert "Insert query has mismatched column types" in refused


def test_a_view_reads_its_query_and_is_refused_once_its_table_changed(sales: QueryService) -> None:
    as_analyst(
        sales, "CREATE VIEW italy AS SELECT day, confirmed FROM cases WHERE country = 'Italy'"
    )
    assert as_analyst(sales, "SHOW VIEWS")[1] == [["italy"]]
    _, rows = as_analyst(sales, "SELECT confirmed FROM italy WHERE day = DATE '2020-09-10'")
    assert rows == [[str(ITALY_0910)]]
    as_analyst(sales, "ALTER TABLE cases REPLACE COLUMNS (country string, day date, n bigint)")
    stale = failure(
        sales, "SELECT * FROM italy", catalog=MEMORY, database="sales", principal="analyst"
    )
    assert "is stale" in stale
    as_analyst(sales, "DROP VIEW italy")
    assert as_analyst(sales, "SHOW VIEWS")[1] == []


def test_create_view_checks_the_right_to_read_the_data_it_probes(
    sales: QueryService, jhu_dir: Path
) -> None:
    location = put_table(sales, "secret", jhu_cases(jhu_dir))
    as_analyst(
        sales,
        "CREATE EXTERNAL TABLE secret (country string, day date, confirmed bigint) "
        f"STORED AS PARQUET LOCATION '{location}'",
    )
    kwargs: dict[str, object] = {"catalog": MEMORY, "database": "sales", "principal": "analyst"}
    assert "s3:GetObject" in failure(sales, "SELECT * FROM secret", **kwargs)
    # The view's columns come from its query run with LIMIT 0: that run reads the table's
    # data as any query does, so it needs the same right, and no view is made without it.
    refused = failure(sales, "CREATE VIEW peek AS SELECT * FROM secret", **kwargs)
    assert "s3:GetObject" in refused
    assert as_analyst(sales, "SHOW VIEWS")[1] == []


def test_a_write_refused_midway_leaves_no_table_and_no_file(sales: QueryService) -> None:
    refused = failure(
        sales,
        "CREATE TABLE doubled WITH (partitioned_by = ARRAY['country']) "
        "AS SELECT country, day FROM cases",
        catalog=MEMORY,
        database="sales",
        principal="analyst",
    )
    assert "partition columns must be the last columns" in refused
    assert as_analyst(sales, "SHOW TABLES")[1] == [["cases"]]
    staging = Path(sales.settings.data_dir) / "query" / "staging"
    assert not staging.exists() or list(staging.iterdir()) == []


def test_every_statement_has_one_parser_whatever_the_import_order() -> None:
    for words, parser in PARSERS.items():
        assert parser_for(list(words)) is parser
    for first, second in (("writes.parsing", "ddl.tables"), ("ddl.tables", "writes.parsing")):
        script = (
            f"import lakeward.query.statements.{first}, lakeward.query.statements.{second}\n"
            "from lakeward.query.statements import parse_statement\n"
            "c = parse_statement('CREATE TABLE t AS SELECT 1 AS a', default_catalog='c',"
            " default_database='d', catalogs=['c'])\n"
            "print(type(c).__name__)\n"
        )
        found = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, check=True
        )
        assert found.stdout.strip() == CreateTableAs.__name__


def test_create_table_with_properties_but_no_query_says_what_it_needs() -> None:
    with pytest.raises(InvalidRequest, match="needs AS and a query"):
        parse_statement(
            "CREATE TABLE t WITH (format = 'PARQUET')",
            default_catalog="c",
            default_database="d",
            catalogs=["c"],
        )


def test_an_unknown_statement_is_told_what_lakeward_runs() -> None:
    with pytest.raises(InvalidRequest) as refused:
        parse_statement("SELEC 1", default_catalog="c", default_database="d", catalogs=["c"])
    message = str(refused.value)
    assert message.startswith("SELEC statements are not allowed")
    assert "CREATE TABLE AS" in message and "INSERT INTO" in message
    assert "only SELECT, SHOW, DESCRIBE and EXPLAIN" not in message


def test_a_select_in_memory_is_reused_as_any_query(sales: QueryService) -> None:
    sql = "SELECT count(*) FROM cases"
    first = sales.start_query_execution(sql, catalog=MEMORY, database="sales")
    assert wait(sales, first).state == QueryState.SUCCEEDED
    again = sales.start_query_execution(
        sql, catalog=MEMORY, database="sales", reuse_max_age_minutes=5
    )
    assert sales.get_query_execution(again).statistics.result_reused
