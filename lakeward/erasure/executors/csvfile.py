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
from collections.abc import Sequence

from lakeward.erasure.executors.base import CSV, Executor, Outcome, Target, gzipped
from lakeward.erasure.mappers import composite_id
from lakeward.errors import InputError, ObjectChangedSincePlan, ObjectNotFound


def split_records(
    text: str, user_ids: Sequence[str], columns: Sequence[str], uri: str
) -> tuple[str, list[str], list[int]]:
    """The header's text, the kept records' texts, and the 1-based numbers of the ids' records.

    Records are numbered as the index numbers them: after the header, blank lines excluded.
    The ``csv`` module reads the lines; ``line_num`` tells which lines each record
    took, so a record is kept as its original lines, untouched.
    """
    wanted = set(user_ids)
    # Split exactly as csv's own reading would (newline="" keeps \r\n and lone \r).
    lines = io.StringIO(text, newline="").readlines()
    reader = csv.reader(lines)
    header = next(reader, None)
    if header is None:
        return "", [], []
    header_end = reader.line_num
    names = [h.lstrip("\ufeff") if i == 0 else h for i, h in enumerate(header)]
    indexes = []
    for column in columns:
        name = column.removeprefix("$.")
        if name not in names:
            raise InputError(f"{uri}: the header has no column {name!r}")
        indexes.append(names.index(name))
    last = max(indexes)
    kept: list[str] = []
    removed: list[int] = []
    number = 0
    start = header_end
    for row in reader:
        end = reader.line_num
        if row:
            number += 1
            if len(row) > last and composite_id([row[i] for i in indexes]) in wanted:
                removed.append(number)
                start = end
                continue
        kept.extend(lines[start:end])
        start = end
    return "".join(lines[:header_end]), kept, removed


class CsvExecutor(Executor):
    layer = CSV

    def _text(self, target: Target, raw: bytes) -> str:
        try:
            data = gzip.decompress(raw) if gzipped(target, raw) else raw
        except (OSError, EOFError, zlib.error) as exc:
            raise ObjectChangedSincePlan(f"{target.uri} is not valid gzip: {exc}") from None
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
