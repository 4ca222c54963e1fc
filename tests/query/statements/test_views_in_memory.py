"""Views on the in-memory catalog: refused statements that change nothing, views that go
stale when their table changes, views Athena made, and permissions as Athena checks them.
The stack's tests (test_views.py) keep Athena's clients, both engines and Spark's own reads.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from lakeward.access.arns import (
    catalog_arn,
    glue_catalog_arn,
    glue_database_arn,
    glue_table_arn,
    s3_arn,
    workgroup_arn,
)
from lakeward.errors import InvalidRequest
from lakeward.metastore.tables import VIRTUAL_VIEW, Column, TableInfo
from lakeward.query.catalogs.base import Catalog
from lakeward.query.service import QueryService
from tests.query.support import MEMORY, failure, run

# Italy's confirmed cases on 2020-09-10 and 2020-12-31 in the JHU files (the country's row).
ITALY_0910, ITALY_1231 = "283180", "2107166"
ON_0910 = "country = 'Italy' AND date = DATE '2020-09-10'"


def rows(service: QueryService, sql: str, user: str = "analyst") -> list[list[str | None]]:
    return run(service, sql, catalog=MEMORY, database="sales", principal=user)[1]


def fails(service: QueryService, sql: str, user: str = "analyst") -> str:
    return failure(service, sql, catalog=MEMORY, database="sales", principal=user)


def catalog(service: QueryService) -> Catalog:
    return service.catalogs.catalog(MEMORY)


def test_refused_statements_change_nothing(sales: QueryService) -> None:
    location = catalog(sales).load_table("sales", "covid").location
    rows(sales, f"CREATE EXTERNAL TABLE a_table (n bigint) STORED AS PARQUET LOCATION '{location}'")
    rows(sales, "CREATE VIEW base AS SELECT country, confirmed FROM covid")
    rows(sales, "CREATE VIEW above AS SELECT country FROM base")
    before = catalog(sales).load_table("sales", "base")

    assert "no_such_table' does not exist" in fails(
        sales, "CREATE VIEW ghost AS SELECT * FROM no_such_table"
    )
    for create in ("CREATE VIEW", "CREATE OR REPLACE VIEW"):
        refused = fails(sales, f"{create} a_table AS SELECT 1 AS x")
        assert f"Table already exists: '{MEMORY}.sales.a_table'" in refused
    assert "Did you mean DROP TABLE" in fails(sales, "DROP VIEW a_table")
    assert catalog(sales).load_table("sales", "a_table").table_type == "EXTERNAL_TABLE"
    assert "does not exist" in fails(sales, "DROP VIEW ghost")
    assert rows(sales, "DROP VIEW IF EXISTS ghost") == []
    unnamed = fails(sales, "CREATE VIEW ghost AS SELECT country, count(*) FROM base GROUP BY 1")
    assert "Column name not specified at position 2" in unnamed
    twice = fails(sales, "CREATE VIEW ghost AS SELECT country, confirmed AS country FROM base")
    assert "Column name 'country' specified more than once" in twice
    assert "cannot read itself" in fails(sales, "CREATE OR REPLACE VIEW base AS SELECT * FROM base")
    recursive = fails(
        sales, "CREATE OR REPLACE VIEW base AS SELECT country, 0 AS confirmed FROM above"
    )
    assert "recursive: sales.base -> sales.above -> sales.base" in recursive
    with pytest.raises(InvalidRequest, match=r"line 1, column \d+: expected AS"):
        sales.start_query_execution(
            "CREATE VIEW ghost SELECT 1 AS x", catalog=MEMORY, database="sales"
        )
    assert not catalog(sales).table_exists("sales", "ghost")
    assert catalog(sales).load_table("sales", "base") == before
    assert catalog(sales).views("sales") == ["above", "base"]


def test_a_view_whose_table_changed_its_columns_is_stale(sales: QueryService) -> None:
    location = catalog(sales).load_table("sales", "covid").location
    make = (
        "CREATE EXTERNAL TABLE changing (province_state string, country string, lat double, "
        f"date date, confirmed bigint) STORED AS PARQUET LOCATION '{location}'"
    )
    rows(sales, make)
    query = f"SELECT confirmed FROM named WHERE {ON_0910}"
    rows(sales, "CREATE VIEW named AS SELECT country, date, confirmed FROM changing")
    rows(sales, "CREATE VIEW starred AS SELECT * FROM changing")
    assert rows(sales, query) == [[ITALY_0910]]
    # A column added at the end: the view naming its columns reads on, `*` does not.
    rows(sales, "ALTER TABLE changing ADD COLUMNS (source string)")
    assert rows(sales, query) == [[ITALY_0910]]
    stale = fails(sales, "SELECT count(*) FROM starred")
    assert f"View '{MEMORY}.sales.starred' is stale: sales.changing changed" in stale
    # A column's type changed: both are stale, and the table made anew reads again.
    rows(
        sales,
        "ALTER TABLE changing REPLACE COLUMNS (province_state string, country string, "
        "lat double, date date, confirmed double, source string)",
    )
    assert "is stale" in fails(sales, query)
    rows(sales, "DROP TABLE changing")  # external: its files stay
    rows(sales, make)
    assert rows(sales, query) == [[ITALY_0910]]
    assert rows(sales, f"SELECT count(*) FROM starred WHERE {ON_0910}") == [["1"]]


def test_a_view_athena_made_is_read(sales: QueryService) -> None:
    definition = {
        # Named in full with the creator's catalog, which lakeward reads as the view's own.
        "originalSql": 'SELECT country, confirmed FROM "awsdatacatalog"."sales"."covid" '
        "WHERE date = DATE '2020-12-31' AND province_state IS NULL",
        "catalog": "awsdatacatalog",  # Athena's name for its catalog; here the view's own
        "schema": "sales",
        "columns": [
            {"name": "country", "type": "varchar"},
            {"name": "confirmed", "type": "bigint"},
        ],
        "owner": "arn:aws:iam::123456789012:user/analyst",
        "runAsInvoker": False,
    }
    encoded = base64.b64encode(json.dumps(definition).encode()).decode()
    # As Trino's Hive connector stores a view: one dummy column, the marker as expanded text.
    catalog(sales).put_view(
        TableInfo(
            "sales",
            "athena_made",
            "",
            [Column("dummy", "string")],
            table_type=VIRTUAL_VIEW,
            parameters={"presto_view": "true", "comment": "Presto View"},
            view_original_text=f"/* Presto View: {encoded} */",
            view_expanded_text="/* Presto View */",
        ),
        replace=False,
    )
    italy = rows(sales, "SELECT confirmed FROM athena_made WHERE country = 'Italy'")
    assert italy == [[ITALY_1231]]
    described = rows(sales, "DESCRIBE athena_made")
    assert described == [["country\tstring"], ["confirmed\tbigint"]]
    assert rows(sales, "SHOW COLUMNS FROM athena_made") == [
        ["country".ljust(20)],
        ["confirmed".ljust(20)],
    ]
    assert ["athena_made"] in rows(sales, "SHOW VIEWS")
    listed = sales.list_table_metadata(MEMORY, "sales", "athena_made")
    assert [(c.name, c.type) for c in listed[0].columns] == [
        ("country", "string"),
        ("confirmed", "bigint"),
    ]
    assert listed[0].table_type == "VIRTUAL_VIEW"


def allow(actions: list[str], resources: list[str]) -> dict[str, Any]:
    return {"Effect": "Allow", "Action": actions, "Resource": resources}


def test_permissions_as_athena_checks_them(sales: QueryService) -> None:
    bucket = sales.settings.lake.data_bucket
    glue = [
        glue_catalog_arn(MEMORY),
        glue_database_arn(MEMORY, "sales"),
        glue_table_arn(MEMORY, "*", "*"),
    ]
    policies = {
        "Query": [
            allow(["athena:*"], [workgroup_arn("primary")]),
            allow(["lakeward:UseCatalog"], [catalog_arn("*")]),
            allow(["s3:PutObject", "s3:GetObject"], [s3_arn(bucket, "query-results/*")]),
        ],
        "ReadData": [allow(["s3:GetObject"], [s3_arn(bucket, "*")])],
        "ReadGlue": [allow(["glue:GetTable", "glue:GetTables"], glue)],
        "CreateViews": [allow(["glue:CreateTable"], glue)],
    }
    principals = sales.access.principals  # type: ignore[attr-defined]
    for name, statements in policies.items():
        principals.create_policy(name, {"Version": "2012-10-17", "Statement": statements})
    users = {
        "reader": ["Query", "ReadData", "ReadGlue"],
        "no_glue": ["Query", "ReadData"],
        "no_data": ["Query", "ReadGlue"],
        "maker": ["Query", "ReadData", "ReadGlue", "CreateViews"],
    }
    for user, attached in users.items():
        principals.create_user(user)
        for name in attached:
            principals.attach_user_policy(user, name)

    sql = "CREATE VIEW guarded AS SELECT country, date, confirmed FROM covid"
    assert "glue:CreateTable" in fails(sales, sql, "reader")
    assert not catalog(sales).table_exists("sales", "guarded")
    assert rows(sales, sql, "maker") == []
    before = catalog(sales).load_table("sales", "guarded")
    replaced = fails(sales, "CREATE OR REPLACE VIEW guarded AS SELECT 1 AS x", "maker")
    assert "glue:UpdateTable" in replaced
    assert "glue:DeleteTable" in fails(sales, "DROP VIEW guarded", "maker")
    assert catalog(sales).load_table("sales", "guarded") == before

    query = f"SELECT confirmed FROM guarded WHERE {ON_0910}"
    assert rows(sales, query, "reader") == [[ITALY_0910]]
    # The view's own metadata, then the data under it, as the reader's.
    assert "glue:GetTable" in fails(sales, query, "no_glue")
    assert "s3:GetObject" in fails(sales, query, "no_data")
    assert rows(sales, "SELECT count(*) FROM covid WHERE country = 'Italy'", "no_glue") != []
