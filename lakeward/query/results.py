"""Query results in the lake, as Athena leaves them: ``<output>/<id>.csv`` and its metadata.

The CSV is Athena's: a header row of column names, then every value in double
quotes (``"`` doubled), NULL as an empty unquoted field, values in Trino's
text forms (``2020-01-02 03:04:05.000``, ``true``, ``1.0E7``, ``[1, 2]``,
``{a=1}``). Beside it, ``<id>.csv.metadata`` holds JSON: the columns as
ColumnInfo fields, the row count and ``format: 1``.

Pages are read back with an opaque NextToken (base64 of a row offset, the byte
offset of that row, and a check binding both to the execution). Recently
written or read results are kept parsed in a memory-bounded LRU cache so that
paging does not read the lake every time; larger results stream from the
object, skipping to the token's byte offset.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import math
import struct
import tempfile
import threading
from array import array
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import date, datetime, time
from decimal import Decimal
from itertools import accumulate
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.compute as pc

from lakeward.errors import InvalidRequest, ObjectNotFound, ResourceNotFound, StorageError
from lakeward.query.engines.base import EngineResult
from lakeward.query.model import ColumnInfo, ResultPage
from lakeward.storage import Storage

FORMAT = 1
MAX_RESULTS = 1000
CACHE_BYTES = 128 * 1024 * 1024
_SKIP_CHUNK = 1024 * 1024


@dataclass(frozen=True)
class ResultSummary:
    rows: int
    bytes: int
    columns: list[ColumnInfo]


@dataclass
class _Cached:
    columns: list[ColumnInfo]
    rows: list[list[str | None]]
    offsets: array[int]  # byte offset of each data row, then of the end
    size: int  # estimated memory


class ResultCache:
    """Parsed results by object URI, least recently used first out, within ``max_bytes``."""

    def __init__(self, max_bytes: int = CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[str, _Cached] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    @property
    def max_entry_bytes(self) -> int:
        return self.max_bytes // 4  # so that one big result does not evict all the others

    def get(self, uri: str) -> _Cached | None:
        with self._lock:
            entry = self._entries.get(uri)
            if entry is not None:
                self._entries.move_to_end(uri)
            return entry

    def put(self, uri: str, entry: _Cached) -> None:
        if entry.size > self.max_entry_bytes:
            return
        with self._lock:
            old = self._entries.pop(uri, None)
            self._size -= old.size if old else 0
            self._entries[uri] = entry
            self._size += entry.size
            while self._size > self.max_bytes:
                _, evicted = self._entries.popitem(last=False)
                self._size -= evicted.size


_CACHE = ResultCache()


def result_keys(key_prefix: str, execution_id: str) -> tuple[str, str]:
    """The keys of a result's CSV and of its metadata."""
    prefix = key_prefix.strip("/")
    csv_key = f"{prefix}/{execution_id}.csv" if prefix else f"{execution_id}.csv"
    return csv_key, csv_key + ".metadata"


def write_results(
    storage: Storage,
    bucket: str,
    key_prefix: str,
    execution_id: str,
    result: EngineResult,
    cache: ResultCache | None = None,
) -> ResultSummary:
    """Write a result's CSV and metadata; the CSV lands whole or not at all.

    The batches stream into a local temporary file that is put in one call,
    so a failing batch iterator leaves no object behind.
    """
    cache = _CACHE if cache is None else cache
    csv_key, metadata_key = result_keys(key_prefix, execution_id)
    columns = result.columns
    kept: list[list[str | None]] | None = []  # rows for the cache, while they fit
    offsets = array("q")
    estimate = row_count = 0
    with tempfile.TemporaryFile() as spool:
        position = spool.write(_record([c.name for c in columns]))
        for batch in result.batches:
            texts = [_texts(batch.column(i)) for i in range(batch.num_columns)]
            lines = _csv_lines(texts, batch.num_rows)
            data = "".join(lines.to_pylist()).encode("utf-8")
            row_count += batch.num_rows
            if kept is not None:
                starts = accumulate(pc.binary_length(lines).to_pylist(), initial=position)
                offsets.extend(list(starts)[:-1])
                rows = [list(r) for r in zip(*(t.to_pylist() for t in texts), strict=True)]
                estimate += _estimate(rows)
                if estimate <= cache.max_entry_bytes:
                    kept.extend(rows)
                else:  # too big to cache: read_page will stream it from the lake
                    kept, offsets = None, array("q")
            spool.write(data)
            position += len(data)
        spool.seek(0)
        info = storage.put(bucket, csv_key, spool)
    metadata = {"format": FORMAT, "columns": [asdict(c) for c in columns], "rows": row_count}
    metadata["bytes"] = info.size
    storage.put(bucket, metadata_key, json.dumps(metadata).encode("utf-8"))
    if kept is not None:
        offsets.append(position)
        cache.put(storage.uri(bucket, csv_key), _Cached(columns, kept, offsets, estimate))
    return ResultSummary(row_count, info.size, columns)


