"""A checked query in an engine's dialect: its tables named as the engine asks, Trino's
functions translated (``duckdb``, ``spark``), and what the engine cannot answer as Athena
would refused."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlglot import exp
from sqlglot.errors import ErrorLevel, UnsupportedError

from lakeward.errors import InvalidRequest
from lakeward.metastore.tables import Column
from lakeward.query.model import TableRef
from lakeward.query.sql.queries import Statement, version_text
from lakeward.query.translate import duckdb, spark


def to_engine_sql(
    statement: Statement,
    dialect: str,
    table_name: Callable[[TableRef], str],
    columns: Mapping[TableRef, Sequence[Column]] | None = None,
    snapshots: Mapping[TableRef, int] | None = None,
) -> str:
    """The select (or explained select) in ``dialect``, each table named by ``table_name``;
    ``columns``: the stored tables' columns, which the Spark translation checks types with
    and the DuckDB one types numeric operations by; ``snapshots``: the Iceberg snapshot
    each table is read at, for an engine that reads Iceberg tables itself."""
    target = statement.target
    if target._ast is None:
        raise InvalidRequest(f"{statement.kind} is answered from the metastore, not by an engine")
    refs = {_ref(table) for table in target._ast.find_all(exp.Table) if table.args.get("catalog")}
    # The same tree (a query parsed lately, statements/__init__.py) with the same tables
    # read the same way: the same translation.
    key = (
        id(target._ast),
        dialect,
        frozenset((ref, table_name(ref)) for ref in refs),
        frozenset(
            (ref, tuple((c.name, c.type) for c in cols)) for ref, cols in (columns or {}).items()
        ),
        frozenset((snapshots or {}).items()),
    )
    with _translated_lock:
        known = _translated.get(key)
    if known is not None and known[0] is target._ast:
        return known[1]
    sql = _translate(target._ast, dialect, table_name, columns, snapshots)
    with _translated_lock:
        _translated[key] = (target._ast, sql)  # the tree kept: its id is not reused meanwhile
        while len(_translated) > _TRANSLATED_KEPT:
            _translated.popitem(last=False)
    return sql


_TRANSLATED_KEPT = 512
_translated: OrderedDict[tuple[Any, ...], tuple[exp.Expr, str]] = OrderedDict()
_translated_lock = threading.Lock()


def _ref(table: exp.Table) -> TableRef:
    version = table.args.get("version")
    return TableRef(
        table.catalog, table.db, table.name, "" if version is None else version_text(version)
    )


def _translate(
    ast: exp.Expr,
    dialect: str,
    table_name: Callable[[TableRef], str],
    columns: Mapping[TableRef, Sequence[Column]] | None,
    snapshots: Mapping[TableRef, int] | None,
) -> str:
    tree = ast.copy()
    if dialect == "spark":
        types = {ref: spark.column_types(cols) for ref, cols in (columns or {}).items()}
        tree = spark.to_spark(tree, types)
    # parse_statement qualified every real table; an unqualified name is a CTE reference.
    tables = [t for t in tree.find_all(exp.Table) if t.args.get("catalog")]
    bare_names = [t.name for t in tables if not t.alias]
    for table in tables:
        ref = _ref(table)
        table.set("version", None)  # the engine reads the version its view was made of
        snapshot = (snapshots or {}).get(ref)
        if snapshot is not None:  # or the one the planner chose, by its id
            number = exp.Literal.number(snapshot)
            table.set("version", exp.Version(this="VERSION", kind="AS OF", expression=number))
        engine_table = exp.to_table(table_name(ref), dialect=dialect)
        # Columns qualified by the table's own name must keep resolving whatever the engine
        # calls it; an alias would clash if two tables share that name, so none is added then.
        renamed = engine_table.name.lower() != ref.table
        if renamed and not table.alias and bare_names.count(ref.table) == 1:
            table.set("alias", exp.TableAlias(this=exp.to_identifier(ref.table)))
        for part in ("this", "db", "catalog"):
            table.set(part, engine_table.args.get(part))
    if dialect == "duckdb":  # stored columns type operations on them (decimal division)
        stored = {
            (r.catalog, r.database, r.table): {c.name.lower(): c.type for c in cols}
            for r, cols in (columns or {}).items()
        }
        tree = duckdb.to_duckdb(tree, stored)
    try:
        # Users' comments would be re-quoted into the engine's text; they are of no use there.
        return tree.sql(dialect=dialect, unsupported_level=ErrorLevel.RAISE, comments=False)
    except UnsupportedError as e:
        raise InvalidRequest(f"the query cannot run on {dialect}: {e}") from None


# The verdicts of recent checks: dashboards and tools send the same queries again and again.
_CHECKED_KEPT = 1024
_checked: OrderedDict[tuple[str, tuple[TableRef, ...], str], InvalidRequest | None] = OrderedDict()
_checked_lock = threading.Lock()


def check_translatable(statement: Statement, engine: str) -> None:
    """Refuse, before the query is queued, what ``engine`` cannot answer as Athena would."""
    target = statement.target
    # The text and its tables, as named, make the checked tree: the same verdict.
    key = (target.sql, target.tables, engine)
    with _checked_lock:
        known, refusal = key in _checked, _checked.get(key)
    if not known:
        refusal = _refusal(target, engine)
        with _checked_lock:
            _checked[key] = refusal
            while len(_checked) > _CHECKED_KEPT:
                _checked.popitem(last=False)
    if refusal is not None:
        raise type(refusal)(refusal.message)  # a new one: each call's error is its own


def _refusal(target: Statement, engine: str) -> InvalidRequest | None:
    """Why ``engine`` cannot run ``target`` as Athena would; None if it can."""
    try:
        if target._ast is not None and engine == "duckdb":
            tree = duckdb.to_duckdb(target._ast.copy())
            try:  # what sqlglot cannot write for DuckDB is refused now, not once queued
                tree.sql(dialect="duckdb", unsupported_level=ErrorLevel.RAISE, comments=False)
            except UnsupportedError as e:
                return InvalidRequest(f"the query cannot run on duckdb: {e}")
        elif target._ast is not None and engine == "spark":
            spark.check(target._ast.copy())
    except InvalidRequest as refused:
        return refused
    return None
