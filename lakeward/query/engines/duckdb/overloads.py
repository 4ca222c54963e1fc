"""The real fault behind DuckDB's "a macro has multiple overloads that match"."""

from __future__ import annotations

import re

import duckdb

_OVERLOADS = re.compile(r"Macro (trino_\w+)\(\) has multiple overloads")


def beneath_overloads(con: duckdb.DuckDBPyConnection, sql: str, message: str) -> str:
    """The real fault behind "a macro has multiple overloads that match".

    A macro with typed overloads (trino_sum) cannot pick one when its argument does not
    bind, a misspelled column say, and DuckDB then names the macro, not the column. The
    statement with DuckDB's own function in its place is bound (EXPLAIN runs nothing) to
    find what is really wrong; the message stays as it was if that binds."""
    found = _OVERLOADS.search(message)
    if found is None:
        return message
    macro = found.group(1)
    plain = re.sub(rf"\b{macro}\(", f"{macro.removeprefix('trino_')}(", sql, flags=re.IGNORECASE)
    try:
        con.sql(f"EXPLAIN {plain}").fetchall()
    except duckdb.Error as exc:
        return str(exc)
    return message
