"""Reading a table's files as its storage descriptor says (``formats.TableFormat``).

Parquet files are read by DuckDB itself (local tables) or through a pyarrow dataset
(tables on S3, and local tables whose partitions are not all in ``key=value``
directories under the table). ORC files are read through a pyarrow dataset too.

Text files are Hive's: one record per line (``\\n``, ``\\r\\n`` or ``\\r``), read after
decompressing by the file's extension, with ``skip.header.line.count`` and
``skip.footer.line.count`` lines dropped from each file. No library splits a line as
Hive's SerDes do (LazySimpleSerDe has no quotes but an escape that also protects
delimiters; a missing field is NULL and an extra one ignored; ``\\N`` is NULL before
unescaping), so lines are split here and the fields typed by DuckDB in the table's view:

* LazySimpleSerDe: a field that does not parse as the column's type is NULL;
* OpenCSVSerde (Python's ``csv`` splits the line): a field that does not parse fails the
  query naming the file, line and column, unless ``use.null.for.invalid.data`` is true;
* JSON (Hive's and OpenX's JsonSerDe): one object per line, keys matched to columns
  without regard to case; a line that is not a JSON object fails the query naming the
  file and line, or (OpenX with ``ignore.malformed.json`` true) reads as a row of NULLs.

Parquet and ORC files whose column types do not fit the table's fail the query naming
the file and the column, as Athena's HIVE_BAD_DATA does.
"""

from __future__ import annotations

import csv
import re
import threading
import zlib
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.fs as pafs

from lakeward.errors import QueryFailed
from lakeward.metastore.tables import Column
from lakeward.query.engines.duckdb.json_lines import (
    INTEGER_BITS,
    STRINGS,
    arrow_type,
    json_fields,
    type_text,
)
from lakeward.query.engines.text_layout import TextLayout
from lakeward.query.types import (
    HiveType,
    arrow_type_of_hive,
    duckdb_type_of_hive,
    parse_hive_type,
    quote_identifier,
)

if TYPE_CHECKING:
    from lakeward.query.engines.base import ResolvedTable
    from lakeward.query.engines.duckdb.scanned import DataFile

PARSED_BYTES = 256 * 1024 * 1024  # text files' rows kept between queries
FILE_COLUMN = "__lakeward_file"  # text tables: where each row came from, for errors
LINE_COLUMN = "__lakeward_line"

# Hadoop's codecs by file extension, as Hive picks them; pyarrow decompresses these.
_STREAM_CODECS = {".gz": "gzip", ".bz2": "bz2", ".zst": "zstd", ".zstd": "zstd"}
# Extensions of codecs that Hadoop knows but no reader here decodes: refused, not misread.
_REFUSED_CODECS = {".lzo": "LZO", ".lzo_deflate": "LZO", ".lz4": "LZ4", ".br": "Brotli"}
_LINE_BREAK = re.compile(r"\r\n|\n|\r")
_INTEGER = "'^[+-]?[0-9]+$'"
_COMPLEX = ("array", "map", "struct", "uniontype", "binary")


# -- reading text files ----------------------------------------------------------------------


def shown(filesystem: pafs.FileSystem, path: str) -> str:
    """A file as a user names it: its local path, or its s3:// URI."""
    return path if isinstance(filesystem, pafs.LocalFileSystem) else f"s3://{path}"


def read_bytes(filesystem: pafs.FileSystem, path: str) -> bytes:
    """A file's bytes, decompressed by its extension as Hadoop's codecs are chosen."""
    name_shown = shown(filesystem, path)
    name = path.rsplit("/", 1)[-1].lower()
    extension = "." + name.rsplit(".", 1)[-1] if "." in name else ""
    if extension in _REFUSED_CODECS:
        raise QueryFailed(
            f"cannot read {name_shown}: files compressed with {_REFUSED_CODECS[extension]} "
            f"({extension}) are not supported (gzip, bzip2, zstd, snappy and deflate are)"
        )
    try:
        if extension in _STREAM_CODECS:
            with filesystem.open_input_stream(path, compression=_STREAM_CODECS[extension]) as f:
                return bytes(f.read())
        with filesystem.open_input_stream(path, compression=None) as f:
            data = bytes(f.read())
        if extension == ".snappy":
            return _hadoop_snappy(data)
        if extension == ".deflate":
            return zlib.decompress(data)
        return data
    except (OSError, pa.ArrowException, zlib.error, ValueError) as exc:
        raise QueryFailed(f"cannot read {name_shown}: {exc}") from None


