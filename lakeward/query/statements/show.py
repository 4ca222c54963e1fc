"""SHOW CATALOGS, SHOW DATABASES|SCHEMAS, SHOW TABLES, SHOW COLUMNS and DESCRIBE: answered
from the catalogs, never by an engine.

Athena runs these on Hive, which quotes names with backticks; the token reader takes both
quotes. SHOW VIEWS and SHOW CREATE VIEW are the views' (``views``), SHOW CREATE TABLE and
SHOW PARTITIONS the tables' (``ddl``).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from lakeward.access.arns import catalog_arn
from lakeward.query.catalogs import matches
from lakeward.query.engines.base import EngineResult
from lakeward.query.model import ColumnInfo, StatementType, TableRef
from lakeward.query.sql.names import Names
from lakeward.query.sql.tokens import Cursor
from lakeward.query.statements.base import Command, Context
from lakeward.query.view_definitions import described


def lines(name: str, values: list[str], *, sized: bool = False) -> EngineResult:
    """A one-column varchar result, one row per value: what every SHOW answers.

    ``sized``: the column described as Trino describes an unbounded varchar (the views'
    statements have always answered so; the others keep their metadata as it was)."""
    table = pa.table({name: pa.array(values, pa.string())})
    column = ColumnInfo(name=name, type="varchar")
    if sized:
        column = ColumnInfo(name=name, type="varchar", precision=2147483647, case_sensitive=True)
    return EngineResult([column], iter(table.to_batches()))


def no_rows() -> EngineResult:
    """What Athena returns for DDL: a result with no columns and no rows."""
    return EngineResult([], iter(()))


def like(pattern: str | None, name: str) -> bool:
    """Trino's LIKE: % any characters, _ one character."""
    if not pattern:
        return True
    return matches(pattern.replace("%", "*").replace("_", "?"), name)


@dataclass
class ShowCatalogs(Command):
    like: str | None
    statement_type: StatementType = StatementType.UTILITY

    def run(self, context: Context) -> EngineResult:
        names = [c.name for c in context.catalogs.all()]
        return lines("catalog", sorted(n for n in names if matches(self.like, n)))


@dataclass
class ShowDatabases(Command):
    catalog: str
    like: str | None
    statement_type: StatementType = StatementType.UTILITY

    def catalogs(self) -> set[str]:
        return {self.catalog}

    def run(self, context: Context) -> EngineResult:
        allowed = context.access.allowed(
            "lakeward:UseCatalog", catalog_arn(self.catalog), principal=context.principal
        )
        names = context.catalog(self.catalog).databases() if allowed else []
        return lines("database_name", [n for n in names if like(self.like, n)])


@dataclass
class ShowTables(Command):
    catalog: str
    database: str
    like: str | None
    statement_type: StatementType = StatementType.UTILITY

    def catalogs(self) -> set[str]:
        return {self.catalog}

    def run(self, context: Context) -> EngineResult:
        names = context.catalog(self.catalog).tables(self.database)
        return lines("tab_name", sorted(n for n in names if like(self.like, n)))


@dataclass
class Describe(Command):
    """DESCRIBE (``columns_only``: SHOW COLUMNS) of a table or view."""

    table: TableRef
    columns_only: bool = False
    statement_type: StatementType = StatementType.UTILITY

    def catalogs(self) -> set[str]:
        return {self.table.catalog}

    def run(self, context: Context) -> EngineResult:
        ref = self.table
        context.authorize("lakeward:UseCatalog", catalog_arn(ref.catalog))
        info = described(context.catalog(ref.catalog).table(ref.database, ref.table))
        if self.columns_only:
            return lines("field", [c.name for c in [*info.columns, *info.partition_keys]])
        found = [f"{c.name}\t{c.type}\t{c.comment or ''}".rstrip() for c in info.columns]
        if info.partition_keys:
            found += ["", "# Partition Information", "# col_name\tdata_type\tcomment", ""]
            found += [
                f"{c.name}\t{c.type}\t{c.comment or ''}".rstrip() for c in info.partition_keys
            ]
        return lines("col_name", found)


def parse_describe(sql: str, cursor: Cursor, names: Names) -> Command:
    cursor.expect("DESCRIBE", "DESC")
    table = names.table(cursor.names(3))
    cursor.done()
    return Describe(table)


def parse_show(sql: str, cursor: Cursor, names: Names) -> Command:
    cursor.expect("SHOW")
    what = cursor.expect("CATALOGS", "DATABASES", "SCHEMAS", "TABLES", "COLUMNS")
    if what == "COLUMNS":
        cursor.expect("FROM", "IN")
        table = names.table(cursor.names(3))
        cursor.done()
        return Describe(table, columns_only=True)
    target: list[str] = []
    if what != "CATALOGS" and cursor.word("FROM", "IN"):
        target = cursor.names(2 if what == "TABLES" else 1)
    pattern = cursor.string() if cursor.word("LIKE") else None
    cursor.done()
    if what == "CATALOGS":
        return ShowCatalogs(pattern)
    if what != "TABLES":
        return ShowDatabases(names.catalog(target[0] if target else names.default_catalog), pattern)
    catalog, database = names.database(target or [names.default_database])
    return ShowTables(catalog, database, pattern)
