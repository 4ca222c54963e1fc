"""Prepared statements: ``PREPARE name FROM ...``, ``EXECUTE name USING ...``, ``DEALLOCATE
PREPARE name``, and Athena's Create/Get/List/Update/DeletePreparedStatement calls.

A prepared statement belongs to a workgroup, as in Athena: its text keeps its ``?``
placeholders, and ``EXECUTE`` binds them in order (``USING`` values, or the execution's
``ExecutionParameters``), each value one SQL literal (``sql/parameters.py``). The
statements are kept in the SQL service's database, beside the executions.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Column, DateTime, MetaData, String, Table, Text, delete, select
from sqlalchemy.engine import Connection, Engine
from sqlglot.dialects.trino import Trino
from sqlglot.tokenizer_core import TokenType

from lakeward.access.arns import workgroup_arn
from lakeward.errors import InvalidRequest
from lakeward.query.sql.parameters import bind
from lakeward.sqlstate import migrate, writer

metadata = MetaData()
COMPONENT = "prepared_statements"

statements = Table(
    "prepared_statements",
    metadata,
    Column("workgroup", String(128), primary_key=True),
    Column("name", String(256), primary_key=True),
    Column("query", Text, nullable=False),
    Column("description", Text, nullable=False, default=""),
    Column("modified", DateTime(timezone=True), nullable=False),
)


@dataclass(frozen=True)
class PreparedStatement:
    workgroup: str
    name: str
    query: str
    description: str = ""
    modified: datetime | None = None


def _create_v1(conn: Connection) -> None:
    metadata.create_all(conn)


class PreparedStatements:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        migrate(engine, COMPONENT, [_create_v1], label="prepared statements")
        self._writer = writer(engine)

    def put(self, statement: PreparedStatement) -> None:
        """Create the statement, or replace the one of that name in its workgroup."""
        c = statements.c
        row = {
            "workgroup": statement.workgroup,
            "name": statement.name,
            "query": statement.query,
            "description": statement.description,
            "modified": datetime.now(UTC),
        }
        with self._writer.begin() as conn:
            where = (c.workgroup == statement.workgroup) & (c.name == statement.name)
            conn.execute(delete(statements).where(where))
            conn.execute(statements.insert().values(**row))

    def get(self, workgroup: str, name: str) -> PreparedStatement | None:
        c = statements.c
        query = select(statements).where(c.workgroup == workgroup, c.name == name)
        with self.engine.connect() as conn:
            row = conn.execute(query).mappings().first()
        return PreparedStatement(**row) if row else None

    def names(self, workgroup: str) -> list[tuple[str, datetime]]:
        c = statements.c
        query = select(c.name, c.modified).where(c.workgroup == workgroup).order_by(c.name)
        with self.engine.connect() as conn:
            return [(n, m) for n, m in conn.execute(query).all()]

    def delete(self, workgroup: str, name: str) -> bool:
        c = statements.c
        with self._writer.begin() as conn:
            gone = conn.execute(delete(statements).where(c.workgroup == workgroup, c.name == name))
        return bool(gone.rowcount)


_EXECUTE = re.compile(r"\s*EXECUTE\b(.*)", re.IGNORECASE | re.DOTALL)
_NAME_USING = re.compile(r"\s+(\"[^\"]+\"|[A-Za-z_][\w]*)\s*(?:USING\b(.*))?", re.DOTALL)


def execute_parts(query: str) -> tuple[str, list[str]] | None:
    """``EXECUTE name [USING v1, v2, ...]``: the name and the values as written; None when
    the text is not an EXECUTE. (Trino's tokenizer reads all after EXECUTE as one command
    string, so the name is read here and only the values are tokenized.)"""
    found = _EXECUTE.match(query)
    if found is None:
        return None
    rest = found.group(1).strip().rstrip(";")
    parts = _NAME_USING.fullmatch(" " + rest)
    if parts is None:
        raise InvalidRequest("EXECUTE must name a prepared statement: EXECUTE name USING ...")
    name, using = parts.group(1).strip('"'), parts.group(2)
    if using is None:
        return name, []
    if not using.strip():
        raise InvalidRequest("expected the values after EXECUTE name USING")
    tokens = Trino().tokenizer_class().tokenize(using)
    values, depth, start = [], 0, 0
    for token in tokens:
        if token.token_type in (TokenType.L_PAREN, TokenType.L_BRACKET):
            depth += 1
        elif token.token_type in (TokenType.R_PAREN, TokenType.R_BRACKET):
            depth -= 1
        elif token.token_type == TokenType.COMMA and depth == 0:
            values.append(using[start : token.start].strip())
            start = token.end + 1
    values.append(using[start:].strip())
    return name, values


def bound_statement(
    query: str,
    parameters: list[str] | None,
    prepared: PreparedStatements,
    workgroup: str,
    authorize: Callable[[str, str], object],
) -> str:
    """The statement to run: an EXECUTE's prepared statement with its values bound, or the
    query with its ExecutionParameters bound."""
    executed = execute_parts(query)
    if executed is None:
        return query if parameters is None else bind(query, parameters)
    name, values = executed
    if values and parameters:
        raise InvalidRequest("EXECUTE takes its values from USING or ExecutionParameters, not both")
    authorize("athena:GetPreparedStatement", workgroup_arn(workgroup))
    found = prepared.get(workgroup, name.lower())
    if found is None:
        raise InvalidRequest(f"PreparedStatement {name} was not found in workGroup {workgroup}")
    return bind(found.query, values or parameters or [])
