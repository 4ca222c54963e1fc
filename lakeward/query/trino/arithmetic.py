"""Arithmetic operators as Trino defines them.

``/`` on two integers is integer division truncating toward zero (``7 / 2`` is
3, ``-7 / 2`` is -3) of the wider operand type; DuckDB's ``/`` always gives a
double, its ``//`` is Trino's division for integers and a plain division for
floating point. The operand types decide, and only DuckDB's binder knows them
(columns, subqueries), so ``/`` becomes a macro whose typed overloads DuckDB
picks between.
"""

from __future__ import annotations

from sqlglot import exp

_INTEGERS = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT")
_FLOATS = ("FLOAT", "DOUBLE")

DIVIDE = "trino_divide"

MACROS: list[str] = [
    f"CREATE MACRO {DIVIDE}"
    + ", ".join(
        [f"(a {t}, b {t}) AS a // b" for t in _INTEGERS]
        + [f"(a {t}, b {t}) AS a / b" for t in _FLOATS]
    )
]


def divide(node: exp.Expr) -> exp.Expr:
    if isinstance(node, exp.Div):
        return exp.Anonymous(this=DIVIDE, expressions=[node.left, node.right])
    return node


REWRITES = [divide]
REFUSED: dict[str, str] = {}
