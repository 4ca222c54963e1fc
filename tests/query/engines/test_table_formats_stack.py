"""Tables of every format read through the Athena API on the real stack.

The covid raw zone as the ETL registers it (external CSV tables over the JHU files), and
tables Spark wrote with Hive's SerDes (Spark SQL ``CREATE TABLE ... STORED AS`` / ``ROW
FORMAT``, then ``INSERT``), read by the DuckDB engine from what the metastore declares.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from lakeward.config import Settings
from lakeward.metastore import MetastoreClient
from lakeward.metastore.tables import Column, PartitionInfo, TableInfo
from lakeward.metastore.uris import metastore_uris
from lakeward.query import formats
from lakeward.storage.paths import data_uri, hadoop_uri

pytestmark = pytest.mark.spark

CATALOG = "demo_hive_metastore"
DB = "readers_spark"


def athena(stack: Settings) -> Any:
    import boto3

    return boto3.client(
        "athena",
        endpoint_url=f"http://{stack.server.host}:{stack.server.port}",
        region_name="us-east-1",
        aws_access_key_id=stack.api.access_key_id,
        aws_secret_access_key=stack.api.secret_access_key,
    )


def run(
    stack: Settings, sql: str, database: str = "default"
) -> tuple[str, list[list[str | None]], dict[str, Any]]:
    """(final state, data rows, the execution) of one query through boto3."""
    client = athena(stack)
    started = client.start_query_execution(
        QueryString=sql,
        QueryExecutionContext={"Catalog": CATALOG, "Database": database},
        ResultConfiguration={"OutputLocation": "s3://staging/"},
    )
    execution_id = started["QueryExecutionId"]
    while True:
        execution = client.get_query_execution(QueryExecutionId=execution_id)["QueryExecution"]
        state = execution["Status"]["State"]
        if state in ("SUCCEEDED", "FAILED", "CANCELLED"):
            break
        time.sleep(0.05)
    rows: list[list[str | None]] = []
    if state == "SUCCEEDED":
        pages = client.get_paginator("get_query_results").paginate(QueryExecutionId=execution_id)
        for page in pages:
            rows.extend(
                [d.get("VarCharValue") for d in r["Data"]] for r in page["ResultSet"]["Rows"]
            )
        rows = rows[1:]  # the header row
    return state, rows, execution


def query(stack: Settings, sql: str, database: str = "default") -> list[list[str | None]]:
    state, rows, execution = run(stack, sql, database)
    assert state == "SUCCEEDED", execution["Status"]
    return rows


def test_the_raw_zone_gives_the_jhu_totals(stack: Settings) -> None:
    raw = f"{CATALOG}.default.covid_raw"
    totals = query(
        stack,
        f"SELECT (SELECT sum(d_2020_09_10) FROM {raw}_confirmed), "
        f"(SELECT sum(d_2020_09_10) FROM {raw}_deaths), "
        f"(SELECT sum(d_2020_09_10) FROM {raw}_recovered), "
        f"(SELECT sum(d_2020_12_31) FROM {raw}_confirmed), "
        f"(SELECT sum(d_2023_03_09) FROM {raw}_confirmed), "
        f"(SELECT sum(d_2023_03_09) FROM {raw}_deaths), "
        f"(SELECT count(*) FROM {raw}_confirmed), (SELECT count(*) FROM {raw}_recovered)",
    )
    assert totals == [
        ["28227493", "972736", "19004538", "83778622", "676570149", "6881802", "289", "274"]
    ]
    countries = query(
        stack,
        f"SELECT country_region, sum(d_2020_09_10) FROM {raw}_confirmed "
        "WHERE country_region IN ('US', 'Italy') GROUP BY 1 ORDER BY 1",
    )
    assert countries == [["Italy", "283180"], ["US", "6420040"]]
    # Quoted fields keep their commas; an empty Lat/Long reads as NULL.
    places = query(
        stack,
        f"SELECT province_state, count_if(lat IS NULL) OVER () FROM {raw}_deaths "
        "WHERE province_state LIKE '%,%' OR lat IS NULL ORDER BY 1",
    )
    assert ["Bonaire, Sint Eustatius and Saba", "2"] in places
    with MetastoreClient(metastore_uris(stack)) as client:
        info = client.table("default", "covid_raw_confirmed")
    assert info.location.endswith("/covid_data/csv/confirmed")
    assert info.serde == formats.OPEN_CSV_SERDE
    assert [c.name for c in info.columns][:6] == [
        "province_state", "country_region", "lat", "long", "d_2020_01_22", "d_2020_01_23",
    ]  # fmt: skip


@pytest.fixture(scope="module")
def spark_tables(stack: Settings, spark: Any) -> Path:
    """Tables Spark made and filled through Hive's SerDes, in a database of their own."""
    location = hadoop_uri(data_uri(stack, f"readers/{DB}.db"))
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {DB} LOCATION '{location}'")
    rows = (
        "(1, 'Austria', 1.5, DATE '2020-09-10'), (2, NULL, NULL, NULL), (3, 'a,b\\tc', -2.25, NULL)"
    )
    columns = "(id INT, name STRING, score DOUBLE, day DATE)"
    made = {
        "text_default": "STORED AS TEXTFILE",
        "text_comma": "ROW FORMAT DELIMITED FIELDS TERMINATED BY ',' ESCAPED BY '\\\\' "
        "NULL DEFINED AS 'NA' STORED AS TEXTFILE",
        "orc": "STORED AS ORC",
        "parquet": "STORED AS PARQUET",
    }
    for name, clause in made.items():
        spark.sql(f"DROP TABLE IF EXISTS {DB}.{name}")
        spark.sql(f"CREATE TABLE {DB}.{name} {columns} {clause}")
        spark.sql(f"INSERT INTO {DB}.{name} VALUES {rows}")
    # Collections in Hive text: items and fields split by ^B.
    spark.sql(f"DROP TABLE IF EXISTS {DB}.text_collections")
    spark.sql(f"CREATE TABLE {DB}.text_collections (id INT, tags ARRAY<STRING>, "
              "pair STRUCT<s: STRING, n: INT>) STORED AS TEXTFILE")  # fmt: skip
    spark.sql(
        f"INSERT INTO {DB}.text_collections VALUES (1, array('a', 'b'), named_struct('s', 'x', "
        "'n', 2)), (2, CAST(array() AS ARRAY<STRING>), named_struct('s', CAST(NULL AS STRING), "
        "'n', CAST(NULL AS INT))), (3, NULL, NULL)"
    )
    # Compressed text: Hive's output compression, files named by their codec's extension.
    spark.sql(f"DROP TABLE IF EXISTS {DB}.text_gzip")
    spark.sql(f"CREATE TABLE {DB}.text_gzip {columns} STORED AS TEXTFILE")
    spark.sql("SET hive.exec.compress.output=true")
    spark.sql(
        "SET mapreduce.output.fileoutputformat.compress.codec="
        "org.apache.hadoop.io.compress.GzipCodec"
    )
    try:
        spark.sql(f"INSERT INTO {DB}.text_gzip VALUES {rows}")
    finally:
        spark.sql("SET hive.exec.compress.output=false")
    # A partitioned table: Spark registers each partition in the metastore.
    spark.sql(f"DROP TABLE IF EXISTS {DB}.parted")
    spark.sql(f"CREATE TABLE {DB}.parted (id INT, name STRING) PARTITIONED BY (year INT) "
              "STORED AS TEXTFILE")  # fmt: skip
    spark.sql(f"INSERT INTO {DB}.parted PARTITION (year = 2020) VALUES (1, 'a'), (2, 'b')")
    spark.sql(f"INSERT INTO {DB}.parted PARTITION (year = 2021) VALUES (3, 'c')")
    # JSON as Spark writes it (one object per line), declared with Hive's JSON SerDe.
    json_dir = data_uri(stack, f"readers/{DB}.db/json_lines")
    spark.sql(f"SELECT * FROM VALUES {rows} AS t(ID, Name, Score, Day)").write.mode(
        "overwrite"
    ).json(hadoop_uri(json_dir))
    with MetastoreClient(metastore_uris(stack)) as client:
        client.put_external_table(
            TableInfo(
                DB,
                "json_lines",
                hadoop_uri(json_dir),
                [
                    Column("id", "int"),
                    Column("name", "string"),
                    Column("score", "double"),
                    Column("day", "date"),
                ],  # fmt: skip
                input_format=formats.TEXT_INPUT,
                output_format=formats.TEXT_OUTPUT,
                serde=formats.HIVE_JSON_SERDE,
            )
        )
    return Path(location.removeprefix("file:"))


