"""Views: CREATE [OR REPLACE] VIEW, DROP VIEW, SHOW VIEWS, SHOW CREATE VIEW, and reading them.

A view is a metastore table of type VIRTUAL_VIEW holding its SQL twice:

- ``viewOriginalText`` in Athena's (Trino's) encoding, ``/* Presto View: <base64 JSON> */``
  with the SQL as written, the catalog and schema its unqualified names resolve in, and
  its columns with Trino's types; table parameter ``presto_view = true``. This is what
  lakeward reads, so a view Athena or Trino made over the same metastore reads as well.
- ``viewExpandedText`` in Spark SQL: the translation the Spark engine runs
  (``lakeward.query.trino.spark``), its tables named ``database.table``, with the table
  properties a Spark 3 session needs to read a view made outside Spark (found by
  experiment): the view's output column names (``view.query.out.*``), the namespace its
  names resolve in (``view.catalogAndNamespace.*``) and the SQL settings it runs under
  (``view.sqlConfig.*``: ANSI arithmetic, UTC, as the Spark engine runs queries). The
  metastore's columns carry the Hive types, which Spark reads as the view's schema.
  A view Spark cannot be given Trino's answer for (a function the translation refuses,
  a table of another catalog) is stored all the same: its Spark text fails, when read,
  with the reason (``raise_error``), and lakeward reads it as any view.

A query naming a view reads the view's SELECT in its place (``expand``), as Athena does:
views of views too, each view's names resolved in its own catalog and schema. Athena
checks the caller's rights on what the view reads (``glue:GetTable`` on the view, the
catalog and the data of the tables under it), which ``expand`` and the service check.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Callable, Collection
from contextlib import ExitStack
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from sqlglot import exp

from lakeward.access.arns import catalog_arn, glue_catalog_arn, glue_database_arn, glue_table_arn
from lakeward.errors import InvalidRequest, ResourceNotFound
from lakeward.metastore.client import VIRTUAL_VIEW, Column, TableInfo
from lakeward.query.catalogs import matches
from lakeward.query.engines.base import EngineResult, Limits
from lakeward.query.model import ColumnInfo, StatementType, TableRef
from lakeward.query.statements import Command, Context, claims

if TYPE_CHECKING:
    from lakeward.query.service import QueryService
    from lakeward.query.sql import Cursor, Names, Statement

PRESTO_PREFIX = "/* Presto View: "
PRESTO_SUFFIX = " */"
PRESTO_FLAG = "presto_view"
PRESTO_COMMENT = "Presto View"  # the table comment Trino gives its views
READS = "lakeward.view.reads"  # the tables a view reads, with their columns when it was made
MOST_NESTED = 32  # views of views read through, at most (a cycle is refused before that)


@dataclass(frozen=True)
class ViewColumn:
    name: str
    type: str  # Trino's type name, as Athena stores it: varchar, bigint, decimal(10,2), ...


@dataclass(frozen=True)
class View:
    """A view's definition, as Athena encodes it."""

    ref: TableRef  # where it is stored
    sql: str  # the SELECT, Athena SQL
    catalog: str  # where its unqualified names resolve
    schema: str
    columns: tuple[ViewColumn, ...]
    comment: str | None = None
    named_catalog: str = ""  # the catalog as its creator named it (Athena: awsdatacatalog)

    def encoded(self) -> str:
        """``viewOriginalText``: Trino's JSON of the view, base64 in a comment."""
        data: dict[str, Any] = {
            "originalSql": self.sql,
            "catalog": self.catalog,
            "schema": self.schema,
            "columns": [{"name": c.name, "type": c.type} for c in self.columns],
            # Read with its reader's rights, as lakeward reads it (Trino: SECURITY INVOKER).
            "runAsInvoker": True,
        }
        if self.comment is not None:
            data["comment"] = self.comment
        payload = base64.b64encode(json.dumps(data).encode()).decode()
        return f"{PRESTO_PREFIX}{payload}{PRESTO_SUFFIX}"