def _hadoop_snappy(data: bytes) -> bytes:
    """Hadoop's SnappyCodec stream: blocks of (raw length, then chunks of (length, snappy))."""
    out, pos = bytearray(), 0
    while pos < len(data):
        if pos + 4 > len(data):
            raise ValueError("truncated snappy block")
        block, pos = int.from_bytes(data[pos : pos + 4], "big"), pos + 4
        produced = 0
        while produced < block:
            size, pos = int.from_bytes(data[pos : pos + 4], "big"), pos + 4
            chunk, pos = data[pos : pos + size], pos + size
            if len(chunk) != size:
                raise ValueError("truncated snappy chunk")
            raw = pa.decompress(chunk, _varint(chunk), codec="snappy", asbytes=True)
            out += raw
            produced += len(raw)
    return bytes(out)


def _varint(chunk: bytes) -> int:
    """The uncompressed length a raw snappy chunk starts with."""
    value = shift = 0
    for byte in chunk[:5]:
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value
        shift += 7
    raise ValueError("bad snappy chunk header")


def _lines(filesystem: pafs.FileSystem, path: str, layout: TextLayout) -> Iterator[tuple[int, str]]:
    """(line number, text) of a file's records, headers and footers dropped."""
    text = read_bytes(filesystem, path).decode(layout.encoding, errors="replace")
    lines = _LINE_BREAK.split(text)
    if lines and lines[-1] == "":
        lines.pop()  # the break that ends the last line starts no new one
    end = len(lines) - layout.footer
    for number in range(layout.header, end):
        yield number + 1, lines[number]


class ParsedFiles:
    """Text files' rows as parsed, kept per file version (path, size, time written) and
    table layout, the least recently used dropped beyond ``max_bytes``: a raw zone queried
    again is not parsed again."""

    def __init__(self, max_bytes: int = PARSED_BYTES) -> None:
        self.max_bytes = max_bytes
        self._tables: OrderedDict[Hashable, pa.Table] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> pa.Table | None:
        with self._lock:
            found = self._tables.get(key)
            if found is not None:
                self._tables.move_to_end(key)
            return found

    def put(self, key: Hashable, rows: pa.Table) -> None:
        with self._lock:
            if key in self._tables or rows.nbytes > self.max_bytes:
                return
            self._tables[key] = rows
            self._bytes += rows.nbytes
            while self._bytes > self.max_bytes:
                _, dropped = self._tables.popitem(last=False)
                self._bytes -= dropped.nbytes


def read_text(
    filesystem: pafs.FileSystem,
    files: list[DataFile],
    table: ResolvedTable,
    layout: TextLayout,
    check: Callable[[], None],
    cache: ParsedFiles | None = None,
) -> pa.Table:
    """A text table's rows: its columns as text (JSON: typed), its partition keys, and
    the file and line each row came from."""
    columns = table.columns
    names = [c.name.lower() for c in columns]
    if layout.kind == "json":
        types = [parse_hive_type(c.type) for c in columns]
        arrow_types = [arrow_type(t) for t in types]
    else:
        types = [text_column_check(column, layout) for column in columns]
        arrow_types = [pa.string()] * len(columns)
    signature = (layout, tuple((c.name.lower(), c.type) for c in columns))
    keys = table.partition_keys
    schema = pa.schema(
        [
            *zip(names, arrow_types, strict=True),
            *((k.name.lower(), arrow_type_of_hive(k.type)) for k in keys),
            (FILE_COLUMN, pa.dictionary(pa.int32(), pa.string())),
            (LINE_COLUMN, pa.int64()),
        ]
    )
    parts = []
    for file in files:
        check()
        key = None if file.mtime_ns is None else (file.path, file.size, file.mtime_ns, signature)
        rows = None if cache is None or key is None else cache.get(key)
        if rows is None:
            rows = _read_file(filesystem, file.path, names, types, arrow_types, layout)
            if cache is not None and key is not None:
                cache.put(key, rows)
        count = rows.num_rows
        arrays = rows.columns[: len(names)]
        values = zip(keys, file.partition, strict=True)
        partition = [_partition_array(k, [v] * count) for k, v in values]
        parts.append(pa.table([*arrays, *partition, *rows.columns[len(names) :]], schema=schema))
    return pa.concat_tables(parts) if parts else schema.empty_table()


