"""DuckDB expressions written as text with holes, filled with parts of a query."""

from __future__ import annotations

from functools import cache

import sqlglot
from sqlglot import exp


@cache
def _parsed(text: str) -> exp.Expr:
    return sqlglot.parse_one(text, read="duckdb")


def fill(text: str, **parts: exp.Expr) -> exp.Expr:
    """``text`` (DuckDB SQL) with each column named ``_name`` replaced by ``parts[name]``.

    A part used more than once is copied: a node belongs to one place in a tree.
    """
    tree = _parsed(text).copy()
    for column in list(tree.find_all(exp.Column)):
        name = column.name
        if not column.table and name.startswith("_") and name[1:] in parts:
            column.replace(parts[name[1:]].copy())
    return tree


# Marks a failure of the translation's own making in the engine's error message, so that
# the reason reported is the message itself (query/athena_errors.py).
FAILURE_MARK = "TRINO_ERROR "


def fail(message: str, as_type: str | None = None, code: str = "") -> str:
    """DuckDB SQL that fails with ``message`` (SQL text of a string) when evaluated.

    A cast of the message to a number, not DuckDB's error(): that one is volatile,
    and DuckDB refuses TRY(...) over anything volatile, while Trino's TRY turns
    exactly these failures into NULL. As a TINYINT it fits any numeric CASE
    without widening the other branches' type; ``as_type`` casts it further.
    ``code`` is Athena's error name: NOT_SUPPORTED for a refusal, else
    INVALID_FUNCTION_ARGUMENT unless given.
    """
    if not code:
        refused = "is not supported" in message
        code = "NOT_SUPPORTED" if refused else "INVALID_FUNCTION_ARGUMENT"
    failing = f"CAST('{FAILURE_MARK}{code}: ' || {message} AS TINYINT)"
    return f"CAST({failing} AS {as_type})" if as_type else failing
