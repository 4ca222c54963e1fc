"""The Arrow writers behind CTAS, INSERT INTO and UNLOAD (engines/writers.py), without a stack."""

from __future__ import annotations

import bz2
import datetime
import json
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.orc as orc
import pyarrow.parquet as pq
import pytest

from lakeward.errors import InvalidRequest, QueryFailed
from lakeward.query.engines.base import EngineResult, WriteTarget
from lakeward.query.engines.writers import compression_of, escape_path, write_result
from lakeward.query.types import athena_type_of_arrow

ROWS = pa.record_batch(
    {
        "id": pa.array([1, 2, 3], pa.int64()),
        "name": ["a,b", None, "c"],
        "amount": pa.array([Decimal("1.50"), None, Decimal("-2.25")], pa.decimal128(5, 2)),
        "day": [datetime.date(2020, 1, 1), datetime.date(2020, 1, 2), None],
        "region": ["north", None, "a/b=c"],
    }
)


def result(*batches: pa.RecordBatch) -> EngineResult:
    columns = [athena_type_of_arrow(f.type).column(f.name) for f in batches[0].schema]
    return EngineResult(columns, iter(batches), schema=batches[0].schema)


def test_partitions_are_hive_directories_without_their_columns(tmp_path: Path) -> None:
    target = WriteTarget(str(tmp_path), "parquet", "snappy", ("region",), prefix="q_")
    written = write_result(result(ROWS), target)
    assert written.rows == 3
    assert sorted((f.path, f.rows, f.partition) for f in written.files) == [
        ("region=__HIVE_DEFAULT_PARTITION__/q_00001.parquet", 1, (None,)),
        ("region=a%2Fb%3Dc/q_00002.parquet", 1, ("a/b=c",)),
        ("region=north/q_00000.parquet", 1, ("north",)),
    ]
    table = pq.read_table(tmp_path / "region=north" / "q_00000.parquet")
    assert table.column_names == ["id", "name", "amount", "day"]
    assert (
        pq.ParquetFile(tmp_path / "region=north" / "q_00000.parquet")
        .metadata.row_group(0)
        .column(0)
        .compression
        == "SNAPPY"
    )
    assert [(f.path, f.size) for f in written.files] == [
        (f.path, (tmp_path / f.path).stat().st_size) for f in written.files
    ]


def test_text_is_lazy_simple_serde_s_layout(tmp_path: Path) -> None:
    target = WriteTarget(str(tmp_path), "text", "bzip2", field_delimiter="|", prefix="q_")
    written = write_result(result(ROWS), target)
    assert [f.path for f in written.files] == ["q_00000.txt.bz2"]
    text = bz2.decompress((tmp_path / "q_00000.txt.bz2").read_bytes()).decode()
    assert text.splitlines() == [
        "1|a,b|1.50|2020-01-01|north",
        "2|\\N|\\N|2020-01-02|\\N",
        "3|c|-2.25|\\N|a/b=c",
    ]


def test_json_lines_and_orc(tmp_path: Path) -> None:
    written = write_result(result(ROWS), WriteTarget(str(tmp_path / "j"), "json", "none"))
    lines = (tmp_path / "j" / written.files[0].path).read_text().splitlines()
    assert [json.loads(line) for line in lines][0] == {
        "id": 1,
        "name": "a,b",
        "amount": 1.5,
        "day": "2020-01-01",
        "region": "north",
    }
    written = write_result(result(ROWS), WriteTarget(str(tmp_path / "o"), "orc", "zlib"))
    read = orc.ORCFile(tmp_path / "o" / written.files[0].path)
    assert read.compression == "ZLIB"
    assert read.read().to_pylist()[1] == {
        "id": 2,
        "name": None,
        "amount": None,
        "day": datetime.date(2020, 1, 2),
        "region": None,
    }


def test_no_rows_no_file_and_refusals(tmp_path: Path) -> None:
    empty = ROWS.slice(0, 0)
    written = write_result(result(empty), WriteTarget(str(tmp_path)))
    assert written.files == [] and written.rows == 0 and written.schema == ROWS.schema
    listed = pa.record_batch({"id": [1], "tags": [["x", "y"]]})
    with pytest.raises(QueryFailed, match="column tags: TEXTFILE tables written by lakeward"):
        write_result(result(listed), WriteTarget(str(tmp_path), "text"))
    with pytest.raises(QueryFailed, match="at least one column besides its partition columns"):
        write_result(
            result(ROWS.select(["region"])), WriteTarget(str(tmp_path), partitioned_by=("region",))
        )
    with pytest.raises(InvalidRequest, match="write_compression LZ4 is not supported for PARQUET"):
        compression_of("parquet", "lz4")
    assert compression_of("orc", None) == "zlib" and compression_of("text", None) == "gzip"
    assert escape_path("a\tb#c") == "a%09b%23c"
