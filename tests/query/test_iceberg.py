"""Iceberg tables through Athena's API, checked from pyiceberg's own HiveCatalog.

The tables are made and written with SQL through boto3, and read back by a pyiceberg
client that reaches the stack as any other would: the metastore's Thrift address and the
stack's S3 endpoint with its key pair. What pyiceberg writes, lakeward reads.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from botocore.exceptions import ClientError
from pyiceberg.catalog.hive import HiveCatalog

from lakeward.config import Settings
from lakeward.query.model import QueryState
from lakeward.query.service import QueryService
from tests.helpers import lakeward
from tests.query.support import (
    api_failed,
    api_ok,
    api_run,
    client_for,
    credentials,
    endpoint,
    failure,
    local,
    outside_catalog,
    run,
    wait,
    written,
)

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def athena(stack: Settings) -> Any:
    return boto3.client("athena", endpoint_url=endpoint(stack), **credentials(stack))


@pytest.fixture(scope="module")
def pyiceberg(stack: Settings) -> HiveCatalog:
    """An outside client of the stack's catalog and lake, as a user would configure one."""
    catalog: HiveCatalog = outside_catalog(stack)
    return catalog


def refusal(athena: Any, sql: str) -> str:
    """Why ``sql`` is refused: when it is started (a statement that does not parse), or as
    the failed execution's reason."""
    try:
        return api_failed(athena, sql)
    except ClientError as exc:  # InvalidRequestException, AccessDeniedException
        return str(exc)


def update_count(athena: Any, execution: dict[str, Any]) -> int:
    results = athena.get_query_results(QueryExecutionId=execution["QueryExecutionId"])
    return int(results["UpdateCount"])


def rows(execution: dict[str, Any]) -> list[list[str | None]]:
    return execution["rows"][1:]  # after the header row


def test_create_insert_and_read_from_both_sides(
    stack: Settings, athena: Any, pyiceberg: HiveCatalog
) -> None:
    name = f"visits_{uuid.uuid4().hex[:8]}"
    bucket = stack.lake.data_bucket
    api_ok(
        athena,
        f"""CREATE TABLE default.{name} (user_id bigint, country string, at timestamp,
              amount decimal(10,2) COMMENT 'paid')
            PARTITIONED BY (day(at), bucket(4, user_id))
            LOCATION 's3://{bucket}/iceberg/{name}/'
            TBLPROPERTIES ('table_type' = 'ICEBERG', 'write_compression' = 'snappy')""",
    )
    inserted = api_ok(
        athena,
        f"""INSERT INTO {name} VALUES
              (1, 'IS', TIMESTAMP '2024-03-01 10:00:00', DECIMAL '12.50'),
              (2, 'NO', TIMESTAMP '2024-03-02 11:30:00', DECIMAL '7.25'),
              (3, 'IS', TIMESTAMP '2024-03-02 12:00:00', NULL)""",
    )
    assert update_count(athena, inserted) == 3
    table = pyiceberg.load_table(("default", name))
    assert table.location() == f"s3://{bucket}/iceberg/{name}"
    assert [str(f.transform) for f in table.spec().fields] == ["day", "bucket[4]"]
    assert table.properties["write.parquet.compression-codec"] == "snappy"
    seen = table.scan().to_arrow().sort_by("user_id")
    assert seen["user_id"].to_pylist() == [1, 2, 3]
    assert seen["at"].to_pylist()[1] == datetime(2024, 3, 2, 11, 30)
    assert [str(v) if v is not None else None for v in seen["amount"].to_pylist()] == [
        "12.50",
        "7.25",
        None,
    ]
    # What pyiceberg appends, lakeward reads; a filter and an aggregate over both snapshots.
    table.append(
        pa.table(
            {
                "user_id": pa.array([4], pa.int64()),
                "country": ["IS"],
                "at": pa.array([datetime(2024, 3, 5)], pa.timestamp("us")),
                "amount": pa.array([None], pa.decimal128(10, 2)),
            }
        )
    )
    result = api_ok(
        athena,
        f"SELECT country, count(*), sum(amount) FROM {name} GROUP BY country ORDER BY country",
    )
    assert rows(result) == [["IS", "3", "12.50"], ["NO", "1", "7.25"]]
    after = api_ok(
        athena, f"SELECT user_id FROM {name} WHERE at >= TIMESTAMP '2024-03-02' ORDER BY user_id"
    )
    assert rows(after) == [["2"], ["3"], ["4"]]
    assert len(pyiceberg.load_table(("default", name)).snapshots()) == 2


def test_the_metastore_keeps_it_as_iceberg_does(stack: Settings, athena: Any) -> None:
    name = f"kept_{uuid.uuid4().hex[:8]}"
    api_ok(athena, f"CREATE TABLE {name} (id int) TBLPROPERTIES ('table_type'='ICEBERG')")
    glue = boto3.client("glue", endpoint_url=endpoint(stack), **credentials(stack))
    parameters = glue.get_table(DatabaseName="default", Name=name)["Table"]["Parameters"]
    assert parameters["table_type"].upper() == "ICEBERG"
    assert parameters["metadata_location"].endswith(".metadata.json")
    assert parameters["metadata_location"].startswith(f"s3://{stack.lake.data_bucket}/")
    empty = api_ok(athena, f"SELECT count(*) FROM {name}")
    assert rows(empty) == [["0"]]


@pytest.mark.parametrize(
    ("ddl", "named"),
    [
        ("(ts date) PARTITIONED BY (hour(ts))", "column ts"),
        ("(name string) PARTITIONED BY (bucket(4, nosuch))", "no column nosuch"),
        ("(id tinyint)", "tinyint"),
        ("(id int) PARTITIONED BY (day(id))", "column id"),
    ],
)
def test_bad_definitions_are_refused_by_name(athena: Any, ddl: str, named: str) -> None:
    name = f"bad_{uuid.uuid4().hex[:8]}"
    reason = refusal(athena, f"CREATE TABLE {name} {ddl} TBLPROPERTIES ('table_type'='ICEBERG')")
    assert named in reason
    assert "does not exist" in api_failed(athena, f"SELECT * FROM {name}")


