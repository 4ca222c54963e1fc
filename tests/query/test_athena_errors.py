"""Failed queries are worded as Athena words them, from DuckDB's real messages."""

from __future__ import annotations

import duckdb
import pytest

from lakeward.query.athena_errors import athena_reason

CASES = [
    ("SELECT x FROM t", "COLUMN_NOT_FOUND: line 1:8: Column 'x' cannot be resolved"),
    ("SELECT a,\n  t.zz\nFROM t", "COLUMN_NOT_FOUND: line 2:3: Column 't.zz' cannot be resolved"),
    ("SELECT 'x' AS s FROM t WHERE x > 1",
     "COLUMN_NOT_FOUND: line 1:30: Column 'x' cannot be resolved"),
    ("SELECT v.idx FROM t JOIN (SELECT 3 AS id) v ON t.a = v.id",
     "COLUMN_NOT_FOUND: line 1:8: Column 'v.idx' cannot be resolved"),
    ("SELECT * FROM t JOIN (SELECT 3 AS id) v ON t.a = v.idx",
     "COLUMN_NOT_FOUND: line 1:50: Column 'v.idx' cannot be resolved"),
    ("SELECT foo(a) FROM t", "FUNCTION_NOT_FOUND: line 1:8: Function 'foo' not registered"),
    ("SELECT a, count(*) FROM t",
     "EXPRESSION_NOT_AGGREGATE: line 1:8: 'a' must be an aggregate expression or appear in "
     "GROUP BY clause"),
    ("SELECT abs(s) FROM t",
     "FUNCTION_NOT_FOUND: line 1:8: Unexpected parameters (varchar) for function abs"),
    ("SELECT a + s FROM t", "TYPE_MISMATCH: line 1:10: Cannot apply operator: integer + varchar"),
    ("SELECT CAST(s AS integer) FROM t", "INVALID_CAST_ARGUMENT: Cannot cast 'x' to INT"),
    ("SELECT s * 1.0 FROM t",
     "TYPE_MISMATCH: line 1:10: Cannot apply operator: varchar * decimal(2,1)"),
    ("SELECT abs('x')",
     "FUNCTION_NOT_FOUND: line 1:8: Unexpected parameters (varchar) for function abs"),
    ("SELECT a // (a - 1) FROM t", "DIVISION_BY_ZERO: Division by zero"),
]  # fmt: skip


@pytest.mark.parametrize(("sql", "worded"), CASES)
def test_duckdb_errors_in_athenas_words(sql: str, worded: str) -> None:
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT 1 AS a, 'x' AS s")
    with pytest.raises(duckdb.Error) as raised:
        con.execute(sql).fetchall()
    reason = athena_reason(str(raised.value), sql)
    assert reason == worded
    assert "Candidate" not in reason and "Binder" not in reason


def test_spark_and_lakeward_messages() -> None:
    spark = (
        "[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column or function parameter with name `zz` "
        "cannot be resolved. Did you mean one of the following? [`a`].; line 1 pos 7;"
    )
    assert athena_reason(spark, "SELECT zz FROM t") == (
        "COLUMN_NOT_FOUND: line 1:8: Column 'zz' cannot be resolved"
    )
    # lakeward's own reasons stay as they are.
    own = "User: arn:lakeward:iam:::user/x is not authorized to perform: s3:GetObject"
    assert athena_reason(own, "SELECT 1") == own
    # An engine error with no Athena category keeps its first line, not its internals.
    assert (
        athena_reason("Invalid Input Error: something odd!\nLINE 1: ...", "SELECT 1")
        == "GENERIC_USER_ERROR: something odd"
    )
