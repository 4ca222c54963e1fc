"""CREATE DATABASE and DROP DATABASE (SCHEMA is a synonym, as in Hive)."""

from __future__ import annotations

from dataclasses import dataclass, field

from lakeward.access.arns import glue_table_arn
from lakeward.errors import InvalidRequest, ResourceNotFound
from lakeward.query.engines.base import EngineResult
from lakeward.query.sql.names import Names
from lakeward.query.sql.tokens import Cursor
from lakeward.query.statements.base import Command, Context, no_rows
from lakeward.query.statements.ddl.common import CatalogCommand, lake_location
from lakeward.query.statements.ddl.parsing import Reader, check_name
from lakeward.storage.paths import catalog_uri, warehouse_uri


@dataclass
class CreateDatabase(CatalogCommand):
    catalog: str
    database: str
    if_not_exists: bool = False
    comment: str = ""
    location: str | None = None
    properties: dict[str, str] = field(default_factory=dict)

    def run(self, context: Context) -> EngineResult:
        settings = context.settings
        location = (
            lake_location(context, self.location)
            if self.location is not None
            else catalog_uri(settings, f"{warehouse_uri(settings)}/{self.database}.db")
        )
        context.authorize_database("glue:CreateDatabase", self.catalog, self.database)
        client = self.metastore(context)
        if self.database in client.databases():
            if self.if_not_exists:
                return no_rows()
            raise InvalidRequest(f"Database {self.database} already exists")
        created = client.create_database(self.database, location, self.comment, self.properties)
        if not created and not self.if_not_exists:
            raise InvalidRequest(f"Database {self.database} already exists")
        return no_rows()


@dataclass
class DropDatabase(CatalogCommand):
    catalog: str
    database: str
    if_exists: bool = False
    cascade: bool = False

    def run(self, context: Context) -> EngineResult:
        if self.database == "default":
            raise InvalidRequest("Can not drop default database")
        context.authorize_database("glue:DeleteDatabase", self.catalog, self.database)
        client = self.metastore(context)
        if self.database not in client.databases():
            if self.if_exists:
                return no_rows()
            raise ResourceNotFound(f"Database {self.database} does not exist")
        tables = client.tables(self.database)
        if tables and not self.cascade:
            raise InvalidRequest(
                f"Database {self.database} is not empty: it has {len(tables)} table(s) "
                f"({', '.join(sorted(tables)[:5])}); drop them first or use CASCADE"
            )
        if tables:  # CASCADE drops the tables' definitions too (their data stays)
            context.authorize("glue:DeleteTable", glue_table_arn(self.catalog, self.database, "*"))
        client.drop_database(self.database, cascade=self.cascade)
        return no_rows()


def _database(reader: Reader, names: Names) -> tuple[str, str]:
    catalog, database = names.database(reader.names(2, "a database name"))
    return catalog, check_name(database, "database")


def parse_create_database(sql: str, cursor: Cursor, names: Names) -> Command:
    reader = Reader(sql, cursor)
    reader.expect("CREATE")
    reader.expect("DATABASE", "SCHEMA")
    if_not_exists = reader.if_not_exists()
    catalog, database = _database(reader, names)
    command = CreateDatabase(catalog, database, if_not_exists)
    if reader.word("COMMENT"):
        command.comment = reader.prose("a quoted comment")
    if reader.word("LOCATION"):
        command.location = reader.string("a quoted location")
    if reader.words("WITH", "DBPROPERTIES"):
        command.properties = reader.properties()
    reader.done()
    return command


def parse_drop_database(sql: str, cursor: Cursor, names: Names) -> Command:
    reader = Reader(sql, cursor)
    reader.expect("DROP")
    reader.expect("DATABASE", "SCHEMA")
    if_exists = reader.if_exists()
    catalog, database = _database(reader, names)
    cascade = reader.word("CASCADE", "RESTRICT") == "CASCADE"
    reader.done()
    return DropDatabase(catalog, database, if_exists, cascade)