def _read_file(
    filesystem: pafs.FileSystem,
    path: str,
    names: list[str],
    types: list[HiveType],
    arrow_types: list[pa.DataType],
    layout: TextLayout,
) -> pa.Table:
    """One file's rows: its fields (text, or typed from JSON), and each row's line."""
    data: list[list[Any]] = [[] for _ in names]
    line_numbers: list[int] = []
    name = shown(filesystem, path)
    for number, line in _lines(filesystem, path, layout):
        if layout.kind == "json":
            fields = json_fields(line, names, types, layout, name, number)
        elif layout.kind == "csv":
            fields = _csv_fields(line, len(names), layout)
        else:
            fields = _text_fields(line, len(names), layout)
        for values, value in zip(data, fields, strict=True):
            values.append(value)
        line_numbers.append(number)
    arrays = [pa.array(v, type=t) for v, t in zip(data, arrow_types, strict=True)]
    origin = pa.DictionaryArray.from_arrays(
        pa.array([0] * len(line_numbers), pa.int32()), pa.array([name], pa.string())
    )
    return pa.Table.from_arrays(
        [*arrays, origin, pa.array(line_numbers, pa.int64())],
        names=[*names, FILE_COLUMN, LINE_COLUMN],
    )


def _partition_array(key: Column, values: list[str | None]) -> pa.Array:
    strings = pa.array(values, pa.string())
    shown = sorted({v for v in values if v is not None})
    try:
        return strings.cast(arrow_type_of_hive(key.type))
    except (pa.ArrowException, ValueError):
        raise QueryFailed(
            f"a value of partition key {key.name} is not a {key.type}: {shown!r}"
        ) from None


def _text_fields(line: str, count: int, layout: TextLayout) -> list[str | None]:
    """LazySimpleSerDe's fields: the first ``count`` (more are ignored, fewer are NULL)."""
    escape = layout.escape
    if escape is None or escape not in line:
        raw = line.split(layout.delimiter, count)[:count]
    else:
        raw, current, i = [], [], 0
        while i < len(line) and len(raw) < count:
            char = line[i]
            if char == escape and i + 1 < len(line):
                current.append(line[i : i + 2])
                i += 2
                continue
            if char == layout.delimiter:
                raw.append("".join(current))
                current = []
            else:
                current.append(char)
            i += 1
        if len(raw) < count:
            raw.append("".join(current))
    fields: list[str | None] = []
    for value in raw:
        if value == layout.null:  # compared before unescaping, as Hive does
            fields.append(None)
        elif escape is not None and escape in value:
            fields.append(_unescape(value, escape, layout.escape_crlf))
        else:
            fields.append(value)
    return fields + [None] * (count - len(fields))


def _unescape(value: str, escape: str, crlf: bool) -> str:
    def one(match: re.Match[str]) -> str:
        char = match.group(1)
        if crlf and char in "rn":
            return "\r" if char == "r" else "\n"
        return char

    return re.sub(re.escape(escape) + "(.)", one, value, flags=re.DOTALL)


def _csv_fields(line: str, count: int, layout: TextLayout) -> list[str | None]:
    """OpenCSVSerde's fields: quoted as opencsv quotes (a doubled quote is a quote)."""
    escape = None if layout.escape == layout.quote else layout.escape
    reader = csv.reader(
        [line],
        delimiter=layout.delimiter,
        quotechar=layout.quote,
        escapechar=escape,
        doublequote=True,
        strict=False,
    )
    fields: list[str | None] = []
    fields.extend(next(reader, [])[:count])
    return fields + [None] * (count - len(fields))


# -- typing text fields in the view ----------------------------------------------------------


