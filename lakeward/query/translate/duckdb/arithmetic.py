"""Arithmetic as Trino defines it: integer division, decimal types, rounding.

``/`` on two integers is integer division truncating toward zero (``7 / 2`` is
3, ``-7 / 2`` is -3) in the wider operand type; DuckDB's ``/`` always gives a
double. Where the operand types are known from the text (``numbers``) the
exact form is written out: decimal division rounds half up to the scale of the
wider operand. Elsewhere (columns) DuckDB's binder picks among a macro's typed
overloads: integer division for integers, a plain division for floating point,
and a refusal for a decimal whose precision the translation could not see.
``round``, ``ceil`` and ``floor`` keep Trino's result types the same way.
"""

from __future__ import annotations

from sqlglot import exp

from lakeward.errors import InvalidRequest
from lakeward.query.translate.duckdb.numbers import Numeric, is_floating, operands, typed
from lakeward.query.translate.duckdb.templates import fail

_INTEGERS = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT")


def _refuse_decimal(what: str, *values: str) -> str:
    """A condition and error for decimals of a precision the query does not show.

    Macros take their arguments untyped: DuckDB cannot choose among typed
    overloads for an argument holding an aggregate (``round(avg(x), 2)``).
    """
    decimal = " OR ".join(f"typeof({v}) LIKE 'DECIMAL%'" for v in values)
    floating = " AND ".join(f"typeof({v}) NOT IN ('DOUBLE', 'FLOAT')" for v in values)
    message = (
        f"{what} of a decimal value whose precision and scale the query does not show is not "
        "supported: CAST it to decimal(p,s) or double first"
    )
    failure = fail("'" + message + "'")
    return f"WHEN ({decimal}) AND {floating} THEN {failure}"


MACROS: list[str] = [
    # DuckDB's // is integer division (truncating) for integers and / for floating point,
    # but fails on a zero divisor where Trino's double division is infinite or NaN: a
    # division known to be of doubles stays a /, and one found so here is refused.
    "CREATE MACRO trino_divide(a, b) AS "
    f"CASE {_refuse_decimal('division', 'a', 'b')} "
    "WHEN b = 0 AND (typeof(a) IN ('DOUBLE', 'FLOAT') OR typeof(b) IN ('DOUBLE', 'FLOAT')) THEN "
    + fail(
        "'a division by zero of doubles whose type the query does not show is not supported: "
        "CAST the dividend to double'"
    )
    + " ELSE a // b END",
    # Round half away from zero, as Trino's decimal division does.
    "CREATE MACRO trino_decimal_quotient(n, d) AS "
    "(n // d) + CASE WHEN 2 * abs(n % d) >= abs(d) THEN sign(n) * sign(d) ELSE 0 END",
    f"CREATE MACRO trino_round(x) AS CASE {_refuse_decimal('round', 'x')} ELSE round(x) END, "
    f"(x, d) AS CASE {_refuse_decimal('round', 'x')} ELSE round(x, d) END",
    # trunc keeps an integer's type, as Trino's ceil and floor do (DuckDB's give doubles).
    "CREATE MACRO trino_ceil(x) AS trunc(x) + CASE WHEN x > trunc(x) THEN 1 ELSE 0 END",
    "CREATE MACRO trino_floor(x) AS trunc(x) - CASE WHEN x < trunc(x) THEN 1 ELSE 0 END",
    # In the argument's type (DuckDB's sign is a TINYINT), NaN for NaN.
    "CREATE MACRO trino_sign(x) AS CASE WHEN isnan(x) THEN x ELSE sign(x) + least(x * 0, 0) END",
    # Trino's sum of integers is a bigint (an overflow is an error); DuckDB's a HUGEINT.
    # Typed overloads are safe here: the argument of an aggregate holds no aggregate.
    "CREATE MACRO trino_sum"
    + ", ".join([f"(x {t}) AS CAST(sum(x) AS BIGINT)" for t in _INTEGERS] + ["(x) AS sum(x)"]),
    # Exact for perfect cubes, as Java's Math.cbrt is; DuckDB's is one ulp off for some.
    "CREATE MACRO trino_cbrt(x) AS "
    "CASE WHEN round(cbrt(x)) ^ 3 = x THEN round(cbrt(x)) ELSE cbrt(x) END",
]

_MACRO_OF: dict[type[exp.Expr], str] = {
    exp.Round: "trino_round",
    exp.Ceil: "trino_ceil",
    exp.Floor: "trino_floor",
    exp.Sign: "trino_sign",
    exp.Cbrt: "trino_cbrt",
}
_RENAMED = {"is_infinite": "isinf", "is_finite": "isfinite"}
_CONSTANTS = {"infinity": "Infinity", "nan": "NaN"}


def _cast(node: exp.Expr, to: str) -> exp.Cast:
    return exp.Cast(this=node, to=exp.DataType.build(to, dialect="duckdb"))


def _hugeint(value: int) -> exp.Expr:
    return _cast(exp.Literal.string(str(value)), "HUGEINT")


def decimal_literal(node: exp.Expr) -> exp.Expr:
    """A decimal literal typed as Trino types it (DuckDB counts leading zeros: 0.001)."""
    found = typed(node)
    if found is None or found.integer:
        return node
    if isinstance(node, exp.Literal) and not node.is_string:
        return _cast(node, found.sql())
    literal = isinstance(node, exp.Cast) and isinstance(node.this, exp.Literal)
    if (
        literal
        and isinstance(node, exp.Cast)
        and node.to.this == exp.DataType.Type.DECIMAL
        and not node.to.expressions
    ):
        return _cast(node.this, found.sql())  # DECIMAL '12.34'
    return node


