"""A view's query laid out as Trino's SQL formatter lays it out, as Athena stores and shows it.

Trino keeps a view's text re-formatted, not as written: one clause a line, the FROM
relation indented beneath it, several select items one a line after a leading comma,
every comparison and logical term in parentheses, aliases without AS, a double as
``5E-1``. ``SHOW CREATE VIEW`` and Glue's view text then give that layout.

The layout covers the queries views are mostly made of: one SELECT over tables and joins.
Any other shape (WITH, set operations, subqueries, window frames...) is kept as written:
``formatted`` answers None, never a layout that might read otherwise.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError


class _Unformatted(Exception):
    """A construct the layout does not cover: the view keeps its text as written."""


def formatted(sql: str) -> str | None:
    """The query's text in Trino's layout, or None when it has a construct not covered."""
    try:
        tree = sqlglot.parse_one(sql, read="trino")
        if not isinstance(tree, exp.Select) or tree.args.get("with_"):
            return None
        return _select(tree).rstrip("\n")
    except (_Unformatted, SqlglotError):
        return None


def _select(node: exp.Select) -> str:
    items = [_item(e) for e in node.expressions]
    out = "SELECT" + (" DISTINCT" if node.args.get("distinct") else "")
    if len(items) > 1:
        out += "".join(("\n  " if i == 0 else "\n, ") + item for i, item in enumerate(items))
    else:
        out += " " + items[0]
    out += "\n"
    source = node.args.get("from_") or node.args.get("from")
    if source is not None:
        out += "FROM\n  " + _relation(source.this, node.args.get("joins") or []) + "\n"
    if node.args.get("where"):
        out += "WHERE " + _expression(node.args["where"].this) + "\n"
    group = node.args.get("group")
    if group:
        if set(group.args) - {"expressions"}:
            raise _Unformatted("ROLLUP, CUBE or GROUPING SETS")
        out += "GROUP BY " + ", ".join(_expression(e) for e in group.expressions) + "\n"
    if node.args.get("having"):
        out += "HAVING " + _expression(node.args["having"].this) + "\n"
    order = node.args.get("order")
    if order:
        out += "ORDER BY " + ", ".join(_ordered(o) for o in order.expressions) + "\n"
    if node.args.get("offset"):
        out += f"OFFSET {_expression(node.args['offset'].expression)} ROWS\n"
    if node.args.get("limit"):
        out += f"LIMIT {_expression(node.args['limit'].expression)}\n"
    known = {"expressions", "distinct", "from_", "from", "joins", "where", "group", "having"}
    if set(k for k, v in node.args.items() if v) - known - {"order", "offset", "limit"}:
        raise _Unformatted("a clause the layout does not cover")
    return out


def _item(node: exp.Expr) -> str:
    if isinstance(node, exp.Alias):
        return f"{_expression(node.this)} {_identifier(node.args['alias'])}"
    return _expression(node)


def _relation(first: exp.Expr, joins: list[exp.Join]) -> str:
    out = _table(first)
    for join in joins:
        kind = (join.side or join.kind or "").upper()
        on, using = join.args.get("on"), join.args.get("using")
        if not kind and on is None and not using:
            out = f"{out}\n, {_table(join.this)}"  # FROM a, b: Trino's implicit join
            continue
        kind = {"": "INNER", "OUTER": "FULL"}.get(kind, kind)
        if kind not in ("INNER", "LEFT", "RIGHT", "FULL", "CROSS"):
            raise _Unformatted(f"{kind} JOIN")
        out = f"({out}\n{kind} JOIN {_table(join.this)}"
        if on is not None:
            out += f" ON {_expression(on)}"
        elif using:
            out += " USING (" + ", ".join(_identifier(u) for u in using) + ")"
        out += ")"
    return out


def _table(node: exp.Expr) -> str:
    if not isinstance(node, exp.Table) or not isinstance(node.this, exp.Identifier):
        raise _Unformatted("a relation other than a table")
    parts = [node.args.get(k) for k in ("catalog", "db", "this")]
    name = ".".join(_identifier(p) for p in parts if p is not None)
    alias = node.args.get("alias")
    if alias is not None:
        if alias.args.get("columns"):
            raise _Unformatted("column aliases")
        name += " " + _identifier(alias.this)
    return name


def _identifier(node: exp.Expr) -> str:
    if not isinstance(node, exp.Identifier):
        raise _Unformatted("a name that is not an identifier")
    return f'"{node.this}"' if node.quoted else node.this


def _ordered(node: exp.Ordered) -> str:
    out = _expression(node.this) + (" DESC" if node.args.get("desc") else " ASC")
    return out + (" NULLS FIRST" if node.args.get("nulls_first") else "")


def _double(text: str) -> str:
    """Java's DecimalFormat("0.###################E0###"), as Trino writes a double."""
    value = Decimal(repr(float(text)))
    if value == 0:
        return "0E0"
    sign, digits, exponent = value.normalize().as_tuple()
    assert isinstance(exponent, int)
    shown = "".join(map(str, digits))
    mantissa = shown[0] + ("." + shown[1:] if len(shown) > 1 else "")
    return ("-" if sign else "") + f"{mantissa}E{exponent + len(shown) - 1}"


def _literal(node: exp.Literal) -> str:
    if node.is_string:
        return "'" + str(node.this).replace("'", "''") + "'"
    text = str(node.this)
    if any(c in text for c in ".eE"):
        return _double(text)  # Athena reads a number with a point or exponent as a double
    return str(int(text))


