"""The static numeric types of Trino expressions, where the query text alone tells them.

Trino types a decimal result by rules on its operands' precision and scale
(``DECIMAL '100.0'`` is decimal(4,1); ``decimal(4,1) * bigint`` is decimal(23,1)); DuckDB
follows the same rules for ``+``, ``-`` and ``*`` but not for ``/``, ``%``,
``round``, ``ceil`` or ``floor``, nor for literals with leading zeros. Those
need the operand types when the DuckDB text is written: here they are worked
out from literals, casts and the operators over them (a number with a point and no
exponent reaches here written with one, a double: ``sql/queries.py``). ``None`` means not known
(a column, a function this does not type): the caller then leaves the choice
to DuckDB's binder through a macro that refuses decimals it cannot type.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.errors import OptimizeError
from sqlglot.optimizer.scope import Scope, ScopeType, traverse_scope

from lakeward.query.types import parse_hive_type

MAX_PRECISION = 38
_INT32 = 2**31
_INT64 = 2**63
_HIVE_INTEGERS = {"tinyint": 3, "smallint": 5, "int": 10, "integer": 10, "bigint": 19}
_INTEGERS = {
    exp.DataType.Type.TINYINT: 3,
    exp.DataType.Type.SMALLINT: 5,
    exp.DataType.Type.INT: 10,
    exp.DataType.Type.BIGINT: 19,
}


@dataclass(frozen=True)
class Numeric:
    """An exact numeric type: an integer type (scale 0, ``integer``) or decimal(p,s)."""

    precision: int
    scale: int
    integer: bool = False

    def sql(self) -> str:
        return f"DECIMAL({self.precision},{self.scale})"


def decimal(precision: int, scale: int) -> Numeric:
    return Numeric(min(MAX_PRECISION, precision), scale)


def literal_type(text: str) -> Numeric | None:
    """The type of a numeric literal: integer, bigint, decimal(p,s); None for doubles."""
    if "e" in text.lower():
        return None
    whole, point, fraction = text.partition(".")
    if not point:
        value = int(whole)
        if value < _INT32:
            return Numeric(10, 0, integer=True)
        return Numeric(19, 0, integer=True) if value < _INT64 else None
    # Digits of the value without leading zeros, never fewer than the scale.
    digits = len((whole + fraction).lstrip("0"))
    return Numeric(max(digits, len(fraction), 1), len(fraction))


def cast_type(to: exp.DataType) -> Numeric | None:
    if to.this in _INTEGERS:
        return Numeric(_INTEGERS[to.this], 0, integer=True)
    if to.this == exp.DataType.Type.DECIMAL:
        params = [int(p.name) for p in to.expressions]
        if not params:
            return Numeric(MAX_PRECISION, 0)
        return Numeric(params[0], params[1] if len(params) > 1 else 0)
    return None


def column_type(hive_type: str) -> Numeric | None:
    """The exact numeric type of a stored column, from its Hive type; None if not one."""
    try:
        parsed = parse_hive_type(hive_type)
    except ValueError:
        return None
    if parsed.name in _HIVE_INTEGERS:
        return Numeric(_HIVE_INTEGERS[parsed.name], 0, integer=True)
    if parsed.name == "decimal":  # Hive's bare decimal is decimal(10,0)
        precision, scale = (list(parsed.params) + [10, 0][len(parsed.params) :])[:2]
        return Numeric(precision, scale)
    return None


def numeric_type(node: exp.Expr) -> Numeric | None:
    """The exact numeric type of ``node`` in Trino, if the text alone shows it."""
    if isinstance(node, exp.Literal) and not node.is_string:
        return literal_type(node.name)
    if isinstance(node, exp.Column) and isinstance(node.meta.get(COLUMN_KEY), str):
        return column_type(node.meta[COLUMN_KEY])
    if isinstance(node, (exp.Paren, exp.Neg, exp.Abs)):
        return numeric_type(node.this)
    if isinstance(node, exp.Cast):  # TryCast too
        bare = node.to.this == exp.DataType.Type.DECIMAL and not node.to.expressions
        if bare and isinstance(node.this, exp.Literal) and node.this.is_string:
            return _typed_literal(node.this.name)  # DECIMAL '12.34'
        return cast_type(node.to)
    if isinstance(node, (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod)):
        return operation_type(node)
    if isinstance(node, exp.Round):
        return round_type(node)
    if isinstance(node, (exp.Ceil, exp.Floor)):
        of = numeric_type(node.this)
        return of if of is None or of.integer else whole_type(of)
    if isinstance(node, exp.Window):  # an aggregate over a window is typed as the aggregate
        return _aggregate_type(node.this)
    if not isinstance(node.parent, exp.Window):
        found = _aggregate_type(node)
        if found is not None:
            return found
    if isinstance(node, exp.Distinct) and len(node.expressions) == 1:  # sum(DISTINCT x)
        return numeric_type(node.expressions[0])
    branches = _branches(node)
    if branches is not None:
        return common_type(branches)
    return None


def _aggregate_type(node: exp.Expr) -> Numeric | None:
    if isinstance(node, (exp.Sum, exp.Max, exp.Min)):
        of = numeric_type(node.this)
        if isinstance(node, exp.Sum) and of is not None:
            return Numeric(19, 0, integer=True) if of.integer else decimal(38, of.scale)
        return of
    if isinstance(node, exp.Avg):
        of = numeric_type(node.this)  # of a decimal, a decimal of the same type
        return of if of is not None and not of.integer else None
    if isinstance(node, exp.Count):
        return Numeric(19, 0, integer=True)
    return None


def _branches(node: exp.Expr) -> list[exp.Expr] | None:
    """The values a CASE, IF, coalesce or nullif may take, whose common type is its type."""
    if isinstance(node, exp.Case):
        return [i.args["true"] for i in node.args.get("ifs") or []] + (
            [node.args["default"]] if node.args.get("default") is not None else []
        )
    if isinstance(node, exp.If):
        return [node.args["true"]] + (
            [node.args["false"]] if node.args.get("false") is not None else []
        )
    if isinstance(node, exp.Coalesce):
        return [node.this, *node.expressions]
    if isinstance(node, exp.Nullif):
        return [node.this]
    return None


def common_type(values: list[exp.Expr]) -> Numeric | None:
    """Trino's common super type of exact numeric values (NULLs aside); None if one is not
    known to be exact numeric."""
    types = []
    for value in values:
        if isinstance(value, exp.Null):
            continue
        found = numeric_type(value)
        if found is None:
            return None
        types.append(found)
    if not types:
        return None
    if all(t.integer for t in types):
        return max(types, key=lambda t: t.precision)
    scale = max(t.scale for t in types)
    return decimal(max(t.precision - t.scale for t in types) + scale, scale)


def _typed_literal(text: str) -> Numeric | None:
    try:
        found = literal_type(text.strip().lstrip("+-"))
    except ValueError:
        return None
    if found is not None and found.integer:  # DECIMAL '12' is decimal(2,0)
        return Numeric(len(text.strip().lstrip("+-").lstrip("0")) or 1, 0)
    return found


def operation_type(node: exp.Binary) -> Numeric | None:
    left, right = numeric_type(node.left), numeric_type(node.right)
    if left is None or right is None:
        return None
    if left.integer and right.integer:
        return max(left, right, key=lambda t: t.precision)
    p1, s1, p2, s2 = left.precision, left.scale, right.precision, right.scale
    if isinstance(node, (exp.Add, exp.Sub)):
        return decimal(1 + max(s1, s2) + max(p1 - s1, p2 - s2), max(s1, s2))
    if isinstance(node, exp.Mul):
        return decimal(p1 + p2, s1 + s2)
    if isinstance(node, exp.Div):
        return decimal(p1 + s2 + max(0, s2 - s1), max(s1, s2))
    return decimal(min(p2 - s2, p1 - s1) + max(s1, s2), max(s1, s2))  # modulus


def whole_type(of: Numeric) -> Numeric:
    """round(x), ceil(x), floor(x) of a decimal: no scale, one more digit if it had one."""
    return Numeric(of.precision - of.scale + min(of.scale, 1), 0)


def round_type(node: exp.Round) -> Numeric | None:
    of = numeric_type(node.this)
    if of is None or of.integer:
        return of
    if node.args.get("decimals") is None:
        return whole_type(of)
    return decimal(of.precision + 1, of.scale)


# Functions whose result is a double whatever their arguments.
DOUBLE_FUNCTIONS = (
    exp.Sqrt, exp.Cbrt, exp.Pow, exp.Exp, exp.Ln, exp.Log, exp.Rand, exp.Stddev,
    exp.StddevPop, exp.StddevSamp, exp.Variance, exp.VariancePop,
)  # fmt: skip
_FLOAT_TYPES = (exp.DataType.Type.DOUBLE, exp.DataType.Type.FLOAT)


def floating(node: exp.Expr) -> bool:
    """Whether ``node`` is known from the text to be a double or a real."""
    if isinstance(node, exp.Literal) and not node.is_string:
        return "e" in node.name.lower()
    if isinstance(node, (exp.Paren, exp.Neg, exp.Abs, exp.Round, exp.Ceil, exp.Floor, exp.Window)):
        return floating(node.this)
    if isinstance(node, exp.Cast):
        return node.to.this in _FLOAT_TYPES
    if isinstance(node, exp.Column) and isinstance(node.meta.get(COLUMN_KEY), str):
        return node.meta[COLUMN_KEY].strip().lower() in ("double", "float")
    if isinstance(node, (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod)):
        return floating(node.left) or floating(node.right)
    if isinstance(node, (exp.Sum, exp.Max, exp.Min)):  # of doubles, a double
        return floating(node.this)
    if isinstance(node, exp.Avg):  # a double, but of a decimal a decimal
        of = numeric_type(node.this)
        return of is None or of.integer
    branches = _branches(node)
    if branches is not None:
        return any(floating(b) for b in branches)
    return isinstance(node, DOUBLE_FUNCTIONS)


TYPE_KEY = "trino_numeric"
COLUMN_KEY = "trino_column_type"
STORED_KEY = "trino_stored_column"  # True where COLUMN_KEY is a stored column's Hive type
COLUMNS_KNOWN_KEY = "trino_columns_known"  # on the root: whether stored columns were given
CAST_FROM_KEY = "trino_cast_from"
Columns = Mapping[tuple[str, str, str], Mapping[str, str]]


def _tag_columns(tree: exp.Expr, columns: Columns) -> None:
    """Mark each column reference with its type where it is certain: a stored column's
    Hive type, or the exact numeric type (or double) of the projection of a CTE, derived
    table or VALUES it names. Scopes are typed innermost first, so a projection's type is
    known before an outer query reads it; a correlated subquery's column is resolved in the
    queries around it."""
    try:
        scopes = traverse_scope(tree)
    except OptimizeError:  # a query sqlglot cannot scope: its columns stay untyped
        return
    for scope in scopes:
        for column in [*scope.columns, *_unqualified_after_grouping(scope)]:
            found = _resolve(scope, column, columns)
            if found is not None:
                column.meta[COLUMN_KEY], column.meta[STORED_KEY] = found


def _unqualified_after_grouping(scope: Scope) -> list[exp.Column]:
    """The unqualified columns of a query's HAVING, ORDER BY and QUALIFY that name no
    projection: sqlglot leaves them out of a scope's columns, since they might name one."""
    query = scope.expression
    if not isinstance(query, exp.Select):
        return []
    named = {name.lower() for name in query.named_selects}
    found = []
    for clause in ("having", "order", "qualify"):
        part = query.args.get(clause)
        for column in part.find_all(exp.Column) if part is not None else []:
            own = column.find_ancestor(exp.Select) is query
            if own and not column.table and column.name.lower() not in named:
                found.append(column)
    return found


