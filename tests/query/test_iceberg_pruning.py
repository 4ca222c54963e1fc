"""Which part of a query's WHERE an Iceberg scan filters files by (planner/pruning.py)."""

from __future__ import annotations

import pytest
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.schema import Schema
from pyiceberg.types import DateType, DecimalType, LongType, NestedField, StringType

from lakeward.query.model import TableRef
from lakeward.query.planner.pruning import iceberg_filter
from lakeward.query.sql.names import Names
from lakeward.query.sql.queries import parse_query

SCHEMA = Schema(
    NestedField(1, "id", LongType(), False),
    NestedField(2, "day", DateType(), False),
    NestedField(3, "name", StringType(), False),
    NestedField(4, "amount", DecimalType(10, 2), False),
)
T = TableRef("default", "default", "t")
NAMES = Names("default", "default", frozenset({"default"}))


def row_filter(sql: str) -> str:
    statement = parse_query(sql, NAMES)
    assert statement._ast is not None
    return repr(iceberg_filter(statement._ast, T, SCHEMA))


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        (
            "SELECT * FROM t WHERE id = 5",
            "EqualTo(term=Reference(name='id'), literal=LongLiteral(5))",
        ),
        (
            "SELECT * FROM t WHERE 5 < id",
            "GreaterThan(term=Reference(name='id'), literal=LongLiteral(5))",
        ),
        (
            "SELECT * FROM t WHERE day >= DATE '2024-01-02' AND name IS NOT NULL",
            "And(left=GreaterThanOrEqual(term=Reference(name='day'), "
            "literal=literal('2024-01-02')), right=NotNull(term=Reference(name='name')))",
        ),
        (
            "SELECT * FROM t WHERE amount = 0.10",
            "EqualTo(term=Reference(name='amount'), literal=DecimalLiteral(Decimal('0.10')))",
        ),
    ],
)
def test_simple_conjuncts_filter_the_scan(sql: str, expected: str) -> None:
    assert row_filter(sql) == expected


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM t WHERE id = 5 OR name = 'x'",  # a disjunction: not one conjunct
        "SELECT * FROM t WHERE lower(name) = 'x'",  # a function of the column
        "SELECT * FROM t a JOIN t b ON a.id = b.id WHERE a.id = 1",  # read twice
        "SELECT * FROM (SELECT * FROM t) s WHERE id = 1",  # not directly in the FROM
        "SELECT * FROM t JOIN u ON t.id = u.id WHERE id = 1",  # whose id?
        "SELECT * FROM t WHERE id = (SELECT 1)",  # not a constant
        "SELECT * FROM t WHERE nosuch = 1",  # not a column of the table
    ],
)
def test_anything_else_filters_nothing(sql: str) -> None:
    assert row_filter(sql) == repr(AlwaysTrue())


def test_a_qualified_column_of_a_join_filters_its_own_table() -> None:
    found = row_filter("SELECT * FROM t x LEFT JOIN u ON x.id = u.id WHERE x.name = 'a'")
    assert found == "EqualTo(term=Reference(name='name'), literal=literal('a'))"
