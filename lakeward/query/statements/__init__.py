"""Which statement a text is, and the command that runs it.

``parse_statement`` reads one statement: a query (SELECT, WITH, VALUES) or EXPLAIN of one
is a ``Statement`` (``lakeward.query.sql.queries``), which the planner readies for an
engine; any other statement is parsed, by the parser of the longest entry of ``PARSERS``
its leading words match, into a ``Command`` (``base.py``), which the service runs on a
worker like a query: its result is written to the lake and a failure fails the execution
with the command's message.

``PARSERS`` is the one table of statements: each module's parsers are listed here, so
which parser reads a statement never depends on the order modules were imported in.
"""

from __future__ import annotations

import difflib
import threading
from collections import OrderedDict
from collections.abc import Collection

from sqlglot.tokenizer_core import TokenType

from lakeward.errors import InvalidRequest
from lakeward.query.sql.names import Names
from lakeward.query.sql.queries import Statement, parse_explain, parse_query
from lakeward.query.sql.tokens import QUERY_STARTS, Cursor, one_statement
from lakeward.query.statements import prepared, show
from lakeward.query.statements.base import Command, Parser
from lakeward.query.statements.ddl import databases, maintenance, partitions, tables
from lakeward.query.statements.views import commands as views
from lakeward.query.statements.writes import merge, rows
from lakeward.query.statements.writes import parsing as writes
from lakeward.query.translate.duckdb.dates import refuse_ambiguous_formats

PARSERS: dict[tuple[str, ...], Parser] = {
    ("CREATE", "DATABASE"): databases.parse_create_database,
    ("CREATE", "SCHEMA"): databases.parse_create_database,
    ("DROP", "DATABASE"): databases.parse_drop_database,
    ("DROP", "SCHEMA"): databases.parse_drop_database,
    ("CREATE", "EXTERNAL", "TABLE"): tables.parse_create_external_table,
    ("CREATE", "TABLE"): writes.parse_create_table,  # CTAS; without AS, tables' refusal
    ("DROP", "TABLE"): tables.parse_drop_table,
    ("ALTER", "TABLE"): partitions.parse_alter_table,
    ("MSCK",): partitions.parse_msck,
    ("CREATE", "VIEW"): views.parse_create_view,
    ("CREATE", "OR", "REPLACE", "VIEW"): views.parse_create_or_replace_view,
    ("CREATE", "PROTECTED"): views.parse_create_protected,
    ("DROP", "VIEW"): views.parse_drop_view,
    ("INSERT", "INTO"): writes.parse_insert,
    ("DELETE", "FROM"): rows.parse_delete,
    ("UPDATE",): rows.parse_update,
    ("MERGE", "INTO"): merge.parse_merge,
    ("OPTIMIZE",): maintenance.parse_optimize,
    ("VACUUM",): maintenance.parse_vacuum,
    ("UNLOAD",): writes.parse_unload,
    ("SHOW",): show.parse_show,
    ("SHOW", "VIEWS"): show.parse_show_views,
    ("SHOW", "CREATE", "VIEW"): show.parse_show_create_view,
    ("SHOW", "CREATE", "TABLE"): show.parse_show_create_table,
    ("SHOW", "PARTITIONS"): show.parse_show_partitions,
    ("DESCRIBE",): show.parse_describe,
    ("DESC",): show.parse_describe,
    ("PREPARE",): prepared.parse_prepare,
    ("DEALLOCATE", "PREPARE"): prepared.parse_deallocate,
    ("DEALLOCATE PREPARE",): prepared.parse_deallocate,  # sqlglot's one token for the two
}
"""Leading words (upper-cased keywords) -> the parser of statements that start so."""

STATEMENT_WORDS = frozenset(
    [
        *("ALTER", "ANALYZE", "CALL", "COMMENT", "COMMIT", "CREATE", "DEALLOCATE", "DELETE"),
        *("DENY", "DESC", "DESCRIBE", "DROP", "EXECUTE", "EXPLAIN", "GRANT", "INSERT", "MERGE"),
        *("MSCK", "OPTIMIZE", "PREPARE", "REFRESH", "RESET", "REVOKE", "ROLLBACK", "SELECT"),
        *("SET", "SHOW", "START", "TABLE", "TRUNCATE", "UNLOAD", "UPDATE", "USE", "VACUUM"),
        *("VALUES", "WITH"),
        # Other engines' statements (DuckDB's, Spark's): refused by name, not taken for typos.
        *("ATTACH", "DETACH", "COPY", "EXPORT", "IMPORT", "INSTALL", "LOAD", "PRAGMA"),
        *("CHECKPOINT", "SUMMARIZE", "PIVOT", "UNPIVOT", "FROM", "CACHE", "UNCACHE", "REPAIR"),
    ]
)
"""The words a statement starts with, in Trino, Athena's Hive DDL or other engines: another
first word is a syntax error; one of these that lakeward does not run is refused by name."""