def test_unknown_properties_and_formats_are_refused(athena: Any) -> None:
    name = f"props_{uuid.uuid4().hex[:8]}"
    reason = refusal(
        athena,
        f"CREATE TABLE {name} (id int) TBLPROPERTIES ('table_type'='ICEBERG', 'format'='avro')",
    )
    assert "'format'" in reason and "parquet" in reason
    reason = refusal(
        athena, f"CREATE TABLE {name} (id int) TBLPROPERTIES ('table_type'='ICEBERG', 'x'='1')"
    )
    assert "'x'" in reason
    reason = refusal(athena, f"CREATE TABLE {name} (id int)")
    assert "ICEBERG" in reason


def both(service: QueryService, sql: str) -> tuple[list[str], list[list[str | None]]]:
    """``sql``'s columns (with their types) and rows, the same in the DuckDB workgroup and the
    Spark workgroup (which reads Iceberg through Iceberg's own runtime)."""
    found = []
    for group in ("duck", "big"):
        execution = wait(service, service.start_query_execution(sql, workgroup=group))
        assert execution.state == QueryState.SUCCEEDED, (group, execution.state_change_reason)
        page = service.get_query_results(execution.id, None, 1000)
        types = [f"{c.name} {c.type}" for c in page.columns]
        found.append((types, page.rows[1:]))
    assert found[0] == found[1], sql
    return found[0]


def test_both_workgroups_read_iceberg_tables_alike(service: QueryService) -> None:
    name = f"both_{uuid.uuid4().hex[:8]}"
    run(
        service,
        f"CREATE TABLE {name} (id bigint, at timestamp, name string, amount decimal(10,2), "
        "day date) PARTITIONED BY (day(at), bucket(2, id)) TBLPROPERTIES ('table_type'='ICEBERG')",
    )
    written(service, f"INSERT INTO {name} VALUES "
            "(1, TIMESTAMP '2024-05-01 10:00:00', 'ann', DECIMAL '1.50', DATE '2024-05-01'), "
            "(2, TIMESTAMP '2024-05-02 11:30:00', 'bob', DECIMAL '2.25', DATE '2024-05-02'), "
            "(3, TIMESTAMP '2024-05-02 12:00:00', NULL, NULL, NULL)")  # fmt: skip
    first = run(service, f'SELECT snapshot_id FROM "{name}$snapshots"')[1][0][0]
    written(service, f"INSERT INTO {name} SELECT id + 10, at, name, amount, day FROM {name}")
    deleted = wait(service, service.start_query_execution(f"DELETE FROM {name} WHERE id = 2"))
    assert deleted.state == QueryState.SUCCEEDED, deleted.state_change_reason
    # The Spark workgroup writes Iceberg tables too: the rows computed by Spark, committed here.
    run(service, f"CREATE TABLE {name}_sums (who string, n bigint, top bigint) "
                 "TBLPROPERTIES ('table_type'='ICEBERG')")  # fmt: skip
    written(service, f"INSERT INTO {name}_sums SELECT name, count(*), max(id) FROM {name} "
                     "GROUP BY name", workgroup="big")  # fmt: skip
    _, sums = both(service, f"SELECT * FROM {name}_sums ORDER BY who")
    assert sums == [["ann", "2", "11"], ["bob", "1", "12"], [None, "2", "13"]]
    run(service, f"ALTER TABLE {name} CHANGE COLUMN name who string")  # read by field id
    _, rows = both(service, f"SELECT * FROM {name} ORDER BY id")
    assert [r[0] for r in rows] == ["1", "3", "11", "12", "13"]
    both(service, f"SELECT who, max(amount), count(*) FROM {name} GROUP BY who ORDER BY who")
    both(service, f"SELECT * FROM {name} WHERE day >= DATE '2024-05-02' ORDER BY id")
    _, old = both(service, f"SELECT * FROM {name} FOR VERSION AS OF {first} ORDER BY id")
    assert [r[0] for r in old] == ["1", "2", "3"]
    both(service, f"SELECT c.id, c.who, d.id FROM {name} c JOIN {name} d ON d.id = c.id + 10 "
                  "ORDER BY c.id")  # fmt: skip
    # Answered from the metastore and the table's metadata: the same whatever the engine.
    for sql in (f"DESCRIBE {name}", f"SHOW CREATE TABLE {name}", f"SHOW COLUMNS IN {name}"):
        assert run(service, sql) == run(service, sql, workgroup="big")
    # The metadata tables, with Trino's columns in both (Spark's own have others).
    _, snapshots = both(service, f'SELECT * FROM "{name}$snapshots" ORDER BY committed_at')
    assert [r[3] for r in snapshots] == ["append", "append", "overwrite"]
    _, history = both(service, f'SELECT * FROM "{name}$history" ORDER BY made_current_at')
    assert [r[1] for r in history] == [r[1] for r in snapshots]
    _, files = both(service, f'SELECT record_count, * FROM "{name}$files" ORDER BY file_path')
    assert sum(int(r[0] or 0) for r in files) == 5  # the rows left after the DELETE
    both(service, f'SELECT * FROM "{name}$manifests" ORDER BY path')
    both(service, f'SELECT * FROM "{name}$partitions" ORDER BY record_count, file_count')
    both(service, f'SELECT * FROM "{name}$refs"')
    both(service, f'SELECT s.operation, count(f.file_path) FROM "{name}$snapshots" s '
                  f'CROSS JOIN "{name}$files" f GROUP BY 1 ORDER BY 1')  # fmt: skip
    # "$path": each row's data file, as the table's metadata names it, in both.
    _, paths = both(service, f'SELECT "$path", count(*) FROM {name} GROUP BY "$path" ORDER BY 1')
    assert sorted(r[0] for r in paths) == sorted(r[2] for r in files)  # count, content, path
    both(service, f"SELECT id FROM {name} t WHERE t.\"$path\" = '{paths[0][0]}' ORDER BY id")
    # What Spark would answer otherwise is refused by name.
    hidden = failure(service, f'SELECT "$file_size" FROM {name}', workgroup="big")
    assert "hidden columns of Iceberg tables" in hidden
    assert run(service, f"SELECT count(*) FROM {name}")[1] == [["5"]]  # nothing changed


