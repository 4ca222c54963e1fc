"""Views on the real stack: made with CREATE VIEW through Athena's clients, read by lakeward on
both engines and by a plain Spark session on the same metastore, and views Athena made."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from lakeward.access import current_principal
from lakeward.access.arns import (
    catalog_arn,
    glue_catalog_arn,
    glue_database_arn,
    glue_table_arn,
    s3_arn,
    workgroup_arn,
)
from lakeward.access.control import AccessControl
from lakeward.config import Settings
from lakeward.errors import InvalidRequest
from lakeward.metastore.client import MetastoreClient
from lakeward.metastore.tables import VIRTUAL_VIEW, Column, TableInfo
from lakeward.metastore.uris import metastore_uris
from lakeward.query.model import QueryState
from lakeward.query.service import QueryService
from lakeward.storage.paths import warehouse_uri
from tests.helpers import over_stack
from tests.query.support import credentials, endpoint

pytestmark = pytest.mark.spark

DB = "views_test"
CATALOG = "demo_hive_metastore"
# Italy's deaths on 2020-09-10 and 2020-12-31 in the JHU files (the country's own row).
ITALY_0910, ITALY_1231 = "35587", "74159"


@pytest.fixture(scope="module", autouse=True)
def views_database(stack: Settings, metastore: MetastoreClient) -> Iterator[None]:
    metastore.create_database(DB, f"{warehouse_uri(stack)}/{DB}.db")
    try:
        yield
    finally:
        metastore.drop_database(DB, cascade=True)


@pytest.fixture(autouse=True)
def no_views_left(views_database: None, metastore: MetastoreClient) -> Iterator[None]:
    """Each test starts with no view in the database, whatever the one before it left."""
    yield
    for name in metastore.views(DB):
        metastore.drop_table(DB, name)


def finish(service: QueryService, sql: str, **kwargs: Any) -> Any:
    execution_id = service.start_query_execution(sql, database=DB, **kwargs)
    deadline = time.monotonic() + 300
    while not (execution := service.get_query_execution(execution_id)).state.done:
        assert time.monotonic() < deadline, execution
        time.sleep(0.02)
    return execution


def rows(service: QueryService, sql: str, **kwargs: Any) -> list[list[str | None]]:
    execution = finish(service, sql, **kwargs)
    assert execution.state == QueryState.SUCCEEDED, execution.state_change_reason
    page = service.get_query_results(execution.id, None, 1000)
    found = page.rows
    if execution.statement_type.value == "DML":
        found = found[1:]  # Athena's labels row
    return found


def fails(service: QueryService, sql: str, **kwargs: Any) -> str:
    execution = finish(service, sql, **kwargs)
    assert execution.state == QueryState.FAILED, sql
    return str(execution.state_change_reason)


def spark_rows(spark: Any, sql: str) -> list[list[str | None]]:
    return [[None if v is None else str(v) for v in row] for row in spark.sql(sql).collect()]


# -- through Athena's clients ------------------------------------------------------------


def athena_run(athena: Any, sql: str) -> list[list[str | None]]:
    started = athena.start_query_execution(
        QueryString=sql,
        QueryExecutionContext={"Catalog": CATALOG, "Database": DB},
        ResultConfiguration={"OutputLocation": "s3://staging/"},
    )
    execution_id = started["QueryExecutionId"]
    while True:
        execution = athena.get_query_execution(QueryExecutionId=execution_id)["QueryExecution"]
        if execution["Status"]["State"] in ("SUCCEEDED", "FAILED", "CANCELLED"):
            break
        time.sleep(0.05)
    if execution["Status"]["State"] != "SUCCEEDED":
        raise AssertionError(execution["Status"].get("StateChangeReason"))
    result = athena.get_query_results(QueryExecutionId=execution_id)["ResultSet"]
    found = [[d.get("VarCharValue") for d in r["Data"]] for r in result["Rows"]]
    return found[1:] if execution["StatementType"] == "DML" else found


def test_create_read_show_describe_and_drop_a_view_through_boto3(
    stack: Settings, metastore: MetastoreClient
) -> None:
    import boto3

    athena = boto3.client("athena", endpoint_url=endpoint(stack), **credentials(stack))
    assert (
        athena_run(
            athena,
            "CREATE VIEW italy AS SELECT date, deaths FROM default.covid_deaths "
            "WHERE country = 'Italy' AND province_state IS NULL",
        )
        == []
    )
    assert athena_run(athena, "SELECT deaths FROM italy WHERE date = DATE '2020-09-10'") == [
        [ITALY_0910]
    ]
    assert athena_run(athena, f"SHOW VIEWS IN {DB}") == [["italy"]]
    assert athena_run(athena, "SHOW VIEWS LIKE 'spain|ita*'") == [["italy"]]
    assert athena_run(athena, "SHOW VIEWS LIKE 'it'") == []
    assert ["italy"] in athena_run(athena, f"SHOW TABLES IN {DB}")  # Athena lists views too
    assert athena_run(athena, "DESCRIBE italy") == [["date\tdate"], ["deaths\tbigint"]]
    created = athena_run(athena, "SHOW CREATE VIEW italy")
    assert created[0] == [f'CREATE VIEW "{CATALOG}"."{DB}"."italy" AS']
    tables = athena.list_table_metadata(CatalogName=CATALOG, DatabaseName=DB)
    assert "italy" in [t["Name"] for t in tables["TableMetadataList"]]

    assert athena_run(athena, "DROP VIEW italy") == []
    assert not metastore.table_exists(DB, "italy")
    with pytest.raises(AssertionError, match=r"italy does not exist"):
        athena_run(athena, "SELECT * FROM italy")


def test_or_replace_and_views_of_views_through_pyathena(
    stack: Settings, metastore: MetastoreClient
) -> None:
    from pyathena import connect

    cursor = connect(
        s3_staging_dir="s3://staging/",
        endpoint_url=endpoint(stack),
        poll_interval=0.05,
        catalog_name=CATALOG,
        schema_name=DB,
        **credentials(stack),
    ).cursor()
    cursor.execute(
        "CREATE VIEW by_day AS SELECT country, date, sum(deaths) AS n "
        "FROM default.covid_deaths GROUP BY country, date"
    )
    cursor.execute(
        "CREATE VIEW year_end AS SELECT country, n FROM by_day WHERE date = DATE '2020-12-31'"
    )
    cursor.execute("SELECT n FROM year_end WHERE country = 'Italy'")
    assert cursor.fetchall() == [(int(ITALY_1231),)]

    with pytest.raises(Exception, match="View already exists"):
        cursor.execute("CREATE VIEW by_day AS SELECT 1 AS n")
    cursor.execute(
        "CREATE OR REPLACE VIEW by_day AS SELECT country, date, sum(confirmed) AS n "
        "FROM default.covid_confirmed_cases GROUP BY country, date"
    )
    cursor.execute(
        "SELECT sum(confirmed) FROM default.covid_confirmed_cases "
        "WHERE country = 'Italy' AND date = DATE '2020-12-31'"
    )
    confirmed = cursor.fetchall()
    cursor.execute("SELECT n FROM year_end WHERE country = 'Italy'")  # reads the new by_day
    assert cursor.fetchall() == confirmed != [(int(ITALY_1231),)]
    # SQLAlchemy's inspector finds views by their table type in ListTableMetadata.
    from sqlalchemy import create_engine, inspect

    url = (
        "awsathena+rest://{aws_access_key_id}:{aws_secret_access_key}@athena.us-east-1."
        "amazonaws.com:443/{database}?s3_staging_dir=s3%3A%2F%2Fstaging%2F&catalog_name="
        "{catalog}&endpoint_url={endpoint}&poll_interval=0.05"
    ).format(endpoint=endpoint(stack), database=DB, catalog=CATALOG, **credentials(stack))
    assert sorted(inspect(create_engine(url)).get_view_names(schema=DB)) == ["by_day", "year_end"]
    cursor.execute("DROP VIEW year_end")
    cursor.execute("DROP VIEW by_day")
    assert metastore.views(DB) == []


# -- both engines, and a plain Spark session ----------------------------------------------------

VIEWS = {
    # Trino's integer division truncates: Spark's / would give 74.159 for Italy.
    "thousands": "SELECT country, sum(deaths) / 1000 AS thousands, count(*) AS n "
    "FROM default.covid_deaths WHERE date = DATE '2020-12-31' GROUP BY country",
    "thousands_top": "SELECT country, thousands FROM thousands WHERE thousands >= 50",
    "with_cte": "WITH d AS (SELECT country, deaths FROM default.covid_deaths "
    "WHERE date = DATE '2020-09-10' AND province_state IS NULL) "
    "SELECT t.country, d.deaths, t.thousands FROM d JOIN thousands_top t ON d.country = t.country",
}


def test_a_spark_session_reads_the_views_with_lakewards_rows(
    service: QueryService, spark: Any
) -> None:
    for name, sql in VIEWS.items():  # one made in the Spark workgroup: typed by Spark
        group = "big" if name == "thousands_top" else None
        assert rows(service, f"CREATE VIEW {name} AS {sql}", workgroup=group) == []
    for name in VIEWS:
        query = f"SELECT * FROM {DB}.{name} ORDER BY country"
        duckdb = rows(service, query)
        assert duckdb, name
        assert rows(service, query, workgroup="big") == duckdb, name
        # A session with Spark's own settings (not ANSI): the view carries the engine's.
        assert spark.conf.get("spark.sql.ansi.enabled") == "false"
        assert spark_rows(spark, query) == duckdb, name
    plan = rows(service, "EXPLAIN SELECT * FROM thousands_top")  # the plan of the views' SQL
    assert "2020-12-31" in "\n".join(r[0] or "" for r in plan)
    italy = rows(service, f"SELECT thousands FROM {DB}.thousands WHERE country = 'Italy'")
    assert italy == [[str(int(ITALY_1231) // 1000)]]
    joined = rows(service, "SELECT deaths FROM with_cte WHERE country = 'Italy'")
    assert joined == [[ITALY_0910]]
    assert spark_rows(spark, f"DESCRIBE {DB}.thousands")[:3] == [
        ["country", "string", None],
        ["thousands", "bigint", None],
        ["n", "bigint", None],
    ]
    for name in reversed(VIEWS):
        rows(service, f"DROP VIEW {name}")


def test_what_spark_cannot_answer_as_athena_is_stored_and_spark_says_why(
    service: QueryService, spark: Any, stack: Settings
) -> None:
    from lakeward.query.model import DataCatalog

    hashed = (
        "CREATE VIEW hashed AS SELECT country, to_hex(md5(to_utf8(country))) AS h "
        "FROM default.covid_deaths WHERE date = DATE '2020-12-31' AND country = 'Italy'"
    )
    rows(service, hashed)
    assert rows(service, "SELECT * FROM hashed") == [["Italy", "1007E1B7F894DFBF72A0EAA80F3BC57E"]]
    with pytest.raises(Exception, match="to_hex is not supported on the Spark engine") as refused:
        spark.sql(f"SELECT count(*) FROM {DB}.hashed").collect()
    assert "view views_test.hashed cannot be read by Spark" in str(refused.value)

    uris = ",".join(metastore_uris(stack))
    service.create_data_catalog(DataCatalog("other_hive", "HIVE", "", {"metastore-uris": uris}))
    try:
        rows(service, "CREATE VIEW elsewhere AS SELECT country, deaths "
             "FROM other_hive.default.covid_deaths WHERE date = DATE '2020-09-10' "
             "AND country = 'Italy' AND province_state IS NULL")  # fmt: skip
        assert rows(service, "SELECT deaths FROM elsewhere") == [[ITALY_0910]]
        with pytest.raises(Exception, match="a table of another catalog"):
            spark.sql(f"SELECT * FROM {DB}.elsewhere").collect()
    finally:
        rows(service, "DROP VIEW IF EXISTS elsewhere")
        service.delete_data_catalog("other_hive")
    rows(service, "DROP VIEW hashed")


def test_a_view_athena_made_in_the_metastore_is_read(
    service: QueryService, metastore: MetastoreClient
) -> None:
    definition = {
        # Named in full with the creator's catalog, which lakeward reads as the view's own.
        "originalSql": 'SELECT country, deaths FROM "awsdatacatalog"."default"."covid_deaths" '
        "WHERE date = DATE '2020-12-31' AND province_state IS NULL",
        "catalog": "awsdatacatalog",  # Athena's name for its catalog; here the view's own
        "schema": DB,
        "columns": [{"name": "country", "type": "varchar"}, {"name": "deaths", "type": "bigint"}],
        "owner": "arn:aws:iam::123456789012:user/analyst",
        "runAsInvoker": False,
    }
    encoded = base64.b64encode(json.dumps(definition).encode()).decode()
    # As Trino's Hive connector stores a view: one dummy column, the marker as expanded text.
    metastore.put_view(
        TableInfo(
            DB,
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
    try:
        assert rows(service, "SELECT deaths FROM athena_made WHERE country = 'Italy'") == [
            [ITALY_1231]
        ]
        assert rows(service, "DESCRIBE athena_made") == [["country\tstring"], ["deaths\tbigint"]]
        assert rows(service, "SHOW COLUMNS FROM athena_made") == [["country"], ["deaths"]]
        assert ["athena_made"] in rows(service, "SHOW VIEWS")
        listed = service.list_table_metadata(CATALOG, DB, "athena_made")
        assert [(c.name, c.type) for c in listed[0].columns] == [
            ("country", "string"),
            ("deaths", "bigint"),
        ]
        assert listed[0].table_type == "VIRTUAL_VIEW"
    finally:
        metastore.drop_table(DB, "athena_made")


def test_a_view_spark_made_is_refused_as_athena_refuses_it(
    service: QueryService, spark: Any, metastore: MetastoreClient
) -> None:
    spark.sql(f"CREATE VIEW {DB}.spark_made AS SELECT 1 AS x")
    try:
        reason = fails(service, "SELECT * FROM spark_made")
        assert "spark_made was not made by Athena, Trino or lakeward" in reason
    finally:
        metastore.drop_table(DB, "spark_made")


def test_refused_statements_change_nothing(
    service: QueryService, metastore: MetastoreClient
) -> None:
    table = replace(metastore.table("default", "covid_deaths"), database=DB, name="a_table")
    metastore.put_external_table(table)
    rows(service, "CREATE VIEW base AS SELECT country, deaths FROM default.covid_deaths")
    rows(service, "CREATE VIEW above AS SELECT country FROM base")
    before = metastore.table(DB, "base")
    try:
        missing = fails(service, "CREATE VIEW ghost AS SELECT * FROM default.no_such_table")
        assert "no_such_table does not exist" in missing
        for create in ("CREATE VIEW", "CREATE OR REPLACE VIEW"):
            sql = f"{create} a_table AS SELECT 1 AS x"
            assert f"Table already exists: '{CATALOG}.{DB}.a_table'" in fails(service, sql)
        assert "Did you mean DROP TABLE" in fails(service, "DROP VIEW a_table")
        assert metastore.table(DB, "a_table").table_type == "EXTERNAL_TABLE"
        assert "does not exist" in fails(service, "DROP VIEW ghost")
        assert rows(service, "DROP VIEW IF EXISTS ghost") == []
        unnamed = fails(
            service, "CREATE VIEW ghost AS SELECT country, count(*) FROM base GROUP BY 1"
        )
        assert "Column name not specified at position 2" in unnamed
        twice = fails(service, "CREATE VIEW ghost AS SELECT country, deaths AS country FROM base")
        assert "Column name 'country' specified more than once" in twice
        assert "cannot read itself" in fails(
            service, "CREATE OR REPLACE VIEW base AS SELECT * FROM base"
        )
        recursive = fails(
            service, "CREATE OR REPLACE VIEW base AS SELECT country, 0 AS deaths FROM above"
        )
        assert "recursive: views_test.base -> views_test.above -> views_test.base" in recursive
        with pytest.raises(InvalidRequest, match=r"line 1, column \d+: expected AS"):
            service.start_query_execution("CREATE VIEW ghost SELECT 1 AS x", database=DB)
        assert not metastore.table_exists(DB, "ghost")
        assert metastore.table(DB, "base") == before
        assert sorted(metastore.views(DB)) == ["above", "base"]
    finally:
        for name in ("above", "base", "a_table"):
            metastore.drop_table(DB, name)


def test_a_view_whose_table_changed_its_columns_is_stale(
    service: QueryService, metastore: MetastoreClient
) -> None:
    table = replace(metastore.table("default", "covid_deaths"), database=DB, name="changing")
    metastore.put_external_table(table)
    query = "SELECT deaths FROM named WHERE country = 'Italy' AND date = DATE '2020-09-10'"
    try:
        rows(service, "CREATE VIEW named AS SELECT country, date, deaths FROM changing")
        rows(service, "CREATE VIEW starred AS SELECT * FROM changing")
        assert rows(service, query) == [[ITALY_0910]]
        # A column added at the end: the view naming its columns reads on, `*` does not.
        extra = Column("source", "string")
        metastore.put_external_table(replace(table, columns=[*table.columns, extra]))
        assert rows(service, query) == [[ITALY_0910]]
        stale = fails(service, "SELECT count(*) FROM starred")
        assert f"View '{CATALOG}.{DB}.starred' is stale: {DB}.changing changed" in stale
        # A column's type changed: both are stale, and re-creating one reads again.
        widened = [replace(c, type="double") if c.name == "deaths" else c for c in table.columns]
        metastore.put_external_table(replace(table, columns=widened))
        assert "is stale" in fails(service, query)
        metastore.drop_table(DB, "changing")  # made anew with the columns the views read
        metastore.put_external_table(table)
        assert rows(service, query) == [[ITALY_0910]]
        assert rows(service, "SELECT count(*) FROM starred WHERE country = 'Italy'") != []
    finally:
        for name in ("named", "starred", "changing"):
            metastore.drop_table(DB, name)


# -- permissions ------------------------------------------------------------------------------


def allow(*statements: tuple[list[str], list[str]]) -> dict[str, object]:
    return {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": a, "Resource": r} for a, r in statements],
    }


@pytest.fixture(scope="module")
def guarded(
    stack: Settings, metastore: MetastoreClient, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[QueryService]:
    settings = over_stack(stack, tmp_path_factory.mktemp("views-access"))
    Path(settings.data_dir).mkdir(parents=True, exist_ok=True)
    access = AccessControl(settings)
    bucket = stack.lake.data_bucket
    principals = access.principals
    glue = [
        glue_catalog_arn(CATALOG),
        glue_database_arn(CATALOG, DB),
        glue_table_arn(CATALOG, "*", "*"),
    ]
    principals.create_policy("Query", allow(
        (["athena:*"], [workgroup_arn("primary")]),
        (["lakeward:UseCatalog"], [catalog_arn("*")]),
        (["s3:PutObject", "s3:GetObject"], [s3_arn(bucket, "query-results/*")]),
    ))  # fmt: skip
    principals.create_policy("ReadData", allow((["s3:GetObject"], [s3_arn(bucket, "*")])))
    principals.create_policy("ReadGlue", allow((["glue:GetTable", "glue:GetTables"], glue)))
    principals.create_policy("CreateViews", allow((["glue:CreateTable"], glue)))
    users = {
        "analyst": ["Query", "ReadData", "ReadGlue"],
        "no_glue": ["Query", "ReadData"],
        "no_data": ["Query", "ReadGlue"],
        "maker": ["Query", "ReadData", "ReadGlue", "CreateViews"],
    }
    for user, policies in users.items():
        principals.create_user(user)
        for policy in policies:
            principals.attach_user_policy(user, policy)
    service = QueryService(settings, access=access, owner=True)
    yield service
    service.close()


def as_user(user: str, run: Any, *args: Any) -> Any:
    token = current_principal.set(user)
    try:
        return run(*args)
    finally:
        current_principal.reset(token)


def test_permissions_as_athena_checks_them(
    guarded: QueryService, metastore: MetastoreClient
) -> None:
    sql = "CREATE VIEW guarded AS SELECT country, deaths FROM default.covid_deaths"
    refused = as_user("analyst", fails, guarded, sql)
    assert "glue:CreateTable" in refused
    assert not metastore.table_exists(DB, "guarded")
    assert as_user("maker", rows, guarded, sql) == []
    try:
        before = metastore.table(DB, "guarded")
        replaced = as_user(
            "maker", fails, guarded, "CREATE OR REPLACE VIEW guarded AS SELECT 1 AS x"
        )
        assert "glue:UpdateTable" in replaced
        assert "glue:DeleteTable" in as_user("maker", fails, guarded, "DROP VIEW guarded")
        assert metastore.table(DB, "guarded") == before

        query = "SELECT deaths FROM guarded WHERE country = 'Italy' AND deaths > 74000"
        assert ITALY_1231 in [r[0] for r in as_user("analyst", rows, guarded, query)]
        # The view's own metadata, then the data under it, as the reader's.
        assert "glue:GetTable" in as_user("no_glue", fails, guarded, query)
        assert "s3:GetObject" in as_user("no_data", fails, guarded, query)
        assert as_user("no_glue", rows, guarded, "SELECT count(*) FROM default.covid_deaths")
    finally:
        metastore.drop_table(DB, "guarded")
