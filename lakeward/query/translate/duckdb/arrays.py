"""Arrays as Trino indexes, orders and types them.

Trino's arrays are 1-based like DuckDB's lists, but a subscript past the end is
an error (``element_at`` gives NULL instead, and counts negative indexes from the
end); ``array_distinct`` and the set functions keep the order in which elements
first occur; ``contains``, ``array_max`` and ``arrays_overlap`` answer NULL where
a NULL element leaves the answer unknown; ``sequence`` counts down when the start
is past the stop; ``slice`` takes a length, not an end. Each of these is a macro
over DuckDB's list functions. Whether a subscripted value is an array or a map
is known only from the expression's text (a column's is not known): the check
is added where it is.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp

from lakeward.errors import InvalidRequest
from lakeward.query.translate.duckdb.calls import call, kind_of

_HAS_NULL = "list_position({0}, NULL) IS NOT NULL"
_STEP_DIRECTION = (
    "sequence stop value should be greater than or equal to start value if step is greater "
    "than zero otherwise stop should be less than or equal to start"
)

MACROS: list[str] = [
    "CREATE MACRO trino_array_subscript(a, i) AS CASE"
    " WHEN i = 0 THEN error('SQL array indices start at 1')"
    " WHEN i < 0 THEN error('Array subscript is negative: ' || i)"
    " WHEN i > len(a) THEN error("
    "'Array subscript must be less than or equal to array length: ' || i || ' > ' || len(a))"
    " ELSE a[i] END",
    "CREATE MACRO trino_array_element_at(a, i) AS CASE"
    " WHEN i = 0 THEN error('SQL array indices start at 1') ELSE a[i] END",
    "CREATE MACRO trino_contains(a, x) AS CASE WHEN a IS NULL OR x IS NULL THEN NULL"
    f" WHEN list_contains(a, x) THEN true WHEN {_HAS_NULL.format('a')} THEN NULL ELSE false END",
    "CREATE MACRO trino_array_position(a, x) AS CASE WHEN a IS NULL OR x IS NULL THEN NULL"
    " ELSE CAST(coalesce(list_position(a, x), 0) AS BIGINT) END",
    # The n-th occurrence, counted from the end when n is negative; 0 when there is none.
    "CREATE MACRO trino_array_position_nth(a, x, n) AS CASE"
    " WHEN n = 0 THEN error('array_position cannot take a 0-valued instance argument')"
    " WHEN a IS NULL OR x IS NULL OR n IS NULL THEN NULL"
    " ELSE CAST(coalesce(list_filter(range(1, len(a) + 1), lambda i: a[i] = x)[n], 0) AS BIGINT)"
    " END",
    # The first occurrence of each element, NULL included, in order.
    "CREATE MACRO trino_array_distinct(a) AS list_filter(a, lambda e, i: list_position(a, e) = i)",
    "CREATE MACRO trino_array_union(a, b) AS trino_array_distinct(list_concat(a, b))",
    # Trino walks the longer array (the first when they are as long), keeping its order.
    "CREATE MACRO trino_array_intersect_in_order(a, b) AS"
    " list_filter(trino_array_distinct(a), lambda e: list_position(b, e) IS NOT NULL)",
    "CREATE MACRO trino_array_intersect(a, b) AS CASE WHEN len(a) < len(b)"
    " THEN trino_array_intersect_in_order(b, a) ELSE trino_array_intersect_in_order(a, b) END",
    # Trino gives the first array back as it is, repeats kept, when the second is empty.
    "CREATE MACRO trino_array_except(a, b) AS CASE WHEN len(b) = 0 THEN a"
    " ELSE list_filter(trino_array_distinct(a), lambda e: list_position(b, e) IS NULL) END",
    f"CREATE MACRO trino_array_max(a) AS CASE WHEN {_HAS_NULL.format('a')} THEN NULL"
    " ELSE list_max(a) END",
    f"CREATE MACRO trino_array_min(a) AS CASE WHEN {_HAS_NULL.format('a')} THEN NULL"
    " ELSE list_min(a) END",
    "CREATE MACRO trino_arrays_overlap(a, b) AS CASE WHEN a IS NULL OR b IS NULL THEN NULL"
    " WHEN len(a) = 0 OR len(b) = 0 THEN false WHEN list_has_any(a, b) THEN true"
    f" WHEN {_HAS_NULL.format('a')} OR {_HAS_NULL.format('b')} THEN NULL ELSE false END",
    "CREATE MACRO trino_slice(a, s, n) AS CASE"
    " WHEN s = 0 THEN error('SQL array indices start at 1')"
    " WHEN n < 0 THEN error('length must be greater than or equal to 0')"
    " WHEN s > 0 THEN list_slice(a, s, s + n - 1)"
    " WHEN len(a) + s < 0 THEN list_filter(a, lambda e: false)"
    " ELSE list_slice(a, len(a) + s + 1, len(a) + s + n) END",
    "CREATE MACRO trino_sequence_check(a, b, s) AS CASE"
    " WHEN s = 0 THEN error('step must not be zero')"
    f" WHEN (a < b AND s < 0) OR (a > b AND s > 0) THEN error('{_STEP_DIRECTION}')"
    " WHEN (b - a) // s >= 10000 THEN error("
    "'result of sequence function must not have more than 10000 entries')"
    " ELSE generate_series(a, b, s) END",
    "CREATE MACRO trino_interval_months(s) AS datepart('year', s) * 12 + datepart('month', s)",
    # Trino steps by months from the start each time (Jan 31, Feb 29, Mar 31), not cumulatively.
    "CREATE MACRO trino_sequence_months(a, b, m) AS CASE"
    " WHEN m = 0 THEN error('step must not be zero')"
    f" WHEN (m > 0 AND b < a) OR (m < 0 AND b > a) THEN error('{_STEP_DIRECTION}')"
    " WHEN date_sub('month', a, b) // m >= 10000 THEN error("
    "'result of sequence function must not have more than 10000 entries')"
    " ELSE list_transform(range(date_sub('month', a, b) // m + 1), lambda i: a + to_months(i * m))"
    " END",
    "CREATE MACRO trino_sequence_dates(a, b, s) AS CASE"
    " WHEN trino_interval_months(s) <> 0 THEN list_transform("
    "trino_sequence_months(a, b, trino_interval_months(s)), lambda d: CAST(d AS DATE))"
    " WHEN epoch(s) % 86400 <> 0 THEN error("
    "'sequence step must be a day interval if start and end values are dates')"
    " ELSE list_transform(trino_sequence_check(0, b - a, CAST(epoch(s) // 86400 AS BIGINT)),"
    " lambda i: a + CAST(i AS INTEGER)) END",
    "CREATE MACRO trino_sequence"
    "(a BIGINT, b BIGINT) AS trino_sequence_check(a, b, CASE WHEN a <= b THEN 1 ELSE -1 END),"
    " (a BIGINT, b BIGINT, s BIGINT) AS trino_sequence_check(a, b, s),"
    " (a DATE, b DATE) AS trino_sequence_dates(a, b, to_days(CASE WHEN a <= b THEN 1 ELSE -1 END)),"
    " (a DATE, b DATE, s INTERVAL) AS trino_sequence_dates(a, b, s),"
    " (a TIMESTAMP, b TIMESTAMP, s INTERVAL) AS CASE WHEN trino_interval_months(s) <> 0"
    " THEN trino_sequence_months(a, b, trino_interval_months(s))"
    " WHEN to_microseconds(0) = s THEN error('step must not be zero')"
    f" WHEN (s > to_microseconds(0) AND b < a) OR (s < to_microseconds(0) AND b > a)"
    f" THEN error('{_STEP_DIRECTION}')"
    " ELSE generate_series(a, b, s) END",
    "CREATE MACRO trino_repeat(x, n) AS CASE"
    " WHEN n < 0 THEN error('count argument of repeat function must be greater than or equal to 0')"
    " WHEN n > 10000 THEN error("
    "'count argument of repeat function must be less than or equal to 10000')"
    " ELSE list_transform(range(n), lambda i: x) END",
    # A random permutation: each element paired with a random key, sorted by it.
    "CREATE MACRO trino_shuffle(a) AS list_transform("
    "list_sort(list_transform(a, lambda e: {'k': random(), 'v': e})), lambda p: p.v)",
]

REFUSED: dict[str, str] = {
    "combinations": "not available on DuckDB",
    "ngrams": "not available on DuckDB",
    "array_histogram": "not available on DuckDB",
    "array_frequency": "not available on DuckDB",
    "trim_array": "not available on DuckDB",
}


def _arrays(node: exp.Expr) -> exp.Expr:
    if isinstance(node, exp.Bracket) and len(node.expressions) == 1:
        return _subscript(node)
    if isinstance(node, exp.ArrayContains):
        return call("trino_contains", node.this, node.expression)
    if isinstance(node, exp.ArrayPosition):
        instance = node.args.get("zero_based")  # sqlglot's name for Trino's third argument
        if instance is not None:
            return call("trino_array_position_nth", node.this, node.expression, instance)
        return call("trino_array_position", node.this, node.expression)
    if isinstance(node, exp.ArrayDistinct):
        return call("trino_array_distinct", node.this)
    if isinstance(node, exp.ArrayIntersect):
        if len(node.expressions) != 2:
            raise InvalidRequest("array_intersect takes two arrays")
        return call("trino_array_intersect", *node.expressions)
    if isinstance(node, exp.ArrayExcept):
        return call("trino_array_except", node.this, node.expression)
    if isinstance(node, exp.ArrayMax):
        return call("trino_array_max", node.this)
    if isinstance(node, exp.ArrayMin):
        return call("trino_array_min", node.this)
    if isinstance(node, exp.ArraySlice):
        return call("trino_slice", node.this, node.args["start"], node.args["end"])
    if isinstance(node, exp.GenerateSeries):
        args = [node.args[k] for k in ("start", "end", "step") if node.args.get(k)]
        return call("trino_sequence", *args)
    if isinstance(node, exp.Repeat):  # Trino's repeat makes an array
        return call("trino_repeat", node.this, node.args["times"])
    if isinstance(node, exp.Shuffle):
        return call("trino_shuffle", node.this)
    element = isinstance(node, exp.DPipe) and isinstance(node.expression, exp.Literal | exp.Null)
    if element and kind_of(node.this) == "array":  # array || element
        return call("list_append", node.this, node.expression)
    if isinstance(node, exp.Anonymous):
        return _named(node, node.name.lower())
    return node


def _index(node: exp.Bracket) -> exp.Expr:
    """The 1-based index DuckDB is given: sqlglot keeps literal subscripts 0-based."""
    generated = exp.Bracket(
        this=exp.column("a"), **{k: v for k, v in node.args.items() if k != "this"}
    )
    text = generated.sql("duckdb")
    return sqlglot.parse_one(text[text.index("[") + 1 : text.rindex("]")], read="duckdb")


def _subscript(node: exp.Bracket) -> exp.Expr:
    kind = kind_of(node.this)
    if kind is None:
        return node
    index = _index(node)
    if node.args.get("safe"):  # element_at
        if kind == "array":
            return call("trino_array_element_at", node.this, index)
        return node
    if kind == "array":
        return call("trino_array_subscript", node.this, index)
    if kind == "map":
        return call("trino_map_subscript", node.this, index)
    return node


def _named(node: exp.Anonymous, name: str) -> exp.Expr:
    args = node.expressions
    if name == "array_union" and len(args) == 2:
        return call("trino_array_union", *args)
    if name == "arrays_overlap" and len(args) == 2:
        return call("trino_arrays_overlap", *args)
    if name == "zip" and len(args) >= 2:
        zipped = exp.Lambda(
            this=exp.Struct(
                expressions=[
                    exp.PropertyEQ(
                        this=exp.to_identifier(f"field{i}"),
                        expression=call(
                            "struct_extract_at", exp.column("z"), exp.Literal.number(i + 1)
                        ),
                    )
                    for i in range(len(args))
                ]
            ),
            expressions=[exp.to_identifier("z")],
        )
        return call("list_transform", call("list_zip", *args), zipped)
    return node


REWRITES = [_arrays]
