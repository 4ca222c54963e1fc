"""Parquet: the object rewritten without the ids' rows, in the source's own layout.

Rewriting Parquet carelessly changes more than the rows: INT96 timestamps come
back as INT64, nanosecond timestamps get truncated, decimals change physical
type, codecs and key-value metadata are lost. This executor reads the source's
footer and writes with the same Arrow schema, format version, per-column codec
and dictionary use, INT96 where the source had it, decimals stored as integers
where the source did so, and one output row group per source row group.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakeward.erasure.executors.base import PARQUET, Executor, Outcome, Target, md5_hex, sha256_hex
from lakeward.erasure.indexers import id_path
from lakeward.erasure.mappers import COMPOSITE_SEPARATOR as SEPARATOR
from lakeward.errors import InputError, ObjectChangedSincePlan, ObjectNotFound

ARROW_SCHEMA_KEY = b"ARROW:schema"
_CODECS = {"UNCOMPRESSED": "none", "LZ4_RAW": "lz4"}
_DICTIONARY = {"PLAIN_DICTIONARY", "RLE_DICTIONARY"}


@dataclass(frozen=True)
class Layout:
    """How a Parquet file was written, as far as its footer tells."""

    version: str
    compression: dict[str, str]
    dictionary: list[str]
    int96: bool
    decimal_as_integer: bool
    row_group_size: int
    arrow_schema_stored: bool


def layout_of(metadata: pq.FileMetaData) -> Layout:
    compression: dict[str, str] = {}
    dictionary: list[str] = []
    int96 = decimal_as_integer = False
    row_group_size = max((metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)),
                         default=0)  # fmt: skip
    schema = metadata.schema
    for index in range(metadata.num_columns):
        column = schema.column(index)
        int96 |= column.physical_type == "INT96"
        decimal_as_integer |= column.logical_type.type == "DECIMAL" and column.physical_type in (
            "INT32",
            "INT64",
        )
        if metadata.num_row_groups:
            chunk = metadata.row_group(0).column(index)
            codec = str(chunk.compression)
            compression[chunk.path_in_schema] = _CODECS.get(codec, codec.lower())
            if _DICTIONARY & set(chunk.encodings):
                dictionary.append(chunk.path_in_schema)
    kv = metadata.metadata or {}
    return Layout(
        version=metadata.format_version,
        compression=compression,
        dictionary=dictionary,
        int96=int96,
        decimal_as_integer=decimal_as_integer,
        row_group_size=max(row_group_size, 1),
        arrow_schema_stored=ARROW_SCHEMA_KEY in kv,
    )


def id_values(table: pa.Table, column: str, uri: str) -> Any:
    """A column (or ``$.struct.field``) as strings, the way the index reads ids."""
    head, *rest = id_path(column)
    if head not in table.column_names:
        raise InputError(f"{uri}: no column {head!r}")
    values: Any = table.column(head)
    for part in rest:
        values = pc.struct_field(values, part)
    if not pa.types.is_string(values.type) and not pa.types.is_large_string(values.type):
        values = pc.cast(values, pa.string())
    return values


def keep_mask(
    table: pa.Table, columns: Sequence[str], user_ids: Sequence[str], uri: str
) -> pa.Array:
    """True for the rows to keep: those whose id (composite ids joined) is not listed."""
    parts = [id_values(table, c, uri) for c in columns]
    values = parts[0] if len(parts) == 1 else pc.binary_join_element_wise(*parts, SEPARATOR)
    matched = pc.fill_null(pc.is_in(values, value_set=pa.array(list(user_ids), pa.string())), False)
    return pc.invert(matched)


def rewrite(
    data: bytes, user_ids: Sequence[str], columns: Sequence[str], uri: str
) -> tuple[bytes, int]:
    """The file without the ids' rows, in the source's layout, and how many rows went."""
    source = pq.ParquetFile(pa.BufferReader(data))
    layout = layout_of(source.metadata)
    schema = source.schema_arrow
    sink = io.BytesIO()
    removed = 0
    with pq.ParquetWriter(
        sink,
        schema,
        version=layout.version,
        compression=layout.compression or "snappy",
        use_dictionary=layout.dictionary,
        use_deprecated_int96_timestamps=layout.int96,
        store_decimal_as_integer=layout.decimal_as_integer,
        store_schema=layout.arrow_schema_stored,
        allow_truncated_timestamps=False,
    ) as writer:
        for group in range(source.num_row_groups):
            table = source.read_row_group(group)
            mask = keep_mask(table, columns, user_ids, uri)
            kept = table.filter(mask)
            removed += table.num_rows - kept.num_rows
            if kept.num_rows:
                writer.write_table(kept, row_group_size=layout.row_group_size)
    return sink.getvalue(), removed


def digests_of(data: bytes) -> tuple[str, str]:
    """MD5 (the eTag of a single-part object) and SHA-256 (the certificate's) of ``data``."""
    return md5_hex(data), sha256_hex(data)


def count_rows(data: bytes, user_ids: Sequence[str], columns: Sequence[str], uri: str) -> int:
    heads = sorted({id_path(c)[0] for c in columns})
    table = pq.read_table(pa.BufferReader(data), columns=heads)
    kept = pc.sum(keep_mask(table, columns, user_ids, uri).cast(pa.int64())).as_py() or 0
    return int(table.num_rows - kept)


class ParquetExecutor(Executor):
    layer = PARQUET

    def purge(self, target: Target, user_ids: Sequence[str]) -> Outcome:
        multipart = target.etag is not None and "-" in target.etag
        try:
            # An eTag of parts is checked around the read (base); an MD5 eTag is
            # checked below, once the hashes are done.
            raw = self.read(target) if multipart else self.storage.get(target.bucket, target.key)
        except ObjectNotFound:
            return Outcome(target.uri, self.layer, "missing", note="the object is gone")
        # hashlib lets go of the GIL and the Parquet writer encodes on one core:
        # hash the old content (eTag check, certificate) while the rewrite runs.
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="parquet-hash") as pool:
            hashing = pool.submit(digests_of, raw)
            failure: Exception | None = None
            try:
                new, removed = rewrite(raw, user_ids, target.id_columns, target.uri)
            except Exception as exc:  # raised below, once the eTag is known to match
                failure = exc
            md5, sha256 = hashing.result()
        # Checked first: content other than the report's is a change, whatever else is wrong.
        if not multipart and target.etag is not None and md5 != target.etag:
            raise ObjectChangedSincePlan(f"{target.uri} changed since the report (eTag differs)")
        if isinstance(failure, pa.ArrowInvalid | OSError):
            raise ObjectChangedSincePlan(
                f"{target.uri} is not readable Parquet: {failure}"
            ) from None
        if failure is not None:
            raise failure
        return self.finish(target, raw, new if removed else None, removed, before_sha256=sha256)

    def count(self, target: Target, user_ids: Sequence[str]) -> int:
        raw = self.current(target)
        if raw is None:
            return 0
        return count_rows(raw, user_ids, target.id_columns, target.uri)
