"""UNNEST as Trino expands it.

Trino's UNNEST takes several arrays side by side (the shorter ones padded with
NULLs), expands a map into a key and a value column and an array of rows into
one column per field. DuckDB's takes one list and yields its elements as they
are. So an UNNEST that needs more becomes a subquery over DuckDB's UNNEST of the
arrays zipped together (maps as their entries), each output column a field of
the zipped element; DuckDB joins it laterally as Trino does.
"""

from __future__ import annotations

from sqlglot import exp

from lakeward.errors import InvalidRequest
from lakeward.query.translate.duckdb.calls import call, kind_of

MACROS: list[str] = []
REFUSED: dict[str, str] = {}

_ELEMENT, _ORDINAL, _SOURCE = "__element", "__ordinal", "__unnested"


def _field(value: exp.Expr, position: int) -> exp.Expr:
    return call("struct_extract_at", value, exp.Literal.number(position))


def _columns_of(kinds: list[str | None], count: int) -> list[exp.Expr]:
    """The expressions of the ``count`` output columns over the zipped element."""
    element = exp.column(_ELEMENT)
    if len(kinds) == 1:
        if count == 1:
            return [element]
        if count == 2 and kinds[0] is None:
            # A map's entries or an array of two-field rows: DuckDB needs to be told which.
            raise InvalidRequest(
                "UNNEST into two columns is supported for a map or an array of rows the query "
                "builds; for a map column write UNNEST(map_keys(m), map_values(m))"
            )
        return [_field(element, i + 1) for i in range(count)]  # a row's or an entry's fields
    widths = [2 if kind == "map" else 1 for kind in kinds]
    if sum(widths) != count:
        raise InvalidRequest(
            "UNNEST of several arguments is supported with one column per array and two per map"
        )
    columns: list[exp.Expr] = []
    for position, width in enumerate(widths, start=1):
        one = _field(element, position)
        columns.extend([one] if width == 1 else [_field(one, 1), _field(one, 2)])
    return columns


def _unnest(node: exp.Expr) -> exp.Expr:
    if not isinstance(node, exp.Unnest) or not isinstance(node.parent, exp.From | exp.Join):
        return node
    alias = node.args.get("alias")
    names = list(alias.columns) if isinstance(alias, exp.TableAlias) else []
    args = list(node.expressions)
    kinds = [kind_of(a) for a in args]  # before the arguments move into the new subquery
    simple = len(args) == 1 and kinds[0] != "map" and len(names) <= 1
    if simple or not names:
        return node
    sources = [
        call("map_entries", a) if k == "map" else a for a, k in zip(args, kinds, strict=True)
    ]
    zipped = sources[0] if len(sources) == 1 else call("list_zip", *sources)
    offset = node.args.get("offset")
    ordinal = offset if isinstance(offset, exp.Identifier) else None
    inner = exp.Unnest(
        expressions=[zipped],
        alias=exp.TableAlias(
            this=exp.to_identifier(_SOURCE), columns=[exp.to_identifier(_ELEMENT)]
        ),
        offset=exp.to_identifier(_ORDINAL) if ordinal is not None else None,
    )
    projections = [
        exp.alias_(value, name)
        for value, name in zip(_columns_of(kinds, len(names)), names, strict=True)
    ]
    if ordinal is not None:
        projections.append(exp.alias_(exp.column(_ORDINAL), ordinal))
    select = exp.select(*projections).from_(inner)
    return exp.Subquery(this=select, alias=exp.TableAlias(this=alias.this if alias else None))


REWRITES = [_unnest]