def is_view(info: TableInfo) -> bool:
    return info.table_type == VIRTUAL_VIEW


def decode(ref: TableRef, info: TableInfo, catalogs: Collection[str]) -> View:
    """A stored view's definition; refused if Athena's encoding is not there.

    A view's catalog that lakeward does not know (Athena writes ``awsdatacatalog``) is
    the catalog the view is stored in, whatever its creator called it.
    """
    text = (info.view_original_text or "").strip()
    if not text.startswith(PRESTO_PREFIX) or not text.endswith(PRESTO_SUFFIX):
        raise InvalidRequest(
            f"view {ref.database}.{ref.table} was not made by Athena, Trino or lakeward (it "
            "holds Hive or Spark SQL, which Athena does not read); re-create it with CREATE VIEW"
        )
    try:
        payload = text[len(PRESTO_PREFIX) : -len(PRESTO_SUFFIX)]
        data = json.loads(base64.b64decode(payload, validate=True))
        columns = tuple(ViewColumn(c["name"].lower(), c["type"]) for c in data["columns"])
        sql = data["originalSql"]
    except (binascii.Error, ValueError, KeyError, TypeError, AttributeError):
        raise InvalidRequest(
            f"view {ref.database}.{ref.table} cannot be read: its definition is damaged"
        ) from None
    named = str(data.get("catalog") or ref.catalog).lower()
    catalog = named if named in catalogs else ref.catalog
    schema = str(data.get("schema") or ref.database).lower()
    return View(ref, sql, catalog, schema, columns, data.get("comment"), named)


def columns_of(info: TableInfo) -> list[Column]:
    """A table's columns, or a view's as Athena describes them (Hive's type names).

    Trino stores a view with one ``dummy`` column in the metastore; its real columns
    are in the encoded definition.
    """
    if not is_view(info) or not (info.view_original_text or "").startswith(PRESTO_PREFIX):
        return info.columns
    view = decode(TableRef("", info.database, info.name), info, ())
    return [Column(c.name, hive_type(c.type)) for c in view.columns]


def described(info: TableInfo) -> TableInfo:
    """``info`` with a view's own columns, as DESCRIBE and GetTableMetadata show them."""
    if not is_view(info):
        return info
    try:
        return replace(info, columns=columns_of(info))
    except InvalidRequest:  # a damaged definition: listed as stored, refused when read
        return info


# -- types ------------------------------------------------------------------------------------

_TRINO_NAMES = {"float": "real", "timestamp": "timestamp(3)"}


def trino_type(column: ColumnInfo, arrow_type: pa.DataType | None) -> str:
    """The Trino type of a result column, as a view's definition names it."""
    name = column.type
    if name == "decimal":
        return f"decimal({column.precision},{column.scale})"
    if name == "char":
        return f"char({column.precision})"
    if name in ("array", "map", "row"):
        if arrow_type is None:
            raise InvalidRequest(
                f"the type of column {column.name} ({name}) cannot be known without rows; "
                "cast it to a scalar type in the view"
            )
        return _trino_of_arrow(arrow_type)
    return _TRINO_NAMES.get(name, name)


def _trino_of_arrow(arrow_type: pa.DataType) -> str:
    from lakeward.query.types import athena_type_of_arrow

    t = pa.types
    if t.is_map(arrow_type):
        key, item = _trino_of_arrow(arrow_type.key_type), _trino_of_arrow(arrow_type.item_type)
        return f"map({key}, {item})"
    if t.is_list(arrow_type) or t.is_large_list(arrow_type) or t.is_fixed_size_list(arrow_type):
        return f"array({_trino_of_arrow(arrow_type.value_type)})"
    if t.is_struct(arrow_type):
        fields = [arrow_type.field(i) for i in range(arrow_type.num_fields)]
        return "row(" + ", ".join(f"{f.name} {_trino_of_arrow(f.type)}" for f in fields) + ")"
    found = athena_type_of_arrow(arrow_type)
    return trino_type(ColumnInfo(name="", type=found.name, precision=found.precision,
                                 scale=found.scale), None)  # fmt: skip


