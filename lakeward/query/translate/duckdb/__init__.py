"""Athena's (Trino's) semantics on DuckDB: the translation of a checked query.

sqlglot turns Trino SQL into DuckDB SQL function by function, but where the two
engines name the same thing and mean something else (``7 / 2`` is 3 in Trino
and 3.5 in DuckDB) the text alone is not enough. Each area module below adds:

- ``MACROS``: DuckDB ``CREATE MACRO`` statements, run once on every pooled
  connection when it opens (``engines/pool.py``). DuckDB chooses among a
  macro's typed overloads when it binds a query, so a macro can do what the
  operand types call for without the translation knowing them.
- ``REWRITES``: sqlglot node transforms applied to the Trino tree before the
  DuckDB text is generated, each over the whole tree in turn, children before
  their parent (a node that does not apply is returned unchanged); one may
  raise InvalidRequest naming what it cannot translate. The exact numeric
  types of the original nodes (``numbers.typed``) are noted before any runs.
- ``FUNCTIONS`` (where an area has them): Python functions registered on every
  pooled connection beside the macros, for what DuckDB has no SQL for (CRC-32).
- ``REFUSED``: Trino functions (lower-case) that DuckDB cannot answer as Trino
  would, each with the reason; a query calling one is refused before it runs.

The conformance suite (tests/query/conformance) holds the answers these must give.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from types import ModuleType
from typing import Any

from sqlglot import exp

from lakeward.errors import InvalidRequest
from lakeward.query.translate.duckdb import (
    aggregates,
    analytic,
    arithmetic,
    arrays,
    casts,
    dates,
    hashing,
    json_functions,
    lambdas,
    maps_rows,
    numbers,
    regexp,
    strings,
    typeof,
    unnest,
    urls,
)
from lakeward.query.translate.duckdb.templates import FAILURE_MARK

Rewrite = Callable[[exp.Expr], exp.Expr]

AREAS: tuple[ModuleType, ...] = (
    typeof,  # first: it reads the Trino tree as written
    arithmetic,
    strings,
    regexp,
    hashing,
    json_functions,
    urls,
    casts,
    dates,
    arrays,
    maps_rows,
    lambdas,
    analytic,
    aggregates,
    unnest,
)

MACROS: list[str] = [m for area in AREAS for m in area.MACROS]
REWRITES: list[Rewrite] = [r for area in AREAS for r in area.REWRITES]
REFUSED: dict[str, str] = {k: v for area in AREAS for k, v in area.REFUSED.items()}
FUNCTIONS: list[tuple[str, Callable[..., Any], list[str], str]] = [
    f for area in AREAS for f in getattr(area, "FUNCTIONS", [])
]


def function_name(node: exp.Expr) -> str | None:
    """The lower-case Trino name of a function call node; None for anything else."""
    if isinstance(node, (exp.Anonymous, exp.AnonymousAggFunc)):
        return str(node.name).lower()
    if isinstance(node, exp.Func):
        return str(node.sql_name()).lower()
    return None


def check(tree: exp.Expr) -> None:
    """Refuse a query calling a function DuckDB cannot answer as Athena would."""
    for node in tree.walk():
        name = function_name(node)
        if name is not None and name in REFUSED:
            raise InvalidRequest(f"function {name} is not supported: {REFUSED[name]}")


def to_duckdb(tree: exp.Expr, columns: numbers.Columns | None = None) -> exp.Expr:
    """The Trino tree (a copy the caller owns) rewritten for DuckDB; refusals raise."""
    check(tree)
    numbers.annotate(tree, columns)
    # Checked before it is queued, a query's stored columns are not known yet.
    tree.meta[numbers.COLUMNS_KNOWN_KEY] = columns is not None
    for rewrite in REWRITES:
        tree = _children_first(tree, rewrite)
    name_columns(tree)
    _check_tries(tree)
    return tree


_REFUSAL = f"{FAILURE_MARK}NOT_SUPPORTED"


def _macro_bodies() -> dict[str, str]:
    bodies: dict[str, str] = {}
    for macro in MACROS:
        found = re.match(r"CREATE MACRO (\w+)", macro)
        if found:  # a name's overloads, one text
            bodies[found.group(1)] = bodies.get(found.group(1), "") + macro
    return bodies


_BODIES = _macro_bodies()


def _callers(names: set[str]) -> set[str]:
    """The macros that call one of ``names``, directly or through another macro."""
    found = set(names)
    while True:
        calling = {
            name
            for name, body in _BODIES.items()
            if name not in found and any(re.search(rf"\b{n}\s*\(", body, re.I) for n in found)
        }
        if not calling:
            return found - names
        found |= calling


def _macros_that_may_refuse() -> frozenset[str]:
    """The macros that refuse, when a value shows it, what they cannot answer as Trino."""
    refusing = {name for name, body in _BODIES.items() if "is not supported" in body}
    return frozenset(refusing | _callers(refusing))  # and those that call one of them


_MAY_REFUSE = _macros_that_may_refuse()


@functools.cache
def macro_users(function: str) -> frozenset[str]:
    """The Trino functions whose macro (``trino_<name>``) calls DuckDB's ``function``,
    directly or through other macros: a DuckDB error about it is about one of them."""
    return frozenset(
        name.removeprefix("trino_") for name in _callers({function.lower()})
        if name.startswith("trino_")
    )  # fmt: skip


def _check_tries(tree: exp.Expr) -> None:
    """Refuse TRY around a failure that stands for "not supported".

    Such a refusal is raised when the query runs, as an error that TRY would turn
    into NULL: a NULL where Athena gives a value.
    """
    for attempt in tree.find_all(exp.Try):
        for node in attempt.walk():
            refuses = (isinstance(node, exp.Literal) and _REFUSAL in str(node.this)) or (
                isinstance(node, exp.Anonymous) and str(node.name).lower() in _MAY_REFUSE
            )
            if refuses:
                raise InvalidRequest(
                    "TRY is not supported around an expression that the DuckDB engine can only "
                    "check when it runs (such as a division or round of values whose types the "
                    "query does not show): TRY would turn that refusal into NULL; CAST the "
                    "values to their types first"
                )


def name_columns(tree: exp.Expr) -> None:
    """Name the result's unnamed columns as Trino does: ``_col<position>``, from 0.

    A column reference keeps its name; anything else without an alias would be
    named by the engine after its text.
    """
    while isinstance(tree, (exp.Subquery, exp.SetOperation)):
        tree = tree.this if isinstance(tree, exp.Subquery) else tree.left
    if not isinstance(tree, exp.Select):
        return
    for position, projection in enumerate(list(tree.expressions)):
        if not isinstance(projection, (exp.Alias, exp.Column, exp.Star)):
            projection.replace(exp.alias_(projection.copy(), f"_col{position}"))


def _children_first(node: exp.Expr, rewrite: Rewrite) -> exp.Expr:
    for child in list(node.iter_expressions()):
        # Where the child sits, before a rewrite makes it the child of its replacement.
        arg_key, index = child.arg_key, child.index
        new = _children_first(child, rewrite)
        if new is not child and arg_key is not None:
            node.set(arg_key, new, index)
    return rewrite(node)
