"""What every statement beyond a query is: a ``Command``, run with a ``Context``.

A command checks its own permissions (``glue:*`` on the catalog's ARNs, through
``Context.authorize_table`` and ``authorize_database``; ``s3:*`` on the lake places it
writes) in ``run``, through ``Context.authorize``: a refusal fails the
execution, as Athena's do, and leaves the metastore and the lake unchanged.

The context gives a command what it may use, and no more: the catalogs, the planner (for
the SELECT a command reads), the lake's storage, the write journal, and the execution
with who started it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from lakeward.access import Authorizer
from lakeward.access.arns import glue_arns
from lakeward.config import Settings
from lakeward.errors import InvalidRequest
from lakeward.query.catalogs import Catalogs
from lakeward.query.catalogs.base import Catalog
from lakeward.query.engines.base import EngineResult
from lakeward.query.journal import Journal
from lakeward.query.model import ColumnInfo, QueryExecution, StatementType, TableRef, WorkGroup
from lakeward.query.planner import Plan, Planner, Run
from lakeward.query.prepared import PreparedStatements
from lakeward.query.sql.names import Names
from lakeward.query.sql.queries import Statement
from lakeward.query.sql.tokens import Cursor
from lakeward.storage import Storage


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
    """What a command runs with."""

    settings: Settings
    access: Authorizer
    catalogs: Catalogs
    planner: Planner
    storage: Storage
    journal: Journal
    run_: Run
    prepared: PreparedStatements | None = None  # the service's (PREPARE, DEALLOCATE)

    @property
    def execution(self) -> QueryExecution:
        return self.run_.execution

    @property
    def principal(self) -> str:
        return self.run_.principal

    @property
    def group(self) -> WorkGroup:
        return self.run_.group

    def cancelled(self) -> bool:
        return self.run_.cancelled.is_set()

    def authorize(self, action: str, resource: str) -> Any:
        return self.access.authorize(action, resource, principal=self.principal)

    def authorize_database(self, action: str, catalog: str, database: str) -> None:
        """``action`` on a database as Glue checks it: on the catalog and the database."""
        for arn in glue_arns(catalog, database):
            self.authorize(action, arn)

    def authorize_table(self, actions: Sequence[str], ref: TableRef) -> None:
        """Each action on a table as Glue checks it: on the catalog, database and table."""
        for action in actions:
            for arn in glue_arns(ref.catalog, ref.database, ref.table):
                self.authorize(action, arn)

    def catalog(self, name: str) -> Catalog:
        return self.catalogs.catalog(name)

    def prepared_statements(self) -> PreparedStatements:
        if self.prepared is None:
            raise InvalidRequest("prepared statements are kept by the SQL service only")
        return self.prepared

    def plan(self, select: Statement) -> Plan:
        return self.planner.plan(self.run_, select)


Parser = Callable[[str, Cursor, Names], Command]
"""Parses one statement: its text, a cursor at its first token, and the name resolver."""


def lines(name: str, values: list[str], *, sized: bool = False, hive: bool = False) -> EngineResult:
    """A one-column result, one row per value: what every SHOW answers.

    ``hive``: one of the statements Athena answers from its Hive DDL engine (SHOW COLUMNS,
    TABLES, DATABASES, PARTITIONS, CREATE TABLE, DESCRIBE), whose column is a ``string``.
    ``sized``: the column described as Trino describes an unbounded varchar (the views'
    statements have always answered so); otherwise a plain ``varchar``."""
    table = pa.table({name: pa.array(values, pa.string())})
    column = ColumnInfo(name=name, type="string" if hive else "varchar")
    if sized:
        column = ColumnInfo(name=name, type="varchar", precision=2147483647, case_sensitive=True)
    return EngineResult([column], iter(table.to_batches()))


def no_rows() -> EngineResult:
    """What Athena returns for DDL: a result with no columns and no rows."""
    return EngineResult([], iter(()))
