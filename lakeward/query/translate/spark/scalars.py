"""Rules for literals, operators, casts, conditionals, strings and aggregates: each gives
the Trino type of its node, or refuses what Spark would answer otherwise."""

from __future__ import annotations

from sqlglot import exp

from lakeward.query.translate.spark.checker import (
    _CANONICAL,
    _CAST_TO,
    _DATA_TYPES,
    _DECIMAL_TEXT,
    _INT_RANGE,
    _INTEGER_DIVISION,
    _INTEGERS,
    _INTERVAL_OPERANDS,
    Type,
    _Checker,
    _common,
    _is_integer,
    _is_number,
    _name,
    _refuse,
    _Scope,
    _wider_integer,
)


def _literal(_: _Checker, node: exp.Literal, __: _Scope) -> Type:
    if node.is_string:
        return "varchar"
    text = node.this.lower()
    if "e" in text:
        return "double"
    if "." in text:
        return "decimal"
    value = int(text)
    for name, bound in _INT_RANGE.items():
        if value < bound:
            return name
    raise _refuse(f"the number {text}", "beyond bigint")


def _arithmetic(checker: _Checker, node: exp.Binary, scope: _Scope) -> Type:
    left, right = checker.operands(node, scope)
    symbol = _name(node)
    if checker.unknown(symbol, [left, right]):
        return None
    moved = right in _INTERVAL_OPERANDS and left in _INTERVAL_OPERANDS[right]
    if isinstance(node, (exp.Add, exp.Sub)) and moved:
        return left  # a date or timestamp moved by days, months or years (end of month kept)
    if "unknown" in (left, right) and _is_number(left) | _is_number(right):
        return left if right == "unknown" else right
    if not (_is_number(left) and _is_number(right)):
        raise _refuse(symbol, f"on operands of types {left} and {right}")
    assert left is not None and right is not None
    if _is_integer(left) and _is_integer(right):
        if isinstance(node, exp.Div):
            node.meta[_INTEGER_DIVISION] = _wider_integer(left, right)
        return _wider_integer(left, right)
    if "double" in (left, right):
        if isinstance(node, (exp.Div, exp.Mod)) and not _nonzero_number(node.right):
            # Trino's double division by zero is Infinity or NaN; Spark's is an error.
            raise _refuse(symbol, "on doubles, unless dividing by a number other than zero")
        return "double"
    if isinstance(node, (exp.Div, exp.Mod, exp.Mul)) or left != right:
        # Spark types an integer beside a decimal by its digits, Trino as decimal(10,0) or
        # decimal(19,0); Spark's decimal product and quotient have other precisions.
        raise _refuse(symbol, f"on {left} and {right} (Spark's result type is not Trino's)")
    return "decimal"


def _nonzero_number(node: exp.Expr) -> bool:
    while isinstance(node, (exp.Neg, exp.Paren)):
        node = node.this
    return isinstance(node, exp.Literal) and not node.is_string and float(node.this) != 0


def _negate(checker: _Checker, node: exp.Neg, scope: _Scope) -> Type:
    found = checker.type(node.this, scope)
    if checker.unknown(_name(node), [found]):
        return None
    if not (_is_number(found) or found == "unknown"):
        raise _refuse(_name(node), f"on an operand of type {found}")
    return found


def _comparison(checker: _Checker, node: exp.Binary, scope: _Scope) -> Type:
    _comparable(checker, [*checker.operands(node, scope)], node)
    return "boolean"


def _comparable(checker: _Checker, types: list[Type], node: exp.Expr) -> None:
    # Trino refuses to compare a string with a number; Spark casts one to the other.
    if checker.unknown(_name(node), types):
        return
    known = {("number" if _is_number(t) else t) for t in types if t != "unknown"}
    if len(known) > 1:
        raise _refuse(_name(node), f"on operands of types {' and '.join(map(str, types))}")


def _logic(checker: _Checker, node: exp.Expr, scope: _Scope) -> Type:
    for operand in (node.args.get("this"), node.args.get("expression")):
        if operand is not None:
            checker.boolean(operand, scope)
    return "boolean"


