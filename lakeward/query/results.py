"""Query results in the lake, as Athena leaves them: ``<output>/<id>.csv`` and its metadata.

The CSV is Athena's: a header row of column names, then every value in double
quotes (``"`` doubled), NULL as an empty unquoted field, values in Trino's
text forms (``query/texts.py``). Beside it, ``<id>.csv.metadata`` holds JSON:
the columns as ColumnInfo fields, the row count and ``format: 1``.

The rows are rendered once, as they are written, into ``GetQueryResults``'s
JSON (``query/pages.py``) and stored as ``<id>.csv.pages``; a page is then a
slice of stored bytes. Pages are read back with an opaque NextToken (base64 of
a row offset, the byte offset of that row in the CSV, and a check binding both
to the execution). Recently written or read pages are kept in a memory-bounded
LRU cache; larger ones are read by ranges from the lake. A result written
before pages were stored (no ``.pages``) is parsed from its CSV.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import shutil
import tempfile
import threading
from array import array
from collections import OrderedDict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import BinaryIO, cast

import pyarrow as pa
import pyarrow.compute as pc

from lakeward.errors import InvalidRequest, ObjectNotFound, ResourceNotFound, StorageError
from lakeward.query import pages
from lakeward.query.engines.base import EngineResult
from lakeward.query.model import ColumnInfo, ResultPage, flat_fields, json_rows
from lakeward.query.pages import Pages
from lakeward.query.texts import column_texts, is_plain
from lakeward.storage import Storage

FORMAT = 1
MAX_RESULTS = 1000
CACHE_BYTES = 128 * 1024 * 1024
SPOOL_MEMORY = 16 * 1024 * 1024
"""How much of a result's CSV, and of its pages, is rendered in memory before spilling to disk."""
# Puts a result's CSV and pages beside its metadata: kept for the process, not made per result.
_PUTS = ThreadPoolExecutor(max_workers=8, thread_name_prefix="result-put")


@dataclass(frozen=True)
class ResultSummary:
    rows: int
    bytes: int
    columns: list[ColumnInfo]


