"""PREPARE name FROM <statement> and DEALLOCATE PREPARE name (EXECUTE is bound when a query
starts: ``lakeward.query.prepared``)."""

from __future__ import annotations

from dataclasses import dataclass

from lakeward.access.arns import workgroup_arn
from lakeward.errors import InvalidRequest
from lakeward.query.engines.base import EngineResult
from lakeward.query.model import StatementType
from lakeward.query.prepared import PreparedStatement
from lakeward.query.sql.names import Names
from lakeward.query.sql.parameters import placeholders
from lakeward.query.sql.tokens import Cursor
from lakeward.query.statements.base import Command, Context, no_rows

MAX_NAME = 256


@dataclass
class Prepare(Command):
    name: str
    text: str
    statement_type = StatementType.UTILITY

    def run(self, context: Context) -> EngineResult:
        group = context.group.name
        context.authorize("athena:CreatePreparedStatement", workgroup_arn(group))
        context.prepared_statements().put(PreparedStatement(group, self.name, self.text))
        return no_rows()


@dataclass
class Deallocate(Command):
    name: str
    statement_type = StatementType.UTILITY

    def run(self, context: Context) -> EngineResult:
        group = context.group.name
        context.authorize("athena:DeletePreparedStatement", workgroup_arn(group))
        if not context.prepared_statements().delete(group, self.name):
            raise InvalidRequest(
                f"PreparedStatement {self.name} was not found in workGroup {group}"
            )
        return no_rows()


def _statement_name(cursor: Cursor) -> str:
    name = cursor.name()
    if len(name) > MAX_NAME:
        cursor.fail(f"a prepared statement's name is at most {MAX_NAME} characters")
    return name


def parse_prepare(sql: str, cursor: Cursor, names: Names) -> Command:
    """PREPARE name FROM statement (``parse_statement`` checks the statement, its ``?`` read
    as NULLs: ``checkable``)."""
    cursor.expect("PREPARE")
    name = _statement_name(cursor)
    cursor.expect("FROM")
    if cursor.pos >= len(cursor.tokens):
        cursor.fail("expected the statement to prepare")
    text = sql[cursor.tokens[cursor.pos].start :].strip().rstrip(";").strip()
    if text.split(None, 1)[0].upper() in ("PREPARE", "EXECUTE", "DEALLOCATE"):
        raise InvalidRequest("a prepared statement cannot be PREPARE, EXECUTE or DEALLOCATE")
    return Prepare(name, text)


def checkable(text: str) -> str:
    """A prepared statement's text with its ``?`` as NULLs: what checking it parses."""
    for hole in reversed(placeholders(text)):
        text = text[: hole.start] + "NULL" + text[hole.end + 1 :]
    return text


def parse_deallocate(sql: str, cursor: Cursor, names: Names) -> Command:
    if not cursor.word("DEALLOCATE PREPARE"):
        cursor.expect("DEALLOCATE")
        cursor.expect("PREPARE")
    name = _statement_name(cursor)
    if cursor.pos < len(cursor.tokens):
        cursor.fail("expected the end of the statement")
    return Deallocate(name)