def changed(service: QueryService, sql: str, group: str) -> int:
    """Run a DELETE or UPDATE to success in ``group``; the rows it changed (UpdateCount)."""
    execution = wait(service, service.start_query_execution(sql, workgroup=group))
    assert execution.state == QueryState.SUCCEEDED, (group, sql, execution.state_change_reason)
    return service.get_query_results(execution.id).update_count


def test_delete_update_and_merge_in_a_spark_workgroup_change_what_duckdb_changes(
    service: QueryService, pyiceberg: HiveCatalog
) -> None:
    """The same DELETE, UPDATE and MERGE statements on two copies of a table, one changed by
    each workgroup (Spark's through Iceberg's runtime): the same counts, then the same rows,
    read by both engines and by pyiceberg, and every change one snapshot."""
    suffix = uuid.uuid4().hex[:8]
    tables = {"duck": f"rows_duck_{suffix}", "big": f"rows_spark_{suffix}"}
    for name in tables.values():
        run(service, f"CREATE TABLE {name} (id bigint, name string, amount decimal(10,2), "
                     "day date) PARTITIONED BY (day) "
                     "TBLPROPERTIES ('table_type'='ICEBERG')")  # fmt: skip
        written(service, f"INSERT INTO {name} VALUES "
                "(1, 'ann', DECIMAL '1.50', DATE '2024-05-01'), "
                "(2, 'bob', DECIMAL '2.25', DATE '2024-05-01'), "
                "(3, 'cy', NULL, DATE '2024-05-02'), (4, NULL, DECIMAL '4.00', DATE '2024-05-03'), "
                "(5, 'eve', DECIMAL '0.50', DATE '2024-05-03')")  # fmt: skip
    statements = [
        ("DELETE FROM {t} WHERE id = 2", 1),
        (
            "UPDATE {t} SET amount = DECIMAL '9.99', name = upper(name) "
            "WHERE day >= DATE '2024-05-02'",
            3,
        ),
        ("DELETE FROM {t} WHERE name IS NULL", 1),
        ("UPDATE {t} SET name = 'nobody' WHERE id = 99", 0),
        ("UPDATE {t} SET amount = 7 WHERE id > 4 AND name IS NOT NULL", 1),
        ("DELETE FROM {t} WHERE name = 'CY' OR amount IS NULL", 1),
        (
            "MERGE INTO {t} AS t USING (SELECT 1 AS id, 'anna' AS name UNION ALL "
            "SELECT 6, 'fay') AS s ON t.id = s.id WHEN MATCHED THEN UPDATE SET name = s.name "
            "WHEN NOT MATCHED THEN INSERT (id, name, day) VALUES (s.id, s.name, DATE '2024-05-04')",
            2,
        ),
        (
            "MERGE INTO {t} t USING (SELECT 5 AS id) s ON t.id = s.id "
            "WHEN MATCHED AND t.amount > 100 THEN UPDATE SET amount = 0 "
            "WHEN MATCHED THEN DELETE WHEN NOT MATCHED THEN INSERT (id) VALUES (s.id)",
            1,
        ),
    ]
    for sql, count in statements:
        counts = {g: changed(service, sql.format(t=name), g) for g, name in tables.items()}
        assert counts == {"duck": count, "big": count}, sql
    # What Spark would compute otherwise than Trino is refused by name, and changes nothing.
    refused = failure(service, f"UPDATE {tables['big']} SET amount = amount * 2", workgroup="big")
    assert "decimal and integer" in refused and "DuckDB workgroup" in refused
    # A target row two source rows would change: refused as Trino refuses it, nothing changed.
    for group, name in tables.items():
        sql = (
            f"MERGE INTO {name} t USING (SELECT 1 AS id UNION ALL SELECT 1) s ON t.id = s.id "
            "WHEN MATCHED THEN DELETE"
        )
        twice = failure(service, sql, workgroup=group)
        assert "matched more than one source row" in twice, (group, twice)
    expected = [["1", "anna", "1.50", "2024-05-01"], ["6", "fay", None, "2024-05-04"]]
    for name in tables.values():
        for group in ("duck", "big"):
            assert run(service, f"SELECT * FROM {name} ORDER BY id", workgroup=group)[1] == expected
        table = pyiceberg.load_table(("default", name))
        rows = table.scan().to_arrow().sort_by("id")
        assert rows.column("id").to_pylist() == [1, 6]
        operations = [s.summary.operation.value for s in table.snapshots()]
        assert len(operations) == 1 + 7, (name, operations)  # the INSERT, then seven changes


def test_drop_table_removes_the_table_and_its_files(stack: Settings, athena: Any) -> None:
    name = f"dropped_{uuid.uuid4().hex[:8]}"
    place = f"s3://{stack.lake.data_bucket}/iceberg/{name}"
    api_ok(
        athena,
        f"CREATE TABLE {name} (id int) LOCATION '{place}' TBLPROPERTIES ('table_type'='ICEBERG')",
    )
    api_ok(athena, f"INSERT INTO {name} VALUES (1), (2)")
    location = local(stack, place)
    assert any(p.suffix == ".parquet" for p in location.rglob("*"))
    api_ok(athena, f"DROP TABLE {name}")
    assert "does not exist" in api_failed(athena, f"SELECT * FROM {name}")
    assert not [p for p in location.rglob("*") if p.is_file()]


