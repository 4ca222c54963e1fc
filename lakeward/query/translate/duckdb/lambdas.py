"""Trino's lambda functions over arrays on DuckDB's list functions.

``reduce`` folds with an initial state and then applies its output function to
the state (DuckDB's ``list_reduce`` has no output function: it is applied here);
``zip_with`` pads the shorter array with NULLs; ``any_match``, ``all_match`` and
``none_match`` answer NULL when the NULL results of the predicate leave the
answer open, as Trino does.
"""

from __future__ import annotations

from sqlglot import exp

from lakeward.errors import InvalidRequest
from lakeward.query.translate.duckdb.calls import call, lambda_parts, make_lambda, substitute

_HAS_NULL = "list_position(b, NULL) IS NOT NULL"

# Over the list of the predicate's results for each element.
MACROS: list[str] = [
    "CREATE MACRO trino_any_match(b) AS CASE WHEN b IS NULL THEN NULL"
    f" WHEN list_contains(b, true) THEN true WHEN {_HAS_NULL} THEN NULL ELSE false END",
    "CREATE MACRO trino_all_match(b) AS CASE WHEN b IS NULL THEN NULL"
    f" WHEN list_contains(b, false) THEN false WHEN {_HAS_NULL} THEN NULL ELSE true END",
    "CREATE MACRO trino_none_match(b) AS CASE WHEN b IS NULL THEN NULL"
    f" WHEN list_contains(b, true) THEN false WHEN {_HAS_NULL} THEN NULL ELSE true END",
]

REFUSED: dict[str, str] = {}

_MATCHES = ("any_match", "all_match", "none_match")


def _reduce(node: exp.Reduce) -> exp.Expr:
    folded = call("list_reduce", node.this, node.args["merge"], node.args["initial"])
    finish = node.args.get("finish")
    if finish is None:
        return folded
    (state,), body = lambda_parts(finish, "reduce", 1)
    return substitute(body, {state: folded})


def _zip_with(node: exp.Anonymous) -> exp.Expr:
    left, right, function = node.expressions
    (x, y), body = lambda_parts(function, "zip_with", 2)
    pair = exp.column("z")
    body = substitute(
        body,
        {
            x: call("struct_extract_at", pair, exp.Literal.number(1)),
            y: call("struct_extract_at", pair, exp.Literal.number(2)),
        },
    )
    return call("list_transform", call("list_zip", left, right), make_lambda(["z"], body))


def _lambdas(node: exp.Expr) -> exp.Expr:
    if isinstance(node, exp.Reduce):
        return _reduce(node)
    if isinstance(node, exp.ArraySort) and node.expression is not None:
        raise InvalidRequest("array_sort with a comparison function is not supported on DuckDB")
    if isinstance(node, exp.Anonymous):
        name, args = node.name.lower(), node.expressions
        if name == "zip_with" and len(args) == 3:
            return _zip_with(node)
        if name in _MATCHES and len(args) == 2:
            return call(f"trino_{name}", call("list_transform", *args))
    return node


REWRITES = [_lambdas]
