"""Rules for dates and times, arrays and lambdas, windows, intervals and formats."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

from sqlglot import exp

from lakeward.query.translate.spark.checker import (
    _CASE_GUARD,
    _INTEGERS,
    _INTERVAL_UNITS,
    _SPARK_INTEGER,
    Type,
    _Checker,
    _common,
    _element,
    _is_integer,
    _name,
    _refuse,
    _Scope,
)
from lakeward.query.translate.spark.scalars import (
    _boolean_aggregate,
    _cast_result,
    _comparable,
    _literal_int,
    _literal_text,
    _string_function,
)

_DATE_PARTS: tuple[type[exp.Func], ...] = (exp.Year, exp.Quarter, exp.Month, exp.Day)
_DATE_PARTS += (exp.DayOfMonth, exp.DayOfYear, exp.WeekOfYear)
_TIME_PARTS = (exp.Hour, exp.Minute, exp.Second)
_DATE_UNITS = ("DAY", "WEEK", "MONTH", "QUARTER", "YEAR")
_TIME_UNITS = ("SECOND", "MINUTE", "HOUR")


def _of_types(
    checker: _Checker, node: exp.Expr, scope: _Scope, operands: list[exp.Expr], *allowed: str
) -> list[Type]:
    """The types of ``operands`` of ``node``, each one of ``allowed`` (or NULL)."""
    found = [checker.type(o, scope) for o in operands]
    if not checker.unknown(_name(node), found):
        for t in found:
            if t not in (*allowed, "unknown"):
                raise _refuse(_name(node), f"on an argument of type {t}")
    return found


def _date_part(checker: _Checker, node: exp.Func, scope: _Scope) -> Type:
    # Spark's parts are ints (day of year, ISO week, ...); Trino's are bigints.
    allowed = ("date", "timestamp") if not isinstance(node, _TIME_PARTS) else ("timestamp",)
    _of_types(checker, node, scope, [node.this], *allowed)
    _cast_result(node, "BIGINT")
    return "bigint"


def _extract(checker: _Checker, node: exp.Extract, scope: _Scope) -> Type:
    unit = node.this.name.upper()
    what = f"extract({unit.lower()} FROM ...)"
    if unit in ("YEAR", "QUARTER", "MONTH", "DAY"):
        allowed: tuple[str, ...] = ("date", "timestamp")
    elif unit in ("HOUR", "MINUTE"):
        allowed = ("timestamp",)
    else:  # Spark's second has a fraction, its day of week starts on Sunday
        raise _refuse(what, "not checked against Trino's answers")
    found = checker.type(node.expression, scope)
    if not checker.unknown(what, [found]) and found not in (*allowed, "unknown"):
        raise _refuse(what, f"of type {found}")
    _cast_result(node, "BIGINT")
    return "bigint"


def _unit(node: exp.Expr) -> str:
    unit = node.args.get("unit")
    return unit.name.upper() if isinstance(unit, exp.Expr) else "DAY"


def _date_add(checker: _Checker, node: exp.DateAdd, scope: _Scope) -> Type:
    amount = _literal_int(node.expression)
    if _unit(node) not in _DATE_UNITS or amount is None or abs(amount) >= 2**31:
        raise _refuse(_name(node), f"by {_unit(node).lower()}s, or by an amount not an integer")
    _of_types(checker, node, scope, [node.this], "date")
    return "date"


def _date_diff(checker: _Checker, node: exp.DateDiff, scope: _Scope) -> Type:
    if _unit(node) != "DAY":
        raise _refuse(_name(node), f"in {_unit(node).lower()}s")
    _of_types(checker, node, scope, [node.this, node.expression], "date")
    return "bigint"


def _date_trunc(checker: _Checker, node: exp.Expr, scope: _Scope) -> Type:
    unit = _unit(node)
    found = checker.type(node.this, scope)
    if checker.unknown(_name(node), [found]):
        return None
    if found == "date" and unit in _DATE_UNITS:
        if isinstance(node, exp.TimestampTrunc):
            _cast_result(node, "DATE")  # Spark's date_trunc gives a timestamp
        return "date"
    if found == "timestamp" and unit in (*_DATE_UNITS, *_TIME_UNITS):
        _cast_result(node, "TIMESTAMP")  # Spark's date_trunc gives a zoned timestamp
        return "timestamp"
    raise _refuse(_name(node), f"to the {unit.lower()} of a {found}")


def _to_date(checker: _Checker, node: exp.Expr, scope: _Scope) -> Type:
    if node.expressions:
        raise _refuse(_name(node), "with more than one argument")
    _of_types(checker, node, scope, [node.this], "date", "timestamp")
    return "date"


def _sign(checker: _Checker, node: exp.Sign, scope: _Scope) -> Type:
    found = checker.type(node.this, scope)
    if checker.unknown(_name(node), [found]):
        return None
    if found in _SPARK_INTEGER:
        _cast_result(node, _SPARK_INTEGER[found])  # Spark's sign is a double
        return found
    if found in ("double", "unknown"):
        return found
    raise _refuse(_name(node), f"of type {found}")


def _escape(checker: _Checker, node: exp.Escape, scope: _Scope) -> Type:
    like = node.this
    escape = _literal_text(node.expression)
    if not isinstance(like, exp.Like) or escape is None or len(escape) != 1:
        raise _refuse("ESCAPE", "other than one character after LIKE")
    _string_function(checker, like, scope)
    if _literal_text(like.expression) is None:
        raise _refuse("LIKE", "with a pattern other than a text")
    return "boolean"


def _parameter(_: _Checker, node: exp.Identifier, scope: _Scope) -> Type:
    name = node.name.lower()
    if name not in scope.lambdas:
        raise _refuse(f"the name {node.name}", "not a parameter of a lambda expression")
    return scope.lambdas[name]


def _apply(
    checker: _Checker, function: exp.Expr, scope: _Scope, node: exp.Expr, *parameters: Type
) -> Type:
    """The type of a lambda expression's body, its parameters typed as given."""
    if not isinstance(function, exp.Lambda) or len(function.expressions) != len(parameters):
        raise _refuse(_name(node), f"unless given a lambda expression of {len(parameters)}")
    inner = _Scope(scope.sources, scope.ctes, scope.opaque, dict(scope.lambdas))
    for name, found in zip(function.expressions, parameters, strict=True):
        inner.lambdas[name.name.lower()] = found
    return checker.type(function.this, inner)