def test_delete_removes_exactly_the_rows_the_condition_holds(
    stack: Settings, athena: Any, pyiceberg: HiveCatalog
) -> None:
    name = f"erase_{uuid.uuid4().hex[:8]}"
    api_ok(
        athena,
        f"CREATE TABLE {name} (user_id bigint, day date, note string) "
        "PARTITIONED BY (day) TBLPROPERTIES ('table_type'='ICEBERG')",
    )
    api_ok(
        athena,
        f"INSERT INTO {name} SELECT u, date_add('day', u % 3, DATE '2024-01-01'), "
        "'note ' || CAST(u AS varchar) FROM UNNEST(sequence(1, 30)) AS t(u)",
    )
    before = pyiceberg.load_table(("default", name)).scan().to_arrow()
    others = {r["user_id"]: r for r in before.to_pylist() if r["user_id"] not in (7, 8)}
    deleted = api_ok(athena, f"DELETE FROM {name} WHERE user_id IN (7, 8) OR note IS NULL")
    assert update_count(athena, deleted) == 2
    assert rows(api_ok(athena, f"SELECT count(*) FROM {name}")) == [["28"]]
    assert rows(api_ok(athena, f"SELECT count(*) FROM {name} WHERE user_id IN (7, 8)")) == [["0"]]
    # Every other person's row is unchanged, as read by another engine.
    table = pyiceberg.load_table(("default", name))
    after = {r["user_id"]: r for r in table.scan().to_arrow().to_pylist()}
    assert after == others
    assert table.current_snapshot().summary.operation.value == "overwrite"
    # Nothing matches: nothing changes, and no snapshot is made.
    snapshots = len(table.snapshots())
    api_ok(athena, f"DELETE FROM {name} WHERE user_id = 999")
    assert len(pyiceberg.load_table(("default", name)).snapshots()) == snapshots
    # A condition with a subquery on another table, and an alias.
    api_ok(athena, f"DELETE FROM {name} AS v WHERE v.user_id < (SELECT 3)")
    assert rows(api_ok(athena, f"SELECT min(user_id) FROM {name}")) == [["3"]]
    # A DELETE without WHERE empties the table.
    api_ok(athena, f"DELETE FROM {name}")
    assert rows(api_ok(athena, f"SELECT count(*) FROM {name}")) == [["0"]]


def test_a_change_rewrites_each_file_beside_itself_with_the_tables_settings(
    stack: Settings, athena: Any, pyiceberg: HiveCatalog
) -> None:
    """DELETE and UPDATE write each touched file's rows that stay as one new file in that
    file's partition, with the table's codec and Iceberg's field ids; an UPDATE of the
    partition column moves its rows to their new partition."""
    name = f"rewrite_{uuid.uuid4().hex[:8]}"
    api_ok(
        athena,
        f"CREATE TABLE {name} (id bigint, name string, amount decimal(10,2), at timestamp, "
        "day date) PARTITIONED BY (day) "
        "TBLPROPERTIES ('table_type'='ICEBERG', 'write_compression'='gzip')",
    )
    api_ok(
        athena,
        f"INSERT INTO {name} SELECT i, 'n' || CAST(i AS varchar), CAST(i AS decimal(10,2)) / 4, "
        "TIMESTAMP '2024-01-01 10:00:00' + i * INTERVAL '1' MINUTE, "
        "date_add('day', i % 2, DATE '2024-01-01') FROM UNNEST(sequence(1, 40)) AS t(i)",
    )
    table = pyiceberg.load_table(("default", name))
    before = {f.file.file_path: f.file for f in table.scan().plan_files()}
    expected = [r for r in table.scan().to_arrow().sort_by("id").to_pylist() if r["id"] != 7]
    deleted = api_ok(athena, f"DELETE FROM {name} WHERE id = 7")
    assert update_count(athena, deleted) == 1
    table = pyiceberg.load_table(("default", name))
    after = {f.file.file_path: f.file for f in table.scan().plan_files()}
    (new,) = set(after) - set(before)
    (gone,) = set(before) - set(after)
    assert new.rsplit("/", 1)[0] == gone.rsplit("/", 1)[0]  # the partition's directory
    assert after[new].partition == before[gone].partition
    assert after[new].record_count == before[gone].record_count - 1
    written = pq.ParquetFile(local(stack, new))
    assert written.metadata.row_group(0).column(0).compression == "GZIP"
    assert [f.metadata[b"PARQUET:field_id"] for f in written.schema_arrow] == [
        b"1",
        b"2",
        b"3",
        b"4",
        b"5",
    ]
    assert table.scan().to_arrow().sort_by("id").to_pylist() == expected
    # The bounds a reader prunes by are the new file's own.
    assert rows(api_ok(athena, f"SELECT count(*) FROM {name} WHERE name = 'n9'")) == [["1"]]
    # Rows moved by an UPDATE of the partition column are in their new partition.
    moved = api_ok(athena, f"UPDATE {name} SET day = DATE '2024-02-01' WHERE id <= 4")
    assert update_count(athena, moved) == 4
    table = pyiceberg.load_table(("default", name))
    days = {str(f.file.partition[0]) for f in table.scan().plan_files()}
    assert len(days) == 3
    partitions = api_ok(
        athena, f'SELECT partition.day, record_count FROM "{name}$partitions" ORDER BY 1'
    )
    assert [r[1] for r in rows(partitions)] == ["18", "17", "4"]


def test_delete_on_a_hive_table_is_refused(athena: Any) -> None:
    reason = refusal(athena, "DELETE FROM covid_deaths WHERE deaths = 0")
    assert "only supported for Iceberg tables" in reason
    assert rows(api_ok(athena, "SELECT count(*) > 0 FROM covid_deaths WHERE deaths = 0")) == [
        ["true"]
    ]


