"""Spark's side of CTAS, INSERT INTO and UNLOAD: a SELECT's rows written by Spark itself.

The DuckDB engine's rows pass through lakeward's Arrow writers; Spark's need not pass
through this process at all. Spark's DataFrame writer makes the files in the statement's
staging directory (``WriteTarget.directory``, which no reader lists), and the statement
publishes them as it publishes the DuckDB engine's (imported by the Spark engine only:
it needs PySpark). What Spark writes is what the Arrow
writers write for the same statement, so that a table is the same whichever engine
made it:

* the same physical types: timestamps are Hive's, zone-less (Spark's Hive-table
  timestamps carry the session's zone, UTC, and would become Parquet's INT96 or ORC's
  instants), and the files' schema is the one the table is declared with;
* text as Hive's LazySimpleSerDe writes it: fields joined by the delimiter, NULL as
  ``\\N``, no quoting, nested values with Hive's separators ^B, ^C, ...;
* Hive's partition directories ``k=v`` (escaped; NULL in ``__HIVE_DEFAULT_PARTITION__``),
  one file per partition value: the rows are shuffled by the partition columns first,
  as a Spark job writing a partitioned table usually does, rather than each task
  leaving a small file in every partition it met;
* file names starting with the target's prefix, and no file for a SELECT without rows.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

import pyarrow as pa
import pyarrow.orc as orc
import pyarrow.parquet as pq
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    MapType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from lakeward.errors import InvalidRequest, QueryFailed
from lakeward.metastore.tables import partition_values
from lakeward.query.engines.base import WriteResult, WriteTarget, WrittenFile
from lakeward.query.formats import HIVE_DEFAULT_PARTITION
from lakeward.query.model import ColumnInfo
from lakeward.query.types import athena_type
from lakeward.storage.paths import local_path

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession


# Spark's names of the codecs a write_compression names, per format; None: Spark
# cannot write it (Hadoop's zstd codec needs its native library), lakeward compresses
# the files Spark wrote instead.
_CODECS: dict[str, dict[str, str | None]] = {
    "parquet": {
        "none": "none",
        "snappy": "snappy",
        "gzip": "gzip",
        "zstd": "zstd",
        "lz4": "lz4raw",
    },
    "orc": {
        "none": "none",
        "snappy": "snappy",
        "zlib": "zlib",
        "gzip": "zlib",
        "zstd": "zstd",
        "lz4": "lz4",
    },
    "text": {"none": "none", "gzip": "gzip", "bzip2": "bzip2", "zstd": None},
    "json": {"none": "none", "gzip": "gzip", "bzip2": "bzip2", "zstd": None},
}
_EXTENSIONS = {"zstd": ".zst"}
# Spark's own ORC writer, whatever spark.sql.orc.impl says (the engine reads ORC with
# Hive's: engines/spark/): it writes zstd, and Hive's plain timestamp.
_FORMATS = {
    "parquet": "parquet",
    "orc": "org.apache.spark.sql.execution.datasources.orc.OrcFileFormat",
    "json": "json",
    "text": "text",
}

# What Spark's file committer leaves beside the data: _SUCCESS, and the checksum
# files of Hadoop's local file system (.part-....crc).
_NOT_DATA = re.compile(r"^[._]")


def write(session: SparkSession, sql: str, target: WriteTarget) -> WriteResult:
    """Run the SELECT ``sql`` on ``session`` and write its rows as ``target`` says."""
    codec = _codec(target)
    frame = session.sql(sql)
    names = list(target.columns) if target.columns is not None else frame.columns
    if len(names) != len(frame.columns):
        raise QueryFailed(
            f"the query has {len(frame.columns)} columns where {len(names)} are written"
        )
    missing = [p for p in target.partitioned_by if p not in names]
    if missing:
        raise QueryFailed(f"partition column {missing[0]} is not a column of the query")
    frame = _zone_less(frame.toDF(*names))
    columns = [ColumnInfo(name=f.name, **athena_type(f.dataType.simpleString()))
               for f in frame.schema.fields]  # fmt: skip
    # What the table is declared with follows from it, as from the Arrow writers' schema.
    schema = to_arrow_schema(frame.schema)
    if target.partitioned_by:
        frame = frame.repartition(*(F.col(_quoted(p)) for p in target.partitioned_by))
    if target.format == "orc":
        frame = _zoned(frame)
    elif target.format == "text":
        frame = _as_text(frame, target)
    elif target.format == "json":
        frame = _timestamps_as_text(frame)
    writer = frame.write.mode("append").partitionBy(*target.partitioned_by)
    # Always given: Spark's default (snappy for Parquet and ORC) is not the statement's.
    writer = writer.option("compression", codec or "none")
    directory = Path(target.directory)
    # By its s3:// name where it is in the lake (a cluster's executors write there too).
    writer.format(_FORMATS[target.format]).save(target.name or directory.as_uri())
    files = _collect(session, directory, target, "zstd" if codec is None else None)
    return WriteResult(columns, files, sum(f.rows for f in files), schema=schema)


def _codec(target: WriteTarget) -> str | None:
    codecs = _CODECS.get(target.format)
    if codecs is None:
        raise InvalidRequest(f"format {target.format.upper()} is not written by the Spark engine")
    if target.compression not in codecs:
        known = ", ".join(c.upper() for c in codecs)
        raise InvalidRequest(
            f"write_compression {target.compression.upper()} is not supported for "
            f"{target.format.upper()} (supported: {known})"
        )
    return codecs[target.compression]


def _zone_less(frame: DataFrame) -> DataFrame:
    """A Hive table's timestamps (Spark's, zoned in the session's zone, UTC) as Hive's
    zone-less ones: what Parquet files hold (else Spark would write INT96) and what the
    table is declared with."""
    return _cast_all(frame, TimestampType, "timestamp_ntz")


def _zoned(frame: DataFrame) -> DataFrame:
    """For ORC, zone-less timestamps as Spark's zoned ones in the UTC session: Spark
    writes those as ORC's plain timestamp, but marks its zone-less ones as its own,
    which Spark then refuses to read as a Hive table's timestamp."""
    return _cast_all(frame, TimestampNTZType, "timestamp")