STATEMENTS = (
    "queries (SELECT, WITH, VALUES), EXPLAIN, SHOW, DESCRIBE, CREATE/DROP DATABASE, "
    "CREATE EXTERNAL TABLE, CREATE TABLE AS, ALTER TABLE, DROP TABLE, MSCK REPAIR TABLE, "
    "CREATE/DROP VIEW, INSERT INTO, DELETE, UPDATE, MERGE, OPTIMIZE and VACUUM (Iceberg "
    "tables), UNLOAD, PREPARE, EXECUTE and DEALLOCATE PREPARE"
)


# Queries parsed lately, by text and names: dashboards and tools send the same ones again
# and again. A query's tree is shared: whoever changes one changes a copy (the planner,
# the translation and the views all copy before they rewrite).
_QUERIES_KEPT = 512
_queries: OrderedDict[tuple[str, Names], Statement] = OrderedDict()
_queries_lock = threading.Lock()


def parse_statement(
    sql: str, *, default_catalog: str, default_database: str, catalogs: Collection[str]
) -> Statement | Command:
    """Parse and check one statement; raise InvalidRequest for anything not allowed."""
    names = Names(
        default_catalog.lower(), default_database.lower(), frozenset(c.lower() for c in catalogs)
    )
    with _queries_lock:
        known = _queries.get((sql, names))
    if known is not None:
        return known
    statement = _parse_statement(sql, names, default_catalog, default_database, catalogs)
    if isinstance(statement, Statement):  # a command is mutable, and rarely sent twice
        with _queries_lock:
            _queries[(sql, names)] = statement
            while len(_queries) > _QUERIES_KEPT:
                _queries.popitem(last=False)
    return statement


def _parse_statement(
    sql: str, names: Names, default_catalog: str, default_database: str, catalogs: Collection[str]
) -> Statement | Command:
    cursor = Cursor(one_statement(sql), sql)
    refuse_ambiguous_formats(
        [t.text for t in cursor.tokens if t.token_type == TokenType.VAR],
        [t.text for t in cursor.tokens if t.token_type == TokenType.STRING],
    )
    parser = parser_for(cursor.keywords())
    if parser is not None:
        command = parser(sql, cursor, names)
        if isinstance(command, prepared.Prepare):  # the statement it prepares, checked now
            parse_statement(
                prepared.checkable(command.text),
                default_catalog=default_catalog,
                default_database=default_database,
                catalogs=catalogs,
            )
        return command
    first = cursor.peek()
    if first in QUERY_STARTS:
        return parse_query(sql, names)
    if first == "EXPLAIN":
        return parse_explain(sql, cursor, names)
    if not first:
        raise InvalidRequest(f"a statement must start with a keyword; lakeward runs {STATEMENTS}")
    if first not in STATEMENT_WORDS:
        raise InvalidRequest(_mismatched(sql, cursor.tokens[0].start, cursor.tokens[0].text))
    raise InvalidRequest(f"{first} statements are not allowed: lakeward runs {STATEMENTS}")


def substatement_type(statement: Statement | Command) -> str | None:
    """Athena's SubstatementType of a parsed statement."""
    if isinstance(statement, Command):
        return statement.substatement_type
    return "SELECT" if statement.kind == "select" else None


def catalogs_used(statement: Statement | Command, default: str) -> set[str]:
    if isinstance(statement, Command):
        return {default, *statement.catalogs()}
    return {default, *(ref.catalog for ref in statement.target.tables)}


def _mismatched(sql: str, start: int, text: str) -> str:
    """A first word no statement starts with (a typo), as Trino's parser words it."""
    line = sql.count("\n", 0, start) + 1
    column = start - (sql.rfind("\n", 0, start) + 1) + 1
    guess = difflib.get_close_matches(text.upper(), sorted(STATEMENT_WORDS), n=1, cutoff=0.6)
    hint = f"; did you mean {guess[0]}?" if guess else ""
    return (
        f"line {line}:{column}: mismatched input '{text}'. Expecting: a statement "
        f"(SELECT, WITH, VALUES, INSERT, CREATE, ALTER, DROP, SHOW, DESCRIBE, EXPLAIN...){hint}"
    )


def parser_for(words: list[str]) -> Parser | None:
    """The parser of the longest entry that ``words`` (the first keywords) start with."""
    best: tuple[str, ...] = ()
    found = None
    for claim, parser in PARSERS.items():
        if len(claim) > len(best) and tuple(words[: len(claim)]) == claim:
            best, found = claim, parser
    return found


__all__ = ["PARSERS", "Command", "Statement", "parse_statement"]