def hive_type(trino: str) -> str:
    """The Hive type the metastore (and Spark) gives a column of a Trino type."""
    try:
        built = exp.DataType.build(trino, dialect="trino")
    except Exception:  # sqlglot raises several kinds on a name it does not know
        return "string"
    for node in built.find_all(exp.DataType):
        if node.this in (exp.DataType.Type.JSON, exp.DataType.Type.TIME):
            node.set("this", exp.DataType.Type.TEXT)  # Hive has neither: text, as Athena shows
    text = built.sql("hive").lower()
    return text.replace(", ", ",").replace(": ", ":")


# -- expansion in queries ---------------------------------------------------------------------


def expand(service: QueryService, statement: Statement, principal: str) -> Statement:
    """``statement`` with each view it reads replaced by the view's query, views of views
    too; the caller's rights on each view (``glue:GetTable``) and its catalogs checked.

    A query that reads no view is returned as it is; finding that out costs one look at
    the metastore's changes per catalog (the tables' definitions come from the cache the
    tables' resolution uses next).
    """
    if statement._ast is None or not statement.tables:
        return statement

    def authorize(action: str, resource: str) -> None:
        service.access.authorize(action, resource, principal=principal)

    with ExitStack() as lookups:
        lookup = _lookup(service, lookups)
        if not any(is_view(lookup(ref)) for ref in statement.tables):
            return statement
        tree = statement._ast.copy()
        _expand(tree, lookup, authorize, service.catalogs.names(), ())
    return _with_tree(statement, tree)


def _with_tree(statement: Statement, tree: exp.Expr) -> Statement:
    """``statement`` reading ``tree``, whose real tables are qualified (CTEs are not)."""
    tables = [t for t in tree.find_all(exp.Table) if t.args.get("catalog")]
    refs = tuple(dict.fromkeys(TableRef(t.catalog, t.db, t.name) for t in tables))
    return replace(statement, tables=refs, _ast=tree)


Lookup = Callable[[TableRef], TableInfo]


def _lookup(service: QueryService, lookups: ExitStack) -> Lookup:
    """Table definitions, each catalog's changes asked for once while ``lookups`` is open."""
    open_catalogs: set[str] = set()

    def lookup(ref: TableRef) -> TableInfo:
        connector = service.catalogs.connector(ref.catalog)
        if ref.catalog not in open_catalogs:
            lookups.enter_context(connector.client.lookup())
            open_catalogs.add(ref.catalog)
        return connector.table(ref.database, ref.table)

    return lookup


def _expand(
    tree: exp.Expr,
    lookup: Lookup,
    authorize: Callable[[str, str], None],
    catalogs: Collection[str],
    within: tuple[TableRef, ...],
) -> bool:
    """Replace the views ``tree`` reads by their queries, in place; whether there was one."""
    from lakeward.query.sql import Names, parse_query

    found = False
    for table in list(tree.find_all(exp.Table)):
        if not table.args.get("catalog"):
            continue  # a CTE's name
        ref = TableRef(table.catalog, table.db, table.name)
        info = lookup(ref)
        if not is_view(info):
            continue
        found = True
        if ref in within:
            chain = " -> ".join(f"{r.database}.{r.table}" for r in (*within, ref))
            raise InvalidRequest(f"view {ref.database}.{ref.table} is recursive: {chain}")
        if len(within) >= MOST_NESTED:
            raise InvalidRequest(f"views are nested more than {MOST_NESTED} deep")
        authorize("glue:GetTable", glue_table_arn(*_parts(ref)))
        view = decode(ref, info, catalogs)
        # The SQL may name its creator's catalog in full: that name is the view's catalog.
        alias = {view.named_catalog} - {view.catalog, *catalogs}
        names = Names(view.catalog, view.schema, frozenset({*catalogs, *alias}))
        try:
            inner = parse_query(view.sql, names)
        except InvalidRequest as e:
            raise InvalidRequest(f"view {ref.database}.{ref.table} cannot be read: {e}") from None
        query = inner._ast
        assert query is not None
        star = any(p.is_star for select in query.find_all(exp.Select) for p in select.expressions)
        _refuse_stale(ref, info, lookup, star=star)
        for named in query.find_all(exp.Table):
            if named.args.get("catalog") and named.catalog in alias:
                named.set("catalog", exp.to_identifier(view.catalog))
        for used in sorted({r.catalog for r in _with_tree(inner, query).tables}):
            authorize("lakeward:UseCatalog", catalog_arn(used))
        _expand(query, lookup, authorize, catalogs, (*within, ref))
        table.replace(_as_subquery(query, view, table))
        _unqualify_columns(tree, ref)
    return found


