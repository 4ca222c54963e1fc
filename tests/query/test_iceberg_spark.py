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
from pyiceberg.catalog.hive import HiveCatalog

from lakeward.config import Settings
from tests.query.support import api_ok, credentials, endpoint, outside_catalog

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


def pyiceberg_catalog(stack: Settings) -> HiveCatalog:
    catalog: HiveCatalog = outside_catalog(stack)
    return catalog


def spark_sees(stack: Settings, tables: dict[str, list[int]]) -> dict[str, Any]:
    """What a separate Spark session with Iceberg's runtime sees of each table, now and as
    of each of the given snapshots (iceberg_spark_check.py --describe)."""
    done = subprocess.run(
        [sys.executable, str(CHECK), str(stack.data_dir), "--describe"],
        input=json.dumps(tables),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return seen


def sorted_rows(found: list[list[str | None]]) -> list[list[str | None]]:
    return sorted(found, key=lambda r: [("" if v is None else v) for v in r])


class Recorder:
    """Runs statements through boto3 and records, after each, the snapshot it made and the
    rows lakeward shows: what Spark must see as of that snapshot."""

    def __init__(self, athena: Any, table: str) -> None:
        self.athena, self.table = athena, table
        self.seen: dict[int, list[list[str | None]]] = {}

    def run(self, sql: str) -> int:
        api_ok(self.athena, sql.format(t=self.table))
        latest = api_ok(
            self.athena,
            f'SELECT snapshot_id FROM "{self.table}$snapshots" ORDER BY committed_at DESC LIMIT 1',
        )["rows"][1:]
        snapshot = int(latest[0][0])
        self.seen[snapshot] = self.rows()
        return snapshot

    def rows(self) -> list[list[str | None]]:
        return sorted_rows(api_ok(self.athena, f"SELECT * FROM {self.table}")["rows"][1:])


def test_every_statement_is_seen_by_spark_and_pyiceberg_as_lakeward_shows_it(
    stack: Settings,
) -> None:
    athena: Any = boto3.client("athena", endpoint_url=endpoint(stack), **credentials(stack))
    u = uuid.uuid4().hex[:6]
    kinds = ("dml", "ddl", "ctas", "vac", "drop")
    data, schema, ctas, vacuumed, dropped = (f"{k}_{u}" for k in kinds)
    place = f"s3://{stack.lake.data_bucket}/iceberg"

    # Rows: CREATE with transforms, INSERT, DELETE, UPDATE, MERGE, OPTIMIZE, each a snapshot.
    changes = Recorder(athena, data)
    api_ok(
        athena,
        f"CREATE TABLE {data} (id bigint, at timestamp, name string, amount decimal(10,2)) "
        "PARTITIONED BY (day(at), bucket(4, id), truncate(2, name)) "
        f"LOCATION '{place}/{data}' TBLPROPERTIES ('table_type'='ICEBERG', "
        "'write_compression'='snappy', 'optimize_rewrite_data_file_threshold'='2')",
    )
    changes.run(
        "INSERT INTO {t} VALUES (1, TIMESTAMP '2024-05-01 10:00:00', 'alpha', DECIMAL '1.50'), "
        "(2, TIMESTAMP '2024-05-01 11:30:00', 'beta', DECIMAL '2.25'), "
        "(3, TIMESTAMP '2024-05-02 09:15:00', 'gamma', DECIMAL '3.00'), "
        "(4, TIMESTAMP '2024-05-02 23:59:59', 'gamut', DECIMAL '4.75')"
    )
    changes.run(
        "INSERT INTO {t} VALUES (5, TIMESTAMP '2024-05-01 08:00:00', 'alpine', DECIMAL '5.00')"
    )
    changes.run("DELETE FROM {t} WHERE id = 2")
    changes.run("UPDATE {t} SET amount = amount * 2 WHERE name LIKE 'ga%'")
    changes.run(
        "MERGE INTO {t} AS t USING (SELECT 3 AS id, 'gamma2' AS name UNION ALL "
        "SELECT 9, 'iota') AS s ON t.id = s.id WHEN MATCHED THEN UPDATE SET name = s.name "
        "WHEN NOT MATCHED THEN INSERT (id, at, name, amount) "
        "VALUES (s.id, TIMESTAMP '2024-05-03 00:00:00', s.name, 0)"
    )
    for minute in (5, 6):  # more small files in one partition: OPTIMIZE packs them
        changes.run(f"INSERT INTO {{t}} VALUES (1, TIMESTAMP '2024-05-01 10:0{minute}:00', "
                    "'alps', DECIMAL '0.10')")  # fmt: skip
    files_before = int(api_ok(athena, f'SELECT count(*) FROM "{data}$files"')["rows"][1][0])
    changes.run("OPTIMIZE {t} REWRITE DATA USING BIN_PACK")
    files_after = int(api_ok(athena, f'SELECT count(*) FROM "{data}$files"')["rows"][1][0])
    assert files_after < files_before

    # Schema: ADD COLUMNS, CHANGE COLUMN (rename, widen), DROP COLUMN, SET|UNSET TBLPROPERTIES,
    # RENAME TO; the rows written before each read by field id.
    api_ok(athena, f"CREATE TABLE {schema} (id int, name string, note string) "
                   "TBLPROPERTIES ('table_type'='ICEBERG')")  # fmt: skip
    api_ok(athena, f"INSERT INTO {schema} VALUES (1, 'ada', 'x'), (2, 'bob', 'y')")
    api_ok(athena, f"ALTER TABLE {schema} ADD COLUMNS (city string)")
    api_ok(athena, f"INSERT INTO {schema} VALUES (3, 'cy', 'z', 'Oslo')")
    api_ok(athena, f"ALTER TABLE {schema} CHANGE COLUMN name full_name string")
    api_ok(athena, f"ALTER TABLE {schema} CHANGE COLUMN id id bigint")
    api_ok(athena, f"ALTER TABLE {schema} DROP COLUMN note")
    api_ok(athena, f"ALTER TABLE {schema} SET TBLPROPERTIES ('vacuum_min_snapshots_to_keep'='3', "
                   "'optimize_rewrite_delete_file_threshold'='4')")  # fmt: skip
    api_ok(athena, f"ALTER TABLE {schema} UNSET TBLPROPERTIES ('vacuum_min_snapshots_to_keep')")
    api_ok(athena, f"ALTER TABLE {schema} RENAME TO {schema}_renamed")
    schema_rows = sorted_rows(api_ok(athena, f"SELECT * FROM {schema}_renamed")["rows"][1:])
    assert schema_rows == [["1", "ada", None], ["2", "bob", None], ["3", "cy", "Oslo"]]

    # An Iceberg CTAS; VACUUM; DROP TABLE.
    api_ok(
        athena,
        f"CREATE TABLE {ctas} WITH (table_type = 'ICEBERG', is_external = false, "
        f"location = '{place}/{ctas}', partitioning = ARRAY['region', 'bucket(2, id)'], "
        "format = 'PARQUET') AS SELECT id, region FROM (VALUES (1, 'eu'), (2, 'us'), "
        "(3, 'eu')) AS v(id, region)",
    )
    api_ok(athena, f"CREATE TABLE {vacuumed} (id int) TBLPROPERTIES ('table_type'='ICEBERG')")
    for i in range(3):
        api_ok(athena, f"INSERT INTO {vacuumed} VALUES ({i})")
    api_ok(athena, f"ALTER TABLE {vacuumed} SET TBLPROPERTIES "
                   "('vacuum_max_snapshot_age_seconds'='0')")  # fmt: skip
    api_ok(athena, f"VACUUM {vacuumed}")
    kept = api_ok(athena, f'SELECT count(*) FROM "{vacuumed}$snapshots"')["rows"][1:]
    api_ok(athena, f"CREATE TABLE {dropped} (id int) TBLPROPERTIES ('table_type'='ICEBERG')")
    api_ok(athena, f"INSERT INTO {dropped} VALUES (1)")
    api_ok(athena, f"DROP TABLE {dropped}")

    seen = spark_sees(
        stack,
        {data: list(changes.seen), schema: [], f"{schema}_renamed": [], ctas: [],
         vacuumed: [], dropped: []},
    )  # fmt: skip
    outside = pyiceberg_catalog(stack)

    # Every snapshot lakeward made reads the same in Spark, and so does the table now.
    spark_data = seen[data]
    assert spark_data["versions"] == {str(k): v for k, v in changes.seen.items()}
    assert spark_data["rows"] == changes.rows()
    assert spark_data["partitioning"] == ["days(at)", "bucket(4, id)", "truncate(2, name)"]
    assert spark_data["columns"] == [["id", "bigint"], ["at", "timestamp_ntz"],
                                     ["name", "string"], ["amount", "decimal(10,2)"]]  # fmt: skip
    assert spark_data["properties"]["write.parquet.compression-codec"] == "snappy"
    assert spark_data["data_files"] == files_after
    table = outside.load_table(("default", data))
    assert [str(f.transform) for f in table.spec().fields] == ["day", "bucket[4]", "truncate[2]"]
    assert len(table.snapshots()) == spark_data["snapshots"] == len(changes.seen)

    # The schema's changes: Spark reads the renamed table by field id, as lakeward does.
    assert seen[schema] == {"exists": False}
    renamed = seen[f"{schema}_renamed"]
    assert renamed["columns"] == [["id", "bigint"], ["full_name", "string"], ["city", "string"]]
    assert renamed["rows"] == schema_rows
    assert renamed["properties"]["optimize_rewrite_delete_file_threshold"] == "4"
    assert "vacuum_min_snapshots_to_keep" not in renamed["properties"]
    evolved = outside.load_table(("default", f"{schema}_renamed")).schema()
    assert [(f.name, str(f.field_type)) for f in evolved.fields] == [
        ("id", "long"),
        ("full_name", "string"),
        ("city", "string"),
    ]

    made = seen[ctas]
    assert made["rows"] == [["1", "eu"], ["2", "us"], ["3", "eu"]]
    assert made["partitioning"] == ["region", "bucket(2, id)"]
    assert made["snapshots"] == 1
    assert seen[vacuumed]["snapshots"] == int(kept[0][0]) == 1
    assert seen[vacuumed]["rows"] == [["0"], ["1"], ["2"]]
    assert seen[dropped] == {"exists": False}