def _array_argument(checker: _Checker, array: exp.Expr, scope: _Scope, node: exp.Expr) -> Type:
    found = checker.type(array, scope)
    if not checker.unknown(_name(node), [found]) and _element(found) is None:
        raise _refuse(_name(node), f"of a {found}")
    return _element(found)


def _transform(checker: _Checker, node: exp.Transform, scope: _Scope) -> Type:
    element = _array_argument(checker, node.this, scope, node)
    result = _apply(checker, node.expression, scope, node, element)
    return None if result is None else f"array({result})"


def _filter(checker: _Checker, node: exp.ArrayFilter, scope: _Scope) -> Type:
    element = _array_argument(checker, node.this, scope, node)
    condition = _apply(checker, node.expression, scope, node, element)
    if not checker.unknown(_name(node), [condition]) and condition not in ("boolean", "unknown"):
        raise _refuse(_name(node), f"with a condition of type {condition}")
    return None if element is None else f"array({element})"


def _reduce(checker: _Checker, node: exp.Reduce, scope: _Scope) -> Type:
    element = _array_argument(checker, node.this, scope, node)
    state = checker.type(node.args["initial"], scope)
    merged = _apply(checker, node.args["merge"], scope, node, state, element)
    if checker.unknown(_name(node), [state, merged]):
        return None
    if merged != state:  # Spark's aggregate keeps the initial value's type; Trino widens
        raise _refuse(_name(node), f"whose state changes type from {state} to {merged}")
    finish = node.args.get("finish")
    return state if finish is None else _apply(checker, finish, scope, node, state)


