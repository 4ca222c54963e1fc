"""The part of a query's WHERE that an Iceberg scan can use to skip files.

Iceberg's file planning prunes by partition values and by each file's column statistics,
given a row filter. A conjunct of the outermost WHERE that compares a column of the table
with a constant (``=``, ``<>``, ``<``, ``<=``, ``>``, ``>=``, ``BETWEEN``, ``IN``, ``IS [NOT]
NULL``) becomes part of that filter when the table is read once, directly in that SELECT's
FROM or JOIN: a row it rejects could not reach the result, whatever the join. The engine
still applies the whole WHERE, so the filter only ever removes rows the query drops anyway.
A conjunct the table's schema cannot bind (a type pyiceberg would not compare) is left out.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from pyiceberg import expressions as ice
from pyiceberg.expressions import AlwaysTrue, BooleanExpression
from pyiceberg.expressions.visitors import bind
from pyiceberg.schema import Schema
from sqlglot import exp

from lakeward.query.model import TableRef

# pyiceberg's predicates, typed loosely: each takes a column's name and a constant.
_ice: Any = ice
_COMPARISONS: dict[type[exp.Expr], tuple[Any, Any]] = {
    # operator: (column op constant, constant op column)
    exp.EQ: (_ice.EqualTo, _ice.EqualTo),
    exp.NEQ: (_ice.NotEqualTo, _ice.NotEqualTo),
    exp.GT: (_ice.GreaterThan, _ice.LessThan),
    exp.GTE: (_ice.GreaterThanOrEqual, _ice.LessThanOrEqual),
    exp.LT: (_ice.LessThan, _ice.GreaterThan),
    exp.LTE: (_ice.LessThanOrEqual, _ice.GreaterThanOrEqual),
}


def iceberg_filter(tree: exp.Expr, ref: TableRef, schema: Schema) -> BooleanExpression:
    """The row filter of ``ref``'s scan in the query ``tree`` (AlwaysTrue: none)."""
    if not isinstance(tree, exp.Select):
        return AlwaysTrue()
    tables = [t for t in tree.find_all(exp.Table) if _names(t, ref)]
    if len(tables) != 1:
        return AlwaysTrue()
    table = tables[0]
    sources = [tree.args.get("from_"), *tree.args.get("joins", [])]
    direct = [s.this for s in sources if s is not None]
    if not any(source is table for source in direct):
        return AlwaysTrue()
    where = tree.args.get("where")
    if where is None:
        return AlwaysTrue()
    alias = table.alias_or_name
    alone = len(direct) == 1
    found: BooleanExpression = AlwaysTrue()
    for conjunct in where.this.flatten() if isinstance(where.this, exp.And) else [where.this]:
        predicate = _predicate(conjunct, alias, alone)
        if predicate is None:
            continue
        try:
            bind(schema, predicate, case_sensitive=False)
        except Exception:  # noqa: BLE001 - a conjunct pyiceberg cannot type is left to the engine
            continue
        found = predicate if isinstance(found, AlwaysTrue) else ice.And(found, predicate)
    return found


def _names(table: exp.Table, ref: TableRef) -> bool:
    return (table.catalog, table.db, table.name) == (ref.catalog, ref.database, ref.table)


def _column(node: exp.Expr, alias: str, alone: bool) -> str | None:
    if not isinstance(node, exp.Column):
        return None
    qualifier = node.table
    if qualifier and qualifier != alias:
        return None
    if not qualifier and not alone:
        return None
    return node.name.lower()


def _constant(node: exp.Expr) -> tuple[bool, Any]:
    """(whether it is a constant pyiceberg takes, its value)."""
    if isinstance(node, exp.Literal):
        if node.is_string:
            return True, node.this
        text = node.this
        # Exact: a decimal literal stays decimal (a float could round past the column's scale).
        return True, Decimal(text) if any(c in text for c in ".eE") else int(text)
    if isinstance(node, exp.Boolean):
        return True, bool(node.this)
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and not node.this.is_string:
        ok, value = _constant(node.this)
        return ok, -value
    # DATE '2024-01-01' and TIMESTAMP '...' (a typed literal is a cast of a string)
    if isinstance(node, exp.Cast) and isinstance(node.this, exp.Literal) and node.this.is_string:
        kind = node.to.this
        if kind == exp.DataType.Type.DATE:
            return True, node.this.this
        if kind == exp.DataType.Type.TIMESTAMP:
            return True, node.this.this.replace(" ", "T")
    return False, None


def _predicate(node: exp.Expr, alias: str, alone: bool) -> Any:  # a predicate, or None
    for kind, (forward, backward) in _COMPARISONS.items():
        if type(node) is kind:
            left, right = node.this, node.expression
            column = _column(left, alias, alone)
            ok, value = _constant(right)
            if column and ok:
                return forward(column, value)
            column = _column(right, alias, alone)
            ok, value = _constant(left)
            if column and ok:
                return backward(column, value)
            return None
    if isinstance(node, exp.Between):
        column = _column(node.this, alias, alone)
        (low_ok, low), (high_ok, high) = _constant(node.args["low"]), _constant(node.args["high"])
        if column and low_ok and high_ok:
            both: BooleanExpression = ice.And(
                _ice.GreaterThanOrEqual(column, low), _ice.LessThanOrEqual(column, high)
            )
            return both
        return None
    if isinstance(node, exp.In) and not node.args.get("query"):
        column = _column(node.this, alias, alone)
        values = [_constant(v) for v in node.expressions]
        if column and values and all(ok for ok, _ in values):
            return _ice.In(column, {v for _, v in values})
        return None
    if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
        column = _column(node.this, alias, alone)
        return _ice.IsNull(column) if column else None
    if isinstance(node, exp.Not) and isinstance(node.this, exp.Is):
        inner = node.this
        column = _column(inner.this, alias, alone)
        return _ice.NotNull(column) if column and isinstance(inner.expression, exp.Null) else None
    return None