def _resolve(inner: Scope, column: exp.Column, columns: Columns) -> tuple[str, bool] | None:
    """The column's type and whether it is a stored column's (not a derived table's)."""
    name, qualifier = column.name.lower(), column.table.lower()
    scope: Scope | None = inner
    while scope is not None:
        sources = {alias.lower(): source for alias, (_, source) in scope.selected_sources.items()}
        if qualifier:
            matching = [sources[qualifier]] if qualifier in sources else []
        else:
            matching = [s for s in sources.values() if _has_column(s, name, columns) is not False]
        if len(matching) == 1:
            found = _source_type(matching[0], name, columns)
            return None if found is None else (found, not isinstance(matching[0], Scope))
        if matching or scope.scope_type != ScopeType.SUBQUERY:
            return None  # ambiguous, or not a place that sees the query around it
        scope = scope.parent
    return None


def _has_column(source: exp.Table | Scope, name: str, columns: Columns) -> bool | None:
    """Whether ``source`` has a column ``name``; None when that cannot be told."""
    if isinstance(source, Scope):
        selects = _projections(source)
        return None if selects is None else name in selects
    held = columns.get((source.catalog.lower(), source.db.lower(), source.name.lower()))
    return None if held is None else name in held


def _projections(scope: Scope) -> dict[str, list[exp.Expr]] | None:
    """The values each named column of a scope's query may take: its projection in every
    branch of a set operation, its value in every row of a VALUES."""
    query = scope.expression
    if isinstance(query, exp.Subquery):
        query = query.unnest()
    if isinstance(query, exp.Values):
        alias = query.args.get("alias")
        names = [c.name.lower() for c in alias.columns] if alias is not None else []
        rows = [r.expressions if isinstance(r, exp.Tuple) else [r] for r in query.expressions]
        if not rows or any(len(r) != len(names) for r in rows):
            return None
        return {n: [r[i] for r in rows] for i, n in enumerate(names)}
    branches: list[exp.Expr] = []
    while isinstance(query, exp.SetOperation):
        branches.append(query.right)
        query = query.left
    branches.append(query)
    unwrapped = [b.unnest() if isinstance(b, exp.Subquery) else b for b in reversed(branches)]
    selects = [b for b in unwrapped if isinstance(b, exp.Select)]
    if len(selects) != len(unwrapped):
        return None
    first = selects[0].selects
    if any(isinstance(p, exp.Star) for b in selects for p in b.selects) or any(
        len(b.selects) != len(first) for b in selects
    ):
        return None
    return {
        p.alias_or_name.lower(): [b.selects[i].unalias() for b in selects]
        for i, p in enumerate(first)
    }