def _cast_all(frame: DataFrame, kind: type[DataType], to: str) -> DataFrame:
    return frame.select(
        *(
            F.col(_quoted(f.name)).cast(to).alias(f.name)
            if isinstance(f.dataType, kind)
            else F.col(_quoted(f.name))
            for f in frame.schema.fields
        )
    )


def _timestamps_as_text(frame: DataFrame) -> DataFrame:
    """Timestamps in Hive's text for JSON (Spark's JSON writer puts a T in them)."""
    return _cast_all(frame, TimestampNTZType, "string")


def _as_text(frame: DataFrame, target: WriteTarget) -> DataFrame:
    """One string column of LazySimpleSerDe lines, beside the partition columns: NULL
    (at any depth) as the table's ``serialization.null.format``."""
    null = F.lit(target.null_format)
    values = [f for f in frame.schema.fields if f.name not in target.partitioned_by]
    line = F.concat_ws(
        target.field_delimiter,
        *(F.coalesce(_text(F.col(_quoted(f.name)), f.dataType, 1, null), null) for f in values),
    )
    return frame.select(line.alias("value"), *(F.col(_quoted(p)) for p in target.partitioned_by))


def _text(value: Column, data_type: DataType, level: int, null: Column) -> Column:
    """A value as LazySimpleSerDe writes it; nested values at ``level`` (1: a column's)
    are separated by Hive's ``level``-th separator after the field delimiter (^B, ^C...)."""

    def nested(item: Column, item_type: DataType, depth: int) -> Column:
        return F.coalesce(_text(item, item_type, depth, null), null)

    separator = _separator(level)
    if isinstance(data_type, ArrayType):
        element = data_type.elementType
        return F.concat_ws(separator, F.transform(value, lambda x: nested(x, element, level + 1)))
    if isinstance(data_type, MapType):
        key_type, value_type, inner = data_type.keyType, data_type.valueType, _separator(level + 1)
        entries = F.transform(
            F.map_entries(value),
            lambda e: F.concat(
                nested(e["key"], key_type, level + 2),
                F.lit(inner),
                nested(e["value"], value_type, level + 2),
            ),
        )
        return F.concat_ws(separator, entries)
    if isinstance(data_type, StructType):
        return F.concat_ws(
            separator,
            *(nested(value[f.name], f.dataType, level + 1) for f in data_type.fields),
        )
    if isinstance(data_type, BinaryType):
        return F.base64(value)  # as LazySimpleSerDe writes binary
    # Spark's text of the rest is Hive's: Java's for numbers, a timestamp's fraction only
    # when it has one.
    return value.cast("string")


