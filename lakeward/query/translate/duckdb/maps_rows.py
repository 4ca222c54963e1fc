"""Maps and rows as Trino builds, reads and prints them.

A map's subscript fails on a missing key (``element_at`` gives NULL); two maps
are equal when they hold the same entries, in whatever order; ``map_filter``,
``transform_keys`` and ``transform_values`` take a lambda of key and value,
which DuckDB has no map functions for: they become list functions over the
map's entries. A row built without field names has the fields ``field0``,
``field1``, ... as Athena prints them (``{field0=1, field1=a}``).
"""

from __future__ import annotations

from sqlglot import exp

from lakeward.query.translate.duckdb.calls import (
    call,
    kind_of,
    lambda_parts,
    make_lambda,
    substitute,
)

MACROS: list[str] = [
    "CREATE MACRO trino_map_subscript(m, k) AS CASE"
    " WHEN NOT map_contains(m, k) THEN error('Key not present in map: ' || k) ELSE m[k] END",
    "CREATE MACRO trino_map_equal(a, b) AS list_sort(map_entries(a)) = list_sort(map_entries(b))",
]

REFUSED: dict[str, str] = {
    "map_zip_with": "not available on DuckDB",
    "multimap_from_entries": "not available on DuckDB",
    "multimap_agg": "not available on DuckDB",
}


_OVER_ENTRIES = ("map_filter", "transform_keys", "transform_values")


def _over_entries(node: exp.Anonymous, name: str) -> exp.Expr:
    """map_filter, transform_keys, transform_values as list functions over the entries."""
    source, function = node.expressions
    (key, value), body = lambda_parts(function, name, 2)
    entry = exp.column("e")
    fields: dict[str, exp.Expr] = {
        key: exp.Dot.build([entry, exp.to_identifier("key")]),
        value: exp.Dot.build([entry, exp.to_identifier("value")]),
    }
    body = substitute(body, fields)
    entries = call("map_entries", source)
    if name == "map_filter":
        kept = call("list_filter", entries, make_lambda(["e"], body))
        return call("map_from_entries", kept)
    new_key = body if name == "transform_keys" else fields[key]
    new_value = body if name == "transform_values" else fields[value]
    pair = exp.Struct(
        expressions=[
            exp.PropertyEQ(this=exp.to_identifier("key"), expression=new_key),
            exp.PropertyEQ(this=exp.to_identifier("value"), expression=new_value),
        ]
    )
    return call("map_from_entries", call("list_transform", entries, make_lambda(["e"], pair)))


def _anonymous_fields(node: exp.Struct) -> exp.Expr:
    names = [f"field{i}" for i in range(len(node.expressions))]
    return exp.Struct(
        expressions=[
            exp.PropertyEQ(this=exp.to_identifier(n), expression=e)
            for n, e in zip(names, node.expressions, strict=True)
        ]
    )


def _maps_rows(node: exp.Expr) -> exp.Expr:
    if isinstance(node, exp.Anonymous):
        name = node.name.lower()
        if name in _OVER_ENTRIES and len(node.expressions) == 2:
            return _over_entries(node, name)
        if name == "map_entries" and len(node.expressions) == 1:
            fields = exp.Struct(
                expressions=[
                    exp.PropertyEQ(
                        this=exp.to_identifier(f"field{i}"),
                        expression=exp.Dot.build([exp.column("e"), exp.to_identifier(part)]),
                    )
                    for i, part in enumerate(("key", "value"))
                ]
            )
            return call(
                "list_transform", call("map_entries", *node.expressions), make_lambda(["e"], fields)
            )
        return node
    if isinstance(node, exp.ArraySize) and kind_of(node.this) == "map":
        return exp.cast(call("cardinality", node.this), exp.DataType.build("BIGINT"))
    if isinstance(node, exp.EQ) and kind_of(node.left) == "map" and kind_of(node.right) == "map":
        return call("trino_map_equal", node.left, node.right)
    if isinstance(node, exp.Struct) and _unnamed(node):
        return _anonymous_fields(node)
    return node


def _unnamed(row: exp.Struct) -> bool:
    """A ROW(...) without field names, outside a CAST (which names its fields).

    A row inside rows and arrays that a CAST types (``CAST(ARRAY[ROW(ROW(1, 2))] AS
    ARRAY(ROW(p ROW(x, y))))``) is named by the CAST too, by position, as in Trino."""
    named = any(isinstance(e, exp.PropertyEQ | exp.Alias) for e in row.expressions)
    if not row.expressions or named:
        return False
    parent = row.parent
    while isinstance(parent, exp.Struct | exp.Array):
        parent = parent.parent
    return not isinstance(parent, exp.Cast)


REWRITES = [_maps_rows]
