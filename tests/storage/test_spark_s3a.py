"""Spark reads and writes the lake through the S3 endpoint with Hadoop's s3a connector.

pyspark 3.5's Hadoop client is 3.3.4; the connector the package registries carry is
hadoop-aws 3.3.1 with the AWS SDK bundle it was built with (from PyPI's sagemaker_pyspark
sdist, installed by ``./dev.sh install``). This is the check that the version skew works:
listing, reading Parquet written by another client, and writing with s3a's committer, whose
uploads are signed aws-chunked bodies (``STREAMING-AWS4-HMAC-SHA256-PAYLOAD``). Spark runs
in its own process, with the jars on its classpath.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakeward.access.control import AccessControl
from lakeward.config import Settings, load_settings
from lakeward.http.s3 import S3Dispatch, S3Endpoint
from lakeward.storage import load_storage
from tests.helpers import need, need_java, s3_client, serving

pytestmark = pytest.mark.spark

BUCKET = "lakeward-data"
JARS = Path(sys.prefix) / "share" / "lakeward" / "s3a"
SPARK_JOB = """
import json, os, sys
from pyspark.sql import SparkSession
options = json.loads(sys.argv[1])
builder = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
for key, value in options.items():
    builder = builder.config(key, value)
spark = builder.getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
source = spark.read.parquet("s3a://lakeward-data/in/deaths.parquet")
total = source.groupBy().sum("deaths").collect()[0][0]
source.filter("deaths > 100").write.mode("overwrite").parquet("s3a://lakeward-data/out/big/")
back = spark.read.parquet("s3a://lakeward-data/out/big/").count()
print(json.dumps({"rows": source.count(), "total": total, "written": back}))
spark.stop()
"""


@pytest.fixture
def endpoint(tmp_path: Path) -> Iterator[tuple[str, str, str, Settings]]:
    settings = load_settings(data_dir=tmp_path / "data", env={})
    access = AccessControl(settings)
    access.principals.create_user("spark")
    policy = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}],
    }
    access.principals.create_policy("LakeAll", json.dumps(policy))
    access.principals.attach_user_policy("spark", "LakeAll")
    key_id, secret = access.principals.create_access_key("spark")
    storage = load_storage(settings)
    storage.ensure_bucket(BUCKET)

    async def elsewhere(scope: object, receive: object, send: object) -> None:
        raise AssertionError("only S3 requests are expected")

    with serving(S3Dispatch(elsewhere, S3Endpoint(settings, access, storage))) as url:
        yield url, key_id, secret, settings


def test_spark_reads_and_writes_parquet_through_s3a(
    endpoint: tuple[str, str, str, Settings],
) -> None:
    need_java()
    need(
        (JARS / "hadoop-aws-3.3.1.jar").is_file(),
        f"the s3a jars are not in {JARS} (./dev.sh install puts them there)",
    )
    url, key_id, secret, settings = endpoint
    deaths = list(range(0, 5000, 7))
    table = pa.table({"country": [f"c{i % 17}" for i in range(len(deaths))], "deaths": deaths})
    sink = io.BytesIO()
    pq.write_table(table, sink)
    s3 = s3_client(url, key_id, secret)
    s3.put_object(Bucket=BUCKET, Key="in/deaths.parquet", Body=sink.getvalue())

    jars = ",".join(str(JARS / name) for name in sorted(os.listdir(JARS)))
    options = {
        "spark.jars": jars,
        "spark.hadoop.fs.s3a.endpoint": url,
        "spark.hadoop.fs.s3a.path.style.access": "true",
        "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
        "spark.hadoop.fs.s3a.endpoint.region": "us-east-1",
        "spark.hadoop.fs.s3a.access.key": key_id,
        "spark.hadoop.fs.s3a.secret.key": secret,
        "spark.hadoop.fs.s3a.attempts.maximum": "1",
        "spark.local.dir": str(Path(settings.data_dir) / "spark-tmp"),
    }
    done = subprocess.run(
        [sys.executable, "-c", SPARK_JOB, json.dumps(options)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcome == {
        "rows": len(deaths),
        "total": sum(deaths),
        "written": sum(1 for d in deaths if d > 100),
    }
    written = s3.list_objects_v2(Bucket=BUCKET, Prefix="out/big/")["Contents"]
    names = [o["Key"] for o in written]
    assert "out/big/_SUCCESS" in names and any(n.endswith(".parquet") for n in names)
    # The committer's temporary files are gone: only what the job published is in the lake.
    assert not [n for n in names if "_temporary" in n]
