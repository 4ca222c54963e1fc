"""How a statement's names resolve: defaults, registered catalogs, and Hive's name rules."""

from __future__ import annotations

import re
from dataclasses import dataclass

from lakeward.access import arns
from lakeward.errors import InvalidRequest
from lakeward.query.model import TableRef

# The engine's own catalog answers to these names inside any attached database; and Spark
# reads `csv`.`name` as the file "name" when no database csv exists (SQL on files).
INTERNAL_SCHEMAS = frozenset(
    {"information_schema", "pg_catalog", "csv", "json", "parquet", "orc", "avro", "text"}
    | {"binaryfile", "delta", "iceberg", "jdbc"}
)
_INTERNAL_TABLE_PREFIXES = ("duckdb_", "sqlite_", "pragma_")
# The Hive Metastore accepts only these database and table names; anything else is a
# file name, a path or a trick, and no registered table could match it.
_HIVE_NAME = re.compile(r"[a-z0-9_]+")
ONLY_TABLES = "queries read only tables of registered catalogs"
INFORMATION_SCHEMA = "information_schema"
# The information_schema tables each catalog answers (planner/information_schema.py).
INFORMATION_SCHEMA_TABLES = ("schemata", "tables", "columns", "views")
DEFAULT_CATALOG = "demo_hive_metastore"
# The catalog every Athena tool assumes (the account's Glue catalog): lakeward's default,
# unless a catalog of that name is registered.
AWS_DATA_CATALOG = "awsdatacatalog"
# STS reports lakeward's one account, and Glue's CatalogId takes it for the default catalog.
ACCOUNT_ID = arns.ACCOUNT_ID


@dataclass(frozen=True)
class Names:
    default_catalog: str
    default_database: str
    catalogs: frozenset[str]

    def catalog(self, name: str) -> str:
        name = name.lower()
        if (
            name == AWS_DATA_CATALOG
            and name not in self.catalogs
            and DEFAULT_CATALOG in self.catalogs
        ):
            return DEFAULT_CATALOG
        if name not in self.catalogs:
            raise InvalidRequest(f"catalog '{name}' is not registered")
        return name

    def database(self, parts: list[str]) -> tuple[str, str]:
        catalog, database = parts if len(parts) == 2 else (self.default_catalog, parts[0])
        if database in INTERNAL_SCHEMAS:
            raise InvalidRequest(f"schema {database} is not allowed: {ONLY_TABLES}")
        check_hive_name(database, "database")
        return self.catalog(catalog), database

    def table(self, parts: list[str]) -> TableRef:
        *qualifier, table = parts
        if qualifier and qualifier[-1] == INFORMATION_SCHEMA:
            catalog = self.catalog(qualifier[0]) if len(qualifier) == 2 else self.default_catalog
            if table not in INFORMATION_SCHEMA_TABLES:
                raise InvalidRequest(
                    f"information_schema.{table} is not supported: lakeward answers "
                    + ", ".join(f"information_schema.{t}" for t in INFORMATION_SCHEMA_TABLES)
                )
            return TableRef(catalog, INFORMATION_SCHEMA, table)
        catalog, database = self.database(qualifier or [self.default_database])
        if table.startswith(_INTERNAL_TABLE_PREFIXES):
            raise InvalidRequest(f"table {table} is not allowed: {ONLY_TABLES}")
        # "t$snapshots": a metadata table of the Iceberg table t (which the planner checks).
        base, dollar, kind = table.partition("$")
        check_hive_name(base, "table")
        if dollar and not _HIVE_NAME.fullmatch(kind):
            raise InvalidRequest(f"'{table}' is not a table name: {ONLY_TABLES}")
        return TableRef(catalog, database, table)


def check_hive_name(name: str, what: str) -> None:
    if not _HIVE_NAME.fullmatch(name):
        raise InvalidRequest(
            f"'{name}' is not a {what} name: {ONLY_TABLES}, named with letters, digits and _"
        )
