"""The Spark engine's writes (CTAS, INSERT INTO, UNLOAD): files Spark makes itself, as a
Hive table over them is read by a separate Spark session and by Arrow."""

from __future__ import annotations

import gzip
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakeward.config import Settings
from lakeward.errors import QueryFailed
from lakeward.query.engines.base import Limits, ResolvedTable, WriteTarget
from lakeward.query.engines.spark import SparkEngine
from lakeward.query.model import TableRef

pytestmark = pytest.mark.spark

SELECT = (
    "SELECT province_state, lat, date, confirmed, deaths, "
    "CAST(date AS TIMESTAMP) + INTERVAL '90' MINUTE AS reported, country "
    "FROM default.covid_cases WHERE country IN ('Italy', 'Australia') "
    "AND date BETWEEN DATE '2020-03-01' AND DATE '2020-03-10'"
)
COLUMNS = (
    "province_state string, lat double, `date` date, confirmed bigint, deaths bigint, "
    "reported timestamp"
)
STORED = {
    "parquet": "STORED AS PARQUET",
    "orc": "STORED AS ORC",
    "text": "ROW FORMAT DELIMITED FIELDS TERMINATED BY '|' STORED AS TEXTFILE",
}


@pytest.fixture(scope="module")
def engine(stack: Settings) -> SparkEngine:
    # Not closed: its session shares the SparkContext of the `spark` fixture.
    return SparkEngine(stack)


def write(engine: SparkEngine, directory: Path, sql: str = SELECT, **options: Any) -> Any:
    directory.mkdir(parents=True, exist_ok=True)
    target = WriteTarget(str(directory), prefix="q1_", **options)
    return engine.write("write-test", sql, [], Limits(), target)


def rows_of(frame: Any) -> list[tuple[Any, ...]]:
    return sorted((tuple(r) for r in frame.collect()), key=repr)


@pytest.mark.parametrize(
    ("kind", "compression"), [("parquet", "zstd"), ("orc", "zlib"), ("text", "gzip")]
)
def test_a_partitioned_write_is_a_hive_table_another_spark_session_reads(
    engine: SparkEngine, spark: Any, tmp_path: Path, kind: str, compression: str
) -> None:
    directory = tmp_path / "staged"
    result = write(
        engine,
        directory,
        format=kind,
        compression=compression,
        partitioned_by=("country",),
        field_delimiter="|",
    )

    expected = rows_of(spark.sql(SELECT))
    assert result.rows == len(expected) == 90  # Italy, 10 days; Australia, 8 states
    assert [c.name for c in result.columns] == [
        "province_state", "lat", "date", "confirmed", "deaths", "reported", "country",
    ]  # fmt: skip
    assert [c.type for c in result.columns] == [
        "varchar", "double", "date", "bigint", "bigint", "timestamp", "varchar",
    ]  # fmt: skip
    # One file per partition, named as the statement asked; nothing but data files.
    assert sorted(f.partition for f in result.files) == [("Australia",), ("Italy",)]
    assert all(Path(f.path).name.startswith("q1_") for f in result.files)
    on_disk = sorted(
        p.relative_to(directory).as_posix() for p in directory.rglob("*") if p.is_file()
    )
    assert on_disk == sorted(f.path for f in result.files)
    assert sum(f.rows for f in result.files) == result.rows
    assert all(f.size == (directory / f.path).stat().st_size for f in result.files)

    table = f"default.spark_write_{kind}_{uuid.uuid4().hex[:8]}"
    spark.sql(
        f"CREATE EXTERNAL TABLE {table} ({COLUMNS}) PARTITIONED BY (country string) "
        f"{STORED[kind]} LOCATION '{directory.as_uri()}'"
    )
    try:
        spark.sql(f"MSCK REPAIR TABLE {table}")
        assert rows_of(spark.table(table)) == expected
    finally:
        spark.sql(f"DROP TABLE {table}")


