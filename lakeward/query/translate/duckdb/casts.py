"""CAST and TRY_CAST as Trino does them.

Trino rounds a double half away from zero when casting it to an integer type
(DuckDB rounds half to even), reads only digits as an integer from text
(DuckDB also reads ``1.5`` and ``1e2``), reads a boolean from ``true``,
``false``, ``t``, ``f``, ``1`` or ``0`` only, writes a double as Java does
(``1.0E10``) and a JSON scalar as its value. The value's type is known only
to DuckDB's binder, so each cast becomes a CASE on ``typeof`` whose branches
all bind for any type (TRY_CAST to the branch's type) and all give the target
type.
"""

from __future__ import annotations

from sqlglot import exp

from lakeward.query.translate.duckdb.numbers import cast_from
from lakeward.query.translate.duckdb.templates import fail, fill

_INTEGER_NAMES = {
    exp.DataType.Type.TINYINT: "TINYINT",
    exp.DataType.Type.SMALLINT: "SMALLINT",
    exp.DataType.Type.INT: "INTEGER",
    exp.DataType.Type.BIGINT: "BIGINT",
}
_TRINO_NAMES = {"TINYINT": "TINYINT", "SMALLINT": "SMALLINT", "INTEGER": "INT", "BIGINT": "BIGINT"}


def _checked_text(name: str, valid: str, value: str, refused: str) -> str:
    return f"CREATE MACRO {name}(s) AS CASE WHEN {valid} THEN {value} ELSE {refused} END"


def _cannot(target: str, as_type: str) -> str:
    return fail(f"'Cannot cast ''' || s || ''' to {target}'", as_type, "INVALID_CAST_ARGUMENT")


_INTEGER_TEXT = (
    "regexp_full_match(s, '[\\x00-\\x20]*[+-]?[0-9]+[\\x00-\\x20]*')"  # Java trims first
)
_TRUE, _FALSE = "lower(s) IN ('true', 't', '1')", "lower(s) IN ('false', 'f', '0')"

MACROS: list[str] = [
    *(
        _checked_text(
            f"trino_{t.lower()}_text", _INTEGER_TEXT, "s", _cannot(_TRINO_NAMES[t], "VARCHAR")
        )
        for t in _TRINO_NAMES
    ),
    _checked_text("trino_try_integer_text", _INTEGER_TEXT, "s", "NULL"),
    "CREATE MACRO trino_boolean_text(s) AS CASE WHEN "
    f"{_TRUE} THEN true WHEN {_FALSE} THEN false ELSE {_cannot('BOOLEAN', 'BOOLEAN')} END",
    f"CREATE MACRO trino_try_boolean_text(s) AS CASE WHEN {_TRUE} THEN true "
    f"WHEN {_FALSE} THEN false END",
    # Java's Double.toString (Float.toString for a real): plain from 10^-3 up to 10^7,
    # else d.dddE<n> with the same shortest digits DuckDB prints.
    "CREATE MACRO trino_java_mantissa(d) AS "
    "d[1] || '.' || CASE WHEN length(d) > 1 THEN d[2:] ELSE '0' END",
    "CREATE MACRO trino_java_scientific(s) AS CASE "
    "WHEN contains(s, 'e') THEN "
    "  trino_java_mantissa(replace(split_part(s, 'e', 1), '.', '')) || 'E' "
    "  || CAST(CAST(split_part(s, 'e', 2) AS INTEGER) AS VARCHAR) "
    "WHEN split_part(s, '.', 1) <> '0' THEN "
    "  trino_java_mantissa(rtrim(split_part(s, '.', 1) || split_part(s, '.', 2), '0')) "
    "  || 'E' || CAST(length(split_part(s, '.', 1)) - 1 AS VARCHAR) "
    "ELSE trino_java_mantissa(rtrim(ltrim(split_part(s, '.', 2), '0'), '0')) || 'E-' "
    "  || CAST(length(split_part(s, '.', 2)) - length(ltrim(split_part(s, '.', 2), '0')) + 1 "
    "  AS VARCHAR) END",
    "CREATE MACRO trino_java_double(x) AS CASE "
    "WHEN isnan(x) THEN 'NaN' "
    "WHEN isinf(x) THEN CASE WHEN x > 0 THEN 'Infinity' ELSE '-Infinity' END "
    "WHEN x = 0 OR (abs(x) >= 0.001 AND abs(x) < 10000000) THEN CAST(x AS VARCHAR) "
    "ELSE CASE WHEN x < 0 THEN '-' ELSE '' END || trino_java_scientific(CAST(abs(x) AS VARCHAR)) "
    "END",
]


def cast(node: exp.Expr) -> exp.Expr:
    if not isinstance(node, exp.Cast) or not isinstance(node.to, exp.DataType):
        return node
    value, to = node.this, node.to.this
    safe = isinstance(node, exp.TryCast)
    exact, is_floating = cast_from(node)
    known = exact is not None
    kind = "TRY_CAST" if safe else "CAST"
    if to in _INTEGER_NAMES and is_floating:  # round half away from zero
        return fill(f"{kind}(round(_x) AS {_INTEGER_NAMES[to]})", x=value)
    if to in _INTEGER_NAMES and not known:
        name = _INTEGER_NAMES[to]
        text_check = "trino_try_integer_text" if safe else f"trino_{name.lower()}_text"
        return fill(
            "CASE WHEN typeof(_x) IN ('DOUBLE', 'FLOAT') "
            f"THEN {kind}(round(TRY_CAST(_x AS DOUBLE)) AS {name}) "
            "WHEN typeof(_x) = 'VARCHAR' "
            f"THEN {kind}({text_check}(TRY_CAST(_x AS VARCHAR)) AS {name}) "
            f"ELSE {kind}(_x AS {name}) END",
            x=value,
        )
    if to == exp.DataType.Type.BOOLEAN and not known:
        check = "trino_try_boolean_text" if safe else "trino_boolean_text"
        return fill(
            f"CASE WHEN typeof(_x) = 'VARCHAR' THEN {check}(TRY_CAST(_x AS VARCHAR)) "
            f"ELSE {kind}(_x AS BOOLEAN) END",
            x=value,
        )
    if to in (exp.DataType.Type.VARCHAR, exp.DataType.Type.TEXT):
        text: exp.Expr = node
        if is_floating:
            text = fill("trino_java_double(_x)", x=value)
        elif not known and not (isinstance(value, exp.Literal) and value.is_string):
            text = fill(
                "CASE WHEN typeof(_x) = 'DOUBLE' THEN trino_java_double(TRY_CAST(_x AS DOUBLE)) "
                "WHEN typeof(_x) = 'FLOAT' THEN trino_java_double(TRY_CAST(_x AS FLOAT)) "
                "WHEN typeof(_x) = 'JSON' THEN trino_json_text(TRY_CAST(_x AS JSON)) "
                f"ELSE {kind}(_x AS VARCHAR) END",
                x=value,
            )
        length = node.to.expressions
        if length:  # varchar(n) keeps the first n characters
            text = fill("substr(_x, 1, _n)", x=text, n=length[0].this)
        return text
    return node


REWRITES = [cast]
REFUSED: dict[str, str] = {}
