"""CSV: the object rewritten without the ids' records; every other record byte-identical.

Records are parsed with the ``csv`` module (quoted fields may span lines), but
what is written back is each kept record's original text, so quoting, line
endings and number formats of other users' records are untouched. Line
numbers of later records change, so the object is re-indexed afterwards.
"""

from __future__ import annotations

import csv
import gzip
import io
import zlib
from collections.abc import Iterator, Sequence

from lakeward.erasure.executors.base import (
    CSV,
    Executor,
    ObjectChanged,
    Outcome,
    Target,
    gzipped,
)
from lakeward.erasure.mappers import composite_id
from lakeward.errors import InputError, ObjectNotFound


def records(text: str) -> Iterator[tuple[list[str], str]]:
    """Each CSV record with its original text (including its line ending)."""
    consumed: list[str] = []

    def lines() -> Iterator[str]:
        for line in io.StringIO(text, newline=""):
            consumed.append(line)
            yield line

    for row in csv.reader(lines()):
        raw = "".join(consumed)
        consumed.clear()
        yield row, raw


def split_records(
    text: str, user_ids: Sequence[str], columns: Sequence[str], uri: str
) -> tuple[str, list[str], list[int]]:
    """The header's text, the kept records' texts, and the 1-based numbers of the ids' records.

    Records are numbered as the index numbers them: after the header, blank lines excluded.
    """
    wanted = set(user_ids)
    rows = records(text)
    try:
        header, header_raw = next(rows)
    except StopIteration:
        return "", [], []
    names = [h.lstrip("\ufeff") if i == 0 else h for i, h in enumerate(header)]
    indexes = []
    for column in columns:
        name = column.removeprefix("$.")
        if name not in names:
            raise InputError(f"{uri}: the header has no column {name!r}")
        indexes.append(names.index(name))
    kept: list[str] = []
    removed: list[int] = []
    number = 0
    for row, raw in rows:
        if row:
            number += 1
            if len(row) > max(indexes) and composite_id([row[i] for i in indexes]) in wanted:
                removed.append(number)
                continue
        kept.append(raw)
    return header_raw, kept, removed


class CsvExecutor(Executor):
    layer = CSV

    def _text(self, target: Target, raw: bytes) -> str:
        try:
            data = gzip.decompress(raw) if gzipped(target, raw) else raw
        except (OSError, EOFError, zlib.error) as exc:
            raise ObjectChanged(f"{target.uri} is not valid gzip: {exc}") from None
        # surrogateescape: bytes that are not UTF-8 come back out exactly as they went in.
        return data.decode("utf-8", "surrogateescape")

    def _bytes(self, target: Target, raw: bytes, text: str) -> bytes:
        data = text.encode("utf-8", "surrogateescape")
        return gzip.compress(data, mtime=0) if gzipped(target, raw) else data

    def purge(self, target: Target, user_ids: Sequence[str]) -> Outcome:
        try:
            raw = self.read(target)
        except ObjectNotFound:
            return Outcome(target.uri, self.layer, "missing", note="the object is gone")
        header, kept, removed = split_records(
            self._text(target, raw), user_ids, target.id_columns, target.uri
        )
        if not removed:
            return self.finish(target, raw, None, 0)  # nothing of the ids (purged before)
        new = self._bytes(target, raw, header + "".join(kept))
        return self.finish(target, raw, new, len(removed))

    def count(self, target: Target, user_ids: Sequence[str]) -> int:
        raw = self.current(target)
        if raw is None:
            return 0
        _, _, removed = split_records(
            self._text(target, raw), user_ids, target.id_columns, target.uri
        )
        return len(removed)