def test_text_follows_lazy_simple_serde(engine: SparkEngine, tmp_path: Path) -> None:
    sql = (
        "SELECT 'a' AS s, CAST(NULL AS STRING) AS n, '' AS e, 1.5D AS d, true AS b, "
        "array(1, NULL) AS xs, map('k', 2) AS m, named_struct('x', 1, 'y', 'z') AS r, "
        "TIMESTAMP '2020-01-02 03:04:05' AS t"
    )
    result = write(engine, tmp_path / "t", sql, format="text", compression="gzip")
    (written,) = result.files
    assert written.path.endswith(".txt.gz") and written.rows == 1
    line = gzip.decompress((tmp_path / "t" / written.path).read_bytes())
    assert (
        line
        == b"a\x01\\N\x01\x011.5\x01true\x011\x02\\N\x01k\x032\x011\x02z\x012020-01-02 03:04:05\n"
    )
    # A table's own delimiter and serialization.null.format, at every depth (INSERT INTO).
    result = write(
        engine,
        tmp_path / "u",
        "SELECT 'a' AS s, CAST(NULL AS STRING) AS n, array(1, NULL) AS xs",
        format="text",
        field_delimiter="\t",
        null_format="NULL",
    )
    (written,) = result.files
    assert (tmp_path / "u" / written.path).read_bytes() == b"a\tNULL\t1\x02NULL\n"


def test_parquet_holds_hive_timestamps_and_uncompressed_means_uncompressed(
    engine: SparkEngine, tmp_path: Path
) -> None:
    result = write(engine, tmp_path / "p", SELECT, format="parquet", compression="none")
    files = [tmp_path / "p" / f.path for f in result.files]
    metadata = pq.read_metadata(files[0])
    assert metadata.row_group(0).column(0).compression == "UNCOMPRESSED"
    # Zone-less (Hive's timestamp), as Arrow's writers write it too: not Spark's INT96.
    assert str(pq.read_schema(files[0]).field("reported").type) == "timestamp[us]"
    table = pq.ParquetDataset(files).read()
    assert table.num_rows == result.rows


def test_a_query_without_rows_writes_no_file(engine: SparkEngine, tmp_path: Path) -> None:
    result = write(engine, tmp_path / "e", SELECT + " AND 1 = 0", format="parquet")
    assert result.rows == 0 and result.files == []
    assert list((tmp_path / "e").rglob("*")) == []


def test_a_failed_write_says_why_in_the_user_s_terms(engine: SparkEngine, tmp_path: Path) -> None:
    with pytest.raises(QueryFailed) as failure:
        write(
            engine,
            tmp_path / "f",
            "SELECT confirmed * 9223372036854775807 AS x FROM default.covid_cases",
        )
    assert str(failure.value).startswith("[ARITHMETIC_OVERFLOW] long overflow")
    assert "try_multiply" not in str(failure.value) and "ansi" not in str(failure.value)


def test_files_added_to_a_table_are_read_by_the_next_query(
    engine: SparkEngine, spark: Any, tmp_path: Path
) -> None:
    # An INSERT INTO adds files to an unpartitioned table's directory; Spark keeps a
    # table's file list from one query to the next unless told.
    pq.write_table(pa.table({"x": pa.array([1], pa.int32())}), tmp_path / "one.parquet")
    name = f"spark_added_{uuid.uuid4().hex[:8]}"
    spark.sql(
        f"CREATE EXTERNAL TABLE default.{name} (x int) STORED AS PARQUET "
        f"LOCATION '{tmp_path.as_uri()}'"
    )
    table = ResolvedTable(TableRef("demo_hive_metastore", "default", name), tmp_path.as_uri(), [])

    def total() -> list[dict[str, Any]]:
        sql = f"SELECT count(*) AS n, sum(x) AS s FROM `default`.`{name}`"
        result = engine.execute("read-test", sql, [table], Limits())
        return [row for batch in result.batches for row in batch.to_pylist()]

    try:
        assert total() == [{"n": 1, "s": 1}]
        pq.write_table(pa.table({"x": pa.array([2], pa.int32())}), tmp_path / "two.parquet")
        assert total() == [{"n": 2, "s": 3}]
    finally:
        spark.sql(f"DROP TABLE default.{name}")


def test_a_cluster_writes_only_where_its_executors_can_reach(tmp_path: Path) -> None:
    """Staged on this machine (a target without an s3:// name: a lake on S3), a write on a
    cluster is refused, naming the way out; in the embedded lake it is staged by name."""
    settings = Settings(data_dir=tmp_path, spark={"master": "spark://cluster:7077"})
    target = WriteTarget(str(tmp_path / "staged"))
    with pytest.raises(QueryFailed, match="on spark://cluster:7077 writes tables in the embedded"):
        SparkEngine(settings).write("x", "SELECT 1 AS a", [], Limits(), target)
