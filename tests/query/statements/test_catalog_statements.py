"""Athena's DDL end to end: boto3 and PyAthena against the stack's server, checked from Spark.

Every statement goes through Athena's own clients; what it did to the metastore is then
read by a separate Spark session on the same metastore (databases, tables, columns,
partitions), so a statement is known to work for every client of the catalog, not only
for lakeward. Refused DDL is tested on the in-memory catalog
(test_statements_in_memory.py).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from lakeward.access.arns import glue_catalog_arn, glue_database_arn, glue_table_arn
from lakeward.config import Settings
from lakeward.metastore import MetastoreClient
from lakeward.metastore.uris import metastore_uris
from lakeward.storage import load_storage
from tests.helpers import lakeward
from tests.query.support import CATALOG, client_for, local
from tests.query.support import api_failed as failed
from tests.query.support import api_ok as ok

pytestmark = pytest.mark.spark


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def lake_dir(stack: Settings, name: str) -> str:
    return f"{stack.lake_root}/{stack.lake.data_bucket}/tests/catalog/{name}"


def metastore(stack: Settings) -> MetastoreClient:
    return MetastoreClient(metastore_uris(stack))


def spark_partitions(spark: Any, table: str) -> list[str]:
    return sorted(r[0] for r in spark.sql(f"SHOW PARTITIONS {table}").collect())


def test_database_table_and_partitions_end_to_end(stack: Settings, spark: Any) -> None:
    athena = client_for(stack)
    db = unique("sales")
    ok(athena, f"CREATE DATABASE {db} COMMENT 'sales data' LOCATION '{lake_dir(stack, db)}'")
    assert db in [d.name for d in spark.catalog.listDatabases()]
    ok(athena, f"CREATE DATABASE IF NOT EXISTS {db}")
    assert f"Database {db} already exists" in failed(athena, f"CREATE DATABASE {db}")

    table = f"{db}.orders"
    location = lake_dir(stack, f"{db}/orders")
    created = ok(
        athena,
        f"""CREATE EXTERNAL TABLE `{db}`.`orders` (
              order_id bigint COMMENT 'the order',
              amount decimal(12,2),
              tags array<string>
            )
            COMMENT 'orders as they land'
            PARTITIONED BY (dt date, region string)
            ROW FORMAT DELIMITED FIELDS TERMINATED BY ',' COLLECTION ITEMS TERMINATED BY '|'
              NULL DEFINED AS ''
            STORED AS TEXTFILE
            LOCATION '{location}'
            TBLPROPERTIES ('skip.header.line.count'='1')""",
    )
    assert created["StatementType"] == "DDL"
    assert created["rows"] == [] and created["columns"] == []

    columns = {c.name: (c.dataType, c.isPartition) for c in spark.catalog.listColumns(table)}
    assert columns == {
        "order_id": ("bigint", False),
        "amount": ("decimal(12,2)", False),
        "tags": ("array<string>", False),
        "dt": ("date", True),
        "region": ("string", True),
    }
    described = {r[0]: r[1] for r in spark.sql(f"DESCRIBE FORMATTED {table}").collect()}
    assert described["Serde Library"] == "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe"
    assert described["Type"] == "EXTERNAL"
    with metastore(stack) as client:
        info = client.table(db, "orders")
    assert info.serde_parameters["field.delim"] == ","
    assert info.serde_parameters["collection.delim"] == "|"
    assert info.serde_parameters["serialization.null.format"] == ""
    assert info.parameters["skip.header.line.count"] == "1"
    assert info.parameters["comment"] == "orders as they land"

    elsewhere = lake_dir(stack, f"{db}/archive/eu-2020-01-01")
    ok(
        athena,
        f"ALTER TABLE {table} ADD PARTITION (dt='2020-01-01', region='eu') "
        f"LOCATION '{elsewhere}' PARTITION (region='us', dt='2020-01-01') "
        "PARTITION (dt='2020-01-02', region='us')",
    )
    expected = [
        "dt=2020-01-01/region=eu",
        "dt=2020-01-01/region=us",
        "dt=2020-01-02/region=us",
    ]
    shown = ok(athena, f"SHOW PARTITIONS {table}")
    assert shown["StatementType"] == "UTILITY"
    assert shown["columns"] == ["partition"] and [r[0] for r in shown["rows"]] == expected
    assert spark_partitions(spark, table) == expected
    with metastore(stack) as client:
        where = {tuple(p.values): p.location for p in client.partitions(db, "orders")}
    assert where[("2020-01-01", "eu")].rstrip("/").endswith("archive/eu-2020-01-01")
    assert where[("2020-01-02", "us")].rstrip("/").endswith("orders/dt=2020-01-02/region=us")

    # One partition of three exists: the statement fails and adds none of them.
    reason = failed(
        athena,
        f"ALTER TABLE {table} ADD PARTITION (dt='2020-01-03', region='us') "
        "PARTITION (dt='2020-01-01', region='eu')",
    )
    assert "Partition already exists: dt=2020-01-01/region=eu" in reason
    assert spark_partitions(spark, table) == expected
    ok(
        athena,
        f"ALTER TABLE {table} ADD IF NOT EXISTS PARTITION (dt='2020-01-03', region='us') "
        "PARTITION (dt='2020-01-01', region='eu')",
    )
    assert "dt=2020-01-03/region=us" in spark_partitions(spark, table)
    assert "not of type date" in failed(
        athena, f"ALTER TABLE {table} ADD PARTITION (dt='yesterday', region='us')"
    )

    moved = lake_dir(stack, f"{db}/archive/us-2020-01-02")
    ok(
        athena,
        f"ALTER TABLE {table} PARTITION (dt='2020-01-02', region='us') SET LOCATION '{moved}'",
    )
    described = spark.sql(
        f"DESCRIBE FORMATTED {table} PARTITION (dt='2020-01-02', region='us')"
    ).collect()
    assert [r[1] for r in described if r[0] == "Location"][0].endswith("archive/us-2020-01-02")
    assert "does not exist" in failed(
        athena,
        f"ALTER TABLE {table} PARTITION (dt='2021-01-01', region='us') SET LOCATION '{moved}'",
    )
    ok(athena, f"ALTER TABLE {table} DROP PARTITION (dt='2020-01-01'), PARTITION (dt='2020-01-03')")
    assert spark_partitions(spark, table) == ["dt=2020-01-02/region=us"]
    assert "No partition matches" in failed(
        athena, f"ALTER TABLE {table} DROP PARTITION (dt='2020-01-01')"
    )
    ok(athena, f"ALTER TABLE {table} DROP IF EXISTS PARTITION (dt='2020-01-01')")

    assert "is not empty" in failed(athena, f"DROP DATABASE {db}")
    assert spark.catalog.tableExists(table)
    ok(athena, f"DROP TABLE {table}")
    assert not spark.catalog.tableExists(table)
    assert "does not exist" in failed(athena, f"DROP TABLE {table}")
    ok(athena, f"DROP TABLE IF EXISTS {table}")
    ok(athena, f"DROP DATABASE {db}")
    assert db not in [d.name for d in spark.catalog.listDatabases()]
    ok(athena, f"DROP DATABASE IF EXISTS {db}")


def test_msck_repair_registers_the_partition_directories(
    stack: Settings, spark: Any, jhu_dir: Path
) -> None:
    """The JHU time series put under measure=... directories, as files that just landed."""
    athena = client_for(stack)
    name = unique("jhu_raw")
    prefix = f"tests/catalog/{name}"
    storage = load_storage(stack)
    bucket = stack.lake.data_bucket
    for measure in ("confirmed", "deaths"):
        data = (jhu_dir / f"time_series_covid19_{measure}_global.csv").read_bytes()
        storage.put(bucket, f"{prefix}/measure={measure}/data.csv", data)
    storage.put(bucket, f"{prefix}/notes/readme.txt", b"not a partition\n")
    storage.put(bucket, f"{prefix}/Measure=other/data.csv", b"named with another case\n")
    storage.put(bucket, f"{prefix}/_SUCCESS", b"")
    table = f"default.{name}"
    ok(
        athena,
        f"CREATE EXTERNAL TABLE {table} (province_state string, country_region string) "
        "PARTITIONED BY (measure string) "
        "ROW FORMAT SERDE 'org.apache.hadoop.hive.serde2.OpenCSVSerde' "
        f"LOCATION '{lake_dir(stack, name)}' TBLPROPERTIES ('skip.header.line.count'='1')",
    )
    repaired = ok(athena, f"MSCK REPAIR TABLE {table}")
    assert repaired["StatementType"] == "DDL"
    lines = [r[0] for r in repaired["rows"]]
    assert f"Repair: Added partition to metastore {name}:measure=confirmed" in lines
    assert f"Repair: Added partition to metastore {name}:measure=deaths" in lines
    assert any(line.startswith("Skipped notes:") for line in lines)
    assert any(line.startswith("Skipped Measure=other:") for line in lines)
    expected = ["measure=confirmed", "measure=deaths"]
    assert [r[0] for r in ok(athena, f"SHOW PARTITIONS {table}")["rows"]] == expected
    assert spark_partitions(spark, table) == expected
    counted = ok(
        athena,
        f"SELECT measure, count(*), count(DISTINCT country_region) FROM {table} "
        "GROUP BY measure ORDER BY measure",
    )
    assert counted["rows"][1:] == [["confirmed", "289", "201"], ["deaths", "289", "201"]]

    # A new directory lands: a second repair registers it and leaves the others as they were.
    data = (jhu_dir / "time_series_covid19_recovered_global.csv").read_bytes()
    storage.put(bucket, f"{prefix}/measure=recovered/data.csv", data)
    again = ok(athena, f"MSCK REPAIR TABLE {table}")
    assert f"Repair: Added partition to metastore {name}:measure=recovered" in [
        r[0] for r in again["rows"]
    ]
    assert spark_partitions(spark, table) == [*expected, "measure=recovered"]
    ok(athena, f"DROP TABLE {table}")
    assert storage.exists(bucket, f"{prefix}/measure=deaths/data.csv")  # the data stays


def test_alter_columns_properties_and_show_create_table(stack: Settings, spark: Any) -> None:
    from pyathena import connect

    cursor = connect(
        s3_staging_dir="s3://staging/",
        endpoint_url=f"http://{stack.server.host}:{stack.server.port}",
        region_name="us-east-1",
        aws_access_key_id=stack.api.access_key_id,
        aws_secret_access_key=stack.api.secret_access_key,
        poll_interval=0.05,
        catalog_name=CATALOG,
    ).cursor()
    name = unique("events")
    table = f"default.{name}"
    cursor.execute(
        f"CREATE EXTERNAL TABLE {table} (id bigint, payload string) "
        "ROW FORMAT SERDE 'org.apache.hadoop.hive.serde2.OpenCSVSerde' "
        "WITH SERDEPROPERTIES ('separatorChar'=';', 'quoteChar'='\"') "
        f"LOCATION '{lake_dir(stack, name)}'"
    )
    cursor.execute(f"ALTER TABLE {table} ADD COLUMNS (source string COMMENT 'where from')")
    assert [c.name for c in spark.catalog.listColumns(table)] == ["id", "payload", "source"]
    cursor.execute(f"ALTER TABLE {table} SET TBLPROPERTIES ('classification'='csv')")
    properties = {r[0]: r[1] for r in spark.sql(f"SHOW TBLPROPERTIES {table}").collect()}
    assert properties["classification"] == "csv"

    cursor.execute(f"SHOW CREATE TABLE {table}")
    assert [d[0] for d in cursor.description or []] == ["createtab_stmt"]
    statement = "\n".join(r[0] for r in cursor.fetchall())
    assert "`source` string COMMENT 'where from'" in statement
    assert "'org.apache.hadoop.hive.serde2.OpenCSVSerde'" in statement
    assert "'separatorChar'=';'" in statement and "'quoteChar'='\"'" in statement
    assert "'classification'='csv'" in statement

    # What SHOW CREATE TABLE gives makes the same table again.
    cursor.execute(f"DROP TABLE {table}")
    cursor.execute(statement)
    with metastore(stack) as client:
        info = client.table("default", name)
    assert [(c.name, c.type) for c in info.columns] == [
        ("id", "bigint"),
        ("payload", "string"),
        ("source", "string"),
    ]
    assert info.serde_parameters["separatorChar"] == ";"

    cursor.execute(f"ALTER TABLE {table} SET LOCATION '{lake_dir(stack, name + '_v2')}'")
    described = {r[0]: r[1] for r in spark.sql(f"DESCRIBE FORMATTED {table}").collect()}
    assert described["Location"].endswith(f"{name}_v2")
    cursor.execute(f"ALTER TABLE {table} REPLACE COLUMNS (id bigint, body string)")
    assert [c.name for c in spark.catalog.listColumns(table)] == ["id", "body"]

    # RENAME TO: the same definition under the new name, for every client at once.
    cursor.execute(f"ALTER TABLE {table} RENAME TO {table}_renamed")
    assert [c.name for c in spark.catalog.listColumns(f"{table}_renamed")] == ["id", "body"]
    assert not spark.catalog.tableExists(table)
    with metastore(stack) as client:
        assert client.table("default", f"{name}_renamed").location.endswith(f"{name}_v2")
    with pytest.raises(Exception, match="already exists"):
        cursor.execute(f"ALTER TABLE {table}_renamed RENAME TO default.covid_deaths")
    cursor.execute(f"DROP TABLE {table}_renamed")


def test_a_bucketed_table_is_registered_read_and_kept_but_not_written(
    stack: Settings, spark: Any
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    athena = client_for(stack)
    name = unique("bucketed")
    location = lake_dir(stack, name)
    # The DDL PyAthena's SQLAlchemy dialect writes for awsathena_cluster columns.
    ok(
        athena,
        f"CREATE EXTERNAL TABLE default.{name} (\n\tcol_1 VARCHAR(10),\n\tcol_2 INT\n)\n"
        "CLUSTERED BY (\n\tcol_1,\n\tcol_2\n) INTO 5 BUCKETS\nSTORED AS PARQUET\n"
        f"LOCATION '{location}/'",
    )
    rows = pa.table({"col_1": ["a", "b"], "col_2": pa.array([1, 2], pa.int32())})
    directory = local(stack, location)
    directory.mkdir(parents=True, exist_ok=True)
    pq.write_table(rows, directory / "part-0.parquet")

    described = {r[0]: r[1] for r in spark.sql(f"DESCRIBE FORMATTED default.{name}").collect()}
    assert (described["Num Buckets"], described["Bucket Columns"]) == ("5", "[`col_1`, `col_2`]")
    read = ok(athena, f"SELECT col_1, col_2 FROM default.{name} ORDER BY col_2")
    assert read["rows"][1:] == [["a", "1"], ["b", "2"]]  # after the labels row
    # A change of the table's properties keeps its buckets.
    ok(athena, f"ALTER TABLE default.{name} SET TBLPROPERTIES ('classification'='parquet')")
    with metastore(stack) as client:
        info = client.table("default", name)
    assert (info.bucket_columns, info.bucket_count) == (["col_1", "col_2"], 5)
    shown = "\n".join(r[0] for r in ok(athena, f"SHOW CREATE TABLE default.{name}")["rows"])
    assert "CLUSTERED BY ( \n  `col_1`, \n  `col_2`) \nINTO 5 BUCKETS" in shown
    refused = failed(athena, f"INSERT INTO default.{name} VALUES ('c', 3)")
    assert "INSERT INTO a bucketed table" in refused and "not supported" in refused
    ok(athena, f"DROP TABLE default.{name}")


def test_a_grok_table_is_kept_in_the_catalog_and_refused_when_read(
    stack: Settings, spark: Any
) -> None:
    athena = client_for(stack)
    name = unique("mail_log")
    location = lake_dir(stack, name)
    # A Glue crawler's or PyAthena's Grok table: Athena reads it, lakeward only keeps it.
    ok(
        athena,
        f"CREATE EXTERNAL TABLE default.{name} (queue_id string, syslog_message string)\n"
        "ROW FORMAT SERDE 'com.amazonaws.glue.serde.GrokSerDe'\nWITH SERDEPROPERTIES (\n"
        "\t'input.grokCustomPatterns' = 'POSTFIX_QUEUEID [0-9A-F]{7,12}',\n"
        "\t'input.format' = '%{SYSLOGBASE} %{POSTFIX_QUEUEID:queue_id}: "
        "%{GREEDYDATA:syslog_message}'\n)\nSTORED AS INPUTFORMAT "
        "'org.apache.hadoop.mapred.TextInputFormat' OUTPUTFORMAT "
        "'org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat'\n"
        f"LOCATION '{location}/'",
    )
    described = {r[0]: r[1] for r in spark.sql(f"DESCRIBE FORMATTED default.{name}").collect()}
    assert described["Serde Library"] == "com.amazonaws.glue.serde.GrokSerDe"
    shown = "\n".join(r[0] for r in ok(athena, f"SHOW CREATE TABLE default.{name}")["rows"])
    assert "'input.grokCustomPatterns'='POSTFIX_QUEUEID [0-9A-F]{7,12}'" in shown
    refused = failed(athena, f"SELECT * FROM default.{name}")
    assert "SerDe com.amazonaws.glue.serde.GrokSerDe (Grok patterns) is not supported" in refused
    ok(athena, f"DROP TABLE default.{name}")
    # A SerDe that neither lakeward nor Athena reads is refused at once, when submitted.
    with pytest.raises(Exception, match="SerDe com.example.MySerDe is not supported"):
        athena.start_query_execution(
            QueryString=f"CREATE EXTERNAL TABLE default.{name} (c string) "
            f"ROW FORMAT SERDE 'com.example.MySerDe' LOCATION '{location}/'",
            QueryExecutionContext={"Catalog": CATALOG, "Database": "default"},
        )


def test_the_data_engineer_reads_the_catalog_but_changes_it_only_when_granted(
    stack: Settings,
) -> None:
    creds = json.loads(
        lakeward("secrets", "get", "DataEngineerUserCreds", data_dir=stack.data_dir).stdout
    )
    de = client_for(stack, creds["access_key_id"], creds["secret_access_key"])
    root = client_for(stack)
    name = unique("granted")
    create = (
        f"CREATE EXTERNAL TABLE default.{name} (a int) PARTITIONED BY (p string) "
        f"STORED AS PARQUET LOCATION '{lake_dir(stack, name)}'"
    )
    reason = failed(de, create)
    assert "glue:CreateTable" in reason and "de_user" in reason
    with metastore(stack) as client:
        assert not client.table_exists("default", name)
    audit = lakeward(
        "audit", "--user", "de_user", "--decision", "implicitDeny", "--limit", "1000",
        data_dir=stack.data_dir,
    ).stdout  # fmt: skip
    assert "glue:CreateTable" in audit

    ok(root, create)
    ok(root, f"ALTER TABLE default.{name} ADD PARTITION (p='x')")
    assert [r[0] for r in ok(de, f"SHOW PARTITIONS default.{name}")["rows"]] == ["p=x"]
    assert "CREATE EXTERNAL TABLE" in ok(de, f"SHOW CREATE TABLE default.{name}")["rows"][0][0]
    assert "glue:BatchDeletePartition" in failed(
        de, f"ALTER TABLE default.{name} DROP PARTITION (p='x')"
    )
    assert "glue:DeleteTable" in failed(de, f"DROP TABLE default.{name}")

    policy = unique("GlueWrite")
    document = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Action": ["glue:DeleteTable", "glue:BatchDeletePartition"],
                "Resource": [
                    glue_catalog_arn(CATALOG),
                    glue_database_arn(CATALOG, "default"),
                    glue_table_arn(CATALOG, "default", name),
                ],
            }
        ],
    }
    iam = {"data_dir": stack.data_dir}
    lakeward("iam", "create-policy", "--policy", policy, "--document", json.dumps(document), **iam)
    lakeward("iam", "attach-user-policy", "--user", "de_user", "--policy", policy, **iam)
    try:
        ok(de, f"ALTER TABLE default.{name} DROP PARTITION (p='x')")
        ok(de, f"DROP TABLE default.{name}")
    finally:
        lakeward("iam", "detach-user-policy", "--user", "de_user", "--policy", policy, **iam)
    with metastore(stack) as client:
        assert not client.table_exists("default", name)


def test_the_seeded_ddl_policy_lets_a_data_engineer_change_the_catalog_once_attached(
    stack: Settings,
) -> None:
    creds = json.loads(
        lakeward("secrets", "get", "DataEngineerUserCreds", data_dir=stack.data_dir).stdout
    )
    de = client_for(stack, creds["access_key_id"], creds["secret_access_key"])
    name = unique("engineered")
    ctas = f"CREATE TABLE default.{name} AS SELECT country, deaths FROM default.covid_deaths"
    assert "glue:CreateTable" in failed(de, ctas)  # made by up, attached to no one
    iam = {"data_dir": stack.data_dir}
    lakeward("iam", "attach-user-policy", "--user", "de_user",
             "--policy", "DataEngineerDDLPolicy", **iam)  # fmt: skip
    try:
        ok(de, ctas)
        ok(de, f"INSERT INTO default.{name} VALUES ('Atlantis', 1)")
        rows = ok(de, f"SELECT deaths FROM default.{name} WHERE country = 'Atlantis'")["rows"]
        assert rows[1:] == [["1"]]
        ok(de, f"ALTER TABLE default.{name} SET TBLPROPERTIES ('owner'='de_user')")
        ok(de, f"DROP TABLE default.{name}")
    finally:
        lakeward("iam", "detach-user-policy", "--user", "de_user",
                 "--policy", "DataEngineerDDLPolicy", **iam)  # fmt: skip
    with metastore(stack) as client:
        assert not client.table_exists("default", name)


def test_show_create_table_of_the_pipelines_tables_reads_back(stack: Settings) -> None:
    """Tables Spark and the ETL registered: SHOW CREATE TABLE gives DDL that makes them again."""
    from lakeward.query.formats import TableFormat
    from lakeward.query.statements import parse_statement
    from lakeward.query.statements.ddl.tables import CreateTable

    athena = client_for(stack)
    with metastore(stack) as client:
        names = [n for n in client.tables("default") if n.startswith("covid_")]
        tables = {n: client.table("default", n) for n in names}
    assert {"covid_confirmed_cases", "covid_raw_confirmed"} <= set(tables)
    for name, info in tables.items():
        if info.table_type == "VIRTUAL_VIEW":
            continue
        shown = ok(athena, f"SHOW CREATE TABLE default.{name}")
        assert shown["StatementType"] == "UTILITY" and shown["columns"] == ["createtab_stmt"]
        statement = "\n".join(r[0] for r in shown["rows"])
        command = parse_statement(
            statement, default_catalog=CATALOG, default_database="default", catalogs=[CATALOG]
        )
        assert isinstance(command, CreateTable), name
        assert command.columns == info.columns and command.partition_keys == info.partition_keys
        made, stored = command.format, TableFormat.of(info)
        assert (made.input_format, made.output_format, made.serde) == (
            stored.input_format,
            stored.output_format,
            stored.serde,
        )
        # Hive's DDL adds serialization.format=1 when a statement does not set it.
        parameters = {"serialization.format": "1", **stored.serde_parameters}
        assert made.serde_parameters == parameters, name
        assert command.location == info.location


def test_default_locations_and_drop_database_cascade(stack: Settings, spark: Any) -> None:
    athena = client_for(stack)
    db = unique("scratch")
    ok(athena, f"CREATE SCHEMA {db} WITH DBPROPERTIES ('owner'='analytics')")
    with metastore(stack) as client:
        database = client.database(db)
    assert database.location.rstrip("/").endswith(f"/warehouse/{db}.db")
    assert database.parameters == {"owner": "analytics"}
    ok(athena, f"CREATE EXTERNAL TABLE {db}.daily (n bigint) STORED AS PARQUET")
    with metastore(stack) as client:
        table = client.table(db, "daily")
    assert table.location.rstrip("/") == f"{database.location.rstrip('/')}/daily"
    assert "is not partitioned" in failed(athena, f"SHOW PARTITIONS {db}.daily")
    assert spark.catalog.tableExists(f"{db}.daily")

    ok(athena, f"DROP DATABASE {db} CASCADE")
    assert db not in [d.name for d in spark.catalog.listDatabases()]
    assert "Can not drop default database" in failed(athena, "DROP DATABASE default")