def read_page(
    storage: Storage,
    bucket: str,
    key_prefix: str,
    execution_id: str,
    next_token: str | None,
    max_results: int,
    include_header: bool,
    cache: ResultCache | None = None,
) -> ResultPage:
    """One page of a stored result; the first page starts with the column labels if asked.

    The labels row counts towards ``max_results``, as in Athena.
    """
    if not 1 <= max_results <= MAX_RESULTS:
        raise InvalidRequest(f"MaxResults must be between 1 and {MAX_RESULTS}")
    cache = _CACHE if cache is None else cache
    csv_key, metadata_key = result_keys(key_prefix, execution_id)
    uri = storage.uri(bucket, csv_key)
    row, offset = _decode_token(next_token, execution_id) if next_token else (0, None)
    labels = include_header and next_token is None
    wanted = max_results - 1 if labels else max_results
    entry = cache.get(uri)
    if entry is None:
        columns, total, size = _metadata(storage, bucket, metadata_key, execution_id)
        if size <= cache.max_entry_bytes // 4:  # parsed rows take a few times the text
            entry = _load(storage, bucket, csv_key, columns)
            cache.put(uri, entry)
    if entry is not None:
        columns, total = entry.columns, len(entry.rows)
        _check_row(row, total)
        rows = entry.rows[row : row + wanted]
        end_offset = entry.offsets[row + len(rows)]
    else:
        _check_row(row, total)
        rows, end_offset = _stream_rows(storage, bucket, csv_key, offset, wanted)
    labels_row: list[str | None] = [c.name for c in columns]
    page = [labels_row, *rows] if labels else list(rows)
    following = row + len(rows)
    token = _encode_token(following, end_offset, execution_id) if following < total else None
    return ResultPage(columns=list(columns), rows=page, next_token=token)


# -- writing -----------------------------------------------------------------------------------


def _record(values: list[str | None]) -> bytes:
    fields = ("" if v is None else '"' + v.replace('"', '""') + '"' for v in values)
    return (",".join(fields) + "\n").encode("utf-8")


def _csv_lines(texts: list[pa.Array], num_rows: int) -> pa.Array:
    """Each row's CSV line, newline included, from its columns' texts (null for NULL)."""
    fields = [
        pc.fill_null(
            pc.binary_join_element_wise("", pc.replace_substring(t, '"', '""'), "", '"'), ""
        )
        for t in texts
    ]
    if not fields:
        return pa.array(["\n"] * num_rows, pa.string())
    joined = pc.binary_join_element_wise(*fields, ",")
    return pc.binary_join_element_wise(joined, "", "\n").cast(pa.string())


def _estimate(rows: list[list[str | None]]) -> int:
    # What CPython spends on a list of short strings, roughly.
    return sum(64 + 8 * len(r) + sum(0 if v is None else 49 + len(v) for v in r) for r in rows)


