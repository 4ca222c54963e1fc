"""Functions analysts use every day that DuckDB names otherwise or lacks: percentiles,
bases, buckets, array reversal and interval milliseconds, as Trino computes them.

``approx_percentile`` is answered with the exact percentile (a value of the set, as
DuckDB's ``quantile_disc`` picks it): Trino's estimate is only bound to lie within a
small rank error of it, and the exact value lies within that bound. With weights it
is refused: an exact weighted percentile would need every row's weight in memory.
"""

from __future__ import annotations

from sqlglot import exp

from lakeward.errors import InvalidRequest
from lakeward.query.translate.duckdb.calls import call, kind_of
from lakeward.query.translate.duckdb.templates import fail

_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"
_EXACT = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "FLOAT", "DOUBLE")

MACROS: list[str] = [
    # Trino's approx_percentile is of x's type (an array of it for an array of percentages);
    # a decimal is taken as a double.
    "CREATE MACRO trino_percentile"
    + "".join(f"(x {t}, p) AS quantile_disc(x, p), " for t in _EXACT)
    + "(x, p) AS quantile_disc(CAST(x AS DOUBLE), p)",
    # Digits of any case, an optional sign; a digit outside the radix is an error.
    "CREATE MACRO trino_from_base(s, r) AS CASE "
    "WHEN r < 2 OR r > 36 THEN " + fail("'Radix must be between 2 and 36'") + " "
    "WHEN NOT regexp_full_match(lower(s), '[+-]?[0-9a-z]+') OR list_bool_or(list_transform("
    f"string_split(lower(ltrim(s, '+-')), ''), lambda c: position(c IN '{_DIGITS}') > r)) THEN "
    + fail("'Not a valid base-' || r || ' number: ' || s")
    + " ELSE (CASE WHEN starts_with(s, '-') THEN -1 ELSE 1 END) * list_reduce("
    f"list_transform(string_split(lower(ltrim(s, '+-')), ''), lambda c: CAST(position(c IN "
    f"'{_DIGITS}') - 1 AS BIGINT)), lambda acc, d: acc * r + d, CAST(0 AS BIGINT)) END",
    # Trino's widthBucket, in doubles: the bucket of x among n equal ones between the bounds.
    "CREATE MACRO trino_width_bucket(x, b1, b2, n) AS CASE "
    "WHEN n <= 0 THEN " + fail("'bucketCount must be greater than 0'") + " "
    "WHEN isnan(x) THEN " + fail("'operand must not be NaN'") + " "
    "WHEN NOT isfinite(b1) THEN " + fail("'first bound must be finite'") + " "
    "WHEN NOT isfinite(b2) THEN " + fail("'second bound must be finite'") + " "
    "WHEN b1 = b2 THEN " + fail("'bounds cannot equal each other'") + " "
    "WHEN b1 < b2 AND x < b1 THEN CAST(0 AS BIGINT) "
    "WHEN b1 < b2 AND x >= b2 THEN CAST(n + 1 AS BIGINT) "
    "WHEN b1 < b2 THEN CAST(trunc((x - b1) / (b2 - b1) * n) AS BIGINT) + 1 "
    "WHEN x > b1 THEN CAST(0 AS BIGINT) "
    "WHEN x <= b2 THEN CAST(n + 1 AS BIGINT) "
    "ELSE n - (CAST(trunc((x - b2) / (b1 - b2) * n) AS BIGINT) + 1) + 1 END",
]


def _double(node: exp.Expr) -> exp.Expr:
    return exp.Cast(this=node, to=exp.DataType.build("DOUBLE"))


def _analytic(node: exp.Expr) -> exp.Expr:
    if isinstance(node, exp.ApproxQuantile):
        if node.args.get("weight") is not None or node.args.get("accuracy") is not None:
            raise InvalidRequest(
                "function approx_percentile with weights is not supported on DuckDB: the "
                "exact weighted percentile it would give needs every row's weight in memory"
            )
        percentages = node.args["quantile"]
        many = isinstance(percentages, exp.Array)
        for p in percentages.expressions if many else [percentages]:
            value = p.this if isinstance(p, exp.Cast) else p  # a literal typed as Trino types it
            if not isinstance(value, exp.Literal) or not 0 <= float(value.name) <= 1:
                raise InvalidRequest(
                    "approx_percentile: the percentage must be a constant between 0 and 1 "
                    f"on DuckDB, not {p.sql(dialect='trino')}"
                )
        return call("trino_percentile", node.this, percentages)
    if isinstance(node, exp.FromBase):
        return call("trino_from_base", node.this, node.expression)
    if isinstance(node, exp.WidthBucket):
        args = [node.this, node.args.get("min_value"), node.args.get("max_value")]
        count = node.args.get("num_buckets")
        if any(a is None for a in args) or count is None:
            raise InvalidRequest("width_bucket with an array of bins is not supported on DuckDB")
        return call("trino_width_bucket", *(_double(a) for a in args if a is not None), count)
    if isinstance(node, exp.Reverse) and kind_of(node.this) == "array":
        return call("list_reverse", node.this)
    if isinstance(node, exp.Anonymous):
        name = node.name.lower()
        if name == "to_base" and len(node.expressions) == 2:  # Trino's digits are lower case
            return call("lower", exp.Anonymous(this="to_base", expressions=node.expressions))
        if name == "to_milliseconds" and len(node.expressions) == 1:
            millis = exp.Mul(
                this=call("epoch", node.expressions[0]), expression=exp.Literal.number(1000)
            )
            return exp.Cast(this=call("round", millis), to=exp.DataType.build("BIGINT"))
    return node


REWRITES = [_analytic]
REFUSED: dict[str, str] = {}
