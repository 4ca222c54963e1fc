"""The checker: a Trino query typed bottom-up, each construct checked by its rule (the
rules are ``scalars.py`` and ``functions.py``, listed in ``__init__.py``'s tables)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from lakeward.errors import InvalidRequest
from lakeward.query.model import TableRef

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


Rules = Mapping[type[exp.Expr], Callable[["_Checker", Any, _Scope], Type]]
Arguments = Mapping[type[exp.Expr], set[str]]


class _Checker:
    """Types a Trino query bottom-up, refusing what Spark would answer differently."""

    def __init__(self, tables: TableColumns | None, rules: Rules, arguments: Arguments) -> None:
        # None: the stored tables' columns are not known yet; what needs them waits.
        self.tables = tables
        self.rules = rules  # a node's type -> its rule (__init__.py's table)
        self.arguments = arguments  # a function's type -> the arguments its rule checks

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
        for position, projection in enumerate(node.expressions):
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
            # An unnamed column is Trino's _col<position> (count(*) is not a star).
            named = projection.alias or isinstance(projection, exp.Column)
            columns.append((projection.alias_or_name if named else f"_col{position}", found))
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
        handler = self.rules.get(type(node))
        if handler is None:
            raise _refuse(_name(node), "not checked against Trino's answers")
        if isinstance(node, exp.Func):
            # An argument the check does not know of (sqlglot reads more forms than are
            # checked here: array_position's start) is refused, not passed through.
            accepted = self.arguments.get(type(node), set()) | {"this", "expression"}
            for key, value in node.args.items():
                if key not in accepted and isinstance(value, (exp.Expr, list)) and value:
                    raise _refuse(_name(node), f"with its {key.replace('_', ' ')} argument")
        return handler(self, node, scope)

    def operands(self, node: exp.Binary, scope: _Scope) -> tuple[Type, Type]:
        return self.type(node.left, scope), self.type(node.right, scope)


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


def _sample(sample: exp.Expr) -> None:
    method = sample.args.get("method")
    percent = sample.args.get("percent")
    number = float(percent.this) if isinstance(percent, exp.Literal) and percent.is_number else -1
    if str(method.name if method else "").upper() not in ("BERNOULLI", "SYSTEM") or not (
        0 <= number <= 100
    ):
        raise _refuse("TABLESAMPLE", "other than BERNOULLI or SYSTEM by a percentage")
