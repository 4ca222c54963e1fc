"""DDL, views and writes end to end on an in-memory catalog: the statements' logic, the
planner, DuckDB, the journal and access control, without Java or a metastore."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from lakeward.errors import InvalidRequest
from lakeward.query.model import QueryState
from lakeward.query.service import QueryService
from lakeward.query.statements import PARSERS, parse_statement, parser_for
from lakeward.query.statements.writes.commands import CreateTableAs
from tests.query.statements.lake import (
    COUNTRIES,
    as_analyst,
    jhu_cases,
    put_table,
    written_as_analyst,
)
from tests.query.support import MEMORY, failure, wait

# The JHU files' own figures (../shared/data/jhu_csse/README.md).
ITALY_0910, US_0910 = 283180, 6420040


def test_a_table_made_with_ddl_is_queried_described_and_listed(sales: QueryService) -> None:
    _, rows = as_analyst(
        sales, "SELECT confirmed FROM cases WHERE country = 'Italy' AND day = DATE '2020-09-10'"
    )
    assert rows == [[str(ITALY_0910)]]
    assert as_analyst(sales, "SHOW TABLES")[1] == [["cases"], ["covid"]]
    assert [r[0] for r in as_analyst(sales, f"SHOW DATABASES IN {MEMORY}")[1]] == ["sales"]
    described = [r[0] for r in as_analyst(sales, "DESCRIBE cases")[1]]
    assert described == ["country\tstring", "day\tdate", "confirmed\tbigint"]


def test_ctas_and_insert_write_a_partitioned_table_the_catalog_registers(
    sales: QueryService,
) -> None:
    written = written_as_analyst(
        sales,
        "CREATE TABLE by_country WITH (format = 'PARQUET', partitioned_by = ARRAY['country']) "
        "AS SELECT day, confirmed, country FROM cases WHERE day < DATE '2020-09-10'",
    )
    assert written == 6
    partitions = [r[0] for r in as_analyst(sales, "SHOW PARTITIONS by_country")[1]]
    assert partitions == [f"country={c}" for c in COUNTRIES]
    inserted = written_as_analyst(
        sales, "INSERT INTO by_country SELECT day, confirmed, country FROM cases "
        "WHERE day = DATE '2020-09-10'"
    )  # fmt: skip
    assert inserted == 3
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
    assert as_analyst(sales, "SHOW TABLES")[1] == [["cases"], ["covid"]]
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
        parse_statement(
            "GRANT SELECT ON t TO u", default_catalog="c", default_database="d", catalogs=["c"]
        )
    message = str(refused.value)
    assert message.startswith("GRANT statements are not allowed")
    assert "CREATE TABLE AS" in message and "INSERT INTO" in message
    assert "only SELECT, SHOW, DESCRIBE and EXPLAIN" not in message


def test_a_misspelt_first_word_is_a_syntax_error_with_a_suggestion() -> None:
    with pytest.raises(InvalidRequest) as refused:
        parse_statement("SELEC 1", default_catalog="c", default_database="d", catalogs=["c"])
    message = str(refused.value)
    assert message.startswith("line 1:1: mismatched input 'SELEC'")
    assert message.endswith("did you mean SELECT?")
    assert "not allowed" not in message


def test_a_select_in_memory_is_reused_as_any_query(sales: QueryService) -> None:
    sql = "SELECT count(*) FROM cases"
    first = sales.start_query_execution(sql, catalog=MEMORY, database="sales")
    assert wait(sales, first).state == QueryState.SUCCEEDED
    again = sales.start_query_execution(
        sql, catalog=MEMORY, database="sales", reuse_max_age_minutes=5
    )
    assert sales.get_query_execution(again).statistics.result_reused


def test_refused_ddl_names_the_mistake_and_changes_nothing(sales: QueryService) -> None:
    kwargs: dict[str, object] = {"catalog": MEMORY, "database": "sales", "principal": "analyst"}
    lake = f"{sales.settings.lake_root}/{sales.settings.lake.data_bucket}"
    tables, databases = as_analyst(sales, "SHOW TABLES")[1], as_analyst(sales, "SHOW DATABASES")[1]
    for sql, reason in (
        ("CREATE EXTERNAL TABLE refused (a int) LOCATION 'file:///etc/refused'", "not in the lake"),
        ("CREATE DATABASE refused LOCATION 's3://elsewhere/x'", "the lake has no bucket elsewhere"),
        (f"CREATE EXTERNAL TABLE refused (a int) LOCATION '{lake}/*'", "must name a folder"),
        (f"CREATE DATABASE refused LOCATION '{lake}/../no-bucket/x'", "'..' folder"),
        (f"CREATE DATABASE refused LOCATION '{lake}/x/../../no-bucket/x'", "'..' folder"),
        (
            f"CREATE DATABASE refused LOCATION '{sales.settings.lake_root}/no-bucket/x'",
            "has no bucket no-bucket",
        ),
    ):
        assert reason in failure(sales, sql, **kwargs), sql
    for sql, reason in (
        (
            "CREATE EXTERNAL TABLE refused (\n  a int,\n  b strng\n) LOCATION 'x'",
            "column b at line 3, column 5: 'strng' is not a Hive type",
        ),
        ("CREATE DATABASE x LOCATIN 'y'", "line 1, column 19: expected the end of the statement"),
    ):
        with pytest.raises(InvalidRequest, match=reason):
            sales.start_query_execution(sql, catalog=MEMORY, database="sales")
    assert as_analyst(sales, "SHOW TABLES")[1] == tables
    assert as_analyst(sales, "SHOW DATABASES")[1] == databases
    assert not (Path(sales.settings.data_dir) / "lake" / "no-bucket").exists()


def test_typeof_names_stored_columns_as_trino_does(sales: QueryService) -> None:
    _, rows = as_analyst(
        sales,
        "SELECT typeof(country), typeof(lat), typeof(date), typeof(confirmed), "
        "typeof(confirmed * DECIMAL '1.5'), typeof(lat + 1), typeof(confirmed * 1.5) "
        "FROM covid LIMIT 1",
    )
    # 1.5 is a double to Athena; DECIMAL '1.5' is its decimal(2,1).
    assert rows == [["varchar", "double", "date", "bigint", "decimal(21,1)", "double", "double"]]
    # A derived double may be a real in Trino: the query does not show which.
    derived = "SELECT typeof(x) FROM (SELECT lat AS x FROM covid)"
    refused = failure(sales, derived, catalog=MEMORY, database="sales", principal="analyst")
    assert "typeof is not supported on the DuckDB engine for x" in refused


def test_the_hidden_columns_name_each_rows_file_as_s3_names_it(sales: QueryService) -> None:
    bucket = sales.settings.lake.data_bucket
    _, rows = as_analyst(
        sales, 'SELECT DISTINCT "$path", "$bucket" FROM cases WHERE country = \'Italy\''
    )
    assert rows == [[f"s3://{bucket}/cases/part-0.parquet", bucket]]
    _, counted = as_analyst(sales, 'SELECT "$path", count(*) FROM cases GROUP BY 1')
    assert [r[0] for r in counted] == [f"s3://{bucket}/cases/part-0.parquet"]
    analyst = {"catalog": MEMORY, "database": "sales", "principal": "analyst"}
    refused = failure(sales, 'SELECT *, "$path" FROM cases', **analyst)
    assert "SELECT * beside the hidden columns" in refused
    assert '"$file_size" is not supported' in failure(
        sales, 'SELECT "$file_size" FROM cases', **analyst
    )


def test_result_columns_report_the_string_lengths_trino_types_carry(
    sales: QueryService, jhu_dir: Path
) -> None:
    cases = put_table(sales, "codes", jhu_cases(jhu_dir))
    as_analyst(
        sales,
        "CREATE EXTERNAL TABLE codes (country varchar(10), day date, confirmed bigint) "
        f"STORED AS PARQUET LOCATION '{cases}'",
    )

    def described(sql: str) -> list[tuple[str, int]]:
        execution = wait(
            sales,
            sales.start_query_execution(sql, catalog=MEMORY, database="sales", principal="analyst"),
        )
        assert execution.state == QueryState.SUCCEEDED, execution.state_change_reason
        return [(c.type, c.precision) for c in sales.get_query_results(execution.id).columns]

    assert described(
        "SELECT country, CAST(country AS varchar(4)) AS c4, 'Italy' AS lit, "
        "CAST(day AS varchar) FROM codes WHERE country = 'Italy'"
    ) == [("varchar", 10), ("varchar", 4), ("varchar", 5), ("varchar", 2147483647)]
    assert described("SELECT * FROM codes LIMIT 1") == [
        ("varchar", 10),
        ("date", 0),
        ("bigint", 19),
    ]
