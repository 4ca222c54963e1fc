"""The Spark translation's checks, without Spark: what is refused, named, and rewritten.

The answers themselves are the conformance suite's (tests/query/conformance, marker spark).
"""

from __future__ import annotations

import datetime

import pyarrow as pa
import pytest

from lakeward.errors import InvalidRequest
from lakeward.metastore.tables import Column
from lakeward.query.engines.spark import without_zones
from lakeward.query.model import TableRef
from lakeward.query.sql.queries import Statement
from lakeward.query.statements import parse_statement
from lakeward.query.texts import column_texts
from lakeward.query.translate.query import check_translatable, to_engine_sql

DEATHS = TableRef("demo_hive_metastore", "default", "covid_deaths")
COLUMNS = {DEATHS: [Column("country", "string"), Column("deaths", "int"), Column("lat", "double")]}


def statement(sql: str) -> Statement:
    return parse_statement(
        sql, default_catalog=DEATHS.catalog, default_database="default", catalogs=[DEATHS.catalog]
    )


def spark_sql(sql: str) -> str:
    return to_engine_sql(statement(sql), "spark", lambda r: f"`{r.database}`.`{r.table}`", COLUMNS)


def test_integer_division_truncates_and_keeps_the_operands_type() -> None:
    assert spark_sql("SELECT 7 / 2") == "SELECT CAST(7 DIV 2 AS INT) AS `_col0`"
    assert spark_sql("SELECT x / 2 AS h FROM (VALUES BIGINT '5') t(x)") == (
        "SELECT CAST(x DIV 2 AS BIGINT) AS h FROM VALUES (CAST('5' AS BIGINT)) AS t(x)"
    )


def test_what_spark_answers_otherwise_is_rewritten_to_trinos_answer() -> None:
    # Trino rounds half away from zero where Spark truncates; Spark's grouping() takes one column.
    assert spark_sql("SELECT CAST(DECIMAL '2.5' AS integer)") == (
        "SELECT CAST(ROUND(2.5) AS INT) AS `_col0`"
    )
    assert spark_sql("SELECT grouping(x, y) FROM (VALUES (1, 2)) t(x, y) GROUP BY CUBE (x, y)") == (
        "SELECT (CAST(GROUPING(x) AS BIGINT) * 2 + CAST(GROUPING(y) AS BIGINT) * 1) AS `_col0` "
        "FROM VALUES (1, 2) AS t(x, y) GROUP BY CUBE (x, y)"
    )


def test_lambdas_take_the_arrays_element_type() -> None:
    assert spark_sql("SELECT none_match(ARRAY[1, 2], x -> x / 2 > 0)") == (
        "SELECT NOT (EXISTS(ARRAY(1, 2), x -> CAST(x DIV 2 AS INT) > 0)) AS `_col0`"
    )


def test_a_stored_tables_columns_type_the_query_when_it_runs() -> None:
    assert "CAST(deaths DIV 7 AS INT)" in spark_sql("SELECT deaths / 7 FROM covid_deaths")
    # Started: the columns are not known yet, so nothing is refused...
    check_translatable(statement("SELECT lat / 0 FROM covid_deaths"), "spark")
    # ...run: a double divided by what may be zero is Infinity in Trino, an error in Spark.
    with pytest.raises(InvalidRequest, match="operator / is not supported on the Spark engine"):
        spark_sql("SELECT lat / 0 FROM covid_deaths")


def test_an_unnamed_aggregate_of_a_subquery_keeps_the_other_columns_typed() -> None:
    # As an INSERT's source is cast to the table's columns: count(*) is no star.
    sql = (
        "SELECT CAST(_c0 AS varchar), CAST(_c1 AS bigint) FROM (SELECT country, count(*) "
        "FROM covid_deaths GROUP BY country) AS _q(_c0, _c1)"
    )
    assert spark_sql(sql).startswith("SELECT CAST(_c0 AS STRING) AS `_col0`, CAST(_c1 AS BIGINT)")


@pytest.mark.parametrize(
    ("sql", "named"),
    [
        ("SELECT DECIMAL '1.5' / 2", "operator /"),
        ("SELECT CAST(1.5e0 AS decimal(3,1))", "CAST from double to decimal"),
        ("SELECT substr('abc', 0)", "function substr"),
        ("SELECT json_extract_scalar('{}', '$.a')", "function json_extract_scalar"),
        ("SELECT reduce(ARRAY[BIGINT '1'], 0, (s, x) -> s + x, s -> s)", "function reduce"),
        ("SELECT '1' = 1", "operator ="),
        ("SELECT row_number() OVER () FROM (VALUES 1) t(x)", "window function row_number"),
        ("SELECT count(*) FROM (VALUES 1) t(x) TABLESAMPLE BERNOULLI (50)", "TABLESAMPLE"),
        ("SELECT TRY(1 / 0)", "function try"),
    ],
)
def test_what_spark_would_answer_differently_is_refused_when_started(sql: str, named: str) -> None:
    with pytest.raises(InvalidRequest) as refused:
        check_translatable(statement(sql), "spark")
    assert refused.value.message.startswith(f"{named} is not supported on the Spark engine")


def test_sparks_zoned_timestamps_are_shown_as_athena_shows_a_hive_timestamp() -> None:
    moment = datetime.datetime(2020, 9, 10, 13, 4, 5, 120000, tzinfo=datetime.UTC)
    batch = pa.record_batch(
        [pa.array([moment], pa.timestamp("us", tz="UTC")), pa.array([1])], names=["t", "n"]
    )
    shown = without_zones(batch)
    assert shown.schema.names == ["t", "n"] and shown.column(1).to_pylist() == [1]
    assert column_texts(shown.column(0)).to_pylist() == ["2020-09-10 13:04:05.120"]


def test_upper_fails_where_spark_would_map_a_character_to_several() -> None:
    # Trino maps case code point by code point (ß stays ß); Spark's upper makes ß SS.
    sql = spark_sql("SELECT upper(country) FROM covid_deaths")
    assert sql.startswith("SELECT (CASE WHEN country RLIKE '[ß")
    assert "THEN RAISE_ERROR('upper of a text with a character whose upper case is several" in sql
    assert sql.endswith("ELSE UPPER(country) END) AS `_col0` FROM `default`.`covid_deaths`")


def test_a_checked_querys_verdict_is_kept_for_its_text_its_tables_and_the_engine() -> None:
    sql = "SELECT TRY(1 / 0) FROM covid_deaths"
    refusals = []
    for _ in range(2):  # the second verdict is the one kept: the same refusal, a new error
        with pytest.raises(InvalidRequest) as refused:
            check_translatable(statement(sql), "spark")
        refusals.append(refused.value)
    assert refusals[0] is not refusals[1]
    assert refusals[0].message == refusals[1].message
    assert refusals[1].message.startswith("function try is not supported on the Spark engine")
    check_translatable(statement(sql), "duckdb")  # another engine, its own verdict
    elsewhere = parse_statement(
        "SELECT TRY(1 / 0) FROM other.covid_deaths",
        default_catalog=DEATHS.catalog,
        default_database="default",
        catalogs=[DEATHS.catalog],
    )
    assert elsewhere.tables != statement(sql).tables
    with pytest.raises(InvalidRequest, match="function try is not supported"):
        check_translatable(elsewhere, "spark")