_BINARY: dict[type[exp.Expr], str] = {
    exp.EQ: "=", exp.NEQ: "<>", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">=",
    exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/", exp.Mod: "%",
    exp.And: "AND", exp.Or: "OR", exp.Like: "LIKE", exp.NullSafeNEQ: "IS DISTINCT FROM",
}  # fmt: skip
_TYPED_LITERALS = {
    exp.DataType.Type.DATE, exp.DataType.Type.TIMESTAMP, exp.DataType.Type.DECIMAL,
    exp.DataType.Type.TIME,
}  # fmt: skip
_SPECIAL_FORMS: dict[type[exp.Expr], str] = {
    exp.Coalesce: "COALESCE", exp.Nullif: "NULLIF",
}  # fmt: skip
_AGGREGATES = (exp.Sum, exp.Avg, exp.Min, exp.Max)


def _expression(node: exp.Expr) -> str:
    formatter = _FORMATTERS.get(type(node))
    if formatter is not None:
        return formatter(node)
    operator = _BINARY.get(type(node))
    if operator is not None:
        return f"({_expression(node.this)} {operator} {_expression(node.expression)})"
    if isinstance(node, exp.Func):
        return _function(node)
    raise _Unformatted(type(node).__name__)


def _function(node: exp.Func) -> str:
    if type(node) in _SPECIAL_FORMS:
        args = [node.this, *node.expressions] if isinstance(node, exp.Coalesce) else [
            node.this, node.expression]  # fmt: skip
        return f"{_SPECIAL_FORMS[type(node)]}({', '.join(_expression(a) for a in args)})"
    if isinstance(node, exp.Count):
        inner = node.this
        if isinstance(inner, exp.Star):
            return "count(*)"
        if isinstance(inner, exp.Distinct):
            return "count(DISTINCT " + ", ".join(_expression(e) for e in inner.expressions) + ")"
        return f"count({_expression(inner)})"
    if isinstance(node, _AGGREGATES) and set(k for k, v in node.args.items() if v) == {"this"}:
        return f"{type(node).__name__.lower()}({_expression(node.this)})"
    if isinstance(node, exp.Anonymous):
        shown = ", ".join(_expression(a) for a in node.expressions)
        return f"{node.name.lower()}({shown})"
    raise _Unformatted(type(node).__name__)


def _cast(node: exp.Cast) -> str:
    to = node.args["to"]
    literal = isinstance(node.this, exp.Literal) and node.this.is_string
    if literal and to.this in _TYPED_LITERALS and not to.expressions:
        return f"{to.this.value} {_literal(node.this)}"  # DATE '2020-01-01'
    name = "TRY_CAST" if isinstance(node, exp.TryCast) else "CAST"
    return f"{name}({_expression(node.this)} AS {to.sql(dialect='trino').lower()})"


def _in(node: exp.In) -> str:
    if node.args.get("query") or not node.expressions:
        raise _Unformatted("IN over a subquery")
    values = ", ".join(_expression(e) for e in node.expressions)
    return f"({_expression(node.this)} IN ({values}))"


def _not(node: exp.Not) -> str:
    # IS NOT NULL is a predicate of its own; Trino reads x NOT IN (...), NOT LIKE and NOT
    # BETWEEN as NOT around the predicate, and writes them so.
    inner = node.this
    if isinstance(inner, exp.Is) and isinstance(inner.expression, exp.Null):
        return f"({_expression(inner.this)} IS NOT NULL)"
    return f"(NOT {_expression(inner)})"


def _is(node: exp.Is) -> str:
    if not isinstance(node.expression, exp.Null):
        raise _Unformatted("IS other than IS NULL")
    return f"({_expression(node.this)} IS NULL)"


def _case(node: exp.Case) -> str:
    parts = ["CASE"] + ([_expression(node.this)] if node.this is not None else [])
    for branch in node.args["ifs"]:
        parts += ["WHEN", _expression(branch.this), "THEN", _expression(branch.args["true"])]
    if node.args.get("default") is not None:
        parts += ["ELSE", _expression(node.args["default"])]
    return " ".join([*parts, "END"])


def _column(node: exp.Column) -> str:
    parts = [node.args.get(k) for k in ("catalog", "db", "table")]
    prefix = "".join(_identifier(p) + "." for p in parts if p is not None)
    if isinstance(node.this, exp.Star):
        return prefix + "*"
    return prefix + _identifier(node.this)


_FORMATTERS: dict[type[exp.Expr], Callable[..., str]] = {
    exp.Column: _column,
    exp.Star: lambda node: "*",
    exp.Literal: _literal,
    exp.Boolean: lambda node: "true" if node.this else "false",
    exp.Null: lambda node: "null",
    exp.Paren: lambda node: _expression(node.this),
    exp.Neg: lambda node: "-" + (" " if (v := _expression(node.this)).startswith("-") else "") + v,
    exp.Not: _not,
    exp.Is: _is,
    exp.In: _in,
    exp.Between: lambda node: (
        f"({_expression(node.this)} BETWEEN {_expression(node.args['low'])} "
        f"AND {_expression(node.args['high'])})"
    ),
    exp.Case: _case,
    exp.If: lambda node: (
        "IF("
        + ", ".join(
            _expression(a) for a in (node.this, node.args["true"], node.args.get("false")) if a
        )
        + ")"
    ),  # fmt: skip
    exp.Cast: _cast,
    exp.TryCast: _cast,
    exp.Array: lambda node: "ARRAY[" + ", ".join(_expression(e) for e in node.expressions) + "]",
}
