"""Indexers: read one source and say which user ids it holds, and where.

Positions, exactly (the purge relies on them):

* JSON lines: the 1-based line number. Blank lines and ``{}`` placeholders (a
  purged record) are not records.
* CSV: the 1-based record number after the header row, counting records as
  Python's ``csv`` module reads them (a quoted field may span lines), blank
  lines excluded.
* Parquet: the 0-based row index in the file.
* File-name objects (``<user id>-<timestamp>.<ext>``): no positions; the whole
  object is the user's (the id is the file name up to its last ``-``).
* Sidecars (``<object>.meta.json``, ``{"user_ids": [...]}``): no positions;
  the described object is wholly the users'.
* Relational tables: no positions; the rows per id (``GROUP BY`` the column).

Ids are read with the mapper's ``id_columns``: a column name, or a JSON path
``$.a.b`` into nested objects (Parquet structs). Strings are taken as they are,
integers as their decimal text; anything else (missing, null, empty) counts
the record as one *without id*. Several columns make a composite id, joined
with ``COMPOSITE_SEPARATOR``.

``index_bytes`` is pure (bytes in, entries out), so that a batch job can run
it in its tasks; ``read_object`` adds the storage read and the eTag check.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import zlib
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from sqlalchemy import column, func, select, table
from sqlalchemy.exc import ArgumentError

from lakeward.erasure.index.store import IndexedObject, LocationEntry
from lakeward.erasure.mappers import (
    COMPOSITE_SEPARATOR,
    DATABASE_LAYER,
    SIDECAR_SUFFIX,
    DatasetMapper,
    RelationalMapper,
)
from lakeward.errors import InputError, ObjectKeptChanging, Unparseable
from lakeward.sqlstate import open_foreign_engine
from lakeward.storage import Storage

READ_ATTEMPTS = 3
"""Reads of an object that keeps changing under the indexer before it gives up."""


def id_path(spec: str) -> tuple[str, ...]:
    """``$.user.id`` -> ("user", "id"); a plain column name is a path of one."""
    if spec.startswith("$."):
        return tuple(spec[2:].split("."))
    if spec == "$":
        raise InputError("id column '$' names the whole record, not a field")
    return (spec,)


def id_text(value: object) -> str | None:
    """The id a value stands for, or None when it is no id."""
    if isinstance(value, str):
        return value or None
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


def _json_getter(specs: tuple[str, ...]) -> Callable[[Any], str | None]:
    paths = [id_path(s) for s in specs]

    def one(record: Any, path: tuple[str, ...]) -> str | None:
        for part in path:
            if not isinstance(record, dict):
                return None
            record = record.get(part)
        return id_text(record)

    if len(paths) == 1 and len(paths[0]) == 1:
        name = paths[0][0]
        return lambda record: id_text(record.get(name)) if isinstance(record, dict) else None

    def composite(record: Any) -> str | None:
        parts = [one(record, p) for p in paths]
        return None if None in parts else COMPOSITE_SEPARATOR.join(parts)  # type: ignore[arg-type]

    return composite


def decompressed(data: bytes, key: str, compression: str) -> bytes:
    """The object's bytes, gunzipped when the mapper (or, for auto, the data) says so."""
    gzipped = compression == "gzip" or (
        compression == "auto" and (key.endswith(".gz") or data[:2] == b"\x1f\x8b")
    )
    if not gzipped:
        return data
    try:
        return gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as exc:
        raise Unparseable(f"not valid gzip: {exc}") from None


def _jsonl(mapper: DatasetMapper, data: bytes, out: IndexedObject) -> None:
    # orjson parses a line several times faster than json. It is stricter, so
    # what it rejects is handed to json, which decides (and words the error):
    # json also reads NaN, a byte order mark and lone surrogates. And orjson
    # reads integers beyond 64 bits as floats, which are no ids: a record
    # without id is read again by json, so that such an id is found as before.
    get_id = _json_getter(mapper.id_columns)
    fast = orjson.loads
    entries = out.entries
    records = without_id = 0
    for number, line in enumerate(data.split(b"\n"), start=1):
        try:
            record = fast(line)
        except orjson.JSONDecodeError:
            if not line.strip():
                continue
            record = _strict_json(line, number)
        if record == {}:
            continue  # a purged record's placeholder
        records += 1
        user_id = get_id(record)
        if user_id is None:
            user_id = get_id(_strict_json(line, number))
        if user_id is None:
            without_id += 1
        else:
            entries.append((user_id, number))
    out.records += records
    out.records_without_id += without_id


