"""Regular expression functions: Trino's are Java's (joni), DuckDB's are RE2.

The two agree on the common syntax. What RE2 lacks (back-references,
lookaround, possessive quantifiers and atomic groups, Java's named classes
such as ``\\p{Alpha}``, class intersections, ``\\G``, ``\\Z``, ``\\R``, ``\\h``)
is refused: by the pattern's text when it is a constant, else when the
query meets the pattern. Trino's ``regexp_extract`` is NULL without a
match (DuckDB's is empty) and fails for a group the pattern lacks; its
``regexp_replace`` names groups ``$n`` (DuckDB's ``\\n``).
"""

from __future__ import annotations

import re

from sqlglot import exp

from lakeward.errors import InvalidRequest
from lakeward.query.translate.duckdb.templates import fail, fill

# Java pattern syntax RE2 cannot run (and may read as something else).
_JAVA_ONLY = (
    r"\\[1-9]|\\k<|\(\?(?:=|!|<=|<!|>)|[*+?}]\+|&&"
    r"|\\[pP]\{(?:Is|In|java|Alpha|Digit|Alnum|Upper|Lower|Punct|Graph|Print|Blank|Cntrl"
    r"|XDigit|Space|ASCII)|\\[GZRXhHvV]"
)
_JAVA_ONLY_RE = re.compile(_JAVA_ONLY)
_WHY = (
    "is not supported: it uses Java regular expression syntax that the DuckDB engine "
    "lacks (back-references, lookaround, possessive or atomic groups, Java class names)"
)

MACROS: list[str] = [
    # A pattern the query text did not show, checked as the query meets it.
    "CREATE MACRO trino_java_pattern(p) AS CASE WHEN regexp_matches(p, "
    + "'"
    + _JAVA_ONLY.replace("'", "''")
    + "') THEN "
    + fail("'the regular expression ' || p || ' " + _WHY + "'", "VARCHAR")
    + " ELSE p END",
    "CREATE MACRO trino_regexp_extract(s, p, g) AS "
    "CASE WHEN regexp_matches(s, p) THEN regexp_extract(s, p, g) END",
    "CREATE MACRO trino_regexp_position(s, p) AS CASE WHEN s IS NULL OR p IS NULL THEN NULL "
    "WHEN regexp_matches(s, p) THEN CAST(length(regexp_replace(s, '(?:' || p || ')(?s:.*)', ''))"
    " + 1 AS INTEGER) ELSE -1 END",
    "CREATE MACRO trino_java_replacement(r) AS CASE WHEN contains(r, '$') OR contains(r, '\\') "
    "THEN "
    + fail(
        "'a regexp_replace replacement ' || r || ' that is not a constant is not supported'",
        "VARCHAR",
    )
    + " ELSE r END",
]

_PATTERN_ARG: dict[type[exp.Expr], str] = {
    exp.RegexpLike: "expression",
    exp.RegexpExtract: "expression",
    exp.RegexpExtractAll: "expression",
    exp.RegexpReplace: "expression",
    exp.RegexpSplit: "expression",
    exp.RegexpCount: "expression",
}


def _groups(pattern: str) -> int:
    """Capturing groups in a pattern: '(' neither escaped nor starting '(?' (but '(?<name>')."""
    count, escaped, in_class = 0, False, False
    for i, char in enumerate(pattern):
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == "[":
            in_class = True
        elif char == "]":
            in_class = False
        elif char == "(" and not in_class:
            rest = pattern[i + 1 : i + 4]
            if not rest.startswith("?") or rest.startswith(("?<", "?P<")) and rest[2:3] not in "=!":
                count += 1
    return count


def _checked(pattern: exp.Expr, function: str) -> exp.Expr:
    if isinstance(pattern, exp.Literal) and pattern.is_string:
        found = _JAVA_ONLY_RE.search(pattern.name)
        if found:
            raise InvalidRequest(
                f"function {function} with the pattern {pattern.name!r} {_WHY} "
                f"(here {found.group(0)!r})"
            )
        return pattern
    return exp.Anonymous(this="trino_java_pattern", expressions=[pattern])


def _replacement(text: exp.Expr) -> exp.Expr:
    """Java's replacement ($n a group, \\x the character x) in RE2's (\\n, \\\\ a backslash)."""
    if not (isinstance(text, exp.Literal) and text.is_string):
        return exp.Anonymous(this="trino_java_replacement", expressions=[text])
    out, chars = [], iter(text.name)
    for char in chars:
        if char == "\\":
            literal = next(chars, "")
            out.append("\\\\" if literal == "\\" else literal)
        elif char == "$":
            digit = next(chars, "")
            if not digit.isdigit():
                raise InvalidRequest(
                    f"function regexp_replace: the replacement {text.name!r} has an illegal "
                    "group reference ($ must be followed by a group number; \\$ is a $)"
                )
            out.append("\\" + digit)
        else:
            out.append(char)
    return exp.Literal.string("".join(out))


def regexps(node: exp.Expr) -> exp.Expr:
    key = _PATTERN_ARG.get(type(node))
    if key is not None and isinstance(node, exp.Func):
        name = node.sql_name().lower()
        node.set(key, _checked(node.args[key], name))
    if isinstance(node, exp.RegexpExtract):
        group = node.args.get("group") or exp.Literal.number(0)
        pattern = node.expression
        if isinstance(pattern, exp.Literal) and group.is_int:
            groups = _groups(pattern.name)
            if int(group.name) > groups:
                raise InvalidRequest(
                    f"Pattern has {groups} groups. Cannot access group {group.name}"
                )
        return exp.Anonymous(this="trino_regexp_extract", expressions=[node.this, pattern, group])
    if isinstance(node, exp.RegexpReplace):
        replacement = node.args.get("replacement")
        if replacement is not None:
            node.set("replacement", _replacement(replacement))
        return node
    if isinstance(node, exp.Anonymous) and node.name.lower() == "regexp_position":
        if len(node.expressions) != 2:
            raise InvalidRequest(
                "function regexp_position is not supported with a start or an occurrence"
            )
        text, pattern = node.expressions
        return fill("trino_regexp_position(_s, _p)", s=text, p=_checked(pattern, "regexp_position"))
    return node


REWRITES = [regexps]
REFUSED: dict[str, str] = {}
