"""The DuckDB engine reads what the metastore declares: formats, SerDes, partitions.

Files here are written by hand the way Hive writes them (``\\N`` for NULL, ``\\``
escapes, ^A delimiters, header lines, compressed by extension); ``test_spark_tables.py``
reads files Spark wrote through Hive's SerDes.
"""

from __future__ import annotations

import bz2
import gzip
import json
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.orc as orc
import pyarrow.parquet as pq
import pytest

from lakeward.errors import QueryFailed
from lakeward.metastore.tables import Column, PartitionInfo
from lakeward.query import formats
from lakeward.query.engines.base import EngineResult, Limits, ResolvedTable
from lakeward.query.engines.duckdb import DuckDbEngine
from lakeward.query.formats import TableFormat
from lakeward.query.model import TableRef

CSV = TableFormat(
    formats.TEXT_INPUT, formats.TEXT_OUTPUT, formats.OPEN_CSV_SERDE, {"separatorChar": ","}
)
OPENX = TableFormat(formats.TEXT_INPUT, formats.TEXT_OUTPUT, formats.OPENX_JSON_SERDE)


def text_format(**serde: str) -> TableFormat:
    return TableFormat(formats.TEXT_INPUT, formats.TEXT_OUTPUT, formats.LAZY_SIMPLE_SERDE, serde)


def table(
    name: str,
    location: Path | str,
    columns: list[tuple[str, str]],
    table_format: TableFormat = formats.PARQUET,
    keys: list[tuple[str, str]] | None = None,
    partitions: list[PartitionInfo] | None = None,
    **parameters: str,
) -> ResolvedTable:
    return ResolvedTable(
        TableRef("awsdatacatalog", "db", name),
        f"file:{location}",
        [Column(n, t) for n, t in columns],
        [Column(n, t) for n, t in keys or []],
        table_format,
        parameters,
        partitions,
    )


@pytest.fixture
def engine() -> Iterator[DuckDbEngine]:
    engine = DuckDbEngine()
    yield engine
    engine.close()


def run(engine: DuckDbEngine, sql: str, *tables: ResolvedTable) -> EngineResult:
    engine.settle()
    return engine.execute("q-1", sql, list(tables), Limits())


def rows(engine: DuckDbEngine, sql: str, *tables: ResolvedTable) -> list[tuple[object, ...]]:
    result = run(engine, sql, *tables)
    return [tuple(r.values()) for batch in result.batches for r in batch.to_pylist()]


