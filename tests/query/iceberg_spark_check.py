"""A separate Spark session with Iceberg's runtime on a stack's metastore and lake, as a
data engineer would open one: it reads a table lakeward made, deletes a row of it with
merge-on-read (a position-delete file), and makes a table of its own. Prints what it read,
as JSON, for tests/query/test_iceberg_spark.py.

    python tests/query/iceberg_spark_check.py <data dir> <lakeward's table> <Spark's table>
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from pyspark.sql import SparkSession

from lakeward.config import load_settings
from lakeward.jvm import find_java, java_env
from lakeward.spark import spark_conf, with_iceberg


def main(data_dir: str, theirs: str, ours: str) -> None:
    settings = load_settings(data_dir=Path(data_dir), env={})
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
    main(*sys.argv[1:4])
