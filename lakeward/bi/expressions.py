"""Computed fields: a small expression language checked with sqlglot.

An expression is a SQL scalar expression over the dataset's fields
(``deaths / confirmed``, ``round(100 * deaths / nullif(confirmed, 0), 2)``,
``case when confirmed > 1000 then 'large' else 'small' end``). It is parsed,
then every node is checked against a short list of what is allowed:
arithmetic, comparisons, boolean logic, CASE/IF, literals, the fields of the
dataset, and a few plain functions. Anything else (subqueries, other tables,
casts to odd types, aggregate or table functions) is refused with its name.

Division is made safe: ``a / b`` is NULL when ``b`` is 0 (never an error, never
infinity), and always a decimal division (``7 / 2`` is 3.5).
"""

from __future__ import annotations

from collections.abc import Iterable

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from lakeward.errors import InvalidRequest

_ALLOWED: tuple[type[exp.Expression], ...] = (
    exp.Column, exp.Identifier, exp.Literal, exp.Boolean, exp.Null, exp.Paren,
    exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod, exp.Neg, exp.Pow,
    exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.And, exp.Or, exp.Not, exp.Is,
    exp.Case, exp.If, exp.Coalesce, exp.Nullif, exp.Abs, exp.Round, exp.Floor, exp.Ceil,
    exp.Greatest, exp.Least, exp.Sqrt, exp.Ln, exp.Upper, exp.Lower, exp.Length, exp.Concat,
    exp.DPipe, exp.Year, exp.Month, exp.Day, exp.Between, exp.In,
)  # fmt: skip


def compile_expression(text: str, fields: Iterable[str], name: str) -> str:
    """The DuckDB SQL of a computed field's expression; ``InvalidRequest`` naming ``name``."""
    known = {f.lower(): f for f in fields}
    try:
        trees = [t for t in sqlglot.parse(text, read="duckdb") if t is not None]
    except ParseError as exc:
        detail = exc.errors[0]["description"] if exc.errors else str(exc)
        raise InvalidRequest(
            f"computed field {name}: the expression does not parse: {detail}"
        ) from None
    if len(trees) != 1:
        raise InvalidRequest(f"computed field {name}: give one expression (found {len(trees)})")
    tree = trees[0]
    for node in tree.walk():
        if not isinstance(node, _ALLOWED):
            what = node.key.upper() if not isinstance(node, exp.Func) else node.sql_name()
            raise InvalidRequest(
                f"computed field {name}: {what} is not allowed in an expression "
                "(use fields, numbers, strings, arithmetic, comparisons, CASE and simple functions)"
            )
        if isinstance(node, exp.Column):
            if node.table:
                raise InvalidRequest(
                    f"computed field {name}: {node.sql()}: refer to fields by name only"
                )
            if node.name.lower() not in known:
                raise InvalidRequest(
                    f"computed field {name}: unknown field {node.name!r} "
                    f"(fields: {', '.join(sorted(known.values()))})"
                )
    safe = tree.transform(_safe_division)
    return safe.sql(dialect="duckdb", identify=True)


def _safe_division(node: exp.Expression) -> exp.Expression:
    if not isinstance(node, exp.Div):
        return node
    numerator = exp.Cast(this=node.this, to=exp.DataType.build("DOUBLE"))
    denominator = exp.Nullif(this=node.expression, expression=exp.Literal.number(0))
    return exp.Paren(this=exp.Div(this=numerator, expression=denominator))


def referenced_fields(text: str) -> set[str]:
    """Field names an expression refers to (for ordering computed fields)."""
    try:
        tree = sqlglot.parse_one(text, read="duckdb")
    except ParseError:
        return set()
    return {c.name for c in tree.find_all(exp.Column)}