def _qualified(ref: TableRef) -> str:
    return f"{ref.catalog}.{ref.database}.{ref.table}"


def _signature(info: TableInfo) -> str:
    """What a view records of a table (or view) it reads: its columns then, so that a change
    since is seen. ``<count>:<hash of those columns>:<hash of the partition keys>``."""
    columns = columns_of(info)
    return f"{len(columns)}:{_digest(columns)}:{_digest(info.partition_keys)}"


def _digest(columns: list[Column]) -> str:
    text = json.dumps([[c.name.lower(), c.type.lower()] for c in columns])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _refuse_stale(ref: TableRef, info: TableInfo, lookup: Lookup, *, star: bool) -> None:
    """Refuse a view whose tables changed the columns it was made over (Trino calls such a
    view stale). Columns added after them are no change, unless the view reads ``*``."""
    recorded = info.parameters.get(READS)
    if recorded is None:
        return  # made by Athena or Trino: nothing recorded to compare
    try:
        reads = dict(json.loads(recorded))
    except (ValueError, TypeError):
        return
    for name, signature in reads.items():
        catalog, database, table = name.split(".")
        current = lookup(TableRef(catalog, database, table))
        count, columns, keys = signature.split(":")
        now = columns_of(current)
        kept = now[: int(count)]
        if (
            len(kept) < int(count)
            or _digest(kept) != columns
            or _digest(current.partition_keys) != keys
            or (star and len(now) != int(count))
        ):
            raise InvalidRequest(
                f"View '{_qualified(ref)}' is stale: {database}.{table} changed its columns "
                "since the view was made; re-create the view with CREATE OR REPLACE VIEW"
            )


def _as_subquery(query: exp.Expr, view: View, table: exp.Table) -> exp.Expr:
    """The view's query in the place of its name: its stored columns, by name, in order."""
    alias = table.args.get("alias") or exp.TableAlias(this=exp.to_identifier(view.ref.table))
    inner = exp.Subquery(this=query, alias=exp.TableAlias(this=exp.to_identifier("_view")))
    projection = [exp.column(c.name, quoted=True) for c in view.columns]
    select = exp.select(*projection).from_(inner)
    return exp.Subquery(this=select, alias=alias.copy())


def _unqualify_columns(tree: exp.Expr, ref: TableRef) -> None:
    """``database.view.column`` names the subquery now in the view's place as ``view.column``."""
    for column in tree.find_all(exp.Column):
        if column.table == ref.table and column.args.get("db") and column.db == ref.database:
            column.set("db", None)
            column.set("catalog", None)


def _parts(ref: TableRef) -> tuple[str, str, str]:
    return ref.catalog, ref.database, ref.table


def _no_rows() -> EngineResult:
    """What a DDL statement returns: no columns, no rows (as Athena's)."""
    return EngineResult([], iter(()))


def _one_column(name: str, values: list[str]) -> EngineResult:
    batch = pa.record_batch([pa.array(values, pa.string())], names=[name])
    column = ColumnInfo(name=name, type="varchar", precision=2147483647, case_sensitive=True)
    return EngineResult([column], iter([batch]))