def put(path: Path, data: bytes | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def test_lazy_simple_text_as_hive_writes_it(engine: DuckDbEngine, tmp_path: Path) -> None:
    # Hive's defaults: ^A between fields, \N for NULL; a field that does not parse as
    # its column's type is NULL; a missing field is NULL, an extra one ignored.
    put(tmp_path / "t/000000_0", "1\x01Austria\x01\\N\x01true\n2\x01\\N\x0112.5\x01FALSE\n"
        "x3\x01Chile\x01abc\x01yes\n4\x01Peru\n5\x01Cuba\x011\x01true\x01extra\n")  # fmt: skip
    t = table("t", tmp_path / "t", [("id", "int"), ("name", "string"), ("score", "double"),
                                    ("ok", "boolean")], text_format())  # fmt: skip
    assert rows(engine, 'SELECT * FROM "awsdatacatalog"."db"."t"', t) == [
        (1, "Austria", None, True),
        (2, None, 12.5, False),
        (None, "Chile", None, None),
        (4, "Peru", None, None),
        (5, "Cuba", 1.0, True),
    ]


def test_delimiter_escape_and_null_format(engine: DuckDbEngine, tmp_path: Path) -> None:
    put(tmp_path / "t/a.csv", "a\\,b,NA,7\nplain,,NA\n")
    t = table("t", tmp_path / "t", [("s", "string"), ("n", "string"), ("i", "bigint")],
              text_format(**{"field.delim": ",", "escape.delim": "\\",
                             "serialization.null.format": "NA"}))  # fmt: skip
    assert rows(engine, 'SELECT * FROM "awsdatacatalog"."db"."t"', t) == [
        ("a,b", None, 7),
        ("plain", "", None),
    ]


def test_compressed_files_and_headers_per_file(engine: DuckDbEngine, tmp_path: Path) -> None:
    body = "id|name\n{0}|{1}\n"
    put(tmp_path / "t/a.txt.gz", gzip.compress(body.format(1, "gzip").encode()))
    put(tmp_path / "t/b.txt.bz2", bz2.compress(body.format(2, "bzip2").encode()))
    put(tmp_path / "t/c.zst", pa.compress(body.format(3, "zstd").encode(), "zstd", asbytes=True))
    put(tmp_path / "t/d.txt", body.format(4, "plain"))
    t = table("t", tmp_path / "t", [("id", "int"), ("name", "string")],
              text_format(**{"field.delim": "|"}), **{"skip.header.line.count": "1"})  # fmt: skip
    sql = 'SELECT * FROM "awsdatacatalog"."db"."t" ORDER BY id'
    assert rows(engine, sql, t) == [(1, "gzip"), (2, "bzip2"), (3, "zstd"), (4, "plain")]


def test_a_codec_not_read_is_refused_naming_the_file(engine: DuckDbEngine, tmp_path: Path) -> None:
    lz4 = put(tmp_path / "t/part-0.lz4", b"\x00\x01")
    t = table("t", tmp_path / "t", [("id", "int")], text_format())
    with pytest.raises(QueryFailed, match="LZ4") as failure:
        run(engine, 'SELECT * FROM "awsdatacatalog"."db"."t"', t)
    assert str(lz4) in str(failure.value)


def test_open_csv_quotes_and_declared_types(engine: DuckDbEngine, tmp_path: Path) -> None:
    put(tmp_path / "t/a.csv", 'province,country,n\n"Bonaire, Sint Eustatius and Saba",'
        'Netherlands,12\n"",Chile,"30"\n"say ""hi""",Peru,\n')  # fmt: skip
    t = table("t", tmp_path / "t", [("province", "string"), ("country", "string"),
              ("n", "bigint")], CSV, **{"skip.header.line.count": "1"})  # fmt: skip
    sql = 'SELECT province, country FROM "awsdatacatalog"."db"."t"'
    assert rows(engine, sql, t) == [
        ("Bonaire, Sint Eustatius and Saba", "Netherlands"),
        ("", "Chile"),
        ('say "hi"', "Peru"),
    ]
    # Athena's OpenCSVSerDe cannot read an empty field as a number: the query fails.
    with pytest.raises(QueryFailed) as failure:
        run(engine, 'SELECT sum(n) FROM "awsdatacatalog"."db"."t"', t)
    message = str(failure.value)
    assert "HIVE_BAD_DATA" in message and "column n" in message and "line 4" in message
    assert str(tmp_path / "t/a.csv") in message
    lenient = table("t", tmp_path / "t", [("province", "string"), ("country", "string"),
                    ("n", "bigint")], CSV, **{"skip.header.line.count": "1",
                    "use.null.for.invalid.data": "true"})  # fmt: skip
    sql = 'SELECT country, n FROM "awsdatacatalog"."db"."t"'
    assert rows(engine, sql, lenient) == [("Netherlands", 12), ("Chile", 30), ("Peru", None)]


def test_json_keys_without_case_and_nested_values(engine: DuckDbEngine, tmp_path: Path) -> None:
    lines = [
        {"ID": 1, "Name": "a", "tags": ["x", "y"], "geo": {"Lat": 1.5, "lon": 2}},
        {"id": "2", "name": None, "extra": True},
    ]
    put(tmp_path / "t/a.json", "\n".join(json.dumps(x) for x in lines) + "\n")
    columns = [("id", "bigint"), ("name", "string"), ("tags", "array<string>"),
               ("geo", "struct<lat:double,lon:double>")]  # fmt: skip
    for serde in (formats.JSON, OPENX):
        t = table("t", tmp_path / "t", columns, serde)
        assert rows(engine, 'SELECT * FROM "awsdatacatalog"."db"."t" ORDER BY id', t) == [
            (1, "a", ["x", "y"], {"lat": 1.5, "lon": 2.0}),
            (2, None, None, None),
        ]


def test_malformed_json_fails_naming_file_and_line_unless_ignored(
    engine: DuckDbEngine, tmp_path: Path
) -> None:
    bad = put(tmp_path / "t/a.json", '{"id": 1}\n{"id": 2,\n{"id": 3}\n')
    with pytest.raises(QueryFailed) as failure:
        run(engine, 'SELECT * FROM "awsdatacatalog"."db"."t"',
            table("t", tmp_path / "t", [("id", "int")], formats.JSON))  # fmt: skip
    assert f"{bad} line 2" in str(failure.value)
    ignoring = TableFormat(formats.TEXT_INPUT, formats.TEXT_OUTPUT, formats.OPENX_JSON_SERDE,
                           {"ignore.malformed.json": "true"})  # fmt: skip
    t = table("t", tmp_path / "t", [("id", "int")], ignoring)
    assert rows(engine, 'SELECT id FROM "awsdatacatalog"."db"."t"', t) == [(1,), (None,), (3,)]


def test_a_json_value_of_the_wrong_type_names_file_line_and_column(
    engine: DuckDbEngine, tmp_path: Path
) -> None:
    bad = put(tmp_path / "t/a.json", '{"id": 1}\n{"id": "two"}\n')
    with pytest.raises(QueryFailed) as failure:
        run(engine, 'SELECT * FROM "awsdatacatalog"."db"."t"',
            table("t", tmp_path / "t", [("id", "int")], formats.JSON))  # fmt: skip
    assert f"{bad} line 2: column id" in str(failure.value)


def test_orc_files(engine: DuckDbEngine, tmp_path: Path) -> None:
    (tmp_path / "t").mkdir()
    orc.write_table(pa.table({"id": [1, 2], "Name": ["a", "b"]}), tmp_path / "t/part-0.orc")
    t = table("t", tmp_path / "t", [("id", "bigint"), ("name", "string")], formats.ORC)
    assert rows(engine, 'SELECT * FROM "awsdatacatalog"."db"."t" ORDER BY id', t) == [
        (1, "a"),
        (2, "b"),
    ]


def test_a_file_that_does_not_match_the_schema_names_file_and_column(
    engine: DuckDbEngine, tmp_path: Path
) -> None:
    (tmp_path / "t").mkdir()
    pq.write_table(pa.table({"id": [1], "n": [5]}), tmp_path / "t/good.parquet")
    pq.write_table(pa.table({"id": [2], "n": ["five"]}), tmp_path / "t/bad.parquet")
    t = table("t", tmp_path / "t", [("id", "bigint"), ("n", "bigint")])
    with pytest.raises(QueryFailed) as failure:
        run(engine, 'SELECT * FROM "awsdatacatalog"."db"."t"', t)
    assert "column n" in str(failure.value)
    assert str(tmp_path / "t/bad.parquet") in str(failure.value)


@pytest.mark.parametrize("kind", ["parquet", "text"])
def test_partitions_are_the_metastores(engine: DuckDbEngine, tmp_path: Path, kind: str) -> None:
    """A partition outside the table's directory is read; a directory not registered is not."""

    def write(directory: Path, ids: list[int]) -> int:
        directory.mkdir(parents=True)
        if kind == "parquet":
            pq.write_table(pa.table({"id": ids}), directory / "part-0.parquet")
            return (directory / "part-0.parquet").stat().st_size
        return put(directory / "part-0", "".join(f"{i}\n" for i in ids)).stat().st_size

    inside = write(tmp_path / "t/year=2020", [1, 2])
    outside = write(tmp_path / "elsewhere/y21", [3])
    write(tmp_path / "t/year=2022", [99])  # on disk, but not a partition of the table
    partitions = [
        PartitionInfo(["2020"], f"file:{tmp_path}/t/year=2020"),
        PartitionInfo(["2021"], f"file:{tmp_path}/elsewhere/y21"),
    ]
    t = table("t", tmp_path / "t", [("id", "bigint")],
              formats.PARQUET if kind == "parquet" else text_format(),
              keys=[("year", "int")], partitions=partitions)  # fmt: skip
    sql = 'SELECT year, id FROM "awsdatacatalog"."db"."t" ORDER BY id'
    assert rows(engine, sql, t) == [(2020, 1), (2020, 2), (2021, 3)]
    one = run(engine, 'SELECT count(*) FROM "awsdatacatalog"."db"."t" WHERE year = 2021', t)
    assert [r for b in one.batches for r in b.to_pylist()] == [{"count_star()": 1}]
    assert one.bytes_scanned == outside
    assert run(engine, sql, t).bytes_scanned == inside + outside


def test_a_text_serde_over_files_that_are_not_text_is_refused(
    engine: DuckDbEngine, tmp_path: Path
) -> None:
    put(tmp_path / "t/part-0", b"SEQ\x06binary")
    sequence = TableFormat("org.apache.hadoop.mapred.SequenceFileInputFormat",
                           formats.TEXT_OUTPUT, formats.LAZY_SIMPLE_SERDE)  # fmt: skip
    with pytest.raises(QueryFailed, match="SequenceFileInputFormat"):
        run(engine, 'SELECT * FROM "awsdatacatalog"."db"."t"',
            table("t", tmp_path / "t", [("id", "int")], sequence))  # fmt: skip


def test_csv_partitions_on_s3(s3_endpoint: str) -> None:
    import os

    import boto3

    from lakeward.storage.arrow import S3Options

    os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
    options = S3Options(s3_endpoint, "us-east-1", "testing", "testing")
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")  # fmt: skip
    client.create_bucket(Bucket="raw")
    first = gzip.compress(b'name,n\n"Bonaire, Sint Eustatius and Saba",1\n')
    second = b'name,n\n"US",2\n'
    client.put_object(Bucket="raw", Key="t/day=1/a.csv.gz", Body=first)
    client.put_object(Bucket="raw", Key="moved/d2/b.csv", Body=second)
    client.put_object(Bucket="raw", Key="t/day=3/c.csv", Body=b'name,n\n"stray",3\n')
    t = ResolvedTable(
        TableRef("awsdatacatalog", "db", "t"),
        "s3://raw/t/",
        [Column("name", "string"), Column("n", "int")],
        [Column("day", "int")],
        CSV,
        {"skip.header.line.count": "1"},
        [PartitionInfo(["1"], "s3a://raw/t/day=1"), PartitionInfo(["2"], "s3://raw/moved/d2/")],
    )
    engine = DuckDbEngine(options)
    try:
        sql = 'SELECT day, name, n FROM "awsdatacatalog"."db"."t" ORDER BY day'
        assert rows(engine, sql, t) == [(1, "Bonaire, Sint Eustatius and Saba", 1), (2, "US", 2)]
        one = run(engine, 'SELECT name FROM "awsdatacatalog"."db"."t" WHERE day = 2', t)
        assert [r for b in one.batches for r in b.to_pylist()] == [{"name": "US"}]
        assert one.bytes_scanned == len(second)
        # A field that does not parse names the object as users name it.
        client.put_object(Bucket="raw", Key="moved/d2/c.csv", Body=b'name,n\n"x",many\n')
        with pytest.raises(QueryFailed, match="s3://raw/moved/d2/c.csv line 2"):
            run(engine, 'SELECT sum(n) FROM "awsdatacatalog"."db"."t"', t)
    finally:
        engine.close()


def test_hive_reads_a_numeric_delimiter_as_a_byte(engine: DuckDbEngine, tmp_path: Path) -> None:
    # field.delim '9' is byte 9 (a tab) in Hive and Athena, not the character '9'.
    put(tmp_path / "t/a.tsv", "19\t29\n")
    t = table("t", tmp_path / "t", [("a", "string"), ("b", "string")],
              text_format(**{"field.delim": "9"}))  # fmt: skip
    assert rows(engine, 'SELECT * FROM "awsdatacatalog"."db"."t"', t) == [("19", "29")]


def test_text_in_another_encoding(engine: DuckDbEngine, tmp_path: Path) -> None:
    put(tmp_path / "t/a.txt", "Curaçao,1\n".encode("latin-1"))
    latin = text_format(**{"field.delim": ",", "serialization.encoding": "ISO-8859-1"})
    t = table("t", tmp_path / "t", [("a", "string"), ("b", "int")], latin)
    assert rows(engine, 'SELECT * FROM "awsdatacatalog"."db"."t"', t) == [("Curaçao", 1)]


def test_a_serde_property_not_honoured_is_refused(engine: DuckDbEngine, tmp_path: Path) -> None:
    put(tmp_path / "t/a.txt", "01/02/2020\n")
    t = table("t", tmp_path / "t", [("at", "timestamp")],
              text_format(**{"timestamp.formats": "MM/dd/yyyy"}))  # fmt: skip
    with pytest.raises(QueryFailed, match="timestamp.formats"):
        run(engine, 'SELECT * FROM "awsdatacatalog"."db"."t"', t)


def test_files_are_listed_under_the_tables_shared_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from contextlib import contextmanager

    from lakeward.config import load_settings
    from lakeward.query.engines import duckdb as duckdb_engine

    taken: list[tuple[str, bool]] = []

    @contextmanager
    def recording(settings: object, location: str, *, shared: bool) -> Iterator[None]:
        taken.append((location, shared))
        yield

    monkeypatch.setattr(duckdb_engine, "table_lock", recording)
    put(tmp_path / "t/a.txt", "1\n")
    t = table("t", tmp_path / "t", [("id", "int")], text_format())
    engine = DuckDbEngine(load_settings(data_dir=tmp_path / "state", env={}))
    try:
        assert rows(engine, 'SELECT * FROM "awsdatacatalog"."db"."t"', t) == [(1,)]
    finally:
        engine.close()
    assert taken == [(f"file:{tmp_path}/t", True)]


def test_arrays_and_structs_in_hive_text(engine: DuckDbEngine, tmp_path: Path) -> None:
    # Items and fields split by collection.delim ('|' here; Hive's default is ^B).
    put(tmp_path / "t/a.txt", "1,a|b|\\N,x|2\n2,,y\n3,\\N,\\N\n4,7|x|9,z|zz|extra\n")
    t = table("t", tmp_path / "t", [("id", "int"), ("tags", "array<string>"),
              ("pair", "struct<s:string,n:int>")],
              text_format(**{"field.delim": ",", "collection.delim": "|"}))  # fmt: skip
    assert rows(engine, 'SELECT * FROM "awsdatacatalog"."db"."t" ORDER BY id', t) == [
        (1, ["a", "b", None], {"s": "x", "n": 2}),
        (2, [], {"s": "y", "n": None}),
        (3, None, None),
        (4, ["7", "x", "9"], {"s": "z", "n": None}),
    ]
    ints = table("t", tmp_path / "t", [("id", "int"), ("tags", "array<int>")],
                 text_format(**{"field.delim": ",", "collection.delim": "|"}))  # fmt: skip
    sql = 'SELECT tags FROM "awsdatacatalog"."db"."t" WHERE id = 4'
    assert rows(engine, sql, ints) == [([7, None, 9],)]
    nested = table("t", tmp_path / "t", [("id", "int"), ("tags", "array<array<int>>")],
                   text_format(**{"field.delim": ","}))  # fmt: skip
    with pytest.raises(QueryFailed, match="column tags is array<array<int>>"):
        run(engine, 'SELECT * FROM "awsdatacatalog"."db"."t"', nested)


def test_maps_and_binary_in_hive_text(engine: DuckDbEngine, tmp_path: Path) -> None:
    # A map's entries split by collection.delim, key and value by mapkey.delim (^B and ^C by
    # default); a binary field is base64 (Hive's LazyBinary decodes it), else its own bytes.
    put(tmp_path / "t/a.txt", "1\t1\x032\x023\x034\tMTIz\n2\t\tnot base64!\n3\t\\N\t\\N\n")
    t = table("t", tmp_path / "t", [("id", "int"), ("m", "map<int,int>"), ("b", "binary")],
              text_format(**{"field.delim": "\t"}))  # fmt: skip
    assert rows(engine, 'SELECT * FROM "awsdatacatalog"."db"."t" ORDER BY id', t) == [
        (1, [(1, 2), (3, 4)], b"123"),  # a map, as Arrow lists its entries
        (2, [], b"not base64!"),
        (3, None, None),
    ]
    strings = table("t", tmp_path / "t", [("id", "int"), ("m", "map<string,bigint>")],
                    text_format(**{"field.delim": "\t"}))  # fmt: skip
    sql = 'SELECT m[\'3\'] FROM "awsdatacatalog"."db"."t" WHERE id = 1'
    assert rows(engine, sql, strings) == [(4,)]


def test_text_partitions_a_query_prunes_are_not_read(engine: DuckDbEngine, tmp_path: Path) -> None:
    put(tmp_path / "t/day=1/a.txt", "1\n")
    put(tmp_path / "t/day=2/b.txt", "2\n")
    put(tmp_path / "t/day=2/c.lz4", b"\x04\x22\x4d\x18")  # fails the query if it is read
    partitions = [PartitionInfo([d], f"file:{tmp_path}/t/day={d}") for d in ("1", "2")]
    t = table("t", tmp_path / "t", [("id", "int")], text_format(), keys=[("day", "int")],
              partitions=partitions)  # fmt: skip
    assert rows(engine, 'SELECT id FROM "awsdatacatalog"."db"."t" WHERE day = 1', t) == [(1,)]
    with pytest.raises(QueryFailed, match="c.lz4"):
        run(engine, 'SELECT id FROM "awsdatacatalog"."db"."t" WHERE day = 2', t)
    # Two scans of the table: the rows of both partitions read, each where it is asked for.
    both = (
        'SELECT a.id AS x, b.id AS y FROM "awsdatacatalog"."db"."t" a, "awsdatacatalog"."db"."t" b '
        "WHERE a.day = 1 AND b.day = 1 AND a.id = b.id"
    )
    assert rows(engine, both, t) == [(1, 1)]
    plan = rows(engine, 'EXPLAIN SELECT id FROM "awsdatacatalog"."db"."t" WHERE day = 1', t)
    assert plan and all(isinstance(line, str) for (line,) in plan)


def test_tables_spark_reads_otherwise_are_named(tmp_path: Path) -> None:
    from lakeward.query.engines.spark import spark_refusal

    header = {"skip.header.line.count": "1"}
    csv_typed = table("t", tmp_path, [("a", "string"), ("n", "bigint")], CSV)
    csv_text = table("t", tmp_path, [("a", "string")], CSV)
    assert "as a string" in str(spark_refusal(csv_typed))
    assert spark_refusal(csv_text) is None
    assert "skip.header.line.count" in str(
        spark_refusal(table("t", tmp_path, [("a", "string")], text_format(), **header))
    )
    assert "JsonSerDe" in str(spark_refusal(table("t", tmp_path, [("a", "int")], formats.JSON)))
    assert spark_refusal(table("t", tmp_path, [("a", "int")], formats.ORC, **header)) is None


def test_hadoop_snappy_and_deflate_files(engine: DuckDbEngine, tmp_path: Path) -> None:
    import zlib

    def hadoop_snappy(data: bytes, chunk: int) -> bytes:
        # Hadoop's BlockCompressorStream: a block's length, then (length, snappy) chunks.
        out = len(data).to_bytes(4, "big")
        for start in range(0, len(data), chunk):
            compressed = pa.compress(data[start : start + chunk], "snappy", asbytes=True)
            out += len(compressed).to_bytes(4, "big") + compressed
        return out

    lines = "".join(f"{i}\x01row {i}\n" for i in range(1000)).encode()
    put(tmp_path / "t/part-0.snappy", hadoop_snappy(lines, 4096))
    put(tmp_path / "t/part-1.deflate", zlib.compress(b"1000\x01deflated\n"))
    t = table("t", tmp_path / "t", [("id", "int"), ("name", "string")], text_format())
    sql = 'SELECT count(*), max(id), max_by(name, id) FROM "awsdatacatalog"."db"."t"'
    assert rows(engine, sql, t) == [(1001, 1000, "deflated")]


def test_footer_lines_and_hive_json_ignoring_no_malformed_line(
    engine: DuckDbEngine, tmp_path: Path
) -> None:
    put(tmp_path / "t/a.txt", "header\n1\n2\ntotal: 2\n")
    footed = table("t", tmp_path / "t", [("id", "int")], text_format(),
                   **{"skip.header.line.count": "1", "skip.footer.line.count": "1"})  # fmt: skip
    assert rows(engine, 'SELECT id FROM "awsdatacatalog"."db"."t"', footed) == [(1,), (2,)]
    # ignore.malformed.json is OpenX's: Hive's JsonSerDe fails on the line as Athena does.
    bad = put(tmp_path / "j/a.json", '{"id": 1}\nnot json\n')
    hive = TableFormat(formats.TEXT_INPUT, formats.TEXT_OUTPUT, formats.HIVE_JSON_SERDE,
                       {"ignore.malformed.json": "true"})  # fmt: skip
    with pytest.raises(QueryFailed, match=f"{bad} line 2"):
        run(engine, 'SELECT * FROM "awsdatacatalog"."db"."j"',
            table("j", tmp_path / "j", [("id", "int")], hive))  # fmt: skip


def test_a_text_file_is_parsed_once_per_version(
    engine: DuckDbEngine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lakeward.query.engines.duckdb import readers

    parsed: list[str] = []
    read_file = readers._read_file

    def counting(filesystem: object, path: str, *args: object) -> object:
        parsed.append(path)
        return read_file(filesystem, path, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(readers, "_read_file", counting)
    data = put(tmp_path / "t/a.txt", "1\n2\n")
    t = table("t", tmp_path / "t", [("id", "int")], text_format())
    sql = 'SELECT sum(id) FROM "awsdatacatalog"."db"."t"'
    assert rows(engine, sql, t) == [(3,)]
    assert rows(engine, sql, t) == [(3,)]
    assert parsed == [str(data)]
    put(data, "1\n2\n30\n")  # rewritten: read anew
    assert rows(engine, sql, t) == [(33,)]
    assert parsed == [str(data), str(data)]