def _texts(values: pa.Array) -> pa.Array:
    """A column's values as Athena writes them, nulls kept."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    kind = values.type
    t = pa.types
    if t.is_dictionary(kind):
        return _texts(values.dictionary_decode())
    if t.is_string(kind) or t.is_large_string(kind) or t.is_string_view(kind):
        return values.cast(pa.string())
    if t.is_timestamp(kind):
        millis = pc.floor_temporal(values, unit="millisecond")
        pattern = "%Y-%m-%d %H:%M:%S %Z" if kind.tz else "%Y-%m-%d %H:%M:%S"
        return pc.strftime(millis.cast(pa.timestamp("ms", kind.tz)), format=pattern)
    if t.is_time(kind):
        # Truncating to milliseconds, as Athena prints times.
        return pc.strftime(values.cast(pa.time32("ms"), safe=False), format="%H:%M:%S")
    if t.is_integer(kind) or t.is_boolean(kind) or t.is_decimal(kind) or t.is_date(kind):
        return values.cast(pa.string())
    if t.is_float32(kind) or t.is_float64(kind):
        return _float_texts(values)
    return pa.array(
        [None if v is None else _text(v, kind) for v in values.to_pylist()], pa.string()
    )


def _float_texts(values: pa.Array) -> pa.Array:
    # Arrow prints the same shortest digits as Java, only without Java's ".0" and
    # E-notation: add the one, and leave values that need the other to _java_float.
    text = values.cast(pa.string())
    whole = pc.binary_join_element_wise(text, ".0", "")
    text = pc.if_else(pc.match_substring(text, "."), text, whole)
    magnitude = pc.abs(values)
    plain = pc.fill_null(pc.and_(pc.greater_equal(magnitude, 1e-3), pc.less(magnitude, 1e7)), True)
    if pc.all(plain).as_py():
        return text
    single = pa.types.is_float32(values.type)
    fixed = zip(text.to_pylist(), plain.to_pylist(), values.to_pylist(), strict=True)
    return pa.array([s if ok else _java_float(v, single) for s, ok, v in fixed], pa.string())


def _text(value: Any, kind: pa.DataType) -> str:
    """One value in Trino's text form: nested values unquoted, nested NULLs as ``null``."""
    if value is None:
        return "null"
    t = pa.types
    if t.is_map(kind):
        pairs = (f"{_text(k, kind.key_type)}={_text(v, kind.item_type)}" for k, v in value)
        return "{" + ", ".join(pairs) + "}"
    if t.is_struct(kind):
        fields = (kind.field(i) for i in range(kind.num_fields))
        return "{" + ", ".join(f"{f.name}={_text(value[f.name], f.type)}" for f in fields) + "}"
    if t.is_list(kind) or t.is_large_list(kind) or t.is_fixed_size_list(kind):
        return "[" + ", ".join(_text(v, kind.value_type) for v in value) + "]"
    if t.is_dictionary(kind):
        return _text(value, kind.value_type)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return _java_float(value, single=t.is_float32(kind) or t.is_float16(kind))
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, bytes):
        return " ".join(f"{b:02x}" for b in value)
    if isinstance(value, datetime):
        text = value.strftime("%Y-%m-%d %H:%M:%S.") + f"{value.microsecond // 1000:03d}"
        return f"{text} {value.tzname()}" if value.tzinfo else text
    if isinstance(value, date | time):
        return value.isoformat(timespec="milliseconds") if isinstance(value, time) else str(value)
    return str(value)


def _java_float(value: float, single: bool) -> str:
    """Java's ``Double.toString`` (``Float.toString`` if ``single``), as Trino prints doubles."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1, value) < 0 else "0.0"
    shortest = repr(value)
    if single:  # the fewest digits that read back as the same 32-bit float
        packed = struct.pack("<f", value)
        for precision in range(1, 10):
            shortest = f"{value:.{precision}g}"
            if struct.pack("<f", float(shortest)) == packed:
                break
    sign, digits, exponent = Decimal(shortest).as_tuple()
    assert isinstance(exponent, int)
    magnitude = exponent + len(digits) - 1  # of the leading digit
    text = "".join(map(str, digits)).rstrip("0") or "0"
    if -3 <= magnitude < 7:
        if magnitude < 0:
            whole, fraction = "0", "0" * (-magnitude - 1) + text
        else:
            whole, fraction = text[: magnitude + 1].ljust(magnitude + 1, "0"), text[magnitude + 1 :]
        body = f"{whole}.{fraction or '0'}"
    else:
        body = f"{text[0]}.{text[1:] or '0'}E{magnitude}"
    return ("-" if sign else "") + body


# -- reading -----------------------------------------------------------------------------------


def _records(stream: BinaryIO) -> Iterator[bytes]:
    """Each CSV record's bytes (newline included); a quoted value may span lines."""
    while True:
        record = stream.readline()
        if not record:
            return
        # Every '"' either delimits a value or is doubled inside one, so a record is
        # complete once it holds an even number of them.
        while record.count(b'"') % 2:
            more = stream.readline()
            if not more:
                raise StorageError("a stored query result is truncated")
            record += more
        yield record


