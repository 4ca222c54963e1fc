"""Parsing Athena's DDL (Hive's grammar): what each clause becomes, and precise refusals."""

from __future__ import annotations

from typing import Any

import pytest

from lakeward.errors import InvalidRequest
from lakeward.metastore.tables import Column, escape_path_name, partition_name
from lakeward.query import formats
from lakeward.query.model import StatementType, TableRef
from lakeward.query.statements import parse_statement
from lakeward.query.statements.ddl.databases import CreateDatabase, DropDatabase
from lakeward.query.statements.ddl.parsing import unescape
from lakeward.query.statements.ddl.partitions import AddPartitions, DropPartitions, MovePartition
from lakeward.query.statements.ddl.tables import AlterTable, CreateTable, create_statement

CATALOG = "demo_hive_metastore"


def parse(sql: str) -> Any:
    return parse_statement(
        sql, default_catalog=CATALOG, default_database="default", catalogs=[CATALOG]
    )


def refused(sql: str) -> str:
    with pytest.raises(InvalidRequest) as info:
        parse(sql)
    return str(info.value)


def test_create_external_table_reads_every_clause() -> None:
    statement = parse(
        "CREATE EXTERNAL TABLE IF NOT EXISTS `Sales`.orders (\n"
        "  id bigint COMMENT 'the id', tags array<string>, attrs map<string,int>,\n"
        "  s struct<a:int,B:decimal(10,2)>, price DECIMAL(12, 2), code char(3)\n"
        ") COMMENT 'orders' PARTITIONED BY (dt date, region string)\n"
        "ROW FORMAT DELIMITED FIELDS TERMINATED BY '\\t' ESCAPED BY '\\\\'\n"
        "  COLLECTION ITEMS TERMINATED BY '|' MAP KEYS TERMINATED BY '\\003'\n"
        "  LINES TERMINATED BY '\\n' NULL DEFINED AS ''\n"
        "STORED AS TEXTFILE LOCATION 's3://lakeward-data/orders/'\n"
        "TBLPROPERTIES ('skip.header.line.count'='1', \"classification\"=\"csv\")"
    )
    assert statement.statement_type == StatementType.DDL
    command = statement
    assert isinstance(command, CreateTable)
    assert command.ref == TableRef(CATALOG, "sales", "orders")
    assert command.if_not_exists and command.comment == "orders"
    assert [(c.name, c.type, c.comment) for c in command.columns] == [
        ("id", "bigint", "the id"),
        ("tags", "array<string>", None),
        ("attrs", "map<string,int>", None),
        ("s", "struct<a:int,b:decimal(10,2)>", None),
        ("price", "decimal(12,2)", None),
        ("code", "char(3)", None),
    ]
    assert command.partition_keys == [Column("dt", "date"), Column("region", "string")]
    assert command.format.kind == "text"
    assert command.format.serde_parameters == {
        "field.delim": "\t",
        "serialization.format": "\t",
        "escape.delim": "\\",
        "collection.delim": "|",
        "mapkey.delim": "\x03",
        "line.delim": "\n",
        "serialization.null.format": "",
    }
    assert command.location == "s3://lakeward-data/orders/"
    assert command.properties == {"skip.header.line.count": "1", "classification": "csv"}
    kept = parse(
        "CREATE EXTERNAL TABLE t (a int) TBLPROPERTIES ('table_type'='HIVE', "
        "'projection.enabled'='false', 'has_encrypted_data'='false')"
    )
    assert isinstance(kept, CreateTable) and len(kept.properties) == 3
    assert command.catalogs() == {CATALOG}


