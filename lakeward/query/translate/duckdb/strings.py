"""String functions as Trino defines them.

Positions count from 1 and position 0 is before the string (``substr(s, 0)`` is
empty); ``split_part`` past the last part is NULL; ``split`` takes an optional
limit; ``strpos`` an optional occurrence; ``format`` is Java's
``String.format``, of which the common conversions (``%s``, ``%d``,
``%f`` with flags, width and precision, ``%%``, ``%n``) are written as DuckDB's
printf and the rest refused by name.
"""

from __future__ import annotations

import re

from sqlglot import exp

from lakeward.errors import InvalidRequest
from lakeward.query.translate.duckdb.templates import fail, fill

MACROS: list[str] = [
    "CREATE MACRO trino_substr(s, start) AS CASE WHEN s IS NULL OR start IS NULL THEN NULL "
    "WHEN start = 0 OR start < -length(s) THEN '' ELSE substring(s, start) END, "
    "(s, start, n) AS CASE WHEN s IS NULL OR start IS NULL OR n IS NULL THEN NULL "
    "WHEN start = 0 OR start < -length(s) THEN '' ELSE substring(s, start, n) END",
    "CREATE MACRO trino_split_part(s, d, n) AS CASE WHEN n <= 0 THEN "
    + fail("'Index must be greater than zero'", "VARCHAR")
    + " ELSE string_split(s, d)[n] END",
    "CREATE MACRO trino_split(s, d, n) AS CASE WHEN n <= 0 THEN "
    + fail("'Limit must be positive'", "VARCHAR[]")
    + " WHEN len(string_split(s, d)) <= n THEN string_split(s, d) "
    "ELSE string_split(s, d)[1:n - 1] || [array_to_string(string_split(s, d)[n:], d)] END",
    # The n-th occurrence: the lengths of the first n parts split at the substring.
    "CREATE MACRO trino_strpos(s, sub, n) AS CASE WHEN n <= 0 THEN "
    + fail("'Occurrence must be positive'", "BIGINT")
    + " WHEN len(string_split(s, sub)) <= n THEN 0 "
    "ELSE CAST(list_sum(list_transform(string_split(s, sub)[1:n], lambda p: length(p))) "
    "+ (n - 1) * length(sub) + 1 AS BIGINT) END",
    # Trino upper-cases code point by code point (Java's Character.toUpperCase), which
    # keeps ß; DuckDB's upper makes it ẞ, its only other answer: upper the parts between.
    "CREATE MACRO trino_upper(s) AS "
    "array_to_string(list_transform(string_split(s, 'ß'), lambda p: upper(p)), 'ß')",
    "CREATE MACRO trino_codepoint(s) AS CASE WHEN length(s) <> 1 THEN "
    + fail("'codepoint needs a string of one character'", "INTEGER")
    + " ELSE unicode(s) END",
]

# %[flags][width][.precision]conversion, or a literal %% / %n.
_SPECIFIER = re.compile(r"%(?P<index>\d+\$)?(?P<flags>[-#+ 0,(<]*)(?P<width>\d+)?"
                        r"(?:\.(?P<precision>\d+))?(?P<conversion>[a-zA-Z%])")  # fmt: skip


def _format(node: exp.Expr) -> exp.Expr:
    """Java's String.format as DuckDB's printf, for the conversions both write alike."""
    pattern, *values = (
        node.expressions if isinstance(node, exp.Anonymous) else [node.this, *node.expressions]
    )
    if not (isinstance(pattern, exp.Literal) and pattern.is_string):
        raise InvalidRequest(
            "function format is not supported with a format string that is not a constant"
        )
    text, args, used = [], [], 0
    position = 0
    for match in _SPECIFIER.finditer(pattern.name):
        text.append(pattern.name[position : match.start()].replace("%", "%%"))
        position = match.end()
        conversion, flags = match["conversion"], match["flags"]
        if conversion == "%":
            text.append("%%")
            continue
        if conversion == "n":
            text.append("\n")
            continue
        if match["index"] or set(flags) - {"-", "0"} or conversion not in "sdf":
            raise InvalidRequest(
                f"function format is not supported with the specifier {match[0]}: "
                "only %s, %d and %f with the flags - and 0, a width and a precision"
            )
        if used >= len(values):
            raise InvalidRequest(f"function format: no argument for {match[0]}")
        value = values[used]
        used += 1
        if conversion == "s":  # Java writes NULL as null, and a double as Double.toString
            value = fill("coalesce(CAST(_v AS VARCHAR), 'null')", v=value)
        elif conversion == "f":  # Java rounds half up; C's printf to the nearest binary value
            digits = int(match["precision"] or 6)
            value = fill(f"round(CAST(_v AS DOUBLE), {digits})", v=value)
        text.append(match[0])
        args.append(value)
    text.append(pattern.name[position:].replace("%", "%%"))
    return exp.Anonymous(this="printf", expressions=[exp.Literal.string("".join(text)), *args])


def strings(node: exp.Expr) -> exp.Expr:
    if isinstance(node, exp.Upper):
        return exp.Anonymous(this="trino_upper", expressions=[node.this])
    if isinstance(node, exp.Substring):
        args = [node.this, node.args.get("start") or exp.Literal.number(1)]
        if node.args.get("length") is not None:
            args.append(node.args["length"])
        return exp.Anonymous(this="trino_substr", expressions=args)
    if isinstance(node, exp.StrPosition) and node.args.get("occurrence") is not None:
        return exp.Anonymous(
            this="trino_strpos",
            expressions=[node.this, node.args["substr"], node.args["occurrence"]],
        )
    if isinstance(node, exp.Split) and node.args.get("limit") is not None:
        return exp.Anonymous(
            this="trino_split", expressions=[node.this, node.expression, node.args["limit"]]
        )
    if isinstance(node, exp.SplitPart):
        return exp.Anonymous(
            this="trino_split_part",
            expressions=[node.this, node.args["delimiter"], node.args["part_index"]],
        )
    if isinstance(node, exp.Normalize):
        form = node.args.get("form")
        if isinstance(form, exp.Expr) and form.name.upper() != "NFC":
            raise InvalidRequest(f"function normalize is not supported with the form {form.name}")
        return exp.Anonymous(this="nfc_normalize", expressions=[node.this])
    if isinstance(node, exp.Format) or (
        isinstance(node, exp.Anonymous) and node.name.lower() == "format"
    ):
        return _format(node)
    if isinstance(node, (exp.DPipe, exp.Concat)):
        return _typed_nulls(node)
    if isinstance(node, exp.Anonymous):
        name = node.name.lower()
        if name == "codepoint":
            return exp.Anonymous(this="trino_codepoint", expressions=node.expressions)
        if name == "hamming_distance":
            return exp.Anonymous(this="hamming", expressions=node.expressions)
    return node


def _typed_nulls(node: exp.Expr) -> exp.Expr:
    """A NULL beside a string in || is a varchar NULL (DuckDB would type the result NULL)."""
    parts = list(node.iter_expressions())
    if any(isinstance(p, exp.Literal) and p.is_string for p in parts):
        for part in parts:
            if isinstance(part, exp.Null):
                part.replace(exp.Cast(this=exp.Null(), to=exp.DataType.build("VARCHAR")))
    return node


REWRITES = [strings]
REFUSED: dict[str, str] = {}
