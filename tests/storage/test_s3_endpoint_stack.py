"""The stack's S3 endpoint with the seed's users: the data engineer lists and reads the covid
data with the aws CLI and boto3 at the address ``lakeward credentials`` prints; the
salesperson is refused."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from lakeward.config import Settings
from tests.access.test_seed_users import creds
from tests.helpers import lakeward

pytestmark = pytest.mark.spark


def endpoint_environment(stack: Settings, secret: str, tmp_path: Path) -> dict[str, str]:
    user = creds(stack, secret)
    printed = lakeward("credentials", data_dir=stack.data_dir).stdout
    endpoint = next(
        line.split("=", 1)[1] for line in printed.splitlines() if "AWS_ENDPOINT_URL=" in line
    )
    return {
        **os.environ,
        "AWS_ACCESS_KEY_ID": user["access_key_id"],
        "AWS_SECRET_ACCESS_KEY": user["secret_access_key"],
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_CONFIG_FILE": str(tmp_path / "none"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
    }


def s3_client(env: dict[str, str]) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=env["AWS_ENDPOINT_URL"],
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        region_name="us-east-1",
    )


def aws(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    command = [str(Path(sys.executable).parent / "aws"), "s3", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)


def test_the_data_engineer_lists_and_reads_the_lake_over_s3(
    stack: Settings, tmp_path: Path
) -> None:
    env = endpoint_environment(stack, "DataEngineerUserCreds", tmp_path)
    listed = aws(env, "ls", f"s3://{stack.lake.data_bucket}/")
    assert listed.returncode == 0, listed.stderr
    assert "PRE covid_data/" in listed.stdout
    s3 = s3_client(env)
    raw = s3.list_objects_v2(Bucket=stack.lake.data_bucket, Prefix="covid_data/csv/")
    names = [o["Key"] for o in raw["Contents"]]
    deaths = next(n for n in names if n.endswith("time_series_covid19_deaths_global.csv"))
    head = s3.get_object(Bucket=stack.lake.data_bucket, Key=deaths, Range="bytes=0-13")
    assert head["Body"].read() == b"Province/State"


def test_the_salesperson_is_refused_over_s3(stack: Settings, tmp_path: Path) -> None:
    env = endpoint_environment(stack, "SalesUserCreds", tmp_path)
    listed = aws(env, "ls", f"s3://{stack.lake.data_bucket}/covid_data/")
    assert listed.returncode != 0 and "AccessDenied" in listed.stderr
    s3 = s3_client(env)
    with pytest.raises(ClientError) as caught:
        s3.get_object(Bucket=stack.lake.data_bucket, Key="covid_data/csv/x.csv")
    assert caught.value.response["Error"]["Code"] == "AccessDenied"


def test_a_tables_path_is_an_s3_name_the_endpoint_serves(stack: Settings, tmp_path: Path) -> None:
    from pyathena import connect

    env = endpoint_environment(stack, "DataEngineerUserCreds", tmp_path)
    cursor = connect(
        s3_staging_dir=f"s3://{stack.lake.data_bucket}/query-results/",
        endpoint_url=env["AWS_ENDPOINT_URL"],
        region_name="us-east-1",
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        catalog_name="demo_hive_metastore",
        schema_name="default",
        poll_interval=0.05,
    ).cursor()
    ((path,),) = cursor.execute('SELECT "$path" FROM covid_deaths LIMIT 1').fetchall()
    prefix = f"s3://{stack.lake.data_bucket}/covid_data/parquet/covid_deaths/"
    assert path.startswith(prefix) and path.endswith(".parquet")
    bucket, _, key = path.removeprefix("s3://").partition("/")
    head = s3_client(env).get_object(Bucket=bucket, Key=key, Range="bytes=0-3")
    assert head["Body"].read() == b"PAR1"


PANDAS_JOB = """
import sys
import pandas as pd
deaths = pd.read_parquet(sys.argv[1])
print(int(deaths[deaths["date"].astype(str) == "2020-09-10"]["deaths"].sum()))
pd.DataFrame({"a": [1, 2, 3]}).to_parquet(sys.argv[2])
print(int(pd.read_parquet(sys.argv[2])["a"].sum()))
"""


def test_pandas_reads_a_table_by_its_metastore_location_with_s3fs(
    stack: Settings, tmp_path: Path
) -> None:
    """pandas (through pyarrow's S3 and fsspec's s3fs), configured only by the environment
    `lakeward credentials` prints, reads a table at the s3:// location the metastore gives
    and writes an object."""
    from lakeward.metastore import MetastoreClient
    from lakeward.metastore.uris import metastore_uris
    from lakeward.storage import load_storage

    with MetastoreClient(metastore_uris(stack)) as client:
        location = client.table("default", "covid_deaths").location
    assert location.startswith(f"s3://{stack.lake.data_bucket}/covid_data/parquet/covid_deaths/")
    env = endpoint_environment(stack, "DataEngineerUserCreds", tmp_path)
    written = f"s3://{stack.lake.data_bucket}/query-results/pandas-{tmp_path.name}/frame.parquet"
    done = subprocess.run(
        [sys.executable, "-c", PANDAS_JOB, location + "/", written],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    # Italy's, France's, ... deaths on 2020-09-10: the JHU files' world total.
    assert done.stdout.split() == ["972736", "6"]
    bucket, _, key = written.removeprefix("s3://").partition("/")
    s3 = s3_client(env)
    assert s3.get_object(Bucket=bucket, Key=key, Range="bytes=0-3")["Body"].read() == b"PAR1"
    load_storage(stack).delete(bucket, key)

    refused = subprocess.run(
        [sys.executable, "-c", PANDAS_JOB, location + "/", written],
        env=endpoint_environment(stack, "SalesUserCreds", tmp_path),
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    # pandas reads through pyarrow's S3 (which also takes AWS_ENDPOINT_URL), writes via s3fs.
    assert refused.returncode != 0 and "ACCESS_DENIED during HeadObject" in refused.stderr
