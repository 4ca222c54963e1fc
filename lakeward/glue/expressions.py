"""GetPartitions' ``Expression``: a SQL condition on partition keys, evaluated as Glue does.

Glue compares each key by its declared type (``year > 9`` on an int key is numeric, on a
string key it compares text), and accepts =, <>, !=, <, <=, >, >=, BETWEEN, IN, LIKE,
IS [NOT] NULL, AND, OR, NOT and parentheses. Anything else, an unknown key, or a
literal the key's type cannot take is ``InvalidInputException`` naming it.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

import sqlglot
from sqlglot import expressions as exp

from lakeward.errors import InvalidRequest

HIVE_DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"  # a NULL partition value

Predicate = Callable[[Sequence[str]], bool]
# Inside, conditions are SQL's three-valued: a NULL partition value makes a comparison
# unknown (None), and NOT unknown is unknown; a partition matches only when true.
_Test = Callable[[Sequence[str]], bool | None]
_INTEGERS = ("tinyint", "smallint", "int", "integer", "bigint", "long")
_COMPARE: dict[type[exp.Expression], Callable[[Any, Any], bool]] = {
    exp.EQ: lambda a, b: a == b,
    exp.NEQ: lambda a, b: a != b,
    exp.GT: lambda a, b: a > b,
    exp.GTE: lambda a, b: a >= b,
    exp.LT: lambda a, b: a < b,
    exp.LTE: lambda a, b: a <= b,
}


def _invalid(expression: str, why: str) -> InvalidRequest:
    return InvalidRequest(f"Expression {expression!r} is not valid: {why}")


def _converter(key: str, kind: str) -> Callable[[str], Any]:
    kind = kind.lower()
    if kind in _INTEGERS:
        return int
    if kind.startswith("decimal") or kind in ("double", "float"):
        return Decimal
    if kind == "date":
        return dt.date.fromisoformat
    if kind == "timestamp":
        return lambda v: dt.datetime.fromisoformat(v.replace(" ", "T"))
    if kind in ("string", "boolean") or kind.startswith(("varchar", "char")):
        return str
    raise InvalidRequest(f"partition key {key} has type {kind}, which Glue cannot filter on")


def compile_expression(text: str, keys: Sequence[tuple[str, str]]) -> Predicate:
    """A predicate over a partition's values (in ``keys``' order) for ``text``."""
    try:
        tree = sqlglot.parse_one(text, read="hive")
    except sqlglot.errors.SqlglotError as exc:
        raise _invalid(text, str(exc).split("\n", 1)[0]) from None
    positions = {name.lower(): i for i, (name, _) in enumerate(keys)}
    converters = [_converter(name, kind) for name, kind in keys]

    def key_of(node: exp.Expression) -> int:
        if not isinstance(node, exp.Column) or node.table:
            raise _invalid(text, f"{node.sql()} is not a partition key")
        index = positions.get(node.name.lower())
        if index is None:
            known = ", ".join(name for name, _ in keys) or "none"
            raise _invalid(text, f"{node.name} is not a partition key (the keys: {known})")
        return index

    def literal(node: exp.Expression, index: int) -> Any:
        if not isinstance(node, exp.Literal):
            raise _invalid(text, f"{node.sql()} is not a literal")
        try:
            return converters[index](node.this)
        except (ValueError, InvalidOperation):
            name, kind = keys[index]
            raise _invalid(text, f"{node.sql()} is not a {kind} (key {name})") from None

    def value(values: Sequence[str], index: int) -> Any:
        raw = values[index]
        if raw == HIVE_DEFAULT_PARTITION:
            return None
        try:
            return converters[index](raw)
        except (ValueError, InvalidOperation):
            return None  # a value its type cannot read matches no comparison, as in SQL

    def build(node: exp.Expression) -> _Test:
        if isinstance(node, exp.Paren):
            return build(node.this)
        if isinstance(node, exp.And):
            left, right = build(node.this), build(node.expression)
            return lambda v: _and(left(v), right(v))
        if isinstance(node, exp.Or):
            left, right = build(node.this), build(node.expression)
            return lambda v: _or(left(v), right(v))
        if isinstance(node, exp.Not):
            inner = build(node.this)
            return lambda v: None if (x := inner(v)) is None else not x
        compare = _COMPARE.get(type(node))
        if compare is not None:
            left_node, right_node = node.this, node.expression
            if isinstance(left_node, exp.Literal):  # 2020 < year
                left_node, right_node = right_node, left_node
                flipped = compare
                compare = lambda a, b: flipped(b, a)  # noqa: E731
            index = key_of(left_node)
            bound = literal(right_node, index)
            test = compare
            return lambda v: None if (x := value(v, index)) is None else test(x, bound)
        if isinstance(node, exp.Between):
            index = key_of(node.this)
            low, high = literal(node.args["low"], index), literal(node.args["high"], index)
            return lambda v: None if (x := value(v, index)) is None else low <= x <= high
        if isinstance(node, exp.In):
            index = key_of(node.this)
            options = {literal(o, index) for o in node.expressions}
            return lambda v: None if (x := value(v, index)) is None else x in options
        if isinstance(node, exp.Like):
            index = key_of(node.this)
            pattern = literal(node.expression, index)
            regex = re.compile(
                "".join(
                    ".*" if c == "%" else "." if c == "_" else re.escape(c) for c in str(pattern)
                ),
                re.DOTALL,
            )
            return lambda v: (
                None if (x := value(v, index)) is None else bool(regex.fullmatch(str(x)))
            )
        if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
            index = key_of(node.this)
            return lambda v: value(v, index) is None
        raise _invalid(text, f"{node.sql()} is not a condition Glue evaluates")

    test = build(tree)  # type: ignore[arg-type]  # parse_one's Expr is an Expression
    return lambda values: test(values) is True


def _and(left: bool | None, right: bool | None) -> bool | None:
    if left is False or right is False:
        return False
    return None if left is None or right is None else True


def _or(left: bool | None, right: bool | None) -> bool | None:
    if left is True or right is True:
        return True
    return None if left is None or right is None else False
