"""GetQueryResults pages rendered once, when a result is written, and served as bytes.

Each result row becomes its JSON in Athena's shape, ``{"Data":[{"VarCharValue":"…"},{}]}``
(``{}`` for NULL, ``""`` for the empty string), exactly as ``json.dumps`` writes it
with ASCII escapes, built column by column with Arrow compute. The rows of a
result are kept as one body, each row followed by a comma, with the byte offset of
every row; a page of any size is then one slice of the body. The CSV offset of
every row is kept too: it is part of the NextToken a page hands out.

Beside ``<id>.csv`` the rendered rows are stored as ``<id>.csv.pages``, so that
any server process can serve any result. The layout (integers little-endian)::

    MAGIC, rows, columns_len, header_len, body_len (4 x u64),
    columns (JSON of the ColumnInfo fields), header (the labels row's JSON),
    row offsets in the body (rows + 1 x i64), row offsets in the CSV (rows + 1 x i64), body

The offsets come before the body so that a page of a result too big to hold in
memory is read front to back, also from a stream that cannot seek.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakeward.errors import StorageError
from lakeward.query.model import ColumnInfo, flat_fields, json_rows

MAGIC = b"lakeward-pages 1\n"
_SIZES = struct.Struct("<4Q")
PRELUDE = len(MAGIC) + _SIZES.size
_ESCAPES = (
    ("\\", "\\\\"),
    ('"', '\\"'),
    ("\n", "\\n"),
    ("\r", "\\r"),
    ("\t", "\\t"),
    ("\b", "\\b"),
    ("\f", "\\f"),
)
_NEEDS_ESCAPE = r'[\\"\x00-\x1f]'
_ODD_CONTROL = r"[\x00-\x07\x0b\x0e-\x1f\x7f]"  # json.dumps writes these as \u00XX
_COMPACT = (",", ":")


def row_fragments(texts: list[pa.Array], plain: list[bool], num_rows: int) -> pa.Array:
    """Each row's JSON followed by a comma, from its columns' texts (null for NULL).

    ``plain`` says of each column whether its texts never need escaping (numbers,
    dates: see ``texts.is_plain``).
    """
    values = [t if simple else _json_string(t) for t, simple in zip(texts, plain, strict=True)]
    return joined_rows(values, ('{"VarCharValue":"', '"}'), "{}", ('{"Data":[', "]},"), num_rows)


def joined_rows(
    values: list[pa.Array],
    wrap: tuple[str, str],
    null: str,
    ends: tuple[str, str],
    num_rows: int,
) -> pa.Array:
    """Each row as ``ends[0]``, its values wrapped in ``wrap`` (``null`` for NULL) and
    separated by commas, then ``ends[1]``.

    One element-wise join builds every row: the literal text between two columns is
    one piece, and only a column holding NULLs is wrapped on its own first.
    """
    pieces: list[str | pa.Array] = [ends[0]]
    for index, value in enumerate(values):
        if index:
            pieces.append(",")
        if value.null_count:
            wrapped = pc.binary_join_element_wise(wrap[0], value, wrap[1], "")
            pieces.append(pc.fill_null(wrapped, null))
        else:
            pieces += [wrap[0], value, wrap[1]]
    pieces.append(ends[1])
    merged: list[str | pa.Array] = []
    for piece in pieces:
        if isinstance(piece, str) and merged and isinstance(merged[-1], str):
            merged[-1] += piece
        else:
            merged.append(piece)
    if len(merged) == 1:  # no column: every row is the same text
        return pa.array([merged[0]] * num_rows, pa.string())
    return pc.binary_join_element_wise(*merged, "")


def _json_string(texts: pa.Array) -> pa.Array:
    """Texts as the inside of JSON string literals, escaped as ``json.dumps`` escapes them."""
    data = _data_bytes(texts)
    # Most texts need no escape at all, which one pass over their bytes tells: a regex
    # per value costs ten times more. A byte of another value (a slice's) only means
    # the exact, slower steps below run for nothing.
    if data is None:
        needs_escape = pc.any(pc.match_substring_regex(texts, _NEEDS_ESCAPE)).as_py()
        ascii_letters_only = False
    else:
        control = data < 0x20
        needs_escape = bool((control | (data == 0x22) | (data == 0x5C)).any())
        ascii_letters_only = not (control | (data >= 0x7F)).any()
    escaped = texts
    if needs_escape:
        for char, escape in _ESCAPES:
            escaped = pc.replace_substring(escaped, char, escape)
    if ascii_letters_only:
        return escaped  # nothing for json.dumps to write as \uXXXX
    # Non-ASCII letters (\u00e9, surrogate pairs) and rare control characters: per value.
    slow = pc.invert(pc.string_is_ascii(texts))
    slow = pc.fill_null(pc.or_(slow, pc.match_substring_regex(texts, _ODD_CONTROL)), False)
    if pc.any(slow).as_py():
        values = pc.filter(texts, slow).to_pylist()
        replacements = pa.array([json.dumps(v)[1:-1] for v in values], pa.string())
        escaped = pc.replace_with_mask(escaped, slow, replacements)
    return escaped


def may_hold(texts: pa.Array, char: str) -> bool:
    """Whether a string array's values may hold ``char`` (ASCII): False is certain, True
    may come of the bytes of values around a slice."""
    data = _data_bytes(texts)
    return data is None or bool((data == ord(char)).any())


def _data_bytes(texts: pa.Array) -> np.ndarray[Any, np.dtype[np.uint8]] | None:
    """The bytes of a string array's values (of a slice, perhaps others' too); None if its
    layout is another (string views)."""
    if not (pa.types.is_string(texts.type) or pa.types.is_large_string(texts.type)):
        return None
    data = texts.buffers()[2]
    return np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)


def concatenated(values: pa.Array) -> tuple[memoryview, pa.Array]:
    """A string array's values as one buffer, and their n + 1 offsets in it (from 0)."""
    values = values.cast(pa.large_string())
    _, offsets_buffer, data_buffer = values.buffers()
    count = len(values) + 1
    offsets = pa.Array.from_buffers(pa.int64(), count, [None, offsets_buffer], offset=values.offset)
    start, end = offsets[0].as_py(), offsets[-1].as_py()
    data = memoryview(data_buffer)[start:end] if data_buffer is not None else memoryview(b"")
    return data, pc.subtract(offsets, start) if start else offsets


