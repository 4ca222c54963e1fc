"""JSON functions as Trino defines them.

``json_extract_scalar`` is NULL for an object or an array; the array and size
functions are NULL for what is not an array (or object); casting text to JSON
makes a JSON string of it (``CAST('{"a":1}' AS json)`` is ``"{\\"a\\":1}"``,
``json_parse`` reads it), and casting JSON to varchar gives a scalar's value.
"""

from __future__ import annotations

from sqlglot import exp

from lakeward.query.translate.duckdb.templates import fail, fill

_CONTAINER = "('OBJECT', 'ARRAY')"

MACROS: list[str] = [
    f"CREATE MACRO trino_json_scalar(j, p) AS CASE WHEN json_type(j, p) IN {_CONTAINER} "
    "THEN NULL ELSE json_extract_string(j, p) END",
    "CREATE MACRO trino_json_array_length(j) AS "
    "CASE WHEN json_type(j) = 'ARRAY' THEN CAST(json_array_length(j) AS BIGINT) END",
    "CREATE MACRO trino_json_array_contains(j, v) AS CASE WHEN json_type(j) = 'ARRAY' THEN "
    "list_contains(list_transform(json_extract(j, '$[*]'), lambda e: CAST(e AS VARCHAR)), "
    "CAST(to_json(v) AS VARCHAR)) END",
    "CREATE MACRO trino_json_size(j, p) AS CAST(CASE json_type(j, p) "
    "WHEN 'ARRAY' THEN json_array_length(j, p) WHEN 'OBJECT' THEN len(json_keys(j, p)) "
    "WHEN NULL THEN NULL ELSE 0 END AS BIGINT)",
    f"CREATE MACRO trino_is_json_scalar(j) AS json_type(CAST(j AS JSON)) NOT IN {_CONTAINER}",
    f"CREATE MACRO trino_json_text(j) AS CASE WHEN json_type(j) IN {_CONTAINER} THEN "
    + fail(
        "'casting a JSON object or array to varchar is not possible: use json_format'", "VARCHAR"
    )
    + " ELSE json_extract_string(j, '$') END",
]

_RENAMED = {
    "json_array_length": "trino_json_array_length",
    "json_size": "trino_json_size",
    "is_json_scalar": "trino_is_json_scalar",
}


def json_functions(node: exp.Expr) -> exp.Expr:
    if isinstance(node, exp.JSONExtractScalar):
        return fill("trino_json_scalar(_j, _p)", j=node.this, p=node.expression)
    if isinstance(node, exp.JSONArrayContains):
        return fill("trino_json_array_contains(_j, _v)", j=node.this, v=node.expression)
    if isinstance(node, exp.Anonymous) and node.name.lower() in _RENAMED:
        return exp.Anonymous(this=_RENAMED[node.name.lower()], expressions=node.expressions)
    if isinstance(node, exp.Cast) and node.to.this == exp.DataType.Type.JSON:
        value = node.this
        if isinstance(value, exp.Literal) and value.is_string:
            return fill("to_json(_x)", x=value)
        return fill(
            "CASE WHEN typeof(_x) = 'VARCHAR' THEN to_json(TRY_CAST(_x AS VARCHAR)) "
            "ELSE CAST(_x AS JSON) END",
            x=value,
        )
    return node


REWRITES = [json_functions]
REFUSED: dict[str, str] = {}
