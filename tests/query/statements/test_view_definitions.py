"""Views without a stack: how statements are read, and a view's stored definition both ways."""

from __future__ import annotations

import base64
import json

import pyarrow as pa
import pytest

from lakeward.errors import InvalidRequest
from lakeward.metastore.tables import VIRTUAL_VIEW, Column, TableInfo
from lakeward.query.model import ColumnInfo, TableRef
from lakeward.query.statements import parse_statement
from lakeward.query.statements.base import Command
from lakeward.query.statements.show import ShowCreateView, ShowViews
from lakeward.query.statements.views.commands import CreateView, DropView
from lakeward.query.statements.views.spark import definition
from lakeward.query.view_definitions import (
    View,
    ViewColumn,
    columns_of,
    decode,
    hive_type,
    trino_type,
)

CATALOGS = ["demo_hive_metastore", "other"]


def parse(sql: str) -> object:
    statement = parse_statement(
        sql, default_catalog="demo_hive_metastore", default_database="sales", catalogs=CATALOGS
    )
    assert isinstance(statement, Command)
    return statement


def test_statements_are_read_with_their_names_resolved() -> None:
    create = parse("CREATE OR REPLACE VIEW v COMMENT 'for BI' AS SELECT a FROM other.db.t")
    assert isinstance(create, CreateView)
    assert create.ref == TableRef("demo_hive_metastore", "sales", "v")
    assert create.or_replace and create.comment == "for BI"
    assert create.query.tables == (TableRef("other", "db", "t"),)
    assert create.catalogs() == {"demo_hive_metastore", "other"}
    drop = parse("DROP VIEW IF EXISTS db.v")
    assert isinstance(drop, DropView) and drop.if_exists and drop.ref.database == "db"
    shown = parse("SHOW VIEWS IN other.db LIKE 'a*|b*'")
    assert isinstance(shown, ShowViews)
    assert (shown.catalog, shown.database, shown.like) == ("other", "db", "a*|b*")
    assert isinstance(parse("SHOW CREATE VIEW v"), ShowCreateView)


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("CREATE VIEW v SELECT 1 AS x", r"line 1, column \d+: expected AS, found 'SELECT'"),
        ("CREATE VIEW v", r"expected AS$"),
        ("CREATE VIEW v AS", r"expected a statement"),
        ("CREATE VIEW v SECURITY DEFINER AS SELECT 1 AS x", r"SECURITY is not supported"),
        ("CREATE VIEW nope.db.v AS SELECT 1 AS x", r"catalog 'nope' is not registered"),
        ("CREATE VIEW v AS DELETE FROM t", r"DELETE statements are not allowed"),
        ("DROP VIEW v extra", r"unexpected 'extra'"),
        ("SHOW VIEWS LIKE", r"expected a quoted pattern"),
        ("CREATE PROTECTED MULTI DIALECT VIEW v SECURITY DEFINER AS SELECT 1", "Data Catalog"),
    ],
)
def test_malformed_statements_are_refused_naming_where(sql: str, message: str) -> None:
    with pytest.raises(InvalidRequest, match=message):
        parse(sql)


def stored(view: View, **changes: object) -> TableInfo:
    fields: dict[str, object] = {
        "table_type": VIRTUAL_VIEW,
        "view_original_text": view.encoded(),
        "parameters": {"presto_view": "true"},
    }
    fields.update(changes)
    return TableInfo(view.ref.database, view.ref.table, "", [Column("dummy", "string")], **fields)  # type: ignore[arg-type]


def test_the_definition_is_athenas_encoding_both_ways() -> None:
    ref = TableRef("demo_hive_metastore", "sales", "v")
    columns = (ViewColumn("n", "bigint"), ViewColumn("tags", "array(varchar)"))
    view = View(ref, "SELECT n, tags FROM t", "demo_hive_metastore", "sales", columns, "c")
    text = view.encoded()
    assert text.startswith("/* Presto View: ") and text.endswith(" */")
    payload = json.loads(base64.b64decode(text[len("/* Presto View: ") : -3]))
    assert payload["originalSql"] == "SELECT n, tags FROM t"
    assert payload["columns"] == [
        {"name": "n", "type": "bigint"},
        {"name": "tags", "type": "array(varchar)"},
    ]
    read = decode(ref, stored(view), CATALOGS)
    assert (read.sql, read.columns, read.comment, read.catalog) == (
        view.sql,
        columns,
        "c",
        ref.catalog,
    )
    # Trino's one dummy column is not the view's: DESCRIBE shows the encoded ones.
    assert columns_of(stored(view)) == [Column("n", "bigint"), Column("tags", "array<string>")]


def test_an_unknown_catalog_is_the_views_own_and_damage_is_refused() -> None:
    ref = TableRef("other", "sales", "v")
    athena = View(ref, "SELECT 1 AS x", "awsdatacatalog", "sales", (ViewColumn("x", "integer"),))
    read = decode(ref, stored(athena), CATALOGS)
    assert (read.catalog, read.named_catalog) == ("other", "awsdatacatalog")
    damaged = stored(athena, view_original_text="/* Presto View: not base64! */")
    with pytest.raises(InvalidRequest, match="sales.v cannot be read: its definition is damaged"):
        decode(ref, damaged, CATALOGS)
    spark_made = stored(athena, view_original_text="SELECT 1 AS x", parameters={})
    with pytest.raises(InvalidRequest, match="was not made by Athena, Trino or lakeward"):
        decode(ref, spark_made, CATALOGS)


def test_types_between_athena_trino_and_hive() -> None:
    assert trino_type(ColumnInfo(name="d", type="decimal", precision=38, scale=2), None) == (
        "decimal(38,2)"
    )
    assert trino_type(ColumnInfo(name="t", type="timestamp"), None) == "timestamp(3)"
    assert trino_type(ColumnInfo(name="f", type="float"), None) == "real"
    nested = pa.struct([("a", pa.int64()), ("b", pa.list_(pa.string()))])
    assert trino_type(ColumnInfo(name="r", type="row"), nested) == "row(a bigint, b array(varchar))"
    with pytest.raises(InvalidRequest, match="cannot be known without rows"):
        trino_type(ColumnInfo(name="r", type="map"), None)
    assert hive_type("row(a bigint, b array(varchar))") == "struct<a:bigint,b:array<string>>"
    assert hive_type("map(varchar, double)") == "map<string,double>"
    assert hive_type("decimal(10,2)") == "decimal(10,2)"
    assert hive_type("json") == "string"


def test_what_spark_cannot_read_gets_a_text_that_says_why() -> None:
    ref = TableRef("demo_hive_metastore", "sales", "v")
    create = parse("CREATE VIEW v AS SELECT a FROM other.db.t")
    assert isinstance(create, CreateView)
    view = View(ref, "SELECT a FROM other.db.t", ref.catalog, "sales", (ViewColumn("a", "bigint"),))

    def lookup(table: TableRef) -> TableInfo:
        return TableInfo(table.database, table.table, "file:/x", [Column("a", "bigint")])

    text, properties = definition(view, create.query, lookup)
    assert text.startswith("SELECT NULL AS `a` WHERE RAISE_ERROR('view sales.v cannot be read")
    assert "a table of another catalog" in text
    assert properties["view.query.out.col.0"] == "a"
    assert properties["view.sqlConfig.spark.sql.ansi.enabled"] == "true"
    assert properties["view.catalogAndNamespace.part.1"] == "sales"
