"""The files a row-level change rewrites, written by DuckDB's Parquet writer.

A DELETE (or an UPDATE that sets no partition column) keeps each touched file's other rows
in that file's partition: they are written as one new file beside it, with its partition
values, and no partitioning is computed. DuckDB writes them as the query of those rows
streams them, in one pass (its writer took a third of pyarrow's time, which pyiceberg uses,
on the same rows), with the table's field ids, codec and row-group size; the statistics a
manifest keeps are read back from each file's footer.

Only tables whose columns are of plain types, with no Parquet setting DuckDB's writer does
not take, are written so (``writes_directly``); the rest go through pyiceberg's writer.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from uuid import uuid4

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.io.pyarrow import (
    compute_statistics_plan,
    data_file_statistics_from_parquet_metadata,
    parquet_path_to_id_mapping,
)
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.schema import Schema, sanitize_column_names
from pyiceberg.table import Table, TableProperties
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    StringType,
    TimestampType,
)

from lakeward.iceberg.schemas import table_columns
from lakeward.query.engines.duckdb.pool import sweep_orphan_spills
from lakeward.query.types import duckdb_type_of_hive, quote_identifier, quote_string

# Iceberg's types that DuckDB writes as Iceberg's spec stores them.
_PLAIN = (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    StringType,
    TimestampType,
)
_CODECS = {"zstd", "gzip", "snappy", "lz4", "brotli", "uncompressed"}
# Parquet settings of a table that DuckDB's writer has no equal of.
_OTHER_SETTINGS = (
    TableProperties.PARQUET_PAGE_SIZE_BYTES,
    TableProperties.PARQUET_PAGE_ROW_LIMIT,
    TableProperties.PARQUET_DICT_SIZE_BYTES,
    TableProperties.PARQUET_ROW_GROUP_SIZE_BYTES,
    TableProperties.PARQUET_BLOOM_FILTER_MAX_BYTES,
)
_FILE = "__lakeward_file"  # which touched file a row comes from
_STAGING = "lakeward-rewrite-"  # the temporary directories' names: <this>-<pid>-...


def writes_directly(table: Table) -> bool:
    """Whether DuckDB's writer can write the table's files as Iceberg's spec and the table's
    settings say (one partition spec: every file's rows keep the partition they are in)."""
    properties = table.metadata.properties
    schema = table.schema()
    codec = properties.get(
        TableProperties.PARQUET_COMPRESSION, TableProperties.PARQUET_COMPRESSION_DEFAULT
    ).lower()
    level = properties.get(TableProperties.PARQUET_COMPRESSION_LEVEL)
    return (
        properties.get(TableProperties.WRITE_FILE_FORMAT, "parquet").lower() == "parquet"
        and codec in _CODECS
        and (level is None or codec == "zstd")
        and not any(key in properties for key in _OTHER_SETTINGS)
        and not any(key.startswith("write.parquet.bloom-filter") for key in properties)
        and all(isinstance(f.field_type, _PLAIN) for f in schema.fields)
        and sanitize_column_names(schema) == schema
        and len(table.metadata.partition_specs) == 1
    )


def rewritten(table: Table, rows: pa.RecordBatchReader, touched: list[DataFile]) -> list[DataFile]:
    """New data files holding ``rows`` (the table's columns, then ``"$path"``: the touched
    file each comes from), each in the partition of the file it comes from: one file for
    each touched file that keeps a row, beside it. The rows are written as they arrive."""
    schema = table.schema()
    uuid = uuid4()
    columns = ", ".join(
        f"CAST(kept.{quote_identifier(c.name)} AS {duckdb_type_of_hive(c.type)}) "
        f"AS {quote_identifier(c.name)}"
        for c in table_columns(schema)
    )
    written: list[DataFile] = []
    try:
        # Named by this process, so a later one sweeps it away if this one is killed.
        sweep_orphan_spills(Path(tempfile.gettempdir()), _STAGING)
        with tempfile.TemporaryDirectory(prefix=f"{_STAGING}{os.getpid()}-") as directory:
            staging, spill = Path(directory) / "files", Path(directory) / "spill"
            con = duckdb.connect(config={"temp_directory": str(spill)})
            try:
                con.register("kept", _numbered(rows, touched))
                con.execute(
                    f"COPY (SELECT {columns}, {_FILE} FROM kept) TO {quote_string(str(staging))} "
                    f"(FORMAT parquet, PARTITION_BY ({_FILE}), {_write_options(table, schema)})"
                )
            finally:
                con.close()
            statistics_plan = compute_statistics_plan(schema, table.metadata.properties)
            id_mapping = parquet_path_to_id_mapping(schema)
            for partition in sorted(staging.iterdir()):
                original = touched[int(partition.name.split("=", 1)[1])]
                for part in sorted(partition.iterdir()):
                    name = f"{len(written):05d}-0-{uuid}.parquet"
                    path = posixpath.join(posixpath.dirname(original.file_path), name)
                    with part.open("rb") as source, table.io.new_output(path).create() as out:
                        shutil.copyfileobj(source, out, length=1 << 20)
                    statistics = data_file_statistics_from_parquet_metadata(
                        parquet_metadata=pq.read_metadata(part),
                        stats_columns=statistics_plan,
                        parquet_column_mapping=id_mapping,
                    )
                    written.append(
                        DataFile.from_args(
                            content=DataFileContent.DATA,
                            file_path=path,
                            file_format=FileFormat.PARQUET,
                            partition=original.partition,
                            file_size_in_bytes=part.stat().st_size,
                            sort_order_id=None,
                            spec_id=original.spec_id,
                            equality_ids=None,
                            key_metadata=None,
                            **statistics.to_serialized_dict(),
                        )
                    )
    except BaseException:
        remove(table, written)
        raise
    return written


def _numbered(rows: pa.RecordBatchReader, touched: list[DataFile]) -> pa.RecordBatchReader:
    """The rows, each with the number of the touched file it comes from (in ``touched``):
    numbered here as they pass, which costs a fraction of a join on the paths in DuckDB."""
    paths = pa.array([f.file_path for f in touched], pa.string())
    schema = rows.schema.append(pa.field(_FILE, pa.int32()))

    def batches() -> Iterator[pa.RecordBatch]:
        for batch in rows:
            path = batch.column("$path")
            if pa.types.is_dictionary(path.type):
                path = path.dictionary_decode()
            number = pc.index_in(path, value_set=paths.cast(path.type)).cast(pa.int32())
            yield batch.append_column(_FILE, number)

    return pa.RecordBatchReader.from_batches(schema, batches())


def remove(table: Table, files: list[DataFile]) -> None:
    """Delete files written for a change that was not committed."""
    for data_file in files:
        with contextlib.suppress(FileNotFoundError):
            table.io.delete(data_file.file_path)


def _write_options(table: Table, schema: Schema) -> str:
    properties = table.metadata.properties
    codec = properties.get(
        TableProperties.PARQUET_COMPRESSION, TableProperties.PARQUET_COMPRESSION_DEFAULT
    )
    ids = ", ".join(f"{quote_identifier(f.name)}: {f.field_id}" for f in schema.fields)
    rows_per_group = int(
        properties.get(
            TableProperties.PARQUET_ROW_GROUP_LIMIT, TableProperties.PARQUET_ROW_GROUP_LIMIT_DEFAULT
        )
    )
    options = [f"COMPRESSION {codec.lower()}", f"FIELD_IDS {{{ids}}}"]
    options.append(f"ROW_GROUP_SIZE {rows_per_group}")
    level = properties.get(TableProperties.PARQUET_COMPRESSION_LEVEL)
    if level is not None:
        options.append(f"COMPRESSION_LEVEL {int(level)}")
    return ", ".join(options)