def _source_type(source: exp.Table | Scope, name: str, columns: Columns) -> str | None:
    if not isinstance(source, Scope):
        held = columns.get((source.catalog.lower(), source.db.lower(), source.name.lower()))
        return None if held is None else held.get(name)
    projections = _projections(source)
    if projections is None or name not in projections:
        return None
    values = [v for v in projections[name] if not isinstance(v, exp.Null)]
    if any(floating(v) for v in values):
        return "double"
    found = common_type(values)
    if found is None:
        return None
    if found.integer:
        return {3: "tinyint", 5: "smallint", 10: "int"}.get(found.precision, "bigint")
    return f"decimal({found.precision},{found.scale})"


FLOATING_KEY = "trino_floating"
OPERANDS_KEY = "trino_operands"


def annotate(tree: exp.Expr, columns: Columns | None = None) -> None:
    """Note each node's numeric type (and its operands') in its meta, for after rewrites.

    ``columns``: the stored columns' Hive types of the tables the query reads, by
    (catalog, database, table); a column reference that names one of them plainly
    is typed by it.
    """
    _tag_columns(tree, columns or {})
    for node in tree.walk():
        node.meta[TYPE_KEY] = numeric_type(node)
        if isinstance(node, exp.Cast):
            node.meta[CAST_FROM_KEY] = (numeric_type(node.this), floating(node.this))
        if isinstance(node, exp.Binary):
            node.meta[OPERANDS_KEY] = (numeric_type(node.left), numeric_type(node.right))
            node.meta[FLOATING_KEY] = floating(node)


def typed(node: exp.Expr) -> Numeric | None:
    """A node's type as ``annotate`` found it; None for nodes rewrites have made."""
    found = node.meta.get(TYPE_KEY)
    return found if isinstance(found, Numeric) else None


def is_floating(node: exp.Expr) -> bool:
    """Whether ``annotate`` found a binary operator to work on a double or real."""
    return node.meta.get(FLOATING_KEY) is True


def cast_from(cast: exp.Cast) -> tuple[Numeric | None, bool]:
    """The exact numeric type of a cast's value, and whether it is a double or a real,
    as ``annotate`` found them (before rewrites made the value a macro's call)."""
    found = cast.meta.get(CAST_FROM_KEY)
    if isinstance(found, tuple):
        return found
    return numeric_type(cast.this), floating(cast.this)


def operands(node: exp.Expr) -> tuple[Numeric | None, Numeric | None]:
    """The types ``annotate`` found for a binary operator's two operands."""
    found = node.meta.get(OPERANDS_KEY)
    return found if isinstance(found, tuple) else (None, None)
