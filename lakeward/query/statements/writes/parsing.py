"""Parsing CREATE TABLE AS, INSERT INTO and UNLOAD into the commands that run them."""

from __future__ import annotations

import re
from typing import Any

from sqlglot.tokenizer_core import TokenType

from lakeward.errors import InvalidRequest
from lakeward.query.engines.writers import (
    compression_of,
)
from lakeward.query.sql.names import Names
from lakeward.query.sql.queries import Statement, parse_query, require_named_columns
from lakeward.query.sql.tokens import Cursor
from lakeward.query.statements.base import Command
from lakeward.query.statements.ddl.iceberg import parse_create_iceberg_table
from lakeward.query.statements.ddl.tables import refuse_plain_create_table
from lakeward.query.statements.writes.commands import CreateTableAs, InsertInto, Unload
from lakeward.query.statements.writes.iceberg import CreateIcebergTableAs
from lakeward.query.statements.writes.options import (
    CTAS_PROPERTIES,
    UNLOAD_PROPERTIES,
    WriteOptions,
    ctas_options,
    delimiter_of,
    partition_names,
    string_property,
    write_format,
)

# -- parsing ----------------------------------------------------------------------------------


def _properties(cursor: Cursor, known: tuple[str, ...], what: str) -> dict[str, Any]:
    """``( name = value, ... )``: values are strings, numbers, booleans or ARRAY['...', ...]."""
    found: dict[str, Any] = {}
    cursor.expect("(")
    while True:
        start = cursor.pos
        name = cursor.name()
        if name not in known:
            cursor.pos = start
            cursor.fail(f"unknown {what} property '{name}' (known: {', '.join(known)})")
        if name in found:
            cursor.pos = start
            cursor.fail(f"property '{name}' is given twice")
        cursor.expect("=")
        found[name] = _value(cursor)
        if cursor.expect(",", ")") == ")":
            return found


def _value(cursor: Cursor) -> Any:
    if cursor.word("TRUE"):
        return True
    if cursor.word("FALSE"):
        return False
    if cursor.word("ARRAY"):
        cursor.expect("[")
        items = []
        if not cursor.word("]"):
            while True:
                items.append(cursor.string())
                if cursor.expect(",", "]") == "]":
                    break
        return items
    if cursor.pos < len(cursor.tokens) and cursor.tokens[cursor.pos].token_type == TokenType.NUMBER:
        cursor.pos += 1
        return int(cursor.tokens[cursor.pos - 1].text)
    return cursor.string()


def _query(sql: str, cursor: Cursor, end: int, names: Names) -> Statement:
    """The SELECT (or VALUES) from the cursor up to token ``end`` (exclusive)."""
    if cursor.pos >= end:
        cursor.fail("expected a query")
    first, last = cursor.tokens[cursor.pos], cursor.tokens[end - 1]
    if first.text.upper() not in ("SELECT", "WITH", "VALUES", "("):
        cursor.fail("expected SELECT, WITH, VALUES or a parenthesised query")
    return parse_query(sql[first.start : last.end + 1], names)


def _data_tail(cursor: Cursor) -> tuple[int, bool]:
    """Where a CTAS's query ends, and whether ``WITH NO DATA`` ends the statement."""
    words = [t.text.upper() for t in cursor.tokens[-3:]]
    if words[-3:] == ["WITH", "NO", "DATA"]:
        return len(cursor.tokens) - 3, False
    if words[-2:] == ["WITH", "DATA"]:
        return len(cursor.tokens) - 2, True
    return len(cursor.tokens), True