def _match(checker: _Checker, node: exp.Anonymous, scope: _Scope) -> Type:
    if len(node.expressions) != 2:
        raise _refuse(_name(node), "unless given an array and a lambda expression")
    element = _array_argument(checker, node.expressions[0], scope, node)
    condition = _apply(checker, node.expressions[1], scope, node, element)
    if not checker.unknown(_name(node), [condition]) and condition not in ("boolean", "unknown"):
        raise _refuse(_name(node), f"with a condition of type {condition}")
    # Spark's exists and forall are three-valued as Trino's any_match and all_match.
    name = str(node.name).lower()
    spark = exp.Anonymous(
        this="FORALL" if name == "all_match" else "EXISTS", expressions=list(node.expressions)
    )
    node.replace(exp.Not(this=exp.Paren(this=spark)) if name == "none_match" else spark)
    return "boolean"


def _zip_with(checker: _Checker, node: exp.Anonymous, scope: _Scope) -> Type:
    if len(node.expressions) != 3:
        raise _refuse(_name(node), "unless given two arrays and a lambda expression")
    first = _array_argument(checker, node.expressions[0], scope, node)
    second = _array_argument(checker, node.expressions[1], scope, node)
    result = _apply(checker, node.expressions[2], scope, node, first, second)
    return None if result is None else f"array({result})"


def _array_sort(checker: _Checker, node: exp.ArraySort, scope: _Scope) -> Type:
    element = _array_argument(checker, node.this, scope, node)
    nulls_first = node.args.get("nulls_first")
    if isinstance(nulls_first, exp.Boolean) and nulls_first.this:
        raise _refuse(_name(node), "with nulls first")
    if node.expression is None:
        if element not in (*_INTEGERS, "varchar", "date", "boolean", "unknown", None):
            raise _refuse(_name(node), f"of {element} values")
    else:
        order = _apply(checker, node.expression, scope, node, element, element)
        if not checker.unknown(_name(node), [order]) and not _is_integer(order):
            raise _refuse(_name(node), f"with a comparator giving a {order}")
    return None if element is None else f"array({element})"


def _array_join(checker: _Checker, node: exp.ArrayToString, scope: _Scope) -> Type:
    element = _array_argument(checker, node.this, scope, node)
    if element not in (*_INTEGERS, "varchar", "unknown", None):
        raise _refuse(_name(node), f"of {element} values")
    _of_types(
        checker,
        node,
        scope,
        [node.expression, *[node.args[k] for k in ("null",) if node.args.get(k)]],
        "varchar",
    )
    return "varchar"


def _same_arrays(checker: _Checker, node: exp.Expr, scope: _Scope, arrays: list[exp.Expr]) -> Type:
    """Arrays of one element type, as Spark's array functions want them (Trino would widen)."""
    found = [checker.type(a, scope) for a in arrays]
    if checker.unknown(_name(node), found):
        return None
    known = {t for t in found if _element(t) != "unknown"}
    if any(_element(t) is None for t in found) or len(known) > 1:
        raise _refuse(_name(node), f"on {' and '.join(map(str, found))}")
    return known.pop() if known else found[0]


def _concat(checker: _Checker, node: exp.Concat, scope: _Scope) -> Type:
    first = checker.type(node.expressions[0], scope) if node.expressions else None
    if _element(first) is not None:
        return _same_arrays(checker, node, scope, node.expressions)
    return _string_function(checker, node, scope)


def _array_concat(checker: _Checker, node: exp.Expr, scope: _Scope) -> Type:
    arrays = node.expressions if isinstance(node, exp.Concat) else [node.this, node.expression]
    if isinstance(node, exp.Concat) or _element(checker.type(node.this, scope)) is not None:
        return _same_arrays(checker, node, scope, arrays)
    return _string_function(checker, node, scope)


def _sequence(checker: _Checker, node: exp.GenerateSeries, scope: _Scope) -> Type:
    bounds = [node.args[k] for k in ("start", "end", "step") if node.args.get(k) is not None]
    _of_types(checker, node, scope, bounds, *_INTEGERS)
    numbers = [_literal_int(b) for b in bounds]
    start, end, step = (*numbers, None)[:3] if len(numbers) == 2 else numbers
    if start is None or end is None or (len(numbers) == 3 and not step):
        raise _refuse(_name(node), "unless its bounds and step are numbers")
    step = step or (1 if end >= start else -1)
    # Trino refuses sequences of more than 10,000 entries; Spark makes them.
    if (end - start) // step + 1 > 10_000:
        raise _refuse(_name(node), "of more than 10000 entries")
    return "array(bigint)"


