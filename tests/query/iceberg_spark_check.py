"""A separate Spark session with Iceberg's runtime on a stack's metastore and lake, as a
data engineer would open one. Prints what it saw, as JSON, for tests/query/test_iceberg_spark.py.

    python tests/query/iceberg_spark_check.py <data dir> <lakeward's table> <Spark's table>

reads a table lakeward made, deletes a row of it with merge-on-read (a position-delete
file), and makes a table of its own.

    python tests/query/iceberg_spark_check.py <data dir> --describe < tables.json

describes each table of ``{"table": [snapshot ids, ...]}``: whether it exists, its rows (now
and as of each snapshot), columns, partitioning, properties, snapshots and data files.
"""

from __future__ import annotations

import json
import os
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from lakeward.config import Settings, load_settings
from lakeward.jvm import find_java, java_env
from lakeward.spark import spark_conf, with_iceberg


def session(settings: Settings) -> SparkSession:
    os.environ.update(
        {
            k: v
            for k, v in java_env(find_java(settings.metastore.java_home)).items()
            if k in ("JAVA_HOME", "SPARK_HOME")
        }
    )
    conf = with_iceberg(spark_conf(settings, "iceberg-check"))
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.enableHiveSupport().getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def text(value: Any) -> str | None:
    """A value as Athena's API gives it: text, timestamps to the millisecond."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    return str(value).lower() if isinstance(value, bool) else str(value)


def rows(frame: Any) -> list[list[Any]]:
    """A frame's rows as JSON-ready lists of text, sorted."""
    found = [[text(v) for v in r] for r in frame.collect()]
    return sorted(found, key=lambda r: [("" if v is None else v) for v in r])


def describe(spark: SparkSession, table: str, versions: list[int]) -> dict[str, Any]:
    name = f"default.{table}"
    if not spark.catalog.tableExists(name):
        return {"exists": False}
    described = spark.sql(f"DESCRIBE TABLE {name}").collect()
    partitioning, in_section = [], False
    for line in described:
        if line["col_name"].startswith("#"):
            in_section = line["col_name"] == "# Partitioning"
        elif in_section and line["col_name"].startswith("Part "):
            partitioning.append(line["data_type"])
    properties = {r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES {name}").collect()}
    return {
        "exists": True,
        "rows": rows(spark.table(name)),
        "versions": {
            str(v): rows(spark.sql(f"SELECT * FROM {name} VERSION AS OF {v}")) for v in versions
        },
        "columns": [[f.name, f.dataType.simpleString()] for f in spark.table(name).schema],
        "partitioning": partitioning,
        "properties": properties,
        "snapshots": spark.sql(f"SELECT count(*) FROM {name}.snapshots").collect()[0][0],
        "data_files": spark.sql(f"SELECT count(*) FROM {name}.data_files").collect()[0][0],
    }


def main(data_dir: str, theirs: str, ours: str) -> None:
    settings = load_settings(data_dir=Path(data_dir), env={})
    if theirs == "--describe":
        spark = session(settings)
        tables = json.load(sys.stdin)
        print(json.dumps({t: describe(spark, t, v) for t, v in tables.items()}))
        spark.stop()
        return
    spark = session(settings)
    read = [r.asDict() for r in spark.table(f"default.{theirs}").orderBy("id").collect()]
    spark.sql(
        f"ALTER TABLE default.{theirs} SET TBLPROPERTIES "
        "('write.delete.mode' = 'merge-on-read', 'write.update.mode' = 'merge-on-read')"
    )
    spark.sql(f"DELETE FROM default.{theirs} WHERE id = 2")
    spark.sql(f"UPDATE default.{theirs} SET v = 'by spark' WHERE id = 3")
    bucket = settings.lake.data_bucket
    spark.sql(
        f"CREATE TABLE default.{ours} (id bigint, v string) USING iceberg "
        f"PARTITIONED BY (bucket(2, id)) LOCATION 's3://{bucket}/iceberg/{ours}'"
    )
    spark.sql(f"INSERT INTO default.{ours} VALUES (10, 'ten'), (11, 'eleven'), (12, 'twelve')")
    deletes = spark.sql(f"SELECT count(*) AS n FROM default.{theirs}.delete_files").collect()[0][
        "n"
    ]
    print(json.dumps({"read": read, "delete_files": deletes}))
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else "")