def _cast(checker: _Checker, node: exp.Cast, scope: _Scope) -> Type:
    target = node.to
    found = checker.type(node.this, scope)
    name = _DATA_TYPES.get(target.this)
    if target.this == exp.DataType.Type.TIMESTAMP and _timestamp_precision(target) <= 3:
        name = "timestamp"  # Trino's timestamp(p) for p up to 3 is rendered with milliseconds
    elif name is None or (target.expressions and name != "decimal"):
        raise _refuse(f"CAST to {target.sql('trino')}", "not checked against Trino's answers")
    if (
        name == "decimal"
        and not target.expressions
        and not _DECIMAL_TEXT.fullmatch(_literal_text(node.this) or "")
    ):
        raise _refuse("DECIMAL without precision", "Spark reads it as decimal(10,0)")
    if found == "unknown" or found == name and name != "decimal":
        return name
    text = _literal_text(node.this)
    if name == "decimal" and not target.expressions and text and _DECIMAL_TEXT.fullmatch(text):
        # DECIMAL '12.34': the number itself, whose type both engines take from its digits.
        node.replace(exp.Literal.number(text))
        return name
    if checker.unknown(f"CAST to {name}", [found]):
        return name
    source = node.this
    literal = source.this if isinstance(source, exp.Literal) and source.is_string else None
    if literal is not None and name in _CANONICAL and _CANONICAL[name].fullmatch(literal):
        return name
    if _is_integer(found) and (_is_number(name) or name == "varchar"):
        return name
    if (found, name) in _SAME_CASTS or (_is_integer(found) and name == "boolean"):
        return name
    if found in ("double", "decimal") and name in ("integer", "bigint"):
        # Trino rounds half away from zero, Spark truncates: round first (both fail on NaN).
        node.set("this", exp.Round(this=node.this))
        return name
    if found == "boolean" and name == "varchar":
        return name
    what = "TRY_CAST" if isinstance(node, exp.TryCast) else "CAST"
    raise _refuse(f"{what} from {found} to {name}", "Spark's answer differs")


# Casts that both engines answer alike (texts as Java prints numbers, decimals rounded half up).
_SAME_CASTS = {
    ("date", "timestamp"),
    ("timestamp", "date"),
    ("date", "varchar"),
    ("double", "varchar"),
    ("decimal", "varchar"),
    ("decimal", "double"),
    ("decimal", "decimal"),
    ("boolean", "integer"),
    ("boolean", "bigint"),
}


def _timestamp_precision(target: exp.DataType) -> int:
    if not target.expressions:
        return 3
    precision = _literal_int(target.expressions[0].this)
    return 99 if precision is None else precision


def _column(_: _Checker, node: exp.Column, scope: _Scope) -> Type:
    return scope.column(node)


def _case(checker: _Checker, node: exp.Case, scope: _Scope) -> Type:
    operand = node.args.get("this")
    whens = node.args.get("ifs") or []
    if operand is not None:
        _comparable(
            checker,
            [checker.type(operand, scope), *(checker.type(w.this, scope) for w in whens)],
            node,
        )
    else:
        for when in whens:
            checker.boolean(when.this, scope)
    results = [checker.type(w.args["true"], scope) for w in whens]
    if node.args.get("default") is not None:
        results.append(checker.type(node.args["default"], scope))
    return _common(results, node)


def _if(checker: _Checker, node: exp.If, scope: _Scope) -> Type:
    checker.boolean(node.this, scope)
    if node.args.get("false") is None:  # Spark's IF needs the third argument
        node.set("false", exp.Null())
    return _common([checker.type(node.args[k], scope) for k in ("true", "false")], node)


def _coalesce(checker: _Checker, node: exp.Coalesce, scope: _Scope) -> Type:
    return _common([checker.type(a, scope) for a in [node.this, *node.expressions]], node)


def _nullif(checker: _Checker, node: exp.Nullif, scope: _Scope) -> Type:
    first, second = checker.type(node.this, scope), checker.type(node.expression, scope)
    _comparable(checker, [first, second], node)
    return first


def _is(checker: _Checker, node: exp.Is, scope: _Scope) -> Type:
    checker.type(node.this, scope)
    if not isinstance(node.expression, exp.Null):
        checker.boolean(node.this, scope)
    return "boolean"