def _existing(context: Context, ref: TableRef) -> TableInfo | None:
    """The table or view named ``ref``; None if there is none (its database must exist)."""
    connector = context.service.catalogs.connector(ref.catalog)
    connector.require_database(ref.database)
    try:
        return connector.table(ref.database, ref.table)
    except ResourceNotFound:
        return None


def _name(ref: TableRef) -> str:
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
        from lakeward.query.sql import check_translatable

        check_translatable(self.query, engine)

    def run(self, context: Context) -> EngineResult:
        from lakeward.query.statements import spark_views

        ref = self.ref
        existing = _existing(context, ref)
        if existing is not None and not is_view(existing):
            raise InvalidRequest(f"Table already exists: {_name(ref)}")
        if existing is not None and not self.or_replace:
            raise InvalidRequest(f"View already exists: {_name(ref)}")
        action = "glue:UpdateTable" if existing is not None else "glue:CreateTable"
        for arn in (glue_catalog_arn(ref.catalog), glue_database_arn(ref.catalog, ref.database)):
            context.authorize(action, arn)
        context.authorize(action, glue_table_arn(*_parts(ref)))
        _check_names(self.query)
        # The view must not read itself, through other views either (Trino's rule).
        if ref in self.query.tables:
            raise InvalidRequest(f"view {ref.database}.{ref.table} cannot read itself")
        service = context.service
        assert self.query._ast is not None
        with ExitStack() as lookups:
            lookup = _lookup(service, lookups)
            tree = self.query._ast.copy()
            _expand(tree, lookup, context.authorize, service.catalogs.names(), (ref,))
            columns = _result_columns(context, _with_tree(self.query, tree))
            view = View(ref, self.query.sql, ref.catalog, ref.database, columns, self.comment)
            spark_text, spark_properties = spark_views.definition(view, self.query, lookup)
            reads = {_qualified(r): _signature(lookup(r)) for r in self.query.tables}
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
        client = service.catalogs.connector(ref.catalog).client
        client.put_view(info, replace=self.or_replace)
        return _no_rows()


def _check_names(query: Statement) -> None:
    """Every column of a view has a name, and one name only once (Trino's rule)."""
    select = query._ast
    while isinstance(select, exp.SetOperation):
        select = select.left
    while isinstance(select, exp.Subquery):
        select = select.this
    if isinstance(select, exp.Values):
        raise InvalidRequest("Column name not specified at position 1: name VALUES' columns")
    if not isinstance(select, exp.Select):
        return
    for position, projection in enumerate(select.expressions, start=1):
        if isinstance(projection, exp.Star) or projection.is_star:
            continue
        if not isinstance(projection, (exp.Alias, exp.Column)):
            raise InvalidRequest(
                f"Column name not specified at position {position}: name it with AS"
            )


def _result_columns(context: Context, statement: Statement) -> tuple[ViewColumn, ...]:
    """The view's columns and their types: its query run with LIMIT 0 on the workgroup's
    engine, so that its tables and columns resolve and the engine types them."""
    from lakeward.query.sql import to_engine_sql

    service = context.service
    assert statement._ast is not None
    # LIMIT on the query itself: a SELECT * around it would rename duplicate columns.
    query = statement._ast.copy()
    if isinstance(query, exp.Query):
        probe: exp.Expr = query.limit(0)
    else:  # VALUES
        probe = exp.select("*").from_(exp.Subquery(this=query, alias="_view")).limit(0)
    tables = [service._resolve(t) for t in statement.tables]
    engine = service.engine(context.group.engine)
    columns = {t.ref: [*t.columns, *t.partition_keys] for t in tables}
    sql = to_engine_sql(replace(statement, _ast=probe), engine.dialect, engine.table_name, columns)
    result = engine.execute(context.execution.id, sql, tables, Limits(memory_limit="1GB"))
    arrow: pa.Schema | None = None
    for batch in result.batches:
        arrow = arrow or batch.schema
    seen: set[str] = set()
    found = []
    for i, column in enumerate(result.columns):
        name = column.name.lower()
        if name in seen:
            raise InvalidRequest(f"Column name '{name}' specified more than once")
        seen.add(name)
        found.append(ViewColumn(name, trino_type(column, arrow.field(i).type if arrow else None)))
    return tuple(found)


