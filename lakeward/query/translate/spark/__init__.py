"""Athena's (Trino's) semantics on Spark: what Spark answers as Trino would, and nothing else.

Spark SQL and Trino differ in many small ways (``7 / 2`` is 3.5 in Spark and 3
in Trino; ``CAST(2.5 AS integer)`` truncates in Spark and rounds in Trino;
``length`` is an ``int`` in Spark and a ``bigint`` in Trino), so a list of what
differs would never be complete. This module is the other list: the query
constructs, operators and functions whose Spark translation gives Trino's
answer for the operand types at hand, each checked by the conformance suite
(tests/query/conformance). A query using anything else is refused before it
runs, with an error naming the first construct not on the list.

The checks need the Trino type of each operand, so the query is typed here
from its literals, casts, derived tables (VALUES, subqueries, CTEs) and the
stored tables' columns. Those columns are known only once the query runs (its
tables resolved and the caller's access to them checked): when the query is
started, what depends on them is let through, and checked when it runs.

The Spark session runs with ANSI mode (overflow and bad casts fail, as in
Trino, instead of wrapping or giving NULL) in UTC (``engines/spark/``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from lakeward.errors import InvalidRequest
from lakeward.metastore.tables import Column
from lakeward.query.model import TableRef
from lakeward.query.types import athena_type_of_hive

# Trino's types, by name; None stands for a type not known (yet), or not checked here.
Type = str | None
# The stored tables' columns and their types, once the query's tables are resolved.
TableColumns = Mapping[TableRef, Mapping[str, Type]]

_INTEGERS = ("tinyint", "smallint", "integer", "bigint")
_NUMBERS = (*_INTEGERS, "decimal", "double")
_INT_RANGE = {"integer": 2**31, "bigint": 2**63}
_SPARK_INTEGER = {
    "tinyint": "TINYINT",
    "smallint": "SMALLINT",
    "integer": "INT",
    "bigint": "BIGINT",
}

_DATA_TYPES = {
    exp.DataType.Type.TINYINT: "tinyint",
    exp.DataType.Type.SMALLINT: "smallint",
    exp.DataType.Type.INT: "integer",
    exp.DataType.Type.BIGINT: "bigint",
    exp.DataType.Type.DOUBLE: "double",
    exp.DataType.Type.DECIMAL: "decimal",
    exp.DataType.Type.VARCHAR: "varchar",
    exp.DataType.Type.TEXT: "varchar",  # Hive's string: an INSERT's cast to a table's column
    exp.DataType.Type.BOOLEAN: "boolean",
    exp.DataType.Type.DATE: "date",
}

_DECIMAL_TEXT = re.compile(r"(0|[1-9][0-9]*)\.[0-9]+|[1-9][0-9]*")
_NUMBER_TEXT = re.compile(r"-?[0-9]+(\.[0-9]+)?([eE]-?[0-9]+)?")
# Literal texts both engines read the same way when cast to these types.
_CANONICAL = {
    "decimal": _DECIMAL_TEXT,
    "double": _NUMBER_TEXT,
    "tinyint": re.compile(r"-?[0-9]+"),
    "smallint": re.compile(r"-?[0-9]+"),
    "integer": re.compile(r"-?[0-9]+"),
    "bigint": re.compile(r"-?[0-9]+"),
    "date": re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}"),
    "timestamp": re.compile(
        r"[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,3})?"
    ),
    "boolean": re.compile(r"true|false", re.IGNORECASE),
}

# Meta keys the check leaves on nodes for the rewrite: a ``/`` on integers with its result
# type; a node whose Spark result type is not Trino's, with the type to cast it to.
_INTEGER_DIVISION = "trino_integer_division"
_CAST_TO = "trino_cast_to"
_CASE_GUARD = "trino_case_guard"

_OPERATORS = {
    exp.Add: "+",
    exp.Sub: "-",
    exp.Mul: "*",
    exp.Div: "/",
    exp.Mod: "%",
    exp.Neg: "unary -",
    exp.DPipe: "||",
    exp.EQ: "=",
    exp.NEQ: "<>",
    exp.GT: ">",
    exp.GTE: ">=",
    exp.LT: "<",
    exp.LTE: "<=",
    exp.NullSafeEQ: "IS NOT DISTINCT FROM",
    exp.NullSafeNEQ: "IS DISTINCT FROM",
}
# Clauses by the words a user writes, where sqlglot's names differ.
_CLAUSES = {"sample": "TABLESAMPLE", "laterals": "LATERAL", "windows": "WINDOW"}
_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ, exp.NullSafeNEQ)


def _refuse(what: str, why: str) -> InvalidRequest:
    return InvalidRequest(
        f"{what} is not supported on the Spark engine: {why}; run the query in a DuckDB workgroup"
    )


def _name(node: exp.Expr) -> str:
    """How a refusal names a construct: the Trino function name, the operator, or the clause."""
    for kind, symbol in _OPERATORS.items():
        if isinstance(node, kind):
            return f"operator {symbol}"
    if isinstance(node, exp.Window):
        return f"window function {_name(node.this).removeprefix('function ')}"
    if isinstance(node, exp.IgnoreNulls):
        return f"{_name(node.this)} IGNORE NULLS"
    if isinstance(node, exp.Bracket):
        return "subscript [...]"
    if isinstance(node, (exp.Anonymous, exp.AnonymousAggFunc)):
        return f"function {str(node.name).lower()}"
    if isinstance(node, exp.Func):
        # As the user wrote it: sqlglot's names are not Trino's (ARRAY_SIZE for cardinality).
        word = re.match(r"[A-Za-z_][A-Za-z0-9_]*", node.sql("trino"))
        return f"function {(word[0] if word else node.sql_name()).lower()}"
    return node.key.upper().replace("_", " ")


def _is_integer(t: Type) -> bool:
    return t in _INTEGERS


def _is_number(t: Type) -> bool:
    return t in _NUMBERS


def _wider_integer(a: str, b: str) -> str:
    return max(a, b, key=_INTEGERS.index)


def _element(t: Type) -> Type:
    """The element type of an array type; None for other types."""
    return t[6:-1] if t is not None and t.startswith("array(") else None


def _common(types: Iterable[Type], node: exp.Expr) -> Type:
    """The type Trino gives values of these types together (CASE branches, VALUES rows)."""
    found: str = "unknown"
    for t in types:
        if t is None:
            return None
        if t == "unknown" or t == found:
            continue
        if found == "unknown":
            found = t
        elif _is_integer(found) and _is_integer(t):
            found = _wider_integer(found, t)
        elif _is_number(found) and _is_number(t):
            found = "double" if "double" in (found, t) else "decimal"
        elif _element(found) is not None and _element(t) is not None:
            element = _common([_element(found), _element(t)], node)
            if element is None:
                return None
            found = f"array({element})"
        else:
            raise _refuse(_name(node), f"values of types {found} and {t} are mixed")
    return found


@dataclass
class _Scope:
    """The columns a SELECT can name: per source alias, the column names and their types."""

    sources: dict[str, dict[str, Type]] = field(default_factory=dict)
    ctes: dict[str, list[tuple[str, Type]]] = field(default_factory=dict)
    # Sources whose columns are not known yet (a stored table, before the query runs).
    opaque: set[str] = field(default_factory=set)
    # The parameters of the lambda expressions around, by name.
    lambdas: dict[str, Type] = field(default_factory=dict)

    def column(self, node: exp.Column) -> Type:
        name = node.name.lower()
        table = node.table.lower()
        if table:
            if table in self.opaque:
                return None
            return self.sources.get(table, {}).get(name)
        found = [cols[name] for cols in self.sources.values() if name in cols]
        return found[0] if len(found) == 1 and not self.opaque else None


class _Checker:
    """Types a Trino query bottom-up, refusing what Spark would answer differently."""

    def __init__(self, tables: TableColumns | None) -> None:
        # None: the stored tables' columns are not known yet; what needs them waits.
        self.tables = tables

    def unknown(self, what: str, types: Iterable[Type]) -> bool:
        """Whether a check must wait for types not known yet; refuses if they never will be."""
        types = list(types)
        if None not in types:
            return False
        if self.tables is None:
            return True
        shown = " and ".join(t or "a type not checked" for t in types)
        raise _refuse(what, f"on {shown}")

    # --- queries ----------------------------------------------------------------------------

    def query(self, node: exp.Expr, outer: _Scope | None = None) -> list[tuple[str, Type]]:
        """The output columns (name, type) of a query node."""
        ctes = dict(outer.ctes) if outer else {}
        with_ = node.args.get("with_")
        if isinstance(with_, exp.With):
            if with_.args.get("recursive"):
                raise _refuse("WITH RECURSIVE", "not checked against Trino's answers")
            for cte in with_.expressions:
                columns = self.query(cte.this, _Scope(ctes=ctes))
                aliases = [c.name for c in cte.args["alias"].columns]
                if aliases:
                    columns = [(n, t) for n, (_, t) in zip(aliases, columns, strict=False)]
                ctes[cte.alias.lower()] = columns
        if isinstance(node, exp.Subquery):
            return self.query(node.this, _Scope(ctes=ctes))
        if isinstance(node, exp.SetOperation):
            if isinstance(node, (exp.Intersect, exp.Except)) and not node.args.get("distinct"):
                raise _refuse(_name(node) + " ALL", "not checked against Trino's answers")
            left = self.query(node.left, _Scope(ctes=ctes))
            right = self.query(node.right, _Scope(ctes=ctes))
            if len(left) != len(right):
                raise _refuse(_name(node), "the queries have different numbers of columns")
            self._order_limit(node, _Scope(ctes=ctes))
            return [(n, _common([a, b], node)) for (n, a), (_, b) in zip(left, right, strict=True)]
        if isinstance(node, exp.Values):
            return self.values(node)
        if isinstance(node, exp.Select):
            return self.select(node, ctes)
        raise _refuse(_name(node), "not checked against Trino's answers")

    def values(self, node: exp.Values) -> list[tuple[str, Type]]:
        rows = [r.expressions if isinstance(r, exp.Tuple) else [r] for r in node.expressions]
        if len({len(r) for r in rows}) != 1:
            raise _refuse("VALUES", "rows of different lengths")
        scope = _Scope()
        columns = list(zip(*[[self.type(v, scope) for v in row] for row in rows], strict=True))
        names = [c.name for c in node.args["alias"].columns] if node.args.get("alias") else []
        names += [f"_col{i}" for i in range(len(names), len(columns))]
        return [(n, _common(ts, node)) for n, ts in zip(names, columns, strict=True)]

    def select(
        self, node: exp.Select, ctes: dict[str, list[tuple[str, Type]]]
    ) -> list[tuple[str, Type]]:
        allowed = {"expressions", "from_", "joins", "where", "group", "having", "order"}
        allowed |= {"limit", "offset", "distinct", "with_", "sample"}
        if node.args.get("sample"):  # Spark samples stored tables only
            raise _refuse("TABLESAMPLE", "of a subquery or VALUES")
        for key, value in node.args.items():
            if value and key not in allowed:
                what = _CLAUSES.get(key, key.upper().rstrip("_").replace("_", " "))
                raise _refuse(what, "not checked against Trino's answers")
        distinct = node.args.get("distinct")
        if isinstance(distinct, exp.Distinct) and distinct.args.get("on"):
            raise _refuse("DISTINCT ON", "Trino has no DISTINCT ON")
        scope = _Scope(ctes=ctes)
        if node.args.get("from_"):
            self.source(node.args["from_"].this, scope)
        for join in node.args.get("joins") or []:
            if join.args.get("using") or join.method:
                raise _refuse("JOIN USING or NATURAL", "not checked against Trino's answers")
            if isinstance(join.this, exp.Unnest) and (join.side or join.args.get("on")):
                # Spark's LATERAL VIEW drops the rows whose array is empty, as CROSS JOIN does.
                raise _refuse(f"{join.side} JOIN UNNEST".strip(), "Spark keeps only CROSS JOIN's")
            self.source(join.this, scope)
            if join.args.get("on"):
                self.boolean(join.args["on"], scope)
        for key in ("where", "having"):
            if node.args.get(key):
                self.boolean(node.args[key].this, scope)
        group = node.args.get("group")
        if group:
            for key, value in group.args.items():
                if value and key != "expressions":
                    what = f"GROUP BY {key.upper().replace('_', ' ')}"
                    raise _refuse(what, "not checked against Trino's answers")
            for expression in group.expressions:
                self.grouping(expression, scope)
        columns: list[tuple[str, Type]] = []
        for projection in node.expressions:
            if isinstance(projection, exp.Star) or (
                isinstance(projection, exp.Column) and isinstance(projection.this, exp.Star)
            ):
                table = projection.table.lower() if isinstance(projection, exp.Column) else ""
                if scope.opaque and (not table or table in scope.opaque):
                    columns.append(("*", None))  # columns known once the query runs
                for alias, cols in scope.sources.items():
                    if not table or table == alias:
                        columns.extend(cols.items())
                continue
            found = self.type(projection, scope)
            if found is not None and found.startswith("interval"):
                raise _refuse("an interval value", "Spark writes intervals otherwise")
            columns.append((projection.alias_or_name, found))
        # ORDER BY may name the select's output columns.
        ordering = _Scope(dict(scope.sources), ctes, set(scope.opaque))
        ordering.sources[""] = dict(columns)
        self._order_limit(node, ordering)
        return columns

    def _order_limit(self, node: exp.Expr, scope: _Scope) -> None:
        order = node.args.get("order")
        if order:
            for ordered in order.expressions:
                if not (isinstance(ordered.this, exp.Literal) and ordered.this.is_int):
                    self.type(ordered.this, scope)
        for key in ("limit", "offset"):
            clause = node.args.get(key)
            if clause is not None:
                value = clause.args.get("expression") or clause.this
                if not (isinstance(value, exp.Literal) and value.is_int):
                    raise _refuse(key.upper(), "only a number of rows is checked")

    def source(self, node: exp.Expr, scope: _Scope) -> None:
        alias = node.alias.lower()
        if isinstance(node, exp.Table):
            if node.args.get("joins"):
                raise _refuse("a parenthesized join", "not checked against Trino's answers")
            if node.args.get("sample"):
                _sample(node.args["sample"])
            name = node.name.lower()
            if not node.args.get("db") and name in scope.ctes:
                scope.sources[alias or name] = dict(scope.ctes[name])
                if "*" in scope.sources[alias or name]:
                    scope.opaque.add(alias or name)
            elif self.tables is None:
                scope.opaque.add(alias or name)
            else:
                ref = TableRef(node.catalog.lower(), node.db.lower(), name)
                scope.sources[alias or name] = dict(self.tables.get(ref, {}))
            return
        if isinstance(node, exp.Unnest):
            self.unnest(node, scope)
            return
        if isinstance(node, (exp.Subquery, exp.Values)):
            if node.args.get("sample"):
                raise _refuse("TABLESAMPLE", "of a subquery or VALUES")
            inner = node.this if isinstance(node, exp.Subquery) else node
            columns = self.query(inner, _Scope(ctes=scope.ctes))
            table_alias = node.args.get("alias")
            names = [c.name for c in table_alias.columns] if table_alias else []
            if any(n == "*" for n, _ in columns):
                scope.opaque.add(alias)
            elif names:
                columns = [(n, t) for n, (_, t) in zip(names, columns, strict=False)]
            scope.sources[alias] = {n.lower(): t for n, t in columns}
            return
        raise _refuse(_name(node), "not checked against Trino's answers")

    # --- expressions ------------------------------------------------------------------------

    def unnest(self, node: exp.Unnest, scope: _Scope) -> None:
        if node.args.get("offset"):
            raise _refuse("UNNEST WITH ORDINALITY", "Spark numbers the elements from 0")
        elements: list[Type] = []
        for array in node.expressions:
            found = self.type(array, scope)
            if not self.unknown("UNNEST", [found]) and _element(found) is None:
                raise _refuse("UNNEST", f"of a {found}")
            elements.append(_element(found))
        alias = node.args.get("alias")
        names = [c.name.lower() for c in alias.columns] if alias else []
        if alias is None or len(names) != len(elements):
            raise _refuse("UNNEST", "unless each array is named by one column: AS t(x)")
        scope.sources[alias.name.lower()] = dict(zip(names, elements, strict=True))

    def grouping(self, node: exp.Expr, scope: _Scope) -> None:
        """A GROUP BY element: an expression, or a ROLLUP, CUBE or GROUPING SETS of them."""
        if isinstance(node, (exp.Rollup, exp.Cube, exp.GroupingSets, exp.Tuple)):
            for element in node.expressions:
                self.grouping(element, scope)
        elif isinstance(node, exp.Paren):
            self.grouping(node.this, scope)
        else:
            self.type(node, scope)

    def boolean(self, node: exp.Expr, scope: _Scope) -> None:
        found = self.type(node, scope)
        if not self.unknown(_name(node), [found]) and found not in ("boolean", "unknown"):
            raise _refuse(_name(node), f"a condition of type {found}")

    def type(self, node: exp.Expr, scope: _Scope) -> Type:
        """The Trino type of an expression; refuses what is not on the list."""
        handler = _EXPRESSIONS.get(type(node))
        if handler is None:
            raise _refuse(_name(node), "not checked against Trino's answers")
        if isinstance(node, exp.Func):
            # An argument the check does not know of (sqlglot reads more forms than are
            # checked here: array_position's start) is refused, not passed through.
            accepted = _ARGUMENTS.get(type(node), set()) | {"this", "expression"}
            for key, value in node.args.items():
                if key not in accepted and isinstance(value, (exp.Expr, list)) and value:
                    raise _refuse(_name(node), f"with its {key.replace('_', ' ')} argument")
        return handler(self, node, scope)

    def operands(self, node: exp.Binary, scope: _Scope) -> tuple[Type, Type]:
        return self.type(node.left, scope), self.type(node.right, scope)


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


def _sample(sample: exp.Expr) -> None:
    method = sample.args.get("method")
    percent = sample.args.get("percent")
    number = float(percent.this) if isinstance(percent, exp.Literal) and percent.is_number else -1
    if str(method.name if method else "").upper() not in ("BERNOULLI", "SYSTEM") or not (
        0 <= number <= 100
    ):
        raise _refuse("TABLESAMPLE", "other than BERNOULLI or SYSTEM by a percentage")


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
_INTERVAL_UNITS = {
    "YEAR": "interval year to month",
    "MONTH": "interval year to month",
    "DAY": "interval day to second",
    "HOUR": "interval day to second (time)",
    "MINUTE": "interval day to second (time)",
    "SECOND": "interval day to second (time)",
}
_INTERVAL_OPERANDS = {
    "interval year to month": ("date", "timestamp"),
    "interval day to second": ("date", "timestamp"),
    "interval day to second (time)": ("timestamp",),
}


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
_ARGUMENTS: dict[type[exp.Expr], set[str]] = {
    exp.Cast: {"to"},
    exp.TryCast: {"to"},
    exp.Case: {"ifs", "default"},
    exp.If: {"true", "false"},
    exp.Coalesce: {"expressions"},
    exp.Concat: {"expressions"},
    exp.ConcatWs: {"expressions"},
    exp.Array: {"expressions"},
    exp.Anonymous: {"expressions"},
    exp.Grouping: {"expressions"},
    exp.Round: {"decimals"},
    exp.Replace: {"replacement"},
    exp.Substring: {"start", "length"},
    exp.Pad: {"fill_pattern"},
    exp.StrPosition: {"substr"},
    exp.DateTrunc: {"unit"},
    exp.TimestampTrunc: {"unit"},
    exp.DateAdd: {"unit"},
    exp.DateDiff: {"unit"},
    exp.TimeToStr: {"format"},
    exp.Reduce: {"initial", "merge", "finish"},
    exp.ArraySort: {"nulls_first"},
    exp.ArrayToString: {"null"},
    exp.GenerateSeries: {"start", "end", "step"},
    exp.ArraySlice: {"start", "end"},
}

_EXPRESSIONS: dict[type[exp.Expr], Callable[[_Checker, Any, _Scope], Type]] = {
    exp.Literal: _literal,
    exp.Null: lambda *_: "unknown",
    exp.Boolean: lambda *_: "boolean",
    exp.Column: _column,
    exp.Alias: _alias,
    exp.Paren: _same,
    exp.Add: _arithmetic,
    exp.Sub: _arithmetic,
    exp.Mul: _arithmetic,
    exp.Div: _arithmetic,
    exp.Mod: _arithmetic,
    exp.Neg: _negate,
    **{c: _comparison for c in _COMPARISONS},
    exp.And: _logic,
    exp.Or: _logic,
    exp.Not: _logic,
    exp.Is: _is,
    exp.Between: _between,
    exp.In: _in,
    exp.Cast: _cast,
    exp.TryCast: _cast,
    exp.Case: _case,
    exp.If: _if,
    exp.Coalesce: _coalesce,
    exp.Nullif: _nullif,
    exp.Upper: _case_mapping,
    exp.Lower: _case_mapping,
    exp.DPipe: _array_concat,
    exp.Length: _length,
    exp.Count: _count,
    exp.Sum: _sum,
    exp.Avg: _avg,
    exp.Min: _min_max,
    exp.Max: _min_max,
    exp.Abs: _abs,
    exp.Subquery: _subquery,
    exp.Window: _window,
    exp.Round: _round,
    exp.Sqrt: _double_function,
    exp.Cbrt: _double_function,
    exp.Exp: _double_function,
    exp.Pow: _double_function,
    exp.Pi: _double_function,
    exp.Like: _like,
    exp.Replace: _string_function,
    exp.Reverse: _string_function,
    exp.Concat: _concat,
    exp.ConcatWs: _string_function,
    exp.StartsWith: _boolean_string_function,
    exp.Substring: _substring,
    exp.Pad: _pad,
    exp.StrPosition: _strpos,
    exp.Split: _split,
    exp.CountIf: _count_if,
    exp.LogicalAnd: _boolean_aggregate,
    exp.LogicalOr: _boolean_aggregate,
    exp.Stddev: _statistic,
    exp.StddevPop: _statistic,
    exp.StddevSamp: _statistic,
    exp.Variance: _statistic,
    exp.VariancePop: _statistic,
    exp.AnyValue: _any_value,
    exp.ArgMax: _arg_max,
    exp.ArgMin: _arg_max,
    **{part: _date_part for part in (*_DATE_PARTS, *_TIME_PARTS)},
    exp.DateTrunc: _date_trunc,
    exp.Date: _to_date,
    exp.LastDay: _to_date,
    exp.CurrentDate: lambda *_: "date",
    exp.Sign: _sign,
    exp.Escape: _escape,
    exp.Anonymous: _named,
    exp.Array: _array,
    exp.Bracket: _subscript,
    exp.ArraySize: _cardinality,
    exp.ArrayContains: _array_search,
    exp.ArrayPosition: _array_search,
    exp.Grouping: _grouping,
    exp.Interval: _interval,
    exp.DayOfWeekIso: _day_of_week,
    exp.TimeToStr: _date_format,
    exp.Identifier: _parameter,
    exp.Transform: _transform,
    exp.ArrayFilter: _filter,
    exp.Reduce: _reduce,
    exp.ArraySort: _array_sort,
    exp.ArrayToString: _array_join,
    exp.Levenshtein: _levenshtein,
    exp.Filter: _aggregate_filter,
    exp.GenerateSeries: _sequence,
    exp.ArraySlice: _slice,
    exp.Flatten: _array_unary,
    exp.ArrayDistinct: _array_unary,
    exp.ArrayRemove: _array_remove,
    exp.ArrayExcept: _array_pair,
    exp.Extract: _extract,
    exp.DateAdd: _date_add,
    exp.DateDiff: _date_diff,
    exp.TimestampTrunc: _date_trunc,
}


# --- the rewrite --------------------------------------------------------------------------


def check(tree: exp.Expr) -> None:
    """Refuse, when a query is started, what Spark would not answer as Trino does.

    What depends on the stored tables' columns is checked by ``to_spark`` when it runs.
    """
    _Checker(None).query(tree)


def to_spark(tree: exp.Expr, tables: TableColumns) -> exp.Expr:
    """The Trino tree (a copy the caller owns, tables not yet renamed), checked against the
    stored tables' columns and rewritten for Spark SQL; refusals raise InvalidRequest."""
    _Checker(tables).query(tree)
    for division in list(tree.find_all(exp.Div)):
        width = division.meta.get(_INTEGER_DIVISION)
        if width:  # Spark's DIV truncates toward zero as Trino does, and gives a bigint
            quotient = exp.IntDiv(this=division.left, expression=division.right)
            division.replace(exp.Cast(this=quotient, to=exp.DataType.build(_SPARK_INTEGER[width])))
    for node in [n for n in tree.walk() if n.meta.pop(_CASE_GUARD, False)]:
        assert isinstance(node, (exp.Upper, exp.Lower))
        guard = exp.Paren(this=exp.Null())
        node.replace(guard)
        guard.set("this", _guarded_case_mapping(node))
    for node in [n for n in tree.walk() if _CAST_TO in n.meta]:
        cast = exp.Cast(to=exp.DataType.build(node.meta.pop(_CAST_TO), dialect="spark"))
        node.replace(cast)
        cast.set("this", node)
    return _name_columns(tree)


def column_types(columns: Iterable[Column]) -> dict[str, Type]:
    """A stored table's columns by lower-case name, with the Trino types checked here."""
    checked = {*_NUMBERS, "varchar", "boolean", "date"}  # not timestamps: Spark's are zoned
    found = {}
    for column in columns:
        name = athena_type_of_hive(column.type).name
        found[column.name.lower()] = name if name in checked else None
    return found


def _name_columns(tree: exp.Expr) -> exp.Expr:
    """Athena names an unnamed result column ``_col<position>``; Spark names it by its text."""
    select = tree
    while isinstance(select, exp.SetOperation):
        select = select.left
    if isinstance(select, exp.Subquery):
        return tree
    if isinstance(select, exp.Select):
        for position, projection in enumerate(select.expressions):
            if isinstance(projection, exp.Star) or projection.is_star:
                break
            if not isinstance(projection, (exp.Alias, exp.Column)):
                projection.replace(exp.alias_(projection.copy(), f"_col{position}", quoted=True))
    return tree
