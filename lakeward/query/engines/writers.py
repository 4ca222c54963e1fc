"""A SELECT's rows written as a table's files: Parquet, ORC, JSON or Hive's delimited text.

The batches of an ``EngineResult`` (already in the types Athena reports) go to one file
per partition, laid out as Hive lays a partitioned table out (``k1=v1/k2=v2/``, values
escaped as Hive's ``FileUtils.escapePathName`` does, NULL as
``__HIVE_DEFAULT_PARTITION__``), the partition columns left out of the files. Writers are
Arrow's (Parquet, ORC, compressed streams); a JSON line is DuckDB's ``to_json`` of the row,
which writes dates, timestamps, decimals and nested values the way Hive's JsonSerDe reads
them; a text line is each value's string form joined by the field delimiter, NULL as
``\\N``, as LazySimpleSerDe writes them.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.orc as orc
import pyarrow.parquet as pq

from lakeward.errors import InvalidRequest, QueryFailed
from lakeward.query.engines.base import (
    Compression,
    EngineResult,
    WriteFormat,
    WriteResult,
    WriteTarget,
    WrittenFile,
)
from lakeward.query.formats import HIVE_DEFAULT_PARTITION
from lakeward.query.model import ColumnInfo
from lakeward.query.types import hive_type_of_arrow

TEXT_NULL = "\\N"  # LazySimpleSerDe's serialization.null.format by default

COMPRESSIONS: dict[WriteFormat, tuple[Compression, tuple[Compression, ...]]] = {
    # format: (Athena's default for Hive tables, what Athena writes for it)
    "parquet": ("gzip", ("gzip", "snappy", "zstd", "none")),
    "orc": ("zlib", ("zlib", "snappy", "zstd", "lz4", "none")),
    "json": ("gzip", ("gzip", "bzip2", "zstd", "none")),
    "text": ("gzip", ("gzip", "bzip2", "zstd", "none")),
}
_STREAM_CODECS = {"gzip": ("gzip", ".gz"), "bzip2": ("bz2", ".bz2"), "zstd": ("zstd", ".zst")}
_ORC_CODECS = {
    "none": "UNCOMPRESSED",
    "zlib": "ZLIB",
    "snappy": "SNAPPY",
    "zstd": "ZSTD",
    "lz4": "LZ4",
}
# Athena types a Hive table cannot hold: Athena refuses a CTAS of them.
_NOT_STORABLE = ("time", "interval", "timestamp with time zone", "unknown", "json")
# Hive's FileUtils.escapePathName: these and control characters become %XX.
_ESCAPED = frozenset("\"#%'*/:=?\\\x7f{[]^")


def compression_of(format: WriteFormat, name: str | None) -> Compression:
    """A ``write_compression`` value for ``format``; Athena's default when None."""
    default, allowed = COMPRESSIONS[format]
    if name is None:
        return default
    wanted = name.lower()
    if wanted not in allowed:
        known = ", ".join(a.upper() for a in allowed)
        raise InvalidRequest(
            f"write_compression {name.upper()} is not supported for {format.upper()} "
            f"(supported: {known})"
        )
    return wanted


def partition_directory(keys: tuple[str, ...], values: tuple[str | None, ...]) -> str:
    """``k1=v1/k2=v2`` as Hive names a partition's directory."""
    return "/".join(
        f"{key}={HIVE_DEFAULT_PARTITION if value is None else escape_path(value)}"
        for key, value in zip(keys, values, strict=True)
    )


def escape_path(value: str) -> str:
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED or ord(c) < 0x20 else c for c in value)