def _slice(checker: _Checker, node: exp.ArraySlice, scope: _Scope) -> Type:
    found = checker.type(node.this, scope)
    _of_types(checker, node, scope, [node.args["start"], node.args["end"]], *_INTEGERS)
    if not checker.unknown(_name(node), [found]) and _element(found) is None:
        raise _refuse(_name(node), f"of a {found}")
    return found


def _array_unary(checker: _Checker, node: exp.Expr, scope: _Scope) -> Type:
    found = checker.type(node.this, scope)
    if checker.unknown(_name(node), [found]):
        return None
    if _element(found) is None or (
        isinstance(node, exp.Flatten) and _element(_element(found)) is None
    ):
        raise _refuse(_name(node), f"of a {found}")
    return _element(found) if isinstance(node, exp.Flatten) else found


def _array_remove(checker: _Checker, node: exp.ArrayRemove, scope: _Scope) -> Type:
    found = checker.type(node.this, scope)
    value = checker.type(node.expression, scope)
    if checker.unknown(_name(node), [found, value]):
        return None
    if _element(found) is None:
        raise _refuse(_name(node), f"from a {found}")
    _comparable(checker, [_element(found), value], node)
    return found


def _array_pair(checker: _Checker, node: exp.Expr, scope: _Scope) -> Type:
    arrays = (
        list(node.expressions) if isinstance(node, exp.Anonymous) else [node.this, node.expression]
    )
    if len(arrays) != 2:
        raise _refuse(_name(node), "unless given two arrays")
    found = _same_arrays(checker, node, scope, arrays)
    return "boolean" if str(node.name).lower() == "arrays_overlap" else found


def _levenshtein(checker: _Checker, node: exp.Levenshtein, scope: _Scope) -> Type:
    _of_types(checker, node, scope, [node.this, node.expression], "varchar")
    _cast_result(node, "BIGINT")  # Spark's levenshtein is an int
    return "bigint"


def _aggregate_filter(checker: _Checker, node: exp.Filter, scope: _Scope) -> Type:
    where = node.expression
    if not isinstance(node.this, exp.AggFunc) or not isinstance(where, exp.Where):
        raise _refuse("FILTER", "other than an aggregate's FILTER (WHERE ...)")
    checker.boolean(where.this, scope)
    return checker.type(node.this, scope)


def _codepoint(checker: _Checker, node: exp.Anonymous, scope: _Scope) -> Type:
    text = _literal_text(node.expressions[0]) if len(node.expressions) == 1 else None
    if text is None or len(text) != 1:
        raise _refuse(_name(node), "unless of one character written in the query")
    node.replace(exp.Anonymous(this="ASCII", expressions=[node.expressions[0]]))
    return "integer"


def _case_mapping(checker: _Checker, node: exp.Upper | exp.Lower, scope: _Scope) -> Type:
    _string_function(checker, node, scope)
    node.meta[_CASE_GUARD] = True
    return "varchar"


