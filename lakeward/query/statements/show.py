"""SHOW CATALOGS, SHOW DATABASES|SCHEMAS, SHOW TABLES, SHOW COLUMNS and DESCRIBE, answered
from the catalogs, never by an engine;

Athena runs these on Hive, which quotes names with backticks; the token reader takes both
quotes. and SHOW VIEWS, SHOW CREATE VIEW, SHOW CREATE TABLE and SHOW PARTITIONS: every SHOW
is here, and answers one column of text (``base.lines``).
"""

from __future__ import annotations

from dataclasses import dataclass

from lakeward.access.arns import catalog_arn
from lakeward.errors import InvalidRequest, ResourceNotFound
from lakeward.iceberg.catalog import is_iceberg
from lakeward.query.catalogs import matches
from lakeward.query.engines.base import EngineResult
from lakeward.query.model import StatementType, TableRef
from lakeward.query.sql.names import Names
from lakeward.query.sql.tokens import Cursor
from lakeward.query.statements.base import Command, Context, lines
from lakeward.query.statements.ddl.common import TableCommand, refuse_view, table_ref
from lakeward.query.statements.ddl.iceberg import iceberg_create_statement
from lakeward.query.statements.ddl.parsing import Reader
from lakeward.query.statements.ddl.partitions import require_partitioned
from lakeward.query.statements.ddl.tables import create_statement
from lakeward.query.statements.views.commands import quoted_name
from lakeward.query.view_definitions import decode, described, is_view


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
        return lines("database_name", [n for n in names if like(self.like, n)], hive=True)


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
        return lines("tab_name", sorted(n for n in names if like(self.like, n)), hive=True)


_HIVE_ALIGNMENT = 20


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
            # Hive lays SHOW COLUMNS out as a column of its own: names padded to 20.
            names = [c.name.ljust(_HIVE_ALIGNMENT) for c in [*info.columns, *info.partition_keys]]
            return lines("field", names, hive=True)
        found = [f"{c.name}\t{c.type}\t{c.comment or ''}".rstrip() for c in info.columns]
        if info.partition_keys:
            found += ["", "# Partition Information", "# col_name\tdata_type\tcomment", ""]
            found += [
                f"{c.name}\t{c.type}\t{c.comment or ''}".rstrip() for c in info.partition_keys
            ]
        return lines("col_name", found, hive=True)


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


@dataclass
class ShowCreateTable(TableCommand):
    statement_type = StatementType.UTILITY

    def run(self, context: Context) -> EngineResult:
        context.authorize_table(["glue:GetTable"], self.ref)
        catalog = self.metastore(context)
        table = catalog.table(self.ref.database, self.ref.table)
        refuse_view(table, "SHOW CREATE TABLE")
        if is_iceberg(table.parameters):
            iceberg = catalog.iceberg(context.settings).load_table(
                (self.ref.database, self.ref.table)
            )
            text = iceberg_create_statement(table, iceberg)
        else:
            text = create_statement(table)
        return lines("createtab_stmt", text.split("\n"), hive=True)


def parse_show_create_table(sql: str, cursor: Cursor, names: Names) -> Command:
    reader = Reader(sql, cursor)
    reader.expect_words("SHOW", "CREATE", "TABLE")
    ref = table_ref(reader, names)
    reader.done()
    return ShowCreateTable(ref)


@dataclass
class ShowPartitions(TableCommand):
    statement_type = StatementType.UTILITY

    def run(self, context: Context) -> EngineResult:
        context.authorize_table(["glue:GetPartitions"], self.ref)
        client = self.metastore(context)
        table = client.table(self.ref.database, self.ref.table)
        refuse_view(table, "SHOW PARTITIONS")
        require_partitioned(table)
        return lines(
            "partition",
            sorted(client.partition_names(self.ref.database, self.ref.table)),
            hive=True,
        )


def parse_show_partitions(sql: str, cursor: Cursor, names: Names) -> Command:
    reader = Reader(sql, cursor)
    reader.expect_words("SHOW", "PARTITIONS")
    ref: TableRef = table_ref(reader, names)
    reader.done()
    return ShowPartitions(ref)


@dataclass
class ShowViews(Command):
    catalog: str
    database: str
    like: str | None

    statement_type = StatementType.UTILITY

    def catalogs(self) -> set[str]:
        return {self.catalog}

    def run(self, context: Context) -> EngineResult:
        context.authorize_database("glue:GetTables", self.catalog, self.database)
        catalog = context.catalog(self.catalog)
        catalog.require_database(self.database)
        names = catalog.views(self.database)
        return lines("views", sorted(n for n in names if matches(self.like, n)), sized=True)


def parse_show_views(sql: str, cursor: Cursor, names: Names) -> Command:
    cursor.expect("SHOW")
    cursor.expect("VIEWS")
    catalog, database = names.default_catalog, names.default_database
    if cursor.word("IN", "FROM"):
        catalog, database = names.database(cursor.names(2))
    like = cursor.string() if cursor.word("LIKE") else None
    cursor.done()
    return ShowViews(catalog, database, like)


@dataclass
class ShowCreateView(Command):
    ref: TableRef

    statement_type = StatementType.UTILITY

    def catalogs(self) -> set[str]:
        return {self.ref.catalog}

    def run(self, context: Context) -> EngineResult:
        ref = self.ref
        context.authorize_table(["glue:GetTable"], ref)
        existing = context.catalog(ref.catalog).find_table(ref.database, ref.table)
        if existing is None:
            raise ResourceNotFound(f"View {quoted_name(ref)} does not exist")
        if not is_view(existing):
            raise InvalidRequest(f"Relation {quoted_name(ref)} is a table, not a view")
        view = decode(ref, existing, context.catalogs.names())
        head = f"CREATE VIEW {ref.database}.{ref.table}"  # as Athena heads it
        if view.comment is not None:
            head += " COMMENT '" + view.comment.replace("'", "''") + "'"
        return lines("Create View", [f"{head} AS", *view.sql.strip().splitlines()], sized=True)


def parse_show_create_view(sql: str, cursor: Cursor, names: Names) -> Command:
    cursor.expect("SHOW")
    cursor.expect("CREATE")
    cursor.expect("VIEW")
    ref = names.table(cursor.names(3))
    cursor.done()
    return ShowCreateView(ref)