def _separator(level: int) -> str:
    # Hive's LazySimpleSerDe: the field delimiter, then ^B, ^C, ... for each nesting level.
    if level > 7:
        raise InvalidRequest("a value nested more than 7 levels deep cannot be written as text")
    return chr(level + 1)


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _collect(
    session: SparkSession, directory: Path, target: WriteTarget, compress: str | None
) -> list[WrittenFile]:
    """The files Spark wrote, renamed to start with the target's prefix, with their rows;
    Spark's other files (_SUCCESS, checksums, empty files of an empty result) removed."""
    paths: list[Path] = []
    for folder, subdirs, names in os.walk(directory):
        for name in [*names, *subdirs]:
            if _NOT_DATA.match(name):
                _remove(Path(folder) / name)
        subdirs[:] = [d for d in subdirs if not _NOT_DATA.match(d)]
        paths.extend(Path(folder) / n for n in names if not _NOT_DATA.match(n))
    text = target.format in ("text", "json")
    counts = _line_counts(session, directory, target.name) if text else {}
    files: list[WrittenFile] = []
    for path in sorted(paths):
        rows = counts.get(path, 0) if target.format in ("text", "json") else _rows(path)
        if rows == 0:
            path.unlink()
            continue
        if compress is not None:
            path = _compressed(path, compress)
        published = path.with_name(target.prefix + path.name)
        path.rename(published)
        relative = published.relative_to(directory).as_posix()
        partition = _partition(relative, target.partitioned_by)
        files.append(WrittenFile(relative, published.stat().st_size, rows, partition))
    return files


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)  # _temporary, had a task's commit been interrupted
    else:
        path.unlink(missing_ok=True)


def _rows(path: Path) -> int:
    if path.name.endswith(".orc"):
        return int(orc.ORCFile(str(path)).nrows)
    return int(pq.read_metadata(path).num_rows)


def _line_counts(session: SparkSession, directory: Path, name: str | None) -> dict[Path, int]:
    """Rows of each text or JSON file: their lines, read back by Spark, which reads the
    codecs it wrote and splits lines as Hive's readers do. ``name``: the directory's
    s3:// name, which the executors read it by."""

    frame = (
        session.read.option("recursiveFileLookup", "true")
        .text(name or directory.as_uri())
        .groupBy(F.input_file_name().alias("file"))
        .count()
    )
    found: dict[Path, int] = {}
    for row in frame.collect():
        file = str(row["file"])
        if name is not None:
            # Hadoop names the file by an escaped URI (s3://<bucket>/<key>): its place
            # under the directory's name is its place under the directory.
            folder = urlsplit(name).path.rstrip("/") + "/"
            path: Path | None = directory / unquote(urlsplit(file).path).removeprefix(folder)
        else:
            path = local_path(file)
        if path is not None:
            found[path] = int(row["count"])
    return found


def _compressed(path: Path, codec: str) -> Path:
    """A file compressed with ``codec`` as a stream Hadoop's codec reads (zstd)."""
    target = path.with_name(path.name + _EXTENSIONS[codec])
    with (
        pa.OSFile(str(path), "rb") as source,
        pa.CompressedOutputStream(str(target), codec) as sink,
    ):
        while chunk := source.read(1 << 20):
            sink.write(chunk)
    path.unlink()
    return target


def _partition(relative: str, keys: tuple[str, ...]) -> tuple[str | None, ...]:
    """The partition values of a file from its ``k=v/`` directories (Hive's escaping)."""
    if not keys:
        return ()
    values = partition_values(relative.split("/")[: len(keys)], keys)
    if values is None:
        raise QueryFailed(f"Spark wrote {relative}, not under the partitions {', '.join(keys)}")
    return tuple(None if v == HIVE_DEFAULT_PARTITION else v for v in values)