@functools.cache
def _several_characters(upper: bool) -> str:
    """The characters whose full upper (lower) case is more than one character: Spark maps
    them so (Java's String.toUpperCase: ß to SS), Trino code point by code point (ß stays ß).
    Σ, whose lower case Spark chooses by its place in a word, too."""
    found = (chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    several = "".join(c for c in found if len(c.upper() if upper else c.lower()) > 1)
    return several if upper else several + "Σ"


def _guarded_case_mapping(node: exp.Upper | exp.Lower) -> exp.Expr:
    """Spark's upper/lower, failing on a text where it would answer otherwise than Trino."""
    upper = isinstance(node, exp.Upper)
    name = "upper" if upper else "lower"
    characters = "".join(sorted(set(_several_characters(upper))))
    return exp.Case(
        ifs=[
            exp.If(
                this=exp.RegexpLike(
                    this=node.this.copy(), expression=exp.Literal.string(f"[{characters}]")
                ),
                true=exp.Anonymous(
                    this="RAISE_ERROR",
                    expressions=[
                        exp.Literal.string(
                            f"{name} of a text with a character whose {name} case is several "
                            f"characters (such as {'ß' if upper else 'İ'}) is not supported on "
                            "the Spark engine"
                        )
                    ],
                ),
            )
        ],
        default=node,
    )


# Functions sqlglot passes through by name, with their checks.
_NAMED: dict[str, Callable[[_Checker, Any, _Scope], Type]] = {
    "every": lambda checker, node, scope: _boolean_aggregate(checker, node, scope),
    "any_match": lambda checker, node, scope: _match(checker, node, scope),
    "all_match": lambda checker, node, scope: _match(checker, node, scope),
    "none_match": lambda checker, node, scope: _match(checker, node, scope),
    "zip_with": lambda checker, node, scope: _zip_with(checker, node, scope),
    "codepoint": lambda checker, node, scope: _codepoint(checker, node, scope),
    "arrays_overlap": lambda checker, node, scope: _array_pair(checker, node, scope),
    "array_union": lambda checker, node, scope: _array_pair(checker, node, scope),
}


def _named(checker: _Checker, node: exp.Anonymous, scope: _Scope) -> Type:
    handler = _NAMED.get(str(node.name).lower())
    if handler is None:
        raise _refuse(_name(node), "not checked against Trino's answers")
    return handler(checker, node, scope)


# Window functions: (Trino result type, or None for the argument's type; Spark's type if other)
_RANKING: dict[type[exp.Expr], str] = {
    exp.RowNumber: "bigint",
    exp.Rank: "bigint",
    exp.DenseRank: "bigint",
    exp.Ntile: "bigint",
    exp.PercentRank: "double",
    exp.CumeDist: "double",
}
_NAVIGATION = (exp.Lag, exp.Lead, exp.FirstValue, exp.LastValue, exp.NthValue)


def _window(checker: _Checker, node: exp.Window, scope: _Scope) -> Type:
    for key, value in node.args.items():
        if value and key not in ("this", "partition_by", "order", "spec", "over"):
            raise _refuse(
                f"{_name(node)} with {key.upper()}", "not checked against Trino's answers"
            )
    for expression in node.args.get("partition_by") or []:
        checker.type(expression, scope)
    if node.args.get("order"):
        for ordered in node.args["order"].expressions:
            checker.type(ordered.this, scope)
    spec = node.args.get("spec")
    if spec is not None:
        if str(spec.args.get("kind", "")).upper() not in ("ROWS", "RANGE"):
            raise _refuse(f"{_name(node)} with a {spec.args.get('kind')} frame", "not in Spark")
        for side in ("start", "end"):
            bound = spec.args.get(side)
            if isinstance(bound, exp.Expr) and _literal_int(bound) is None:
                raise _refuse(f"{_name(node)} with a frame bound not a number", "not checked")
    function = node.this
    ignore_nulls = isinstance(function, exp.IgnoreNulls)
    if ignore_nulls:
        function = function.this
    ranking = _RANKING.get(type(function)) if isinstance(function, exp.Func) else None
    if ranking is not None and not ignore_nulls:
        for argument in function.iter_expressions():
            if _literal_int(argument) is None:
                raise _refuse(_name(node), "with an argument not a number")
        if not node.args.get("order"):  # Spark ranks only ordered rows
            raise _refuse(_name(node), "without ORDER BY")
        if ranking == "bigint":
            _cast_result(node, "BIGINT")  # Spark's ranks are ints
        return ranking
    if isinstance(function, _NAVIGATION):
        value = checker.type(function.this, scope)
        offset = function.args.get("offset")
        if offset is not None and _literal_int(offset) is None:
            raise _refuse(_name(node), "with an offset not a number")
        default = function.args.get("default")
        if default is not None:
            return _common([value, checker.type(default, scope)], node)
        return value
    if ignore_nulls:
        raise _refuse(_name(node) + " IGNORE NULLS", "not checked against Trino's answers")
    if isinstance(function, (exp.Count, exp.Sum, exp.Avg, exp.Min, exp.Max)):
        return checker.type(function, scope)
    raise _refuse(_name(node), "not checked against Trino's answers")


def _array(checker: _Checker, node: exp.Array, scope: _Scope) -> Type:
    element = _common([checker.type(e, scope) for e in node.expressions], node)
    return None if element is None else f"array({element})"


def _subscript(checker: _Checker, node: exp.Bracket, scope: _Scope) -> Type:
    found = checker.type(node.this, scope)
    if len(node.expressions) != 1:
        raise _refuse("subscript [...]", "with more than one index")
    index = checker.type(node.expressions[0], scope)
    if checker.unknown("subscript [...]", [found, index]):
        return None
    if _element(found) is None or not (_is_integer(index) or index == "unknown"):
        raise _refuse("subscript [...]", f"of a {found} by a {index}")
    return _element(found)


def _cardinality(checker: _Checker, node: exp.ArraySize, scope: _Scope) -> Type:
    found = checker.type(node.this, scope)
    if not checker.unknown(_name(node), [found]) and _element(found) is None:
        raise _refuse(_name(node), f"of a {found}")
    _cast_result(node, "BIGINT")  # Spark's size is an int
    return "bigint"


def _array_search(checker: _Checker, node: exp.Expr, scope: _Scope) -> Type:
    found, value = checker.type(node.this, scope), checker.type(node.expression, scope)
    if checker.unknown(_name(node), [found, value]):
        return None
    if _element(found) is None:
        raise _refuse(_name(node), f"in a {found}")
    _comparable(checker, [_element(found), value], node)
    return "boolean" if isinstance(node, exp.ArrayContains) else "bigint"


def _grouping(checker: _Checker, node: exp.Grouping, scope: _Scope) -> Type:
    for argument in node.expressions:
        checker.type(argument, scope)
    # Spark's grouping() takes one column and gives a tinyint: Trino's bits, summed.
    count = len(node.expressions)
    bits: list[exp.Expr] = [
        exp.Mul(
            this=exp.Cast(
                this=exp.Anonymous(this="GROUPING", expressions=[argument.copy()]),
                to=exp.DataType.build("BIGINT"),
            ),
            expression=exp.Literal.number(2 ** (count - 1 - position)),
        )
        for position, argument in enumerate(node.expressions)
    ]
    total = bits[0]
    for bit in bits[1:]:
        total = exp.Add(this=total, expression=bit)
    node.replace(exp.Paren(this=total))
    return "bigint"


# Intervals by unit: their type, and what they may be added to or taken from.


def _interval(_: _Checker, node: exp.Interval, __: _Scope) -> Type:
    unit = node.args.get("unit")
    name = unit.name.upper() if isinstance(unit, exp.Expr) else ""
    amount = _literal_text(node.this)
    if name not in _INTERVAL_UNITS or amount is None or not re.fullmatch(r"[0-9]{1,9}", amount):
        raise _refuse("INTERVAL", "other than a whole number of years, months, days, hours, ...")
    return _INTERVAL_UNITS[name]


def _day_of_week(checker: _Checker, node: exp.Expr, scope: _Scope) -> Type:
    _of_types(checker, node, scope, [node.this], "date", "timestamp")
    # Trino's week starts on Monday (1); Spark's weekday counts from Monday as 0.
    weekday = exp.Add(
        this=exp.Anonymous(this="WEEKDAY", expressions=[node.this]),
        expression=exp.Literal.number(1),
    )
    node.replace(exp.Cast(this=weekday, to=exp.DataType.build("BIGINT")))
    return "bigint"


# MySQL specifiers (as sqlglot reads Trino's date_format) that Spark prints the same way.
_FORMAT = re.compile(r"(%[YmdHMSy]|[-/:., ])*")


def _date_format(checker: _Checker, node: exp.TimeToStr, scope: _Scope) -> Type:
    pattern = _literal_text(node.args.get("format"))
    if pattern is None or not _FORMAT.fullmatch(pattern):
        raise _refuse(_name(node), "with specifiers other than %Y %y %m %d %H %i %s")
    _of_types(checker, node, scope, [node.this], "date", "timestamp")
    return "varchar"


# The arguments, besides this and expression, that each function's check looks at.
