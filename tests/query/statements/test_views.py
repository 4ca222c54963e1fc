"""Views on the real stack: made with CREATE VIEW through Athena's clients, read by lakeward on
both engines and by a plain Spark session on the same metastore. The statements' own logic
(refusals, stale views, views Athena made, permissions) is tested on the in-memory catalog
(test_views_in_memory.py)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from lakeward.config import Settings
from lakeward.metastore.client import MetastoreClient
from lakeward.metastore.uris import metastore_uris
from lakeward.query.model import QueryState
from lakeward.query.service import QueryService
from lakeward.storage.paths import warehouse_uri
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
    # Laid out as Trino's formatter lays a view out, as Athena keeps and shows it.
    assert created == [
        [f"CREATE VIEW {DB}.italy AS"],
        ["SELECT"],
        ["  date"],
        [", deaths"],
        ["FROM"],
        ["  default.covid_deaths"],
        ["WHERE ((country = 'Italy') AND (province_state IS NULL))"],
    ]
    tables = athena.list_table_metadata(CatalogName=CATALOG, DatabaseName=DB)
    assert "italy" in [t["Name"] for t in tables["TableMetadataList"]]

    assert athena_run(athena, "DROP VIEW italy") == []
    assert not metastore.table_exists(DB, "italy")
    with pytest.raises(AssertionError, match=r"TABLE_NOT_FOUND: .*\.italy' does not exist"):
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


def test_a_view_spark_made_is_refused_as_athena_refuses_it(
    service: QueryService, spark: Any, metastore: MetastoreClient
) -> None:
    spark.sql(f"CREATE VIEW {DB}.spark_made AS SELECT 1 AS x")
    try:
        reason = fails(service, "SELECT * FROM spark_made")
        assert "spark_made was not made by Athena, Trino or lakeward" in reason
    finally:
        metastore.drop_table(DB, "spark_made")
