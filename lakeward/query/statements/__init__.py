"""Statements beyond queries: DDL, views and writes, each a ``Command`` run by the service.

``sql.parse_statement`` answers SELECT, SHOW/DESCRIBE of tables and EXPLAIN itself; any
statement whose leading words one of ``PARSERS`` claims (the longest claim wins) is parsed
by that module into a ``Command``, carried by the ``Statement`` (kind ``"command"``) and
run by the query service on a worker like a query: its result is written to the lake
and a failure fails the execution with the command's message.

A command checks its own permissions (``glue:*`` on the catalog's ARNs, ``s3:*`` on the
lake places it writes) in ``run``, through ``Context.authorize``: a refusal fails the
execution, as Athena's do, and leaves the metastore and the lake unchanged.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lakeward.query.model import StatementType, TableRef

if TYPE_CHECKING:
    from lakeward.query.engines.base import EngineResult
    from lakeward.query.model import QueryExecution, WorkGroup
    from lakeward.query.service import QueryService
    from lakeward.query.sql import Cursor, Names


class Command(ABC):
    """One parsed statement; ``run`` does it and returns what Athena shows as its result."""

    statement_type: StatementType = StatementType.DDL
    substatement_type: str | None = None  # Athena's SubstatementType, where lakeward gives it

    def tables_read(self) -> tuple[TableRef, ...]:
        """Tables whose data the command reads (a CTAS's or INSERT's SELECT)."""
        return ()

    def catalogs(self) -> set[str]:
        """Every catalog the command names (each needs ``lakeward:UseCatalog``)."""
        return {t.catalog for t in self.tables_read()}

    def check(self, engine: str) -> None:  # noqa: B027 - most commands run on any engine
        """Refuse, when the statement is started, what ``engine`` cannot do."""

    @abstractmethod
    def run(self, context: Context) -> EngineResult:
        """Do it; raise a LakewardError with a message for the user on failure."""


@dataclass
class Context:
    """What a command runs with: the service, the execution and who started it."""

    service: QueryService
    execution: QueryExecution
    principal: str
    group: WorkGroup
    cancelled: Callable[[], bool]

    def authorize(self, action: str, resource: str) -> Any:
        return self.service.access.authorize(action, resource, principal=self.principal)


Parser = Callable[[str, "Cursor", "Names"], Command]
"""Parses one statement: its text, a cursor at its first token, and the name resolver."""

PARSERS: dict[tuple[str, ...], Parser] = {}
"""Leading words (upper-cased keywords) -> the parser of statements that start so."""


def claims(*words: str) -> Callable[[Parser], Parser]:
    """Register a parser for statements starting with ``words``."""

    def register(parser: Parser) -> Parser:
        PARSERS[tuple(w.upper() for w in words)] = parser
        return parser

    return register


def parser_for(words: list[str]) -> Parser | None:
    """The parser of the longest claim that ``words`` (the first keywords) start with."""
    best: tuple[str, ...] = ()
    found = None
    for claim, parser in PARSERS.items():
        if len(claim) > len(best) and tuple(words[: len(claim)]) == claim:
            best, found = claim, parser
    return found


def load() -> None:
    """Import the modules that register parsers (kept here: one list of statement modules)."""
    # Each module below registers its parsers with @claims when imported.
    from lakeward.query.statements import (  # noqa: F401
        catalog,  # CREATE/DROP DATABASE, CREATE EXTERNAL TABLE, ALTER/DROP TABLE, MSCK, SHOW ...
        views,  # CREATE [OR REPLACE] VIEW, DROP VIEW, SHOW VIEWS
        writes,  # CREATE TABLE AS, INSERT INTO, UNLOAD
    )