def hive_columns(schema: pa.Schema | None, columns: list[ColumnInfo]) -> list[tuple[str, str]]:
    """(name, Hive type) of each column written; refuses types a Hive table cannot hold.

    From the Arrow schema of the rows; an engine that writes its files itself and gives
    no schema is typed by the Athena types of its columns (scalar types only).
    """
    found = []
    fields = list(schema) if schema is not None else [None] * len(columns)
    for arrow_field, column in zip(fields, columns, strict=True):
        if column.type in _NOT_STORABLE or column.type.startswith("interval"):
            raise QueryFailed(
                f"column {column.name}: a table cannot hold values of type {column.type}"
            )
        try:
            if arrow_field is not None:
                found.append((column.name, hive_type_of_arrow(arrow_field.type, column.name)))
            else:
                found.append((column.name, _hive_type_of_athena(column)))
        except ValueError as exc:
            raise QueryFailed(str(exc)) from None
    return found


_ATHENA_TO_HIVE = {"varchar": "string", "char": "string", "integer": "int", "real": "float"}
_ATHENA_TO_HIVE |= {"varbinary": "binary"}
_SAME_IN_HIVE = ("tinyint", "smallint", "bigint", "float", "double", "boolean", "date")


def _hive_type_of_athena(column: ColumnInfo) -> str:
    if column.type == "decimal":
        return f"decimal({column.precision},{column.scale})"
    if column.type in _SAME_IN_HIVE or column.type == "timestamp":
        return column.type
    if column.type in _ATHENA_TO_HIVE:
        return _ATHENA_TO_HIVE[column.type]
    raise ValueError(
        f"column {column.name}: the engine did not tell the element types of this "
        f"{column.type} column"
    )


def write_result(result: EngineResult, target: WriteTarget) -> WriteResult:
    """Write ``result``'s rows as ``target`` says; the files, in the order written."""
    columns = result.columns
    if target.columns is not None:
        if len(target.columns) != len(columns):
            raise QueryFailed(
                f"the query has {len(columns)} columns where {len(target.columns)} are written"
            )
        renamed = zip(columns, target.columns, strict=True)
        columns = [dataclasses.replace(c, name=n) for c, n in renamed]
    names = [c.name for c in columns]
    missing = [k for k in target.partitioned_by if k not in names]
    if missing:
        raise QueryFailed(f"partition column {missing[0]} is not a column of the query")
    if len(target.partitioned_by) >= len(names):
        raise QueryFailed("a table needs at least one column besides its partition columns")
    files: dict[tuple[str | None, ...], _File] = {}
    rows = 0
    schema = None
    if result.schema is not None:
        schema = pa.schema(f.with_name(n) for f, n in zip(result.schema, names, strict=True))
    try:
        for batch in result.batches:
            batch = batch.rename_columns(names)
            if schema is None:
                schema = batch.schema
            if not batch.num_rows:
                continue
            hive_columns(batch.schema, columns)  # refused before a file is written
            for values, part in _split(batch, target.partitioned_by):
                file = files.get(values)
                if file is None:
                    file = files[values] = _File.open(target, values, len(files))
                file.write(part.drop_columns(list(target.partitioned_by)))
            rows += batch.num_rows
    finally:
        for file in files.values():
            file.close()
    if schema is not None:
        hive_columns(schema, columns)
    written = [f.written() for f in files.values()]
    return WriteResult(columns, written, rows, result.bytes_scanned, schema=schema)


def _split(
    batch: pa.RecordBatch, keys: tuple[str, ...]
) -> list[tuple[tuple[str | None, ...], pa.RecordBatch]]:
    """The batch's rows by their partition values (as strings; None for NULL)."""
    if not keys:
        return [((), batch)]
    table = pa.Table.from_batches([batch])
    texts = [_partition_texts(table[k], k) for k in keys]
    indexed = pa.table({**{f"k{i}": t for i, t in enumerate(texts)}, "row": range(len(table))})
    groups = indexed.group_by([f"k{i}" for i in range(len(keys))], use_threads=False).aggregate(
        [("row", "list")]
    )
    found = []
    for group in groups.to_pylist():
        values = tuple(group[f"k{i}"] for i in range(len(keys)))
        found.append((values, batch.take(pa.array(group["row_list"]))))
    return found