def _parse(record: bytes) -> list[str | None]:
    text = record.decode("utf-8").removesuffix("\n")
    values: list[str | None] = []
    position = 0
    while True:
        if text.startswith('"', position):
            end = position + 1
            while True:
                end = text.find('"', end)
                if end < 0:
                    raise StorageError("a stored query result is not a valid CSV file")
                if not text.startswith('""', end):
                    break
                end += 2
            values.append(text[position + 1 : end].replace('""', '"'))
            position = end + 1
        else:
            values.append(None)
        if position == len(text):
            return values
        if text[position] != ",":
            raise StorageError("a stored query result is not a valid CSV file")
        position += 1


def _metadata(
    storage: Storage, bucket: str, key: str, execution_id: str
) -> tuple[list[ColumnInfo], int, int]:
    """The columns, row count and CSV size a result's metadata records."""
    try:
        data = json.loads(storage.get(bucket, key))
    except ObjectNotFound:
        raise ResourceNotFound(f"the results of query {execution_id} are not in the lake") from None
    except ValueError:
        raise StorageError(f"{storage.uri(bucket, key)} is not valid JSON") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise StorageError(f"{storage.uri(bucket, key)} is not result metadata of format {FORMAT}")
    columns = [ColumnInfo(**c) for c in data["columns"]]
    return columns, int(data["rows"]), int(data.get("bytes", 0))


def _load(storage: Storage, bucket: str, key: str, columns: list[ColumnInfo]) -> _Cached:
    rows: list[list[str | None]] = []
    offsets = array("q")
    with storage.open(bucket, key) as stream:
        records = _records(stream)
        position = len(next(records, b""))  # past the header
        for record in records:
            offsets.append(position)
            rows.append(_parse(record))
            position += len(record)
    offsets.append(position)
    return _Cached(columns, rows, offsets, _estimate(rows))


def _stream_rows(
    storage: Storage, bucket: str, key: str, offset: int | None, wanted: int
) -> tuple[list[list[str | None]], int]:
    """Up to ``wanted`` rows from a byte offset (None: the first row), and the offset after."""
    rows: list[list[str | None]] = []
    with storage.open(bucket, key) as stream:
        if offset is None:
            offset = len(next(_records(stream), b""))  # past the header
        elif stream.seekable():
            stream.seek(offset)
        else:
            remaining = offset
            while remaining > 0:
                skipped = len(stream.read(min(remaining, _SKIP_CHUNK)))
                if not skipped:
                    break
                remaining -= skipped
        for record in _records(stream):
            if len(rows) == wanted:
                break
            rows.append(_parse(record))
            offset += len(record)
    return rows, offset


def _check_row(row: int, total: int) -> None:
    if row > total:
        raise InvalidRequest("NextToken does not belong to this query's results")


def _check_value(execution_id: str, row: int, offset: int) -> str:
    return hashlib.sha256(f"{execution_id}:{row}:{offset}".encode()).hexdigest()[:16]


def _encode_token(row: int, offset: int, execution_id: str) -> str:
    text = f"{row}:{offset}:{_check_value(execution_id, row, offset)}"
    return base64.urlsafe_b64encode(text.encode("ascii")).decode("ascii")


def _decode_token(token: str, execution_id: str) -> tuple[int, int]:
    try:
        text = base64.urlsafe_b64decode(token.encode("ascii")).decode("ascii")
        row_text, offset_text, check = text.split(":")
        row, offset = int(row_text), int(offset_text)
    except (ValueError, UnicodeError, binascii.Error):
        raise InvalidRequest("NextToken is not valid") from None
    if row < 0 or offset < 0 or check != _check_value(execution_id, row, offset):
        raise InvalidRequest("NextToken is not valid") from None
    return row, offset
