"""Iceberg tables shared with a separate Spark session running Iceberg's own runtime.

What lakeward writes, Spark reads; Spark's merge-on-read DELETE and UPDATE (position-delete
files) and a table Spark makes, lakeward reads.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import boto3
import pytest

from lakeward.config import Settings
from tests.query.support import api_ok, credentials, endpoint

pytestmark = pytest.mark.spark

CHECK = Path(__file__).with_name("iceberg_spark_check.py")


def test_spark_with_icebergs_runtime_and_lakeward_share_tables(stack: Settings) -> None:
    athena: Any = boto3.client("athena", endpoint_url=endpoint(stack), **credentials(stack))
    theirs, ours = f"shared_{uuid.uuid4().hex[:8]}", f"sparkmade_{uuid.uuid4().hex[:8]}"
    api_ok(
        athena,
        f"CREATE TABLE {theirs} (id bigint, v string) PARTITIONED BY (bucket(2, id)) "
        "TBLPROPERTIES ('table_type'='ICEBERG')",
    )
    api_ok(athena, f"INSERT INTO {theirs} VALUES (1, 'one'), (2, 'two'), (3, 'three')")
    done = subprocess.run(
        [sys.executable, str(CHECK), str(stack.data_dir), theirs, ours],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["read"] == [
        {"id": 1, "v": "one"},
        {"id": 2, "v": "two"},
        {"id": 3, "v": "three"},
    ]
    assert seen["delete_files"] >= 1  # Spark wrote position deletes, not a rewrite
    after = api_ok(athena, f"SELECT id, v FROM {theirs} ORDER BY id")["rows"][1:]
    assert after == [["1", "one"], ["3", "by spark"]]
    made = api_ok(athena, f"SELECT id, v FROM {ours} WHERE id > 10 ORDER BY id")["rows"][1:]
    assert made == [["11", "eleven"], ["12", "twelve"]]
    # lakeward writes on top of Spark's delete files, and Spark's table takes lakeward's rows.
    api_ok(athena, f"DELETE FROM {theirs} WHERE id = 1")
    api_ok(athena, f"INSERT INTO {ours} VALUES (13, 'thirteen')")
    assert api_ok(athena, f"SELECT count(*) FROM {theirs}")["rows"][1:] == [["1"]]
    assert api_ok(athena, f"SELECT count(*) FROM {ours}")["rows"][1:] == [["4"]]
