"""What the metastore holds, as lakeward's code sees it: databases, tables (and views) and
partitions, and their Thrift form (the Hive Metastore API's ``ttypes``)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from pymetastore.hive_metastore import ttypes as hive

VIRTUAL_VIEW = "VIRTUAL_VIEW"  # a table's type when it is a view

PARQUET = {
    "input_format": "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat",
    "output_format": "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat",
    "serde": "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe",
}


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    comment: str | None = None


@dataclass(frozen=True)
class TableInfo:
    database: str
    name: str
    location: str
    columns: list[Column]
    partition_keys: list[Column] = field(default_factory=list)
    table_type: str = "EXTERNAL_TABLE"  # or VIRTUAL_VIEW (a view), MANAGED_TABLE
    parameters: dict[str, str] = field(default_factory=dict)
    # The storage descriptor: None means Parquet's (lakeward.query.formats reads these).
    input_format: str | None = None
    serde: str | None = None
    output_format: str | None = None
    serde_parameters: dict[str, str] = field(default_factory=dict)
    # Hive's bucketing (CLUSTERED BY (...) INTO n BUCKETS): kept, and read past (a reader
    # of every file needs no buckets); -1 buckets for a table without.
    bucket_columns: list[str] = field(default_factory=list)
    bucket_count: int = -1
    # A view's text (table_type VIRTUAL_VIEW): Hive keeps what was written and its
    # expanded form, which is what Spark runs.
    view_original_text: str | None = None
    view_expanded_text: str | None = None


@dataclass(frozen=True)
class PartitionInfo:
    values: list[str]  # one per partition key, in the keys' order
    location: str


@dataclass(frozen=True)
class DatabaseInfo:
    name: str
    location: str
    description: str = ""
    parameters: dict[str, str] = field(default_factory=dict)


# Characters Hive escapes (as %XX) in a partition's directory name (FileUtils.escapePathName).
_PATH_ESCAPED = frozenset(chr(c) for c in range(1, 32)) | set("\"#%'*/:=?\\\x7f{[]^")


def escape_path_name(value: str) -> str:
    """A partition key or value as Hive spells it in a directory name (``a/b`` is ``a%2Fb``)."""
    return "".join(f"%{ord(c):02X}" if c in _PATH_ESCAPED else c for c in value)


def partition_name(keys: Sequence[str], values: Sequence[str]) -> str:
    """Hive's name of a partition (``year=2020/month=1``), which is also its directory."""
    return "/".join(
        f"{escape_path_name(k)}={escape_path_name(v)}" for k, v in zip(keys, values, strict=True)
    )


def partition_values(
    directories: Sequence[str], keys: Sequence[str], *, exact: bool = True
) -> list[str] | None:
    """The values that partition directories (``k1=v1``, ``k2=v2``) name, unescaped as Hive
    escapes them; None unless they name ``keys``, in order. ``exact``: keys compared as
    written (Athena's MSCK REPAIR TABLE); else without regard to case (reading files)."""
    if len(directories) != len(keys):
        return None
    values = []
    for directory, key in zip(directories, keys, strict=True):
        name, equals, value = directory.partition("=")
        name = unquote(name)
        if not equals or not name or (name != key if exact else name.lower() != key.lower()):
            return None
        values.append(unquote(value))
    return values


def thrift_table(table: TableInfo) -> Any:
    columns = [hive.FieldSchema(c.name, c.type, c.comment) for c in table.columns]
    # A view has no files: no location and no formats, as Hive, Spark and Trino store one.
    view = table.table_type == VIRTUAL_VIEW
    storage = hive.StorageDescriptor(
        cols=columns,
        location=None if view else table.location,
        inputFormat=None if view else table.input_format or PARQUET["input_format"],
        outputFormat=None if view else table.output_format or PARQUET["output_format"],
        compressed=False,
        numBuckets=table.bucket_count,
        serdeInfo=hive.SerDeInfo(
            serializationLib=None if view else table.serde or PARQUET["serde"],
            parameters=table.serde_parameters or ({} if view else {"serialization.format": "1"}),
        ),
        bucketCols=list(table.bucket_columns),
        sortCols=[],
        parameters={},
    )
    return hive.Table(
        tableName=table.name,
        dbName=table.database,
        owner="lakeward",
        createTime=int(time.time()),
        sd=storage,
        partitionKeys=[hive.FieldSchema(c.name, c.type, c.comment) for c in table.partition_keys],
        parameters=(
            {"EXTERNAL": "TRUE", **table.parameters}
            if table.table_type == "EXTERNAL_TABLE"
            else dict(table.parameters)
        ),
        tableType=table.table_type,
        viewOriginalText=table.view_original_text,
        viewExpandedText=table.view_expanded_text,
    )


def thrift_partition(table: Any, partition: PartitionInfo) -> Any:
    storage = hive.StorageDescriptor(**{**table.sd.__dict__, "location": partition.location})
    return hive.Partition(
        values=list(partition.values),
        dbName=table.dbName,
        tableName=table.tableName,
        createTime=int(time.time()),
        sd=storage,
        parameters={},
    )


def table_info(raw: Any) -> TableInfo:
    def columns(items: Any) -> list[Column]:
        return [Column(c.name, c.type, c.comment) for c in items or []]

    return TableInfo(
        database=raw.dbName,
        name=raw.tableName,
        location=raw.sd.location or "",  # a view has none
        columns=columns(raw.sd.cols),
        partition_keys=columns(raw.partitionKeys),
        table_type=raw.tableType,
        parameters=dict(raw.parameters or {}),
        input_format=raw.sd.inputFormat,
        serde=raw.sd.serdeInfo.serializationLib if raw.sd.serdeInfo else None,
        output_format=raw.sd.outputFormat,
        serde_parameters=dict((raw.sd.serdeInfo.parameters or {}) if raw.sd.serdeInfo else {}),
        bucket_columns=list(raw.sd.bucketCols or []),
        bucket_count=-1 if raw.sd.numBuckets is None else raw.sd.numBuckets,
        view_original_text=raw.viewOriginalText,
        view_expanded_text=raw.viewExpandedText,
    )