def _between(checker: _Checker, node: exp.Between, scope: _Scope) -> Type:
    types = [checker.type(node.args[k], scope) for k in ("this", "low", "high")]
    _comparable(checker, types, node)
    return "boolean"


def _in(checker: _Checker, node: exp.In, scope: _Scope) -> Type:
    if node.args.get("query") is not None or node.args.get("unnest") is not None:
        raise _refuse("IN (subquery)", "not checked against Trino's answers")
    _comparable(checker, [checker.type(e, scope) for e in [node.this, *node.expressions]], node)
    return "boolean"


def _same(checker: _Checker, node: exp.Expr, scope: _Scope) -> Type:
    return checker.type(node.this, scope)


def _alias(checker: _Checker, node: exp.Alias, scope: _Scope) -> Type:
    return checker.type(node.this, scope)


def _string_function(checker: _Checker, node: exp.Expr, scope: _Scope) -> Type:
    for argument in node.iter_expressions():
        found = checker.type(argument, scope)
        if not checker.unknown(_name(node), [found]) and found not in ("varchar", "unknown"):
            raise _refuse(_name(node), f"on an argument of type {found}")
    return "varchar"


def _boolean_string_function(checker: _Checker, node: exp.Func, scope: _Scope) -> Type:
    _string_function(checker, node, scope)
    return "boolean"


def _count(checker: _Checker, node: exp.Count, scope: _Scope) -> Type:
    argument = node.this
    if isinstance(argument, exp.Distinct):
        for e in argument.expressions:
            checker.type(e, scope)
    elif argument is not None and not isinstance(argument, exp.Star):
        checker.type(argument, scope)
    return "bigint"


def _sum(checker: _Checker, node: exp.Sum, scope: _Scope) -> Type:
    found = _aggregated(checker, node, scope)
    if checker.unknown(_name(node), [found]):
        return None
    if _is_integer(found):
        return "bigint"
    if found in ("double", "unknown"):
        return found
    raise _refuse(_name(node), f"of type {found}")


def _avg(checker: _Checker, node: exp.Avg, scope: _Scope) -> Type:
    found = _aggregated(checker, node, scope)
    if checker.unknown(_name(node), [found]):
        return None
    if _is_integer(found) or found == "double":
        return "double"
    raise _refuse(_name(node), f"of type {found}")


def _min_max(checker: _Checker, node: exp.Expr, scope: _Scope) -> Type:
    if node.expressions:  # Spark's two-argument min/max is not Trino's
        raise _refuse(_name(node), "with more than one argument")
    return _aggregated(checker, node, scope)


def _aggregated(checker: _Checker, node: exp.Expr, scope: _Scope) -> Type:
    argument = node.this
    if isinstance(argument, exp.Distinct):
        raise _refuse(f"{_name(node)}(DISTINCT ...)", "not checked against Trino's answers")
    return checker.type(argument, scope)


def _abs(checker: _Checker, node: exp.Abs, scope: _Scope) -> Type:
    found = checker.type(node.this, scope)
    if checker.unknown(_name(node), [found]):
        return None
    if not (_is_integer(found) or found in ("double", "decimal", "unknown")):
        raise _refuse(_name(node), f"of type {found}")
    return found


def _subquery(checker: _Checker, node: exp.Subquery, scope: _Scope) -> Type:
    columns = checker.query(node.this, scope)
    if len(columns) != 1:
        raise _refuse("a scalar subquery", "it must have one column")
    return columns[0][1]


def _cast_result(node: exp.Expr, spark_type: str) -> None:
    """Spark gives ``node`` another type than Trino (an int for a bigint): cast it back."""
    node.meta[_CAST_TO] = spark_type


def _length(checker: _Checker, node: exp.Length, scope: _Scope) -> Type:
    _string_function(checker, node, scope)
    _cast_result(node, "BIGINT")
    return "bigint"


def _arguments(
    checker: _Checker, node: exp.Expr, scope: _Scope, allowed: tuple[str, ...]
) -> list[Type]:
    """The types of a function's arguments, each one of ``allowed`` (or NULL)."""
    found = [checker.type(a, scope) for a in node.iter_expressions()]
    if checker.unknown(_name(node), found):
        return found
    for t in found:
        if t != "unknown" and t not in allowed:
            raise _refuse(_name(node), f"on an argument of type {t}")
    return found