@pytest.mark.parametrize(
    ("clauses", "expected"),
    [
        ("", formats.TEXTFILE),
        ("STORED AS PARQUET", formats.PARQUET),
        ("STORED AS orc", formats.ORC),
        ("STORED AS JSON", formats.JSON),
        ("STORED AS AVRO", formats.AVRO),
        (
            "ROW FORMAT SERDE 'org.openx.data.jsonserde.JsonSerDe' "
            "WITH SERDEPROPERTIES ('ignore.malformed.json'='true')",
            formats.TableFormat(
                formats.TEXT_INPUT,
                formats.OLD_TEXT_OUTPUT,  # as Athena records it for this SerDe
                formats.OPENX_JSON_SERDE,
                {"ignore.malformed.json": "true", "serialization.format": "1"},
            ),
        ),
        (
            "ROW FORMAT SERDE 'org.apache.hadoop.hive.serde2.OpenCSVSerde' "
            "WITH SERDEPROPERTIES ('separatorChar'=',', 'quoteChar'='\"') STORED AS TEXTFILE",
            formats.TableFormat(
                formats.TEXT_INPUT,
                formats.TEXT_OUTPUT,
                formats.OPEN_CSV_SERDE,
                {"separatorChar": ",", "quoteChar": '"', "serialization.format": "1"},
            ),
        ),
        (
            f"STORED AS INPUTFORMAT '{formats.PARQUET_INPUT}' "
            f"OUTPUTFORMAT '{formats.PARQUET_OUTPUT}'",
            formats.TableFormat(
                formats.PARQUET_INPUT,
                formats.PARQUET_OUTPUT,
                formats.LAZY_SIMPLE_SERDE,
                {"serialization.format": "1"},
            ),
        ),
        (
            f"ROW FORMAT SERDE '{formats.PARQUET_SERDE}' STORED AS INPUTFORMAT "
            f"'{formats.PARQUET_INPUT}' OUTPUTFORMAT '{formats.PARQUET_OUTPUT}'",
            formats.TableFormat(
                formats.PARQUET_INPUT,
                formats.PARQUET_OUTPUT,
                formats.PARQUET_SERDE,
                {"serialization.format": "1"},
            ),
        ),
    ],
)
def test_the_storage_descriptor_follows_row_format_and_stored_as(
    clauses: str, expected: formats.TableFormat
) -> None:
    command = parse(f"CREATE EXTERNAL TABLE t (a int) {clauses} LOCATION 'x'")
    assert isinstance(command, CreateTable)
    assert command.format == expected


def test_hive_ddl_strings_take_backslash_escapes_and_queries_do_not() -> None:
    # The DDL PyAthena's SQLAlchemy dialect writes for a comment holding quotes.
    command = parse(
        "CREATE EXTERNAL TABLE t (c string COMMENT '%str% \"s\\'\\'t\\'r\"') "
        "COMMENT 'it''s a\\\\b\\tc' LOCATION 'x'"
    )
    assert isinstance(command, CreateTable)
    assert command.columns[0].comment == "%str% \"s''t'r\""
    assert command.comment == "it's a\\b\tc"
    # Trino's strings have no escapes: a backslash before the closing quote is a character.
    assert parse("SELECT 'C:\\' AS p").sql == "SELECT 'C:\\' AS p"


def test_hive_ddl_comments_and_properties_keep_whitespace_runs_as_one_space() -> None:
    # What Athena's catalog then gives back (PyAthena's suite checks both against AWS): a
    # multi-line comment or Avro schema literal reads with each run of whitespace one space.
    command = parse(
        "CREATE EXTERNAL TABLE t (c string COMMENT 'a  b') COMMENT '\ntable comment\n\n"
        "multiline table comment\n' ROW FORMAT SERDE 'org.apache.hadoop.hive.serde2.avro."
        "AvroSerDe' WITH SERDEPROPERTIES ('avro.schema.literal' = '{\n  \"type\" : "
        "\"record\"\n}') STORED AS AVRO LOCATION 'x'"
    )
    assert isinstance(command, CreateTable)
    assert command.comment == "\ntable comment multiline table comment\n"
    assert command.columns[0].comment == "a b"
    assert command.format.serde_parameters["avro.schema.literal"] == '{ "type" : "record"\n}'
    # A query's strings are Trino's, kept as written.
    assert parse("SELECT 'a  b' AS p").sql == "SELECT 'a  b' AS p"


