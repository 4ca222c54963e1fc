"""The bounded string types of a query's result columns: ``varchar(10)``, ``char(3)``.

Athena reports a result column's length as its Trino type has it: a stored varchar(10)
column is ``varchar`` of precision 10, a string literal ``'abc'`` is varchar(3), a cast to
varchar(5) is 5. Neither engine keeps a string's length (DuckDB has one VARCHAR, Spark
reads varchar(n) as a string), so the length is taken from the query text, where the
text shows it, and put on the column the engine reports as an unbounded varchar.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace

from sqlglot import exp

from lakeward.metastore.tables import Column
from lakeward.query.model import ColumnInfo, TableRef
from lakeward.query.sql.queries import Statement
from lakeward.query.translate.duckdb import numbers
from lakeward.query.translate.duckdb.typeof import trino_type_name
from lakeward.query.types import AthenaType

_BOUNDED = re.compile(r"^(varchar|char)\((\d+)\)$")


def declared_string_types(
    statement: Statement, columns: Mapping[TableRef, Sequence[Column]]
) -> dict[int, AthenaType]:
    """The bounded string type of each result column whose type the query text shows,
    by position. Only a plain SELECT is typed (a set operation's columns take the
    common type of its branches, which is left to the engine)."""
    query = statement.target._ast
    if query is None or not isinstance(query, exp.Select):
        return {}
    bounded_columns = any(_BOUNDED.match(c.type) for cols in columns.values() for c in cols)
    if not bounded_columns and not any(_may_be_bounded(p) for p in query.selects):
        return {}  # the common case, decided without typing the query (a few % of a query)
    tree = query.copy()
    stored = {
        (r.catalog, r.database, r.table): {c.name.lower(): c.type for c in cols}
        for r, cols in columns.items()
    }
    numbers.annotate(tree, stored)
    found: dict[int, AthenaType] = {}
    for position, name in enumerate(_projected_types(tree, stored)):
        bounded = _BOUNDED.match(name or "")
        if bounded:
            found[position] = AthenaType(bounded.group(1), int(bounded.group(2)))
    return found


def _may_be_bounded(projection: exp.Expr) -> bool:
    """Whether a projection holds a string literal or a cast, which may type it bounded."""
    return any(
        (isinstance(node, exp.Literal) and node.is_string) or isinstance(node, exp.Cast)
        for node in projection.walk()
    )


def _projected_types(select: exp.Select, stored: numbers.Columns) -> list[str | None]:
    """Trino's type name of each result column, in order; None where the text hides it.
    A ``*`` over one stored table is its columns; any other ``*`` hides what follows it."""
    names: list[str | None] = []
    for projection in select.selects:
        if isinstance(projection, exp.Star) or (
            isinstance(projection, exp.Column) and isinstance(projection.this, exp.Star)
        ):
            expanded = _star_types(select, stored)
            if expanded is None:
                return names
            names.extend(expanded)
        else:
            names.append(trino_type_name(projection.unalias()))
    return names


def _star_types(select: exp.Select, stored: numbers.Columns) -> list[str | None] | None:
    source = select.args.get("from_")
    if source is None or select.args.get("joins"):
        return None
    table = source.this
    if not isinstance(table, exp.Table) or not table.args.get("catalog"):
        return None
    held = stored.get((table.catalog.lower(), table.db.lower(), table.name.lower()))
    if held is None:
        return None
    return [trino_type_name(_stored_column(name, kind)) for name, kind in held.items()]


def _stored_column(name: str, hive_type: str) -> exp.Column:
    column = exp.column(name)
    column.meta[numbers.COLUMN_KEY], column.meta[numbers.STORED_KEY] = hive_type, True
    return column


def with_string_types(
    columns: list[ColumnInfo], declared: Mapping[int, AthenaType]
) -> list[ColumnInfo]:
    """The engine's result columns, each unbounded varchar the query shows to be bounded
    given its bounded type."""
    if not declared:
        return columns
    out = []
    for position, column in enumerate(columns):
        bounded = declared.get(position)
        if bounded is not None and column.type == "varchar":
            column = replace(column, type=bounded.name, precision=bounded.precision)
        out.append(column)
    return out
