"""How a write lays its files out: the options CTAS and UNLOAD take, and a table's own."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lakeward.errors import InvalidRequest
from lakeward.query.engines.base import (
    Compression,
    WriteFormat,
)
from lakeward.query.engines.writers import (
    TEXT_NULL,
    compression_of,
)
from lakeward.query.formats import TableFormat, stored_as

ROWS_COLUMN = "rows"  # Trino's (and Athena's) one result column of CTAS and INSERT
# The table formats (formats.TableFormat.kind) lakeward writes: not OpenCSVSerde, not Avro.
KINDS: dict[str, WriteFormat] = {
    "parquet": "parquet",
    "orc": "orc",
    "json": "json",
    "text": "text",
}
COMPRESSION_NAMES = ("write_compression", "parquet_compression", "orc_compression")
COMPRESSION_PARAMETER = {
    "parquet": "parquet.compression",
    "orc": "orc.compress",
    "json": "write.compression",
    "text": "write.compression",
}
CTAS_PROPERTIES = (
    "table_type",
    "is_external",
    "external_location",
    "format",
    "partitioned_by",
    "bucketed_by",
    "bucket_count",
    "write_compression",
    "field_delimiter",
    "parquet_compression",
    "orc_compression",
    # An Iceberg table's (table_type = 'ICEBERG')
    "location",
    "partitioning",
    "vacuum_max_snapshot_age_seconds",
    "vacuum_min_snapshots_to_keep",
    "vacuum_max_metadata_files_to_keep",
    "optimize_rewrite_min_data_file_size_bytes",
    "optimize_rewrite_max_data_file_size_bytes",
    "optimize_rewrite_data_file_threshold",
    "optimize_rewrite_delete_file_threshold",
)
ICEBERG_ONLY = CTAS_PROPERTIES[CTAS_PROPERTIES.index("location") :]
UNLOAD_PROPERTIES = ("format", "compression", "partitioned_by", "field_delimiter")
INTEGRAL = ("tinyint", "smallint", "integer", "bigint")


def string_property(props: dict[str, Any], name: str) -> str | None:
    value = props.get(name)
    if value is not None and not isinstance(value, str):
        raise InvalidRequest(f"property {name} must be a quoted string")
    return value


def write_format(name: str) -> tuple[TableFormat, WriteFormat]:
    if name.upper() == "AVRO":
        raise InvalidRequest(
            "format AVRO is not supported for writes: lakeward has no Avro writer "
            "(use PARQUET, ORC, JSON or TEXTFILE)"
        )
    table_format = stored_as(name)
    return table_format, KINDS[table_format.kind]


def delimiter_of(props: dict[str, Any], kind: WriteFormat) -> str:
    value = string_property(props, "field_delimiter")
    if value is None:
        return "\x01"
    if kind != "text":
        raise InvalidRequest("field_delimiter is allowed only with format TEXTFILE")
    if len(value) != 1:
        raise InvalidRequest(f"field_delimiter must be one character, not '{value}'")
    return value


def partition_names(props: dict[str, Any]) -> tuple[str, ...]:
    value = props.get("partitioned_by", [])
    if not isinstance(value, list):
        raise InvalidRequest("partitioned_by must be an ARRAY of column names")
    names = tuple(v.lower() for v in value)
    if len(set(names)) != len(names):
        raise InvalidRequest("partitioned_by names a column twice")
    return names


@dataclass(frozen=True)
class WriteOptions:
    """How a write lays its files out."""

    table_format: TableFormat
    kind: WriteFormat
    compression: Compression
    partitioned_by: tuple[str, ...] = ()
    delimiter: str = "\x01"
    null_format: str = TEXT_NULL

    def serde_parameters(self) -> dict[str, str]:
        parameters = dict(self.table_format.serde_parameters)
        if self.kind == "text":
            parameters["field.delim"] = self.delimiter
            parameters["serialization.format"] = self.delimiter
        return parameters


def ctas_options(props: dict[str, Any]) -> WriteOptions:
    table_type = (string_property(props, "table_type") or "HIVE").upper()
    if table_type != "HIVE":
        raise InvalidRequest(f"table_type '{table_type}' is not supported (HIVE or ICEBERG)")
    iceberg_only = [k for k in ICEBERG_ONLY if k in props]
    if iceberg_only:
        raise InvalidRequest(
            f"property {iceberg_only[0]} is an Iceberg table's: give table_type = 'ICEBERG' "
            "(a Hive table's place is external_location)"
        )
    if "bucketed_by" in props or "bucket_count" in props:
        raise InvalidRequest(
            "bucketed_by and bucket_count are not supported: lakeward does not write "
            "bucketed tables"
        )
    table_format, kind = write_format(string_property(props, "format") or "PARQUET")
    compressions = [props[k] for k in COMPRESSION_NAMES if k in props]
    if len(compressions) > 1:
        raise InvalidRequest("give the compression once (write_compression)")
    for legacy, legacy_kind in (("parquet_compression", "parquet"), ("orc_compression", "orc")):
        if legacy in props and kind != legacy_kind:
            raise InvalidRequest(f"{legacy} is allowed only with format {legacy_kind.upper()}")
    given = compressions[0] if compressions else None
    if given is not None and not isinstance(given, str):
        raise InvalidRequest("write_compression must be a quoted string")
    return WriteOptions(
        table_format,
        kind,
        compression_of(kind, given),
        partition_names(props),
        delimiter_of(props, kind),
    )