@pytest.mark.parametrize(
    "table", ["text_default", "text_comma", "text_gzip", "orc", "parquet", "json_lines"]
)
def test_tables_spark_wrote_read_as_spark_reads_them(
    stack: Settings, spark: Any, spark_tables: Path, table: str
) -> None:
    if table == "json_lines":  # Spark has no Hive JSON SerDe: its own JSON reader instead
        schema = "ID INT, Name STRING, Score DOUBLE, Day DATE"  # its keys' case, as written
        frame = spark.read.schema(schema).json(str(spark_tables / table)).orderBy("ID")
    else:
        frame = spark.sql(f"SELECT id, name, score, day FROM {DB}.{table} ORDER BY id")
    expected = [[None if v is None else str(v) for v in r] for r in frame.collect()]
    assert expected == [
        ["1", "Austria", "1.5", "2020-09-10"],
        ["2", None, None, None],
        ["3", "a,b\tc", "-2.25", None],
    ]
    assert query(stack, f"SELECT id, name, score, day FROM {CATALOG}.{DB}.{table} ORDER BY id") == (
        expected
    )
    if table == "text_gzip":
        assert any(p.suffix == ".gz" for p in (spark_tables / table).iterdir())


def test_partitions_are_the_metastores(stack: Settings, spark_tables: Path) -> None:
    parted = f"{CATALOG}.{DB}.parted"
    assert query(stack, f"SELECT year, count(*) FROM {parted} GROUP BY 1 ORDER BY 1") == [
        ["2020", "2"],
        ["2021", "1"],
    ]
    # A partition added elsewhere is read; a directory no partition names is not.
    elsewhere = spark_tables.parent / "elsewhere" / "y2019"
    elsewhere.mkdir(parents=True, exist_ok=True)
    (elsewhere / "part-0").write_text("9\x01z\n")
    stray = spark_tables / "parted" / "year=2018"
    stray.mkdir(exist_ok=True)
    (stray / "part-0").write_text("8\x01stray\n")
    with MetastoreClient(metastore_uris(stack)) as client:
        client.add_partitions(DB, "parted", [PartitionInfo(["2019"], f"file:{elsewhere}")])
    state, rows, execution = run(
        stack, f"SELECT year, id, name FROM {parted} WHERE year < 2021 ORDER BY id"
    )
    assert state == "SUCCEEDED", execution["Status"]
    assert rows == [["2020", "1", "a"], ["2020", "2", "b"], ["2019", "9", "z"]]
    scanned = execution["Statistics"]["DataScannedInBytes"]
    sizes = [f.stat().st_size for d in (elsewhere, spark_tables / "parted" / "year=2020")
             for f in d.iterdir() if not f.name.startswith((".", "_"))]  # fmt: skip
    assert scanned == sum(sizes)


