"""The DuckDB engine on real Parquet tables: schemas, partitions, lockdown, cancelling, S3."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import boto3
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakeward.errors import QueryCancelled, QueryFailed
from lakeward.metastore.tables import Column
from lakeward.query.engines import duckdb as duckdb_engine
from lakeward.query.engines.base import EngineResult, Limits, ResolvedTable
from lakeward.query.engines.duckdb import DuckDbEngine
from lakeward.query.engines.duckdb import pool as pool_module
from lakeward.query.engines.duckdb.pool import ConnectionPool, sweep_orphan_spills
from lakeward.query.model import TableRef
from lakeward.query.types import athena_type, athena_type_of_duckdb
from lakeward.storage.arrow import S3Options

CATALOG = "awsdatacatalog"
COLUMNS = [Column("id", "bigint"), Column("name", "string"), Column("score", "decimal(10,2)")]


def write(path: Path, table: pa.Table) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    return path


def rows(result: EngineResult) -> list[tuple[object, ...]]:
    return [tuple(r.values()) for batch in result.batches for r in batch.to_pylist()]


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("lake")
    # An older file without the "score" column, and a newer one whose ids are int32:
    # the metastore's schema (bigint, with score) is what queries see.
    write(root / "plain/part-0.parquet", pa.table({"id": [1, 2], "name": ["a", None]}))
    newer = {"id": pa.array([3], pa.int32()), "name": ["c"], "score": pa.array([1.5])}
    write(root / "plain/part-1.parquet", pa.table(newer))
    (root / "plain/_SUCCESS").write_bytes(b"")
    write(root / "plain/_temporary/0/part-9.parquet", pa.table({"id": [99]}))  # in-flight write
    for year in (2020, 2021):
        for part in range(3):
            ids = list(range(year * 1000 + part * 100, year * 1000 + part * 100 + 100))
            write(root / f"events/year={year}/part-{part}.parquet",
                  pa.table({"id": ids, "name": [f"e{i}" for i in ids]}))  # fmt: skip
    write(root / "plain10/part-0.parquet", pa.table({"secret": ["next door"]}))
    write(root / "other/secret.parquet", pa.table({"secret": ["not yours"]}))
    return root


def table(name: str, location: str, partition_keys: list[Column] | None = None) -> ResolvedTable:
    return ResolvedTable(TableRef(CATALOG, "db", name), location, COLUMNS, partition_keys or [])


@pytest.fixture(scope="module")
def plain(lake: Path) -> ResolvedTable:
    return table("plain", f"file:{lake}/plain")  # Hive's file:/x form


@pytest.fixture(scope="module")
def events(lake: Path) -> ResolvedTable:
    return table("events", f"file://{lake}/events/", [Column("year", "int")])


@pytest.fixture
def engine() -> Iterator[DuckDbEngine]:
    engine = DuckDbEngine()
    yield engine
    assert not engine._runs, "an execution was left open"
    engine.close()


def run(engine: DuckDbEngine, sql: str, *tables: ResolvedTable, **limits: object) -> EngineResult:
    # Each query starts once the previous one's connection is back in the pool (the
    # engine cleans it in the background), so these tests know which connection runs it.
    engine.settle()
    return engine.execute("q-1", sql, list(tables), Limits(**limits))  # type: ignore[arg-type]


def test_table_names_are_quoted() -> None:
    assert DuckDbEngine().table_name(TableRef("c", "d", "t")) == '"c"."d"."t"'


def test_a_table_reads_with_the_metastore_schema(
    engine: DuckDbEngine, plain: ResolvedTable
) -> None:
    result = run(engine, 'SELECT * FROM "awsdatacatalog"."db"."plain" ORDER BY id', plain)
    assert [(c.name, c.type, c.precision, c.scale) for c in result.columns] == [
        ("id", "bigint", 19, 0),
        ("name", "varchar", 2147483647, 0),
        ("score", "decimal", 10, 2),
    ]
    # _SUCCESS and _temporary/ are skipped, as Hive skips them.
    assert rows(result) == [(1, "a", None), (2, None, None), (3, "c", Decimal("1.50"))]
    sizes = sum(p.stat().st_size for p in (Path(plain.location[5:])).glob("part-*.parquet"))
    assert result.bytes_scanned == sizes


def test_location_forms(engine: DuckDbEngine, lake: Path) -> None:
    for location in (f"file:{lake}/plain/", f"file://{lake}/plain", f"{lake}/plain"):
        sql = 'SELECT count(*) FROM "awsdatacatalog"."db"."plain"'
        assert rows(run(engine, sql, table("plain", location))) == [(3,)]


def test_partitions_are_pruned(engine: DuckDbEngine, events: ResolvedTable, lake: Path) -> None:
    everything = run(engine, 'SELECT year, count(*) FROM "awsdatacatalog"."db"."events" '
                     "GROUP BY year ORDER BY year", events)  # fmt: skip
    assert rows(everything) == [(2020, 300), (2021, 300)]
    one = run(engine, 'SELECT count(*), min(id) FROM "awsdatacatalog"."db"."events" '
              "WHERE year = 2021 AND id >= 0", events)  # fmt: skip
    assert rows(one) == [(300, 2021000)]
    size_2021 = sum(p.stat().st_size for p in (lake / "events/year=2021").iterdir())
    assert one.bytes_scanned == size_2021
    assert everything.bytes_scanned == sum(p.stat().st_size for p in lake.glob("events/*/*"))
    plan = run(engine, 'EXPLAIN SELECT * FROM "awsdatacatalog"."db"."events" WHERE year = 2021',
               events)  # fmt: skip
    assert [c.name for c in plan.columns] == ["Query Plan"] and plan.bytes_scanned == 0
    text = "\n".join(str(line) for (line,) in rows(plan))
    assert "Scanning Files: 3/6" in text and "year = 2021" in text
    analyzed = run(engine, 'EXPLAIN ANALYZE SELECT count(*) FROM "awsdatacatalog"."db"."events" '
                   "WHERE year = 2020", events)  # fmt: skip
    assert analyzed.bytes_scanned == everything.bytes_scanned - size_2021
    assert "Total Time" in "\n".join(str(line) for (line,) in rows(analyzed))


def test_views_over_two_tables_in_one_query(
    engine: DuckDbEngine, plain: ResolvedTable, events: ResolvedTable
) -> None:
    sql = ('SELECT p.id, count(e.id) FROM "awsdatacatalog"."db"."plain" p '
           'JOIN "awsdatacatalog"."db"."events" e ON e.id % 10 = p.id AND e.year = 2020 '
           "GROUP BY p.id ORDER BY p.id")  # fmt: skip
    assert rows(run(engine, sql, plain, events)) == [(1, 30), (2, 30), (3, 30)]


def warm(engine: DuckDbEngine, *tables: ResolvedTable) -> object:
    """Run a query so that the next one over the same tables gets a pooled connection."""
    assert rows(run(engine, "SELECT 42", *tables)) == [(42,)]
    engine.settle()
    (idle,) = [c for pooled in engine.pool._idle.values() for c in pooled]
    return idle


@pytest.mark.parametrize("sql", [
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM read_text('/etc/hostname')",
    "SELECT * FROM glob('/etc/*')",
    "SELECT * FROM read_parquet('{lake}/other/secret.parquet')",
    "SELECT * FROM read_parquet('{lake}/plain10/part-0.parquet')",  # a prefix of an allowed dir
    "SELECT * FROM read_parquet('{lake}/plain/../other/secret.parquet')",
    "SELECT * FROM '{lake}/other/secret.parquet'",
])  # fmt: skip
def test_only_the_tables_files_can_be_read(
    engine: DuckDbEngine, plain: ResolvedTable, lake: Path, sql: str
) -> None:
    warm(engine, plain)
    with pytest.raises(QueryFailed, match="not allowed|disabled"):
        run(engine, sql.format(lake=lake), plain)


@pytest.mark.parametrize("sql", [
    "SET enable_external_access = true",
    "RESET lock_configuration",
    "COPY (SELECT 1) TO '{lake}/plain/evil.csv'",
    "ATTACH '{lake}/x.db'",
    "INSTALL httpfs",
    "CREATE TABLE t AS SELECT 1",
    "SELECT 1; SELECT 2",
    "EXPLAIN COPY (SELECT 1) TO '{lake}/plain/evil.csv'",
])  # fmt: skip
def test_statements_other_than_select_are_refused(
    engine: DuckDbEngine, plain: ResolvedTable, lake: Path, sql: str
) -> None:
    warm(engine, plain)
    with pytest.raises(QueryFailed):
        run(engine, sql.format(lake=lake), plain)
    assert not (lake / "plain/evil.csv").exists()


def test_the_connection_itself_is_locked(
    engine: DuckDbEngine, plain: ResolvedTable, lake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Even past the statement check, configuration and other files stay out of reach."""
    warm(engine, plain)
    monkeypatch.setattr(duckdb_engine, "_checked_statement", lambda con, sql: None)
    for sql in ("SET threads = 1", "SET enable_external_access = true", "PRAGMA threads = 1"):
        with pytest.raises(QueryFailed, match="locked"):
            run(engine, sql, plain)
    for sql in (f"COPY (SELECT 1) TO '{lake}/other/evil.csv'", f"ATTACH '{lake}/x.db'"):
        with pytest.raises(QueryFailed, match="not allowed"):
            run(engine, sql, plain)
    assert not (lake / "other/evil.csv").exists() and not (lake / "x.db").exists()