class ResultCache:
    """Rendered pages by object URI, least recently used first out, within ``max_bytes``."""

    def __init__(self, max_bytes: int = CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[str, Pages] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    @property
    def max_entry_bytes(self) -> int:
        return self.max_bytes // 4  # so that one big result does not evict all the others

    def get(self, uri: str) -> Pages | None:
        with self._lock:
            entry = self._entries.get(uri)
            if entry is not None:
                self._entries.move_to_end(uri)
            return entry

    def put(self, uri: str, entry: Pages) -> None:
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


def pages_key(csv_key: str) -> str:
    return csv_key + ".pages"


def write_results(
    storage: Storage,
    bucket: str,
    key_prefix: str,
    execution_id: str,
    result: EngineResult,
    cache: ResultCache | None = None,
) -> ResultSummary:
    """Write a result's CSV, metadata and pages; each object lands whole or not at all.

    The batches are rendered into spools (memory up to ``SPOOL_MEMORY`` bytes,
    then a temporary file), so a failing batch iterator leaves no object
    behind. The three objects are then put at once, each from its own thread:
    hashing (MD5 and SHA-256), writing and fsync release the GIL, so they
    overlap, and the file system commits the fsyncs of one directory together.
    """
    cache = _CACHE if cache is None else cache
    csv_key, metadata_key = result_keys(key_prefix, execution_id)
    columns = result.columns
    offset_parts: list[pa.Array] = []
    csv_offset_parts: list[pa.Array] = []
    body_len = rows = 0
    with _spool() as csv, _spool() as body, _spool() as stored:
        # A statement without columns (DDL) leaves an empty file, as Athena's do: no header.
        position = csv.write(_record([c.name for c in columns])) if columns else 0
        for batch in result.batches:
            texts = [column_texts(batch.column(i)) for i in range(batch.num_columns)]
            plain = [is_plain(batch.column(i).type) for i in range(batch.num_columns)]
            lines, line_offsets = pages.concatenated(_csv_lines(texts, plain, batch.num_rows))
            fragments = pages.row_fragments(texts, plain, batch.num_rows)
            rendered, row_offsets = pages.concatenated(fragments)
            csv.write(lines)
            body.write(rendered)
            csv_offset_parts.append(pc.add(line_offsets.slice(0, batch.num_rows), position))
            offset_parts.append(pc.add(row_offsets.slice(0, batch.num_rows), body_len))
            position += len(lines)
            body_len += len(rendered)
            rows += batch.num_rows
        metadata = {"format": FORMAT, "columns": [flat_fields(c) for c in columns], "rows": rows}
        metadata["bytes"] = position  # the CSV's size: everything written to it
        header = pages.header_json(columns)
        offsets = pages.int64s(offset_parts, body_len)
        csv_offsets = pages.int64s(csv_offset_parts, position)
        stored.write(pages.index(columns, header, body_len, offsets, csv_offsets))
        body.seek(0)
        shutil.copyfileobj(body, stored)
        csv.seek(0)
        stored.seek(0)
        csv_put = _PUTS.submit(storage.put, bucket, csv_key, cast(BinaryIO, csv))
        pages_put = _PUTS.submit(storage.put, bucket, pages_key(csv_key), cast(BinaryIO, stored))
        try:
            storage.put(bucket, metadata_key, json.dumps(metadata).encode("utf-8"))
        finally:  # the spools stay open until both puts are done with them
            wait((csv_put, pages_put))
        info = csv_put.result()
        pages_put.result()
        entry = Pages(columns, header, b"", offsets, csv_offsets)
        if body_len + entry.size <= cache.max_entry_bytes:
            body.seek(0)
            entry.body = body.read()
            cache.put(storage.uri(bucket, csv_key), entry)
    return ResultSummary(rows, info.size, columns)


def _spool() -> tempfile.SpooledTemporaryFile[bytes]:
    return tempfile.SpooledTemporaryFile(max_size=SPOOL_MEMORY)


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
    row, _ = _decode_token(next_token, execution_id) if next_token else (0, None)
    labels = include_header and next_token is None
    wanted = max_results - 1 if labels else max_results
    entry = cache.get(uri)
    if entry is None:
        try:
            stream = storage.open(bucket, pages_key(csv_key))
        except ObjectNotFound:  # written before pages were stored
            entry = _load_legacy(storage, bucket, csv_key, metadata_key, execution_id)
            cache.put(uri, entry)
        else:
            with stream:
                reader = pages.PagesReader(stream)
                if reader.size > cache.max_entry_bytes:
                    return _page(reader, row, wanted, labels, execution_id)
                entry = reader.whole()
                cache.put(uri, entry)
    return _page(entry, row, wanted, labels, execution_id)


def _page(
    source: Pages | pages.PagesReader, row: int, wanted: int, labels: bool, execution_id: str
) -> ResultPage:
    _check_row(row, source.rows)
    count = min(wanted, source.rows - row)
    rows_json, csv_end = source.slice(row, count)
    if labels:
        rows_json = source.header + b"," + rows_json if rows_json else source.header
    following = row + count
    token = _encode_token(following, csv_end, execution_id) if following < source.rows else None
    return ResultPage(columns=list(source.columns), rows_json=rows_json, next_token=token)


# -- writing -----------------------------------------------------------------------------------


def _record(values: list[str | None]) -> bytes:
    fields = ("" if v is None else '"' + v.replace('"', '""') + '"' for v in values)
    return (",".join(fields) + "\n").encode("utf-8")


def _csv_lines(texts: list[pa.Array], plain: list[bool], num_rows: int) -> pa.Array:
    """Each row's CSV line, newline included, from its columns' texts (null for NULL).

    ``plain`` columns (numbers, dates) hold no '"' to double, nor do most texts.
    """
    values = [
        pc.replace_substring(t, '"', '""') if not simple and pages.may_hold(t, '"') else t
        for t, simple in zip(texts, plain, strict=True)
    ]
    return pages.joined_rows(values, ('"', '"'), "", ("", "\n"), num_rows)


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


def _metadata(storage: Storage, bucket: str, key: str, execution_id: str) -> list[ColumnInfo]:
    """The columns a result's metadata records."""
    try:
        data = json.loads(storage.get(bucket, key))
    except ObjectNotFound:
        raise ResourceNotFound(f"the results of query {execution_id} are not in the lake") from None
    except ValueError:
        raise StorageError(f"{storage.uri(bucket, key)} is not valid JSON") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise StorageError(f"{storage.uri(bucket, key)} is not result metadata of format {FORMAT}")
    return [ColumnInfo(**c) for c in data["columns"]]


def _load_legacy(
    storage: Storage, bucket: str, csv_key: str, metadata_key: str, execution_id: str
) -> Pages:
    """Pages of a result stored without them, from its CSV."""
    columns = _metadata(storage, bucket, metadata_key, execution_id)
    body: list[bytes] = []
    offsets, csv_offsets = array("q", [0]), array("q")  # only the old results: rows in Python
    with storage.open(bucket, csv_key) as stream:
        records = _records(stream)
        position = len(next(records, b""))  # past the header
        for record in records:
            csv_offsets.append(position)
            body.append(json_rows([_parse(record)]) + b",")
            offsets.append(offsets[-1] + len(body[-1]))
            position += len(record)
    csv_offsets.append(position)
    header = pages.header_json(columns)
    return Pages(columns, header, b"".join(body), memoryview(offsets), memoryview(csv_offsets))


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