def test_update_sets_new_values_where_the_condition_holds(
    athena: Any, pyiceberg: HiveCatalog
) -> None:
    name = f"updated_{uuid.uuid4().hex[:8]}"
    api_ok(
        athena,
        f"CREATE TABLE {name} (user_id bigint, email string, score double, day date) "
        "PARTITIONED BY (month(day)) TBLPROPERTIES ('table_type'='ICEBERG')",
    )
    api_ok(
        athena,
        f"INSERT INTO {name} VALUES (1, 'a@x.org', 1.5, DATE '2024-01-05'), "
        "(2, 'b@x.org', 2.0, DATE '2024-02-05'), (3, 'c@x.org', NULL, DATE '2024-02-06')",
    )
    updated = api_ok(
        athena,
        f"UPDATE {name} SET email = upper(email), score = coalesce(score, 0) * 2 "
        "WHERE user_id >= 2",
    )
    assert update_count(athena, updated) == 2
    seen = pyiceberg.load_table(("default", name)).scan().to_arrow().sort_by("user_id")
    assert seen.select(["user_id", "email", "score"]).to_pylist() == [
        {"user_id": 1, "email": "a@x.org", "score": 1.5},
        {"user_id": 2, "email": "B@X.ORG", "score": 4.0},
        {"user_id": 3, "email": "C@X.ORG", "score": 0.0},
    ]
    # An integer is coerced to the double column; the whole table without WHERE.
    everyone = api_ok(athena, f"UPDATE {name} SET score = 10")
    assert update_count(athena, everyone) == 3
    assert rows(api_ok(athena, f"SELECT sum(score) FROM {name}")) == [["30.0"]]
    # A value of another kind, or an unknown column, changes nothing and names the column.
    reason = api_failed(athena, f"UPDATE {name} SET user_id = 'x' WHERE user_id = 1")
    assert "column user_id is bigint" in reason and "varchar" in reason
    reason = api_failed(athena, f"UPDATE {name} SET nosuch = 1")
    assert "no column nosuch" in reason
    assert len(pyiceberg.load_table(("default", name)).snapshots()) == 3
    reason = refusal(athena, "UPDATE covid_deaths SET deaths = 0")
    assert "only supported for Iceberg tables" in reason


def test_time_travel_and_the_metadata_tables(athena: Any, pyiceberg: HiveCatalog) -> None:
    name = f"history_{uuid.uuid4().hex[:8]}"
    api_ok(athena, f"CREATE TABLE {name} (id int, v string) TBLPROPERTIES ('table_type'='ICEBERG')")
    api_ok(athena, f"INSERT INTO {name} VALUES (1, 'one'), (2, 'two')")
    first = pyiceberg.load_table(("default", name)).current_snapshot()
    assert first is not None
    api_ok(athena, f"INSERT INTO {name} VALUES (3, 'three')")
    api_ok(athena, f"DELETE FROM {name} WHERE id = 1")
    assert rows(api_ok(athena, f"SELECT id FROM {name} ORDER BY id")) == [["2"], ["3"]]
    then = api_ok(
        athena, f"SELECT id FROM {name} FOR VERSION AS OF {first.snapshot_id} ORDER BY id"
    )
    assert rows(then) == [["1"], ["2"]]
    committed = datetime.fromtimestamp(first.timestamp_ms / 1000, UTC)
    at = committed.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    by_time = api_ok(
        athena,
        f"SELECT count(*) FROM {name} FOR TIMESTAMP AS OF TIMESTAMP '{at} UTC'",
    )
    assert rows(by_time) == [["2"]]
    # The current table and an old version side by side: what the DELETE removed.
    gone = api_ok(
        athena,
        f"SELECT o.id FROM {name} FOR VERSION AS OF {first.snapshot_id} o "
        f"LEFT JOIN {name} n ON o.id = n.id WHERE n.id IS NULL",
    )
    assert rows(gone) == [["1"]]
    early = api_failed(
        athena, f"SELECT * FROM {name} FOR TIMESTAMP AS OF TIMESTAMP '2001-01-01 00:00:00 UTC'"
    )
    assert f"earliest snapshot is {first.snapshot_id}" in early
    assert "does not exist" in api_failed(athena, f"SELECT * FROM {name} FOR VERSION AS OF 42")
    assert "Iceberg tables only" in api_failed(
        athena, "SELECT * FROM covid_deaths FOR VERSION AS OF 1"
    )
    # The metadata tables, as Trino names their columns.
    snapshots = api_ok(
        athena,
        f'SELECT operation, snapshot_id FROM "{name}$snapshots" ORDER BY committed_at',
    )
    assert [r[0] for r in rows(snapshots)] == ["append", "append", "overwrite"]
    assert rows(snapshots)[0][1] == str(first.snapshot_id)
    history = api_ok(athena, f'SELECT count(*) FROM "{name}$history" WHERE is_current_ancestor')
    assert rows(history) == [["3"]]
    files = api_ok(athena, f'SELECT sum(record_count) FROM "{name}$files"')
    assert rows(files) == [["2"]]
    refs = api_ok(athena, f'SELECT name, type FROM "{name}$refs"')
    assert rows(refs) == [["main", "BRANCH"]]
    assert "metadata tables are" in api_failed(athena, f'SELECT * FROM "{name}$nosuch"')


def test_merge_updates_deletes_and_inserts_in_one_snapshot(
    athena: Any, pyiceberg: HiveCatalog
) -> None:
    name = f"merged_{uuid.uuid4().hex[:8]}"
    api_ok(
        athena,
        f"CREATE TABLE {name} (id bigint, email string, score int) "
        "PARTITIONED BY (bucket(2, id)) TBLPROPERTIES ('table_type'='ICEBERG')",
    )
    api_ok(athena, f"INSERT INTO {name} VALUES (1, 'a@x', 1), (2, 'b@x', 2), (3, 'c@x', 3)")
    before = len(pyiceberg.load_table(("default", name)).snapshots())
    changes = (
        "(SELECT * FROM (VALUES (1, 'a@new', 10), (2, 'gone', 0), (4, 'd@x', 4), (5, 'e@x', 0))"
        " AS v(id, email, score))"
    )
    merged = api_ok(
        athena,
        f"""MERGE INTO {name} AS t USING {changes} AS s ON t.id = s.id
            WHEN MATCHED AND s.score = 0 THEN DELETE
            WHEN MATCHED THEN UPDATE SET email = s.email, score = t.score + s.score
            WHEN NOT MATCHED AND s.score > 0 THEN INSERT (id, email, score)
                 VALUES (s.id, s.email, s.score)""",
    )
    assert update_count(athena, merged) == 3  # one updated, one deleted, one inserted
    table = pyiceberg.load_table(("default", name))
    assert len(table.snapshots()) == before + 1
    assert sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "email": "a@new", "score": 11},
        {"id": 3, "email": "c@x", "score": 3},
        {"id": 4, "email": "d@x", "score": 4},
    ]
    # An INSERT without a column list, from a source table named without an alias.
    api_ok(athena, f"CREATE TABLE src_{name} AS SELECT 9 AS id, 'z@x' AS email, 9 AS score")
    api_ok(
        athena,
        f"MERGE INTO {name} USING src_{name} ON {name}.id = src_{name}.id "
        f"WHEN NOT MATCHED THEN INSERT VALUES (src_{name}.id, src_{name}.email, src_{name}.score)",
    )
    assert rows(api_ok(athena, f"SELECT email FROM {name} WHERE id = 9")) == [["z@x"]]