def divide(node: exp.Expr) -> exp.Expr:
    if not isinstance(node, exp.Div):
        return node
    result = typed(node)
    left, right = operands(node)
    if result is not None and not result.integer and left is not None and right is not None:
        return _decimal_quotient(node.left, node.right, left, right, result)
    if is_floating(node):  # IEEE: x / 0 is infinite or NaN (DuckDB's // would fail)
        return node
    if left is not None and right is not None and left.integer and right.integer:
        # Integers seen in the text: DuckDB's // truncates and fails on zero as Trino's /
        # does, with no check left for the engine to make when it runs.
        return exp.IntDiv(this=node.left, expression=node.right)
    return exp.Anonymous(this="trino_divide", expressions=[node.left, node.right])


def _decimal_quotient(
    a: exp.Expr, b: exp.Expr, left: Numeric, right: Numeric, result: Numeric
) -> exp.Expr:
    """a / b for decimals: the unscaled values divided in 128-bit integers, rounded half up."""

    def unscaled(value: exp.Expr, scale: int) -> exp.Expr:
        if scale:
            value = exp.Mul(this=exp.Paren(this=value), expression=_hugeint(10**scale))
        return _cast(value, "HUGEINT")

    shift = result.scale + right.scale - left.scale
    numerator = unscaled(a, left.scale)
    if shift:
        numerator = exp.Mul(this=numerator, expression=_hugeint(10**shift))
    quotient = exp.Anonymous(
        this="trino_decimal_quotient", expressions=[numerator, unscaled(b, right.scale)]
    )
    return _from_unscaled(quotient, result)


def _from_unscaled(value: exp.Expr, result: Numeric) -> exp.Expr:
    """The decimal whose unscaled value is the 128-bit integer ``value``."""
    if not result.scale:
        return _cast(value, result.sql())
    step = _cast(
        exp.Literal.string(f"0.{'0' * (result.scale - 1)}1"),
        f"DECIMAL({result.scale},{result.scale})",
    )
    return _cast(exp.Mul(this=_cast(value, "DECIMAL(38,0)"), expression=step), result.sql())


def decimal_average(values: exp.Expr, of: Numeric, clauses: exp.Expr | None) -> exp.Expr:
    """avg of a decimal(p,s) as Trino computes it: exactly, a decimal(p,s) rounded half up.

    The sum's unscaled value (a 128-bit integer) is divided by the count; no double in
    between. ``values``: the aggregate's argument (``DISTINCT x`` too); ``clauses``: the
    average with its FILTER and OVER clauses, which the sum and the count are given alike.
    """

    def over(aggregate: exp.Expr) -> exp.Expr:
        if clauses is None:
            return aggregate
        wrapped = clauses.copy()
        inner = wrapped.this if isinstance(wrapped, exp.Window) else wrapped
        holder = inner if isinstance(inner, exp.Filter) else wrapped
        holder.set("this", aggregate)
        return wrapped

    total = over(exp.Sum(this=values.copy()))
    count = over(exp.Count(this=values.copy()))
    if of.scale:
        total = exp.Mul(this=total, expression=_hugeint(10**of.scale))
    quotient = exp.Anonymous(
        this="trino_decimal_quotient", expressions=[_cast(total, "HUGEINT"), count]
    )
    return _from_unscaled(quotient, of)


def rounding(node: exp.Expr) -> exp.Expr:
    """round, ceil, floor, sign, cbrt, and % of decimals in Trino's result types."""
    found = typed(node)
    if isinstance(node, exp.Mod):
        return _cast(node, found.sql()) if found is not None and not found.integer else node
    macro = _MACRO_OF.get(type(node))
    if macro is None:
        return node
    if (
        found is not None
        and not found.integer
        and isinstance(node, (exp.Round, exp.Ceil, exp.Floor))
    ):
        digits = node.args.get("decimals")
        if digits is not None and not (
            digits.is_int or isinstance(digits, exp.Neg) and digits.this.is_int
        ):
            raise InvalidRequest(
                "function round is not supported on a decimal with a number of digits that is "
                "not a constant: CAST the value to double first"
            )
        return _cast(node, found.sql())
    if isinstance(node, (exp.Ceil, exp.Floor)) and node.args.get("decimals") is not None:
        return node
    args = [node.this] + ([node.args["decimals"]] if node.args.get("decimals") else [])
    return exp.Anonymous(this=macro, expressions=args)


def integer_sum(node: exp.Expr) -> exp.Expr:
    """sum of integers is a bigint: the macro casts DuckDB's HUGEINT (overflow: an error)."""
    if not isinstance(node, exp.Sum) or isinstance(node.parent, (exp.Window, exp.Filter)):
        return node
    if isinstance(node.this, exp.Distinct):
        return node
    return exp.Anonymous(this="trino_sum", expressions=[node.this])


def named_functions(node: exp.Expr) -> exp.Expr:
    if not isinstance(node, exp.Anonymous):
        return node
    name = node.name.lower()
    if name in _RENAMED:
        return exp.Anonymous(this=_RENAMED[name], expressions=node.expressions)
    if name in _CONSTANTS and not node.expressions:
        return _cast(exp.Literal.string(_CONSTANTS[name]), "DOUBLE")
    return node


REWRITES = [decimal_literal, divide, rounding, integer_sum, named_functions]
REFUSED: dict[str, str] = {}