def _strict_json(line: bytes, number: int) -> Any:
    try:
        return json.loads(line)
    except ValueError as exc:
        raise Unparseable(f"line {number}: not JSON ({exc})") from None


def csv_records(data: bytes) -> Iterator[tuple[int, dict[str, str]]]:
    """(record number, record) of a CSV object, numbered as the index numbers them."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise Unparseable(f"not UTF-8 text (byte {exc.start})") from None
    reader = csv.DictReader(io.StringIO(text, newline=""))
    number = 0
    try:
        for record in reader:
            number += 1
            yield number, record
    except csv.Error as exc:
        raise Unparseable(f"line {reader.line_num}: {exc}") from None


def _csv(mapper: DatasetMapper, data: bytes, out: IndexedObject) -> None:
    names = [s.removeprefix("$.") for s in mapper.id_columns]
    first = True
    for number, record in csv_records(data):
        if first:
            missing = [n for n in names if n not in record]
            if missing:
                raise Unparseable(f"the header has no column {missing[0]!r}")
            first = False
        out.records += 1
        parts = [record.get(n) or None for n in names]
        if None in parts:
            out.records_without_id += 1
        else:
            out.entries.append((COMPOSITE_SEPARATOR.join(parts), number))  # type: ignore[arg-type]


def _parquet_ids(column: pa.ChunkedArray | pa.Array) -> list[str | None]:
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        return [v or None for v in column.to_pylist()]
    if pa.types.is_integer(column.type):
        return [None if v is None else str(v) for v in column.to_pylist()]
    return [id_text(v) for v in column.to_pylist()]


def _parquet(mapper: DatasetMapper, data: bytes, out: IndexedObject) -> None:
    paths = [id_path(s) for s in mapper.id_columns]
    try:
        file = pq.ParquetFile(io.BytesIO(data))
        top = sorted({p[0] for p in paths})
        missing = [n for n in top if n not in file.schema_arrow.names]
        if missing:
            raise Unparseable(f"the file has no column {missing[0]!r}")
        tbl = file.read(columns=top)
    except (pa.ArrowException, OSError) as exc:
        raise Unparseable(f"not a readable Parquet file: {exc}") from None
    columns = []
    for path in paths:
        values: Any = tbl.column(path[0])
        try:
            for field in path[1:]:
                values = pc.struct_field(values, field)
        except (pa.ArrowException, KeyError, TypeError):
            raise Unparseable(f"no field {'.'.join(path)!r} in the file's schema") from None
        columns.append(_parquet_ids(values))
    out.records = tbl.num_rows
    for row, parts in enumerate(zip(*columns, strict=True)):
        if None in parts:
            out.records_without_id += 1
        else:
            out.entries.append((COMPOSITE_SEPARATOR.join(parts), row))


def filename_user(key: str) -> str | None:
    """The user id of a ``<user id>-<timestamp>.<ext>`` object, or None."""
    name = key.rpartition("/")[2]
    stem = name.split(".", 1)[0]
    user_id, dash, stamp = stem.rpartition("-")
    return user_id if dash and user_id and stamp else None


def sidecar_users(data: bytes) -> list[str]:
    try:
        document = json.loads(data)
    except ValueError as exc:
        raise Unparseable(f"not JSON ({exc})") from None
    ids = document.get("user_ids") if isinstance(document, dict) else document
    if not isinstance(ids, list):
        raise Unparseable('expected {"user_ids": [...]} naming the users of the object')
    users = [id_text(u) for u in ids]
    if None in users:
        raise Unparseable("user_ids must be non-empty strings or integers")
    return list(dict.fromkeys(u for u in users if u is not None))


_PARSERS: dict[str, Callable[[DatasetMapper, bytes, IndexedObject], None]] = {
    "jsonl": _jsonl,
    "csv": _csv,
    "parquet": _parquet,
}


def index_bytes(mapper: DatasetMapper, key: str, uri: str, etag: str | None,
                data: bytes) -> IndexedObject:  # fmt: skip
    """Index one object's content; raises ``Unparseable`` with the reason."""
    out = IndexedObject(uri=uri, dataset=mapper.name, etag=etag)
    if mapper.format == "filename":
        out.records = 1
        user_id = filename_user(key)
        if user_id is None:
            out.records_without_id = 1
        else:
            out.locations.append(LocationEntry(user_id, uri))
    elif mapper.format == "sidecar":
        described = uri.removesuffix(SIDECAR_SUFFIX)
        users = sidecar_users(data)
        out.records = 1
        out.locations.extend(LocationEntry(u, described) for u in users)
    else:
        _PARSERS[mapper.format](mapper, decompressed(data, key, mapper.compression), out)
    return out