def test_merge_matching_a_row_twice_fails_and_changes_nothing(
    athena: Any, pyiceberg: HiveCatalog
) -> None:
    name = f"twice_{uuid.uuid4().hex[:8]}"
    api_ok(athena, f"CREATE TABLE {name} (id int, v int) TBLPROPERTIES ('table_type'='ICEBERG')")
    api_ok(athena, f"INSERT INTO {name} VALUES (1, 1), (2, 2)")
    snapshots = len(pyiceberg.load_table(("default", name)).snapshots())
    reason = api_failed(
        athena,
        f"MERGE INTO {name} t USING (SELECT * FROM (VALUES (1, 5), (1, 6)) AS v(id, v)) s "
        "ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = s.v",
    )
    assert "matched more than one source row" in reason
    assert len(pyiceberg.load_table(("default", name)).snapshots()) == snapshots
    assert rows(api_ok(athena, f"SELECT v FROM {name} ORDER BY id")) == [["1"], ["2"]]
    reason = api_failed(
        athena,
        f"MERGE INTO {name} t USING (SELECT 1 AS id) s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET v = 'text'",
    )
    assert "column v is integer" in reason
    reason = refusal(
        athena,
        "MERGE INTO covid_deaths t USING (SELECT 1 AS id) s ON true WHEN MATCHED THEN DELETE",
    )
    assert "only supported for Iceberg tables" in reason


def test_schema_evolution_reads_by_field_id(athena: Any, pyiceberg: HiveCatalog) -> None:
    name = f"evolved_{uuid.uuid4().hex[:8]}"
    api_ok(
        athena,
        f"CREATE TABLE {name} (id int, name string, score float) "
        "TBLPROPERTIES ('table_type'='ICEBERG')",
    )
    api_ok(athena, f"INSERT INTO {name} VALUES (1, 'ann', REAL '1.5')")
    api_ok(athena, f"ALTER TABLE {name} ADD COLUMNS (email string COMMENT 'contact')")
    api_ok(athena, f"ALTER TABLE {name} CHANGE COLUMN name full_name string")
    api_ok(athena, f"ALTER TABLE {name} CHANGE score score double")  # a widening
    api_ok(athena, f"INSERT INTO {name} VALUES (2, 'bob', 2.5, 'b@x')")
    api_ok(athena, f"ALTER TABLE {name} DROP COLUMN id")
    api_ok(athena, f"ALTER TABLE {name} ADD COLUMNS (id int)")  # a new column, not the old one
    result = api_ok(athena, f"SELECT full_name, score, email, id FROM {name} ORDER BY full_name")
    assert rows(result) == [["ann", "1.5", None, None], ["bob", "2.5", "b@x", None]]
    table = pyiceberg.load_table(("default", name))
    assert [f.name for f in table.schema().fields] == ["full_name", "score", "email", "id"]
    assert str(table.schema().find_field("score").field_type) == "double"
    described = api_ok(athena, f"DESCRIBE {name}")
    assert described["rows"][2] == ["email\tstring\tcontact"]  # a DDL result: no header
    # A narrowing, or a column that is not there, is refused and changes nothing.
    assert "score" in api_failed(athena, f"ALTER TABLE {name} CHANGE score score int")
    assert "nosuch" in api_failed(athena, f"ALTER TABLE {name} DROP COLUMN nosuch")
    assert "Iceberg tables only" in api_failed(
        athena, "ALTER TABLE covid_deaths DROP COLUMN deaths"
    )


def plan_of(athena: Any, sql: str) -> str:
    return "\n".join(r[0] or "" for r in api_ok(athena, f"EXPLAIN {sql}")["rows"])


def test_files_read_by_name_go_to_duckdbs_reader_and_the_rest_through_field_ids(
    stack: Settings, athena: Any
) -> None:
    name = f"direct_{uuid.uuid4().hex[:8]}"
    api_ok(athena, f"CREATE TABLE {name} (id int, v string) TBLPROPERTIES ('table_type'='ICEBERG')")
    api_ok(athena, f"INSERT INTO {name} VALUES (1, 'a'), (2, 'b')")
    api_ok(athena, f"INSERT INTO {name} VALUES (3, 'c')")
    query = f"SELECT id, v FROM {name} ORDER BY id"
    assert "READ_PARQUET" in plan_of(athena, query)  # no rename, no delete file
    assert rows(api_ok(athena, query)) == [["1", "a"], ["2", "b"], ["3", "c"]]
    # A row-level statement reads each row's file and place from DuckDB's reader too.
    paths = f'SELECT DISTINCT "$path" FROM {name} WHERE id = 2'
    assert "READ_PARQUET" in plan_of(athena, paths)
    [[path]] = rows(api_ok(athena, paths))
    assert path.startswith(f"s3://{stack.lake.data_bucket}/") and path.endswith(".parquet")
    api_ok(athena, f"DELETE FROM {name} WHERE id = 2")
    assert rows(api_ok(athena, query)) == [["1", "a"], ["3", "c"]]
    # A name that meant another field once: by field id, through pyiceberg, still right.
    api_ok(athena, f"ALTER TABLE {name} CHANGE COLUMN v old_v string")
    api_ok(athena, f"ALTER TABLE {name} ADD COLUMNS (v string)")
    api_ok(athena, f"INSERT INTO {name} VALUES (4, 'd', 'new')")
    evolved = f"SELECT id, old_v, v FROM {name} ORDER BY id"
    assert "READ_PARQUET" not in plan_of(athena, evolved)
    assert rows(api_ok(athena, evolved)) == [["1", "a", None], ["3", "c", None], ["4", "d", "new"]]