def _double_function(checker: _Checker, node: exp.Expr, scope: _Scope) -> Type:
    _arguments(checker, node, scope, (*_INTEGERS, "double"))
    return "double"


def _round(checker: _Checker, node: exp.Round, scope: _Scope) -> Type:
    found = checker.type(node.this, scope)
    digits = node.args.get("decimals")
    if digits is not None and _literal_int(digits) is None:
        raise _refuse(_name(node), "with a number of digits that is not a number")
    if checker.unknown(_name(node), [found]):
        return None
    if _is_integer(found) or found in ("double", "unknown"):
        return found  # both round half away from zero
    raise _refuse(_name(node), f"of type {found}")


def _literal_text(node: exp.Expr | None) -> str | None:
    return node.this if isinstance(node, exp.Literal) and node.is_string else None


def _literal_int(node: exp.Expr | None) -> int | None:
    negative = isinstance(node, exp.Neg)
    if negative:
        node = node.this  # type: ignore[union-attr]
    if isinstance(node, exp.Literal) and node.is_int:
        return -int(node.this) if negative else int(node.this)
    return None


def _like(checker: _Checker, node: exp.Like, scope: _Scope) -> Type:
    _string_function(checker, node, scope)
    pattern = _literal_text(node.expression)
    # Spark reads a backslash in a pattern as an escape; Trino has no default escape.
    if pattern is None or "\\" in pattern:
        raise _refuse("LIKE", "with a pattern other than a text without backslashes")
    return "boolean"


def _substring(checker: _Checker, node: exp.Substring, scope: _Scope) -> Type:
    _arguments(checker, node, scope, ("varchar", *_INTEGERS))
    start, length = _literal_int(node.args.get("start")), node.args.get("length")
    # Spark reads a start of 0 as 1, Trino gives ''; a negative length is Trino's error.
    if start is None or start == 0 or (length is not None and (_literal_int(length) or -1) < 0):
        raise _refuse(_name(node), "unless its start and length are numbers, the start not 0")
    return "varchar"


def _pad(checker: _Checker, node: exp.Pad, scope: _Scope) -> Type:
    _arguments(checker, node, scope, ("varchar", *_INTEGERS))
    fill = _literal_text(node.args.get("fill_pattern"))
    size = _literal_int(node.expression)
    if not fill or size is None or size < 0:
        raise _refuse(_name(node), "unless padded to a number of characters with a text")
    return "varchar"


def _strpos(checker: _Checker, node: exp.StrPosition, scope: _Scope) -> Type:
    if node.args.get("position") is not None or node.args.get("occurrence") is not None:
        raise _refuse(_name(node), "with a start position or an occurrence")
    _arguments(checker, node, scope, ("varchar",))
    _cast_result(node, "BIGINT")
    return "bigint"


def _split(checker: _Checker, node: exp.Split, scope: _Scope) -> Type:
    _arguments(checker, node, scope, ("varchar", *_INTEGERS))
    if _literal_text(node.expression) in (None, "") or node.args.get("limit") is not None:
        raise _refuse(_name(node), "unless split by a text, without a limit")
    return "array(varchar)"


def _boolean_aggregate(checker: _Checker, node: exp.Expr, scope: _Scope) -> Type:
    _arguments(checker, node, scope, ("boolean",))
    return "boolean"


def _count_if(checker: _Checker, node: exp.CountIf, scope: _Scope) -> Type:
    checker.boolean(node.this, scope)
    return "bigint"


def _statistic(checker: _Checker, node: exp.Expr, scope: _Scope) -> Type:
    found = _aggregated(checker, node, scope)
    if checker.unknown(_name(node), [found]) or _is_integer(found) or found == "double":
        return "double"
    raise _refuse(_name(node), f"of type {found}")


def _any_value(checker: _Checker, node: exp.Expr, scope: _Scope) -> Type:
    return _aggregated(checker, node, scope)


def _arg_max(checker: _Checker, node: exp.Expr, scope: _Scope) -> Type:
    if node.args.get("count") is not None:
        raise _refuse(_name(node), "with a number of values")
    value, key = checker.type(node.this, scope), checker.type(node.expression, scope)
    _comparable(checker, [key], node)
    return value
