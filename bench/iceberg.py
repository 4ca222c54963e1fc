"""Benchmark of Iceberg tables through the SQL service's DuckDB workgroup.

    .venv/bin/python bench/iceberg.py --data-dir <a running stack's data dir>
        [--rows 10000000] [--repeats 3]

In one run it writes ``--rows`` rows of events (user, time, country, amount), once as an
Iceberg table partitioned by day (through pyiceberg, a file per day and append) and once as
the same rows in plain Parquet files, one per day, under a Hive table partitioned by day.
Then, through boto3 against the stack, interleaved repeat by repeat:

- a full scan (an aggregate over every row) and a selective scan (one day) of the Iceberg
  table, against the same queries on the Parquet table;
- DELETE of one user's rows, through lakeward, against the same DELETE (of another user)
  run by Spark with Iceberg's runtime in its own session on the same metastore and lake;
- MERGE of 1 % of the rows (an update of their amount) through lakeward.

It prints each median, the ratios, and drops what it made.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _common import ms, say  # noqa: E402

from lakeward.config import load_settings  # noqa: E402
from lakeward.metastore.uris import metastore_uris  # noqa: E402

DAYS = 20
USERS = 100_000


def run(athena: Any, sql: str) -> float:
    """Seconds from start to SUCCEEDED, polled every 10 ms, as a client waits."""
    started = time.perf_counter()
    execution_id = athena.start_query_execution(QueryString=sql)["QueryExecutionId"]
    while True:
        state = athena.get_query_execution(QueryExecutionId=execution_id)["QueryExecution"][
            "Status"
        ]
        if state["State"] in ("SUCCEEDED", "FAILED", "CANCELLED"):
            break
        time.sleep(0.01)
    elapsed = time.perf_counter() - started
    if state["State"] != "SUCCEEDED":
        raise SystemExit(f"{sql[:80]}...: {state}")
    athena.get_query_results(QueryExecutionId=execution_id)
    return elapsed


def day_rows(day: int, rows: int) -> Any:
    import numpy as np
    import pyarrow as pa

    generator = np.random.default_rng(day)
    start = datetime(2024, 1, 1) + timedelta(days=day)
    seconds = generator.integers(0, 86_400, rows)
    return pa.table(
        {
            "user_id": pa.array(generator.integers(0, USERS, rows), pa.int64()),
            "event_at": pa.array(
                np.datetime64(start, "us") + seconds.astype("timedelta64[s]"), pa.timestamp("us")
            ),
            "country": pa.array(generator.choice(["IS", "NO", "SE", "DK", "FI"], rows)),
            "amount": pa.array(generator.random(rows) * 100, pa.float64()),
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    import boto3
    import pyarrow.parquet as pq
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import DayTransform
    from pyiceberg.types import DoubleType, LongType, NestedField, StringType, TimestampType

    from lakeward.iceberg.catalog import iceberg_catalog
    from lakeward.storage.paths import lake_uri, local_path

    settings = load_settings(data_dir=args.data_dir, env={})
    athena = boto3.client(
        "athena",
        endpoint_url=settings.server_url,
        region_name="us-east-1",
        aws_access_key_id=settings.api.access_key_id,
        aws_secret_access_key=settings.api.secret_access_key,
    )
    tag = uuid.uuid4().hex[:6]
    bucket = settings.lake.data_bucket
    iceberg_name, parquet_name = f"bench_ice_{tag}", f"bench_parquet_{tag}"
    parquet_place = f"s3://{bucket}/bench/{parquet_name}"
    catalog = iceberg_catalog(settings, metastore_uris(settings))
    schema = Schema(
        NestedField(1, "user_id", LongType(), False),
        NestedField(2, "event_at", TimestampType(), False),
        NestedField(3, "country", StringType(), False),
        NestedField(4, "amount", DoubleType(), False),
    )
    spec = PartitionSpec(PartitionField(2, 1000, DayTransform(), "event_at_day"))
    say(f"writing {args.rows:,} rows over {DAYS} days, as Iceberg and as Parquet...")
    table = catalog.create_table(
        ("default", iceberg_name),
        schema,
        location=f"s3://{bucket}/bench/{iceberg_name}",
        partition_spec=spec,
    )
    parquet_dir = local_path(lake_uri(settings, parquet_place))
    assert parquet_dir is not None, "the benchmark writes its Parquet files into an embedded lake"
    per_day = args.rows // DAYS
    for day in range(DAYS):
        rows = day_rows(day, per_day)
        table.append(rows)
        directory = parquet_dir / f"day={(datetime(2024, 1, 1) + timedelta(days=day)).date()}"
        directory.mkdir(parents=True, exist_ok=True)
        pq.write_table(rows, directory / "part-0.parquet", compression="zstd")
    run(
        athena,
        f"CREATE EXTERNAL TABLE {parquet_name} (user_id bigint, event_at timestamp, "
        f"country string, amount double) PARTITIONED BY (day date) STORED AS PARQUET "
        f"LOCATION '{parquet_place}'",
    )
    run(athena, f"MSCK REPAIR TABLE {parquet_name}")
    try:
        scans(athena, iceberg_name, parquet_name, args.repeats)
        deletes(settings, athena, iceberg_name, args.repeats)
        merge(athena, iceberg_name, args.rows)
    finally:
        run(athena, f"DROP TABLE {iceberg_name}")
        run(athena, f"DROP TABLE {parquet_name}")


def scans(athena: Any, iceberg_name: str, parquet_name: str, repeats: int) -> None:
    queries = {
        "full scan": "SELECT country, count(*), sum(amount) FROM {t} GROUP BY country",
        "one day": (
            "SELECT count(*), sum(amount) FROM {t} WHERE event_at >= TIMESTAMP "
            "'2024-01-05 00:00:00' AND event_at < TIMESTAMP '2024-01-06 00:00:00'"
        ),
    }
    for label, sql in queries.items():
        iceberg, parquet = [], []
        run(athena, sql.format(t=iceberg_name))  # warm both
        run(athena, sql.format(t=parquet_name))
        for _ in range(repeats):
            iceberg.append(run(athena, sql.format(t=iceberg_name)))
            parquet.append(run(athena, sql.format(t=parquet_name)))
        a, b = statistics.median(iceberg), statistics.median(parquet)
        say(f"{label:10} Iceberg {ms(a):>12}  Parquet {ms(b):>12}  ratio {a / b:.2f}x")


def deletes(settings: Any, athena: Any, iceberg_name: str, repeats: int) -> None:
    import os

    from pyspark.sql import SparkSession

    from lakeward.jvm import find_java, java_env
    from lakeward.spark import spark_conf, with_iceberg

    os.environ.update(
        {
            k: v
            for k, v in java_env(find_java(settings.metastore.java_home)).items()
            if k in ("JAVA_HOME", "SPARK_HOME")
        }
    )
    builder = SparkSession.builder
    for key, value in with_iceberg(spark_conf(settings, "bench-iceberg")).items():
        builder = builder.config(key, value)
    spark = builder.enableHiveSupport().getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    spark.sql(f"SELECT count(*) FROM default.{iceberg_name}").collect()  # warm
    ours, theirs = [], []
    for i in range(repeats):
        ours.append(run(athena, f"DELETE FROM {iceberg_name} WHERE user_id = {2 * i + 1}"))
        started = time.perf_counter()
        spark.sql(f"REFRESH TABLE default.{iceberg_name}")
        spark.sql(f"DELETE FROM default.{iceberg_name} WHERE user_id = {2 * i + 2}")
        theirs.append(time.perf_counter() - started)
    spark.stop()
    a, b = statistics.median(ours), statistics.median(theirs)
    say(f"{'DELETE':10} lakeward {ms(a):>11}  Spark {ms(b):>14}  ratio {a / b:.2f}x")


def merge(athena: Any, iceberg_name: str, rows: int) -> None:
    share = max(1, USERS // 100)
    sql = (  # the users below share are 1 % of the users, so about 1 % of the rows
        f"MERGE INTO {iceberg_name} t USING (SELECT DISTINCT user_id "
        f"FROM {iceberg_name} WHERE user_id < {share}) s ON t.user_id = s.user_id "
        "WHEN MATCHED THEN UPDATE SET amount = t.amount + 1"
    )
    elapsed = run(athena, sql)
    say(f"{'MERGE 1%':10} lakeward {ms(elapsed):>11}  (of {rows:,} rows)")


if __name__ == "__main__":
    main()