def int64s(parts: list[pa.Array], end: int) -> memoryview:
    """Offsets of several batches, shifted already, and the end: one i64 view."""
    joined = pa.concat_arrays([*parts, pa.array([end], pa.int64())])
    return memoryview(joined.buffers()[1]).cast("q")[joined.offset : joined.offset + len(joined)]


@dataclass
class Pages:
    """A result's rendered rows in memory; ``page`` slices them."""

    columns: list[ColumnInfo]
    header: bytes  # the labels row's JSON
    body: bytes | memoryview  # every row's JSON followed by a comma
    offsets: memoryview  # of each row in body, then the end: rows + 1 i64
    csv_offsets: memoryview  # of each row in the CSV, then the end: rows + 1 i64

    @property
    def rows(self) -> int:
        return len(self.offsets) - 1

    @property
    def size(self) -> int:
        return len(self.body) + 16 * len(self.offsets) + len(self.header)

    def slice(self, row: int, count: int) -> tuple[bytes, int]:
        """Rows ``row`` to ``row + count`` as comma-joined JSON, and the CSV offset after them."""
        end = self.offsets[row + count]
        rows = bytes(self.body[self.offsets[row] : end - 1]) if count else b""
        return rows, self.csv_offsets[row + count]

    def encode(self) -> bytes:
        return encode(self.columns, self.header, self.body, self.offsets, self.csv_offsets)


def header_json(columns: list[ColumnInfo]) -> bytes:
    return json_rows([[c.name for c in columns]])


def encode(
    columns: list[ColumnInfo],
    header: bytes,
    body: bytes | memoryview,
    offsets: memoryview,
    csv_offsets: memoryview,
) -> bytes:
    return index(columns, header, len(body), offsets, csv_offsets) + bytes(body)