def text_column_check(column: Column, layout: TextLayout) -> HiveType:
    """A text table's column type, refused when it cannot be read as Athena reads it."""
    try:
        hive = parse_hive_type(column.type)
    except ValueError:
        raise QueryFailed(f"column {column.name} has type {column.type}, not a Hive type") from None
    refused = None
    if hive.name == "uniontype":
        refused = f"{hive.name} columns are not read from text files here"
    elif hive.name == "binary" and layout.kind != "text":
        refused = "OpenCSVSerde reads binary columns as text: declare them string"
    elif hive.name in ("array", "struct", "map"):
        if layout.kind != "text":
            refused = "OpenCSVSerde reads primitive columns only"
        elif layout.escape is not None:
            refused = "collections are not read from text with escape.delim"
        elif any(arg.name in _COMPLEX for arg in hive.args):
            refused = "collections nested in collections are not read from text files here"
    if refused:
        raise QueryFailed(
            f"column {column.name} is {column.type}: {refused} (declare it string and parse it "
            "in the query)"
        )
    return hive


def text_view_column(column: Column, layout: TextLayout) -> str:
    """The SQL of a text column in its table's view: the field parsed as its declared type.

    Hive's LazySimpleSerDe makes a field that does not parse NULL; OpenCSVSerde fails,
    naming the file, the line and the column. An array's items and a struct's fields are
    split by collection.delim (one level, as LazySimpleSerDe splits them).
    """
    hive = text_column_check(column, layout)
    name = quote_identifier(column.name)
    raw = name
    if hive.name == "array":
        item = _item(hive.args[0], "item", layout)
        empty = f"CAST([] AS {duckdb_type_of_hive(hive)})"
        return (
            f"CASE WHEN {raw} = '' THEN {empty} ELSE list_transform(string_split({raw}, "
            f"{_sql_text(layout.collection)}), lambda item: {item}) END AS {name}"
        )
    if hive.name == "map":  # entries split by collection.delim, key from value by mapkey.delim
        key, value = (_item(a, f"split_part(entry, {_sql_text(layout.map_key)}, {i})", layout)
                      for i, a in enumerate(hive.args, start=1))  # fmt: skip
        empty = f"CAST(MAP() AS {duckdb_type_of_hive(hive)})"
        return (
            f"CASE WHEN {raw} = '' THEN {empty} ELSE map_from_entries(list_transform("
            f"string_split({raw}, {_sql_text(layout.collection)}), "
            f"lambda entry: {{'key': {key}, 'value': {value}}})) END AS {name}"
        )
    if hive.name == "struct":
        parts = f"string_split({raw}, {_sql_text(layout.collection)})"
        fields = ", ".join(
            f"{quote_identifier(f)} := {_item(a, f'{parts}[{i}]', layout)}"
            for i, (f, a) in enumerate(zip(hive.fields, hive.args, strict=True), start=1)
        )
        return f"CASE WHEN {raw} IS NOT NULL THEN struct_pack({fields}) END AS {name}"
    parsed = _parsed(hive, raw, column)
    if not layout.strict:
        return f"{parsed} AS {name}"
    message = (
        f"'HIVE_BAD_DATA: error parsing field value ''' || {raw} || ''' of column "
        f"{_literal_text(column.name)} ({_literal_text(column.type)}) in ' || "
        f"{FILE_COLUMN} || ' line ' || {LINE_COLUMN}::VARCHAR"
    )
    return (
        f"CASE WHEN {raw} IS NULL THEN NULL ELSE coalesce({parsed}, error({message})) END AS {name}"
    )


def _item(hive: HiveType, value: str, layout: TextLayout) -> str:
    """An array item or struct field: NULL when it is the null format, else parsed."""
    parsed = _parsed(hive, value, None)
    if layout.null is None:
        return parsed
    return f"CASE WHEN {value} = {_sql_text(layout.null)} THEN NULL ELSE {parsed} END"