def test_hive_string_escapes() -> None:
    assert unescape(r"\t") == "\t"
    assert unescape(r"\001") == "\x01"
    assert unescape(r"\\") == "\\"
    assert unescape(r"a\u0041") == "aA"
    assert unescape(r"\%") == r"\%"
    assert unescape(r"\q") == "q"


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        (
            "CREATE EXTERNAL TABLE t (a int, b strin) LOCATION 'x'",
            "the type of column b at line 1, column 35: 'strin' is not a Hive type",
        ),
        (
            "CREATE EXTERNAL TABLE t (a int,\n  b string) STORED AS PARQUT",
            "at line 2, column 23: expected a file format (PARQUET, ORC, TEXTFILE, JSON, AVRO "
            "or INPUTFORMAT ... OUTPUTFORMAT), found 'PARQUT'",
        ),
        (
            "CREATE EXTERNAL TABLE t (a int, b string) LOCATION 'x' TBLPROPERTIE ('a'='b')",
            "at line 1, column 56: expected the end of the statement, found 'TBLPROPERTIE'",
        ),
        ("CREATE EXTERNAL TABLE t (a int, b string", "expected , or ), found the end"),
        ("CREATE EXTERNAL TABLE t (a int, b )", "column 35: expected the type of column b"),
        ("CREATE EXTERNAL TABLE t (a int, a string)", "column 33: column a is named twice"),
        ("CREATE EXTERNAL TABLE t (a decimal(50,2))", "precision must be 1 to 38"),
        ("CREATE EXTERNAL TABLE t (a map<int>)", "map in 'map<int>' takes 2 type(s)"),
        ("CREATE EXTERNAL TABLE t (a varchar)", "'varchar' takes 1 to 1 parameters"),
        ("CREATE EXTERNAL TABLE t (a uniontype<int,string>)", "uniontype is not supported"),
        ("CREATE EXTERNAL TABLE t (`a-b` int)", "a column name has only lower-case letters"),
        ("CREATE EXTERNAL TABLE t AS SELECT 1", "expected a list of columns"),
        ("CREATE EXTERNAL TABLE t (a int) PARTITIONED BY (a int)", "also a column of the table"),
        (
            "CREATE EXTERNAL TABLE t (a int) PARTITIONED BY (p int) "
            "CLUSTERED BY (p) INTO 2 BUCKETS",
            "bucketing column p is not a column of the table",
        ),
        ("CREATE EXTERNAL TABLE t (a int) CLUSTERED BY (a) INTO 0 BUCKETS", "at least 1"),
        ("CREATE EXTERNAL TABLE t (a int) ROW FORMAT SERDE 'com.x.Grok'", "com.x.Grok"),
        ("CREATE EXTERNAL TABLE t (a int) ROW FORMAT DELIMITED LINES TERMINATED BY ','", "LINES"),
        (
            "CREATE EXTERNAL TABLE t (a int) TBLPROPERTIES ('has_encrypted_data'='true')",
            "CSE-KMS",
        ),
        (
            "CREATE EXTERNAL TABLE t (a int) TBLPROPERTIES ('table_type'='ICEBERG')",
            "an Iceberg table is made by CREATE TABLE, without EXTERNAL",
        ),
        (
            "CREATE EXTERNAL TABLE t (a int) TBLPROPERTIES ('has_encrypted_data'='true')",
            "encrypted on the client side",
        ),
        ("CREATE EXTERNAL TABLE t (a int) TBLPROPERTIES ('skip.header.line.count'='x')", "whole"),
        ("CREATE EXTERNAL TABLE t (a int) LOCATION s3", "expected a quoted location, found 's3'"),
        ("CREATE EXTERNAL TABLE `a.b` (a int)", "'a.b' is not a table name"),
        ("CREATE DATABASE IF EXISTS x", "expected NOT, found 'EXISTS'"),
        ("CREATE TABLE t (a int) LOCATION 'x'", "CREATE TABLE without AS makes Iceberg tables"),
        (
            "CREATE TABLE t (a int) LOCATION 'x' TBLPROPERTIES ('table_type'='HIVE')",
            "for a Hive table use CREATE EXTERNAL TABLE",
        ),
        (
            "CREATE TABLE t (a int) PARTITIONED BY (day(a) TBLPROPERTIES ('table_type'='ICEBERG')",
            "expected , or )",
        ),
        ("DROP DATABASE x y", "expected the end of the statement, found 'y'"),
        (
            "ALTER TABLE t MODIFY COLUMN a b int",
            "column 15: expected ADD, DROP, PARTITION, SET, UNSET, CHANGE, RENAME",
        ),
        ("ALTER TABLE t CHANGE COLUMN a", "expected the column's new name"),
        ("ALTER TABLE t UNSET TBLPROPERTIES 'a'", "expected (, found ''a''"),
        ("ALTER TABLE t SET SERDEPROPERTIES ('a'='b')", "column 19: expected TBLPROPERTIES or LOC"),
        ("ALTER TABLE t PARTITION (p='1') SET 'x'", "expected LOCATION, found ''x''"),
        ("ALTER TABLE t ADD PARTITION (dt=)", "expected a value"),
        ("ALTER TABLE t ADD PARTITION (dt='1', dt='2')", "partition column dt is named twice"),
        ("ALTER TABLE t DROP PARTITION dt='1'", "expected (, found 'dt'"),
        ("MSCK TABLE t", "expected REPAIR, found 'TABLE'"),
        ("SHOW PARTITIONS", "expected a table name, found the end of the statement"),
    ],
)
def test_malformed_statements_name_the_position_and_the_token(sql: str, message: str) -> None:
    assert message in refused(sql)