def _partition_texts(values: pa.ChunkedArray, key: str) -> pa.ChunkedArray:
    kind = values.type
    if pa.types.is_nested(kind) or pa.types.is_floating(kind) or pa.types.is_binary(kind):
        raise QueryFailed(f"partition column {key} cannot be of type {kind}")
    return pc.cast(values, pa.string())


@dataclass
class _File:
    """One file being written: a partition's (or the whole table's) rows of one write."""

    path: str
    relative: str
    partition: tuple[str | None, ...]
    format: WriteFormat
    compression: Compression
    delimiter: str
    null_format: str = TEXT_NULL
    rows: int = 0
    writer: Any = None
    stream: Any = None
    duck: Any = field(default=None, repr=False)

    @classmethod
    def open(cls, target: WriteTarget, values: tuple[str | None, ...], number: int) -> _File:
        extension = {"parquet": ".parquet", "orc": ".orc", "json": ".json", "text": ".txt"}
        name = f"{target.prefix}{number:05d}{extension[target.format]}"
        if target.format in ("json", "text") and target.compression != "none":
            name += _STREAM_CODECS[target.compression][1]
        directory = partition_directory(target.partitioned_by, values)
        relative = f"{directory}/{name}" if directory else name
        path = os.path.join(target.directory, relative)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return cls(
            path,
            relative,
            values,
            target.format,
            target.compression,
            target.field_delimiter,
            target.null_format,
        )

    def write(self, batch: pa.RecordBatch) -> None:
        if self.format == "parquet":
            if self.writer is None:
                codec = "NONE" if self.compression == "none" else self.compression.upper()
                self.writer = pq.ParquetWriter(self.path, batch.schema, compression=codec)
            self.writer.write_batch(batch)
        elif self.format == "orc":
            if self.writer is None:
                self.writer = orc.ORCWriter(self.path, compression=_ORC_CODECS[self.compression])
            self.writer.write(pa.Table.from_batches([batch]))
        else:
            if self.stream is None:
                stream_codec: str | None = None
                if self.compression != "none":
                    stream_codec = _STREAM_CODECS[self.compression][0]
                self.stream = pa.output_stream(self.path, compression=stream_codec)
            if self.format == "json":
                lines = self._json(batch)
            else:
                lines = _text(batch, self.delimiter, self.null_format)
            self.stream.write(("\n".join(lines.to_pylist()) + "\n").encode())
        self.rows += batch.num_rows

    def _json(self, batch: pa.RecordBatch) -> pa.Array:
        if self.duck is None:  # reads only the batch registered on it
            self.duck = duckdb.connect(config={"enable_external_access": False})
        self.duck.register("batch", batch)
        try:
            lines = self.duck.sql("SELECT to_json(batch)::VARCHAR AS line FROM batch")
            return lines.to_arrow_table()["line"].combine_chunks()
        finally:
            self.duck.unregister("batch")

    def close(self) -> None:
        for closing in (self.writer, self.stream, self.duck):
            if closing is not None:
                closing.close()
        self.writer = self.stream = self.duck = None

    def written(self) -> WrittenFile:
        return WrittenFile(self.relative, os.path.getsize(self.path), self.rows, self.partition)


def _text(batch: pa.RecordBatch, delimiter: str, null_format: str) -> pa.Array:
    texts = []
    for name, values in zip(batch.schema.names, batch.columns, strict=True):
        if pa.types.is_nested(values.type) or pa.types.is_binary(values.type):
            raise QueryFailed(
                f"column {name}: TEXTFILE tables written by lakeward hold no {values.type} "
                "values; use PARQUET, ORC or JSON"
            )
        texts.append(pc.fill_null(pc.cast(values, pa.string()), null_format))
    if len(texts) == 1:
        return texts[0]
    joined: pa.Array = pc.binary_join_element_wise(*texts, delimiter)
    return joined