def _parsed(hive: HiveType, raw: str, column: Column | None) -> str:
    """SQL parsing the text ``raw`` as a primitive Hive type: NULL where it does not parse."""
    if hive.name in STRINGS:
        if hive.name == "varchar" and hive.params:  # Hive cuts a varchar(n) to n characters
            return f"left({raw}, {hive.params[0]})"
        return raw
    if hive.name in INTEGER_BITS:
        target = {8: "TINYINT", 16: "SMALLINT", 32: "INTEGER", 64: "BIGINT"}[
            INTEGER_BITS[hive.name]
        ]
        return f"CASE WHEN regexp_matches({raw}, {_INTEGER}) THEN TRY_CAST({raw} AS {target}) END"
    if hive.name in ("double", "float"):
        return f"TRY_CAST({raw} AS {'DOUBLE' if hive.name == 'double' else 'FLOAT'})"
    if hive.name == "decimal":
        precision, scale = (list(hive.params) + [10, 0][len(hive.params) :])[:2]
        return f"TRY_CAST({raw} AS DECIMAL({precision},{scale}))"
    if hive.name == "boolean":
        return f"CASE lower({raw}) WHEN 'true' THEN true WHEN 'false' THEN false END"
    if hive.name == "date":
        return f"TRY_CAST({raw} AS DATE)"
    if hive.name == "binary":  # Hive's LazyBinary: base64 is decoded, other text kept as bytes
        return (
            f"CASE WHEN length({raw}) % 4 = 0 AND regexp_full_match({raw}, "
            f"'[A-Za-z0-9+/]*={{0,2}}') THEN from_base64({raw}) ELSE encode({raw}) END"
        )
    if hive.name in ("timestamp", "timestamp_ntz"):
        return f"TRY_CAST({raw} AS TIMESTAMP)"
    what = f"column {column.name}" if column else "an item"
    raise QueryFailed(f"{what} has type {type_text(hive)}, which text tables cannot hold")


def _sql_text(text: str) -> str:
    """A SQL string literal of any text (control characters as chr())."""
    pieces = [f"chr({ord(c)})" if ord(c) < 32 else "'" + c.replace("'", "''") + "'" for c in text]
    return " || ".join(pieces) if pieces else "''"


def _literal_text(text: str) -> str:
    """Text inside a SQL string literal already open."""
    return text.replace("'", "''")


# -- Parquet and ORC -------------------------------------------------------------------------


def file_format(kind: str) -> pads.FileFormat:
    return pads.OrcFileFormat() if kind == "orc" else pads.ParquetFileFormat()


def schema_of(file_format: pads.FileFormat, path: str, filesystem: pafs.FileSystem) -> pa.Schema:
    """A Parquet or ORC file's schema; a file that is not one fails naming it."""
    try:
        return file_format.inspect(path, filesystem)
    except (OSError, pa.ArrowException) as exc:
        raise QueryFailed(f"cannot read {shown(filesystem, path)}: {exc}") from None


def check_schema(path: str, schema: pa.Schema, columns: list[Column]) -> None:
    """Fail naming the file and the column when a file's column cannot be read as declared."""
    held = {f.name.lower(): f.type for f in schema}
    for column in columns:
        found = held.get(column.name.lower())
        if found is None:
            continue  # a column the file lacks reads as NULL
        try:
            hive = parse_hive_type(column.type)
        except ValueError:
            continue
        if not _fits(found, hive):
            raise QueryFailed(
                f"HIVE_BAD_DATA: column {column.name} is declared {column.type} in the table, "
                f"but file {path} holds it as {found}"
            )


def _fits(found: pa.DataType, hive: HiveType) -> bool:  # noqa: PLR0911 - one case per type
    if pa.types.is_dictionary(found):
        found = found.value_type
    if pa.types.is_null(found):
        return True
    name = hive.name
    if name in STRINGS:
        return bool(pa.types.is_string(found) or pa.types.is_large_string(found) or _binary(found))
    if name in INTEGER_BITS:
        if not pa.types.is_integer(found):
            return False
        signed = pa.types.is_signed_integer(found)
        return bool(found.bit_width <= INTEGER_BITS[name] - (0 if signed else 1))
    if name in ("double", "float", "decimal"):  # numbers read as numbers of another kind
        return bool(
            pa.types.is_floating(found) or pa.types.is_integer(found) or pa.types.is_decimal(found)
        )
    if name == "boolean":
        return bool(pa.types.is_boolean(found))
    if name == "date":
        return bool(pa.types.is_date(found))
    if name in ("timestamp", "timestamp_ntz"):
        return bool(pa.types.is_timestamp(found))
    if name == "binary":
        return _binary(found) or bool(pa.types.is_string(found))
    if name == "array":
        return bool(pa.types.is_list(found) or pa.types.is_large_list(found))
    if name == "map":
        return bool(pa.types.is_map(found))
    if name == "struct":
        return bool(pa.types.is_struct(found))
    return True


def _binary(found: pa.DataType) -> bool:
    return bool(
        pa.types.is_binary(found)
        or pa.types.is_large_binary(found)
        or pa.types.is_fixed_size_binary(found)
    )