def test_databases() -> None:
    create = parse(
        "CREATE SCHEMA IF NOT EXISTS sales COMMENT 'all sales' LOCATION 's3://b/sales' "
        "WITH DBPROPERTIES ('owner'='bi')"
    )
    assert create == CreateDatabase(
        CATALOG, "sales", True, "all sales", "s3://b/sales", {"owner": "bi"}
    )
    drop = parse("DROP DATABASE IF EXISTS sales CASCADE")
    assert drop == DropDatabase(CATALOG, "sales", if_exists=True, cascade=True)
    assert parse("DROP SCHEMA sales RESTRICT") == DropDatabase(CATALOG, "sales")


def test_alter_table_statements() -> None:
    add = parse(
        "ALTER TABLE orders ADD IF NOT EXISTS PARTITION (dt='2020-01-01', region = 'eu') "
        "LOCATION 's3://x/1' PARTITION (region='us', dt='2020-01-02')"
    )
    assert isinstance(add, AddPartitions) and add.if_not_exists
    assert add.specs == [
        ([("dt", "2020-01-01"), ("region", "eu")], "s3://x/1"),
        ([("region", "us"), ("dt", "2020-01-02")], None),
    ]
    drop = parse("ALTER TABLE orders DROP PARTITION (dt='2020-01-01'), PARTITION (n=-5)")
    assert isinstance(drop, DropPartitions) and not drop.if_exists
    assert drop.specs == [[("dt", "2020-01-01")], [("n", "-5")]]
    props = parse("ALTER TABLE orders SET TBLPROPERTIES ('a'='1')")
    assert props == AlterTable(
        TableRef(CATALOG, "default", "orders"), "SET TBLPROPERTIES", {"a": "1"}
    )
    columns = parse("ALTER TABLE orders ADD COLUMNS (c int COMMENT 'new', d array<string>)")
    assert isinstance(columns, AlterTable) and columns.clause == "ADD COLUMNS"
    assert columns.columns == [Column("c", "int", "new"), Column("d", "array<string>")]
    moved = parse("ALTER TABLE orders SET LOCATION 's3://b/orders2/'")
    assert isinstance(moved, AlterTable) and moved.clause == "SET LOCATION"
    assert moved.location == "s3://b/orders2/"
    part = parse("ALTER TABLE orders PARTITION (dt='2020-01-01') SET LOCATION 's3://b/x'")
    assert isinstance(part, MovePartition)
    assert (part.spec, part.location) == ([("dt", "2020-01-01")], "s3://b/x")
    replaced = parse("ALTER TABLE orders REPLACE COLUMNS (c bigint)")
    assert isinstance(replaced, AlterTable) and replaced.clause == "REPLACE COLUMNS"