def index(
    columns: list[ColumnInfo],
    header: bytes,
    body_len: int,
    offsets: memoryview,
    csv_offsets: memoryview,
) -> bytes:
    """Everything of a ``.pages`` object before its body."""
    described = json.dumps([flat_fields(c) for c in columns]).encode("utf-8")
    rows = len(offsets) - 1
    sizes = _SIZES.pack(rows, len(described), len(header), body_len)
    return b"".join([MAGIC, sizes, described, header, bytes(offsets), bytes(csv_offsets)])


def decode(data: bytes) -> Pages:
    """Pages from a stored ``.pages`` object, without copying its body."""
    rows, columns_len, header_len, body_len = _prelude(data[:PRELUDE])
    view = memoryview(data)
    position = PRELUDE
    columns = _columns(view[position : position + columns_len])
    position += columns_len
    header = bytes(view[position : position + header_len])
    position += header_len
    width = 8 * (rows + 1)
    if len(data) != position + 2 * width + body_len:
        raise StorageError("a stored result's pages are truncated")
    offsets = view[position : position + width].cast("q")
    csv_offsets = view[position + width : position + 2 * width].cast("q")
    body = view[position + 2 * width :]
    return Pages(columns, header, body, offsets, csv_offsets)


def _prelude(data: bytes) -> tuple[int, int, int, int]:
    if len(data) != PRELUDE or not data.startswith(MAGIC):
        raise StorageError("a stored result's pages are not in lakeward's page format")
    rows, columns_len, header_len, body_len = _SIZES.unpack(data[len(MAGIC) :])
    return rows, columns_len, header_len, body_len


def _columns(data: bytes | memoryview) -> list[ColumnInfo]:
    return [ColumnInfo(**c) for c in json.loads(bytes(data))]


class PagesReader:
    """Pages of a stored result too big to hold in memory, read by ranges of one stream."""

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream
        prelude = _read_exactly(stream, PRELUDE)
        self.rows, columns_len, header_len, body_len = _prelude(prelude)
        described = _read_exactly(stream, columns_len)
        self.columns = _columns(described)
        self.header = _read_exactly(stream, header_len)
        self._head = prelude + described + self.header
        self.size = body_len + 16 * (self.rows + 1) + header_len
        self._offsets = PRELUDE + columns_len + header_len
        self._csv_offsets = self._offsets + 8 * (self.rows + 1)
        self._body = self._csv_offsets + 8 * (self.rows + 1)
        self._position = self._offsets

    def whole(self) -> Pages:
        """All of the pages, read from where the stream is (just past the header)."""
        return decode(self._head + self.stream.read())

    def slice(self, row: int, count: int) -> tuple[bytes, int]:
        """Rows ``row`` to ``row + count`` as comma-joined JSON, and the CSV offset after them."""
        start = self._integer(self._offsets + 8 * row)
        end = self._integer(self._offsets + 8 * (row + count))
        csv_end = self._integer(self._csv_offsets + 8 * (row + count))
        rows = self._read(self._body + start, end - start - 1) if count else b""
        return rows, csv_end

    def _integer(self, position: int) -> int:
        value: int = struct.unpack("<q", self._read(position, 8))[0]
        return value

    def _read(self, position: int, length: int) -> bytes:
        # A page reads forward only (its offsets, then its body), so a stream that
        # cannot seek (S3) skips ahead instead.
        if self.stream.seekable():
            self.stream.seek(position)
        elif position >= self._position:
            _skip(self.stream, position - self._position)
        else:
            raise StorageError("a stored result's pages cannot be read backwards from this store")
        data = _read_exactly(self.stream, length)
        self._position = position + length
        return data


def _read_exactly(stream: BinaryIO, length: int) -> bytes:
    data = stream.read(length)
    if len(data) != length:
        raise StorageError("a stored result's pages are truncated")
    return data


def _skip(stream: BinaryIO, length: int) -> None:
    while length > 0:
        skipped = len(stream.read(min(length, 1024 * 1024)))
        if not skipped:
            raise StorageError("a stored result's pages are truncated")
        length -= skipped
