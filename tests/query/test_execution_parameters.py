"""ExecutionParameters bind a statement's ? placeholders to literals, and nothing else."""

from __future__ import annotations

import pytest

from lakeward.errors import InvalidRequest
from lakeward.query.sql.parameters import bind


def test_each_placeholder_takes_the_value_of_its_position() -> None:
    query = "SELECT * FROM t WHERE name = ? AND day >= ? AND n < ? AND flag = ? AND x IS NOT ?"
    bound = bind(query, ["'O''Brien'", "DATE '2020-01-01'", "-2.5", "true", "NULL"])
    assert bound == (
        "SELECT * FROM t WHERE name = 'O''Brien' AND day >= DATE '2020-01-01' AND n < -2.5 "
        "AND flag = true AND x IS NOT NULL"
    )


def test_a_question_mark_in_a_string_an_identifier_or_a_comment_is_no_placeholder() -> None:
    query = "SELECT '?' AS \"why?\", ? -- really?\nFROM t"
    assert bind(query, ["1"]) == "SELECT '?' AS \"why?\", 1 -- really?\nFROM t"


def test_a_count_that_does_not_match_the_placeholders_is_refused() -> None:
    with pytest.raises(InvalidRequest, match="expected 2 but found 1"):
        bind("SELECT ? + ?", ["1"])
    with pytest.raises(InvalidRequest, match="expected 0 but found 1"):
        bind("SELECT 1", ["1"])


@pytest.mark.parametrize("value", ["1; DROP TABLE t", "name", "1) OR (1=1", "(SELECT 1)", ""])
def test_a_value_that_is_not_one_literal_is_refused_naming_its_position(value: str) -> None:
    with pytest.raises(
        InvalidRequest, match="ExecutionParameters member 2 .* is not a SQL literal"
    ):
        bind("SELECT ?, ?", ["1", value])


def test_execute_names_its_statement_and_values_as_written() -> None:
    from lakeward.query.prepared import execute_parts

    assert execute_parts("EXECUTE q USING 'a, b', DATE '2020-01-01', (1)") == (
        "q",
        ["'a, b'", "DATE '2020-01-01'", "(1)"],
    )
    assert execute_parts("execute q;") == ("q", [])
    assert execute_parts("SELECT 1") is None
    with pytest.raises(InvalidRequest, match="EXECUTE must name"):
        execute_parts("EXECUTE 'q'")
    with pytest.raises(InvalidRequest, match="expected the values"):
        execute_parts("EXECUTE q USING ")


def test_information_schema_names_types_as_trino() -> None:
    from lakeward.query.planner.information_schema import trino_type

    assert [
        trino_type(t)
        for t in ("string", "int", "array<string>", "map<string,bigint>", "decimal(10,2)",
                  "struct<a:int,b:array<float>>", "timestamp", "varchar(10)", "binary")
    ] == [
        "varchar", "integer", "array(varchar)", "map(varchar, bigint)", "decimal(10,2)",
        "row(a integer, b array(real))", "timestamp(3)", "varchar(10)", "varbinary",
    ]  # fmt: skip
