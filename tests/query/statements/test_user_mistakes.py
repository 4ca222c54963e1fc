"""Typical mistakes in a query get Athena's error: its name, where in the query, and the
column, function or table at fault; never DuckDB's words or lakeward's own rewriting
(a ``trino_*`` macro, a function the user did not call)."""

from __future__ import annotations

import pytest

from lakeward.query.service import QueryService
from tests.query.support import MEMORY, failure

AGGREGATES = ["sum", "avg", "min", "max", "count", "count_if", "approx_distinct", "arbitrary",
              "stddev", "variance", "array_agg", "max_by", "bool_and"]  # fmt: skip
WINDOWS = ["row_number()", "rank()", "dense_rank()", "ntile(4)", "percent_rank()",
           "cume_dist()", "lag(confirmed)", "lead(confirmed)", "first_value(confirmed)",
           "last_value(confirmed)", "sum(confirmed)"]  # fmt: skip

MISTAKES = [
    # A misspelled column where it stands, wherever that is.
    ("SELECT country FROM covid WHERE confirmd > 10",
     "COLUMN_NOT_FOUND: line 1:33: Column 'confirmd' cannot be resolved"),
    ("SELECT country FROM covid ORDER BY confirmd",
     "COLUMN_NOT_FOUND: line 1:36: Column 'confirmd' cannot be resolved"),
    ("SELECT country FROM covid GROUP BY country HAVING sum(confirmd) > 1",
     "COLUMN_NOT_FOUND: line 1:55: Column 'confirmd' cannot be resolved"),
    ("SELECT c.countryz FROM covid c", "COLUMN_NOT_FOUND: line 1:8: Column 'c.countryz' "
     "cannot be resolved"),
    # Missing GROUP BY.
    ("SELECT country, sum(confirmed) FROM covid",
     "EXPRESSION_NOT_AGGREGATE: line 1:8: 'country' must be an aggregate expression or "
     "appear in GROUP BY clause"),
    ("SELECT country, confirmed FROM covid GROUP BY country",
     "EXPRESSION_NOT_AGGREGATE: line 1:17: 'confirmed' must be an aggregate expression or "
     "appear in GROUP BY clause"),
    # Unknown functions and tables, and a name two tables have.
    ("SELECT sumx(confirmed) FROM covid",
     "FUNCTION_NOT_FOUND: line 1:8: Function 'sumx' not registered"),
    ("SELECT * FROM covdi",
     f"TABLE_NOT_FOUND: line 1:15: Table '{MEMORY.lower()}.sales.covdi' does not exist"),
    ("SELECT confirmed FROM covid JOIN cases USING (country)",
     "AMBIGUOUS_NAME: line 1:8: Column 'confirmed' is ambiguous"),
    # Wrong argument types: Trino's FUNCTION_NOT_FOUND, naming the function the user
    # called, not the macro or DuckDB function lakeward runs in its place.
    ("SELECT sum(country) FROM covid",
     "FUNCTION_NOT_FOUND: line 1:8: Unexpected parameters (varchar) for function sum"),
    ("SELECT avg(country) FROM covid",
     "FUNCTION_NOT_FOUND: line 1:8: Unexpected parameters for function avg"),
    ("SELECT upper(confirmed) FROM covid",
     "FUNCTION_NOT_FOUND: line 1:8: Unexpected parameters for function upper"),
    ("SELECT date_add('day', 1, country) FROM covid",
     "FUNCTION_NOT_FOUND: line 1:8: Unexpected parameters for function date_add"),
    ("SELECT length(confirmed) FROM covid",
     "FUNCTION_NOT_FOUND: line 1:8: Unexpected parameters (bigint) for function length"),
]  # fmt: skip


def fails(service: QueryService, sql: str) -> str:
    return failure(service, sql, catalog=MEMORY, database="sales", principal="analyst")


@pytest.mark.parametrize(("sql", "reason"), MISTAKES)
def test_a_mistake_is_named_as_athena_names_it(sales: QueryService, sql: str, reason: str) -> None:
    assert fails(sales, sql) == reason


def test_a_misspelled_column_in_every_aggregate_and_window(sales: QueryService) -> None:
    for function in AGGREGATES:
        arguments = "confirmd, 1" if function == "max_by" else "confirmd"
        if function in ("count_if", "bool_and"):
            arguments = "confirmd > 0"
        sql = f"SELECT {function}({arguments}) FROM covid"
        column = len(f"SELECT {function}(") + 1
        assert fails(sales, sql) == (
            f"COLUMN_NOT_FOUND: line 1:{column}: Column 'confirmd' cannot be resolved"
        ), sql
    for window in WINDOWS:
        sql = f"SELECT {window} OVER (PARTITION BY countryy ORDER BY date) FROM covid"
        column = sql.index("countryy") + 1
        assert fails(sales, sql) == (
            f"COLUMN_NOT_FOUND: line 1:{column}: Column 'countryy' cannot be resolved"
        ), sql


def test_no_reason_speaks_of_lakewards_own_rewriting(sales: QueryService) -> None:
    sqls = [sql for sql, _ in MISTAKES] + [
        "SELECT round(country) FROM covid",
        "SELECT split(confirmed, ',') FROM covid",
        "SELECT date_trunc('month', country) FROM covid",
        "SELECT substr(confirmed, 1) FROM covid",
    ]
    for sql in sqls:
        reason = fails(sales, sql)
        assert "trino_" not in reason.lower() and "Macro" not in reason, (sql, reason)
        assert "Binder" not in reason and "Candidate" not in reason, (sql, reason)
        assert reason.split(":", 1)[0].isupper(), (sql, reason)  # an Athena error name first
