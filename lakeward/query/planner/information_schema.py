"""``information_schema``: each catalog's databases, tables, views and columns, as Trino
(and so Athena) answers them, for BI tools' schema browsers and dbt.

A query naming ``<catalog>.information_schema.<table>`` reads rows made from the
catalog's metadata when the query is planned: the table reference is replaced by an
inline ``VALUES`` relation, typed as Trino types these tables, before the query is
translated. So both engines answer it the same way, and a query may join these tables
with real ones. A caller sees only the databases they may list (``glue:GetDatabase``) and
the tables of those they may read the tables of (``glue:GetTables``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sqlglot import exp

from lakeward.access.arns import glue_database_arn
from lakeward.errors import LakewardError
from lakeward.metastore.tables import VIRTUAL_VIEW, Column, TableInfo
from lakeward.query.catalogs import Catalogs
from lakeward.query.model import TableRef
from lakeward.query.sql.names import INFORMATION_SCHEMA, INFORMATION_SCHEMA_TABLES
from lakeward.query.sql.queries import Statement
from lakeward.query.types import HiveType, parse_hive_type
from lakeward.query.view_definitions import decode, described

Allowed = Callable[[str, str], bool]
Row = tuple[object, ...]

# Each table's columns (Trino's names and types), in Trino's order.
COLUMNS: dict[str, list[tuple[str, str]]] = {
    "schemata": [("catalog_name", "varchar"), ("schema_name", "varchar")],
    "tables": [
        ("table_catalog", "varchar"),
        ("table_schema", "varchar"),
        ("table_name", "varchar"),
        ("table_type", "varchar"),
    ],
    "views": [
        ("table_catalog", "varchar"),
        ("table_schema", "varchar"),
        ("table_name", "varchar"),
        ("view_definition", "varchar"),
    ],
    "columns": [
        ("table_catalog", "varchar"),
        ("table_schema", "varchar"),
        ("table_name", "varchar"),
        ("column_name", "varchar"),
        ("ordinal_position", "bigint"),
        ("column_default", "varchar"),
        ("is_nullable", "varchar"),
        ("data_type", "varchar"),
        ("comment", "varchar"),
        ("extra_info", "varchar"),
    ],
}
assert set(COLUMNS) == set(INFORMATION_SCHEMA_TABLES)

_TRINO = {
    "string": "varchar", "int": "integer", "float": "real", "binary": "varbinary",
    "timestamp": "timestamp(3)", "timestamp_ntz": "timestamp(3)", "struct": "row",
}  # fmt: skip


def trino_type(hive_type: str) -> str:
    """A Hive column type as Trino names it (``array<string>`` is ``array(varchar)``)."""
    try:
        return _trino(parse_hive_type(hive_type))
    except ValueError:
        return hive_type


def _trino(parsed: HiveType) -> str:
    name = _TRINO.get(parsed.name, parsed.name)
    if parsed.name == "struct":
        fields = ", ".join(
            f"{f} {_trino(a)}" for f, a in zip(parsed.fields, parsed.args, strict=True)
        )
        return f"row({fields})"
    if parsed.args:
        return f"{name}({', '.join(_trino(a) for a in parsed.args)})"
    if parsed.params:
        return f"{name}({','.join(map(str, parsed.params))})"
    return name


def inline(catalogs: Catalogs, statement: Statement, allowed: Allowed) -> Statement:
    """``statement`` with each information_schema table it names replaced by its rows."""
    wanted = [r for r in statement.tables if r.database == INFORMATION_SCHEMA]
    if not wanted or statement._ast is None:
        return statement
    tree = statement._ast.copy()
    rows = {ref: _rows(catalogs, ref, allowed) for ref in wanted}
    for table in list(tree.find_all(exp.Table)):
        ref = TableRef(table.catalog, table.db, table.name) if table.args.get("catalog") else None
        if ref in rows:
            alias = table.alias or ref.table
            table.replace(_relation(ref.table, rows[ref], alias))
    tables = tuple(r for r in statement.tables if r not in rows)
    return Statement(statement.kind, statement.statement_type, statement.sql, tables,
                     statement.explained, tree)  # fmt: skip


def _relation(name: str, rows: list[Row], alias: str) -> exp.Expression:
    columns = COLUMNS[name]
    typed = ", ".join(f"CAST({c} AS {t}) AS {c}" for c, t in columns)
    if rows:
        values = ", ".join("(" + ", ".join(_literal(v) for v in row) + ")" for row in rows)
        names = ", ".join(c for c, _ in columns)
        source = f"(VALUES {values}) AS _v({names})"
        sql = f"SELECT {typed} FROM {source}"
    else:
        nulls = ", ".join(f"CAST(NULL AS {t}) AS {c}" for c, t in columns)
        sql = f"SELECT {nulls} WHERE false"
    query: exp.Expression = exp.maybe_parse(sql, dialect="athena")
    return exp.Subquery(this=query, alias=exp.TableAlias(this=exp.to_identifier(alias)))


def _literal(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, int):
        return str(value)
    return "'" + str(value).replace("'", "''") + "'"


def _rows(catalogs: Catalogs, ref: TableRef, allowed: Allowed) -> list[Row]:
    catalog_name = ref.catalog
    catalog = catalogs.catalog(catalog_name)
    with catalog.lookup():
        databases = [
            d for d in sorted(catalog.databases())
            if allowed("glue:GetDatabase", glue_database_arn(catalog_name, d))
        ]  # fmt: skip
        if ref.table == "schemata":
            return [(catalog_name, d) for d in [*databases, INFORMATION_SCHEMA]]
        found: list[Row] = []
        if ref.table == "tables":
            own = [(catalog_name, INFORMATION_SCHEMA, t, "BASE TABLE") for t in COLUMNS]
            found.extend(sorted(own))
        for database in databases:
            if not allowed("glue:GetTables", glue_database_arn(catalog_name, database)):
                continue
            for name in sorted(catalog.tables(database)):
                try:
                    info = catalog.table(database, name)
                except LakewardError:
                    continue  # dropped meanwhile
                view = info.table_type == VIRTUAL_VIEW
                if ref.table == "tables":
                    kind = "VIEW" if view else "BASE TABLE"
                    found.append((catalog_name, database, name, kind))
                elif ref.table == "views" and view:
                    view_ref = TableRef(catalog_name, database, name)
                    found.append((catalog_name, database, name, _view_sql(view_ref, info)))
                elif ref.table == "columns":
                    found.extend(_columns(catalog_name, database, name, info))
    return found


def _view_sql(ref: TableRef, info: TableInfo) -> str | None:
    try:
        return decode(ref, info, ()).sql
    except LakewardError:
        return None  # a view Athena cannot read (Hive's or Spark's) has no definition here


def _columns(catalog: str, database: str, name: str, info: TableInfo) -> list[Row]:
    shown = described(info)
    keyed: Sequence[tuple[Column, str | None]] = [
        *[(c, None) for c in shown.columns],
        *[(k, "partition key") for k in shown.partition_keys],
    ]
    return [
        (catalog, database, name, column.name, position, None, "YES",
         trino_type(column.type), column.comment, extra)
        for position, (column, extra) in enumerate(keyed, start=1)
    ]  # fmt: skip
