"""Aggregate functions as Trino names, computes and types them.

``sum`` of integers is a bigint in Trino (DuckDB's is a 128-bit integer: the
engine conforms that column type, failing on overflow as Trino does).
``approx_distinct`` is counted exactly: Trino's estimate is exact for the small
sets where it is deterministic, and DuckDB's own estimator would give other
numbers than Trino's for large ones (``approx_percentile``: analytic.py).
``map_agg`` keeps the non-NULL keys.
"""

from __future__ import annotations

from sqlglot import exp

from lakeward.errors import InvalidRequest
from lakeward.query.translate.duckdb.arithmetic import decimal_average
from lakeward.query.translate.duckdb.calls import call
from lakeward.query.translate.duckdb.numbers import Numeric, typed

_AVERAGED = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "DOUBLE", "INTERVAL")

MACROS: list[str] = [
    "CREATE MACRO trino_histogram(h) AS map_from_entries("
    "list_transform(map_entries(h), lambda e: {'key': e.key, 'value': CAST(e.value AS BIGINT)}))",
    # Trino's average of reals is a real, of decimals a decimal of the same scale rounded half
    # up: DuckDB's is a double, so decimals are refused.
    "CREATE MACRO trino_avg"
    + "".join(f"(x {t}) AS avg(x), " for t in _AVERAGED)
    + "(x FLOAT) AS CAST(avg(x) AS FLOAT),"
    " (x DECIMAL(38, 0)) AS error('avg of a decimal is not supported on DuckDB')",
    # The same refusal where avg cannot be a macro (DISTINCT, FILTER, OVER): aggregated
    # beside it, NULL for any other type.
    "CREATE MACRO trino_avg_guard(x) AS CAST(CASE WHEN typeof(x) LIKE 'DECIMAL%'"
    " THEN error('avg of a decimal is not supported on DuckDB') END AS DOUBLE)",
    "CREATE MACRO trino_map_agg(k, v) AS"
    " map_from_entries(list({'key': k, 'value': v}) FILTER (WHERE k IS NOT NULL))",
]

_NOT_ON_DUCKDB = "not available on DuckDB"
REFUSED: dict[str, str] = {
    "checksum": "Trino's checksum has no equivalent on DuckDB",
    "approx_set": _NOT_ON_DUCKDB,
    "approx_most_frequent": _NOT_ON_DUCKDB,
    "merge": _NOT_ON_DUCKDB,
    "numeric_histogram": _NOT_ON_DUCKDB,
    "qdigest_agg": _NOT_ON_DUCKDB,
    "tdigest_agg": _NOT_ON_DUCKDB,
    "reduce_agg": _NOT_ON_DUCKDB,
    "set_agg": _NOT_ON_DUCKDB,
    "set_union": _NOT_ON_DUCKDB,
    "map_union": _NOT_ON_DUCKDB,
    "entropy": _NOT_ON_DUCKDB,
    "kurtosis": "DuckDB computes another estimator",
    "skewness": "DuckDB computes another estimator",
}


_BITWISE_AGGREGATES = (exp.BitwiseAndAgg, exp.BitwiseOrAgg, exp.BitwiseXorAgg)


def _average(node: exp.Expr) -> exp.Avg | None:
    """The avg that ``node`` is, or holds under its FILTER and OVER clauses."""
    inner = node.this if isinstance(node, exp.Window) else node
    inner = inner.this if isinstance(inner, exp.Filter) else inner
    return inner if isinstance(inner, exp.Avg) else None


def _decimal(values: exp.Expr) -> Numeric | None:
    """The decimal type of an aggregate's argument (``DISTINCT x`` too), if it is one."""
    found = typed(values)
    return found if found is not None and not found.integer else None


def _guarded(node: exp.Expr, average: exp.Avg) -> exp.Expr:
    """An avg with DISTINCT, FILTER or OVER whose argument's type the query does not show:
    DuckDB's, a double, unless the argument turns out a decimal, which is then refused (its
    Trino average is a decimal)."""
    values = average.this.expressions[0] if isinstance(average.this, exp.Distinct) else average.this
    guard: exp.Expr = exp.Max(this=call("trino_avg_guard", values.copy()))
    if isinstance(node, exp.Window):
        guard = node.copy()
        inner = guard.this.this if isinstance(guard.this, exp.Filter) else guard.this
        inner.replace(exp.Max(this=call("trino_avg_guard", values.copy())))
    return exp.Coalesce(this=guard, expressions=[node])


def _aggregates(node: exp.Expr) -> exp.Expr:
    if isinstance(node, exp.ApproxDistinct):
        return exp.Count(this=exp.Distinct(expressions=[node.this]))
    if isinstance(node, exp.GroupConcat) and not isinstance(node.this, exp.Order):
        # Trino's listagg needs WITHIN GROUP (ORDER BY ...); string_agg is not Trino's.
        raise InvalidRequest("function string_agg is not a Trino function: use listagg")
    plain = not isinstance(node.parent, exp.Window | exp.Filter)  # a macro cannot be either
    average = _average(node) if plain else None
    if average is not None:
        # The avg's own type, noted before its argument was rewritten (a sum is a macro's
        # call by now); over a window, the window's.
        of = _decimal(average) or _decimal(node) or _decimal(average.this)
        if of is not None:
            return decimal_average(average.this, of, node if node is not average else None)
        if node is average and not isinstance(node.this, exp.Distinct):
            return call("trino_avg", node.this)
        return _guarded(node, average)
    if isinstance(node, _BITWISE_AGGREGATES):  # Trino's are bigints
        return exp.cast(node, exp.DataType.build("BIGINT"))
    if isinstance(node, exp.Anonymous):
        name, args = node.name.lower(), node.expressions
        if name == "every" and len(args) == 1:
            return exp.LogicalAnd(this=args[0])
        if name == "map_agg" and len(args) == 2:
            return call("trino_map_agg", *args)
        if name == "histogram" and len(args) == 1:  # counts as bigint, not DuckDB's unsigned
            return call("trino_histogram", node)
    return node


REWRITES = [_aggregates]