def test_properties_and_show_create_table(athena: Any, pyiceberg: HiveCatalog) -> None:
    name = f"shown_{uuid.uuid4().hex[:8]}"
    api_ok(
        athena,
        f"CREATE TABLE {name} (id bigint, at timestamp) COMMENT 'events' "
        "PARTITIONED BY (hour(at), truncate(4, id)) "
        "TBLPROPERTIES ('table_type'='ICEBERG', 'vacuum_max_snapshot_age_seconds'='60')",
    )
    api_ok(
        athena,
        f"ALTER TABLE {name} SET TBLPROPERTIES ('write_compression'='snappy', "
        "'optimize_rewrite_delete_file_threshold'='5')",
    )
    api_ok(athena, f"ALTER TABLE {name} UNSET TBLPROPERTIES ('vacuum_max_snapshot_age_seconds')")
    table = pyiceberg.load_table(("default", name))
    assert table.properties["write.parquet.compression-codec"] == "snappy"
    assert "vacuum_max_snapshot_age_seconds" not in table.properties
    shown = "\n".join(r[0] or "" for r in api_ok(athena, f"SHOW CREATE TABLE {name}")["rows"])
    assert shown.startswith(f"CREATE TABLE `default`.`{name}`(")
    assert "PARTITIONED BY (hour(at), truncate(4, id))" in shown
    assert "'table_type'='iceberg'" in shown and "'write_compression'='snappy'" in shown
    assert "COMMENT 'events'" in shown
    assert "IF EXISTS" in api_failed(athena, f"ALTER TABLE {name} UNSET TBLPROPERTIES ('nosuch')")
    api_ok(athena, f"ALTER TABLE {name} UNSET TBLPROPERTIES IF EXISTS ('nosuch')")
    # The statement SHOW CREATE TABLE gives makes the same table again.
    again = shown.replace(f"`{name}`", f"`{name}_again`").replace(
        table.location(), table.location() + "_again"
    )
    api_ok(athena, again)
    copy = pyiceberg.load_table(("default", f"{name}_again"))
    assert copy.spec().fields == table.spec().fields
    assert copy.schema() == table.schema()


def test_optimize_packs_small_files_and_keeps_every_row(
    athena: Any, pyiceberg: HiveCatalog
) -> None:
    name = f"packed_{uuid.uuid4().hex[:8]}"
    api_ok(
        athena,
        f"CREATE TABLE {name} (id int, part string) PARTITIONED BY (part) "
        "TBLPROPERTIES ('table_type'='ICEBERG', 'optimize_rewrite_data_file_threshold'='2')",
    )
    for batch in range(3):
        api_ok(athena, f"INSERT INTO {name} VALUES ({batch}, 'a'), ({batch + 10}, 'b')")
    files = api_ok(athena, f'SELECT count(*) FROM "{name}$files"')
    assert rows(files) == [["6"]]
    before = rows(api_ok(athena, f"SELECT id, part FROM {name} ORDER BY id"))
    api_ok(athena, f"OPTIMIZE {name} REWRITE DATA USING BIN_PACK WHERE part = 'a'")
    per_part = api_ok(
        athena,
        f'SELECT partition.part, count(*) FROM "{name}$files" GROUP BY 1 ORDER BY 1',
    )
    assert rows(per_part) == [["a", "1"], ["b", "3"]]
    api_ok(athena, f"OPTIMIZE {name} REWRITE DATA USING BIN_PACK")
    assert rows(api_ok(athena, f'SELECT count(*) FROM "{name}$files"')) == [["2"]]
    assert rows(api_ok(athena, f"SELECT id, part FROM {name} ORDER BY id")) == before
    assert pyiceberg.load_table(("default", name)).scan().to_arrow().num_rows == 6
    reason = refusal(athena, "OPTIMIZE covid_deaths REWRITE DATA USING BIN_PACK")
    assert "only supported for Iceberg tables" in reason


def holding(place: Path, email: str) -> list[Path]:
    """The data files under ``place`` with a row of ``email``, read as Parquet."""
    return [p for p in place.rglob("*.parquet") if email in pq.read_table(p)["email"].to_pylist()]


def test_delete_then_vacuum_leaves_no_file_with_the_erased_rows(
    stack: Settings, athena: Any, pyiceberg: HiveCatalog
) -> None:
    """A person erased with SQL: DELETE, then VACUUM once the snapshot age has passed; no
    file of the table holds their rows any more, and everyone else's rows are the same."""
    name = f"erased_{uuid.uuid4().hex[:8]}"
    place = f"s3://{stack.lake.data_bucket}/iceberg/{name}"
    api_ok(
        athena,
        f"CREATE TABLE {name} (user_id bigint, email string) LOCATION '{place}' "
        "TBLPROPERTIES ('table_type'='ICEBERG', 'vacuum_max_snapshot_age_seconds'='1')",
    )
    api_ok(
        athena,
        f"INSERT INTO {name} SELECT u, 'user' || CAST(u AS varchar) || '@x.org' "
        "FROM UNNEST(sequence(1, 50)) AS t(u)",
    )
    others = api_ok(athena, f"SELECT user_id, email FROM {name} WHERE user_id <> 7 ORDER BY 1")
    api_ok(athena, f"DELETE FROM {name} WHERE user_id = 7")
    assert holding(local(stack, place), "user7@x.org")  # the old snapshot's file
    time.sleep(1.5)
    api_ok(athena, f"VACUUM {name}")
    assert list(local(stack, place).rglob("*.parquet"))
    assert holding(local(stack, place), "user7@x.org") == []
    assert rows(api_ok(athena, f'SELECT count(*) FROM "{name}$snapshots"')) == [["1"]]
    after = api_ok(athena, f"SELECT user_id, email FROM {name} WHERE user_id <> 7 ORDER BY 1")
    assert rows(after) == rows(others)
    table = pyiceberg.load_table(("default", name))
    assert table.scan().to_arrow().num_rows == 49
    assert "only supported for Iceberg tables" in refusal(athena, "VACUUM covid_deaths")