def needs_content(mapper: DatasetMapper) -> bool:
    """Whether indexing reads the object (file-name objects are indexed by their key)."""
    return mapper.format != "filename"


def read_object(
    storage: Storage,
    mapper: DatasetMapper,
    bucket: str,
    key: str,
    listed_etag: str | None = None,
) -> IndexedObject:
    """Read and index one object of the lake, as it is now.

    The content read is checked against the object's eTag afterwards; when the
    object changed meanwhile it is read again (``ObjectKeptChanging`` after
    ``READ_ATTEMPTS``). ``listed_etag`` (from a listing just made) spares that
    second look on file:// lakes when the content read is the one listed.
    Raises ``Unparseable`` (with the reason) and ``ObjectNotFound``.
    """
    uri = storage.uri(bucket, key)
    for _attempt in range(READ_ATTEMPTS):
        if not needs_content(mapper):
            etag = listed_etag or storage.stat(bucket, key).etag
            return index_bytes(mapper, key, uri, etag, b"")
        if _multipart_store(storage):
            before = storage.stat(bucket, key)
            data = storage.get(bucket, key)
            after = storage.stat(bucket, key)
            if before.etag == after.etag and before.size == len(data):
                return index_bytes(mapper, key, uri, after.etag, data)
            continue
        data = storage.get(bucket, key)
        digest = hashlib.md5(data, usedforsecurity=False).hexdigest()
        if digest == listed_etag or digest == storage.stat(bucket, key).etag:
            return index_bytes(mapper, key, uri, digest, data)
    raise ObjectKeptChanging(f"{uri} changed while it was being indexed, {READ_ATTEMPTS} times")


def _multipart_store(storage: Storage) -> bool:
    # S3 eTags of multipart uploads are not the MD5 of the content; there the
    # check compares the eTag before and after the read instead.
    return not storage.etag_is_md5


def index_relational(mapper: RelationalMapper) -> IndexedObject:
    """The rows per user id of a relational layer (one ``GROUP BY`` query)."""
    schema_name, _, table_name = mapper.table.rpartition(".")
    source = table(table_name, column(mapper.column), schema=schema_name or None)
    id_column = source.c[mapper.column]
    out = IndexedObject(uri=mapper.location, dataset=mapper.name, etag=None)
    if "://" not in mapper.url:  # a bare path would be created as an empty SQLite file
        raise Unparseable(f"{mapper.name}: url must be a database URL, not {mapper.url!r}")
    try:
        engine = open_foreign_engine(mapper.url)
    except ArgumentError as exc:  # a malformed URL; a missing driver is a ConfigError
        raise Unparseable(f"cannot open the database of {mapper.name}: {exc}") from None
    try:
        with engine.connect() as conn:
            rows = conn.execute(select(id_column, func.count()).group_by(id_column)).all()
    except Exception as exc:  # the driver's error, whatever the database
        message = str(exc).splitlines()[0]
        raise Unparseable(f"cannot read {mapper.location}: {message}") from None
    finally:
        engine.dispose()
    for value, count in rows:
        out.records += count
        user_id = id_text(value)
        if user_id is None:
            out.records_without_id += count
        else:
            out.locations.append(LocationEntry(user_id, mapper.location, count, DATABASE_LAYER))
    return out