def test_a_file_that_does_not_fit_the_schema_names_file_and_column(
    stack: Settings, spark_tables: Path
) -> None:
    with MetastoreClient(metastore_uris(stack)) as client:
        orc_table = client.table(DB, "orc")
        client.put_external_table(
            TableInfo(
                DB,
                "orc_misdeclared",
                orc_table.location,
                [Column("id", "int"), Column("name", "bigint")],
                input_format=formats.ORC_INPUT,
                output_format=formats.ORC_OUTPUT,
                serde=formats.ORC_SERDE,
            )
        )
    state, _rows, execution = run(stack, f"SELECT * FROM {CATALOG}.{DB}.orc_misdeclared")
    assert state == "FAILED"
    reason = execution["Status"]["StateChangeReason"]
    assert "column name" in reason and str(spark_tables / "orc") in reason


def test_a_table_made_by_ddl_over_csv_files_and_partitions(
    stack: Settings, spark_tables: Path
) -> None:
    """CREATE EXTERNAL TABLE and ALTER TABLE ADD PARTITION, then the files read as declared."""
    import gzip

    base = spark_tables.parent / "ddl"
    (base / "t/year=2020").mkdir(parents=True, exist_ok=True)
    (base / "archive/y2021").mkdir(parents=True, exist_ok=True)
    (base / "t/year=2020/a.csv.gz").write_bytes(
        gzip.compress(b'name,n\n"Korea, South",1\n"Italy",2\n')
    )
    (base / "archive/y2021/b.csv").write_text('name,n\n"US",3\n')
    (base / "t/year=2022").mkdir(exist_ok=True)
    (base / "t/year=2022/c.csv").write_text('name,n\n"stray",9\n')
    query(stack, "DROP TABLE IF EXISTS ddl_csv", DB)
    query(
        stack,
        "CREATE EXTERNAL TABLE ddl_csv (name string, n int) PARTITIONED BY (year int) "
        "ROW FORMAT SERDE 'org.apache.hadoop.hive.serde2.OpenCSVSerde' "
        "WITH SERDEPROPERTIES ('separatorChar' = ',', 'quoteChar' = '\"') "
        f"LOCATION 'file://{base}/t/' TBLPROPERTIES ('skip.header.line.count' = '1')",
        DB,
    )
    query(
        stack,
        f"ALTER TABLE ddl_csv ADD PARTITION (year = 2020) LOCATION 'file://{base}/t/year=2020/' "
        f"PARTITION (year = 2021) LOCATION 'file://{base}/archive/y2021/'",
        DB,
    )
    assert query(stack, "SELECT year, name, n FROM ddl_csv ORDER BY n", DB) == [
        ["2020", "Korea, South", "1"],
        ["2020", "Italy", "2"],
        ["2021", "US", "3"],
    ]