LEFTOVERS = (
    "SELECT (SELECT count(*) FROM duckdb_tables()) + (SELECT count(*) FROM duckdb_sequences())"
    # Beyond the macros of Trino's semantics (query/translate) every connection opens with.
    " + (SELECT count(*) FROM duckdb_functions() WHERE NOT internal"
    "    AND NOT starts_with(function_name, 'trino_'))"
    " + (SELECT count(*) FROM duckdb_variables())"
    " + (SELECT count(*) FROM duckdb_databases() WHERE database_name = 'leak')"
)


def test_a_pooled_connection_keeps_nothing_of_the_previous_query(
    engine: DuckDbEngine, plain: ResolvedTable, lake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pooled = warm(engine, plain)
    views = "SELECT view_name FROM duckdb_views() WHERE NOT internal"
    alias = table("alias", plain.location)  # the same files: the same pooled connection
    assert rows(run(engine, views, alias)) == [("alias",)]  # not the previous query's "plain"
    assert warm(engine, alias) is pooled
    with pytest.raises(QueryFailed, match="plain"):
        rows(run(engine, 'SELECT * FROM "awsdatacatalog"."db"."plain"', alias))
    warm(engine, plain)
    # Past the statement check, whatever a statement leaves behind is not seen by the
    # next query: its connection is cleaned or closed; settings stay locked, files shut.
    monkeypatch.setattr(duckdb_engine, "_checked_statement", lambda con, sql: None)
    leaks = (
        "CREATE TEMP TABLE leak AS SELECT 1",
        "CREATE MACRO leak() AS 1",
        "CREATE OR REPLACE MACRO trino_divide(a, b) AS 42",
        "DROP MACRO trino_divide",
        "SET VARIABLE leak = 1",
        "CREATE SEQUENCE leak",
        "PREPARE leak AS SELECT 1",
        "ATTACH ':memory:' AS leak",
    )
    for sql in leaks:
        with contextlib.suppress(Exception):
            rows(run(engine, sql, plain))
        assert rows(run(engine, LEFTOVERS, plain)) == [(0,)]
        assert rows(run(engine, "SELECT trino_divide(7, 2)", plain)) == [(3,)]
        with pytest.raises(QueryFailed, match="locked"):
            run(engine, "SET enable_external_access = true", plain)
        with pytest.raises(QueryFailed, match="not allowed"):
            run(engine, f"SELECT * FROM read_parquet('{lake}/other/secret.parquet')", plain)
    # A connection left with anything on it is closed, never handed out again.
    dirty = engine.pool.take([str(lake / "plain")], Limits())
    leak = "CREATE TEMP TABLE leak AS SELECT 1"
    dirty.ran(leak)  # as the engine notes every statement it runs
    dirty.con.execute(leak)
    engine.pool.give(dirty)
    assert engine.pool.take([str(lake / "plain")], Limits()) is not dirty


@pytest.mark.parametrize("catalog", ["memory", "Memory"])
def test_a_catalog_named_as_a_built_in_database_leaves_no_view_behind(
    engine: DuckDbEngine, lake: Path, catalog: str
) -> None:
    # Its views go into a database that is never detached: the pool must find them.
    inside = ResolvedTable(TableRef(catalog, "db", "plain"), f"file:{lake}/plain", COLUMNS, [])
    quoted = f'"{catalog}"."db"."plain"'
    assert rows(run(engine, f"SELECT count(*) FROM {quoted}", inside)) == [(3,)]
    alias = table("alias", f"file:{lake}/plain")  # the same files: the same key in the pool
    with pytest.raises(QueryFailed, match="plain"):
        rows(run(engine, f"SELECT count(*) FROM {quoted}", alias))
    views = "SELECT view_name FROM duckdb_views() WHERE NOT internal"
    assert rows(run(engine, views, alias)) == [("alias",)]


def test_interrupt_stops_a_long_query(engine: DuckDbEngine) -> None:
    timer = threading.Timer(0.5, engine.interrupt, ("q-1",))
    timer.start()
    started = time.monotonic()
    with pytest.raises(QueryCancelled):
        run(engine, "SELECT count(*) FROM range(1000000000) a CROSS JOIN range(1000000000) b")
    assert time.monotonic() - started < 10
    assert rows(run(engine, "SELECT 42")) == [(42,)]


def test_interrupt_while_streaming(engine: DuckDbEngine) -> None:
    result = run(engine, "SELECT i FROM range(100000000) t(i)")
    batches = iter(result.batches)
    next(batches)
    engine.interrupt("q-1")
    with pytest.raises(QueryCancelled):
        for _ in batches:
            pass
    engine.interrupt("no-such-execution")  # nothing to do


def test_a_dropped_result_ends_its_execution(engine: DuckDbEngine) -> None:
    result = run(engine, "SELECT i FROM range(100000000) t(i)")
    assert engine._runs
    del result
    assert not engine._runs


def test_a_corrupted_file_fails_with_its_name(
    engine: DuckDbEngine, plain: ResolvedTable, tmp_path: Path
) -> None:
    write(tmp_path / "broken/part-0.parquet", pa.table({"id": [1], "name": ["x"]}))
    (tmp_path / "broken/part-1.parquet").write_bytes(b"PAR1 this is not parquet" * 50)
    broken = table("broken", f"file:{tmp_path}/broken")
    with pytest.raises(QueryFailed) as failure:
        run(engine, 'SELECT * FROM "awsdatacatalog"."db"."broken"', broken)
    assert str(tmp_path / "broken/part-1.parquet") in str(failure.value)
    # Damaged pages behind an intact footer fail while reading, also naming the file.
    good = write(tmp_path / "pages/part-0.parquet", pa.table({"id": list(range(100_000)),
                 "name": [str(i) for i in range(100_000)]}))  # fmt: skip
    data = bytearray(good.read_bytes())
    data[100:3000] = b"\x55" * 2900
    good.write_bytes(bytes(data))
    with pytest.raises(QueryFailed, match=str(good)):
        rows(run(engine, 'SELECT sum(id) FROM "awsdatacatalog"."db"."pages"',
                 table("pages", f"file:{tmp_path}/pages")))  # fmt: skip
    assert rows(run(engine, 'SELECT count(*) FROM "awsdatacatalog"."db"."plain"', plain)) == [(3,)]


def test_an_empty_or_missing_location_is_an_empty_table(
    engine: DuckDbEngine, tmp_path: Path
) -> None:
    (tmp_path / "empty").mkdir()
    for location in (f"file:{tmp_path}/empty", f"file:{tmp_path}/missing"):
        result = run(engine, 'SELECT * FROM "awsdatacatalog"."db"."e"', table("e", location))
        assert [c.type for c in result.columns] == ["bigint", "varchar", "decimal"]
        assert rows(result) == [] and result.bytes_scanned == 0


def test_a_result_larger_than_memory_streams(engine: DuckDbEngine, tmp_path: Path) -> None:
    spill = tmp_path / "spill"
    sql = "SELECT i, repeat('x', 100) || i AS s FROM range(3000000) t(i) ORDER BY s DESC"
    result = run(engine, sql, memory_limit="64MB", spill_directory=str(spill), threads=2)
    count = 0
    for batch in result.batches:
        assert batch.num_rows <= duckdb_engine.ROWS_PER_BATCH
        count += batch.num_rows
    assert count == 3_000_000
    # What the execution spilled is gone (DuckDB keeps only its marker of the directory's
    # owner); the pooled connection's directory goes when the connection closes.
    assert [p for p in spill.rglob("*") if p.is_file() and not p.name.endswith("_owner")] == []
    engine.settle()
    engine.pool.close()
    assert list(spill.iterdir()) == []


def test_result_column_types(engine: DuckDbEngine) -> None:
    result = run(engine, "SELECT 1.5::DECIMAL(10,2) AS d, DATE '2020-01-02' AS dt, [1, 2] AS a, "
                 "{'x': 1} AS r, MAP {'k': 1} AS m, NULL AS n, 1::TINYINT AS t, 'é' AS s, "
                 "TIMESTAMP '2020-01-02 03:04:05' AS ts, 2.5::FLOAT AS f")  # fmt: skip
    assert [c.type for c in result.columns] == [
        "decimal", "date", "array", "row", "map", "unknown", "tinyint", "varchar", "timestamp",
        "float"]  # fmt: skip
    assert result.columns[0].precision == 10 and result.columns[0].scale == 2
    rows(result)


@pytest.mark.parametrize(("hive", "athena"), [
    ("string", ("varchar", 2147483647, 0)), ("varchar(20)", ("varchar", 20, 0)),
    ("char(3)", ("char", 3, 0)), ("int", ("integer", 10, 0)), ("bigint", ("bigint", 19, 0)),
    ("decimal(12,4)", ("decimal", 12, 4)), ("decimal", ("decimal", 10, 0)),
    ("binary", ("varbinary", 1073741824, 0)), ("array<map<string,struct<a:int>>>", ("array", 0, 0)),
    ("map<string,int>", ("map", 0, 0)), ("struct<a:int,b:array<string>>", ("row", 0, 0)),
    ("timestamp", ("timestamp", 3, 0)), ("not a type<", ("unknown", 0, 0)),
])  # fmt: skip
def test_hive_types(hive: str, athena: tuple[str, int, int]) -> None:
    found = athena_type(hive)
    assert (found["type"], found["precision"], found["scale"]) == athena


def test_duckdb_types() -> None:
    cases = {"HUGEINT": "decimal", "UBIGINT": "decimal", "INTEGER[3]": "array", "BLOB": "varbinary",
             "TIMESTAMP WITH TIME ZONE": "timestamp with time zone", "JSON": "json",
             "STRUCT(a MAP(VARCHAR, INTEGER[]))": "row", "UNION(a INTEGER)": "unknown"}  # fmt: skip
    assert {t: athena_type_of_duckdb(t).name for t in cases} == cases


# -- S3 ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def s3(s3_endpoint: str) -> Iterator[tuple[S3Options, object]]:
    os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
    options = S3Options(s3_endpoint, "us-east-1", "testing", "testing")
    client = boto3.client("s3", endpoint_url=options.endpoint_url, region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")  # fmt: skip
    client.create_bucket(Bucket="lake")
    yield options, client


def put_parquet(client: object, key: str, data: pa.Table) -> int:
    buffer = io.BytesIO()
    pq.write_table(data, buffer)
    client.put_object(Bucket="lake", Key=key, Body=buffer.getvalue())  # type: ignore[attr-defined]
    return len(buffer.getvalue())


def test_a_partitioned_table_on_s3(s3: tuple[S3Options, object]) -> None:
    options, client = s3
    sizes = {}
    for year in (2020, 2021):
        data = pa.table({"id": pa.array([year, year + 1], pa.int32()), "name": ["a", "b"]})
        sizes[year] = put_parquet(client, f"warehouse/events/year={year}/part-0.parquet", data)
    client.put_object(Bucket="lake", Key="warehouse/events/_SUCCESS", Body=b"")  # type: ignore[attr-defined]
    engine = DuckDbEngine(options)
    for scheme in ("s3a", "s3"):
        events = table("events", f"{scheme}://lake/warehouse/events/", [Column("year", "int")])
        result = run(engine, 'SELECT id, name, score, year FROM "awsdatacatalog"."db"."events" '
                     "WHERE year = 2021 ORDER BY id", events)  # fmt: skip
        assert [c.type for c in result.columns] == ["bigint", "varchar", "decimal", "integer"]
        assert rows(result) == [(2021, "a", None, 2021), (2022, "b", None, 2021)]
        assert result.bytes_scanned == sizes[2021]
        everything = run(engine, 'SELECT count(*) FROM "awsdatacatalog"."db"."events"', events)
        assert rows(everything) == [(4,)] and everything.bytes_scanned == sum(sizes.values())
    # The lockdown holds for S3 tables too.
    with pytest.raises(QueryFailed):
        run(engine, "SELECT * FROM read_csv('/etc/passwd')", events)
    # A corrupted object fails with its name, and the engine goes on.
    key = "warehouse/broken/part-0.parquet"
    client.put_object(Bucket="lake", Key=key, Body=b"not parquet" * 20)  # type: ignore[attr-defined]
    with pytest.raises(QueryFailed, match=f"lake/{key}"):
        run(engine, 'SELECT * FROM "awsdatacatalog"."db"."broken"',
            table("broken", "s3a://lake/warehouse/broken"))  # fmt: skip
    assert rows(run(engine, 'SELECT count(*) FROM "awsdatacatalog"."db"."events"', events)) == [
        (4,)
    ]


def test_queries_without_tables_share_a_pooled_connection(engine: DuckDbEngine) -> None:
    for value in range(3):  # nothing else runs on the connection before these
        assert rows(run(engine, f"SELECT {value} AS v")) == [(value,)]
    engine.settle()
    assert len([c for pooled in engine.pool._idle.values() for c in pooled]) == 1


def test_the_pool_keeps_a_bounded_number_of_connections(lake: Path) -> None:
    from lakeward.query.engines.duckdb.pool import ConnectionPool

    pool = ConnectionPool(per_key=2, total=3)
    taken = [pool.take([str(lake / d)], Limits()) for d in ("plain", "plain", "plain", "events")]
    taken += [pool.take([str(lake / "other")], Limits())]
    for connection in taken:
        pool.give(connection)
    idle = [c for pooled in pool._idle.values() for c in pooled]
    assert len(idle) == 3 and all(c in taken for c in idle)
    assert sum(c.key.directories == (str(lake / "plain"),) for c in idle) <= 2
    assert pool.take([str(lake / "other")], Limits()) in taken  # the most recent one kept
    pool.close()
    assert all(not c.spill.exists() for c in taken if c not in idle)


def test_spill_directories_of_killed_processes_are_swept(tmp_path: Path) -> None:
    """A process killed mid-query leaves its spill directory; the next pool that spills
    there removes it, and leaves the directories of live processes alone."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    spill = tmp_path / "spill"
    orphan = spill / f"duckdb-{gone.pid}-7f00-1"
    (orphan / "duckdb_temp_storage-0.tmp").parent.mkdir(parents=True)
    (orphan / "duckdb_temp_storage-0.tmp").write_bytes(b"x" * 1024)
    alive = subprocess.Popen(["sleep", "30"])
    try:
        kept = spill / f"duckdb-{alive.pid}-7f00-1"
        kept.mkdir()
        pool = ConnectionPool()
        connection = pool.take([str(tmp_path)], Limits(spill_directory=str(spill)))
        assert not orphan.exists() and kept.exists()
        pool.give(connection)
        pool.close()
    finally:
        alive.kill()
        alive.wait()


def test_temporary_directories_of_killed_processes_are_swept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process killed with its spill or staging directory still there leaves it to the
    next process that makes one: only the directories of processes that are gone go."""
    child = subprocess.Popen(["true"])
    child.wait()
    dead, alive = child.pid, os.getppid()
    for pid in (dead, alive, os.getpid()):
        (tmp_path / f"lakeward-rewrite-{pid}-x").mkdir()
        (tmp_path / f"lakeward-rewrite-{pid}-x" / "part.parquet").write_bytes(b"rows")
    (tmp_path / "lakeward-rewrite-notapid").mkdir()
    monkeypatch.setattr(pool_module, "_swept", set())
    sweep_orphan_spills(tmp_path, "lakeward-rewrite-")
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted(
        [f"lakeward-rewrite-{alive}-x", f"lakeward-rewrite-{os.getpid()}-x",
         "lakeward-rewrite-notapid"]
    )  # fmt: skip