def test_create_table_as_an_iceberg_table(athena: Any, pyiceberg: HiveCatalog) -> None:
    name = f"ctas_{uuid.uuid4().hex[:8]}"
    made = api_ok(
        athena,
        f"""CREATE TABLE {name} WITH (table_type = 'ICEBERG', is_external = false,
              partitioning = ARRAY['country', 'month(date)'], format = 'PARQUET',
              write_compression = 'SNAPPY', vacuum_min_snapshots_to_keep = 2)
            AS SELECT country, date, deaths FROM covid_deaths
            WHERE country IN ('Iceland', 'Norway') AND date < DATE '2020-04-01'""",
    )
    counted = rows(
        api_ok(
            athena,
            "SELECT count(*) FROM covid_deaths WHERE country IN ('Iceland', 'Norway') "
            "AND date < DATE '2020-04-01'",
        )
    )
    assert [[str(update_count(athena, made))]] == counted
    table = pyiceberg.load_table(("default", name))
    assert [str(f.transform) for f in table.spec().fields] == ["identity", "month"]
    assert table.properties["write.parquet.compression-codec"] == "snappy"
    assert table.properties["vacuum_min_snapshots_to_keep"] == "2"
    assert table.scan().to_arrow().num_rows == int(counted[0][0])
    assert rows(api_ok(athena, f"SELECT count(*) FROM {name}")) == counted
    empty = f"{name}_empty"
    api_ok(
        athena,
        f"CREATE TABLE {empty} WITH (table_type = 'ICEBERG', is_external = false) "
        "AS SELECT 1 AS id WITH NO DATA",
    )
    assert rows(api_ok(athena, f"SELECT count(*) FROM {empty}")) == [["0"]]
    reason = refusal(
        athena, f"CREATE TABLE {name}_x WITH (table_type = 'ICEBERG') AS SELECT 1 AS id"
    )
    assert "is_external = false" in reason
    reason = refusal(athena, f"CREATE TABLE {name}_y WITH (location = 's3://x/') AS SELECT 1 AS id")
    assert "table_type = 'ICEBERG'" in reason


def test_concurrent_writers_lose_no_commit(stack: Settings, pyiceberg: HiveCatalog) -> None:
    """Writers through the server's worker processes commit to one table at once: each
    INSERT and DELETE either lands whole or fails with ICEBERG_COMMIT_ERROR, and the
    table's rows are exactly those of the statements that succeeded."""
    name = f"contended_{uuid.uuid4().hex[:8]}"
    setup = boto3.client("athena", endpoint_url=endpoint(stack), **credentials(stack))
    api_ok(
        setup, f"CREATE TABLE {name} (writer int, n bigint) TBLPROPERTIES ('table_type'='ICEBERG')"
    )
    api_ok(setup, f"INSERT INTO {name} VALUES (-1, 0), (-2, 0)")
    outcomes: dict[int, dict[str, Any]] = {}

    def write(writer: int) -> None:
        client = boto3.client("athena", endpoint_url=endpoint(stack), **credentials(stack))
        sql = (
            f"DELETE FROM {name} WHERE writer = -{writer}"
            if writer in (1, 2)
            else f"INSERT INTO {name} SELECT {writer}, n FROM UNNEST(sequence(1, 100)) AS t(n)"
        )
        outcomes[writer] = api_run(client, sql)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(1, 7)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    states = {w: o["Status"]["State"] for w, o in outcomes.items()}
    assert len(states) == 6 and set(states.values()) <= {"SUCCEEDED", "FAILED"}
    for writer, outcome in outcomes.items():
        if states[writer] == "FAILED":
            assert "ICEBERG_COMMIT_ERROR" in outcome["Status"]["StateChangeReason"]
    expected = sorted(
        [(w, n) for w in range(3, 7) if states[w] == "SUCCEEDED" for n in range(1, 101)]
        + [(-w, 0) for w in (1, 2) if states[w] != "SUCCEEDED"]
    )
    found = pyiceberg.load_table(("default", name)).scan().to_arrow()
    assert sorted(zip(found["writer"].to_pylist(), found["n"].to_pylist(), strict=True)) == expected
    assert sum(s == "SUCCEEDED" for s in states.values()) >= 1


def test_changes_need_update_rights_and_each_refusal_is_audited(
    stack: Settings, athena: Any
) -> None:
    """Row-level changes and maintenance need glue:UpdateTable: the seeded data engineer
    (who reads the catalog) and salesperson (who does not) are refused each, the table is
    unchanged, and the refusals are in the audit."""
    name = f"guarded_{uuid.uuid4().hex[:8]}"
    api_ok(athena, f"CREATE TABLE {name} (id int) TBLPROPERTIES ('table_type'='ICEBERG')")
    api_ok(athena, f"INSERT INTO {name} VALUES (1), (2)")
    statements = (
        f"DELETE FROM {name} WHERE id = 1",
        f"UPDATE {name} SET id = 3",
        f"MERGE INTO {name} t USING (SELECT 1 AS id) s ON t.id = s.id WHEN MATCHED THEN DELETE",
        f"INSERT INTO {name} VALUES (4)",
        f"OPTIMIZE {name} REWRITE DATA USING BIN_PACK",
        f"VACUUM {name}",
    )
    for secret, user, action in (
        ("DataEngineerUserCreds", "de_user", "glue:UpdateTable"),
        ("SalesUserCreds", "sales_user", "lakeward:UseCatalog"),
    ):
        creds = json.loads(lakeward("secrets", "get", secret, data_dir=stack.data_dir).stdout)
        client = client_for(stack, creds["access_key_id"], creds["secret_access_key"])
        for sql in statements:
            reason = refusal(client, sql)
            assert user in reason and action in reason, (sql, reason)
        audit = lakeward(
            "audit", "--user", user, "--decision", "implicitDeny", "--limit", "1000",
            data_dir=stack.data_dir,
        ).stdout  # fmt: skip
        assert action in audit
    assert rows(api_ok(athena, f"SELECT count(*) FROM {name}")) == [["2"]]
