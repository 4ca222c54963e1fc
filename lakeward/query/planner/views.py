"""Views read in queries: each view a query names replaced by the view's SELECT.

As Athena does: views of views too, each view's names resolved in its own catalog and
schema, the caller's rights on each view (``glue:GetTable``) and its catalogs checked, and
a view whose tables changed the columns it was made over refused as stale.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection
from contextlib import ExitStack
from dataclasses import replace

from sqlglot import exp

from lakeward.access.arns import catalog_arn, glue_arns
from lakeward.errors import InvalidRequest
from lakeward.metastore.tables import TableInfo
from lakeward.query.catalogs import Catalogs
from lakeward.query.model import TableRef
from lakeward.query.sql.names import Names
from lakeward.query.sql.queries import Statement, parse_query, version_text
from lakeward.query.view_definitions import (
    MOST_NESTED,
    READS,
    View,
    columns_of,
    decode,
    digest,
    is_view,
    qualified,
)

Authorize = Callable[[str, str], object]


def expand(catalogs: Catalogs, statement: Statement, authorize: Authorize) -> Statement:
    """``statement`` with each view it reads replaced by the view's query, views of views
    too; the caller's rights on each view (``glue:GetTable``) and its catalogs checked.

    A query that reads no view is returned as it is; finding that out costs one look at
    the metastore's changes per catalog (the tables' definitions come from the cache the
    tables' resolution uses next).
    """
    if statement._ast is None or not statement.tables:
        return statement

    with ExitStack() as lookups:
        lookup = lookup_in(catalogs, lookups)
        if not any(is_view(lookup(ref)) for ref in statement.tables):
            return statement
        tree = statement._ast.copy()
        expand_tree(tree, lookup, authorize, catalogs.names(), ())
    return with_tree(statement, tree)


def with_tree(statement: Statement, tree: exp.Expr) -> Statement:
    """``statement`` reading ``tree``, whose real tables are qualified (CTEs are not)."""
    tables = [t for t in tree.find_all(exp.Table) if t.args.get("catalog")]
    refs = tuple(dict.fromkeys(_ref(t) for t in tables))
    return replace(statement, tables=refs, _ast=tree)


def _ref(table: exp.Table) -> TableRef:
    version = table.args.get("version")
    text = "" if version is None else version_text(version)
    return TableRef(table.catalog, table.db, table.name, text)


Lookup = Callable[[TableRef], TableInfo]


def lookup_in(catalogs: Catalogs, lookups: ExitStack) -> Lookup:
    """Table definitions, each catalog's changes asked for once while ``lookups`` is open."""
    open_catalogs: set[str] = set()

    def lookup(ref: TableRef) -> TableInfo:
        catalog = catalogs.catalog(ref.catalog)
        if ref.catalog not in open_catalogs:
            lookups.enter_context(catalog.lookup())
            open_catalogs.add(ref.catalog)
        # "t$snapshots" is a metadata table of t (never a view): t's definition tells.
        return catalog.table(ref.database, ref.table.partition("$")[0])

    return lookup


def expand_tree(
    tree: exp.Expr,
    lookup: Lookup,
    authorize: Authorize,
    catalogs: Collection[str],
    within: tuple[TableRef, ...],
) -> bool:
    """Replace the views ``tree`` reads by their queries, in place; whether there was one."""
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
        for arn in glue_arns(ref.catalog, ref.database, ref.table):
            authorize("glue:GetTable", arn)
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
        for used in sorted({r.catalog for r in with_tree(inner, query).tables}):
            authorize("lakeward:UseCatalog", catalog_arn(used))
        expand_tree(query, lookup, authorize, catalogs, (*within, ref))
        table.replace(_as_subquery(query, view, table))
        _unqualify_columns(tree, ref)
    return found


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
            or digest(kept) != columns
            or digest(current.partition_keys) != keys
            or (star and len(now) != int(count))
        ):
            raise InvalidRequest(
                f"View '{qualified(ref)}' is stale: {database}.{table} changed its columns "
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