def parse_create_table(sql: str, cursor: Cursor, names: Names) -> Command:
    start = cursor.pos
    cursor.expect("CREATE")
    cursor.expect("TABLE")
    if_not_exists = False
    if cursor.word("IF"):
        cursor.expect("NOT")
        cursor.expect("EXISTS")
        if_not_exists = True
    if _without_as(cursor):
        cursor.pos = start
        if re.search(r"\bTBLPROPERTIES\b", sql, re.IGNORECASE):
            return parse_create_iceberg_table(sql, cursor, names)
        return refuse_plain_create_table(sql, cursor, names)
    table = names.table(cursor.names(3))
    props = _properties(cursor, CTAS_PROPERTIES, "CREATE TABLE AS") if cursor.word("WITH") else {}
    cursor.expect("AS")
    end, with_data = _data_tail(cursor)
    select = _query(sql, cursor, end, names)
    require_named_columns(select)
    if str(props.get("table_type", "")).upper() == "ICEBERG":
        del props["table_type"]
        return CreateIcebergTableAs(table, select, props, with_data, if_not_exists)
    options = ctas_options(props)
    location = string_property(props, "external_location")
    _require_external(props.get("is_external", True))
    return CreateTableAs(table, select, options, location, with_data, if_not_exists)


def _require_external(value: object) -> None:
    """Athena's ``is_external``: true (its default) for every table but an Iceberg one."""
    if value is True:
        return
    if value is False:
        raise InvalidRequest(
            "is_external = false makes a managed table, which Athena creates only as an "
            "Iceberg table (table_type = 'ICEBERG'); lakeward's CTAS writes external tables"
        )
    raise InvalidRequest(f"property is_external must be true or false, not {value!r}")


def _without_as(cursor: Cursor) -> bool:
    """Whether the statement has no AS at its top level (a CREATE TABLE with columns)."""
    depth = 0
    for token in cursor.tokens[cursor.pos :]:
        if token.token_type in (TokenType.L_PAREN, TokenType.L_BRACKET):
            depth += 1
        elif token.token_type in (TokenType.R_PAREN, TokenType.R_BRACKET):
            depth -= 1
        elif depth == 0 and token.token_type == TokenType.ALIAS:
            return False
    return True


def parse_insert(sql: str, cursor: Cursor, names: Names) -> Command:
    cursor.expect("INSERT")
    cursor.expect("INTO")
    table = names.table(cursor.names(3))
    columns: tuple[str, ...] | None = None
    if cursor.peek() == "(" and not _starts_query(cursor, cursor.pos + 1):
        cursor.expect("(")
        listed = [cursor.name()]
        while cursor.expect(",", ")") == ",":
            listed.append(cursor.name())
        if len(set(listed)) != len(listed):
            raise InvalidRequest("INSERT INTO names a column twice")
        columns = tuple(listed)
    select = _query(sql, cursor, len(cursor.tokens), names)
    return InsertInto(table, select, columns)


def _starts_query(cursor: Cursor, index: int) -> bool:
    return index < len(cursor.tokens) and cursor.tokens[index].text.upper() in (
        "SELECT",
        "WITH",
        "VALUES",
        "(",
    )


def parse_unload(sql: str, cursor: Cursor, names: Names) -> Command:
    cursor.expect("UNLOAD")
    if cursor.peek() != "(":
        cursor.fail("expected ( and the query to unload")
    close = _matching(cursor, cursor.pos)
    cursor.expect("(")
    select = _query(sql, cursor, close, names)
    cursor.pos = close + 1
    cursor.expect("TO")
    location = cursor.string()
    props = _properties(cursor, UNLOAD_PROPERTIES, "UNLOAD") if cursor.word("WITH") else {}
    cursor.done()
    name = string_property(props, "format")
    if name is None:
        raise InvalidRequest("UNLOAD needs WITH (format = ...): PARQUET, ORC, JSON or TEXTFILE")
    table_format, kind = write_format(name)
    given = props.get("compression")
    if given is not None and not isinstance(given, str):
        raise InvalidRequest("compression must be a quoted string")
    options = WriteOptions(
        table_format,
        kind,
        compression_of(kind, given),
        partition_names(props),
        delimiter_of(props, kind),
    )
    return Unload(select, location, options)


def _matching(cursor: Cursor, index: int) -> int:
    depth = 0
    for i in range(index, len(cursor.tokens)):
        kind = cursor.tokens[i].token_type
        if kind == TokenType.L_PAREN:
            depth += 1
        elif kind == TokenType.R_PAREN:
            depth -= 1
            if depth == 0:
                return i
    cursor.fail("the query to unload has no closing )")