def test_collections_in_text_spark_wrote(stack: Settings, spark: Any, spark_tables: Path) -> None:
    table = f"{DB}.text_collections"
    expected = spark.sql(f"SELECT id, tags, pair FROM {table} ORDER BY id").collect()
    assert [(r.id, r.tags, r.pair and r.pair.asDict()) for r in expected] == [
        (1, ["a", "b"], {"s": "x", "n": 2}),
        (2, [], {"s": None, "n": None}),
        (3, None, None),
    ]
    assert query(stack, f"SELECT id, tags, pair FROM {CATALOG}.{table} ORDER BY id") == [
        ["1", "[a, b]", "{s=x, n=2}"],
        ["2", "[]", "{s=null, n=null}"],
        ["3", None, None],
    ]


def test_the_spark_engine_refuses_what_it_would_read_otherwise(stack: Settings) -> None:
    """Spark's Hive reader keeps the header line and types OpenCSVSerde columns as strings:
    a Spark workgroup refuses the raw tables rather than answer 290 rows of text."""
    client = athena(stack)
    client.create_work_group(
        Name="readers-spark", Configuration={"EngineVersion": {"SelectedEngineVersion": "spark"}}
    )
    started = client.start_query_execution(
        QueryString=f"SELECT count(*) FROM {CATALOG}.default.covid_raw_confirmed",
        WorkGroup="readers-spark",
        ResultConfiguration={"OutputLocation": "s3://staging/"},
    )
    while True:
        execution = client.get_query_execution(QueryExecutionId=started["QueryExecutionId"])
        status = execution["QueryExecution"]["Status"]
        if status["State"] in ("SUCCEEDED", "FAILED", "CANCELLED"):
            break
        time.sleep(0.05)
    assert status["State"] == "FAILED"
    assert "skip.header.line.count" in status["StateChangeReason"]
    assert "DuckDB workgroup" in status["StateChangeReason"]
