"""CREATE [OR REPLACE] VIEW, DROP VIEW, SHOW VIEWS and SHOW CREATE VIEW.

A view is stored as Athena stores it (``lakeward.query.view_definitions``), with a Spark SQL
text beside (``spark.py``); a query reads it through the planner (``planner/views.py``).
CREATE VIEW types the view's columns from its query run with LIMIT 0 through the planner
(``Planner.probe``), as a query of its reader would run.
"""

from __future__ import annotations

import json
from contextlib import ExitStack
from dataclasses import dataclass

from lakeward.errors import InvalidRequest, ResourceNotFound
from lakeward.metastore.tables import VIRTUAL_VIEW, Column, TableInfo
from lakeward.query.engines.base import EngineResult
from lakeward.query.model import TableRef
from lakeward.query.planner.views import expand_tree, lookup_in, with_tree
from lakeward.query.sql import trino_format
from lakeward.query.sql.names import Names
from lakeward.query.sql.queries import Statement, parse_query, require_named_columns
from lakeward.query.sql.tokens import Cursor
from lakeward.query.statements.base import Command, Context, no_rows
from lakeward.query.statements.views import spark
from lakeward.query.translate.query import check_translatable
from lakeward.query.view_definitions import (
    PRESTO_COMMENT,
    PRESTO_FLAG,
    READS,
    View,
    ViewColumn,
    hive_type,
    is_view,
    qualified,
    signature,
    trino_type,
)


def quoted_name(ref: TableRef) -> str:
    return f"'{ref.catalog}.{ref.database}.{ref.table}'"


# -- CREATE [OR REPLACE] VIEW -------------------------------------------------------------


@dataclass
class CreateView(Command):
    ref: TableRef
    query: Statement
    or_replace: bool
    comment: str | None

    def tables_read(self) -> tuple[TableRef, ...]:
        return self.query.tables

    def catalogs(self) -> set[str]:
        return {self.ref.catalog, *(t.catalog for t in self.query.tables)}

    def check(self, engine: str) -> None:
        check_translatable(self.query, engine)

    def run(self, context: Context) -> EngineResult:
        ref = self.ref
        existing = context.catalog(ref.catalog).find_table(ref.database, ref.table)
        if existing is not None and not is_view(existing):
            raise InvalidRequest(f"Table already exists: {quoted_name(ref)}")
        if existing is not None and not self.or_replace:
            raise InvalidRequest(f"View already exists: {quoted_name(ref)}")
        action = "glue:UpdateTable" if existing is not None else "glue:CreateTable"
        context.authorize_table([action], ref)
        require_named_columns(self.query)
        # The view must not read itself, through other views either (Trino's rule).
        if ref in self.query.tables:
            raise InvalidRequest(f"view {ref.database}.{ref.table} cannot read itself")
        assert self.query._ast is not None
        with ExitStack() as lookups:
            lookup = lookup_in(context.catalogs, lookups)
            tree = self.query._ast.copy()
            expand_tree(tree, lookup, context.authorize, context.catalogs.names(), (ref,))
            columns = _result_columns(context, with_tree(self.query, tree))
            text = trino_format.formatted(self.query.sql) or self.query.sql  # as Trino keeps it
            view = View(ref, text, ref.catalog, ref.database, columns, self.comment)
            spark_text, spark_properties = spark.definition(view, self.query, lookup)
            reads = {qualified(r): signature(lookup(r)) for r in self.query.tables}
        parameters = {
            PRESTO_FLAG: "true",
            "comment": self.comment if self.comment is not None else PRESTO_COMMENT,
            READS: json.dumps(reads, separators=(",", ":")),
            **spark_properties,
        }
        info = TableInfo(
            database=ref.database,
            name=ref.table,
            location="",
            columns=[Column(c.name, hive_type(c.type)) for c in columns],
            table_type=VIRTUAL_VIEW,
            parameters=parameters,
            view_original_text=view.encoded(),
            view_expanded_text=spark_text,
        )
        context.catalog(ref.catalog).put_view(info, replace=self.or_replace)
        return no_rows()


def _result_columns(context: Context, statement: Statement) -> tuple[ViewColumn, ...]:
    """The view's columns and their types: its query planned and run with LIMIT 0 on the
    workgroup's engine, so that its tables and columns resolve and the engine types them."""
    columns, arrow = context.planner.probe(context.run_, statement)
    seen: set[str] = set()
    found = []
    for i, column in enumerate(columns):
        name = column.name.lower()
        if name in seen:
            raise InvalidRequest(f"Column name '{name}' specified more than once")
        seen.add(name)
        found.append(ViewColumn(name, trino_type(column, arrow.field(i).type if arrow else None)))
    return tuple(found)


def parse_create_view(sql: str, cursor: Cursor, names: Names) -> Command:
    return _create_view(sql, cursor, names, or_replace=False)


def parse_create_or_replace_view(sql: str, cursor: Cursor, names: Names) -> Command:
    return _create_view(sql, cursor, names, or_replace=True)


def _create_view(sql: str, cursor: Cursor, names: Names, *, or_replace: bool) -> Command:
    cursor.expect("CREATE")
    if or_replace:
        cursor.expect("OR")
        cursor.expect("REPLACE")
    cursor.expect("VIEW")
    ref = names.table(cursor.names(3))
    comment = cursor.string() if cursor.word("COMMENT") else None
    if cursor.peek() == "SECURITY":
        cursor.fail("SECURITY is not supported: an Athena view runs with its reader's rights")
    if not cursor.word("AS"):
        found = cursor.tokens[cursor.pos].text if cursor.pos < len(cursor.tokens) else ""
        cursor.fail(f"expected AS, found '{found}'" if found else "expected AS")
    query = parse_query(cursor.rest(), names)
    if query.kind != "select":
        cursor.fail("expected a SELECT query")
    return CreateView(ref, query, or_replace, comment)


def parse_create_protected(sql: str, cursor: Cursor, names: Names) -> Command:
    raise InvalidRequest(
        "CREATE PROTECTED MULTI DIALECT VIEW (a Data Catalog view) is not supported: "
        "create an Athena view with CREATE VIEW"
    )


# -- DROP VIEW --------------------------------------------------------------------------------


@dataclass
class DropView(Command):
    ref: TableRef
    if_exists: bool

    def catalogs(self) -> set[str]:
        return {self.ref.catalog}

    def run(self, context: Context) -> EngineResult:
        ref = self.ref
        context.authorize_table(["glue:DeleteTable"], ref)
        existing = context.catalog(ref.catalog).find_table(ref.database, ref.table)
        if existing is None:
            if self.if_exists:
                return no_rows()
            raise ResourceNotFound(f"View {quoted_name(ref)} does not exist")
        if not is_view(existing):
            raise InvalidRequest(
                f"View {quoted_name(ref)} does not exist, but a table with that name exists. "
                f"Did you mean DROP TABLE {ref.database}.{ref.table}?"
            )
        context.catalog(ref.catalog).drop_table(ref.database, ref.table)
        return no_rows()


def parse_drop_view(sql: str, cursor: Cursor, names: Names) -> Command:
    cursor.expect("DROP")
    cursor.expect("VIEW")
    if_exists = bool(cursor.word("IF"))
    if if_exists:
        cursor.expect("EXISTS")
    ref = names.table(cursor.names(3))
    cursor.done()
    return DropView(ref, if_exists)


# -- SHOW VIEWS, SHOW CREATE VIEW ---------------------------------------------------------------