@claims("CREATE", "VIEW")
def _create(sql: str, cursor: Cursor, names: Names) -> Command:
    return _create_view(sql, cursor, names, or_replace=False)


@claims("CREATE", "OR", "REPLACE", "VIEW")
def _create_or_replace(sql: str, cursor: Cursor, names: Names) -> Command:
    return _create_view(sql, cursor, names, or_replace=True)


def _create_view(sql: str, cursor: Cursor, names: Names, *, or_replace: bool) -> Command:
    from lakeward.query.sql import parse_query

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


@claims("CREATE", "PROTECTED")
def _protected(sql: str, cursor: Cursor, names: Names) -> Command:
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
        arns = (
            glue_catalog_arn(ref.catalog),
            glue_database_arn(ref.catalog, ref.database),
            glue_table_arn(*_parts(ref)),
        )
        for arn in arns:
            context.authorize("glue:DeleteTable", arn)
        existing = _existing(context, ref)
        if existing is None:
            if self.if_exists:
                return _no_rows()
            raise ResourceNotFound(f"View {_name(ref)} does not exist")
        if not is_view(existing):
            raise InvalidRequest(
                f"View {_name(ref)} does not exist, but a table with that name exists. "
                f"Did you mean DROP TABLE {ref.database}.{ref.table}?"
            )
        context.service.catalogs.connector(ref.catalog).client.drop_table(ref.database, ref.table)
        return _no_rows()


@claims("DROP", "VIEW")
def _drop(sql: str, cursor: Cursor, names: Names) -> Command:
    cursor.expect("DROP")
    cursor.expect("VIEW")
    if_exists = bool(cursor.word("IF"))
    if if_exists:
        cursor.expect("EXISTS")
    ref = names.table(cursor.names(3))
    cursor.done()
    return DropView(ref, if_exists)


# -- SHOW VIEWS, SHOW CREATE VIEW ---------------------------------------------------------------


@dataclass
class ShowViews(Command):
    catalog: str
    database: str
    like: str | None

    statement_type = StatementType.UTILITY

    def catalogs(self) -> set[str]:
        return {self.catalog}

    def run(self, context: Context) -> EngineResult:
        context.authorize("glue:GetTables", glue_database_arn(self.catalog, self.database))
        connector = context.service.catalogs.connector(self.catalog)
        connector.require_database(self.database)
        names = connector.client.views(self.database)
        return _one_column("views", sorted(n for n in names if matches(self.like, n)))


@claims("SHOW", "VIEWS")
def _show_views(sql: str, cursor: Cursor, names: Names) -> Command:
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
        context.authorize("glue:GetTable", glue_table_arn(*_parts(ref)))
        existing = _existing(context, ref)
        if existing is None:
            raise ResourceNotFound(f"View {_name(ref)} does not exist")
        if not is_view(existing):
            raise InvalidRequest(f"Relation {_name(ref)} is a table, not a view")
        view = decode(ref, existing, context.service.catalogs.names())
        head = f'CREATE VIEW "{ref.catalog}"."{ref.database}"."{ref.table}"'
        if view.comment is not None:
            head += " COMMENT '" + view.comment.replace("'", "''") + "'"
        return _one_column("Create View", [f"{head} AS", *view.sql.strip().splitlines()])


@claims("SHOW", "CREATE", "VIEW")
def _show_create_view(sql: str, cursor: Cursor, names: Names) -> Command:
    cursor.expect("SHOW")
    cursor.expect("CREATE")
    cursor.expect("VIEW")
    ref = names.table(cursor.names(3))
    cursor.done()
    return ShowCreateView(ref)