def test_show_statements_are_utility() -> None:
    assert parse("SHOW PARTITIONS orders").statement_type == StatementType.UTILITY
    assert parse("SHOW CREATE TABLE x.orders").statement_type == StatementType.UTILITY
    assert parse("MSCK REPAIR TABLE orders").statement_type == StatementType.DDL
    assert parse("DROP TABLE IF EXISTS orders").statement_type == StatementType.DDL


def test_partition_names_escape_as_hive_does() -> None:
    assert escape_path_name("a/b:c=d%") == "a%2Fb%3Ac%3Dd%25"
    assert partition_name(["dt", "city"], ["2020-01-01", "São Paulo"]) == (
        "dt=2020-01-01/city=São Paulo"
    )


def test_show_create_table_reads_back_as_the_same_table() -> None:
    sql = (
        "CREATE EXTERNAL TABLE db.t (a int COMMENT 'it''s a', m map<string,int>) "
        "COMMENT 'T' PARTITIONED BY (dt date) CLUSTERED BY (a) INTO 4 BUCKETS "
        "ROW FORMAT DELIMITED FIELDS TERMINATED BY '\\001' "
        "NULL DEFINED AS '\\\\N' LOCATION 'file:/lake/b/t' TBLPROPERTIES ('k'='v')"
    )
    command = parse(sql)
    assert isinstance(command, CreateTable)
    from lakeward.metastore.tables import TableInfo

    table = TableInfo(
        "db",
        "t",
        "file:/lake/b/t",
        command.columns,
        command.partition_keys,
        parameters={**command.properties, "comment": "T", "EXTERNAL": "TRUE"},
        input_format=command.format.input_format,
        output_format=command.format.output_format,
        serde=command.format.serde,
        serde_parameters=command.format.serde_parameters,
        bucket_columns=command.bucket_columns,
        bucket_count=command.bucket_count,
    )
    assert (command.bucket_columns, command.bucket_count) == (["a"], 4)
    shown = create_statement(table)
    assert "FIELDS TERMINATED BY '\\001'" in shown and "'EXTERNAL'" not in shown
    again = parse(shown)
    assert isinstance(again, CreateTable)
    assert (again.columns, again.partition_keys, again.format, again.comment) == (
        command.columns,
        command.partition_keys,
        command.format,
        "T",
    )
    assert (again.bucket_columns, again.bucket_count) == (["a"], 4)
    assert again.properties == {"k": "v"} and again.location == "file:/lake/b/t"


@pytest.mark.parametrize(
    ("hive_type", "good", "bad"),
    [
        ("int", ["5", "-2147483648", "05"], ["2147483648", "5.0", "x"]),
        ("tinyint", ["127"], ["128"]),
        ("decimal(5,2)", ["1.5", "-3"], ["NaN", "one"]),
        ("boolean", ["true", "FALSE"], ["yes"]),
        ("date", ["2020-02-29"], ["2020-02-30", "2020-2-1", "yesterday"]),
        ("timestamp", ["2020-01-01 10:00:00", "2020-01-01 10:00:00.123"], ["2020-01-01"]),
        ("string", ["any/thing=at all"], [""]),
    ],
)
def test_partition_values_are_checked_against_their_type(
    hive_type: str, good: list[str], bad: list[str]
) -> None:
    from lakeward.query.statements.ddl.partitions import check_value

    for value in good:
        check_value("k", hive_type, value)
    for value in bad:
        with pytest.raises(InvalidRequest, match="(column k|k has an empty value)"):
            check_value("k", hive_type, value)
