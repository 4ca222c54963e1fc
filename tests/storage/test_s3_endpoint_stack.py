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
