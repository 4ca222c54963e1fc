"""Small builders shared by the area modules' rewrites."""

from __future__ import annotations

from sqlglot import exp

from lakeward.errors import InvalidRequest
from lakeward.query.translate.duckdb.numbers import COLUMN_KEY


def call(name: str, *args: exp.Expr) -> exp.Expr:
    """A call of the DuckDB function or macro ``name``."""
    return exp.Anonymous(this=name, expressions=list(args))


def literal_text(node: exp.Expr | None, function: str, what: str) -> str:
    """The text of a constant argument (a string literal or a keyword such as DAY)."""
    if isinstance(node, exp.Literal | exp.Var):
        return str(node.this)
    raise InvalidRequest(f"{function} is supported only with a constant {what}")


def lambda_parts(node: exp.Expr | None, function: str, count: int) -> tuple[list[str], exp.Expr]:
    """The parameter names and body of a lambda argument taking ``count`` parameters."""
    if not isinstance(node, exp.Lambda) or len(node.expressions) != count:
        raise InvalidRequest(f"{function} expects a lambda of {count} parameters")
    return [p.name for p in node.expressions], node.this


def substitute(body: exp.Expr, values: dict[str, exp.Expr]) -> exp.Expr:
    """``body`` with each unqualified column named in ``values`` replaced by its value."""

    def swap(node: exp.Expr) -> exp.Expr:
        # sqlglot reads a lambda's parameters in its body as bare identifiers.
        if isinstance(node, exp.Column) and not node.table and node.name in values:
            return values[node.name].copy()
        named = (exp.Column, exp.Dot, exp.PropertyEQ, exp.Alias, exp.TableAlias, exp.Lambda)
        bare = isinstance(node, exp.Identifier) and not isinstance(node.parent, named)
        if bare and node.name in values:
            return values[node.name].copy()
        return node

    return body.copy().transform(swap)


def make_lambda(names: list[str], body: exp.Expr) -> exp.Lambda:
    return exp.Lambda(this=body, expressions=[exp.to_identifier(n) for n in names])


# Calls known to give an array or a map whatever their arguments: subscripts on them
# can be checked as Trino checks them. A column's kind is not known here.
_ARRAYS = (
    exp.Array,
    exp.ArrayDistinct,
    exp.ArrayFilter,
    exp.ArraySlice,
    exp.ArraySort,
    exp.Flatten,
    exp.GenerateSeries,
    exp.MapKeys,
    exp.Split,
    exp.Transform,
)
_MAPS = (exp.Map, exp.VarMap, exp.MapFromEntries)
_ARRAY_CALLS = ("trino_sequence", "trino_array_distinct", "trino_repeat", "trino_slice")
_MAP_CALLS = ("map_concat", "map_filter", "transform_keys", "transform_values", "histogram")
_MAP_CALLS_ALSO = (
    "map_agg",
    "trino_map_agg",
    "trino_histogram",
    "map_from_entries",
    "multimap_agg",
)


_MAX_DEPTH = 8  # derived tables followed, at most


def kind_of(node: exp.Expr, depth: int = 0) -> str | None:
    """'array' or 'map' when the expression's text alone tells; None otherwise."""
    if isinstance(node, exp.Cast) and node.to.this in (exp.DType.ARRAY, exp.DType.MAP):
        return "array" if node.to.this == exp.DType.ARRAY else "map"
    if isinstance(node, _ARRAYS):
        return "array"
    if isinstance(node, _MAPS):
        return "map"
    if isinstance(node, exp.Anonymous):
        name = node.name.lower()
        if name in _ARRAY_CALLS:
            return "array"
        if name in _MAP_CALLS or name in _MAP_CALLS_ALSO:
            return "map"
    if isinstance(node, exp.Paren):
        return kind_of(node.this, depth)
    if isinstance(node, exp.Column):
        stored = node.meta.get(COLUMN_KEY)  # a stored column's Hive type (numbers.annotate)
        if isinstance(stored, str):
            head = stored.strip().lower()
            return (
                "array" if head.startswith("array<") else "map" if head.startswith("map<") else None
            )
        source = _derived_source(node)
        return kind_of(source, depth + 1) if source is not None and depth < _MAX_DEPTH else None
    return None


def _derived_source(column: exp.Column) -> exp.Expr | None:
    """What a column of a derived table (VALUES, a subquery, a CTE) stands for, if one says.

    Only the query the column is in is searched; a table's columns are not known here.
    """
    select = column.find_ancestor(exp.Select)
    if select is None:
        return None
    from_ = select.args.get("from_")
    sources = [from_.this] if isinstance(from_, exp.From) else []
    sources += [join.this for join in select.args.get("joins") or []]
    for source in sources:
        if column.table and column.table != source.alias_or_name:
            continue
        found = _output(source, column.name, select)
        if found is not None:
            return found
    return None


def _output(source: exp.Expr, name: str, select: exp.Select) -> exp.Expr | None:
    """The expression of output column ``name`` of a FROM source, when the text shows it."""
    if isinstance(source, exp.Table) and not source.args.get("db"):  # a CTE's name
        query = _cte(source.name, select)
    elif isinstance(source, exp.Subquery):
        query = source.this
    elif isinstance(source, exp.Values):
        alias = source.args.get("alias")
        names = [c.name for c in alias.columns] if isinstance(alias, exp.TableAlias) else []
        rows = source.expressions
        if name in names and rows and isinstance(rows[0], exp.Tuple):
            value: exp.Expr = rows[0].expressions[names.index(name)]
            return value
        return None
    else:
        return None
    if isinstance(query, exp.Select):
        for projection in query.expressions:
            if projection.alias_or_name == name:
                unaliased: exp.Expr = projection.unalias()
                return unaliased
    return None


def _cte(name: str, select: exp.Select) -> exp.Expr | None:
    node: exp.Expr | None = select
    while node is not None:
        with_ = node.args.get("with_")
        if isinstance(with_, exp.With):
            for cte in with_.expressions:
                if cte.alias == name:
                    defined: exp.Expr = cte.this
                    return defined
        node = node.parent
    return None
